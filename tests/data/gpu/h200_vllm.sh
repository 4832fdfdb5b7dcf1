#!/usr/bin/env bash
# Real vLLM 0.24.0 under bringup on the lent H200 (issue 23). `h200_vllm.sh [STEP...]`, steps
# install doctor defaults mistakes bench tune (all by default; h200_steps.sh says what each does).
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
# The tuners step's small grids (h200_steps.sh): the knobs most likely to move the tail latency of
# a concurrency-64 load, a prefill chunk that interrupts decodes less and the scheduler's overlap.
TUNERS_KNOB="--max-num-batched-tokens=default,2048"
TUNERS_KNOB2="--async-scheduling=default,off"
. "$here/h200_steps.sh"
main_steps "$@"
