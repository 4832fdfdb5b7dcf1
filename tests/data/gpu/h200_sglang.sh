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
# The tuners step's small grids (h200_steps.sh), as for vLLM: the prefill chunk, and the running batch.
TUNERS_KNOB="--chunked-prefill-size=default,2048"
TUNERS_KNOB2="--max-running-requests=default,64"
. "$here/h200_steps.sh"

# Issue 37, lessons that travel (docs/lessons.md). Two device calls, each on a fresh machine:
#   lessons        `bringup run` from SGLang's own defaults on a fresh runs folder, minimizing the
#                  fix (delta debugging: the lesson's `minimal: true`), then `bringup lessons export`:
#                  the lesson file comes back as $RES/sglang-lessons.yaml
#   with-lessons   the same run on a fresh runs folder with only that file (LESSONS=..., default
#                  $RES/sglang-lessons.yaml; carry it into the call): launches to validated (target 1)
# Run: `h200_sglang.sh install lessons` in one call, then, with the file carried in a new call,
# `LESSONS=$PWD/sglang-lessons.yaml h200_sglang.sh install with-lessons` (the 8 B model made first, as
# h200_driver.sh does: make_random_llama.py into $M8B).
LESSON_FLAGS=(--timeout 900 --hang-timeout 180 --max-launches 6 --json)
step_lessons() {
  local runs="$RUNS/$E-lessons-$(now)"
  mkdir -p "$runs" "$RUNS/references"
  ln -s "$RUNS/references" "$runs/references"
  python3 -m bringup run --engine "$E" --model "$M8B" "${LESSON_FLAGS[@]}" --max-minimize-launches 3 \
    --runs-dir "$runs" > "$RES/$E-lessons-run.json" 2> "$RES/$E-lessons-run.err"
  python3 -m bringup lessons export "$(run_id "$RES/$E-lessons-run.json")" --runs-dir "$runs" \
    -o "$RES/$E-lessons.yaml" 2> "$RES/$E-lessons-export.err"
  python3 -m bringup lessons list "$RES/$E-lessons.yaml" > "$RES/$E-lessons-list.txt" 2>&1
  log "$E lessons: $(grep -c '^- id:' "$RES/$E-lessons.yaml" 2>/dev/null || echo 0) lesson(s) in $RES/$E-lessons.yaml"
}

step_with_lessons() {
  local runs="$RUNS/$E-with-lessons-$(now)" file=${LESSONS:-$RES/$E-lessons.yaml}
  [ -s "$file" ] || { log "$E with-lessons: no lesson file $file"; return 1; }
  mkdir -p "$runs"
  python3 -m bringup run --engine "$E" --model "$M8B" "${LESSON_FLAGS[@]}" --no-minimize --lessons "$file" \
    --runs-dir "$runs" > "$RES/$E-with-lessons.json" 2> "$RES/$E-with-lessons.err"
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print("validated", d["validated"], "launches",
d["launches"], "lessons", [(u["id"], u["how"], u["first"]) for u in d["lessons"]], d["lessons_refused"])' \
    "$RES/$E-with-lessons.json" | tee "$RES/$E-with-lessons.txt"
}

main_steps "$@"
