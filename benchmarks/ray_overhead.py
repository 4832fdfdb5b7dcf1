"""bringup's overhead per trial on a Ray cluster against the local executor.

One scenario trial (the sampler scenario's baseline, a simulated vLLM that fails in about a
second) is run N times, one at a time, through each executor of one prepared run. For each
trial: the driver's span (submit to Done) less the trial's own span (Trial.run on the node) is
what the executor adds: for Ray, scheduling the task, shipping the candidate, the events pushed
through the sink, the outcome and files sent back and written. The first Ray trial on a node
also starts a Ray worker process that imports bringup (cold); the table shows it apart.
The cluster is a local one (a head, and one worker node that replays the scenario's machine),
started and stopped here (tests/raycluster.py); connecting to it is timed apart too.

Run:  .venv/bin/python benchmarks/ray_overhead.py [--trials 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bringup.session.run import Run, RunSettings  # noqa: E402
from bringup.trial.executor import Executor, Job  # noqa: E402
from bringup.trial.rayexec import DOUBLE_GPU, resource_name  # noqa: E402
from tests.raycluster import local_cluster  # noqa: E402

SCENARIO = ROOT / "bringup/data/scenarios/qwen25-7b-sm120-flashinfer-sampler-vllm.yaml"


def spans(r: Run, ex: Executor, n: int, seq0: int) -> list[tuple[float, float]]:
    """(driver's span, trial's own span) per trial, one at a time."""
    out = []
    for i in range(n):
        job = Job(seq0 + i, "search", r.baseline, False, {}, need=r.launcher.need(r.baseline))
        t0 = time.time()
        ex.submit(job)
        d = ex.wait()
        t1 = time.time()
        assert d.run is not None, d.lost_why
        out.append((t1 - t0, d.run.ended - d.run.started))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=8)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ray-overhead-"))
    r = Run(RunSettings(scenario=str(SCENARIO)), root)
    r.prepare()
    r._open()
    local = r._executor()
    loc = spans(r, local, args.trials, 1)
    local.close()

    c = local_cluster()
    try:
        c.start_node("head", {"head": 1}, head=True)
        c.wait_nodes(1)
        c.start_node("a", {resource_name(r.hw_fp): 1, DOUBLE_GPU: 1})
        c.wait_nodes(2)
        r.settings.ray, r.settings.parallel = c.address, "1"
        t0 = time.time()
        ex = r._executor()
        connect = time.time() - t0
        ray_spans = spans(r, ex, args.trials + 1, 100)
        ex.close()
    finally:
        c.stop()

    def row(name: str, s: list[tuple[float, float]]) -> list[str]:
        over = [a - b for a, b in s]
        return [
            name,
            str(len(s)),
            f"{statistics.median(a for a, _ in s):.2f}",
            f"{statistics.median(b for _, b in s):.2f}",
            f"{statistics.median(over):.3f}",
            f"{max(over):.3f}",
        ]

    t = Table(
        title=f"bringup overhead per trial (scenario trial, one at a time; Ray {connect:.1f} s to connect)"
    )
    for col in (
        "executor",
        "trials",
        "driver span s (median)",
        "trial span s (median)",
        "overhead s (median)",
        "overhead s (max)",
    ):
        t.add_column(col)
    t.add_row(*row("local", loc))
    t.add_row(*row("ray, first trial (cold worker)", ray_spans[:1]))
    t.add_row(*row("ray, warm", ray_spans[1:]))
    Console().print(t)


if __name__ == "__main__":
    main()
