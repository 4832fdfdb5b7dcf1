"""The bring-up search on scenarios: first validated configuration, minimal fix, journal, resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import bringup, group_alive
from tests.paths import ROOT

SCEN = ROOT / "bringup" / "data" / "scenarios"
SEED = SCEN / "glm5-nvfp4-sm120.yaml"
CARD = (
    "--tp 8 --quantization modelopt_fp4 --attention-backend flashinfer --moe-runner-backend "
    "flashinfer_cutlass --kv-cache-dtype fp8_e4m3 --mem-fraction-static 0.95"
)
FAST = ("--time-scale", "0.002", "--timeout", "120", "--hang-timeout", "30")


def run(runs: Path, *args: str, baseline: str = CARD, scenario: Path = SEED):
    rc, data, out, err = bringup(
        "run",
        "--scenario",
        str(scenario),
        "--baseline",
        baseline,
        "--runs-dir",
        str(runs),
        "--json",
        *FAST,
        *args,
    )
    assert data is not None, err
    return rc, data


def _fix(d: dict) -> str:
    return d["minimal_fix_str"] or ""


@pytest.mark.slow
def test_seed_scenario_with_knowledge(tmp_path):
    rc, d = run(tmp_path)
    assert rc == 0 and d["validated"] is True and d["status"] == "validated"
    assert d["launches"] <= 2
    for key in (
        "launches",
        "screening_launches",
        "minimize_launches",
        "simulated_hours",
        "final_command",
        "minimal_fix",
        "run_dir",
    ):
        assert key in d
    assert "--nsa-decode-backend trtllm" in _fix(d)
    assert d["simulated_hours"] > 0.1  # a 600 s simulated weight load per full launch
    assert d["final_command"].startswith("python -m sglang.launch_server --model-path zai-org/GLM-5-NVFP4")
    assert "--nsa-decode-backend trtllm" in d["final_command"]
    # the minimal fix was proven: without it the engine NaNs in decode
    explained = [a for a in d["attempts"] if a["purpose"] == "minimize"]
    assert len(explained) == d["minimize_launches"] and any(
        a["failure_class"] == "nan-output" for a in explained
    )
    findings = Path(d["run_dir"]) / "FINDINGS.md"
    text = findings.read_text()
    assert "**Result: validated**" in text and "| # | changed from baseline |" in text
    assert "--nsa-decode-backend trtllm" in text
    rc2, _, out, _ = bringup("report", d["run_id"], "--runs-dir", str(tmp_path))
    assert rc2 == 0 and "Result: validated" in out


@pytest.mark.slow
def test_seed_scenario_without_knowledge(tmp_path):
    rc, d = run(tmp_path, "--no-knowledge")
    assert rc == 0 and d["validated"] and d["knowledge"] is False
    assert "--nsa-decode-backend trtllm" in _fix(d)
    classes = [
        a["failure_class"] for a in d["attempts"] if a["purpose"] != "minimize" and a["status"] != "works"
    ]
    # the seeds' traps show up and are named from the log
    assert "oom-graph-capture" in classes and "nan-output" in classes
    # never the same effective configuration twice
    keys = [a["changes"] for a in d["attempts"] if a["purpose"] == "search"]
    assert len(keys) == len(set(keys))
    report = (Path(d["run_dir"]) / "FINDINGS.md").read_text()
    assert "## What the failures mean" in report and "nan-output" in report
    assert "`--attention-backend`: asked `flashinfer`, the engine used `nsa`" in report


@pytest.mark.slow
def test_second_run_starts_from_the_journal(tmp_path):
    rc, first = run(tmp_path, "--no-knowledge", "--no-minimize")
    assert rc == 0 and first["launches"] >= 2
    rc, second = run(tmp_path, "--no-knowledge", "--no-minimize")
    assert rc == 0 and second["validated"]
    assert second["launches"] == 1 and second["journal_priors"] >= first["launches"]
    assert second["attempts"][0]["status"] == "works"
    assert second["final_candidate"] == first["final_candidate"]
    # --retry-known ignores the journal
    rc, third = run(tmp_path, "--no-knowledge", "--no-minimize", "--retry-known")
    assert third["journal_priors"] == 0 and third["launches"] == first["launches"]


def _journal_trials(db: Path, run_id: str) -> list[tuple]:
    with sqlite3.connect(db) as c:
        return c.execute(
            "SELECT seq, purpose, candidate_key, status FROM trials WHERE run_id=? ORDER BY seq", (run_id,)
        ).fetchall()


@pytest.mark.slow
def test_resume_after_kill_mid_trial(tmp_path):
    runs = tmp_path / "runs"
    argv = [
        sys.executable,
        "-m",
        "bringup",
        "run",
        "--scenario",
        str(SEED),
        "--baseline",
        CARD,
        "--runs-dir",
        str(runs),
        "--json",
        "--no-knowledge",
        "--time-scale",
        "0.01",
        "--timeout",
        "120",
    ]
    proc = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    db = runs / "journal.sqlite"
    try:
        deadline = time.monotonic() + 120
        run_id = None
        while time.monotonic() < deadline:
            if db.exists():
                try:
                    with sqlite3.connect(db) as c:
                        row = c.execute("SELECT id FROM runs").fetchone()
                        n = c.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
                except sqlite3.OperationalError:  # bringup is still creating the schema
                    time.sleep(0.05)
                    continue
                run_id = row[0] if row else None
                # at least one finished trial, and the next one launched (its folder has a pid file)
                pids = sorted(runs.glob("runs/*/trials/*/server.pid"))
                if n >= 1 and len(pids) > n:
                    break
            time.sleep(0.05)
        assert run_id is not None
        in_flight = sorted(runs.glob("runs/*/trials/*/server.pid"))[-1]
        server_pgid = int(in_flight.read_text().split()[0])
        before = _journal_trials(db, run_id)
        os.killpg(proc.pid, signal.SIGKILL)  # no chance to clean up
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    # the server dies with bringup (parent-death signal), even after SIGKILL
    deadline = time.monotonic() + 10
    while group_alive(server_pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert group_alive(server_pgid) == []
    assert not (in_flight.parent / "outcome.json").exists()
    rc, d, _, err = bringup("run", "--resume", "--run-id", run_id, "--runs-dir", str(runs), "--json")
    assert rc == 0 and d["validated"], err
    after = _journal_trials(db, run_id)
    assert after[: len(before)] == before  # nothing lost
    searched = [(p, k) for _, p, k, _ in after if p in ("search", "screen")]
    assert len(searched) == len(set(searched))  # nothing repeated
    assert d["run_id"] == run_id and len(d["attempts"]) == len(after)


@pytest.mark.slow
def test_bad_inputs_are_clear(tmp_path):
    rc, _, _, err = bringup(
        "run",
        "--scenario",
        str(SEED),
        "--baseline",
        "--nsa-decode-backend nonsense",
        "--runs-dir",
        str(tmp_path),
    )
    assert rc == 2 and "invalid choice: 'nonsense'" in err
    rc, _, _, err = bringup(
        "run", "--scenario", str(SEED), "--vary", "--no-such-flag", "--runs-dir", str(tmp_path)
    )
    assert rc == 2 and "no such flag" in err
    rc, _, _, err = bringup("run", "--scenario", str(SEED), "--fix", "garbage", "--runs-dir", str(tmp_path))
    assert rc == 2 and "FLAG=VALUE" in err
    rc, _, _, err = bringup("run", "--resume", "--runs-dir", str(tmp_path / "empty"))
    assert rc == 2 and "nothing to resume" in err
    rc, _, _, err = bringup("run", "--scenario", str(tmp_path / "missing.yaml"), "--runs-dir", str(tmp_path))
    assert rc == 2 and "missing.yaml" in err


@pytest.mark.slow
def test_space_shows_verdicts_and_facts():
    rc, d, _, _ = bringup("space", "--scenario", str(SEED), "--baseline", CARD, "--json")
    assert rc == 0 and d["engine_version"] == "0.5.10.post1"
    rows = {(r["flag"], r["level"]): r for r in d["levels"]}
    kv = rows[("--nsa-decode-backend", "flashmla_kv")]["verdicts"][0]
    assert kv["verdict"] == "incompatible" and kv["facts"] == {"gpu.compute_capability": 12.0}
    assert rows[("--nsa-decode-backend", "trtllm")]["verdicts"][0]["verdict"] == "preferred"
    fa3 = rows[("--nsa-prefill-backend", "fa3")]["verdicts"]
    assert any("SM>=80 and SM<=90" in v["reason"] for v in fa3)
    mem = rows[("--mem-fraction-static", "0.95")]["verdicts"][0]
    assert mem["verdict"] == "risky" and "memory plan" in mem["reason"]
    assert d["frozen"]["--attention-backend"]["value"] == "nsa"
    assert not any(f["flag"].startswith("--dsa-") for f in d["factors"])
    rc, d23, _, _ = bringup("space", "--scenario", str(SCEN / "glm51-nvfp4-sm120-sglang0523.yaml"), "--json")
    flags = {f["flag"] for f in d23["factors"]}
    assert "--dsa-decode-backend" in flags and "--nsa-decode-backend" not in flags


@pytest.mark.slow
def test_space_without_knowledge_has_no_verdicts():
    rc, d, _, _ = bringup("space", "--scenario", str(SEED), "--no-knowledge", "--json")
    assert rc == 0 and all(not r["verdicts"] for r in d["levels"]) and d["frozen"] == {}


def _knowledge_scenarios() -> list[str]:
    """Shipped scenarios the knowledge search must solve (not those written for the blind search)."""
    from bringup.scenario import load_scenario

    return sorted(p.stem for p in SCEN.glob("*.yaml") if not load_scenario(p).blind)


@pytest.mark.slow
@pytest.mark.parametrize("name", _knowledge_scenarios())
def test_every_shipped_scenario_validates_with_knowledge(tmp_path, name):
    from bringup.scenario import load_scenario

    sc = load_scenario(SCEN / f"{name}.yaml")
    baseline = getattr(sc, "baseline", None) or ""
    rc, d = run(tmp_path, "--no-minimize", baseline=baseline, scenario=SCEN / f"{name}.yaml")
    assert rc == 0 and d["validated"], d["stop_reason"]
    assert (
        d["launches"] <= 3
    )  # docs/search.md has the per-scenario figures (the most: the tuning scenario, 3)
    for pid_file in Path(d["run_dir"]).glob("trials/*/server.pid"):
        assert group_alive(int(pid_file.read_text().split()[0])) == []
    assert json.loads((Path(d["run_dir"]) / "findings.json").read_text())["validated"] is True


@pytest.mark.slow
def test_a_scenario_where_nothing_works_ends_not_validated(tmp_path):
    """vllm #32732: no attention backend takes the model on SM120; the run must say so, not pretend."""
    from bringup.scenario import load_scenario

    path = SCEN / "deepseek-r1-nvfp4-no-backend-sm120-vllm.yaml"
    rc, d = run(tmp_path, "--no-minimize", baseline=load_scenario(path).baseline, scenario=path)
    assert rc != 0 and not d["validated"] and d["launches"] >= 1
    assert all(a["status"] != "works" for a in d["attempts"])
    for pid_file in Path(d["run_dir"]).glob("trials/*/server.pid"):
        assert group_alive(int(pid_file.read_text().split()[0])) == []


@pytest.mark.slow
def test_screening_skips_memory_only_changes_when_a_launch_is_short(tmp_path):
    """After an OOM, a candidate that only moves memory numbers gets a full launch, not a screen
    (fewer layers use less memory, so a screen would pass blindly), unless a full launch is long
    (the seeds' 400 GB model), where a screen still catches kernel failures cheaply."""
    tune = SCEN / "tune-llama31-70b-fp8-h200-sglang.yaml"
    rc, d = run(
        tmp_path / "a",
        "--no-minimize",
        "--screen",
        "auto",
        scenario=tune,
        baseline="--mem-fraction-static 0.92 --cuda-graph-max-bs 256 --max-running-requests 256",
    )
    assert rc == 0 and d["validated"] and d["screening_launches"] == 0 and d["launches"] == 2
    assert d["attempts"][0]["failure_class"] == "oom-graph-capture"
    rc, d = run(tmp_path / "b", "--no-minimize", "--screen", "auto", "--no-knowledge")
    second = d["attempts"][1]
    # the seed's first failure is a graph-capture OOM at 0.95: the next launch moves memory (the
    # fraction, perhaps with the capture size) and is still a screen, the full launch being long
    assert second["purpose"] == "screen" and "drop --mem-fraction-static" in second["changes"]
