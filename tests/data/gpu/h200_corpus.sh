#!/usr/bin/env bash
# Real failures of the real engines on the H200 for the log corpus (issue 23, item 4): each
# command below is the engine's own CLI (not bringup) with one mistake of the kinds users bring
# from another box, run to its failure under a deadline, its log kept as $RES/corpus/E-NAME.log.
# bringup classifies them here afterwards (tests/engines/test_gpu_logs.py); nothing is decided on the device.
#
#   h200_corpus.sh vllm|sglang
#
# Every mistake is one that fails before the engine allocates GPU memory (argument validation, a
# package or a file that is not there, a device or parallel size the machine lacks), so the script
# runs beside the bring-ups. In case one starts after all, each command serves the tiny model
# (bringup testmodel, $TINY) with a memory fraction of 4 % (about 6 GiB beside a bring-up's 90 %),
# in its own process group, killed at 75 s; its log then says so.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/h200_common.sh"
E=$1
case "$E" in
  vllm) engine_env /tmp/vsite
    CMD=(python3 -m vllm.entrypoints.cli.main serve "$TINY" --port 18431 --gpu-memory-utilization 0.04) ;;
  sglang) engine_env /tmp/ssite
    CMD=(python3 -m sglang.launch_server --model-path "$TINY" --port 18432 --mem-fraction-static 0.04) ;;
  *) echo "usage: h200_corpus.sh vllm|sglang" >&2; exit 2 ;;
esac
mkdir -p "$RES/corpus"

one() {  # one NAME FLAGS...: the engine with these flags, to its end or 75 s
  local name=$1 t0 rc
  shift
  t0=$(now)
  [ "$(left)" -lt 100 ] && { log "corpus $E $name: skipped, $(left) s left"; return 0; }
  setsid "${CMD[@]}" "$@" > "$RES/corpus/$E-$name.log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null && [ $(($(now) - t0)) -lt 75 ]; do sleep 1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null; sleep 3; kill -KILL -- "-$pid" 2>/dev/null
    echo "[corpus: still running after 75 s; process group killed]" >> "$RES/corpus/$E-$name.log"
  fi
  wait "$pid" 2>/dev/null; rc=$?
  echo "$E $name rc=$rc $(($(now) - t0))s $*" >> "$RES/corpus/index.txt"
}

if [ "$E" = vllm ]; then
  one tp8 --tensor-parallel-size 8
  one pp2 --pipeline-parallel-size 2
  one awq --quantization awq
  one modelopt-fp4 --quantization modelopt_fp4
  one ray --distributed-executor-backend ray
  one max-model-len --max-model-len 999999
  one dtype-float8 --dtype float8
  one kv-fp9 --kv-cache-dtype fp9
  one hf-overrides-json --hf-overrides '{num_hidden_layers: 2'
  one batched-tokens --max-model-len 4096 --max-num-batched-tokens 1024 --no-enable-chunked-prefill
  one spec-eagle --speculative-config '{"method": "eagle", "model": "/tmp/no-such-draft", "num_speculative_tokens": 2}'
  one attn-mla --attention-backend FLASHINFER_MLA
else
  one dtype-float8 --dtype float8
  one kv-fp9 --kv-cache-dtype fp9
  one trtllm-mha --attention-backend trtllm_mha
  one base-gpu-id --base-gpu-id 3
  one context-length --context-length 999999
  one override-json --json-model-override-args '{num_hidden_layers: 2'
  one spec-eagle --speculative-algorithm EAGLE
  one fa4 --attention-backend fa4
  one tp8 --tp-size 8
  one dp-attention --enable-dp-attention
fi
log "corpus $E: $(wc -l < "$RES/corpus/index.txt") logs so far"
