"""Check bringup/facts/gpus.py against a real GPU (run on a GPU machine; prints one JSON object).

A child process that holds GPU memory must be named as busy; after its process group is killed
the watch must see the memory come back; a holder that stays must be reported as held, and the
next launch refused until it is gone. Needs PyTorch with CUDA and nvidia-ml-py.

Status: written on the transformers branch and not yet run on a GPU (the GPU machine runs the
main checkout); run it there once merged: PYTHONPATH=. python3 scripts/gpu_hygiene_check.py
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict

from bringup.facts import gpus, hardware

HOLD = (
    "import time, torch; x = torch.empty({gib} * 2**30, dtype=torch.uint8, device='cuda'); "
    "print('held', flush=True); time.sleep(600)"
)


def holder(gib: int) -> subprocess.Popen:
    p = subprocess.Popen(
        [sys.executable, "-c", HOLD.format(gib=gib)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def kill(p: subprocess.Popen) -> float:
    t0 = time.monotonic()
    os.killpg(p.pid, signal.SIGTERM)
    p.wait()
    return time.monotonic() - t0


def main() -> None:
    out: dict = {}
    r = gpus.read_usage()
    out["idle"] = {"source": r.source, "problems": r.problems, "gpus": [asdict(g) for g in r.gpus]}
    watch = gpus.GpuWatch(settle_timeout=20, poll=0.1)
    msgs, held, rec = watch.before_launch(None)
    out["before_first_launch"] = {"messages": msgs, "held": held is not None, "record": rec}
    p = holder(20)
    out["while_holding"] = gpus.describe_busy(gpus.read_usage(), None)
    out["holder_pid"] = p.pid
    out["kill_s"] = kill(p)
    msgs, rec = watch.after_teardown(None)
    out["after_kill"] = {"messages": msgs, "record": rec}

    stay = gpus.GpuWatch(settle_timeout=3, poll=0.5)
    stay.before_launch(None)
    p = holder(10)
    out["holder2_pid"] = p.pid
    msgs, rec = stay.after_teardown(None)
    out["held_after_teardown"] = {"messages": msgs, "record": rec}
    msgs, held, rec = stay.before_launch(None)
    out["next_launch"] = {"refused": held is not None, "evidence": held.evidence() if held else []}
    kill(p)
    time.sleep(1)
    msgs, held, rec = stay.before_launch(None)
    out["after_holder_gone"] = {"refused": held is not None, "messages": msgs}

    snap = hardware.snapshot(smem=None)
    out["smem"] = {
        "source": snap.sources.get("smem"),
        "gpus": [(g.index, g.name, g.multiprocessor_count, g.smem_per_block_optin) for g in snap.gpus],
    }
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
