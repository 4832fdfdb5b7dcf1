# Issue 36, a fourth held-out set of user-setting mistakes (step usermistakes4 of h200_steps.sh,
# run once as a whole on 2026-12-06, fifth session, tests/data/gpu/h100-2026-12-06d; read after it: a dev set now;
# sourced there; `bringup run --baseline "$USERBAD4_$E" --dry-run auto`). Written before the run
# from the engines' sources only (vLLM 0.24.0 and SGLang 0.5.16 as packed for the lent machines),
# never from bringup's search or knowledge. None of the settings is one of the first set (USERBAD
# and BAD of h200_vllm.sh / h200_sglang.sh), the second (usermistakes2.sh), the third
# (usermistakes3.sh) or the user corpus (usercorpus-h200.yaml). Three mistakes per engine, one
# setting each, none of whose errors spells its flag (neither --flag-name nor flag-name; config
# field names with underscores, the user's value or the component the setting selects do appear),
# each met in a later phase than the one before, so each hides the next: a person needs 4 launches
# (3 fixes + the working one). Only the first of each engine is caught by the engine's own argument
# and config checks (the dry run); the other two pass them and need a launch. Each is fixed by
# dropping its flag. Without the three, each engine's own defaults serve the 8 B model
# (docs/gpu-h200.md). The model as make_random_llama.py writes it: LlamaForCausalLM, bf16, 37 layers
# of Llama-3-8B's shape (8 KV heads of 128), max_position_embeddings 8192 (vLLM's log on the H100:
# "Using max model len 8192", "Available KV cache memory: 51.11 GiB", "GPU KV cache size: 362,112
# tokens"), the test tokenizer (byte-level BPE, 512 tokens), a chat template. One GPU (device 0
# only). "ran": the piece was checked by running the engine's own code here: Python 3.12 with the
# packed site (/tmp/gw/vsite or /tmp/gw/ssite) on the path, a torch wheel with no GPU, torch.cuda
# faked as one H100 (80 GB, SM90) and the GPU-only extensions stubbed, a copy of the model's
# config.json and tokenizer (no weights); vLLM's arg parser, validate_parsed_serve_args,
# validate_api_server_args and EngineArgs.create_engine_config (the model class inspection stubbed);
# SGLang's prepare_server_args + check_server_args; click (which uvicorn imports; the base image has
# it) from PyPI into a scratch folder. "read": traced in source only.

# vLLM 0.24.0 (`vllm serve /tmp/m8b ...`, HF_HUB_OFFLINE=1):
# - `--decode-context-parallel-size 8`: the long-context line of an 8-GPU box (vLLM's
#   context-parallel recipe, `-tp 8 -dcp 8`, for 128K prompts: decode context parallelism reuses the
#   TP group, each rank keeping 1/8 of the KV); `-tp 8` went when the launch moved to the one-GPU
#   box, the DCP size stayed. The API server's checks pass (cli/serve.py:151
#   validate_parsed_serve_args, api_server.py:520 setup_server; its "non-default args" line shows
#   'decode_context_parallel_size': 8); then config building, before any process starts:
#   api_server.py:123 create_engine_config -> engine/arg_utils.py:2044 ParallelConfig(...) ->
#   config/parallel.py:441 _validate_parallel_config -> :504:
#   "pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig / Value
#   error, tp_size=1 must be divisible bydcp_size=8. [type=value_error, input_value=ArgsKwargs((),
#   {'pipeline...'numa_bind_cpus': None}), ...]" (the input repr is cut, the field name is not in
#   it) [config object and value: ParallelConfig, dcp_size=8]. Raising the TP size to 8 is no way
#   out on one GPU (world size 8 > 1 GPU); dropping the DCP size is. Phase: argument parsing and
#   config checks (create_engine_config: the dry run refuses it). Ran (create_engine_config with all
#   three settings raises exactly this; without this one the config builds,
#   num_gpu_blocks_override=256 kept, block_size 16).
# - `--num-gpu-blocks-override 256`: a KV pool pinned on the regression box that served a 4K-context
#   Llama-2-7B (256 blocks of 16 tokens = 4,096 tokens, one full-length sequence, so that the
#   queueing/preemption load tests behave the same on every card; vLLM's own tests shrink the pool
#   this way), kept for this 8K-context checkpoint. Accepted by the config (config/cache.py:86, an
#   int, never checked against max_model_len there). The engine core loads the model and runs the
#   profiling/compile pass, then v1/engine/core.py:133 _initialize_kv_caches -> :283
#   determine_available_memory ("Available KV cache memory: ... GiB") -> :294 get_kv_cache_configs
#   -> v1/core/kv_cache_utils.py:2084 logs "Overriding num_gpu_blocks=22632 with
#   num_gpu_blocks_override=256" and sizes the pool from the override -> :2101
#   _check_enough_kv_cache_memory -> :760: "ValueError: To serve at least one request with the
#   model's max seq len (8192), (1.16 GiB KV cache is needed, which is larger than the available KV
#   cache memory (0.58 GiB). Based on the available memory, the estimated maximum model length is
#   4096. Try increasing `gpu_memory_utilization` (...) or decreasing `max_model_len` when
#   initializing the engine. ..." -> "EngineCore failed to start" / "Engine core initialization
#   failed" [field: num_gpu_blocks_override, with its value, on the log line just before; the error
#   itself names only other knobs: a higher gpu_memory_utilization changes nothing (the override
#   wins), a max_model_len of 4096 would hide it]. Phase: KV-cache sizing (after model loading and
#   the profiling run, before the KV allocation and CUDA graph capture). Config part ran; the sizing
#   ran (get_kv_cache_configs on the built config with 37 full-attention layer specs of 8 KV heads x
#   128, bf16, and the H100 log's 51.11 GiB: 22632 blocks without the override, as on the H100, this
#   error with it); the engine-core path read.
# - `--ssl-certfile /etc/ssl/private/vllm.pem`: the TLS setting of the production box, where vLLM
#   terminates HTTPS itself from one combined cert+key PEM (Python's ssl load_cert_chain, which
#   uvicorn calls, takes the key from the cert file when no key file is given) that the secrets
#   agent there provisions; absent on this box. No check looks at the file: config and API-server
#   checks pass (api_server.py:551 only turns the listen address to https when a key file is given
#   as well, so the log still says "Starting vLLM server on http://..."). The engine core loads the
#   model, profiles, allocates the KV cache, captures the CUDA graphs ("init engine (profile, create
#   kv cache, warmup model) took ..."); then api_server.py:677 (engine client up) -> :681
#   build_and_serve -> build_app, init_app_state, "Starting vLLM server on http://...", -> :583
#   serve_http(..., ssl_certfile=... :595) -> entrypoints/launcher.py:71 uvicorn.Config -> :75
#   config.load() (after the "Available routes are:" list) -> uvicorn/config.py:446-448 (is_ssl)
#   create_ssl_context -> :116 ctx.load_cert_chain(certfile, keyfile, get_password):
#   "FileNotFoundError: [Errno 2] No such file or directory" (Python's ssl names no file) -> the
#   engine client context exits, the engine shuts down and `vllm serve` exits [component: uvicorn's
#   create_ssl_context / load_cert_chain in the traceback; field and value only on the "non-default
#   args" line at start, 'ssl_certfile': '/etc/ssl/private/vllm.pem']. Phase: HTTP server start,
#   after the engine is fully up (weights, KV cache, CUDA graphs) and before anything is served.
#   Config and API-server checks ran; uvicorn.Config(...).load() with the kwargs serve_http passes
#   (uvicorn 0.49.0 from the vLLM site) ran and raises exactly this; the order after engine init
#   read.
USERBAD4_vllm="--decode-context-parallel-size 8 --num-gpu-blocks-override 256 --ssl-certfile /etc/ssl/private/vllm.pem"

# SGLang 0.5.16 (`python -m sglang.launch_server --model-path /tmp/m8b ...`):
# - `--enable-eplb`: the expert-parallel load balancer of the DeepSeek-V3 box's large-scale EP
#   recipe (`--enable-eplb` with `--ep-num-redundant-experts`, DeepEP, DP attention on 8+ GPUs),
#   kept in the launch template when it was reused for a dense 8 B model on one GPU. Argument
#   checks, prepare_server_args -> ServerArgs.__post_init__, before check_server_args and before any
#   process: launch_server.py:68 prepare_server_args -> server_args.py:8224 -> :7348 from_cli_args
#   -> __post_init__ :3020 _handle_eplb_and_dispatch -> :5915 warns "EPLB is enabled. The
#   expert_distribution_recorder_mode is automatically set." -> :5925 `assert
#   self._resolved().ep_size > 1`: a bare "AssertionError" with no message (EP size is the TP size,
#   1) [component: EPLB in the warning just before and in the failing function's name; the source
#   line shows only ep_size]. Raising the EP size is no way out on one GPU; dropping the balancer
#   is. Phase: argument parsing and config checks (the dry run refuses it). Ran (all three settings:
#   this error; the other two alone and together pass prepare_server_args and check_server_args).
# - `--base-gpu-id 4`: the second instance of a shared 8-GPU node, which ran two 4-GPU servers side
#   by side (SGLang's help for this option: "Useful when running multiple instances on the same
#   machine"), kept on a box with one GPU. Accepted by the checks (check_server_args only asserts it
#   is non-negative, server_args.py:7605; "base_gpu_id=4" on the server_args line at start). The
#   launcher computes the scheduler's device, entrypoints/engine.py:629-633 gpu_id = base_gpu_id + 0
#   = 4, and starts the scheduler process (:658); scheduler.py:4623 Scheduler(...) -> :431
#   init_model_worker -> :771 TpModelWorker -> tp_worker.py:424 ModelRunner -> model_runner.py:323
#   init_torch_distributed -> :883 -> distributed/bootstrap.py:62 "Init torch distributed begin." ->
#   :65 torch.cuda.set_device(4): "RuntimeError: CUDA error: invalid device ordinal" (torch's CUDA
#   check, with its usual CUDA_LAUNCH_BLOCKING hint), logged after bootstrap.py:67-69's warning
#   "Context: device='cuda' ps.gpu_id=4 os.environ.get('CUDA_VISIBLE_DEVICES')=... ps.tp_rank=0
#   ps.tp_size=1", in "Scheduler hit an exception" (managers/scheduler.py:4643); the server exits
#   (on a NUMA host with numactl the launcher may first warn "NVML error querying memory affinity
#   for GPU 4", utils/numa_utils.py:421, and go on) [value: gpu_id=4 on the context line; field:
#   base_gpu_id=4 on the server_args line]. Phase: scheduler start, before the weights are loaded.
#   prepare_server_args and check_server_args ran (gpu_id 4 computed from the parsed args with
#   engine.py's formula); the set_device failure read.
# - `--max-queued-requests 0`: load shedding from the fleet behind a retrying router ("no queue:
#   reject when busy and let the router try another replica"), where the nodes were PD-disaggregated
#   decode servers and SGLang ignores this option ("This option is ignored when using
#   disaggregation-mode"); on a plain server it is a queue limit, and 0 admits nothing. Accepted by
#   argument parsing and check_server_args. The scheduler loads the model, allocates the KV pool and
#   captures the CUDA graphs; the HTTP server starts; its own warmup, POST /generate "The capital
#   city of France is" with 8 new tokens (entrypoints/http_server.py:2223), reaches the scheduler:
#   managers/scheduler.py:2072 handle_generate_request -> :2353 _add_request_to_queue -> :2395
#   _abort_on_queued_limit (:2443-2444: len(waiting_queue) + 1 <= 0 is false) -> AbortReq 503 "The
#   request queue is full." -> managers/tokenizer_manager.py:1459-1477 fastapi.HTTPException(503) ->
#   http_server.py:494 JSON {"object": "error", "message": "The request queue is full.", "type":
#   "503", "code": 503} -> the warmup's `assert res.status_code == 200` (:2230) -> "Initialization
#   failed. warmup error: ... AssertionError: {...The request queue is full...}" (:2262) and
#   kill_process_tree: the server exits (were the warmup skipped, every request, /health_generate or
#   a probe, would get the same 503) [field: max_queued_requests=0 on the server_args line at start;
#   the error names only the queue]. Phase: first request (the server's own warmup), after CUDA
#   graph capture and HTTP start. prepare_server_args and check_server_args ran;
#   Scheduler._abort_on_queued_limit called with the parsed value and an empty waiting queue ran
#   (aborts the request: 503, "The request queue is full."); the HTTP and warmup path read.
USERBAD4_sglang="--enable-eplb --base-gpu-id 4 --max-queued-requests 0"
