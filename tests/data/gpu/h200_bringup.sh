#!/usr/bin/env bash
# The real GPU bring-up of issue 11 on the lent H200 machine (run from the repo root with $OUT set;
# the Python 3.12 wheels that `transformers serve` and the tuner need travel in .whl/, see
# docs/facts.md). Phases: `run` (doctor, an 8 B random-weight model, `bringup run` from a bad baseline),
# `tune` (the model again, `bringup run` to validated, `bringup tune`, `bringup bench` against the
# validated command). Everything that comes back is under $OUT.
set -u
phase=${1:-run}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_HUB_DISABLE_UPDATE_CHECK=1 TRANSFORMERS_NO_ADVISORY_WARNINGS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD
R=/tmp/runs
M=/tmp/llama8b
BAD="--attn-implementation flash_attention_2 --quantization bnb-4bit --continuous-batching --cb-max-memory-percent 0.99 --compile"
t0=$(date +%s)
python3 -c 'import transformers, torch; print("transformers", transformers.__version__, "torch", torch.__version__)'
python3 -m bringup doctor --json > "$OUT/doctor.json" 2> "$OUT/doctor.err"
{ time python3 tests/data/gpu/make_random_llama.py "$M" ; } 2>&1 | tail -5
nvidia-smi --query-gpu=memory.used,memory.total --format=csv
if [ "$phase" = run ]; then
  { time python3 -m bringup run --engine transformers --model "$M" --baseline "$BAD" --runs-dir "$R" \
      --max-minimize-launches 3 --hang-timeout 300 --timeout 600 --json > "$OUT/run.json" ; } 2> "$OUT/run.err"
  tail -3 "$OUT/run.err"
else
  python3 -m bringup run --engine transformers --model "$M" --baseline "$BAD" --runs-dir "$R" --max-minimize-launches 2 \
      --json > "$OUT/run2.json" 2> "$OUT/run2.err"
  tar czf "$OUT/runs-run.tgz" -C /tmp runs 2>/dev/null
  rid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$OUT/run2.json")
  cmd=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["final_command"])' "$OUT/run2.json")
  echo "validated: $cmd"
  setsid bash -c "exec $cmd --host 127.0.0.1 --port 8123" > "$OUT/bench-server.log" 2>&1 &
  spid=$!
  for i in $(seq 1 120); do curl -sf http://127.0.0.1:8123/health >/dev/null && break; sleep 1; done
  { time python3 -m bringup bench --url http://127.0.0.1:8123 --model "$M" --num-prompts 32 --sweep-concurrency 1,8 \
      --input-len 128 --output-len 64 --no-ignore-eos --json > "$OUT/bench.json" ; } 2> "$OUT/bench.err"
  kill -TERM -- -$spid 2>/dev/null; wait $spid 2>/dev/null
  sleep 2; nvidia-smi --query-gpu=memory.used --format=csv
  { time timeout 200 python3 -m bringup tune --run "$rid" --trials 3 --num-prompts 32 --concurrency 8 --input-len 128 \
      --output-len 64 --runs-dir "$R" --json > "$OUT/tune.json" ; } 2> "$OUT/tune.err"
  tail -4 "$OUT/tune.err"
  ps -eo pid,pgid,etimes,args | grep -v grep | grep -E "transformers|bringup" | head
fi
echo "elapsed $(( $(date +%s) - t0 )) s"
tar czf "$OUT/runs.tgz" -C /tmp runs 2>/dev/null
nvidia-smi --query-gpu=memory.used --format=csv
ls -la "$OUT"
