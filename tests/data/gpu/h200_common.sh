# Sourced by h200_vllm.sh, h200_sglang.sh and h200_driver.sh (issue 23): the H200 machine's
# paths, the clock every step checks, and how a pre-installed engine site is put together from
# the parts that the device calls left in /tmp/z (tests/data/gpu/pack_h200_sites.sh makes them).
# Every path is outside the work tree: the device re-sends the tree at each call, /tmp stays
# while the machine is warm.
GPU_HOME=${GPU_HOME:-/tmp/gpu}   # this project's bringup/ and tests/data/gpu/, copied from .carry/gpu
RUNS=${RUNS:-/tmp/runs}          # one runs folder (journal, references) for every engine
RES=${RES:-/tmp/res}             # what comes back: jsons, stderr, steps.log (collect tars it)
M8B=${M8B:-/tmp/m8b}             # the 8 B random-weight Llama (make_random_llama.py)
TINY=${TINY:-/tmp/tiny}          # the 2-layer test Llama (bringup testmodel): the corpus's failing launches
Z=${Z:-/tmp/z}                   # the parts, as the calls leave them
DEADLINE_FILE=${DEADLINE_FILE:-/tmp/deadline}   # epoch seconds: no step may run past it
mkdir -p "$RES" "$RUNS" "$Z"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_HUB_DISABLE_UPDATE_CHECK=1 TRANSFORMERS_NO_ADVISORY_WARNINGS=1
# The machine's own settings (KINDS.md): NVLink multicast stays off, also for the engines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

now() { date +%s; }
left() { local d; d=$(cat "$DEADLINE_FILE" 2>/dev/null || echo $(($(now) + 100000))); echo $((d - $(now))); }
log() { echo "[$(date -u +%T)] $*" | tee -a "$RES/steps.log" >&2; }

# engine_env SITE: bringup and the engine's own site on the path (the engine's first: SGLang pins
# its transformers and tokenizers over the image's).
engine_env() { export PYTHONPATH="${1:+$1:}$GPU_HOME:/tmp/bsite"; }
# `python3 -m` and `-c` put the working directory first on the path: run from this copy of
# bringup, never from the call's work tree (the session's checkout, whatever its state).
cd "$GPU_HOME" 2>/dev/null || true

# unpack_site NAME: wait for NAME's parts (count and md5 in $GPU_HOME/parts.txt), then unpack the
# zstd tar into /tmp/NAME. Idempotent: /tmp/NAME/.ok marks a finished unpack.
unpack_site() {
  local name=$1 n md5 got t0
  [ -f "/tmp/$name/.ok" ] && return 0
  read -r n md5 < <(awk -v s="$name" '$1 == s {print $2, $3}' "$GPU_HOME/parts.txt")
  t0=$(now)
  while [ "$(ls "$Z"/"$name".part.* 2>/dev/null | wc -l)" -lt "$n" ]; do
    [ "$(left)" -le 0 ] && { log "$name: parts missing at the deadline"; return 1; }
    sleep 2
  done
  got=$(cat "$Z"/"$name".part.* | md5sum | cut -d' ' -f1)
  [ "$got" = "$md5" ] || { log "$name: md5 $got, expected $md5"; return 1; }
  if command -v zstd >/dev/null; then
    cat "$Z"/"$name".part.* | zstd -dc --long=27 | tar xf - -C /tmp
  else  # the zstandard wheel travels in bsite
    cat "$Z"/"$name".part.* | PYTHONPATH=/tmp/bsite python3 -c '
import sys, tarfile, zstandard
r = zstandard.ZstdDecompressor(max_window_size=2**31).stream_reader(sys.stdin.buffer)
tarfile.open(fileobj=r, mode="r|").extractall("/tmp", filter="fully_trusted")'
  fi || { log "$name: unpack failed"; return 1; }
  touch "/tmp/$name/.ok"
  log "$name: $n parts waited for and unpacked in $(($(now) - t0)) s"
}

# timed NAME COST CMD...: run CMD if COST seconds are left before the deadline, else skip it;
# CMD gets SIGINT at the deadline (bringup tears its servers down on it), SIGKILL 30 s later.
timed() {
  local name=$1 cost=$2 t0 rc
  shift 2
  if [ "$(left)" -lt "$cost" ]; then
    log "SKIP $name: $(left) s left, needs about $cost"
    return 99
  fi
  t0=$(now)
  log "START $name ($(left) s left)"
  timeout -s INT -k 30 "$(left)" "$@"
  rc=$?
  log "END $name rc=$rc in $(($(now) - t0)) s"
  return $rc
}

# run_id FILE: the run id of a `bringup run --json` output.
run_id() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$1" 2>/dev/null; }
