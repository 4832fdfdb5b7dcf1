# Issue 36, a third held-out set of user-setting mistakes (step usermistakes3 of h200_steps.sh,
# sourced there; `bringup run --baseline "$USERBAD3_$E" --dry-run auto`). Written before the run from
# the engines' sources only (vLLM 0.24.0 and SGLang 0.5.16 as packed for the lent machines), never
# from bringup's search or knowledge. None of the settings is one of the first set (USERBAD and BAD
# of h200_vllm.sh / h200_sglang.sh), the second (usermistakes2.sh) or the user corpus
# (usercorpus-h200.yaml). Three mistakes per engine, one setting each, none of whose errors spells
# its flag (neither --flag-name nor flag-name; config field names with underscores do appear), each
# met in a later phase than the one before, so each hides the next: a person needs 4 launches (3
# fixes + the working one). Only the first of each engine is caught by the engine's own argument and
# config checks (the dry run); the other two pass them and need a launch. Each is fixed by dropping
# its flag. Without the three, each engine's own defaults serve the 8 B model (docs/gpu-h200.md).
# The model as make_random_llama.py writes it: LlamaForCausalLM, bf16, 37 layers of Llama-3-8B's
# shape, max_position_embeddings 8192 (vLLM's log on the H100: "Using max model len 8192"), the
# test tokenizer (byte-level BPE, 512 tokens, no <think>/</think>), a chat template.
# "ran": the piece was checked by running the engine's own code here: Python 3.12 with the packed
# site (/tmp/gw/vsite or /tmp/gw/ssite) on the path, a torch wheel with no GPU, torch.cuda faked as
# one H100 (80 GB, SM90) and the GPU-only extensions stubbed, and a copy of the model's config.json
# and tokenizer (no weights): vLLM's EngineArgs.create_engine_config (the model class inspection
# stubbed) and SGLang's prepare_server_args + check_server_args. "read": traced in source only.

# vLLM 0.24.0 (`vllm serve /tmp/m8b ...`, HF_HUB_OFFLINE=1):
# - `--reasoning-parser deepseek_r1`: the launch line of a DeepSeek-R1-Distill-Llama-8B deployment
#   (a Llama-3.1-8B-shaped distill whose recipe sets the R1 reasoning parser), kept when the box
#   moved to a plain Llama checkpoint, whose tokenizer has no <think>/</think> tokens (vLLM's parsers
#   look them up in the vocabulary: SkyworkAI/Skywork-R1V#42). The API server's name check passes
#   (entrypoints/openai/api_server.py:509, a registered parser); then config building, before any
#   process starts: engine/arg_utils.py:1824 (_set_default_reasoning_config_args, :2528, puts the
#   parser into a ReasoningConfig) -> arg_utils.py:2316 VllmConfig(...) -> config/vllm.py:1450
#   reasoning_config.initialize_token_ids -> config/reasoning.py:80 parser_cls(tokenizer) ->
#   reasoning/basic_parsers.py:65: "RuntimeError: DeepSeekR1ReasoningParser reasoning parser could
#   not locate think start/end tokens in the tokenizer!" (a RuntimeError, so pydantic does not wrap
#   it; a warning just before it names only VLLM_USE_V2_MODEL_RUNNER) [component: the parser the
#   value selects]. Phase: argument parsing and config checks (create_engine_config: the dry run
#   refuses it). Ran (create_engine_config with all three settings raises exactly this; without this
#   one the config builds, kv_cache_memory_bytes=161061273600 and scheduler_cls kept as a string).
# - `--kv-cache-memory-bytes 150G`: a fixed KV budget from the B200 box (about 180 GB of HBM), pinned
#   there so that capacity does not move between restarts, as vLLM's own `--kv-cache-memory=`
#   suggestion invites; more than an H100 (80 GB) or an H200 (141 GB) holds at all. Accepted by the
#   config (human_readable_int: 150 GiB; 0.24 never checks the size against the device, cf. the open
#   vllm-project/vllm#56698). The engine core loads the model and runs the profiling/compile pass,
#   then v1/worker/gpu_worker.py:412-430 returns the figure unprofiled, logging "Initial free memory
#   ... GiB, reserved 150.0 GiB memory for KV Cache as specified by kv_cache_memory_bytes config and
#   skipped memory profiling. This does not respect the gpu_memory_utilization config. ..."
#   (gpu_worker.py:429); v1/engine/core.py:283 -> :294 get_kv_cache_configs sizes the pool from it
#   (about 66k blocks of 16 tokens) -> :321 initialize_from_config -> v1/executor/abstract.py:123 ->
#   gpu_worker.py:606 -> v1/worker/gpu/model_runner.py:484 init_kv_cache -> gpu/attn_utils.py:427
#   _allocate_kv_cache -> :175/:180 torch.zeros: "torch.OutOfMemoryError: CUDA out of memory. Tried
#   to allocate ... GiB. GPU 0 has a total capacity of ..." (the OOM wrapper with hints is only around
#   model loading, gpu_model_runner.py:5244, not here) [field: kv_cache_memory_bytes, with its value,
#   on the log line just before the OOM; the OOM itself names neither]. Phase: KV-cache allocation
#   (after model loading and the profiling run, before CUDA graph capture); a lower
#   gpu_memory_utilization does not help, the field overrides it. Config part ran; the rest read.
# - `--scheduler-cls vllm.core.scheduler.Scheduler`: the value vLLM up to 0.10 printed as this flag's
#   default (`--help`: "(default: vllm.core.scheduler.Scheduler)", V0's scheduler), carried in launch
#   scripts and all-defaults configs of that era (public benchmark scripts pass exactly this for V0
#   runs); V0 and vllm/core are gone, and 0.24 takes the string as a custom class. Accepted by the
#   config (config/scheduler.py:127, a string, nothing imported). The engine core loads the model,
#   profiles, allocates the KV cache and captures the CUDA graphs (core.py:133, abstract.py:124
#   compile_or_warm_up_model; "init engine (profile, create kv cache, warmup model) took ..." is
#   logged), builds the structured-output manager (core.py:134), then core.py:137
#   get_scheduler_cls -> config/scheduler.py:192 warns "Using custom scheduler class
#   vllm.core.scheduler.Scheduler. This scheduler interface is not public ..." -> :201 ->
#   utils/import_utils.py:109 importlib.import_module: "ModuleNotFoundError: No module named
#   'vllm.core'" [value: the module path the user gave]. Phase: after CUDA graph capture and warmup,
#   before the scheduler exists and before the API server serves. Ran (get_scheduler_cls on the
#   config built here).
USERBAD3_vllm="--reasoning-parser deepseek_r1 --kv-cache-memory-bytes 150G --scheduler-cls vllm.core.scheduler.Scheduler"

# SGLang 0.5.16 (`python -m sglang.launch_server --model-path /tmp/m8b ...`):
# - `--context-length 131072`: Llama 3.1's advertised 128K context, from the Llama-3.1-8B-Instruct
#   recipe, kept for this checkpoint whose config.json says max_position_embeddings 8192 (as the
#   Llama-3-8B-era fine-tunes do). Argument checks, prepare_server_args -> ServerArgs.__post_init__,
#   before check_server_args and before any process: server_args.py:2949
#   _apply_inkling_prefill_cuda_graph_default -> :3565 get_model_config -> :7412
#   ModelConfig.from_server_args -> configs/model_config.py:472 _derive_context_length -> :752:
#   "ValueError: Warning: User-specified context_length (131072) is greater than the derived
#   context_length (8192). This may lead to incorrect model outputs or CUDA errors. Note that the
#   derived context_length may differ from max_position_embeddings in the model's config. To allow
#   overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" (that env
#   var and SGLANG_IS_IN_CI are unset in the harness) [field, the value quoted too]. Phase: argument
#   parsing and config checks (the dry run refuses it). Ran (all three settings: this error; the
#   other two alone pass prepare_server_args and check_server_args).
# - `--forward-hooks '[{"name": "act_stats", "target_modules": ["model.layers.*.mlp"],
#   "hook_factory": "act_probes.hooks:make_stats_hook"}]'`: activation-statistics hooks from the
#   research box (SGLang's "Model Hooks", docs advanced_features/forward_hooks: logging intermediate
#   activations), whose factory lives in the team's act_probes package, installed there and not in
#   this image. Argument parsing takes the JSON (json_list_type) and nothing imports the factory at
#   start-up. The scheduler loads the model, allocates the KV pool, captures the prefill and decode
#   CUDA graphs, then registers the hooks (after capture, on purpose):
#   model_executor/model_runner_components/cuda_graph_setup.py:118-120 ->
#   model_executor/hook_manager.py:31 resolve_callable -> :75 importlib.import_module:
#   "ModuleNotFoundError: No module named 'act_probes'", in "Scheduler hit an exception"
#   (managers/scheduler.py:4643), and the server exits [value: the module of the user's factory
#   path]. Phase: CUDA graph capture (right after "Capture target decode CUDA graph end", before the
#   tree cache and the HTTP server; --disable-cuda-graph would not skip it, scheduler.py:854 always
#   runs the capture step). Ran (the value parsed by prepare_server_args; register_forward_hooks
#   called with it on a small module).
# - `--decode-log-interval 0`: "0 to turn the periodic decode log off", the convention of the option
#   beside it (gc_warning_threshold_secs: "Set to 0 to disable") and of many servers' log intervals;
#   SGLang uses it as a modulus. Accepted by argument parsing and check_server_args. The server
#   starts; its own warmup, POST /generate "The capital city of France is" with 8 new tokens
#   (entrypoints/http_server.py:2223), runs a prefill and then the first decode step:
#   managers/scheduler.py:3570 -> managers/scheduler_components/batch_result_processor.py:757
#   report_decode_stats -> managers/scheduler_components/metrics_reporter.py:724
#   `if self.forward_ct_decode % self.decode_log_interval != 0:`: "ZeroDivisionError: integer modulo
#   by zero", in "Scheduler hit an exception"; the scheduler signals its parent, the server exits and
#   the warmup logs "Initialization failed. warmup error" [field: decode_log_interval on the failing
#   source line of the traceback, and decode_log_interval=0 in the server_args line at start].
#   Phase: first request (the server's own warmup; were its first greedy token EOS, the first probe
#   that decodes fails the same way). Ran (prepare_server_args and check_server_args pass; the modulo).
USERBAD3_sglang="--context-length 131072 --forward-hooks '[{\"name\": \"act_stats\", \"target_modules\": [\"model.layers.*.mlp\"], \"hook_factory\": \"act_probes.hooks:make_stats_hook\"}]' --decode-log-interval 0"
