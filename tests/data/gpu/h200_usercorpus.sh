#!/usr/bin/env bash
# Issue 36, item 6: real failing launches of the real engines on the H200, each from the engine's
# working defaults for the tiny test model ($TINY) plus ONE user setting that is wrong, chosen so
# that no line of the failure spells the setting's flag or variable: the error quotes the value
# the user gave, names the setting's destination (a config field), is raised inside the component
# the value selects, or names nothing at all. The cases, their predicted errors (with the source
# line each was read from) and link kinds: tests/data/gpu/usercorpus-h200.yaml. bringup classifies
# the logs afterwards, off the device; nothing is decided here.
#
#   h200_usercorpus.sh vllm|sglang [early|late|all]
#   UC_CASES=usercorpus2-h200.sh h200_usercorpus.sh ...   another corpus's cases, in place of these
#
# early  mistakes that fail before the engine sizes its KV cache (argument and config checks,
#        imports, tokenizer and chat template, model loaders, model construction, weight load):
#        each holds at most a CUDA context and the tiny model's weights, so they run beside other
#        GPU work (UC_PAR at a time, default 1: a bring-up's teardown check calls a GPU "held"
#        while memory is above its pre-launch reading, and waits for it to come back; one case at a
#        time with a pause between gives it that moment)
# late   mistakes that fail after the KV cache is sized (a connector, an attention backend built on
#        the memory pool) or on the first request once the engine serves: one at a time, after
#        waiting for a quiet GPU (SGLang sizes its pool from what is free)
#
# Each case: the engine's own CLI in its own process group, a deadline (UC_EARLY_S, default 120 s;
# UC_LATE_S, 300 s), its log $RES/usercorpus/E-NAME.log (the engine's output only, unchanged), a
# line in $RES/usercorpus/index.txt (stage, rc, seconds, port, environment and flags). A `late_req`
# case that serves gets the first requests bringup's probes send (a streamed completion with
# logprobs, a chat completion); their answers go to E-NAME.requests.txt, not into the log.
# Markers: $RES/usercorpus/E-STAGE.done when a stage has run (or was skipped).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/h200_common.sh"
E=${1:-}
STAGE=${2:-all}
case "$E" in
  vllm) engine_env /tmp/vsite
    CMD=(python3 -m vllm.entrypoints.cli.main serve "$TINY")
    # 3 % of the GPU (4.2 GiB): vLLM checks at start-up that this much is free, so a case started
    # beside a bring-up at 0.95 still starts; the late cases' KV cache fits in it many times.
    BASE=(--gpu-memory-utilization 0.03)
    PORT0=18400 ;;
  sglang) engine_env /tmp/ssite
    CMD=(python3 -m sglang.launch_server --model-path "$TINY")
    # The tiny model's working SGLang settings on the H200 (../shared/FACTS.md): its default fa3
    # backend dies capturing the prefill graph on this model; triton serves it.
    BASE=(--mem-fraction-static 0.04 --attention-backend triton)
    PORT0=18800 ;;
  *) echo "usage: h200_usercorpus.sh vllm|sglang [early|late|all]" >&2; exit 2 ;;
esac
case "$STAGE" in early | late | all) ;; *) echo "stage: early, late or all" >&2; exit 2 ;; esac
OUTD=$RES/usercorpus
UC=/tmp/uc  # the cases' paths and modules are under here, and none of them exists
mkdir -p "$OUTD" "$UC"
PAR=${UC_PAR:-1}
EARLY_S=${UC_EARLY_S:-120}
LATE_S=${UC_LATE_S:-300}
n=0

gpu_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1 | tr -d ' '; }

# quiet_gpu SECONDS: wait until the GPU holds under 4 GiB (bounded); a late case sizes its cache
# from what is free.
quiet_gpu() {
  local t0 used
  t0=$(now)
  while :; do
    used=$(gpu_used)
    [ -n "$used" ] && [ "$used" -lt 4096 ] && return 0
    if [ $(($(now) - t0)) -ge "$1" ]; then
      log "usercorpus $E: the GPU still holds ${used:-?} MiB after $1 s; the case runs anyway"
      return 1
    fi
    sleep 3
  done
}

# requests PORT OUT PID: once the server answers /health (not if PID dies first), the first
# requests of bringup's probe ladder (bringup/verify/probes.py probe_completion, probe_chat),
# their answers into OUT.
requests() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, os, sys, time, urllib.error, urllib.request
port, out, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
def alive():
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
base = f"http://127.0.0.1:{port}"
def call(path, body=None, timeout=60):
    req = urllib.request.Request(base + path, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except Exception as e:  # refused, reset, timed out: the server is not (or no longer) there
        return None, f"{type(e).__name__}: {e}"
with open(out, "w") as f:
    t0 = time.time()
    code = None
    while time.time() - t0 < 600 and alive():
        code, _ = call("/health", timeout=5)
        if code == 200:
            break
        time.sleep(2)
    f.write(f"GET /health: {code} after {time.time() - t0:.0f} s\n")
    if code != 200:
        sys.exit(0)
    model = None
    code, text = call("/v1/models")
    try:
        model = json.loads(text)["data"][0]["id"]
    except Exception:
        pass
    f.write(f"GET /v1/models: {code} {text[:300]}\n")
    for path, body in (
        ("/v1/completions", {"model": model, "prompt": "The quick brown fox", "max_tokens": 16,
                             "temperature": 0, "stream": True, "stream_options": {"include_usage": True},
                             "logprobs": 2}),
        ("/v1/chat/completions", {"model": model, "max_tokens": 16, "temperature": 0,
                                  "messages": [{"role": "user", "content": "Say hello in one sentence."}]}),
    ):
        t1 = time.time()
        code, text = call(path, body, timeout=120)
        f.write(f"POST {path}{' (stream)' if body.get('stream') else ''}: {code} in {time.time() - t1:.1f} s\n{text[:2000]}\n")
        f.flush()
PY
}

# run_case STAGE LIMIT REQ PORT NAME [VAR=VALUE...] FLAGS...: the engine with the base flags (less
# any the case sets itself) and the case's, in its own process group, to its end or LIMIT seconds.
run_case() {
  local stage=$1 limit=$2 req=$3 port=$4 name=$5 t0 rc pid rpid= log base=() envs=() i
  shift 5
  while [ $# -gt 0 ] && [[ $1 =~ ^[A-Z_][A-Z0-9_]*= ]]; do envs+=("$1"); shift; done
  for ((i = 0; i < ${#BASE[@]}; i += 2)); do
    [[ " $* " == *" ${BASE[i]} "* ]] || base+=("${BASE[i]}" "${BASE[i + 1]}")
  done
  log=$OUTD/$E-$name.log
  t0=$(now)
  setsid env "${envs[@]}" "${CMD[@]}" --port "$port" "${base[@]}" "$@" > "$log" 2>&1 &
  pid=$!
  if [ -n "$req" ]; then
    requests "$port" "$OUTD/$E-$name.requests.txt" "$pid" &
    rpid=$!
  fi
  while kill -0 "$pid" 2>/dev/null && [ $(($(now) - t0)) -lt "$limit" ]; do
    sleep 1
    # a served request case: its answers are in, the server lives on: give a crash 5 s to show
    if [ -n "$req" ] && grep -q '^POST /v1/chat' "$OUTD/$E-$name.requests.txt" 2>/dev/null; then
      sleep 5
      break
    fi
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null; sleep 3; kill -KILL -- "-$pid" 2>/dev/null
    if [ -n "$req" ] && grep -q '^POST /v1/chat' "$OUTD/$E-$name.requests.txt" 2>/dev/null; then
      echo "[usercorpus: served; the first requests' answers are in $E-$name.requests.txt; process group killed after $(($(now) - t0)) s]" >> "$log"
    else
      echo "[usercorpus: still running after $(($(now) - t0)) s; process group killed]" >> "$log"
    fi
  fi
  wait "$pid" 2>/dev/null; rc=$?
  [ -n "$rpid" ] && { kill "$rpid" 2>/dev/null; wait "$rpid" 2>/dev/null; }
  printf '%s %s stage=%s rc=%s %ss port=%s env=[%s] flags: %s\n' "$E" "$name" "$stage" "$rc" \
    "$(($(now) - t0))" "$port" "${envs[*]}" "${base[*]} $*" >> "$OUTD/index.txt"
}

# spawn STAGE LIMIT REQ NAME ...: run_case in the background once a slot is free (PAR at a time for
# the early stage, one for the late), if the session's deadline leaves the case its limit.
spawn() {
  local stage=$1 limit=$2 req=$3 name=$4 par=1
  shift 3
  [ "$stage" = early ] && par=$PAR
  n=$((n + 1))
  while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do wait -n 2>/dev/null || sleep 1; done
  if [ "$(left)" -lt $((limit + 20)) ]; then
    log "usercorpus $E $name: skipped, $(left) s left"
    echo "$E $name stage=$stage skipped: $(left) s to the deadline" >> "$OUTD/index.txt"
    return 0
  fi
  local port=$((PORT0 + 10 * n))
  if [ "$stage" = late ]; then
    port=$((port + 200))  # apart from the early cases', which may still run in the background
    quiet_gpu 120
  fi
  run_case "$stage" "$limit" "$req" "$port" "$@" &
  sleep 3  # between cases: a moment when a bring-up's teardown check sees its GPU back
}
early() { [ "$STAGE" = late ] || spawn early "$EARLY_S" "" "$@"; }
late() { [ "$STAGE" = early ] || spawn late "$LATE_S" "" "$@"; }
late_req() { [ "$STAGE" = early ] || spawn late "$LATE_S" req "$@"; }
stage_done() { wait; [ "$STAGE" = "$1" ] || [ "$STAGE" = all ] && touch "$OUTD/$E-$1.done"; true; }

# The late stage alone (a driver step) waits a while for this engine's early stage, if it runs in
# the background, to end: the late cases want the GPU and the CPU to themselves.
if [ "$STAGE" = late ] && [ -f "$OUTD/$E-early.started" ] && [ ! -f "$OUTD/$E-early.done" ]; then
  t0=$(now)
  while [ ! -f "$OUTD/$E-early.done" ] && [ $(($(now) - t0)) -lt "${UC_WAIT_EARLY:-180}" ]; do sleep 3; done
  [ -f "$OUTD/$E-early.done" ] || log "usercorpus $E late: the early stage still runs after ${UC_WAIT_EARLY:-180} s"
fi
[ "$STAGE" = late ] || touch "$OUTD/$E-early.started"

if [ -n "${UC_CASES:-}" ]; then
  # another corpus's cases (a file beside this one: its own `early`, `late`, `late_req` and
  # `stage_done` calls for each engine, on $E), in place of the first corpus's below
  . "$here/$UC_CASES"
elif [ "$E" = vllm ]; then
  # early: import, argument and config checks (API server), then the engine core's start
  early logging-level-verbose VLLM_LOGGING_LEVEL=VERBOSE
  early modelscope-on VLLM_USE_MODELSCOPE=true
  early chat-template-missing --chat-template "$UC/llama-3-instruct.jinja"
  early hf-config-path-missing --hf-config-path "$UC/Meta-Llama-3-8B-Instruct"
  early max-num-seqs-9000 --max-num-seqs 9000
  early spec-ngram-lookup --speculative-config '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5, "prompt_lookup_max": 2}'
  early visible-devices-1 CUDA_VISIBLE_DEVICES=1
  early worker-extension-missing --worker-extension-cls uc_rlhf.WorkerExtension
  early logits-processors-dotted --logits-processors uc_plugins.NoRepeatNGramProcessor
  early loader-extra-config-key --model-loader-extra-config '{"enable_multithread_load": true, "num_workers": 16}'
  early load-format-sharded --load-format sharded_state
  early quantization-bitsandbytes --quantization bitsandbytes
  early kv-cache-dtype-ds-mla --kv-cache-dtype fp8_ds_mla
  early hf-overrides-vocab --hf-overrides '{"vocab_size": 256}'
  stage_done early
  # late: after the memory profile, then on the first request
  late kv-connector-mooncake --kv-transfer-config '{"kv_connector": "MooncakeConnector", "kv_role": "kv_both"}'
  late_req gen-config-repetition --override-generation-config '{"repetition_penalty": 0}'
  stage_done late
else
  # early: argument parsing and ServerArgs (main process), then the scheduler's model load
  early config-file-missing --config "$UC/sglang-serve.yaml"
  early log-level-verbose --log-level verbose
  early config-parser-mistral --model-config-parser mistral
  early model-impl-mindspore --model-impl mindspore
  early page-size-48 --page-size 48
  early chat-template-missing --chat-template "$UC/llama-3-instruct.jinja"
  early visible-devices-1 CUDA_VISIBLE_DEVICES=1
  early load-format-gguf --load-format gguf
  early loader-extra-config-key --model-loader-extra-config '{"enable_multithread_load": true, "max_workers": 16}'
  early override-hidden-act --json-model-override-args '{"hidden_act": "gelu_pytorch_tanh"}'
  early torchao-int8wo --torchao-config int8wo
  stage_done early
  # late: the attention backend built on the memory pool, then the first requests
  late attention-dual-chunk --attention-backend dual_chunk_flash_attn
  late_req stream-interval-0 --stream-interval 0
  late_req skip-tokenizer-init --skip-tokenizer-init
  stage_done late
fi
log "usercorpus $E $STAGE: $(grep -c "^$E " "$OUTD/index.txt" 2>/dev/null || echo 0) cases in the index"
