#!/usr/bin/env bash
# A device call's end of the H200 session (issue 23): wait for a marker of h200_driver.sh
# (STEP.done, e.g. sglang-defaults.done, or ALLDONE) or the deadline, stop the driver if the deadline passed, and put the
# results into $OUT as at most 8 files: res.tgz (jsons, stderr, bench folders with server.log),
# runs.tgz (the runs folder: every trial's server.log, the journal), steps.log, driver.log.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/h200_common.sh"
marker=${1:-ALLDONE}
limit=${2:-560}   # a call lasts at most 600 s
t0=$(now)
while [ ! -f "$RES/$marker" ] && [ "$(left)" -gt 0 ] && [ $(($(now) - t0)) -lt "$limit" ]; do sleep 3; done
if [ "$marker" = ALLDONE ] && [ ! -f "$RES/ALLDONE" ] && [ "$(left)" -le 0 ] && [ -f /tmp/driver.pid ]; then
  pg=$(ps -o pgid= -p "$(cat /tmp/driver.pid)" | tr -d ' ')
  [ -n "$pg" ] && { kill -INT -- "-$pg"; sleep 25; kill -KILL -- "-$pg" 2>/dev/null; }
  log "collect: driver stopped at the deadline"
fi
nvidia-smi --query-gpu=memory.used --format=csv,noheader > "$RES/gpu-after.txt" 2>&1
ps -eo pid,pgid,etimes,args | grep -E "vllm|sglang|transformers|bringup" | grep -v grep > "$RES/ps-after.txt"
tar czf "$OUT/res.tgz" -C /tmp res
tar czf "$OUT/runs.tgz" --exclude='references' -C /tmp runs
cp "$RES/steps.log" "$OUT/" 2>/dev/null
cp /tmp/driver.log "$OUT/" 2>/dev/null
ls -la "$OUT"; cat "$RES/steps.log"
