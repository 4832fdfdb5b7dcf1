"""The node types of a cluster and the summary per type (bringup/session/nodetypes.py), without a cluster:
the real bring-ups over a local Ray cluster are in tests/session/test_nodetypes_ray.py (slow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from bringup.cli._nodetypes import run_node_types
from bringup.session.nodetypes import (
    SUMMARY_JSON,
    SUMMARY_MD,
    NodeTypesResult,
    TypeResult,
    discover,
    select,
    type_name,
    verdict,
    write_summary,
)
from bringup.session.run import RunSettings
from bringup.trial.rayexec import resource_name
from tests.paths import ROOT

REPO = ROOT


def test_discover_counts_alive_nodes_and_gpus_per_type():
    nodes = [
        {"Alive": True, "Resources": {"CPU": 1, "head": 1}},
        {"Alive": True, "Resources": {"bringup-hw-aaa": 1, "GPU": 8}},
        {"Alive": True, "Resources": {"bringup-hw-aaa": 1, "GPU": 4}},
        {"Alive": False, "Resources": {"bringup-hw-aaa": 1, "GPU": 8}},  # dead: not counted
        {"Alive": True, "Resources": {"bringup-hw-bbb": 1, "bringup-gpu": 2}},  # a double's GPUs
        {"Alive": False, "Resources": {"bringup-hw-ccc": 1}},  # a type whose only node died
    ]
    found = discover(nodes)
    assert sorted(found) == ["bringup-hw-aaa", "bringup-hw-bbb"]
    assert (found["bringup-hw-aaa"].nodes, found["bringup-hw-aaa"].gpus) == (2, 12.0)
    assert (found["bringup-hw-bbb"].nodes, found["bringup-hw-bbb"].gpus) == (1, 2.0)


def test_select_keeps_the_order_asked_and_the_types_no_node_declares():
    found = discover(
        [
            {"Alive": True, "Resources": {"bringup-hw-bbb": 1}},
            {"Alive": True, "Resources": {"bringup-hw-aaa": 1}},
        ]
    )
    assert select("all", found) == ["bringup-hw-aaa", "bringup-hw-bbb"]
    # a fingerprint as doctor prints it, a bare hash, a resource name; duplicates once
    assert select("vllm:zzz, bbb,bringup-hw-bbb,all", found) == [
        "bringup-hw-zzz",
        "bringup-hw-bbb",
        "bringup-hw-aaa",
    ]
    assert type_name("hw:2221da1de8") == resource_name("hw:2221da1de8") == "bringup-hw-2221da1de8"
    assert select("all", {}) == []


def _t(**kw) -> TypeResult:
    base = {"node_type": "bringup-hw-aaa", "status": "no-node", "runs_dir": "/x/bringup-hw-aaa"}
    return TypeResult(**{**base, **kw})


def test_summary_files_say_each_types_verdict_and_link_its_report(tmp_path: Path):
    run = tmp_path / "bringup-hw-aaa" / "runs" / "r1"
    ok = _t(
        status="validated",
        validated=True,
        why="a configuration passed every probe",
        command="python -m x --a | b",
        launches=3,
        screening_launches=1,
        minimize_launches=2,
        findings=str(run / "FINDINGS.md"),
        report=str(run / "report.html"),
        note="its node's facts hash to bringup-hw-zzz",
    )
    bad = _t(node_type="bringup-hw-bbb", status="no-working-config", why="every way tried failed", launches=5)
    facts = _t(node_type="bringup-hw-ccc", nodes=1, status="facts-failed", why="the facts task failed: X")
    res = NodeTypesResult(
        address="h:6379",
        asked="all",
        out=str(tmp_path),
        started=0.0,
        wall_seconds=9.0,
        types=[ok, bad, facts],
    )
    assert not res.all_validated
    assert [verdict(t) for t in res.types] == [
        "validated",
        "not validated (no-working-config)",
        "facts failed",
    ]
    md_path, js_path = write_summary(res, tmp_path)
    assert (md_path.name, js_path.name) == (SUMMARY_MD, SUMMARY_JSON)
    md = md_path.read_text()
    rows = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| `")}
    assert set(rows) == {"`bringup-hw-aaa`", "`bringup-hw-bbb`", "`bringup-hw-ccc`"}
    a = rows["`bringup-hw-aaa`"]
    assert "| validated |" in a and "--a \\| b" in a  # a pipe in a command does not break the table
    assert "3 (1 screens) + 2 minimize" in a
    assert "[FINDINGS.md](bringup-hw-aaa/runs/r1/FINDINGS.md)" in a  # relative to the summary
    assert "[report.html](bringup-hw-aaa/runs/r1/report.html)" in a
    assert "every way tried failed" in rows["`bringup-hw-bbb`"]
    assert "| facts failed |" in rows["`bringup-hw-ccc`"]
    assert "1 of 3 validated" in md and "facts hash to bringup-hw-zzz" in md
    js = json.loads(js_path.read_text())
    assert [(t["node_type"], t["validated"]) for t in js["types"]] == [
        ("bringup-hw-aaa", True),
        ("bringup-hw-bbb", False),
        ("bringup-hw-ccc", False),
    ]
    assert NodeTypesResult(**{**res.model_dump(), "types": [ok]}).all_validated


@pytest.mark.slow
def test_cli_node_types_needs_ray_and_a_new_run(tmp_path: Path):
    out = subprocess.run(
        [sys.executable, "-m", "bringup", "run", "--node-types", "all", "--runs-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert out.returncode == 2 and "--node-types needs --ray" in out.stderr, out.stderr
    # a resumed run is one type's (its own runs folder), never a fleet
    with pytest.raises(typer.Exit) as e:
        run_node_types(RunSettings(ray="127.0.0.1:1"), tmp_path, "all", json_out=True, resume=True)
    assert e.value.exit_code == 2
    assert not (tmp_path / SUMMARY_MD).exists()
