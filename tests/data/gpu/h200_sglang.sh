#!/usr/bin/env bash
# Real SGLang 0.5.16 under bringup on the lent H200 (issue 23). `h200_sglang.sh [STEP...]`, steps
# install doctor defaults mistakes bench tune (all by default; h200_steps.sh says what each does),
# and, named only: dryrun dryrun-mistakes nok-dryrun nok (issue 25), usermistakes
# usermistakes-dryrun usercorpus-late (issue 36).
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
# Issue 36 (steps usermistakes, usermistakes-dryrun): three mistakes in the user's own settings,
# none of whose errors spells a flag, each met in a later phase than the one before, so each
# hides the next (read in SGLang 0.5.16; tests/data/gpu/usercorpus-h200.yaml has each alone),
# beside one setting that is right (--mem-fraction-static 0.8: room for the corpus's processes
# that may run beside it; SGLang's own default served this model alone, docs/gpu-h200.md):
# - a Mistral-format config parser on a Hugging Face checkpoint: ServerArgs.__post_init__ builds
#   the model config: "FileNotFoundError: File not found /tmp/m8b, params.json"
#   (utils/hf_transformers/mistral_utils.py:303, from server_args.py:4328) [component];
#   bringup's dry run calls a FileNotFoundError "cannot check", so it refuses nothing here
# - a page size from another backend's recipe: check_server_args, before any process starts:
#   "AssertionError: chunked_prefill_size must be divisible by page_size" (server_args.py:7637)
#   [field]
# - a config override from another model's recipe: the scheduler, building the model:
#   "ValueError: Unsupported activation: gelu_pytorch_tanh. Only silu is supported for now."
#   (models/llama.py:104) [value]
# A person needs 4.
USERBAD="--mem-fraction-static 0.8 --model-config-parser mistral --page-size 48 --json-model-override-args '{\"hidden_act\": \"gelu_pytorch_tanh\"}'"
USER_LAUNCHES=6
. "$here/h200_steps.sh"
main_steps "$@"
