"""One model brought up on two node types of a real local Ray cluster at once (bringup/session/nodetypes.py).

The cluster: a head that only drives, and two workers that declare DIFFERENT node types (fake
fingerprints ``bringup-hw-aaaa000001`` and ``bringup-hw-bbbb000002``), each replaying the scenario's
GPU machine (``bringup-gpu``). Each type's run must keep to its own nodes (its facts task and every
trial), write its own runs folder, and the summary must list each type with its verdict; a type
no node declares, or whose facts task fails on its node, gets its line while the others validate.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import bringup.session.nodetypes as nodetypes
from bringup.session.nodetypes import SUMMARY_JSON, SUMMARY_MD, NodeTypes, facts_for_type, node_facts
from bringup.session.run import RunSettings
from bringup.trial.rayexec import DOUBLE_GPU, RayClusterError
from tests.paths import ROOT
from tests.raycluster import LocalCluster, local_cluster

pytestmark = pytest.mark.slow

REPO = ROOT
# 2 launches, validates
SAMPLER = REPO / "bringup/data/scenarios/qwen25-7b-sm120-flashinfer-sampler-vllm.yaml"
A, B, ABSENT = "bringup-hw-aaaa000001", "bringup-hw-bbbb000002", "bringup-hw-cccc000003"


@pytest.fixture(scope="module")
def cluster():
    c = local_cluster()
    try:
        c.start_node("head", {"head": 1}, head=True)
        c.wait_nodes(1)
        for n, (name, res) in enumerate((("a", A), ("b", B)), start=2):
            c.start_node(name, {res: 1, DOUBLE_GPU: 1, f"node-{name}": 1})
            c.wait_nodes(n)
        yield c
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        c.stop()
        assert not c.processes(), "a process of the test cluster survived its stop"


def node_names(cluster: LocalCluster) -> dict[str, str]:
    """Node id (first 8 characters, as a trial's `where` shows it) -> the test's node name."""
    import ray

    if not ray.is_initialized():
        ray.init(address=cluster.address, log_to_driver=False)
    return {
        n["NodeID"][:8]: next(k[5:] for k in n["Resources"] if k.startswith("node-"))
        for n in ray.nodes()
        if n["Alive"] and any(k.startswith("node-") for k in n["Resources"])
    }


def test_each_node_type_gets_its_own_bring_up_on_its_own_nodes(cluster: LocalCluster, tmp_path: Path):
    names = node_names(cluster)  # the test's own connection: the bring-up must not close it
    res = NodeTypes(RunSettings(scenario=str(SAMPLER), ray=cluster.address), tmp_path, "all").execute()
    assert [t.node_type for t in res.types] == [A, B]
    import ray

    assert ray.is_initialized()  # the driver's connection was the test's: left open
    for t, node in zip(res.types, ("a", "b"), strict=True):
        assert t.status == "validated" and t.validated and t.command and t.launches >= 2, t
        assert (t.nodes, t.gpus) == (1, 1.0)
        # Facts from a node of that type, which reports what it declares; a scenario's facts hash
        # to the machine it replays, not to the fake type: said, and routing still follows the type.
        assert t.declared == [t.node_type] and names[t.facts_node.split("/")[-1]] == node
        assert t.facts_type not in (A, B) and t.facts_type in t.note and t.facts_node in t.note
        # Its own runs folder: journal and report, as a single run writes them.
        tdir = tmp_path / t.node_type
        assert (tdir / "journal.sqlite").is_file() and Path(t.runs_dir) == tdir
        assert Path(t.findings).is_file() and Path(t.findings).is_relative_to(tdir)
        found = json.loads((Path(t.findings).parent / "findings.json").read_text())
        assert found["node_type"] == t.node_type
        assert found["facts"]["ray.node_type"] == t.node_type and found["facts"]["ray.node"] == t.facts_node
        # Every trial of this type ran on this type's node.
        assert {names[a["where"].split("/")[-1]] for a in found["attempts"]} == {node}
    # The summary beside them lists both types with their verdicts and links.
    md = (tmp_path / SUMMARY_MD).read_text()
    for t in res.types:
        row = next(line for line in md.splitlines() if line.startswith(f"| `{t.node_type}`"))
        assert "| validated |" in row and t.command in row
        assert f"({t.node_type}/runs/{t.run_id}/FINDINGS.md)" in row
    js = json.loads((tmp_path / SUMMARY_JSON).read_text())
    assert [(t["node_type"], t["status"]) for t in js["types"]] == [(A, "validated"), (B, "validated")]


def facts_failing_on_b(settings: dict) -> dict:
    """The facts task, failing for real on node b (as a node whose NVML is broken would)."""
    import ray

    me = ray.get_runtime_context().get_node_id()
    if any(n["NodeID"] == me and B in n["Resources"] for n in ray.nodes()):
        raise RuntimeError("NVML: driver/library version mismatch")
    return node_facts(settings)


def test_a_type_whose_facts_fail_or_with_no_node_is_a_line_not_a_crash(
    cluster: LocalCluster, tmp_path: Path, monkeypatch
):
    from ray import cloudpickle

    # pytest imports this file as a top-level module the nodes cannot import: ship the function itself
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    monkeypatch.setattr(nodetypes, "node_facts", facts_failing_on_b)
    res = NodeTypes(
        RunSettings(scenario=str(SAMPLER), ray=cluster.address), tmp_path, f"{B},{ABSENT},aaaa000001"
    ).execute()
    by = {t.node_type: t for t in res.types}
    assert list(by) == [B, ABSENT, A]  # the order asked
    assert by[B].status == "facts-failed" and "driver/library version mismatch" in by[B].why
    assert by[ABSENT].status == "no-node" and by[ABSENT].nodes == 0
    assert A in by[ABSENT].why and B in by[ABSENT].why and "ray start --address" in by[ABSENT].why
    assert by[A].validated  # the other types carry on
    assert not (tmp_path / B).exists() and not (tmp_path / ABSENT).exists()
    md = (tmp_path / SUMMARY_MD).read_text()
    assert "| facts failed |" in md and "| no node |" in md and "| validated |" in md
    assert "1 of 3 validated" in md


def test_cli_node_types_all_json(cluster: LocalCluster, tmp_path: Path):
    """`bringup run --ray ADDRESS --node-types ...`: exit 1 when one asked type did not validate."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bringup",
            "run",
            "--scenario",
            str(SAMPLER.relative_to(REPO)),  # relative to the driver's folder: sent to nodes absolute
            "--ray",
            cluster.address,
            "--node-types",
            f"all,{ABSENT}",
            "--runs-dir",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert out.returncode == 1, out.stderr[-2000:]
    d = json.loads(out.stdout)
    # "all" here means the types found (A, B), then the absent one asked by name
    assert [(t["node_type"], t["status"]) for t in d["types"]] == [
        (A, "validated"),
        (B, "validated"),
        (ABSENT, "no-node"),
    ]
    assert (tmp_path / SUMMARY_MD).is_file()
    # One type's run resumed on its own: still pinned to its type, its facts from its type's node.
    again = subprocess.run(
        [sys.executable, "-m", "bringup", "run", "--resume", "--runs-dir", str(tmp_path / A), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    r = json.loads(again.stdout)
    assert r["status"] == "validated" and r["node_type"] == A and r["facts"]["ray.node_type"] == A
    assert r["facts"]["ray.node"] == d["types"][0]["facts_node"]  # the one node of type A


def test_a_types_run_on_its_own_reads_the_facts_of_a_node_of_its_type(cluster: LocalCluster):
    """One type's run resumed (`--resume --runs-dir OUT/<type>`: its settings name the type) gathers
    its facts on a node of that type again, never the driver's; a type with no node says so."""
    names = node_names(cluster)
    for name, node in ((A, "a"), (B, "b")):
        got = facts_for_type(RunSettings(scenario=str(SAMPLER), ray=cluster.address, node_type=name))
        assert got is not None
        facts, _ = got
        assert facts["ray.node_type"] == name and names[facts["ray.node"].split("/")[-1]] == node
        assert facts["gpu.compute_capability"]  # the scenario's machine, as its facts task read it
    assert facts_for_type(RunSettings(scenario=str(SAMPLER), ray=cluster.address)) is None  # not pinned
    with pytest.raises(RayClusterError, match=f"no alive node declares {ABSENT}"):
        facts_for_type(RunSettings(scenario=str(SAMPLER), ray=cluster.address, node_type=ABSENT))


def test_ctrl_c_stops_every_types_run_and_leaves_no_server(cluster: LocalCluster, tmp_path: Path):
    """SIGINT at the driver: each type's run tears its trial down and its journal says interrupted."""
    import os
    import shutil
    import signal
    import time

    import psutil

    from bringup.record.journal import Journal

    sc = tmp_path / "sc" / SAMPLER.name  # the test's own copy: its servers are told apart
    sc.parent.mkdir()
    shutil.copy(SAMPLER, sc)

    def servers() -> list[psutil.Process]:
        out = []
        for p in psutil.process_iter(["cmdline"]):
            try:
                if str(sc) in " ".join(p.info["cmdline"] or []) and "serve" in (p.info["cmdline"] or []):
                    out.append(p)
            except psutil.Error:
                continue
        return out

    argv = [sys.executable, "-m", "bringup", "run", "--scenario", str(sc), "--time-scale", "0.3"]
    argv += ["--ray", cluster.address, "--node-types", "all", "--runs-dir", str(tmp_path / "out")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        deadline = time.monotonic() + 120
        while len(servers()) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        seen = servers()
        assert len(seen) == 2, "both types' first trials should be serving"
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err
    _, alive = psutil.wait_procs(seen, timeout=10)
    assert not alive and not servers(), "a trial's server survived the stop"
    for t in (A, B):
        row = Journal(tmp_path / "out" / t / "journal.sqlite").latest_run()
        assert row is not None and row.status == "interrupted"
