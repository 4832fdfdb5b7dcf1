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
from pathlib import Path

from bringup.core.candidate import Candidate
from bringup.engines.base import Engine
from bringup.observe.tracebacks import logged_benign
from bringup.trial.launch import Trial, TrialSettings

ROOT = Path(__file__).parents[1] / "data/gpu/h100-2026-12-07c"
WARN = "(APIServer pid=1) WARNING 12-05 06:09:45 [base.py:380] "
LINES = [
    WARN + "Chat template warmup failed",
    WARN + "Traceback (most recent call last):",
    WARN + '  File "/x/vllm/renderers/base.py", line 373, in warmup',
    WARN + "ValueError: Tokenizer not available when `skip_tokenizer_init=True`",
]
LATER = "(EngineCore pid=2) ERROR 12-05 06:09:49 [core.py:1510] RuntimeError: boom after the warning"


def _printing(engine: str, first: list[str], wait: float, then: list[str]) -> Engine:
    """A stand-in engine whose server prints ``first``, waits ``wait`` seconds, prints ``then`` and
    stays up (until the trial stops it)."""
    script = (
        "import time\n"
        f"print({chr(10).join(first)!r}, flush=True)\n"
        f"time.sleep({wait})\n"
        f"print({chr(10).join(then)!r}, flush=True)\n"
        "time.sleep(60)\n"
    )

    class Printing(Engine):
        def launch_argv(self, cand, host, port):
            return [sys.executable, "-c", script]

    return Printing(engine)


def test_the_level_of_a_line_is_read_from_its_prefix():
    assert all(logged_benign(line) for line in LINES)
    assert not logged_benign(LATER)
    assert not logged_benign("ValueError: no prefix, no level")  # a bare stderr line says nothing


def test_a_warning_level_traceback_does_not_end_the_trial_and_the_error_after_it_does(tmp_path):
    trial = Trial(
        _printing("vllm", LINES, 2.5, [LATER]),
        Candidate.make("vllm", "m", {}),
        tmp_path / "t",
        TrialSettings(hang_timeout=30),
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


def test_a_route_the_server_does_not_serve_is_a_setting_not_wrong_output(tmp_path):
    """Real vLLM 0.24.0 on a lent H100 (2026-12-07, tests/data/gpu/h100-2026-12-07c, the sixth
    three-mistake set): `--runner pooling` starts a server of /pooling with no /v1/completions, and
    the probes' requests are answered 404. That was called wrong output, with the kernels as its
    suspects (attention, sampler, graphs), and three launches went to them before the user's own
    setting was dropped. A route not served is not an answer of the model's: no kernel is implicated,
    and the probe's line is the evidence."""
    from bringup.observe.outcome import ProbeResult
    from bringup.observe.signatures import Classification

    trial = Trial(
        Engine("vllm"), Candidate.make("vllm", "m", {"--runner": "pooling"}), tmp_path / "t", TrialSettings()
    )

    def probe(detail: str) -> ProbeResult:
        return ProbeResult(
            name="completion", passed=False, detail=detail, phase="first-request", kind="disagree"
        )

    log = ROOT / "runs/vllm-usermistakes6/runs/20261207-090038-vllm-m8b/trials/02-search-a2f52821/server.log"
    texts = log.read_text().splitlines()
    unknown = Classification("unknown", "first-request", [], "")
    not_found = probe("""POST /v1/completions: HTTP 404: b'{"detail":"Not Found"}'""")
    cls, status = trial._probe_class(unknown, "wrong-output", not_found, texts, "first-request")
    assert (status, cls.failure_class, cls.phase, cls.implicates) == (
        "fails",
        "bad-flag",
        "first-request",
        [],
    )
    assert cls.evidence == [f"probe completion: {not_found.detail}"]
    # a wrong answer is still wrong output, with the kernels the engine said it picked
    wrong = probe("POST /v1/completions: greedy answers differ between batch sizes 1 and 8")
    cls, _ = trial._probe_class(unknown, "wrong-output", wrong, texts, "first-request")
    assert cls.failure_class == "wrong-output" and "--attention-backend" in cls.implicates
    assert any("FLASH_ATTN" in e for e in cls.evidence)
    # a refusal of the request itself (HTTP 400) is not a missing route either
    refused = probe("POST /v1/completions: HTTP 400: Tokenizer not available when `skip_tokenizer_init=True`")
    cls, _ = trial._probe_class(unknown, "wrong-output", refused, texts, "first-request")
    assert cls.failure_class == "wrong-output"


SGLANG_RUN = ROOT / "runs/sglang-usermistakes6/runs/20261207-091058-sglang-m8b/trials"


def _real_lines(trial: str, first: int, last: int) -> list[str]:
    lines = (SGLANG_RUN / trial / "server.log").read_text().splitlines()
    return lines[first - 1 : last]


# Real SGLang 0.5.16 on an H100 (tests/data/gpu/h100-2026-12-07c, the user's --dtype float32): the
# scheduler logs the exception's line and its CUDA-graph advice, then its traceback. In the second
# launch the traceback came in the same second; in the first, bringup stopped the server 0.4 s after
# the line, and the log holds the line alone (read unknown, no frames).
HEAD = _real_lines("02-search-17a23f1c", 33, 39)
TRACEBACK = _real_lines("03-search-7dbfd0d1", 37, 100)


def test_an_exception_line_with_no_traceback_waits_for_the_traceback_the_engine_prints_after_it(tmp_path):
    from bringup.observe.tracebacks import bare_exception

    assert HEAD[0].endswith("failed to dispatch data type Float") and bare_exception(HEAD[0])
    assert "Scheduler hit an exception: Traceback" in TRACEBACK[0]
    trial = Trial(
        _printing("sglang", HEAD, 1.2, TRACEBACK),
        Candidate.make("sglang", "m", {"--dtype": "float32"}),
        tmp_path / "t",
        TrialSettings(hang_timeout=30),
    )
    out = trial.run()
    assert out.status == "fails"  # ended by the traceback, not the hang timeout (status "hang")
    # the reading has the traceback's frames: where it was raised (sgl_kernel's rmsnorm)
    assert any("sgl_kernel/elementwise.py" in f for f in out.frames), out.frames
    assert out.root_exception and out.root_exception.endswith("(torch/_ops.py:865)")
    assert out.failure_class == "bad-flag"  # raised where the user's float32 was dispatched


def test_an_exception_line_after_its_traceback_does_not_wait(tmp_path):
    """vLLM's usual order: the traceback, then its exception line (the fatal one) — no wait."""
    trial = Trial(
        _printing("sglang", TRACEBACK, 2.5, ["late line that must not be read"]),
        Candidate.make("sglang", "m", {}),
        tmp_path / "t",
        TrialSettings(hang_timeout=30),
    )
    out = trial.run()
    assert out.status == "fails"
    assert "late line that must not be read" not in (tmp_path / "t" / "server.log").read_text()
