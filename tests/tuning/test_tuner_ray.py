"""`bringup tune --ray`: tuning points on a real local Ray cluster (a head that holds no point and
two worker nodes that replay the tuning scenario's 2-GPU machine, one GPU each).

What must match the local executor, and what cannot: a point's feasibility is the scenario's
rule for its knobs (an OOM in graph capture above 0.90 with graphs past batch 128), so it is the
same wherever the point ran. Its objective is not: goodput is measured in real time against the
replayed server on a shared machine, and two local tunings of the same seed already differ by
10-15 % per point (and can crown different winners). So the test compares what no measurement
steers: with the random sampler one point at a time, the sampler's asks depend only on the seed,
and the points launched, their order and their feasibility must be identical; with TPE two at
once, every point both tunings measured must have the same feasibility.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import optuna
import psutil
import pytest
from optuna.storages.journal import JournalFileBackend

from bringup.trial.rayexec import DOUBLE_GPU, resource_name
from tests.conftest import TUNE_SCENARIO, bringup, tune_args
from tests.paths import ROOT
from tests.raycluster import LocalCluster, local_cluster

pytestmark = pytest.mark.slow

SCENARIO = TUNE_SCENARIO
OOM = "oom-graph-capture"  # the scenario's one failure on these knobs


def hw_resource(scenario: Path) -> str:
    """The Ray resource of the machine a scenario replays, as `bringup tune` computes it."""
    from bringup.engines.targets import resolve_target
    from bringup.session.identity import gather_facts, hardware_fingerprint

    t = resolve_target(engine=None, model=None, scenario=scenario, python=None, time_scale=0.05, gpus=None)
    facts, _ = gather_facts(t)
    return resource_name(hardware_fingerprint(facts, t.world.identity_scope()))


@pytest.fixture(scope="module")
def cluster():
    res = hw_resource(SCENARIO)
    c = local_cluster()
    try:
        c.start_node("head", {"head": 1}, head=True)  # the driver's node: the event sink, no point
        c.wait_nodes(1)
        for n, name in enumerate(("a", "b"), start=2):  # one at a time: two cores start one node at a time
            c.start_node(name, {res: 1, DOUBLE_GPU: 1, f"node-{name}": 1})
            c.wait_nodes(n)
        yield c
    finally:
        c.stop()
        assert not c.processes(), "a process of the test cluster survived its stop"


def tune(scenario: Path, runs: Path, *extra: str) -> dict:
    rc, d, _, err = bringup(*tune_args(runs, *extra, scenario=scenario), timeout=400)
    assert rc == 0, err[-3000:]
    return d


def launched(d: dict) -> list[tuple]:
    """The points launched, in order: knobs and feasibility (what no measurement steers)."""
    return [
        (tuple(sorted(p["knobs"].items())), p["status"] != "infeasible", p["failure_class"])
        for p in d["points"]
        if p["failure_class"] != "predicted"
    ]


def feasibility(d: dict) -> dict[tuple, tuple]:
    return {k: (ok, fc) for k, ok, fc in launched(d)}


def test_tune_on_the_cluster_finds_what_the_local_tuning_finds(cluster: LocalCluster, tmp_path: Path):
    same = ("--sampler", "random", "--trials", "5", "--seed", "3", "--time-scale", "0.05", "--sweep", "")
    local = tune(SCENARIO, tmp_path / "local", *same)
    remote = tune(SCENARIO, tmp_path / "ray", *same, "--ray", cluster.address, "--parallel", "1")
    print(
        f"\nwall s, 5 points one at a time: local {local['wall_seconds']:.1f}, ray {remote['wall_seconds']:.1f}"
    )
    assert local["launches"] == remote["launches"] == 5 and remote["parallel"] == 1
    assert launched(remote) == launched(local)  # the same points, in the same order, same verdicts
    assert any(not ok for _, ok, _ in launched(local)) and any(ok for _, ok, _ in launched(local))
    assert {fc for _, ok, fc in launched(remote) if not ok} == {OOM}
    # the best is one of the feasible points both found (which one is a measurement: see above)
    feasible = {k for k, ok, _ in launched(local) if ok}
    assert tuple(sorted(remote["best"]["knobs"].items())) in feasible
    assert not remote["lost_trials"]
    # every point ran on a worker node, and its trial folder came back to the driver's tune folder
    tune_dir = Path(remote["run_dir"]) / "tune" / remote["tune_id"]
    for p in remote["points"]:
        if p["failure_class"] == "predicted":
            continue
        assert p["where"].count("/") == 1, p["where"]
        assert Path(p["trial_dir"]).parent == tune_dir / "trials"
        assert (Path(p["trial_dir"]) / "server.log").read_text().strip()
    assert all(not p["where"] for p in local["points"])

    # TPE, as wide as the cluster (--parallel defaults to auto with --ray): both workers, two at
    # once on the simulated clock, the study at the driver, and the same verdict on every point
    # both tunings measured.
    tpe = ("--trials", "6", "--seed", "1", "--sweep", "")
    wide = tune(SCENARIO, tmp_path / "wide", *tpe, "--ray", cluster.address)
    assert wide["parallel"] == 2 and wide["launches"] == 6 and wide["clock"] == "simulated"
    pts = [p for p in wide["points"] if p["failure_class"] != "predicted"]
    assert len({p["where"] for p in pts}) == 2  # both workers took points
    assert sum(1 for p in pts if p["clock_start_s"] == 0.0) == 2
    local_tpe = tune(SCENARIO, tmp_path / "local-tpe", *tpe, "--parallel", "2")
    print(
        f"6 points two at once: wall s local {local_tpe['wall_seconds']:.1f}, ray {wide['wall_seconds']:.1f}; "
        f"simulated clock at the end local {local_tpe['clock_end_s']:.0f}, ray {wide['clock_end_s']:.0f}"
    )
    a, b = feasibility(wide), feasibility(local_tpe)
    common = set(a) & set(b)
    assert len(common) >= 3 and all(a[k] == b[k] for k in common)
    wide_dir = Path(wide["run_dir"]) / "tune" / wide["tune_id"]
    study = optuna.load_study(
        study_name=wide["tune_id"],
        storage=optuna.storages.JournalStorage(JournalFileBackend(str(wide_dir / "optuna.journal"))),
    )
    assert len([t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]) >= 6


def _servers(scenario: Path) -> list[psutil.Process]:
    """Scenario servers of this test (the scenario file is the test's own copy)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = p.info["cmdline"] or []
            if str(scenario) in " ".join(cmd) and "serve" in cmd:
                out.append(p)
        except psutil.Error:
            continue
    return out


def _node_of(cluster: LocalCluster, proc: psutil.Process):
    """The cluster node whose process group holds this process or one of its parents."""
    groups = {n.proc.pid: n for n in cluster.nodes}
    for p in [proc, *proc.parents()]:
        try:
            if os.getpgid(p.pid) in groups:
                return groups[os.getpgid(p.pid)]
        except (ProcessLookupError, psutil.Error):
            continue
    return None


def test_a_worker_killed_mid_point_costs_a_rerun_not_an_infeasible_point(
    cluster: LocalCluster, tmp_path: Path
):
    """Last in this file: it leaves the cluster one worker."""
    sc = tmp_path / "sc" / SCENARIO.name
    sc.parent.mkdir()
    shutil.copy(SCENARIO, sc)
    args = tune_args(
        tmp_path / "ray", "--trials", "4", "--sweep", "", "--seed", "1", "--time-scale", "0.1", scenario=sc
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "bringup", *args, "--ray", cluster.address],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    killed, servers = None, []
    deadline = time.monotonic() + 240
    try:
        while killed is None and proc.poll() is None and time.monotonic() < deadline:
            for s in _servers(sc):
                node = _node_of(cluster, s)
                if node is not None and node.name != "head":
                    servers.append(s)
                    node.kill()  # the machine loses power mid-point
                    killed = node
                    break
            time.sleep(0.1)
        out, err = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert killed is not None, "no point's server was seen on a worker"
    assert proc.returncode == 0, err[-3000:]
    import json

    d = json.loads(out)  # stdout is the one JSON object, whatever Ray said of the dead node
    print(f"\nlost: {d['lost_trials']}; tuning wall {d['wall_seconds']:.1f} s")
    assert len(d["lost_trials"]) == 1, d["lost_trials"]
    assert "Error" in d["lost_trials"][0]  # the Ray exception that said so
    # the lost point ran again and counts once; the budget was spent on points, not on the loss
    lost_seq = int(d["lost_trials"][0].split()[0].lstrip("#"))
    pts = [p for p in d["points"] if p["failure_class"] != "predicted"]
    assert d["launches"] == 4 and len(pts) == 4
    again = [p for p in pts if Path(p["trial_dir"]).name.startswith(f"{lost_seq:03d}-")]
    assert len(again) == 1
    assert again[0]["status"] != "infeasible" or again[0]["failure_class"] == OOM
    # no point is infeasible for any reason but the scenario's own failure
    assert {p["failure_class"] for p in pts if p["status"] == "infeasible"} <= {OOM}
    # nothing finished on the dead node before it died: every point ran on the survivor
    assert len({p["where"] for p in pts}) == 1
    _, alive = psutil.wait_procs(servers, timeout=10)
    assert not alive, "the lost node's server survived it"
