# Issue 36, a fifth held-out set of user-setting mistakes (step usermistakes5 of h200_steps.sh,
# sourced there; `bringup run --baseline "$USERBAD5_$E" --dry-run auto`), run once as a whole on
# 2026-12-06, sixth session, tests/data/gpu/h200-2026-12-06e; read after it: a dev set now. Written before the run from the engines' sources only (vLLM 0.24.0 and SGLang
# 0.5.16 as packed for the lent machines), never from bringup's search or knowledge. None of the
# settings is one of the first set (USERBAD and BAD of h200_vllm.sh / h200_sglang.sh), the second
# (usermistakes2.sh), the third (usermistakes3.sh), the fourth (usermistakes4.sh) or the user
# corpus (usercorpus-h200.yaml), nor a close sibling of one. Three mistakes per engine, one setting
# each (one of the three an environment variable, written `NAME=VALUE` first in the baseline, as
# usercorpus-h200.yaml writes a case's environment), none of whose errors spells its flag or
# variable (neither --flag-name nor flag-name; config field names with underscores, the user's
# value or the component the setting selects do appear), each met in a later phase than the one
# before, so each hides the next: a person needs 4 launches (3 fixes + the working one). Only the
# first of each engine is caught by the engine's own argument and config checks (the dry run); the
# other two pass them and need a launch. Each is fixed by dropping its setting (the engine's default
# again). Without the three, each engine's own defaults serve the 8 B model (docs/gpu-h200.md). The
# model as make_random_llama.py writes it: LlamaForCausalLM, bf16, 37 layers of Llama-3-8B's shape
# (8 KV heads of 128), max_position_embeddings 8192, the test tokenizer (byte-level BPE, 512
# tokens, PreTrainedTokenizerFast), a chat template. One GPU (device 0 only).
# "ran": the piece was checked by running the engine's own code here: Python 3.12 with the packed
# site (/tmp/gw/vsite or /tmp/gw/ssite) first on the path, torch 2.11.0 (the cu130 wheel, no GPU)
# and, for vLLM, transformers 5.17.0 (the image's, FACTS.md), torch.cuda and NVML faked as one H100
# (80 GB, SM90), the GPU-only extensions stubbed (vllm._C_stable_libtorch and the other vllm .so,
# sgl_kernel's common_ops), vLLM's model class inspection stubbed, and a copy of the model's
# config.json (the shapes above) and tokenizer as `bringup testmodel` writes them (no weights).
# "read": traced in source only. Where a piece says "ran", what follows a launch phase that cannot
# run here (engine-core start, weights, CUDA graphs) is read.

# vLLM 0.24.0 (`vllm serve /tmp/m8b ...`, HF_HUB_OFFLINE=1):
# - `--max-num-partial-prefills 4`: a V0-era latency knob (vLLM 0.8's "concurrent partial prefills",
#   vllm-project/vllm#10235: several long prompts prefilled side by side so short ones are not stuck
#   behind them), kept in the launch script of a mixed long/short RAG service that was upgraded
#   from a 0.8.x box; V1 never implemented it (vllm-project/vllm#14003, #21674, and
#   vllm-project/vllm#39737 "max-num-partial-prefills fails on V1 engine start"). The argument
#   parser takes it (engine/arg_utils.py:526 and :1407, an int; config/scheduler.py:70 ge=1) and
#   the API server's checks pass (cli/serve.py:151 validate_parsed_serve_args,
#   api_server.py:520 setup_server -> :532 validate_api_server_args; its "non-default args" line,
#   :524, shows 'max_num_partial_prefills': 4); then config building, before any process starts:
#   api_server.py:123 create_engine_config -> engine/arg_utils.py:1822 _check_feature_supported ->
#   :2350-2355 (max_num_partial_prefills differs from SchedulerConfig's default 1) -> :2689-2694:
#   "NotImplementedError: Concurrent Partial Prefill is not supported. We recommend to remove
#   Concurrent Partial Prefill from your config." [the feature in words; the field and value only
#   on the non-default args line]. Phase: argument parsing and config checks (create_engine_config:
#   the dry run refuses it). Ran (create_engine_config with all three settings raises exactly this,
#   from arg_utils.py:1822/:2355/:2694; without this one the config builds: max model len 8192,
#   block 16, executor "uni", max_num_partial_prefills 1).
# - `VLLM_RPC_BASE_PATH=/run/vllm` (environment): from the Kubernetes deployment of the old box,
#   whose pods ran with a read-only root filesystem and a writable emptyDir mounted at /run/vllm for
#   vLLM's front-end/engine IPC sockets (envs.py:648-652: "path used for ipc when the frontend api
#   server is running in multi-processing mode to communicate with the backend engine process",
#   default tempfile.gettempdir()); the variable came along in the .env file, /run/vllm does not
#   exist on this box. Nothing reads it while parsing or building the config (it is left out of the
#   compile-cache hash too, envs.py:2015), so the dry run passes. The API server loads the tokenizer
#   (api_server.py:135 AsyncLLM.from_vllm_config -> v1/engine/async_llm.py:132
#   renderer_from_config), then starts the engine-core client: async_llm.py:146
#   make_async_mp_client -> v1/engine/core_client.py:132 AsyncMPClient -> :963 -> :552
#   get_engine_zmq_addresses -> v1/engine/utils.py:1062 get_open_zmq_ipc_path ->
#   utils/network_utils.py:141-143 "ipc://{VLLM_RPC_BASE_PATH}/{uuid4()}" -> core_client.py:553
#   make_zmq_socket(..., zmq.ROUTER, bind=True) -> network_utils.py:338 socket.bind:
#   "zmq.error.ZMQError: No such file or directory for ipc path "/run/vllm/<uuid>".
#   (addr='ipc:///run/vllm/<uuid>')" (pyzmq 27.1.0 as packed) and `vllm serve` exits [value: the
#   user's directory in the path; the variable's name appears nowhere]. Phase: engine-core launch,
#   after the config and the tokenizer, before the engine-core process (and so before any weight,
#   KV cache or CUDA graph). Ran (with the config built here, AsyncLLM.from_vllm_config loads the
#   tokenizer and raises exactly this from core_client.py:553 / network_utils.py:338; without the
#   variable it goes on to spawn the engine core).
# - `--tool-server localhost:8081,localhost:8082`: the Responses-API tool servers of the gpt-oss
#   box (vLLM's gpt-oss recipe: `mcp run -t sse browser_server.py:mcp` / `python_server.py:mcp`,
#   then `vllm serve ... --tool-server ip-1:port-1,ip-2:port-2`, vllm-project/recipes#43), two MCP
#   SSE sidecars that this box does not run. cli_args.py:123 (a plain string) and no check looks
#   at it, so config and API-server checks pass. The engine core loads the model, profiles,
#   allocates the KV cache and captures the CUDA graphs ("init engine (profile, create kv cache,
#   warmup model) took ..."); then api_server.py:677 (engine client up) -> :681 build_and_serve ->
#   :577 "Supported tasks: ..." -> :579 init_app_state -> :392 init_generate_state ->
#   entrypoints/generate/api_router.py:83-85 MCPToolServer().add_tool_server(...) ->
#   entrypoints/mcp/tool_server.py:118-119 (url "http://localhost:8081/sse") -> :18-26
#   list_server_and_tools -> mcp/client/sse.py:62 anyio task group, :68 aconnect_sse (connect
#   timeout 5 s): "ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)" with
#   "httpx.ConnectError: All connection attempts failed" inside, before "Starting vLLM server on
#   ..." (api_server.py:581); the engine client context exits, the engine shuts down and `vllm
#   serve` exits [component: vLLM's MCP tool server in the traceback; field and value only on the
#   "non-default args" line, 'tool_server': 'localhost:8081,localhost:8082']. Phase: API-server
#   state, after the engine is fully up (weights, KV cache, CUDA graphs) and before anything is
#   served. Config and API-server checks ran; MCPToolServer().add_tool_server with this value, no
#   listener on either port (mcp 1.28.1 from the vLLM site; httpx 0.29 / anyio 4.16 here, the
#   image's may differ in the wording of the wrapper) ran and raises this within about a second;
#   the order after engine init read.
USERBAD5_vllm="VLLM_RPC_BASE_PATH=/run/vllm --max-num-partial-prefills 4 --tool-server localhost:8081,localhost:8082"

# SGLang 0.5.16 (`python -m sglang.launch_server --model-path /tmp/m8b ...`):
# - `--enable-lora`: carried over when the launch line was translated from vLLM, where
#   `--enable-lora` alone is enough for adapters loaded at run time (vLLM's LoRAConfig defaults
#   max_lora_rank to 16, vllm config/lora.py:34); the multi-tenant box registered adapters through
#   the load-adapter endpoint and started with no initial adapter. Parsed and kept by
#   prepare_server_args (launch_server.py:68 -> server_args.py:8224 -> :7348 from_cli_args;
#   server_args.py:2331, enable_lora True; __post_init__ only disables the prefill CUDA graph for
#   LoRA); then the checks, before any process starts: http_server.py:2678 _launch_subprocesses ->
#   entrypoints/engine.py:792 check_server_args -> server_args.py:7623 check_lora_server_args ->
#   :7782 (enable_lora) -> :7878-7880: "AssertionError: When no initial --lora-paths is provided,
#   you need to specify both --max-lora-rank and --lora-target-modules for LoRA initialization."
#   [the message names three other LoRA options, never this one; adding a rank and target modules
#   would also pass, dropping the switch is the fix]. Phase: argument parsing and config checks
#   (check_server_args: the dry run refuses it). Ran (all three settings: this error; the other two
#   alone and together pass prepare_server_args and check_server_args, fa3 chosen as without them).
# - `SGLANG_DISTRIBUTED_INIT_METHOD_OVERRIDE=env://` (environment): from the RL cluster, where an
#   external orchestrator owns torch.distributed's TCPStore and exports this override together with
#   MASTER_ADDR/MASTER_PORT for it (sgl-project/sglang#18743, "allow external orchestrators to
#   override the distributed init method"; distributed/bootstrap.py:171-174 says the same); the
#   override stayed in the user's environment file, the orchestrator's MASTER_* did not. Read only
#   in the scheduler (environ.py:439, used at bootstrap.py:175), so prepare_server_args and
#   check_server_args pass. The launcher starts the scheduler; scheduler.py:4623 Scheduler(...) ->
#   :431 init_model_worker -> :847 init_tp_model_worker -> TpModelWorker -> tp_worker.py:424
#   ModelRunner -> model_executor/model_runner.py:323 init_torch_distributed -> :883 ->
#   distributed/bootstrap.py:62 "Init torch distributed begin." -> :78 _resolve_dist_init_method
#   (:175-177: the override wins over tcp://127.0.0.1:<port>) -> :90 _init_parallel_groups -> :236
#   init_distributed_environment -> distributed/parallel_state.py:2062
#   torch.distributed.init_process_group(init_method="env://", world_size=1, rank=0) -> torch
#   distributed/rendezvous.py:276 -> :254: "ValueError: Error initializing torch.distributed using
#   env:// rendezvous: environment variable MASTER_ADDR expected, but not set", logged in "Scheduler
#   hit an exception" (managers/scheduler.py:4643); the scheduler signals its parent and the server
#   exits [value: env://; the variable's name appears nowhere]. Phase: scheduler start (process
#   group), before the weights are loaded. Ran (prepare_server_args and check_server_args pass with
#   it set; bootstrap._resolve_dist_init_method gives "env://" with it and tcp://127.0.0.1:<port>
#   without, and parallel_state.init_distributed_environment with that method raises exactly this
#   under torch 2.11.0, MASTER_ADDR/MASTER_PORT unset); the scheduler path to it read.
# - `--enable-lmcache`: the prefix-cache offload of the old box, which ran LMCache beside SGLang
#   (LMCache's SGLang quickstart: `python -m sglang.launch_server ... --enable-lmcache` with its
#   config file, LMCache/LMCache#2400); the lmcache package is neither in the packed SGLang site nor
#   in the image. server_args.py:2439 (a switch) and nothing at start-up imports LMCache, so
#   prepare_server_args and check_server_args pass (enable_lmcache stays True, radix cache on,
#   chunked prefill 8192). The scheduler loads the weights, allocates the KV pool and captures the
#   CUDA graphs (scheduler.py:431 init_model_worker -> :847-854, init_all_cuda_graphs last), then
#   builds the tree cache: scheduler.py:437 kv_cache_builder.build_kv_cache ->
#   mem_cache/kv_cache_builder.py:238 create_tree_cache -> mem_cache/registry.py:210
#   default_radix_cache_factory -> :131-133 (enable_lmcache) import lmc_radix_cache ->
#   mem_cache/storage/lmcache/lmc_radix_cache.py:21-32: "RuntimeError: LMCache is not installed.
#   Please install it by running `pip install lmcache`" (from "ModuleNotFoundError: No module named
#   'lmcache'"), in "Scheduler hit an exception" (scheduler.py:4643); the server exits [component:
#   LMCache, the cache the switch selects; field: enable_lmcache=True on the server_args line at
#   start]. Phase: scheduler initialisation after CUDA graph capture (tree cache), before the HTTP
#   server and its warmup. prepare_server_args and check_server_args ran; importing
#   lmc_radix_cache with the packed site raises exactly this; the order in the scheduler read.
USERBAD5_sglang="SGLANG_DISTRIBUTED_INIT_METHOD_OVERRIDE=env:// --enable-lora --enable-lmcache"
