#!/usr/bin/env bash
# Issue 15 continued, and issue 11's reference probe on a GPU: on the lent 2 x H200 machine (repo
# root, $OUT set, wheels in .whl/ as in h200x2_parallel.sh). A bring-up with --parallel 2 whose
# reference (6-layer Llama, 5.2 GiB in float32: over the host's quick-copy cap) is computed on a free
# GPU in a child process; then `bringup tune` of transformers' continuous-batching knobs with
# --parallel 2 and --parallel 1 (wall time, points on their own GPUs).
set -u
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_HUB_DISABLE_UPDATE_CHECK=1 TRANSFORMERS_NO_ADVISORY_WARNINGS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD
M=/tmp/llama-6l
t0=$(date +%s)
python3 tests/data/gpu/make_random_llama.py "$M" --layers 6 2>&1 | tail -1
s=$(date +%s)
timeout 200 python3 -m bringup run --engine transformers --model "$M" --runs-dir /tmp/runs-ref --parallel 2 --gpus 0,1 \
  --baseline "--device cuda:0 --attn-implementation flash_attention_2" --max-minimize-launches 2 --hang-timeout 120 \
  --timeout 300 --json > "$OUT/run-ref.json" 2> "$OUT/run-ref.err"
echo "run rc $? wall $(( $(date +%s) - s )) s"; tail -2 "$OUT/run-ref.err"
CFG="--device cuda:0 --continuous-batching"
for p in 2 1; do
  s=$(date +%s)
  timeout 170 python3 -m bringup tune --engine transformers --model "$M" --config "$CFG" \
    --knobs=--cb-max-batch-tokens,--cb-max-memory-percent --trials 4 --objective throughput --sweep '' \
    --num-prompts 16 --concurrency 8 --input-len 64 --output-len 32 --timeout 300 --reference none \
    --parallel $p --gpus 0,1 --runs-dir /tmp/runs-tune-p$p --json > "$OUT/tune-p$p.json" 2> "$OUT/tune-p$p.err"
  echo "tune parallel $p rc $? wall $(( $(date +%s) - s )) s"; tail -3 "$OUT/tune-p$p.err"
done
nvidia-smi --query-gpu=index,memory.used --format=csv
ps -eo pid,pgid,etimes,args | grep -v grep | grep -E "transformers|bringup" | head
tar czf "$OUT/runs2.tgz" -C /tmp runs-ref runs-tune-p2 runs-tune-p1 --exclude='*.safetensors' --exclude='*.journal' 2>/dev/null
echo "elapsed $(( $(date +%s) - t0 )) s"
