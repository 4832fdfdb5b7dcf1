#!/usr/bin/env bash
# The whole H200 session of issue 23 as one process in its own session (`setsid -f`), so that it
# runs on between device calls: the calls only drop parts into /tmp/z and collect results.
#   setup    bringup's own wheels (bsite), the 8 B random-weight model (make_random_llama.py), its reference computed on
#            the GPU while the parts still travel (the runs find it cached), nvidia-smi
#   then     h200_vllm.sh and h200_sglang.sh steps in order of worth (both engines' bring-ups from
#            defaults, then from the mistaken baselines, then the benches with `transformers serve`
#            on the same GPU and model, then the tunes), each only if the deadline ($DEADLINE_FILE,
#            which a later call may move) leaves it its usual time; SGLang's unpack and help capture
#            run beside vLLM's first launches (CPU and disk, not the GPU)
# Markers: $RES/STEP.done after each step (done or skipped), $RES/ALLDONE at the end.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/h200_common.sh"
[ -f "$DEADLINE_FILE" ] || echo $(($(now) + ${BUDGET:-700})) > "$DEADLINE_FILE"
echo $$ > /tmp/driver.pid
t0=$(now)
log "driver: $(left) s to the deadline"
tar xzf "$GPU_HOME/bsite.tgz" -C /tmp
nvidia-smi > "$RES/nvidia-smi.txt" 2>&1
engine_env ""
{ time python3 "$here/make_random_llama.py" "$M8B" ; } > "$RES/testmodel.txt" 2>&1  # on the GPU: 21-28 s here (docs/gpu-h200.md)
python3 -m bringup testmodel "$TINY" > "$RES/tiny.txt" 2>&1  # the corpus's failing launches serve it
log "model: $(tail -4 "$RES/testmodel.txt" | tr '\n' ' ')"
# The reference (transformers, float32, on the GPU) into the runs' cache, as `bringup run` would.
python3 - "$M8B" "$RUNS/references" > "$RES/reference.txt" 2>&1 <<'PY' &
import sys, time
from pathlib import Path
from bringup.verify.reference import reference_for
t0 = time.time()
ref, why = reference_for(sys.argv[1], "auto", cache_dir=Path(sys.argv[2]), gpu="0", gpu_memory_gib=139.0)
print(f"{why}: {time.time() - t0:.1f} s, {len(ref.prompts) if ref else 0} prompts")
PY
refpid=$!
# SGLang's unpack and help capture run beside vLLM's launches: kept off the GPU (no CUDA context
# that a vLLM memory profile or bringup's GPU-hygiene check would see).
# A session packed with SITES=vsite (little device time left) sends no SGLang: its steps are skipped.
# A session packed with one site (SITES=ssite, say) skips the other engine's install, corpus and steps.
has() { grep -q "^$1 " "$GPU_HOME/parts.txt"; }
sgl() { has ssite; }
sglpid=
if sgl; then
  CUDA_VISIBLE_DEVICES= bash "$here/h200_sglang.sh" install > "$RES/sglang-install.out" 2>&1 &
  sglpid=$!
fi
has vsite && bash "$here/h200_vllm.sh" install doctor > "$RES/vllm-install.out" 2>&1
wait $refpid
log "reference: $(tail -1 "$RES/reference.txt")"
# In order of worth: each engine's two bring-ups, then the benches, then the tunes. The corpora of
# failing launches run beside them, one launch at a time (each checks the deadline first):
#   CORPORA="user" (the default)  h200_usercorpus.sh E early: issue 36's user-setting mistakes that
#                                 fail before the KV cache (their late cases are the steps
#                                 E-usercorpus-late, which want the GPU to themselves)
#   CORPORA="old"                 h200_corpus.sh E: issue 23's argument and import failures
#   CORPORA="old user", or ""     both, or none (NO_CORPUS=1 is "" too)
step() { timed "$@"; touch "$RES/$1.done"; }
CORPORA=${CORPORA-user}
[ -n "${NO_CORPUS:-}" ] && CORPORA=
corpora() {  # corpora ENGINE: the chosen corpora of one engine, one after the other
  local c
  for c in $CORPORA; do
    case $c in
      old) bash "$here/h200_corpus.sh" "$1" > "$RES/corpus-$1.out" 2>&1 ;;
      user) bash "$here/h200_usercorpus.sh" "$1" early > "$RES/usercorpus-$1-early.out" 2>&1 ;;
      *) log "CORPORA: unknown corpus $c" ;;
    esac
  done
}
[ -z "$CORPORA" ] || {
  has vsite && corpora vllm
  [ -n "$sglpid" ] && while kill -0 "$sglpid" 2>/dev/null; do sleep 2; done
  sgl && corpora sglang
} &
# ORDER (a later session may put what is missing first): the steps by name, each with its usual cost.
ORDER=${ORDER:-vllm-defaults sglang-defaults vllm-mistakes sglang-mistakes vllm-bench sglang-bench transformers-bench vllm-tune sglang-tune}
# Usual seconds of the issue-25 steps (a dry run's cold start, then 1-4 launches of 30-110 s) and of
# issue 36's: usermistakes, 3 failing launches (20-50 s each) and one that serves (100-180 s warm,
# 60-120 s more while a cold cache compiles kernels), then the probes; the dry-run variant saves
# vLLM's first launch (a refusal) and SGLang's none; usercorpus-late, vLLM 2 and SGLang 3 tiny-model
# launches that get as far as serving (40-90 s each).
declare -A COST=([vllm-dryrun]=60 [sglang-dryrun]=60 [vllm-dryrun-mistakes]=200 [sglang-dryrun-mistakes]=230
  [vllm-nok-dryrun]=300 [sglang-nok-dryrun]=330 [vllm-nok]=330 [sglang-nok]=360
  [vllm-usermistakes]=300 [sglang-usermistakes]=320 [vllm-usermistakes-dryrun]=280
  [sglang-usermistakes-dryrun]=340 [vllm-usermistakes2]=300 [sglang-usermistakes2]=340 [vllm-usermistakes3]=300 [sglang-usermistakes3]=340 [vllm-usermistakes4]=440 [sglang-usermistakes4]=480 [vllm-usermistakes5]=440 [sglang-usermistakes5]=480 [vllm-usermistakes6]=440 [sglang-usermistakes6]=480 [vllm-usermistakes7]=440 [sglang-usermistakes7]=480 [vllm-usermistakes8]=440 [sglang-usermistakes8]=480 [vllm-usermistakes9]=440 [sglang-usermistakes9]=480 [vllm-usercorpus-late]=180 [sglang-usercorpus-late]=260
  [vllm-lgcheck]=180)
# Issue 38 (h200_steps.sh tuners): launches of 70-90 s (vLLM) and 80-95 s (SGLang, with its 5 s
# teardown) warm; tiny ~7 launches, small ~15, issue ~50.
case ${TUNERS_SIZE:-tiny} in
  tiny) COST[vllm-tuners]=600 COST[sglang-tuners]=660 ;;
  small) COST[vllm-tuners]=1260 COST[sglang-tuners]=1380 ;;
  *) COST[vllm-tuners]=4000 COST[sglang-tuners]=4500 ;;
esac
sglang_ready=
for s in $ORDER; do
  case $s in
    vllm-*) has vsite || continue ;;
    sglang-*)
      sgl || continue
      if [ -z "$sglang_ready" ]; then  # SGLang's unpack and help capture, then its doctor, once
        [ -n "$sglpid" ] && wait "$sglpid"
        bash "$here/h200_sglang.sh" doctor
        sglang_ready=1
      fi ;;
  esac
  case $s in
    vllm-defaults) step "$s" 330 bash "$here/h200_vllm.sh" defaults ;;
    sglang-defaults) step "$s" 300 bash "$here/h200_sglang.sh" defaults ;;
    vllm-mistakes) step "$s" 250 bash "$here/h200_vllm.sh" mistakes ;;
    sglang-mistakes) step "$s" 280 bash "$here/h200_sglang.sh" mistakes ;;
    vllm-bench) step "$s" 150 bash "$here/h200_vllm.sh" bench ;;
    sglang-bench) step "$s" 130 bash "$here/h200_sglang.sh" bench ;;
    transformers-bench)
      # transformers serve's server packages (fastapi, uvicorn, openai) come with vLLM's site
      step "$s" 150 env PYTHONPATH="/tmp/vsite:$GPU_HOME:/tmp/bsite" python3 "$here/serve_bench.py" \
        --engine transformers --model "$M8B" --flags=--continuous-batching --plan 1:8,8:32,64:128 \
        --out "$RES/transformers-bench" > "$RES/transformers-bench.out" 2>&1 ;;
    vllm-tune) step "$s" 420 bash "$here/h200_vllm.sh" tune ;;
    sglang-tune) step "$s" 420 bash "$here/h200_sglang.sh" tune ;;
    vllm-dryrun | sglang-dryrun | vllm-dryrun-mistakes | sglang-dryrun-mistakes | vllm-nok-dryrun | \
      sglang-nok-dryrun | vllm-nok | sglang-nok | vllm-usermistakes | sglang-usermistakes | \
      vllm-usermistakes-dryrun | sglang-usermistakes-dryrun | vllm-usermistakes2 | sglang-usermistakes2 | vllm-usermistakes3 | sglang-usermistakes3 | vllm-usermistakes4 | sglang-usermistakes4 | vllm-usermistakes5 | sglang-usermistakes5 | vllm-usermistakes6 | sglang-usermistakes6 | vllm-usermistakes7 | sglang-usermistakes7 | vllm-usermistakes8 | sglang-usermistakes8 | vllm-usermistakes9 | sglang-usermistakes9 | vllm-usercorpus-late | sglang-usercorpus-late | \
      vllm-tuners | sglang-tuners | vllm-lgcheck)
      # issues 25, 36 and 38 (h200_steps.sh): ENGINE-STEP
      step "$s" "${COST[$s]:-200}" bash "$here/h200_${s%%-*}.sh" "${s#*-}" ;;
    *) log "ORDER: unknown step $s" ;;
  esac
done
log "driver: done in $(($(now) - t0)) s"
touch "$RES/ALLDONE"
