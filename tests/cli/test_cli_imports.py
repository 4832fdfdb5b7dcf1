"""Each CLI command imports only what it needs.

`bringup --help` must not load the heavy optional machinery (Optuna, aiohttp, Jinja2, the scenario
engine's web stack), and `doctor`, `explain` and `report` must work on a machine where those are
not installed. Each test runs the CLI in a fresh interpreter, the way a user starts it; a
meta-path blocker stands in for "not installed". Speed itself is measured, not asserted, by
benchmarks/cli_startup.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.observe.outcome import ProbeResult
from bringup.record.results import Attempt, RunResult
from bringup.report.findings import write_report
from tests.paths import DATA, ROOT

LOGS = DATA / "logs"
OPTIONAL = ("optuna", "aiohttp", "jinja2", "starlette", "uvicorn")

# Runs the CLI with argv from sys.argv[1:], the named packages unimportable, and writes the names of
# the modules loaded when it exits (also through typer.Exit / SystemExit) to $MODULES_OUT.
WRAPPER = r"""
import importlib.abc, json, os, sys

BLOCKED = [b for b in os.environ.get("BLOCK", "").split(",") if b]

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
        return None

sys.meta_path.insert(0, Blocker())
sys.argv = ["bringup", *sys.argv[1:]]
try:
    from bringup.cli import main
    main()
finally:
    with open(os.environ["MODULES_OUT"], "w") as f:
        json.dump(sorted(sys.modules), f)
"""


def run_cli(
    tmp_path: Path, *args: str, block: tuple[str, ...] = ()
) -> tuple[subprocess.CompletedProcess, set[str]]:
    out = tmp_path / "modules.json"
    env = {
        **os.environ,
        "BLOCK": ",".join(block),
        "MODULES_OUT": str(out),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    return proc, set(json.loads(out.read_text()))


def _top(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.mark.slow
def test_help_imports_no_optional_or_heavy_package(tmp_path):
    proc, mods = run_cli(tmp_path, "--help")
    assert proc.returncode == 0, proc.stderr
    for cmd in ("run", "trial", "explain", "doctor", "tune", "bench", "report", "space"):
        assert cmd in proc.stdout
    loaded = _top(mods)
    # the optional machinery, and the heavy core libraries a command loads only when it runs
    assert not loaded & {*OPTIONAL, "numpy", "pydantic", "httpx", "yaml"}, sorted(
        loaded & {*OPTIONAL, "numpy"}
    )
    # no command's implementation either: only the CLI package itself, and the table of number
    # ranges its options are declared with (bringup/guard/ranges.py: the standard library only)
    light = {"bringup.guard", "bringup.guard.ranges"}
    assert {m for m in mods if m.startswith("bringup.")} - light <= {
        m for m in mods if m.startswith("bringup.cli")
    }


@pytest.mark.slow
def test_command_help_imports_no_optional_package(tmp_path):
    for cmd in ("doctor", "explain", "report", "run", "tune", "bench"):
        proc, mods = run_cli(tmp_path, cmd, "--help")
        assert proc.returncode == 0, (cmd, proc.stderr)
        assert not _top(mods) & set(OPTIONAL), (cmd, sorted(_top(mods) & set(OPTIONAL)))


@pytest.mark.slow
def test_the_blocker_blocks(tmp_path):
    """The control: under the blocker, a command that needs aiohttp fails for want of it."""
    proc, _ = run_cli(tmp_path, "bench", "--url", "http://127.0.0.1:1", block=OPTIONAL)
    assert proc.returncode != 0
    assert "aiohttp" in proc.stderr and "blocked by the test" in proc.stderr


@pytest.mark.slow
def test_doctor_runs_without_optional_packages(tmp_path):
    proc, mods = run_cli(tmp_path, "doctor", "--json", block=OPTIONAL)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["facts"]["cpu.count"] >= 1 and "packages" in d
    assert not _top(mods) & set(OPTIONAL)
    proc, _ = run_cli(tmp_path, "doctor", "--help", block=OPTIONAL)
    assert proc.returncode == 0 and "--smem" in proc.stdout


@pytest.mark.slow
def test_explain_runs_without_optional_packages(tmp_path):
    proc, mods = run_cli(tmp_path, "explain", str(LOGS / "sglang-nan-decode.log"), "--json", block=OPTIONAL)
    assert proc.returncode == 1, proc.stderr  # 1: the log is a failure, classified
    d = json.loads(proc.stdout)
    assert d["failure_class"] == "nan-output" and d["phase"] == "first-request"
    assert not _top(mods) & set(OPTIONAL)


def _finished_run(run_dir: Path) -> RunResult:
    run_dir.mkdir(parents=True)
    r = RunResult(
        run_id="r1",
        run_dir=str(run_dir),
        status="validated",
        validated=True,
        launches=2,
        screening_launches=0,
        minimize_launches=0,
        simulated_hours=None,
        wall_seconds=80.0,
        final_command="vllm serve m --enforce-eager",
        final_candidate=None,
        stop_reason="all probes passed",
        engine="vllm",
        engine_version="0.32.0",
        model="m",
        baseline_command="vllm serve m",
        attempts=[
            Attempt(
                number=1,
                purpose="search",
                changes="(baseline)",
                status="fails",
                failure_class="oom-kv-cache",
                phase="kv-alloc",
                evidence="No available memory",
            ),
            Attempt(number=2, purpose="search", changes="--enforce-eager", status="works"),
        ],
        final_probes=[ProbeResult(name="health", passed=True, detail="200")],
    )
    write_report(r, run_dir)
    return r


@pytest.mark.slow
def test_report_runs_without_optional_packages(tmp_path):
    run_dir = tmp_path / "runs" / "r1"
    _finished_run(run_dir)
    proc, mods = run_cli(tmp_path, "report", str(run_dir), block=OPTIONAL)
    assert proc.returncode == 0, proc.stderr
    assert "**Result: validated** after 2 launches" in proc.stdout
    assert "vllm serve m --enforce-eager" in proc.stdout
    assert not _top(mods) & set(OPTIONAL)


@pytest.mark.slow
def test_report_html_needs_jinja2_and_only_it_loads_it(tmp_path):
    """--html is the one report mode that needs Jinja2: it loads it then, and fails naming it when it is missing."""
    run_dir = tmp_path / "runs" / "r1"
    _finished_run(run_dir)
    proc, mods = run_cli(tmp_path, "report", str(run_dir), "--html")
    assert proc.returncode == 0, proc.stderr
    assert "jinja2" in _top(mods) and (run_dir / "report.html").is_file()
    proc, _ = run_cli(tmp_path, "report", str(run_dir), "--html", block=OPTIONAL)
    assert proc.returncode != 0 and "jinja2" in proc.stderr
