# Issue 36, an eighth held-out set of user-setting mistakes (to be sourced like usermistakes7.sh;
# `bringup run --baseline "$USERBAD8_$E" --dry-run auto`), written 2026-12-07. Written before any
# run from the engines' sources and public issues only (vLLM 0.24.0 and SGLang 0.5.16 as packed for
# the lent machines), never from bringup's search or knowledge. None of the settings is one of the
# first set (USERBAD and BAD of h200_vllm.sh / h200_sglang.sh), the second (usermistakes2.sh), the
# third (usermistakes3.sh), the fourth (usermistakes4.sh), the fifth (usermistakes5.sh), the sixth
# (usermistakes6.sh), the seventh (usermistakes7.sh) or the user corpora (usercorpus-h200.yaml,
# usercorpus2-h200.yaml), nor a close sibling of one. Three mistakes per engine, one setting each
# (one of the three an environment variable, written `NAME=VALUE` first in the baseline, as
# usercorpus-h200.yaml writes a case's environment), none of whose errors spells its flag or
# variable (neither --flag-name nor flag-name nor the variable's name; config field names with
# underscores, the user's value or the component the setting selects do appear), each met in a
# later phase than the one before, so each hides the next: a person needs 4 launches (3 fixes + the
# working one). Only the first of each engine is caught by the engine's own argument and config
# checks (the dry run: vLLM's arg parser, validate_parsed_serve_args, validate_api_server_args and
# EngineArgs.create_engine_config; SGLang's prepare_server_args + ServerArgs.check_server_args); the
# other two pass them and need a launch. Each is fixed by dropping its setting (the engine's
# default again). Without the three, each engine's own defaults serve the 8 B model
# (docs/gpu-h200.md). The model as make_random_llama.py writes it: LlamaForCausalLM, bf16, 37 layers
# of Llama-3-8B's shape (8 KV heads of 128), max_position_embeddings 8192, the test tokenizer
# (byte-level BPE, 512 tokens, PreTrainedTokenizerFast), a chat template. One GPU (device 0 only).
# Kinds chosen to differ from the seven sets before: a platform package missing for the device the
# value names, a stdlib error with no setting in it, a gloo transport error quoting only the
# interface, a 400 whose message is a Python range() error, a KV-pool error that points at another
# flag.
# "ran": the piece was checked by running the engine's own code here: Python 3.12 with the packed
# site (/tmp/gw/vsite or /tmp/gw/ssite) first on the path, torch 2.11.0 (the cu130 wheel, no GPU)
# and, for vLLM, transformers 5.17.0 (the image's), torch.cuda and NVML faked as one H100 (80 GB,
# SM90), the GPU-only extensions stubbed (vllm._C_stable_libtorch and the other vllm .so,
# sgl_kernel's common_ops), vLLM's model class inspection stubbed, and a copy of the model's
# config.json and tokenizer as make_random_llama.py writes them (no weights). "read": traced in
# source only. Where a piece says "ran", what follows a launch phase that cannot run here
# (engine-core or scheduler start on the GPU, weights, KV cache, CUDA graphs, the HTTP server) is
# read.

# vLLM 0.24.0 (`vllm serve /tmp/m8b ...`, HF_HUB_OFFLINE=1):
# - `--ray-workers-use-nsight`: from the profiling launch of the team's multi-GPU Ray deployment
#   (vLLM's nsight support for Ray workers, vllm-project/vllm#3162 and #4095: `... -tp 2
#   --ray-workers-use-nsight`; vllm-project/vllm#7830 "vLLM with ray backend and enable nsight";
#   the field's doc, config/parallel.py:231-232, points at Ray's nsight profiling guide); the
#   template was reused for the one-GPU box, where the Ray executor flag and -tp went and the nsight
#   switch stayed. Parsed (engine/arg_utils.py:1129, a ParallelConfig bool), the API server's checks
#   pass (cli/serve.py:151 validate_parsed_serve_args, api_server.py:520 setup_server -> :532
#   validate_api_server_args; its "non-default args" line shows 'ray_workers_use_nsight': True);
#   then config building, before any process starts: api_server.py:123 create_engine_config ->
#   engine/arg_utils.py:2044 ParallelConfig(... :2077 ray_workers_use_nsight=...) ->
#   config/parallel.py:958 _verify_args -> :996-999 (world size 1, so the executor is "uni" and
#   use_ray is False):
#   "pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig / Value
#   error, Unable to use nsight profiling unless workers run with Ray. [type=value_error,
#   input_value=ArgsKwargs((), {'pipeline...'numa_bind_cpus': None}), input_type=ArgsKwargs]"
#   [component: nsight profiling and Ray, what the switch selects; the input repr is cut before the
#   field; the tempting move is the Ray executor backend (Ray is not in the packed site, and one GPU
#   needs none), dropping the switch is the fix]. Phase: argument parsing and config checks
#   (create_engine_config: the dry run refuses it). Ran (create_engine_config with all three
#   settings raises exactly this, from arg_utils.py:2044; without this one the config builds: max
#   model len 8192, chunked prefill 8192, async scheduling).
# - `--renderer-num-workers 0`: the old launch script's `--tokenizer-pool-size 0` ("0 = synchronous
#   tokenization", the old flag's default: vllm-project/vllm#2879, #3449, #16140), carried over to
#   the renamed tokenizer/renderer pool of the new vLLM (ModelConfig.renderer_num_workers,
#   config/model.py:315, default 1; vllm-project/vllm#42901, #42905) with the same 0. An int with
#   no lower bound: the parser, the API server's checks and create_engine_config accept it. The API
#   server then builds the engine client: api_server.py:123 -> AsyncLLM.from_vllm_config ->
#   v1/engine/async_llm.py:132 renderer_from_config (before :146 starts the engine-core client, so
#   before any engine process, weight or GPU work) -> renderers/registry.py:86 -> :68 ->
#   renderers/hf.py:870 -> renderers/base.py:85-86 ThreadPoolExecutor(max_workers=pool_workers):
#   "ValueError: max_workers must be greater than 0" (Python's concurrent.futures; `vllm serve`
#   exits) [names nothing of the setting; the field and value only on the "non-default args" line,
#   'renderer_num_workers': 0]. Phase: API-server start, building the renderer (tokenizer pool),
#   after the config and the tokenizer load, before the engine core exists. Ran
#   (AsyncLLM.from_vllm_config on the config built with the other settings but the first raises
#   exactly this from renderers/base.py:86; the config builds with it).
# - `VLLM_V1_OUTPUT_PROC_CHUNK_SIZE=0` (environment): from the .env of the team's offline batch box,
#   where output-processing chunking was "turned off" with 0 after vllm-project/vllm#12287 (njhill:
#   "If I disable the chunking completely, the throughput increases ..."; envs.py:1292-1301
#   "Controls the maximum number of requests to handle in a single asyncio task when processing
#   per-token outputs in the V1 AsyncLLM interface"); that box ran the offline `LLM`
#   API, whose engine never reads it (only v1/engine/async_llm.py:654 does), so it did no harm
#   there; the .env came along to the serving box. Nothing reads it while parsing, building the
#   config, loading, sizing the KV cache or capturing graphs: the server starts, /health answers.
#   The first request, the tool's probe (POST /v1/chat/completions or /v1/completions), gets its
#   first engine output: async_llm.py:671 `for start in range(0, num_outputs, chunk_size)` in the
#   output handler: "ERROR ... AsyncLLM output_handler failed." (:704) with "ValueError: range() arg
#   3 must not be zero"; output_processor.py:446-448 puts the error into the request's queue
#   (:85 raises it), generate() passes it on as a request error (async_llm.py:605) and the API maps
#   ValueError to 400 (entrypoints/serve/utils/error_response.py:40-43): {"error": {"message":
#   "range() arg 3 must not be zero", "type": "BadRequestError", "code": 400}}; the engine client is
#   now errored (the handler task is done), so the next request gets EngineDeadError (500
#   "EngineCore encountered an issue. See stack trace (above) for the root cause.",
#   async_llm.py:300-301) and the server shuts down (launcher.py:176-178) [names nothing of the
#   variable; the failing source line shows only chunk_size]. Phase: first request (the server
#   starts, loads, captures and is healthy). Ran (AsyncLLM.from_vllm_config on the config built
#   with it, with a fake engine-core client that answers one token: generate() raises exactly this
#   ValueError from async_llm.py:671, create_error_response maps it to 400 BadRequestError with
#   that message, llm.errored is then True; with the variable unset the same harness yields the
#   token); the HTTP routes and the shutdown read.
USERBAD8_vllm="VLLM_V1_OUTPUT_PROC_CHUNK_SIZE=0 --ray-workers-use-nsight --renderer-num-workers 0"

# SGLang 0.5.16 (`python -m sglang.launch_server --model-path /tmp/m8b ...`):
# - `--device npu`: the launch template of the team's Ascend 910B box (SGLang's Ascend NPU support:
#   sgl-project/sglang#3853 `--device npu --grammar-backend outlines --attention-backend
#   torch_native`, #17883 `--device npu --attention-backend ascend`, Ascend/sglang#136), reused for
#   the H100 box with the Ascend attention backend dropped and the device kept. Parsed (a free
#   string, server_args.py:1018 "The device to use ('cuda', 'xpu', 'hpu', 'npu', 'cpu', 'musa')"),
#   then prepare_server_args, before check_server_args and before any process:
#   launch_server.py -> server_args.py:8224 prepare_server_args -> :7348 from_cli_args ->
#   __post_init__ :2955 _handle_npu_backends -> :3507 -> hardware_backend/npu/utils.py:55
#   set_default_server_args -> utils/common.py:706 `import torch_npu` ("ModuleNotFoundError: No
#   module named 'torch_npu'") -> :713:
#   "ImportError: torch_npu is required when run on npu device." [value: npu, the device the
#   setting selects, and its platform package; installing torch_npu is the tempting move (it needs
#   Ascend hardware), dropping the device (auto-detection finds CUDA) is the fix]. Phase: argument
#   parsing and config checks (prepare_server_args: the dry run refuses it). Ran (all three
#   settings: this error, from common.py:713; the other two alone and together pass
#   prepare_server_args and check_server_args, fa3 chosen as without them).
# - `GLOO_SOCKET_IFNAME=bond0` (environment): from the .env of the two-node cluster where SGLang ran
#   one model over tp 16 and gloo had to be pinned to the bonded NIC (sgl-project/sglang#3794:
#   "export GLOO_SOCKET_IFNAME=bond0 export TP_SOCKET_IFNAME=bond0 export NCCL_SOCKET_IFNAME=bond0";
#   #3514, #3226 "Set Env GLOO_SOCKET_IFNAME works for me"; torch's variable, pytorch/pytorch#14065);
#   the export stayed in the user's profile, this one-GPU box has no bond0. Read by torch only when
#   a gloo process group is made (SGLang never reads it), so prepare_server_args and
#   check_server_args pass. The launcher starts the scheduler; scheduler.py:431 init_model_worker
#   -> TpModelWorker -> ModelRunner -> model_runner.py:323 init_torch_distributed ->
#   distributed/bootstrap.py:62 "Init torch distributed begin." -> init_distributed_environment
#   (distributed/parallel_state.py:2062 init_process_group, the world group on nccl, lazily) ->
#   :2090-2095 init_world_group -> GroupCoordinator :365-368 torch.distributed.new_group(ranks,
#   backend="gloo") -> ProcessGroupGloo:
#   "RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/device.cc:84] ifa
#   != nullptr. Unable to find address for: bond0", in "Scheduler hit an exception"; the server
#   exits [value: the interface name; the variable's name appears nowhere]. Phase: scheduler start
#   (process group), before the weights are read (so before the KV pool and CUDA graphs). Ran
#   (with it set, torch 2.11.0's new_group(backend="gloo") after a gloo world raises exactly this,
#   and SGLang's parallel_state.init_distributed_environment with a gloo world raises it from the
#   world group's creation; without it the same call gets past the process groups; the config
#   passes with it set); the nccl-world path on the GPU and the scheduler around it read.
# - `--max-total-tokens 0`: from the team's launch template, which renders every capacity knob and
#   uses 0 for "let the engine size it" (SGLang's own help, server_args.py:701-712: "If not
#   specified, it will be automatically calculated based on the memory usage fraction";
#   Ascend/sglang#136 pins `--max-total-tokens
#   80000` in the same template style); on the GPU box the value was left at 0. Accepted by
#   prepare_server_args and check_server_args (max_total_tokens=0 on the server_args line; it also
#   caps the prefill CUDA graph's max_bs to 0, server_args.py:4026-4030, which nothing checks). The
#   scheduler loads the weights, then sizes the KV pool before any CUDA graph: scheduler.py:845
#   init_model_worker (:847 init_tp_model_worker, then :851 init_memory_pools, :854 the CUDA
#   graphs) -> model_executor/model_runner.py:733-734
#   alloc_memory_pool -> mem_cache/kv_cache_configurator.py:219 configure -> :1669-1670
#   config_from_budget -> :1694 _apply_token_constraints (:1599-1607, the user cap: min(profiled,
#   0) = 0, no warning since 0 is not larger) -> :1698 -> model_executor/pool_configurator.py:294-298
#   DefaultPoolConfigurator.calculate_pool_sizes_from_max_tokens -> MemoryPoolConfig.__post_init__
#   :62-67:
#   "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", in "Scheduler
#   hit an exception"; the server exits [the message names only another flag: raising the memory
#   fraction is the tempting move and changes nothing, the cap wins; field and value on the
#   server_args line at start]. Phase: KV-pool sizing in the scheduler, after the weights, before
#   the attention backends, the CUDA graphs, the HTTP server and its warmup. Ran
#   (prepare_server_args and check_server_args pass with it, max_total_tokens=0, page_size 1;
#   KVCacheConfigurator._apply_token_constraints on those args turns the profiled 362,112 tokens
#   into 0 and DefaultPoolConfigurator.calculate_pool_sizes_from_max_tokens raises exactly this);
#   the scheduler order read.
USERBAD8_sglang="GLOO_SOCKET_IFNAME=bond0 --device npu --max-total-tokens 0"
