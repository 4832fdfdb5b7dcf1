# Issue 36, a seventh held-out set of user-setting mistakes (to be sourced like usermistakes6.sh;
# `bringup run --baseline "$USERBAD7_$E" --dry-run auto`), written 2026-12-07. Written before any
# run from the engines' sources only (vLLM 0.24.0 and SGLang 0.5.16 as packed for the lent
# machines), never from bringup's search or knowledge. None of the settings is one of the first set
# (USERBAD and BAD of h200_vllm.sh / h200_sglang.sh), the second (usermistakes2.sh), the third
# (usermistakes3.sh), the fourth (usermistakes4.sh), the fifth (usermistakes5.sh), the sixth
# (usermistakes6.sh) or the user corpora (usercorpus-h200.yaml, usercorpus2-h200.yaml), nor a close
# sibling of one. Three mistakes per engine, one setting each (one of the three an environment
# variable, written `NAME=VALUE` first in the baseline, as usercorpus-h200.yaml writes a case's
# environment), none of whose errors spells its flag or variable (neither --flag-name nor
# flag-name; config field names with underscores, the user's value or the component the setting
# selects do appear), each met in a later phase than the one before, so each hides the next: a
# person needs 4 launches (3 fixes + the working one). Only the first of each engine is caught by
# the engine's own argument and config checks (the dry run); the other two pass them and need a
# launch. Each is fixed by dropping its setting (the engine's default again). Without the three,
# each engine's own defaults serve the 8 B model (docs/gpu-h200.md). The model as
# make_random_llama.py writes it: LlamaForCausalLM, bf16, 37 layers of Llama-3-8B's shape (8 KV
# heads of 128), max_position_embeddings 8192, the test tokenizer (byte-level BPE, 512 tokens,
# PreTrainedTokenizerFast), a chat template. One GPU (device 0 only).
# "ran": the piece was checked by running the engine's own code here: Python 3.12 with the packed
# site (/tmp/gw/vsite or /tmp/gw/ssite) first on the path, torch 2.11.0 (no GPU), torch.cuda and
# NVML faked as one H100 (80 GB, SM90), the GPU-only extensions stubbed, vLLM's model class
# inspection stubbed, and a copy of the model's config.json and tokenizer (no weights): vLLM's arg
# parser, validate_parsed_serve_args, validate_api_server_args and
# EngineArgs.create_engine_config; SGLang's prepare_server_args + check_server_args. "read": traced
# in source only. Where a piece says "ran", what follows a launch phase that cannot run here
# (engine-core start, weights, KV cache, CUDA graphs, a request on the GPU) is read.

# vLLM 0.24.0 (`vllm serve /tmp/m8b ...`, HF_HUB_OFFLINE=1):
# - `--enable-dbo`: from the launch line of the team's DeepSeek-V3 wide-EP deployment (data and
#   expert parallel over DeepEP), where dual-batch overlap splits each step into two microbatches
#   to hide the MoE all-to-all (vllm-project/vllm#23693 "[Core/DBO][1/N] Add Dual-Batch Overlap
#   mechanism", docs PR #26024 docs/design/dbo.md, and vLLM's large-scale-serving blog,
#   vllm-project/vllm-project.github.io#145: "available via `--enable-dbo` flag"); the launch
#   template was reused for the dense 8 B model on one GPU. Parsed (engine/arg_utils.py:1097, a
#   ParallelConfig bool, config/parallel.py:208), the API server's checks pass; then config
#   building, before any process starts: api_server.py create_engine_config ->
#   engine/arg_utils.py:2316 VllmConfig(...) -> config/vllm.py:1427-1434 (use_ubatching,
#   config/parallel.py:523):
#   "pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig / Assertion
#   failed, Microbatching currently only supports the deepep_low_latency, deepep_high_throughput,
#   and nixl_ep all2all backends. allgather_reducescatter is not supported. To fix use
#   --all2all-backend=deepep_low_latency, --all2all-backend=deepep_high_throughput, or
#   --all2all-backend=nixl_ep and install the matching kernels. [type=assertion_error, ...]"
#   [component: microbatching, the mode the switch selects; field and value on the "non-default
#   args" line ('enable_dbo': True); the message names only another flag: setting an all2all
#   backend (DeepEP kernels, expert parallelism on a dense model) is the tempting move, dropping
#   the switch is the fix]. Phase: argument parsing and config checks (create_engine_config: the
#   dry run refuses it). Ran (create_engine_config with all three settings raises exactly this,
#   from arg_utils.py:2316; "dbo" appears nowhere in the output; without this one the config
#   builds).
# - `--max-num-batched-tokens 2M`: the per-step token budget of the old long-context prefill box
#   (8x H200 serving a 1M-context model with large chunked prefills), written with a unit as vLLM's
#   human-readable integers allow (engine/arg_utils.py:112 human_readable_int; upper-case M is
#   binary, so 2097152 tokens), carried into the one-GPU launch. Parsed (arg_utils.py:1393, field
#   config/scheduler.py:49) and accepted by the config checks (chunked prefill is on: "Chunked
#   prefill is enabled with max_num_batched_tokens=2097152."; the budget is below max_num_seqs x
#   max_model_len, so nothing refuses it; Model Runner V2 is chosen as without it). The engine core
#   starts, the worker loads the 15 GiB of weights, then sizes the KV cache:
#   v1/engine/core.py:133 _initialize_kv_caches -> :283 determine_available_memory ->
#   v1/worker/gpu_worker.py:400/:415 profile_run -> v1/worker/gpu/model_runner.py:653
#   _dummy_run(self.max_num_tokens=2097152, is_profile=True): one forward of 2 M tokens, whose
#   first MLP's gate_up projection alone is 2097152 x 28672 bf16 = 112 GiB (more than an H100's
#   or an H200's memory): "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 112.00
#   GiB. GPU 0 has a total capacity of ... GiB of which ... is free. ..." (torch's own text, with
#   its hint to try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) -> "EngineCore failed to
#   start." / "RuntimeError: Engine core initialization failed. See root cause above." [value: the
#   budget appears as max_num_batched_tokens=2097152 on the chunked-prefill line and in the
#   "non-default args" line; the OOM names neither; lowering --gpu-memory-utilization or adding
#   tensor parallelism are the tempting moves]. Phase: KV-cache sizing (the memory-profiling
#   forward), after the weights, before the KV cache and CUDA graphs. Ran (the config builds with
#   it, max_num_batched_tokens 2097152, V2 runner, FULL_AND_PIECEWISE graphs); the profile run and
#   the allocation that fails first (112 GiB, medium confidence on the size: the first tensor over
#   the free memory) read.
# - `VLLM_API_KEY=sk-prod-7f3a9c` (environment): the production .env of the public endpoint,
#   where vLLM's OpenAI-compatible server required a bearer key (the environment form of
#   --api-key: envs.py:740, api_server.py:257 "--api-key option from CLI takes precedence over
#   VLLM_API_KEY"); the .env came along to the test box, whose
#   clients (and the tool's probe) send no key or another one. Nothing reads it while parsing or
#   building the config, so the dry run passes. The engine starts, loads, sizes the KV cache,
#   captures its graphs; the API server adds the middleware (entrypoints/openai/api_server.py:
#   257-261) and starts serving; /health answers 200 (only /v1, /v2 and /inference are guarded,
#   entrypoints/serve/utils/server_utils.py:41). The first request, the tool's probe (POST
#   /v1/chat/completions or /v1/completions, /v1/models too), gets "401 Unauthorized" with
#   {"error":"Unauthorized"} (server_utils.py:89-91) [names nothing of the setting; the variable's
#   name appears in no log line]. Phase: first request (the server starts, stays up and is
#   healthy). Ran (the middleware, given the key as api_server.py:258 takes it from the
#   environment, answers POST /v1/chat/completions with 401 {"error":"Unauthorized"} with no
#   Authorization header and with "Bearer EMPTY", and /health with 200; the config builds with the
#   variable set); the server start read.
USERBAD7_vllm="VLLM_API_KEY=sk-prod-7f3a9c --enable-dbo --max-num-batched-tokens 2M"

# SGLang 0.5.16 (`python -m sglang.launch_server --model-path /tmp/m8b ...`):
# - `--enable-pdmux`: from the launch line of the latency box, where PD-Multiplexing ran prefill
#   and decode side by side on green-context SM partitions of one GPU (the green-context streams
#   it runs on: sgl-project/sglang#8090, #8136, #9231 "Optional extension for green context"), with
#   chunked prefill turned off there (`--chunked-prefill-size -1`); the switch was copied, the
#   chunked-prefill setting was not. Parsed (server_args.py:2601), ServerArgs.__post_init__ keeps
#   the default chunked prefill (server_args.py:3949-3969), then check_server_args ->
#   server_args.py:7639-7646:
#   "AssertionError: PD-Multiplexing is not compatible with chunked prefill." [component:
#   PD-Multiplexing, the mode the switch selects; the message names chunked prefill, so turning
#   chunked prefill off is the tempting move (it then needs a pdmux config and green-context
#   support), dropping the switch is the fix; enable_pdmux=True on the server_args line]. Phase:
#   argument parsing and config checks (check_server_args: the dry run refuses it). Ran (all three
#   settings: this error, from server_args.py:7644; the other two alone and together pass
#   prepare_server_args and check_server_args, fa3 chosen as without them).
# - `SGLANG_EMBEDDINGS_SPARSE_HEAD=sparse_linear.pt` (environment): from the box that served
#   BGE-M3 sparse embeddings, where SGLang loads the model's sparse_linear.pt head when this
#   variable names it (sgl-project/sglang#10869 "Implement BGE-M3 Sparse Embeddings in SGLang",
#   whose start script is `SGLANG_EMBEDDINGS_SPARSE_HEAD=sparse_linear.pt; export
#   SGLANG_EMBEDDINGS_SPARSE_HEAD`; issue #10026); the export stayed in the user's start script.
#   Read only when the model class is built (srt/environ.py:835; model_loader/loader.py:314-316),
#   which neither prepare_server_args nor check_server_args does, so the dry run passes. The
#   launcher starts the scheduler (TpModelWorker -> ModelRunner, process group up), which loads the
#   model: model_executor/model_runner.py:902 load_model -> model_loader/loader.py:790
#   _initialize_model -> :301-321, which adds sparse_head and model_path to the constructor's
#   kwargs (only XLMRobertaModel takes them, models/roberta.py:211) -> model_class(**kwargs):
#   "TypeError: LlamaForCausalLM.__init__() got an unexpected keyword argument 'sparse_head'", in
#   "Scheduler hit an exception"; the server exits [value: the kwarg the variable feeds and the
#   model class; the variable's name appears nowhere]. Phase: model construction in the scheduler,
#   after the process group, before any weight is read (so before the KV pool and CUDA graphs).
#   Ran (prepare_server_args and check_server_args pass with it set; _initialize_model on the
#   ModelConfig and LoadConfig built from them raises exactly this, before any tensor is made);
#   the scheduler path to it read.
# - `--warmups voice_chat`: from the voice-assistant box, whose MoE speech model used SGLang's
#   custom warmup "voice_chat" to pre-compile its fused-MoE Triton kernels before taking traffic
#   (srt/entrypoints/warmup.py:108-127: "this warms up the fused_moe triton kernels ... if we don't
#   do this we break real time inference for voice chat"; the option's help,
#   server_args.py:1090-1093: "custom warmup functions ... before the server starts listening for
#   requests"). Accepted by prepare_server_args and check_server_args (a free string). The
#   scheduler loads the weights, allocates the KV pool and captures the CUDA graphs; the HTTP
#   server's lifespan (entrypoints/http_server.py:266) then runs the warmups before it listens
#   (:376-383 -> warmup.py:28-38 "Running warmup voice_chat"): 511 generate requests of random
#   input_ids drawn below 2**16, the first of 4 tokens. The tokenizer manager checks only their
#   length (managers/tokenizer_manager.py:983-1006; its vocab check :1129 is never called), the
#   async OOB probe of the embedding is off by default (layers/vocab_parallel_embedding.py:562-568,
#   utils/async_probe.py:124), so the prefill gathers rows 512 and above of a 512-row embedding:
#   the CUDA index kernel's "Assertion `srcIndex < srcSelectDimSize` failed." and
#   "torch.AcceleratorError: CUDA error: device-side assert triggered" (at the next sync), in
#   "Scheduler hit an exception"; the server exits before it listens [value: voice_chat on the
#   "Running warmup" line and warmups='voice_chat' on the server_args line; the assert names the
#   embedding gather, tempting a look at the tokenizer or the vocabulary]. Phase: the server's
#   warmup, after the weights, the KV pool and the CUDA graphs, before the HTTP port accepts
#   requests. Ran (prepare_server_args and check_server_args pass with it, warmups='voice_chat';
#   the warmup registry holds voice_chat; the model config's vocab_size is 512); the lifespan path
#   and the device-side assert (its exact wording: medium confidence) read.
USERBAD7_sglang="SGLANG_EMBEDDINGS_SPARSE_HEAD=sparse_linear.pt --enable-pdmux --warmups voice_chat"
