#!/usr/bin/env bash
# Issue 15 on the lent 2-GPU H200 machine (run from the repo root with $OUT set; the Python 3.12
# wheels that `transformers serve` needs travel in .whl/, see docs/gpu-h200.md). Doctor, then four
# real trials through the local executor (two at once, one across both GPUs alone), then the same
# bring-up with --parallel 2 and --parallel 1 for the wall time.
set -u
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_HUB_DISABLE_UPDATE_CHECK=1 TRANSFORMERS_NO_ADVISORY_WARNINGS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD
M=/tmp/llama-6l
BAD="--device cuda:0 --attn-implementation flash_attention_2 --quantization bnb-4bit --compile"
t0=$(date +%s)
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
python3 -m bringup doctor --json > "$OUT/doctor.json" 2> "$OUT/doctor.err"
python3 tests/data/gpu/make_random_llama.py "$M" --layers 6 2>&1 | tail -2
echo "model $(( $(date +%s) - t0 )) s"
timeout 240 python3 tests/data/gpu/slots_demo.py "$M" /tmp/slots > "$OUT/slots.txt" 2>&1; echo "slots rc $?"
cat "$OUT/slots.txt" | tail -8
cp /tmp/slots/slots.json "$OUT/" 2>/dev/null
for p in 2 1; do
  s=$(date +%s)
  timeout 200 python3 -m bringup run --engine transformers --model "$M" --baseline "$BAD" --runs-dir /tmp/runs-p$p \
      --parallel $p --gpus 0,1 --no-minimize --hang-timeout 120 --timeout 300 --json > "$OUT/run-p$p.json" 2> "$OUT/run-p$p.err"
  echo "parallel $p rc $? wall $(( $(date +%s) - s )) s"; tail -2 "$OUT/run-p$p.err"
done
nvidia-smi --query-gpu=index,memory.used --format=csv
ps -eo pid,pgid,etimes,args | grep -v grep | grep -E "transformers|bringup" | head
tar czf "$OUT/runs.tgz" -C /tmp runs-p2 runs-p1 slots --exclude='*.safetensors' 2>/dev/null
echo "elapsed $(( $(date +%s) - t0 )) s"
ls -la "$OUT"
