#!/usr/bin/env bash
# Real vLLM 0.24.0 under bringup on the lent H200 (issue 23). `h200_vllm.sh [STEP...]`, steps
# install doctor defaults mistakes bench tune (all by default; h200_steps.sh says what each does),
# and, named only: dryrun dryrun-mistakes nok-dryrun nok (issue 25), usermistakes
# usermistakes-dryrun usercorpus-late (issue 36).
# Paths and the parts: h200_common.sh; the whole session, both engines: h200_driver.sh.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/h200_common.sh"
E=vllm
SITE=/tmp/vsite
DEF_LAUNCHES=3
BAD_LAUNCHES=7
# Four mistakes of a config brought from another box, each read in vLLM 0.24.0's source:
# - 8 GPUs' worth of tensor parallelism: config/parallel.py "World size (8) is larger than the
#   number of available GPUs (1) in this node";
# - a quantization the checkpoint does not have: model_loader/weight_utils.py "Cannot find the
#   config file for awq" (awq reads quant_config.json / quantize_config.json);
# - a Blackwell MLA attention backend: platforms/cuda.py "Selected backend ... is not valid for this
#   configuration. Reason: [...]" (FLASHINFER_MLA: MLA models, compute capability 10.x);
# - a memory fraction that cannot fit: "Free memory on device ... is less than desired GPU memory
#   utilization" (seen on this machine, ../shared/FACTS.md).
BAD="--tensor-parallel-size 8 --quantization awq --attention-backend FLASHINFER_MLA --gpu-memory-utilization 0.999"
# Issue 36 (steps usermistakes, usermistakes-dryrun): three mistakes in the user's own settings,
# none of whose errors spells a flag, each met in a later phase than the one before, so each
# hides the next (read in vLLM 0.24.0; tests/data/gpu/usercorpus-h200.yaml has each alone):
# - a batch size from another deployment: SchedulerConfig, while the API server builds the
#   config: "max_num_batched_tokens (8192) must be greater than or equal to max_num_seqs (9000)"
#   (config/scheduler.py:286; the H200's default batched tokens, engine/arg_utils.py:2405) [field];
#   the dry run refuses it (create_engine_config)
# - a logits-processor plugin written module.Class where vLLM wants module:Class: the engine core,
#   building the V1 model runner (the plugin also moves vLLM off its V2 runner): "ValueError: not
#   enough values to unpack (expected 2, got 1)" in v1/sample/logits_processor/__init__.py:128
#   [component]
# - a loader option from another engine's recipe: the engine core, as the model loader starts:
#   "Unexpected extra config keys for load format auto: {'num_workers'}"
#   (model_executor/model_loader/default_loader.py:92) [value: a key of the JSON]
# Without the three, vLLM's defaults serve the 8 B model (docs/gpu-h200.md). A person needs 4.
USERBAD="--max-num-seqs 9000 --logits-processors vllm_plugins.NoRepeatNGramProcessor --model-loader-extra-config '{\"enable_multithread_load\": true, \"num_workers\": 16}'"
USER_LAUNCHES=6
# The tuners step's small grids (h200_steps.sh): the knobs most likely to move the tail latency of
# a concurrency-64 load, a prefill chunk that interrupts decodes less and the scheduler's overlap.
TUNERS_KNOB="--max-num-batched-tokens=default,2048"
TUNERS_KNOB2="--async-scheduling=default,off"
. "$here/h200_steps.sh"
main_steps "$@"
