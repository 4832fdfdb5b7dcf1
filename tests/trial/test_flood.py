"""Issue 40, item 3: the trial's log reader is bounded like `explain`'s. An engine printing
10 million short lines left a trial with no verdict after 15 minutes and growing memory (it kept,
and matched against every signature, every line). Now the trial keeps a bounded selection (head,
distinct, notable, tail: bringup/observe/logread.py `LineKeeper`), reads a line seen several times
(numbers ignored) without matching it again, and holds at most a few reads of the pipe, so memory is
flat in the number of lines and the fatal line ends the trial at once. The figures at 10 million
lines: benchmarks/trial_flood.py (docs/hardening.md)."""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

import pytest

from bringup.core.candidate import Candidate
from bringup.engines.base import Engine
from bringup.trial.launch import Trial, TrialSettings
from bringup.trial.process import MAX_LINE
from tests.paths import TESTS


def _flood(tmp: Path, n: int, *extra: str) -> tuple[Trial, object, int]:
    """A trial of the flooding fake engine (N lines, a fatal CUDA traceback, then it hangs), with
    the peak of what Python allocated meanwhile."""

    class Flood(Engine):
        def launch_argv(self, cand, host, port):
            return [sys.executable, str(TESTS / "flood_engine.py"), str(n), str(tmp / "stamp"), *extra]

    trial = Trial(
        Flood("vllm"), Candidate.make("vllm", "flood", {}), tmp / "t", TrialSettings(hang_timeout=60)
    )
    tracemalloc.start()
    try:
        out = trial.run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return trial, out, peak


@pytest.mark.slow
def test_memory_is_flat_in_the_number_of_lines_and_the_fatal_line_still_ends_the_trial(tmp_path):
    _flood(tmp_path / "warm", 500)  # the first trial of a process loads the classifier: not measured
    small_trial, small, small_peak = _flood(tmp_path / "small", 10_000)
    big_trial, big, big_peak = _flood(tmp_path / "big", 50_000)
    for out in (small, big):  # the fake hangs after its traceback: only the fatal line ends the trial
        assert (out.status, out.failure_class) == ("fails", "device-assert"), out.evidence
        assert out.signature == "cuda-illegal-memory-access"
        assert out.timings.fatal_to_teardown is not None
    # Five times the lines, not five times the memory (before: every line kept twice; 18 -> 33 MB
    # traced, and 45 s -> 212 s).
    assert big_peak < small_peak * 1.5 + (2 << 20), (small_peak, big_peak)
    kept = big_trial.keeper.lines()
    assert len(kept) <= 400 + 3000 + 100 and big_trial.keeper.total > 50_000
    assert kept[-1].startswith("RuntimeError: CUDA error: an illegal memory access")  # the tail is whole
    assert (tmp_path / "big" / "t" / "server.log").stat().st_size > 50_000 * 80  # the log keeps every line


@pytest.mark.slow
def test_a_line_that_never_ends_is_cut_not_held(tmp_path):
    """64 MiB without a newline: the reader holds one cut line, and the trial still sees the fatal line."""
    trial, out, peak = _flood(tmp_path, 10, "--long-line", str(64 << 20))
    assert (out.status, out.failure_class) == ("fails", "device-assert"), out.evidence
    assert peak < 32 << 20, peak
    assert max(len(t) for t in trial.keeper.lines()) < MAX_LINE + 100
