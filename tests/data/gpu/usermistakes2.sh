# Issue 36, a second, held-out set of user-setting mistakes (step usermistakes2 of h200_steps.sh,
# sourced there; `bringup run --baseline "$USERBAD2_$E" --dry-run auto`). Written before the run from
# the engines' sources only (vLLM 0.24.0 and SGLang 0.5.16 as packed for the lent machines), never
# from bringup's search or knowledge. Three mistakes per engine, one setting each, none of whose
# errors spells its flag (neither --flag-name nor flag-name), each met in a later phase than the one
# before, so each hides the next: a person needs 4 launches (3 fixes + the working one). Without the
# three, each engine's own defaults serve the 8 B model (docs/gpu-h200.md).
# "ran": the piece was checked by running Python here (no torch, no GPU); "read": traced in source.

# vLLM 0.24.0 (`vllm serve /tmp/m8b ...`, HF_HUB_OFFLINE=1):
# - `--tokenizer /models/Meta-Llama-3.1-8B-Instruct`: a tokenizer path from the box the config came
#   from (a shared /models volume there; absent here). Argument parsing, EngineArgs.__post_init__:
#   with HF_HUB_OFFLINE set, a tokenizer that is not an existing path is taken for a Hub repo id
#   (engine/arg_utils.py:775 -> transformers_utils/repo_utils.py:239 hf_api().snapshot_download),
#   whose argument validator refuses it before any network or cache look-up:
#   "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or
#   'namespace/repo_name': '/models/Meta-Llama-3.1-8B-Instruct'. Use `repo_type` argument if needed."
#   (huggingface_hub/utils/_validators.py:132, huggingface_hub 1.24.0 as packed with SGLang's site;
#   vLLM's site takes it from the base image) [value]. The message: ran (validate_repo_id extracted
#   from that huggingface_hub); the path through vLLM: read.
# - `--numa-bind-nodes 0 1`: the NUMA pinning of a two-socket 8-GPU box, carried without the
#   `--numa-bind` switch that gave it meaning (vLLM's docs for the option: one node per visible GPU).
#   Config building, ParallelConfig's model validator in create_engine_config:
#   "pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig ... Value
#   error, numa_bind_nodes and numa_bind_cpus require numa_bind=True." (config/parallel.py:471; the
#   field validator before it accepts [0, 1]; the checks above it pass with one GPU) [field]. Read.
# - `--enable-return-routed-experts`: a setting of an RL rollout server for an MoE model (routing
#   replay), kept for a dense Llama. Config building only moves vLLM to its V1 model runner
#   (config/vllm.py:2057, a warning); the engine core loads the model and profiles, then, right
#   after allocating the KV cache (v1/worker/gpu_worker.py:609, initialize_from_config ->
#   v1/worker/gpu_model_runner.py:7387 RoutedExpertsCapturer):
#   "ValueError: Cannot determine num_experts_per_tok: HF config has neither 'num_experts_per_tok'
#   nor 'top_k_experts'" (model_executor/layers/fused_moe/routed_experts_capturer.py:32) [component:
#   the routed-experts capturer the flag turns on]. Phase: KV-cache allocation (before CUDA graph
#   capture and before the scheduler starts). Read.
USERBAD2_vllm="--tokenizer /models/Meta-Llama-3.1-8B-Instruct --numa-bind-nodes 0 1 --enable-return-routed-experts"

# SGLang 0.5.16 (`python -m sglang.launch_server --model-path /tmp/m8b ...`); nothing right beside
# the three (SGLang's own memory default served this model alone):
# - `--served-model-name llama3.1:8b`: an Ollama-style model name kept so that clients (Open WebUI
#   and the like) need no change after a move from Ollama. Argument checks, check_server_args
#   (entrypoints/engine.py:792), before any process starts: "AssertionError: served_model_name
#   cannot contain a colon (':') character. The colon is reserved for the 'model:adapter' syntax used
#   in LoRA adapter specification. Invalid value: 'llama3.1:8b'" (server_args.py:7616; the checks
#   above it pass with the defaults) [field, the value quoted too]. Read.
# - `--enable-return-routed-experts`: as for vLLM, a rollout server's setting for an MoE model, kept
#   for a dense Llama. The scheduler process loads the model and allocates the memory pools, then
#   (model_executor/model_runner.py:768, _init_post_memory_pool_components ->
#   init_routed_experts_capturer -> RoutedExpertsCapturer.create):
#   "AttributeError: 'LlamaConfig' object has no attribute 'num_experts_per_tok'"
#   (state_capturer/routed_experts.py:64) [component: the routed-experts capturer the flag turns
#   on]. Phase: KV-cache allocation (after the KV pool, before CUDA graph capture). The wording is
#   transformers' (5.12.1 as packed) for a missing config attribute: read.
# - `--preferred-sampling-params '{"max_tokens": 1024, "temperature": 0.6}'`: default sampling
#   settings written with the OpenAI field name (SGLang's own is max_new_tokens). Accepted at start
#   (server_args.py:7039 only parses the JSON unless skip_tokenizer_init); the first generate
#   request, the server's own warmup right after start-up, merges them into SamplingParams
#   (managers/tokenizer_manager.py:1167), a msgspec Struct that refuses unknown keywords:
#   "TypeError: Unexpected keyword argument 'max_tokens'" (not a ValueError, so the /generate
#   handler does not turn it into a 400: a 500, the ASGI traceback in the log), then
#   "Initialization failed. warmup error: ... AssertionError: Internal Server Error" and the server
#   kills itself (entrypoints/http_server.py:2262-2263) [value: a key of the JSON]. Phase: first
#   request (the warmup; were warmup skipped, the tool's chat/completions probe fails the same way,
#   entrypoints/openai/serving_base.py:127). The TypeError message: ran (msgspec 0.21.1, the packed
#   version, on a Struct declared like SamplingParams); the rest: read.
USERBAD2_sglang="--served-model-name llama3.1:8b --enable-return-routed-experts --preferred-sampling-params '{\"max_tokens\": 1024, \"temperature\": 0.6}'"
