#!/usr/bin/env bash
# issue 25 re-run 2: SGLang's child after the torch.cuda.current_device mock (CUDA_VISIBLE_DEVICES="" made torchao's import fail)
set -u
. /tmp/gpu/tests/data/gpu/h200_common.sh
d=/tmp/gpu/tests/data/gpu
kill -KILL "$SEQPID" 2>/dev/null
p=$(pgrep -f "runs-dir /tmp/runs/sglang-dryrun-mistakes")
[ -n "$p" ] && kill -INT $p
while [ -n "$p" ] && kill -0 $p 2>/dev/null; do sleep 1; done
log "seq2: the broken-child sglang-dryrun-mistakes stopped"
mkdir -p $RES/first; mv $RES/sglang-dryrun-* $RES/first/ 2>/dev/null; mv /tmp/runs/sglang-dryrun-mistakes /tmp/runs/sglang-dryrun-mistakes-brokenchild
for s in sglang-dryrun sglang-dryrun-mistakes vllm-nok-dryrun sglang-nok-dryrun; do
  e=${s%%-*}; st=${s#*-}
  timed "$s" 60 bash "$d/h200_$e.sh" "$st"; touch "$RES/$s.done"
done
touch "$RES/SEQ2DONE"
