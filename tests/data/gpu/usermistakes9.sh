# Issue 36, a ninth held-out set of user-setting mistakes (to be sourced like usermistakes8.sh;
# `bringup run --baseline "$USERBAD9_$E" --dry-run auto`), written 2026-12-08. Written before any
# run from the engines' sources and public issues only (vLLM 0.24.0 and SGLang 0.5.16 as packed for
# the lent machines), never from bringup's search or knowledge. None of the settings is one of the
# first set (USERBAD and BAD of h200_vllm.sh / h200_sglang.sh), the second (usermistakes2.sh), the
# third (usermistakes3.sh), the fourth (usermistakes4.sh), the fifth (usermistakes5.sh), the sixth
# (usermistakes6.sh), the seventh (usermistakes7.sh), the eighth (usermistakes8.sh) or the user
# corpora (usercorpus-h200.yaml, usercorpus2-h200.yaml), nor a close sibling of one. Three mistakes
# per engine, one setting each (one of the three an environment variable, written `NAME=VALUE` first
# in the baseline, as usercorpus-h200.yaml writes a case's environment), none of whose errors spells
# its flag or variable (neither --flag-name nor flag-name nor the variable's name; config field
# names with underscores, the user's value or the component the setting selects do appear), each met
# in a later phase than the one before, so each hides the next: a person needs 4 launches (3 fixes +
# the working one). Only the first of each engine is caught by the engine's own argument and config
# checks (the dry run: vLLM's arg parser, validate_parsed_serve_args, validate_api_server_args and
# EngineArgs.create_engine_config; SGLang's prepare_server_args + ServerArgs.check_server_args); the
# other two pass them and need a launch. Each is fixed by dropping its setting (the engine's default
# again). Without the three, each engine's own defaults serve the 8 B model (docs/gpu-h200.md). The
# model as make_random_llama.py writes it: LlamaForCausalLM, bf16, 37 layers of Llama-3-8B's shape
# (8 KV heads of 128), max_position_embeddings 8192, safetensors shards written with metadata
# {"format": "pt"}, the test tokenizer (byte-level BPE, 512 tokens, PreTrainedTokenizerFast), a chat
# template. One GPU (device 0 only). HF_HUB_OFFLINE=1; nothing needs the network or a second GPU.
# Kinds chosen to differ from the eight sets before: a config check that fails on two fields'
# defaults the user never touched; a checkpoint-format refusal from the weight loader (the value
# names a quantized-checkpoint reader); a metrics library's mmap-file error in the API
# process after the engine is up; an assertion whose subject is a flag the user never passed (one
# that theirs implies); a JSON syntax error (a Python dict repr) deep in the scheduler after the
# CUDA graphs; the web server refusing to start with a one-line warning about 'workers' and exit
# code 3, no traceback, after the whole engine is up.
# "ran": the piece was checked by running the engine's own code here: Python 3.12 with the packed
# site (/tmp/gw/vsite or /tmp/gw/ssite) first on the path, torch 2.11.0 (the PyPI cu130 wheel, no
# GPU) and, for vLLM, transformers 5.17.0 and the few base packages the image provides, from PyPI
# here (prometheus_client 0.26.0, uvloop, cloudpickle, einops), torch.cuda and NVML faked as one
# H100 (80 GB, SM90), the GPU-only extensions stubbed (vllm._C_stable_libtorch and the other vllm
# .so, the few torch.ops._C capability probes vLLM calls at import, sgl_kernel's common_ops), vLLM's
# model class inspection stubbed, and a model folder with the same config.json shapes and a
# 512-token byte-level BPE tokenizer with a chat template (no weights). "read": traced in source
# only. Where a piece says "ran", what follows a launch phase that cannot run here (engine-core or
# scheduler start on the GPU, weights, KV cache, CUDA graphs, the HTTP server) is read.

# vLLM 0.24.0 (`vllm serve /tmp/m8b ...`, HF_HUB_OFFLINE=1):
# - `--offload-backend prefetch`: from the launch template of the team's large-MoE box, where
#   prefetch weight offloading hid the host-to-device copies of offloaded layers
#   (vllm-project/vllm#29941 "[offloader] v2: Hide weight onloading latency via prefetching", whose
#   review asked for the check below; vllm-project/vllm#51710 extends it to DeepSeek-V4-class MoE
#   models; the backend ran there with `--offload-group-size 8 --offload-num-in-group 2`); the
#   per-model part of the template (the group sizes) went with the model, the backend switch stayed
#   in the common part. Parsed (engine/arg_utils.py:1204, config/offload.py:83-89 "prefetch: Async
#   prefetch with group-based layer offloading"), the API server's checks pass (cli/serve.py:151
#   validate_parsed_serve_args, api_server.py:520 setup_server -> :532 validate_api_server_args;
#   its "non-default args" line, :524, shows 'offload_backend': 'prefetch'); then config building,
#   before any process starts: api_server.py create_engine_config -> engine/arg_utils.py:2299
#   OffloadConfig(...) -> config/offload.py:97-106 validate_offload_config (the backend is prefetch,
#   so the prefetch sub-config is checked with its defaults: offload_group_size 0, :54, and
#   offload_num_in_group 1, :62):
#   "pydantic_core._pydantic_core.ValidationError: 1 validation error for OffloadConfig / Value
#   error, offload_num_in_group (1) must be <= offload_group_size (0) [type=value_error,
#   input_value=ArgsKwargs((), {'offload_... offload_params=set())}), input_type=ArgsKwargs]"
#   [names two fields the user never set, both at their defaults; the input repr is cut; the
#   tempting move is to add a group size (which turns layer offloading on for a model that fits),
#   dropping the backend switch is the fix]. Phase: argument parsing and config checks
#   (create_engine_config: the dry run refuses it). Ran (create_engine_config with all three
#   settings, the variable set, raises exactly this from arg_utils.py:2299; without this one the
#   config builds: max model len 8192, chunked prefill 8192, executor "uni").
# - `--safetensors-load-strategy torchao`: from the box that served torchao-quantized safetensors
#   checkpoints, loaded the way vLLM's own test does (vllm-project/vllm#25969 "[torchao] safetensors
#   integration": `quantization="torchao", load_format="safetensors",
#   safetensors_load_strategy="torchao"`; vllm-project/vllm#28169 for sharded ones such as
#   torchao-testing/Qwen3-8B-INT4...; config/load.py:61-82: "torchao: Weights are loaded in upfront
#   and then reconstructed into torchao tensor subclasses ... used when the checkpoint was quantized
#   using torchao"); the quantization flag went with the move to a plain bf16 checkpoint, the load
#   strategy stayed. A choice the parser takes (arg_utils.py:889); nothing checks it against the
#   quantization, so the dry run passes ('safetensors_load_strategy': 'torchao' on the "non-default
#   args" line). The engine core builds the model, then reads the weights: v1/engine/core.py:123
#   executor -> v1/executor/uniproc_executor.py:68 load_model -> v1/worker/gpu_worker.py:377 ->
#   v1/worker/gpu/model_runner.py:273/:283 -> model_executor/model_loader/base_loader.py:64
#   load_weights -> default_loader.py:415/:427 -> :321 get_all_weights -> :287
#   safetensors_weights_iterator(strategy "torchao") ->
#   model_executor/model_loader/weight_utils.py:918-945, on the first shard: with no torchao (or one
#   older than 0.15) importable, :918-925 "ValueError: Please use torchao version >= 0.15.0 to load
#   torchao safetensors checkpoint"; with torchao >= 0.15 present, :945 unflatten_tensor_state_dict
#   -> torchao/prototype/safetensors/safetensors_support.py:65-66 "ValueError: No tensors found"
#   (the shard's metadata is only {"format": "pt"}, no tensor_names); either way "EngineCore failed
#   to start." (v1/engine/core.py:1231) and "RuntimeError: Engine core initialization failed. See
#   root cause above." (v1/engine/utils.py:1273) [value: torchao, the reader the value selects, in
#   the first message; the second names nothing; the tempting moves are installing or upgrading
#   torchao, or a --quantization torchao, for a checkpoint that was never torchao-quantized]. Phase:
#   weight loading in the engine core, after the model is built, before the profiling run, the KV
#   cache and the CUDA graphs. Ran (create_engine_config with it and the variable set builds;
#   safetensors_weights_iterator with this strategy on a shard saved with metadata {"format": "pt"}
#   raises the first message with the vLLM site alone and the second with torchao 0.17.0, the SGLang
#   site's copy, added; the default strategy yields the tensor); which of the two the image gives
#   depends on whether it has torchao (the packed vLLM site has none); the engine-core path read.
# - `PROMETHEUS_MULTIPROC_DIR=/var/run/prometheus` (environment): from the pod spec of the old
#   deployment, whose metrics set-up ran prometheus_client in multiprocess mode on an emptyDir
#   mounted at /var/run/prometheus (vLLM honours a value the user set,
#   v1/metrics/prometheus.py:21-36, on its multi-API-server path); the variable came along in the
#   .env, the mount did not (the same error shape after engine init: vllm-project/vllm#11374
#   "No such file or directory: '/tmp/tmp.../gauge_mostrecent_20577.db'"; bentoml/BentoML#648 for a
#   missing multiprocess directory). Read by prometheus_client only (its ValueClass is chosen at
#   import); importing the API server, the engine core and the scheduler under it creates no metric
#   file, and no config check reads it, so the dry run passes. The API process loads the tokenizer
#   and starts the engine core, which loads the weights, profiles, allocates the KV cache, captures
#   the CUDA graphs and builds its scheduler (v1/engine/async_llm.py:146 waits for it); then the API
#   process builds its stat loggers: async_llm.py:158-165 StatLoggerManager ->
#   v1/metrics/loggers.py:1335 PrometheusStatLogger -> :449 -> v1/metrics/perf.py:1578 ->
#   v1/metrics/utils.py:17 metric.labels(...) -> prometheus_client values.py MultiProcessValue ->
#   mmap_dict.py open:
#   "FileNotFoundError: [Errno 2] No such file or directory: '/var/run/prometheus/counter_<pid>.db'"
#   and `vllm serve` exits [value: the user's directory in the path; the variable's name appears in
#   no log line or frame; the tempting reading is a missing vLLM cache or temp file]. Phase: the API
#   process's metrics set-up, after the engine core is up (weights, KV cache, CUDA graphs,
#   scheduler), before the routes, the HTTP server and any request. Ran (StatLoggerManager on the
#   config built here, with the variable set and the directory absent, raises exactly this from the
#   frames above, the first file a counter's; unset, it builds; the imports under it pass); the
#   order after the engine start read.
USERBAD9_vllm="PROMETHEUS_MULTIPROC_DIR=/var/run/prometheus --offload-backend prefetch --safetensors-load-strategy torchao"

# SGLang 0.5.16 (`python -m sglang.launch_server --model-path /tmp/m8b ...`):
# - `--enable-unified-memory`: from the launch template of the team's hybrid-model box (Qwen3.5, a
#   GDN/Mamba hybrid), where one byte buffer was split dynamically between the full-attention KV and
#   the Mamba state (sgl-project/sglang#29678 "unified memory pool for hybrid Mamba / SWA models":
#   "the flag implies --enable-page-major-kv-layout"; #35177; #37415 validated on Qwen3.5-4B on an
#   H200; the option's help, server_args.py:836-843, "Requires the Triton attention / linear-attn /
#   Mamba backends"); the model-specific backend flags went with the model, the memory switch stayed
#   in the common part. Parsed, then prepare_server_args, before check_server_args and before any
#   process: launch_server.py -> server_args.py:8224 prepare_server_args -> :7348 from_cli_args ->
#   __post_init__ :3054 _handle_page_major_kv_layout (:6864 sets the implied page-major layout,
#   :6872 checks the resolved attention backend, fa3 by default on SM90): "AssertionError:
#   --enable-page-major-kv-layout requires the Triton attention backend for the full-attention
#   layers; got ['fa3']. Pass --attention-backend triton." [the subject is a flag the user never
#   passed; the only log line before it is "Attention backend not specified. Use fa3 backend by
#   default."; adding --attention-backend triton is the tempting move (the unified pool then refuses
#   a non-hybrid model at pool construction, mem_cache/kv_cache_configurator.py:330), dropping the
#   switch is the fix]. Phase: argument parsing and config checks (prepare_server_args: the dry run
#   refuses it). Ran (all three settings: this error, from server_args.py:6872; the other two alone
#   and together pass prepare_server_args and check_server_args, fa3 chosen as without them).
# - `--kv-events-config "{'publisher': 'zmq', 'topic': 'kv-events'}"`: from the KV-aware routing
#   set-up of the old cluster, where NVIDIA Dynamo's router subscribed to SGLang's KV cache events
#   over ZMQ (sgl-project/sglang#6098 "[Metrics] Add KV events publishing"; the option's help,
#   server_args.py:1347-1350, "Config in json format for NVIDIA dynamo KV event publishing";
#   ai-dynamo/dynamo#2424 and #4391 for the worker side, which `json.loads` the same string); the
#   team's Python launcher rendered the dict with str() instead of json.dumps, a Python repr with
#   single quotes, and the rendered line was kept. A free string: prepare_server_args and
#   check_server_args never parse it (only bool() of it, observability/metrics_collector.py:1059,
#   and /server_info's describe, server_args.py:8100-8108, which swallows errors). The scheduler
#   loads the weights, allocates the KV pool, captures the CUDA graphs (scheduler.py:431
#   init_model_worker -> :847/:851/:854), builds the tree cache (:437, with KV events on) and the
#   grammar manager (:545), then scheduler.py:557 init_kv_events_publisher -> :1812
#   SchedulerKvEventsPublisher -> managers/scheduler_components/kv_events_publisher.py:61/:63-73 ->
#   disaggregation/kv_events.py:462 EventPublisherFactory.create -> :442 KVEventsConfig.from_cli
#   (model_validate_json):
#   "pydantic_core._pydantic_core.ValidationError: 1 validation error for KVEventsConfig / Invalid
#   JSON: key must be a string at line 1 column 2 [type=json_invalid, input_value="{'publisher':
#   'zmq', 'topic': 'kv-events'}", input_type=str]", in "Scheduler hit an exception"
#   (scheduler.py:4643); the server exits [value: the user's string; component: the KV events
#   config]. Phase: the last step of scheduler initialisation, after the weights, the KV pool, the
#   CUDA graphs and the tree cache, before the HTTP server and its warmup. Ran (prepare_server_args
#   and check_server_args pass with it; EventPublisherFactory.create on this value raises exactly
#   this, and on the same dict written as JSON builds a ZmqEventPublisher bound on tcp://*:5557);
#   the scheduler order read.
# - `WEB_CONCURRENCY=4` (environment): from the team's container base image for its FastAPI/gunicorn
#   services, which sets the worker count through this variable as Heroku-style platforms do
#   (uvicorn reads it as the default of workers, uvicorn/config.py:351-352; simonw/datasette#633
#   "Publish to Heroku is broken: WARNING: You must pass the application as an import string to
#   enable 'reload' or 'workers'", almarklein/timetagger#457 `WEB_CONCURRENCY=4 ...`,
#   Kludex/uvicorn#481 and #3001 for the check and its exit code); SGLang never reads it, so
#   prepare_server_args and check_server_args pass. The launcher starts the scheduler and waits for
#   it to be ready (entrypoints/http_server.py:2678 Engine._launch_subprocesses: weights, KV pool,
#   CUDA graphs, tree cache, all of it), then listens: :2534 uvicorn.run(app, ...) with the app
#   object (single tokenizer mode, no workers argument) -> uvicorn 0.51.0 config.py:351-352 workers
#   = 4 -> main.py:603-607: "WARNING:  You must pass the application as an import string to enable
#   'reload' or 'workers'." and sys.exit(3) (STARTUP_FAILURE, config.py:79) before the app and its
#   lifespan load, so no warmup runs; launch_server.py's finally kills the scheduler and detokenizer
#   and the server exits with status 3 [no traceback; names 'workers', never the variable; the port
#   never opens]. Phase: HTTP server start, after the whole engine is up and before the lifespan,
#   the warmup and any request. Ran (uvicorn 0.51.0 from the SGLang site, uvicorn.run with an app
#   object and http_server.py:2534's keyword arguments: with the variable, this warning and exit 3;
#   without it, the server starts; the config checks pass with it set); SGLang's launch order and
#   the cleanup read.
USERBAD9_sglang="WEB_CONCURRENCY=4 --enable-unified-memory --kv-events-config \"{'publisher': 'zmq', 'topic': 'kv-events'}\""
