"""Issue 28, row 8: every input validated with a clear one-line error before any launch; a damaged
journal row or findings.json reported with its place; a full disk is a clear error and the run is
marked so (what was recorded stays intact)."""

from __future__ import annotations

import errno
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bringup.cli import app, argv_problem, main
from tests.paths import ROOT

SEED = ROOT / "bringup" / "data" / "scenarios" / "glm5-nvfp4-sm120.yaml"
SCENARIO = ["--scenario", str(SEED), "--time-scale", "0.002"]


def _main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """The console entry point in this process (its error handling is what a user meets)."""
    monkeypatch.setattr(sys, "argv", ["bringup", *args])
    try:
        main()
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "args, says",
    [
        (["trial", *SCENARIO[:2], "--time-scale", "nan"], "not a finite number"),
        (["trial", *SCENARIO, "--timeout", "inf"], "not a finite number"),
        (["trial", *SCENARIO, "--hang-timeout", "-5"], "must be above 0"),
        (["trial", *SCENARIO, "--port", "70000"], "at most 65535"),
        (["run", *SCENARIO, "--max-hours", "0"], "must be above 0"),
        (["run", *SCENARIO, "--timeout", "nan"], "not a finite number"),
        (
            ["plan", "--weights-gib", "10", "--gpu-mem-gib", "80", "--cc", "9", "--mem-fraction", "1.5"],
            "at most 1",
        ),
        (
            ["plan", "--weights-gib", "nan", "--gpu-mem-gib", "80", "--cc", "9", "--mem-fraction", "0.9"],
            "finite",
        ),
        (
            [
                "plan",
                "--weights-gib",
                "10",
                "--gpu-mem-gib",
                "80",
                "--cc",
                "9",
                "--mem-fraction",
                "0.9",
                "--gpus",
                "0",
            ],
            "at least 1",
        ),
        (["bench", "--url", "http://127.0.0.1:9", "--timeout", "-1"], "must be above 0"),
    ],
)
def test_numbers_out_of_range_or_not_finite_are_refused(tmp_path: Path, args: list[str], says: str) -> None:
    r = CliRunner().invoke(
        app, [*args, *(["--runs-dir", str(tmp_path)] if args[0] in ("run", "trial") else [])]
    )
    out = " ".join(r.output.split())
    assert r.exit_code == 2, out
    assert says in out and "Traceback" not in out
    assert not (tmp_path / "trials").exists() and not (tmp_path / "runs").exists()  # nothing launched


def test_arguments_that_are_not_utf8_text() -> None:
    bad = b"--served-model-name=\xff\xfe".decode("utf-8", "surrogateescape")
    assert "argument 2 is not valid UTF-8" in (argv_problem(["trial", bad]) or "")
    assert argv_problem(["trial", "--env", "A=caf\u00e9"]) is None


@pytest.mark.slow
def test_non_utf8_engine_flag_is_refused_before_launch(tmp_path: Path) -> None:
    """Before: launched, then a serialization traceback, the trial not recorded."""
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "bringup",
            "trial",
            *SCENARIO,
            "--runs-dir",
            str(tmp_path),
            "--",
            "--tp",
            b"8\xff",
        ],
        capture_output=True,
        cwd=ROOT,
        timeout=120,
    )
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 2 and "not valid UTF-8" in err and "Traceback" not in err
    assert not (tmp_path / "trials").exists()


def _journal_with_a_run(root: Path) -> Path:
    from bringup.record.journal import Journal

    j = Journal(root / "journal.sqlite")
    j.create_run("r1", "sglang", "0.5", "m", "hw", {"scenario": str(SEED)}, root / "runs" / "r1")
    return root / "journal.sqlite"


@pytest.mark.slow
def test_a_damaged_journal_row_is_reported_with_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _journal_with_a_run(tmp_path)
    db = sqlite3.connect(path)
    db.execute("UPDATE runs SET settings='{not json' WHERE id='r1'")
    db.commit()
    db.close()
    before = path.read_bytes()
    code, err = _main(monkeypatch, capsys, "run", "--resume", "--runs-dir", str(tmp_path))
    assert code == 2, err
    assert "journal runs" in err and "cannot be read" in err and "Traceback" not in err
    assert path.read_bytes() == before  # reported, not changed or moved


def test_a_damaged_findings_json_is_reported_with_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "findings.json").write_text('{"status": "validated",\n  "attempts": [1, 2,, 3]}')
    code, err = _main(monkeypatch, capsys, "report", str(run))
    flat = "".join(err.split())  # the terminal may wrap the long path anywhere, even before the colon
    assert code == 2 and "findings.json:notJSONatline2column" in flat, err
    (run / "findings.json").write_text(json.dumps({"status": 5, "attempts": "x"}))
    code, err = _main(monkeypatch, capsys, "report", str(run))
    err = " ".join(err.split())
    assert code == 2 and "not a bringup result" in err and "Traceback" not in err, err


def _status(root: Path) -> list[str]:
    db = sqlite3.connect(root / "journal.sqlite")
    try:
        return [r[0] for r in db.execute("SELECT status FROM runs")]
    finally:
        db.close()


@pytest.mark.slow
@pytest.mark.parametrize("where", ["journal", "file"])
def test_a_full_disk_is_a_clear_error_and_the_run_is_marked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """Before: two sqlite3.OperationalError tracebacks and the run left `running`."""
    from bringup.guard import secrets
    from bringup.record import journal

    if where == "journal":

        def full(*a: object, **k: object) -> None:
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(journal.Journal, "add_trial", full)
    else:
        real = secrets.write_text

        def full_file(path: object, text: str, **kw: object) -> None:
            if Path(str(path)).name == "run.json":
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
            real(path, text, **kw)

        monkeypatch.setattr(secrets, "write_text", full_file)
    code, err = _main(
        monkeypatch, capsys, "run", *SCENARIO, "--runs-dir", str(tmp_path), "--max-launches", "2"
    )
    assert code == 2, err
    assert ("disk is full" in err or "No space left" in err) and "Traceback" not in err
    assert _status(tmp_path) == ["interrupted"]
