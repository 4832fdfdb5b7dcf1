"""Issue 28, rows 2 and 6: a secret never on screen or disk, in either flag form; text from outside
is text (never Rich markup, never a raw escape sequence) on the terminal, in Markdown and HTML."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from bringup.cli._common import render_outcome
from bringup.guard import secrets
from bringup.observe.effective import find_overrides
from bringup.observe.outcome import Outcome, ProbeResult
from bringup.record.results import Attempt
from tests.conftest import bringup
from tests.paths import ROOT

SEED = ROOT / "bringup" / "data" / "scenarios" / "glm5-nvfp4-sm120.yaml"
WORKS = (
    "--tp 8 --quantization modelopt_fp4 --attention-backend flashinfer --moe-runner-backend "
    "flashinfer_cutlass --kv-cache-dtype fp8_e4m3 --mem-fraction-static 0.88 --nsa-decode-backend trtllm "
    "--nsa-prefill-backend trtllm"
).split()
HOSTILE = "[/dev/shm] [bold]x[/] \x1b]0;retitled\x07\x1b[2J"


def _key_forms(key: str) -> dict[str, list[str]]:
    return {"space": ["--api-key", key], "equals": [f"--api-key={key}"]}


def _leaks(root: Path, texts: list[str], needles: list[str]) -> list[str]:
    """Every place (a file under root, or stdout/stderr) that holds one of the needles, in any case."""
    found = []
    for p in root.rglob("*"):
        if p.is_file():
            data = p.read_bytes().lower()
            found += [f"{p}: {n}" for n in needles if n.lower().encode() in data]
    for i, t in enumerate(texts):
        found += [f"output {i}: {n}" for n in needles if n.lower() in t.lower()]
    return found


@pytest.mark.slow
@pytest.mark.parametrize("form, json_out", [("space", False), ("equals", True)])
def test_run_with_a_key_leaves_it_nowhere(tmp_path: Path, form: str, json_out: bool) -> None:
    """The key was in clear in trials.effective_key (normalised: lower-cased, so the value-based
    scrubber missed it)."""
    key, token = f"sk-Run{form}Zq81SecretValue", "hf_RunTokenValue9911"
    rc, _, out, err = bringup(
        "run",
        "--scenario",
        str(SEED),
        "--time-scale",
        "0.002",
        "--runs-dir",
        str(tmp_path),
        "--max-launches",
        "2",
        "--env",
        f"HF_TOKEN={token}",
        *(["--json"] if json_out else []),
        "--baseline",
        " ".join([*WORKS, *_key_forms(key)[form]]),
    )
    assert rc == 0, err
    assert (tmp_path / "journal.sqlite").exists()
    assert _leaks(tmp_path, [out, err], [key, token]) == []


@pytest.mark.slow
@pytest.mark.parametrize("form", ["space", "equals"])
def test_trial_with_a_key_prints_no_false_override(tmp_path: Path, form: str) -> None:
    """`trial` printed "--api-key: sk-... → ***" as an engine override: the value compared with the
    log line bringup had redacted itself."""
    key = f"sk-Trial{form}Secret4455"
    rc, _, out, err = bringup(
        "trial",
        "--scenario",
        str(SEED),
        "--time-scale",
        "0.002",
        "--runs-dir",
        str(tmp_path),
        "--",
        *WORKS,
        *_key_forms(key)[form],
    )
    assert rc == 0, err
    assert "--api-key" not in out  # no override line for it
    assert _leaks(tmp_path, [out, err], [key]) == []


def test_a_secret_flag_is_never_an_override() -> None:
    assert find_overrides(
        {"--api-key": "sk-abcd-1234", "--tp": "2"}, {"api_key": "***", "tp": 4}, None, {}
    ) == [find_overrides({"--tp": "2"}, {"tp": 4}, None, {})[0]]


def test_a_configuration_key_holds_no_secret_value() -> None:
    key = "--attention-backend=nsa|--api-key=sk-lowered-value|env:HF_TOKEN=hf_xyzw|--tp=8"
    assert secrets.redact_key(key) == "--attention-backend=nsa|--api-key=***|env:HF_TOKEN=***|--tp=8"


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, width=200, highlight=False), buf


def test_outcome_text_from_outside_is_never_markup_nor_raw_escapes() -> None:
    o = Outcome(
        status="fails",
        failure_class="oom",
        phase="load",
        evidence=[HOSTILE],
        root_exception=HOSTILE,
        hint=HOSTILE,
        warnings=[HOSTILE],
        probes=[ProbeResult(name="health", passed=False, detail=HOSTILE)],
    )
    con, buf = _console()
    render_outcome(o, con)  # raised rich.errors.MarkupError on the probe's detail
    text = buf.getvalue()
    assert "[/dev/shm]" in text and "[bold]x[/]" in text
    assert "retitled" in text and "\x1b]0;" not in text and "\x1b[2J" not in text and "\x07" not in text


def test_run_table_shows_evidence_as_text() -> None:
    from bringup.cli.run import _table

    a = Attempt(number=1, purpose="search", changes=HOSTILE, status="fails", evidence=HOSTILE)
    con, buf = _console()
    con.print(_table([a]))  # MarkupError: closing tag '[/dev/shm]' doesn't match any open tag
    assert "[/dev/shm]" in buf.getvalue() and "\x1b]0;" not in buf.getvalue()


@pytest.mark.slow
def test_control_characters_of_a_baseline_reach_no_report(tmp_path: Path) -> None:
    rc, _, out, err = bringup(
        "run",
        "--scenario",
        str(SEED),
        "--time-scale",
        "0.002",
        "--runs-dir",
        str(tmp_path),
        "--max-launches",
        "2",
        "--baseline",
        " ".join([*WORKS, "--chat-template", "[/dev/shm]\x1b]0;pwn\x07"]),
    )
    assert rc == 0, err
    assert "\x1b]0;" not in out and "\x1b]0;" not in err
    reports = [p for p in tmp_path.rglob("*") if p.name in ("FINDINGS.md", "report.html")]
    assert len(reports) == 2
    for p in reports:
        text = p.read_text()
        assert "\x1b" not in text and "\x07" not in text and "[/dev/shm]" in text, p
