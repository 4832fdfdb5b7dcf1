"""Issue 2 measures on the real vLLM CPU build.

- Fail-fast latency: seconds from the fatal log line (as bringup read it) to teardown complete,
  over failing trials of two kinds: a start-up failure (--gpu-memory-utilization 0.99) and a
  failure while serving (the head_dim 16 model dies on its first request).
- Trial overhead: bringup's own time per working trial beyond the engine's time to ready,
  split into pre-launch work, readiness detection lag, probes and teardown.

Run:  .venv/bin/python benchmarks/trial_latency.py [--failing 3] [--working 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bringup.core.candidate import Candidate
from bringup.engines.targets import resolve_target
from bringup.testmodel.tiny import TestModelSpec, write_test_model
from bringup.trial.launch import Trial, TrialSettings
from bringup.verify.probes import ProbeConfig


def run(model: Path, flags: dict, out: Path, n: int) -> list:
    t0 = time.monotonic()
    target = resolve_target(engine="vllm", model=str(model))
    resolve_s = time.monotonic() - t0
    res = []
    for i in range(n):
        cand = Candidate.make("vllm", target.model, flags)
        trial = Trial(
            target.engine,
            cand,
            out / f"{model.name}-{i}-{time.time_ns()}",
            TrialSettings(timeout=300, hang_timeout=120, probe=ProbeConfig()),
            spec=target.spec,
            version=target.version,
        )
        o = trial.run()
        res.append(o)
        print(
            f"  {model.name} {flags}: {o.status} {o.failure_class or ''} {o.phase or ''} "
            f"fatal->teardown={o.timings.fatal_to_teardown}",
            file=sys.stderr,
        )
    return [(o, resolve_s) for o in res]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--failing", type=int, default=3, help="trials of each failing kind")
    ap.add_argument("--working", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the raw figures here")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bringup-bench-"))
    m64 = write_test_model(tmp / "tiny64")
    m16 = write_test_model(tmp / "tiny16", TestModelSpec(head_dim=16))
    startup = run(m64, {"--gpu-memory-utilization": "0.99"}, tmp / "runs", a.failing)
    serving = run(m16, {"--gpu-memory-utilization": "0.3"}, tmp / "runs", a.failing)
    working = run(m64, {"--gpu-memory-utilization": "0.3"}, tmp / "runs", a.working)

    c = Console()
    t = Table(title="Fail-fast latency (fatal line read -> teardown complete, real vLLM CPU build)")
    for col in ("failure", "trials", "median s", "max s", "class / phase"):
        t.add_column(col)
    all_ff = []
    for name, rows in (
        ("start-up: --gpu-memory-utilization 0.99", startup),
        ("serving: head_dim 16, first request", serving),
    ):
        ff = [o.timings.fatal_to_teardown for o, _ in rows if o.timings.fatal_to_teardown is not None]
        all_ff += ff
        o = rows[0][0]
        t.add_row(
            name,
            str(len(ff)),
            f"{statistics.median(ff):.2f}",
            f"{max(ff):.2f}",
            f"{o.failure_class} / {o.phase}",
        )
    t.add_row(
        "all failing trials", str(len(all_ff)), f"{statistics.median(all_ff):.2f}", f"{max(all_ff):.2f}", ""
    )
    c.print(t)

    t2 = Table(title="Trial overhead per working trial (seconds, median)")
    for col in (
        "engine to ready",
        "pre-launch",
        "ready lag",
        "probes",
        "teardown",
        "bringup total beyond ready",
    ):
        t2.add_column(col)
    med = lambda xs: statistics.median(xs)  # noqa: E731
    tr = [o.timings for o, _ in working]
    t2.add_row(
        f"{med([x.to_ready for x in tr]):.1f}",
        f"{med([x.overhead for x in tr]):.2f}",
        f"{med([x.ready_lag for x in tr]):.2f}",
        f"{med([x.probes for x in tr]):.2f}",
        f"{med([x.teardown for x in tr]):.2f}",
        f"{med([x.total - x.to_ready for x in tr]):.2f}",
    )
    c.print(t2)
    c.print(f"target resolution (engine version + cached --help): {working[0][1]:.2f} s once per command")
    if a.json:
        a.json.write_text(
            json.dumps(
                {
                    "fail_fast": all_ff,
                    "startup": [o.timings.model_dump() for o, _ in startup],
                    "serving": [o.timings.model_dump() for o, _ in serving],
                    "working": [o.timings.model_dump() for o, _ in working],
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
