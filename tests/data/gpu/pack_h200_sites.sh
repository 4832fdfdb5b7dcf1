#!/usr/bin/env bash
# Pack real vLLM 0.24.0 and SGLang 0.5.16 for the lent H200 (issue 23), run HERE from the
# project's root. Unlike ../shared/gpu/pack-h200.sh (wheels, installed there), the wheels are
# installed here into two site folders for Python 3.12 x86-64 (pip --target --platform: nothing is
# compiled, so that is what an install there would write) and each is sent as a zstd tar: 25 % fewer
# bytes than the wheels, so fewer device calls, and no pip run on the device's clock.
#   ../shared/gpu/vllm-0.24.0-h200-wheels.txt   -> vsite (1.1 GB; 297 MB as .tzst)
#   ../shared/gpu/sglang-0.5.16-h200-wheels.txt -> ssite (1.8 GB; SGLang's own transformers/tokenizers)
#   optuna's set, pydantic's, zstandard, pandas -> bsite (bringup's own needs, before an engine is there;
#                                                 pandas for vLLM's sweep in the tuners step)
# Writes .carry/gpu (bringup/, tests/data/gpu/*.sh|*.py, bsite.tgz, parts.txt: NAME COUNT MD5) and
# .carry/p/NN/ (one folder per device call, parts of PART_MIB: a call carries at most 64 MiB with the
# work tree). Call 00 carries .carry/gpu too, so its part is smaller by that much.
# h200_driver.sh (on the device) waits for the parts in /tmp/z and unpacks them.
set -euo pipefail
# SITES="vsite" packs vLLM alone (a session with little device time left); default both engines.
sites=${SITES:-vsite ssite}
root=$(pwd)
shared=${SHARED:-$root/../shared/gpu}
work=${WORK:-/tmp/gw}
carry=${CARRY:-$root/.carry}
# PART_MIB: a call carries 64 MiB in all, the work tree (about 18 MB since the GPU runs' folders were
# committed) included; 46 (48.2 MB) was refused on 2026-12-06 with that tree, 36 (37.7 MB) leaves room
part=$((${PART_MIB:-36} * 1024 * 1024))
plat=()
for p in manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 \
  manylinux2014 manylinux1 manylinux_2_5; do plat+=(--platform "${p}_x86_64"); done
pyargs=(--only-binary=:all: --python-version 3.12 --implementation cp)
mkdir -p "$work"
fetch() {  # fetch DIR ARGS...: wheels into $work/DIR
  local d=$1
  shift
  [ -d "$work/$d" ] || python3 -m pip download -q --no-deps "${pyargs[@]}" "${plat[@]}" -d "$work/$d" "$@"
}
site() {  # site NAME WHEELDIR: pre-installed site folder
  [ -d "$work/$1" ] || python3 -m pip install -q --no-index --no-deps --no-compile "${pyargs[@]}" \
    --abi cp312 --abi cp310 --abi abi3 --abi none "${plat[@]}" --platform any --target "$work/$1" "$work/$2"/*.whl
  rm -rf "$work/$1/bin"
}
fetch vw -r "$shared/vllm-0.24.0-h200-wheels.txt"
[[ $sites == *ssite* ]] && fetch sw -r "$shared/sglang-0.5.16-h200-wheels.txt"
# pandas and its own: `vllm bench sweep serve` (issue 38's tuners step) writes its summary with it
# (vLLM's `bench` extra, not in the engine's list); about 15 MB more in bsite.tgz, so in call 00.
fetch bw optuna==5.0.0 alembic==1.20.1 sqlalchemy==2.1.9 colorlog==6.12.0 mako==1.4.3 greenlet==3.5.6 \
  zstandard==0.25.0 pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2 \
  pandas==2.3.3 python-dateutil==2.9.0.post0 pytz==2025.2 tzdata==2025.2 six==1.17.0
site vsite vw
[[ $sites == *ssite* ]] && site ssite sw
site bsite bw
for s in $sites; do
  [ -f "$work/$s.tzst" ] || (tar cf - -C "$work" "$s" | zstd -q -T0 -12 --long=27 > "$work/$s.tzst")
done
rm -rf "$carry/gpu" "$carry/p"
mkdir -p "$carry/gpu/tests/data/gpu" "$carry/p"
cp -r "$root/bringup" "$carry/gpu/"
find "$carry/gpu" -name __pycache__ -prune -exec rm -rf {} +
cp "$root"/tests/data/gpu/*.sh "$root"/tests/data/gpu/*.py "$root"/benchmarks/dryrun_reality.py "$carry/gpu/tests/data/gpu/"
mkdir -p "$carry/gpu/benchmarks"  # issue 38's steps (h200_steps.sh tuners, lgcheck)
cp "$root"/benchmarks/tuners_*.py "$root"/benchmarks/tuners_grid.yaml "$root"/benchmarks/vllm_cli.py \
  "$root"/benchmarks/loadgen_compare.py "$carry/gpu/benchmarks/"
mkdir -p "$carry/gpu/tests/data/gpu/h200-2026-12-03"  # the corpus's flags, for dryrun_reality.py
cp "$root"/tests/data/gpu/h200-2026-12-03/corpus-index.txt "$carry/gpu/tests/data/gpu/h200-2026-12-03/"
tar czf "$carry/gpu/bsite.tgz" -C "$work" bsite
# Fill one folder per call up to $part bytes, call 00 counting .carry/gpu: a stream's last part
# and the next stream's first share a call.
python3 - "$work" "$carry" "$part" "$(du -sb "$carry/gpu" | cut -f1)" $sites <<'PY'
import hashlib, os, sys
work, carry, part, used = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
call, lines = 0, []
for name in sys.argv[5:]:
    path, n, md5 = os.path.join(work, name + ".tzst"), 0, hashlib.md5()
    with open(path, "rb") as f:
        while chunk := f.read(part - used):
            md5.update(chunk)
            d = os.path.join(carry, "p", f"{call:02d}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, f"{name}.part.{n:02d}"), "wb") as o:
                o.write(chunk)
            n, used = n + 1, used + len(chunk)
            if used >= part:
                call, used = call + 1, 0
    lines.append(f"{name} {n} {md5.hexdigest()}\n")
open(os.path.join(carry, "gpu", "parts.txt"), "w").writelines(lines)
PY
cat "$carry/gpu/parts.txt"
du -sh "$carry"/gpu "$carry"/p/*
