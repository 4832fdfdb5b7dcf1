# Sourced by h200_vllm.sh and h200_sglang.sh after they set E (engine), SITE (its unpacked site),
# BAD (the mistaken baseline) and the launch budgets: the steps of issue 23, the same for both.
#   install   wait for the engine's parts, unpack them, print the version and capture the
#             engine's --help once (bringup caches it per version)
#   doctor    `bringup doctor` with the engine's site on the path
#   defaults  `bringup run` from the engine's own defaults (no baseline), the 8 B model
#   mistakes  `bringup run` from $BAD, the same model
# Each bring-up has a runs folder (journal) of its own, so that neither starts from what the other
# validated (a journal's known-good configuration is launched first: the measure would be 1);
# they share the model's reference, computed once ($RUNS/references).
#   bench     serve the validated configuration, `bringup bench` at concurrency 1, 8 and 64
#   tune      a short `bringup tune` of the validated configuration (2 points, no sweep)
# Issue 36 (run only when named):
#   usermistakes         `bringup run` from $USERBAD (three mistakes of user settings whose errors
#                        name no flag: the script that sets E says which and why) with --dry-run
#                        never: every mistake met by a launch; a person needs 4
#   usermistakes-dryrun  the same with --dry-run auto (the engine's own checks refuse what they can)
#   usercorpus-late      h200_usercorpus.sh E late: the user-setting corpus's cases that need the
#                        GPU to themselves (the early ones run in the driver's background)
#   tuners    issue 38: `bringup tune` against the engine's own tuner (vLLM's `vllm bench sweep serve`,
#             SGLang's bench_serving over a grid), side by side, then a final round of both winners
#             and the defaults (benchmarks/tuners_side_by_side.py; docs/tuning.md, "Against the
#             engines' own tuners"). TUNERS_SIZE=tiny (default: 2-point grid, about 7 launches),
#             small (4 points, about 15), issue (32 points, bringup within 30 % of them: about 50, more than a session);
#             TUNERS_RANGE=0.5 for the mixed-length workload (default 0: fixed lengths)
#   lgcheck   issue 38: bringup's load generator against `vllm bench serve` on one vLLM server, the
#             same prompts, alternating (benchmarks/loadgen_compare.py; within 3 %)
engine_env "$SITE"
RUN_FLAGS=(--no-minimize --timeout 900 --hang-timeout 180 --json)
runs_for() {  # runs_for STEP: the bring-up's own runs folder, the shared reference linked in
  local d="$RUNS/$E-$1"
  mkdir -p "$d" "$RUNS/references"
  [ -e "$d/references" ] || ln -s "$RUNS/references" "$d/references"
  echo "$d"
}

step_install() {
  unpack_site "$(basename "$SITE")" || return 1
  python3 - "$E" "$RES/help" <<'PY' 2>&1 | tee "$RES/$E-version.txt"
import sys, time
from pathlib import Path
t0 = time.time()
from bringup.engines.base import get_engine
e = get_engine(sys.argv[1])
v = e.version()
h = e.help_text(v)
if h:  # the installed version's own --help comes back: the corpora are read off the device with it
    Path(sys.argv[2]).mkdir(parents=True, exist_ok=True)
    (Path(sys.argv[2]) / f"{sys.argv[1]}-{v}.txt").write_text(h)
print(sys.argv[1], v, "help:", len(h or ""), "chars", f"{time.time() - t0:.1f} s")
PY
  log "$E: installed ($(tail -1 "$RES/$E-version.txt"))"
}

step_doctor() {
  python3 -m bringup doctor --json > "$RES/$E-doctor.json" 2> "$RES/$E-doctor.err"
}

step_defaults() {
  python3 -m bringup run --engine "$E" --model "$M8B" --max-launches "$DEF_LAUNCHES" "${RUN_FLAGS[@]}" \
    --runs-dir "$(runs_for defaults)" > "$RES/$E-defaults.json" 2> "$RES/$E-defaults.err"
}

step_mistakes() {
  python3 -m bringup run --engine "$E" --model "$M8B" --baseline "$BAD" --max-launches "$BAD_LAUNCHES" \
    "${RUN_FLAGS[@]}" --runs-dir "$(runs_for mistakes)" > "$RES/$E-mistakes.json" 2> "$RES/$E-mistakes.err"
}

# Issue 25: the installed engine's own checks (bringup/dryrun/) where the engine really is.
#   dryrun            the dry run on each corpus candidate (h200_corpus.sh's flags, the tiny model):
#                     verdicts only; benchmarks/dryrun_reality.py compare sets them beside the real logs
#   dryrun-mistakes   `mistakes` with --dry-run auto (knowledge on): launches saved
#   nok-dryrun, nok   `mistakes` on signatures alone (--no-knowledge), with and without the dry run:
#                     what the engine's own checks do where no rule was written
step_dryrun() {
  python3 "$GPU_HOME/tests/data/gpu/dryrun_reality.py" verdicts --engine "$E" --model "$TINY" \
    --json "$RES/$E-dryrun-verdicts.json" > "$RES/$E-dryrun-verdicts.out" 2>&1
}

step_dryrun_mistakes() { mistakes_with dryrun-mistakes --dry-run auto; }
step_nok_dryrun() { mistakes_with nok-dryrun --no-knowledge --dry-run auto; }
step_nok() { mistakes_with nok --no-knowledge --dry-run never; }

mistakes_with() {  # mistakes_with NAME FLAGS...: the mistakes bring-up with FLAGS, its own runs folder
  local name=$1
  shift
  python3 -m bringup run --engine "$E" --model "$M8B" --baseline "$BAD" --max-launches "$BAD_LAUNCHES" \
    "${RUN_FLAGS[@]}" "$@" --runs-dir "$(runs_for "$name")" > "$RES/$E-$name.json" 2> "$RES/$E-$name.err"
}

# Issue 36: the three user-setting mistakes of $USERBAD, from a fresh runs folder of their own.
step_usermistakes() { user_with usermistakes --dry-run never; }
step_usermistakes_dryrun() { user_with usermistakes-dryrun --dry-run auto; }
# A second set (issue 36, 2026-12-06): three other mistakes, written by a helper before the run from
# the engines' sources (usermistakes2.sh says which and why), under the default --dry-run auto.
step_usermistakes2() {
  . "$GPU_HOME/tests/data/gpu/usermistakes2.sh"
  local v="USERBAD2_$E"
  USERBAD=${!v} user_with usermistakes2 --dry-run auto
}
# A third set (issue 36, 2026-12-06 afternoon), written the same way and sealed the same way
# (usermistakes3.sh), after the second had been read.
step_usermistakes3() {
  . "$GPU_HOME/tests/data/gpu/usermistakes3.sh"
  local v="USERBAD3_$E"
  USERBAD=${!v} user_with usermistakes3 --dry-run auto
}
# A fourth set (issue 36, 2026-12-06 evening), written the same way by a helper and sealed the same
# way (usermistakes4.sh), after the third had been read.
step_usermistakes4() {
  . "$GPU_HOME/tests/data/gpu/usermistakes4.sh"
  local v="USERBAD4_$E"
  USERBAD=${!v} user_with usermistakes4 --dry-run auto
}
# A fifth set (issue 36, 2026-12-06 night), written the same way by a helper and sealed the same way
# (usermistakes5.sh), after the fourth had been read.
step_usermistakes5() {
  . "$GPU_HOME/tests/data/gpu/usermistakes5.sh"
  local v="USERBAD5_$E"
  USERBAD=${!v} user_with usermistakes5 --dry-run auto
}
# A sixth set (issue 36, 2026-12-07), written the same way by a helper and sealed the same way
# (usermistakes6.sh), after the fifth had been read.
step_usermistakes6() {
  . "$GPU_HOME/tests/data/gpu/usermistakes6.sh"
  local v="USERBAD6_$E"
  USERBAD=${!v} user_with usermistakes6 --dry-run auto
}
# A seventh set (issue 36, 2026-12-07, tenth session), written the same way by a helper and sealed
# the same way (usermistakes7.sh), after the sixth had been read.
step_usermistakes7() {
  . "$GPU_HOME/tests/data/gpu/usermistakes7.sh"
  local v="USERBAD7_$E"
  USERBAD=${!v} user_with usermistakes7 --dry-run auto
}
# An eighth set (issue 36, 2026-12-07, twelfth session), written the same way by a helper and sealed
# the same way (usermistakes8.sh), after the seventh had been read.
step_usermistakes8() {
  . "$GPU_HOME/tests/data/gpu/usermistakes8.sh"
  local v="USERBAD8_$E"
  USERBAD=${!v} user_with usermistakes8 --dry-run auto
}
# A ninth set (issue 36, 2026-12-08, thirteenth session), written the same way by a helper and sealed
# the same way (usermistakes9.sh), after the eighth had been read.
step_usermistakes9() {
  . "$GPU_HOME/tests/data/gpu/usermistakes9.sh"
  local v="USERBAD9_$E"
  USERBAD=${!v} user_with usermistakes9 --dry-run auto
}
step_usercorpus_late() { bash "$GPU_HOME/tests/data/gpu/h200_usercorpus.sh" "$E" late > "$RES/usercorpus-$E-late.out" 2>&1; }

user_with() {  # user_with NAME FLAGS...: `bringup run` from $USERBAD with FLAGS, its own runs folder
  local name=$1
  shift
  python3 -m bringup run --engine "$E" --model "$M8B" --baseline "$USERBAD" --max-launches "$USER_LAUNCHES" \
    "${RUN_FLAGS[@]}" "$@" --runs-dir "$(runs_for "$name")" > "$RES/$E-$name.json" 2> "$RES/$E-$name.err"
}

validated_json() {  # the first run of this engine that validated: its json, then its runs folder
  local s
  for s in defaults mistakes; do
    python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get("validated") else 1)' \
      "$RES/$E-$s.json" 2>/dev/null && { echo "$RES/$E-$s.json $RUNS/$E-$s"; return 0; }
  done
  return 1
}

step_bench() {
  local f d
  read -r f d < <(validated_json) || { log "$E bench: no validated run"; return 1; }
  python3 "$GPU_HOME/tests/data/gpu/serve_bench.py" --engine "$E" --model "$M8B" --run-json "$f" \
    --out "$RES/$E-bench" > "$RES/$E-bench.out" 2>&1
}

step_tune() {
  local f d
  read -r f d < <(validated_json) || { log "$E tune: no validated run"; return 1; }
  python3 -m bringup tune --run "$(run_id "$f")" --trials 2 --sweep '' --num-prompts 64 --concurrency 8 \
    --finalists 1 --repeats 1 --timeout 900 --runs-dir "$d" --json > "$RES/$E-tune.json" 2> "$RES/$E-tune.err"
}

step_tuners() {
  local args
  case ${TUNERS_SIZE:-tiny} in
    tiny) args=(--levels="$TUNERS_KNOB" --peer-runs 2 --bringup-trials 2 --bringup-repeats 0 --final-rounds 1 --final-benches 3) ;;
    small) args=(--levels="$TUNERS_KNOB" --levels="$TUNERS_KNOB2" --peer-runs 2 --bringup-trials 2 --bringup-repeats 0 --final-rounds 3) ;;
    issue) args=(--grid-points 32 --peer-runs 2 --final-rounds 3) ;;
    *) log "tuners: TUNERS_SIZE is tiny, small or issue"; return 2 ;;
  esac
  python3 "$GPU_HOME/benchmarks/tuners_side_by_side.py" --engine "$E" --model "$M8B" --grid "$E-gpu" \
    --input-len 128 --output-len 64 --range-ratio "${TUNERS_RANGE:-0}" --num-prompts 256 --concurrency 64 \
    "${args[@]}" --references "$RUNS/references" --out "$RES/$E-tuners" --svg "$RES/$E-tuners.svg" \
    > "$RES/$E-tuners.out" 2>&1
}

step_lgcheck() {
  [ "$E" = vllm ] || { log "lgcheck: vLLM's bench serve only"; return 0; }
  python3 "$GPU_HOME/benchmarks/loadgen_compare.py" --model "$M8B" --input-len 128 --output-len 64 \
    --concurrency 64 --num-prompts 256 --rounds 4 --tolerance 0.03 --no-wait-quiet \
    --log "$RES/vllm-lgcheck-server.log" --json "$RES/vllm-lgcheck.json" > "$RES/vllm-lgcheck.out" 2>&1
}

main_steps() {
  local s steps=${*:-install doctor defaults mistakes bench tune} rc=0
  for s in $steps; do "step_${s//-/_}" || { rc=$?; log "$E $s: rc $rc"; }; done
  return $rc
}
