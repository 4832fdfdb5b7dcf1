"""A traceback the engine logs at WARNING does not end the trial (fail fast reads the log level).

Seen on the real vLLM CPU build (2026-12-05, `--skip-tokenizer-init`): the API server logs "Chat
template warmup failed" and its traceback, every line at WARNING, ending in "ValueError: Tokenizer
not available when `skip_tokenizer_init=True`", and goes on to start. The generic exception
signature matched that last line as fatal, and the trial killed a server that was starting, one
second later. Here a stand-in engine prints the same WARNING lines, waits, then dies with an
ERROR line: the trial must wait for the ERROR, and say that one.
"""

from __future__ import annotations

import sys
import time

from bringup.core.candidate import Candidate
from bringup.engines.base import Engine
from bringup.observe.tracebacks import logged_benign
from bringup.trial.launch import Trial, TrialSettings

WARN = "(APIServer pid=1) WARNING 12-05 06:09:45 [base.py:380] "
LINES = [
    WARN + "Chat template warmup failed",
    WARN + "Traceback (most recent call last):",
    WARN + '  File "/x/vllm/renderers/base.py", line 373, in warmup',
    WARN + "ValueError: Tokenizer not available when `skip_tokenizer_init=True`",
]
LATER = "(EngineCore pid=2) ERROR 12-05 06:09:49 [core.py:1510] RuntimeError: boom after the warning"
WARNING_BLOCK = "\n".join(LINES)
SCRIPT = (
    "import sys, time\n"
    f"print({WARNING_BLOCK!r}, flush=True)\n"
    "time.sleep(2.5)\n"
    f"print({LATER!r}, flush=True)\n"
    "time.sleep(60)\n"
)


class Caught(Engine):
    def launch_argv(self, cand, host, port):
        return [sys.executable, "-c", SCRIPT]


def test_the_level_of_a_line_is_read_from_its_prefix():
    assert all(logged_benign(line) for line in LINES)
    assert not logged_benign(LATER)
    assert not logged_benign("ValueError: no prefix, no level")  # a bare stderr line says nothing


def test_a_warning_level_traceback_does_not_end_the_trial_and_the_error_after_it_does(tmp_path):
    trial = Trial(
        Caught("vllm"), Candidate.make("vllm", "m", {}), tmp_path / "t", TrialSettings(hang_timeout=30)
    )
    t0 = time.monotonic()
    out = trial.run()
    took = time.monotonic() - t0
    assert out.status == "fails"
    assert any("boom after the warning" in e for e in out.evidence), out.evidence
    assert took >= 2.5  # it waited past the WARNING lines for the line that ended the server
    assert took < 25  # and the ERROR line ended it at once, not the hang timeout


def test_a_refused_request_is_evidence_and_a_server_error_only_when_the_log_says_nothing():
    from bringup.observe.outcome import ProbeResult
    from bringup.trial.launch import _probe_answer

    def probe(detail: str, kind: str) -> ProbeResult:
        return ProbeResult(
            name="completion", passed=False, detail=detail, seconds=0.1, phase="first-request", kind=kind
        )

    refused = probe(
        "POST /v1/completions: HTTP 400: Tokenizer not available when `skip_tokenizer_init=True`", "disagree"
    )
    broke = probe("POST /v1/chat/completions: HTTP 500: {}", "server-error")
    assert _probe_answer(refused, "incompatible-options") == f"probe completion: {refused.detail}"
    assert _probe_answer(broke, "unknown") == f"probe completion: {broke.detail}"
    assert _probe_answer(broke, "incompatible-options") is None  # the log's own reading stands
    assert _probe_answer(probe("HTTP 400: ... NaN", "nan"), "nan-output") is None  # its class says it
    assert _probe_answer(None, "unknown") is None


def test_the_lines_a_server_printed_before_bringup_stopped_it():
    from bringup.observe.logread import LineKeeper

    k = LineKeeper(head=2, tail=2)
    for i in range(6):
        k.add(f"line {i} " + "x" * i, True)
    assert k.lines() == [f"line {i} " + "x" * i for i in range(6)]
    assert k.lines(before=3) == [f"line {i} " + "x" * i for i in range(3)]
