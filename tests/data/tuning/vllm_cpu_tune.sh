#!/bin/bash
# Issue 26: a tune with repeats on a run validated on the vLLM CPU build (run inside flock).
# Usage: flock /tmp/bringup-engine.lock tests/data/tuning/vllm_cpu_tune.sh  (needs a tiny model at /tmp/tuning-tiny:
#   python -c "from bringup.testmodel.tiny import write_test_model; write_test_model('/tmp/tuning-tiny')")
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD
PY=${PY:-.venv/bin/python}
mkdir -p /tmp/tuning-real
R=/tmp/tuning-real/runs
date -u +%FT%TZ > /tmp/tuning-real/start
set -x
$PY -m bringup run --engine vllm --model /tmp/tuning-tiny --baseline "--gpu-memory-utilization 0.15" --runs-dir $R --timeout 300 --json > /tmp/tuning-real/run.json 2> /tmp/tuning-real/run.err
RUN=$($PY -c "import json;print(json.load(open('/tmp/tuning-real/run.json'))['run_id'])")
T0=$(date +%s)
$PY -m bringup tune --run $RUN --knobs max-num-seqs,max-num-batched-tokens --trials 3 --finalists 1 --repeats 5 --num-prompts 16 --concurrency 4 --sweep "" --slo ttft_p99=5s --runs-dir $R > /tmp/tuning-real/tune.out 2> /tmp/tuning-real/tune.err
echo "rc $? wall $(( $(date +%s) - T0 )) s" >> /tmp/tuning-real/tune.out
