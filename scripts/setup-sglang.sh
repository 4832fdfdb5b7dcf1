#!/usr/bin/env bash
# Install real SGLang into its own venv, .venv-sglang (idempotent), for `make test-sglang`.
# SGLang 0.5.23 brings a CUDA build of PyTorch: about 11 GB and several minutes, which is why it
# lives apart from .venv (the vLLM CPU build) and out of `make test`. On a machine without a GPU
# it still parses its arguments and prints its effective configuration before it fails in model
# construction (`No module named 'vllm'`): enough to drive bringup's help parser, parse-args
# classification, effective-configuration reader and failure classification for real.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON311:-python3.11}
SGLANG=${SGLANG_VERSION:-0.5.23}
VENV=${BRINGUP_SGLANG_VENV:-.venv-sglang}
stamp="$VENV/.bringup-setup"
want="$(sha256sum scripts/setup-sglang.sh | cut -c1-16)-sglang-$SGLANG"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$VENV/bin/python" ]; then
  echo "setup-sglang: up to date ($VENV, sglang $SGLANG)"
  exit 0
fi
start=$(date +%s)
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "sglang==$SGLANG"
# The launcher's module must import and its help must run: that is what the tests drive.
"$VENV/bin/python" -m sglang.launch_server --help >/dev/null
echo "$want" > "$stamp"
echo "setup-sglang: installed sglang $SGLANG into $VENV in $(( $(date +%s) - start )) s ($(du -sh "$VENV" | cut -f1))"
