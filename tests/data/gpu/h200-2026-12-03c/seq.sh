#!/usr/bin/env bash
# issue 25 re-run: the dry-run steps after the vLLM child's warm-up fix (the first child died on HF_HUB_OFFLINE)
set -u
. /tmp/gpu/tests/data/gpu/h200_common.sh
d=/tmp/gpu/tests/data/gpu
# the driver would start vllm-nok next (a repeat): stop the driver's loop only, let the running step end
kill -KILL "$(cat /tmp/driver.pid)" 2>/dev/null
log "seq: driver loop stopped; waiting for the running step"
while pgrep -f "runs-dir /tmp/runs/vllm-nok-dryrun" >/dev/null; do
  [ "$(date +%s)" -ge "${STOP_NOK:-0}" ] && { kill -INT $(pgrep -f "runs-dir /tmp/runs/vllm-nok-dryrun"); sleep 20; }
  sleep 2
done
log "seq: vllm-nok-dryrun (child broken = no dry run) ended"
mv /tmp/runs/vllm-nok-dryrun /tmp/runs/vllm-nok-brokenchild 2>/dev/null; mv $RES/vllm-nok-dryrun.json $RES/vllm-nok.json; mv $RES/vllm-nok-dryrun.err $RES/vllm-nok.err
mkdir -p $RES/first; mv $RES/vllm-dryrun-* $RES/first/ 2>/dev/null; mv /tmp/runs/vllm-dryrun-mistakes /tmp/runs/vllm-dryrun-mistakes-brokenchild
for s in vllm-dryrun vllm-dryrun-mistakes sglang-dryrun sglang-dryrun-mistakes sglang-nok-dryrun vllm-nok-dryrun; do
  e=${s%%-*}; st=${s#*-}
  timed "$s" 60 bash "$d/h200_$e.sh" "$st"; touch "$RES/$s.done"
done
touch "$RES/SEQDONE"
