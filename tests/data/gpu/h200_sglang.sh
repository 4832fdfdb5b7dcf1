#!/usr/bin/env bash
# Real SGLang 0.5.16 under bringup on the lent H200 (issue 23). `h200_sglang.sh [STEP...]`, steps
# install doctor defaults mistakes bench tune (all by default; h200_steps.sh says what each does).
# Paths and the parts: h200_common.sh; the whole session, both engines: h200_driver.sh.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/h200_common.sh"
E=sglang
SITE=/tmp/ssite
DEF_LAUNCHES=4
BAD_LAUNCHES=7
# Three mistakes of a config brought from another box, each read in SGLang 0.5.16's source:
# - 8 GPUs' worth of tensor parallelism on a machine of one;
# - a quantization the checkpoint does not have: model_loader/weight_utils.py "Cannot find the
#   config file for awq";
# - a Blackwell attention backend: server_args.py "TRTLLM MHA backend for prefill is only
#   supported on Blackwell GPUs (SM100)".
BAD="--tp-size 8 --quantization awq --attention-backend trtllm_mha"
# The tuners step's small grids (h200_steps.sh), as for vLLM: the prefill chunk, and the running batch.
TUNERS_KNOB="--chunked-prefill-size=default,2048"
TUNERS_KNOB2="--max-running-requests=default,64"
. "$here/h200_steps.sh"
main_steps "$@"
