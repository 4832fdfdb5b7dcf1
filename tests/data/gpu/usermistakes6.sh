# Issue 36, a sixth held-out set of user-setting mistakes (to be sourced like usermistakes5.sh;
# `bringup run --baseline "$USERBAD6_$E" --dry-run auto`), written 2026-12-07. Written before any
# run from the engines' sources only (vLLM 0.24.0 and SGLang 0.5.16 as packed for the lent
# machines), never from bringup's search or knowledge. None of the settings is one of the first set
# (USERBAD and BAD of h200_vllm.sh / h200_sglang.sh), the second (usermistakes2.sh), the third
# (usermistakes3.sh), the fourth (usermistakes4.sh), the fifth (usermistakes5.sh) or the user
# corpora (usercorpus-h200.yaml, usercorpus2-h200.yaml), nor a close sibling of one. Three mistakes
# per engine, one setting each (one of the three an environment variable, written `NAME=VALUE`
# first in the baseline, as usercorpus-h200.yaml writes a case's environment), none of whose errors
# spells its flag or variable (neither --flag-name nor flag-name; config field names with
# underscores, the user's value or the component the setting selects do appear), each met in a
# later phase than the one before, so each hides the next: a person needs 4 launches (3 fixes + the
# working one). Only the first of each engine is caught by the engine's own argument and config
# checks (the dry run); the other two pass them and need a launch. Each is fixed by dropping its
# setting (the engine's default again). Without the three, each engine's own defaults serve the 8 B
# model (docs/gpu-h200.md). The model as make_random_llama.py writes it: LlamaForCausalLM, bf16, 37
# layers of Llama-3-8B's shape (8 KV heads of 128), max_position_embeddings 8192, the test tokenizer
# (byte-level BPE, 512 tokens, PreTrainedTokenizerFast), a chat template. One GPU (device 0 only).
# "ran": the piece was checked by running the engine's own code here: Python 3.12 with the packed
# site (/tmp/gw/vsite or /tmp/gw/ssite) first on the path, torch 2.11.0 (no GPU), torch.cuda and
# NVML faked as one H100 (80 GB, SM90), the GPU-only extensions stubbed, vLLM's model class
# inspection stubbed, and a copy of the model's config.json and tokenizer (no weights): vLLM's arg
# parser, validate_parsed_serve_args, validate_api_server_args and
# EngineArgs.create_engine_config; SGLang's prepare_server_args + check_server_args. "read": traced
# in source only. Where a piece says "ran", what follows a launch phase that cannot run here
# (engine-core start, weights, CUDA graphs) is read.

# vLLM 0.24.0 (`vllm serve /tmp/m8b ...`, HF_HUB_OFFLINE=1):
# - `--collect-detailed-traces all`: from the production box's launch, where vLLM exported
#   OpenTelemetry traces to the cluster's collector (vLLM's OpenTelemetry example,
#   examples/online_serving/opentelemetry: `--otlp-traces-endpoint ...` and, for per-step model and
#   worker spans, `--collect-detailed-traces all`; vllm-project/vllm#3789, #9952 "more exhaustive
#   tracing"); this box has no collector, so the endpoint was dropped and the detail switch stayed.
#   The parser takes it (engine/arg_utils.py:631 and :1348, a choice of DetailedTraceModules) and
#   the API server's checks pass (cli/serve.py:151 validate_parsed_serve_args, api_server.py:520
#   setup_server -> :532 validate_api_server_args; its "non-default args" line shows
#   'collect_detailed_traces': ['all']); then config building, before any process starts:
#   api_server.py:123 create_engine_config -> engine/arg_utils.py:2266 ObservabilityConfig(...) ->
#   config/observability.py:150-154 _validate_tracing_config:
#   "pydantic_core._pydantic_core.ValidationError: 1 validation error for ObservabilityConfig / Value
#   error, collect_detailed_traces requires `--otlp-traces-endpoint` to be set. [type=value_error,
#   input_value=ArgsKwargs((), {'show_hid...onitor_verbose': False}), input_type=ArgsKwargs]"
#   [field: collect_detailed_traces; the message names only another flag, the endpoint: adding one
#   is the tempting move (an exporter to nowhere), dropping the switch is the fix]. Phase: argument
#   parsing and config checks (create_engine_config: the dry run refuses it). Ran (create_engine_config
#   with all three settings raises exactly this, from arg_utils.py:2266; without this one the config
#   builds: max model len 8192, block 16, executor "uni").
# - `VLLM_PP_LAYER_PARTITION=38,42` (environment): the .env of the old 2-GPU pipeline-parallel box
#   that served Llama-3-70B (80 layers) with `--pipeline-parallel-size 2` and an uneven split that
#   gives the first stage (embeddings) fewer layers, as vLLM's partition strategies invite
#   (vllm-project/vllm#6920 "Introduce pipeline parallelism partition strategies"; #13839's log line
#   "This can be manually overridden using the VLLM_PP_LAYER_PARTITION environment variable"; RL
#   frameworks export it too, alibaba/ChatLearn#157); the PP flag went with the move to one GPU, the
#   .env came along. Nothing reads it while parsing or building the config on CUDA (config/model.py:1294
#   get_pp_indices is reached there only from platforms/cpu.py:162; compilation/caching.py:568 and
#   usage/usage_lib.py:40 only record it), so the dry run passes. The engine core starts
#   (v1/engine/core.py:123 executor_class -> v1/executor/uniproc_executor.py:73 worker init, device,
#   torch.distributed with world size 1), then loads the model: v1/worker/gpu_worker.py:377 load_model
#   -> the model runner's load_model -> model_executor/model_loader/base_loader.py:55
#   initialize_model -> LlamaForCausalLM -> model_executor/models/llama.py:375 make_layers ->
#   model_executor/models/utils.py:660 get_pp_indices(37, 0, 1) -> distributed/utils.py:125-134:
#   "ValueError: len(partitions)=2 does not match pp_size=1." -> "EngineCore failed to start." /
#   "RuntimeError: Engine core initialization failed. See root cause above." [value: the count of
#   the user's partitions; the message names pp_size (tempting a pipeline-parallel flag, which one
#   GPU cannot give), the variable's name appears nowhere]. Phase: model construction in the engine
#   core, after the worker and its process group are up, before any weight is read (so before the
#   KV cache and CUDA graphs). get_pp_indices(37, 0, 1) with the variable set ran and raises exactly
#   this (and the config builds with it set); the engine-core path to it read.
# - `--runner pooling`: the launch wrapper of the team's embedding service (vLLM's pooling-models
#   docs: `vllm serve intfloat/e5-mistral-7b-instruct --runner pooling`; a Llama-architecture
#   embedder), reused for this chat model. The config builds (config/model.py:962 logs "Resolved
#   `--convert auto` to `--convert embed`", another flag; vllm.py:1240 warns "Pooling models do not
#   support full cudagraphs. Overriding cudagraph_mode to PIECEWISE."); the engine core loads the
#   model with an embedding pooler (LAST pooling), profiles, allocates the KV cache and captures the
#   piecewise CUDA graphs; the API server logs "Supported tasks: ['embed', ...]" (api_server.py:577)
#   and registers routes by task: api_server.py:202 (no "generate", so no completions or chat
#   routes), :235-238 the pooling routes (/v1/embeddings, /pooling); "Starting vLLM server on ..."
#   and the server is up. The first request, the tool's probe (POST /v1/chat/completions or
#   /v1/completions), gets "404 Not Found" with {"detail":"Not Found"} from FastAPI [component: the
#   embedding runner, on the "Supported tasks" line and the convert line at start; field and value on
#   the "non-default args" line, 'runner': 'pooling']. Phase: first request (the server starts and
#   stays up; /v1/models lists the model). Ran (create_engine_config with it alone: runner_type
#   pooling, convert embed, seq_pooling_type LAST); the route registration and the 404 read.
USERBAD6_vllm="VLLM_PP_LAYER_PARTITION=38,42 --collect-detailed-traces all --runner pooling"

# SGLang 0.5.16 (`python -m sglang.launch_server --model-path /tmp/m8b ...`):
# - `--encoder-only`: the launch template of the encoder node of the team's EPD-disaggregated
#   Qwen2.5-VL deployment (SGLang's encoder/prefill/decode disaggregation: a vision-encoder-only
#   server feeding `--language-only` servers), copied for this text model's one-GPU box. Parsed
#   (launch_server.py:68 -> server_args.py:8224 prepare_server_args -> :7348 from_cli_args), then
#   ServerArgs.__post_init__ -> server_args.py:6409 _handle_encoder_disaggregation: the checks at
#   :6410-6419 pass (no prefix mm cache, not language-only, no PD mode; the mooncake IB check at
#   :6429 is skipped outside PD), then :6438-6455:
#   "ValueError: Model type LlamaForCausalLM is not supported for encoder disaggregation. Supported
#   architectures: Qwen2VL, Qwen3VL, Qwen3.5, InternS2, Qwen2Audio, Qwen2.5Omni, Kimi, MiMoV2."
#   [component: encoder disaggregation, the mode the switch selects; the model's architecture is
#   quoted, tempting a model change; no log line before it names the switch]. Phase: argument
#   parsing and config checks (prepare_server_args: the dry run refuses it). Ran (all three
#   settings: this error; the other two alone and together pass prepare_server_args and
#   check_server_args, fa3 chosen as without them).
# - `SGLANG_EXTERNAL_MODEL_PACKAGE=atom.plugin.sglang.models` (environment): from the MI300X box,
#   where AMD's ATOM supplied optimized model implementations to unmodified SGLang through this
#   variable (ROCm/ATOM#359: `export SGLANG_EXTERNAL_MODEL_PACKAGE=atom.plugin.sglang.models`;
#   the mechanism is sgl-project/sglang#13429, documented by #21050); the variable stayed in the
#   user's profile, ATOM is not installed on the H100 box. Read only when the model registry is
#   first imported (models/registry.py:133-134), which neither prepare_server_args nor
#   check_server_args does, so the dry run passes. The launcher starts the scheduler
#   (scheduler.py:4623 Scheduler(...) -> :431 init_model_worker -> TpModelWorker -> ModelRunner,
#   process group up), which loads the model: model_executor/model_runner.py:902 load_model ->
#   model_loader/loader.py DefaultModelLoader.load_model -> :301 _initialize_model -> :307
#   get_model_architecture -> model_loader/utils.py:196 `from sglang.srt.models.registry import
#   ModelRegistry` -> models/registry.py:134 ModelRegistry.register(...) -> :27 -> :97
#   importlib.import_module: "ModuleNotFoundError: No module named 'atom'", in "Scheduler hit an
#   exception" (managers/scheduler.py:4643); the server exits [value: the top package of the user's
#   module path; the variable's name appears nowhere]. Phase: model loading in the scheduler, after
#   the process group and before any weight is read (so before the KV pool and CUDA graphs). Ran
#   (prepare_server_args and check_server_args pass with it set; get_model_architecture on the
#   ModelConfig built from them raises exactly this from registry.py:97); the scheduler path to it
#   read.
# - `--dtype float32`: from the RL team's evaluation box, where rollouts ran in FP32 so that
#   log-probs matched the FP32 trainer's reference; FlashAttention kernels take fp16/bf16 only
#   (Dao-AILab/flash-attention#622 "fp32 is not supported"; unslothai/unsloth#9110 for the same
#   first-forward crash of an FP32 load). Accepted by prepare_server_args and check_server_args
#   (choices at server_args.py:580; "Attention backend not specified. Use fa3 backend by default."
#   all the same; dtype='float32' on the server_args line). The scheduler loads the weights in FP32
#   (about 30 GB), allocates the KV pool (FP32 too) and starts the CUDA graph capture
#   (scheduler.py:431 init_model_worker -> :847-854, "Capture target prefill CUDA graph begin.
#   backend=breakable"): the first attention call of the captured forward,
#   layers/attention/flashattention_backend.py -> sgl_kernel's FA3 (flash_ops):
#   "RuntimeError: FlashAttention only supports fp16, bf16, and fp8_e4m3 data type", in "Scheduler
#   hit an exception"; the server exits (should the fused RMSNorm kernel of the first layer be
#   reached first instead, sgl_kernel's dispatch raises "... failed to dispatch data type Float" at
#   the same point) [component: FlashAttention, the default fa3 backend; field and value:
#   dtype='float32' on the server_args line at start; switching to the triton backend is the
#   tempting move, dropping the dtype is the fix]. Phase: CUDA graph capture, after the weights
#   and the KV pool, before the tree cache, the HTTP server and its warmup. prepare_server_args and
#   check_server_args ran (fa3 kept, dtype float32); the message is FA3's (the string is in the
#   packed sgl_kernel/flash_ops.abi3.so); the scheduler path and which kernel fails first read.
USERBAD6_sglang="SGLANG_EXTERNAL_MODEL_PACKAGE=atom.plugin.sglang.models --encoder-only --dtype float32"
