"""A trial against an engine that floods its log: memory and the time from the fatal line to
teardown, by the number of lines (issue 40, item 3).

A fake engine (tests/flood_engine.py) prints N metrics-like lines, then a fatal CUDA traceback,
then hangs; each N runs in a fresh process through the real `Trial` (launch, the log reader, the
classifier, teardown). Columns: the lines, the trial process's peak RSS (interpreter and imports
included), bringup's own fatal-line-to-teardown (`timings.fatal_to_teardown`: from when its reader
got the fatal line to the end of teardown), the wall time from the fake's printing of the fatal
line to the verdict (the outcome written), the whole trial's seconds, and the class found.

    python benchmarks/trial_flood.py [--lines 10000,100000,1000000,10000000] [--distinct]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOOD = ROOT / "tests" / "flood_engine.py"


def one(n: int, distinct: bool) -> dict:
    """One trial in this process (run by the parent with --one)."""
    from bringup.core.candidate import Candidate
    from bringup.engines.base import Engine
    from bringup.trial.launch import Trial, TrialSettings

    tmp = Path(tempfile.mkdtemp(prefix="bringup-flood-"))
    stamp = tmp / "fatal-printed"

    class Flood(Engine):
        def launch_argv(self, cand, host, port):
            return [sys.executable, str(FLOOD), str(n), str(stamp), *(["--distinct"] if distinct else [])]

    t0 = time.time()
    out = Trial(
        Flood("vllm"),
        Candidate.make("vllm", "flood", {}),
        tmp / "trial",
        TrialSettings(timeout=7200, hang_timeout=600),
    ).run()
    verdict = time.time()
    printed = float(stamp.read_text()) if stamp.exists() else None
    return {
        "lines": n,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "fatal_to_teardown": out.timings.fatal_to_teardown,
        "printed_to_verdict": (verdict - printed) if printed else None,
        "seconds": verdict - t0,
        "class": f"{out.failure_class} / {out.phase}",
        "log_mb": (tmp / "trial" / "server.log").stat().st_size / 2**20,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", default="10000,100000,1000000,10000000")
    ap.add_argument("--distinct", action="store_true", help="no line repeats another, even numbers ignored")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one is not None:
        print(json.dumps(one(a.one, a.distinct)))
        return
    print(
        f"{'lines':>10} {'peak MB':>8} {'fatal->teardown s':>18} {'printed->verdict s':>19} "
        f"{'trial s':>8} {'log MB':>7}  class / phase"
    )
    for n in [int(x) for x in a.lines.split(",")]:
        argv = [sys.executable, __file__, "--one", str(n), *(["--distinct"] if a.distinct else [])]
        r = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
        print(
            f"{r['lines']:>10,} {r['peak_mb']:>8.0f} {r['fatal_to_teardown'] or 0:>18.2f} "
            f"{r['printed_to_verdict'] or 0:>19.2f} {r['seconds']:>8.1f} {r['log_mb']:>7.0f}  {r['class']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
