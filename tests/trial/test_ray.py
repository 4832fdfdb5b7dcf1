"""Trials on a real local Ray cluster (bringup/trial/rayexec.py): a head node that holds no trial and
two worker nodes that replay the scenario's machine, each a separate Ray node on this machine.

A scenario bring-up through Ray must find what the local executor finds; a worker node killed
mid-trial loses that trial (run again elsewhere), never gives a verdict on the candidate; a
cancelled trial, or one whose worker is killed, leaves no server behind.
"""

from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path

import psutil
import pytest

from bringup.record.results import RunResult
from bringup.session.run import QuietObserver, Run, RunError, RunSettings
from bringup.trial.executor import Job
from bringup.trial.rayexec import DOUBLE_GPU, RayExecutor, resource_name, worker_command
from tests.paths import ROOT
from tests.raycluster import LocalCluster, local_cluster

pytestmark = pytest.mark.slow

SCENARIOS = ROOT / "bringup" / "data" / "scenarios"
SAMPLER = SCENARIOS / "qwen25-7b-sm120-flashinfer-sampler-vllm.yaml"  # 2 launches, validates
SMEM = SCENARIOS / "gpt-oss-20b-triton-smem-sm120-vllm.yaml"  # 5 launches, validates; same machine


def hw_resource(scenario: Path) -> str:
    r = Run(RunSettings(scenario=str(scenario)), Path("."))
    r.prepare_offline()
    return resource_name(r.hw_fp)


@pytest.fixture(scope="module")
def cluster():
    res = hw_resource(SAMPLER)
    assert res == hw_resource(SMEM)  # both replay the same machine (sm120, one GPU)
    c = local_cluster()
    try:
        c.start_node("head", {"head": 1}, head=True)  # the driver's node: runs the event sink, no trial
        c.wait_nodes(1)
        for n, name in enumerate(("a", "b"), start=2):  # one at a time: two cores start one node at a time
            # b also declares a GPU to Ray (none exists): what a real engine's trial asks for
            c.start_node(name, {res: 1, DOUBLE_GPU: 1, f"node-{name}": 1}, gpus=1 if name == "b" else 0)
            c.wait_nodes(n)
        yield c
    finally:
        import ray

        # A driver still connected when its cluster stops is killed by Ray once the GCS has been
        # gone long enough (it took pytest down with it, tests later).
        if ray.is_initialized():
            ray.shutdown()
        c.stop()
        assert not c.processes(), "a process of the test cluster survived its stop"


def server_procs(scenario: Path) -> list[psutil.Process]:
    """Scenario servers of this test (the scenario file is the test's own copy)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if str(scenario) in " ".join(p.info["cmdline"] or []) and "serve" in (p.info["cmdline"] or []):
                out.append(p)
        except psutil.Error:
            continue
    return out


def findings(res: RunResult) -> tuple:
    return (
        res.status,
        res.final_command,
        res.minimal_fix_str,
        [(a.purpose, a.changes, a.status, a.failure_class) for a in res.attempts],
    )


class Events(QuietObserver):
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def trial_event(self, kind: str, text: str) -> None:
        self.events.append((kind, text))


def run(tmp: Path, scenario: Path, observer=None, **kw) -> RunResult:
    r = Run(RunSettings(scenario=str(scenario), **kw), tmp, observer=observer or QuietObserver())
    return r.execute()


def test_ray_run_finds_what_the_local_run_finds(cluster: LocalCluster, tmp_path: Path):
    local = run(tmp_path / "local", SMEM)
    ev = Events()
    remote = run(tmp_path / "ray", SMEM, observer=ev, ray=cluster.address, parallel="1")
    assert local.status == "validated" and local.launches >= 2  # a failure first, then the fix
    assert findings(remote) == findings(local)
    assert not remote.lost_trials
    # Each trial ran on a worker node, its folder (server.log ...) landed in the run folder.
    for a in remote.attempts:
        assert a.where.count("/") == 1 and a.where != "local"
        log = Path(a.trial_dir) / "server.log"
        assert log.read_text().strip(), f"{log} came back empty"
        assert str(Path(a.trial_dir)) in (Path(a.trial_dir) / "outcome.json").read_text()
    # Log lines streamed back while the trials ran, as a local run's observer sees them.
    assert sum(1 for k, _ in ev.events if k == "line") >= 10
    assert any(k == "phase" for k, _ in ev.events)
    # Both workers' GPUs: as wide as the cluster, and still the same fix.
    wide = run(tmp_path / "wide", SMEM, ray=cluster.address, parallel="auto")
    assert wide.parallel == 2
    assert (wide.status, wide.final_command, wide.minimal_fix_str) == (
        local.status,
        local.final_command,
        local.minimal_fix_str,
    )


def test_no_node_of_this_hardware_says_how_to_start_one(cluster: LocalCluster, tmp_path: Path):
    other = SCENARIOS / "llama31-70b-pcie-nccl-hang-vllm.yaml"  # another machine (4 GPUs, PCIe)
    with pytest.raises(RunError) as e:
        run(tmp_path, other, ray=cluster.address)
    assert hw_resource(other) in str(e.value) and "ray start --address" in str(e.value)
    assert hw_resource(SAMPLER) in str(e.value)  # what the cluster does have
    # and the journal does not keep the run "running" forever
    from bringup.record.journal import Journal

    row = Journal(tmp_path / "journal.sqlite").latest_run()
    assert row is not None and row.status == "interrupted"


class Stopped(Exception):
    pass


def _copy(scenario: Path, tmp: Path) -> Path:
    """The test's own copy of a scenario: its servers are told apart from anyone else's."""
    dst = tmp / "sc" / scenario.name
    dst.parent.mkdir(parents=True)
    shutil.copy(scenario, dst)
    return dst


@pytest.mark.parametrize("grace", [20.0, 0.0], ids=["cancel-through-sink", "force-killed-worker"])
def test_close_tears_the_remote_server_down(cluster: LocalCluster, tmp_path: Path, monkeypatch, grace: float):
    """A run stopped mid-trial: the task tears its server down when told; a task that does not
    answer in time is killed with its worker, and its server dies with it (PR_SET_PDEATHSIG)."""
    import bringup.trial.rayexec as rayexec

    monkeypatch.setattr(rayexec, "CANCEL_GRACE_S", grace)
    sc = _copy(SAMPLER, tmp_path)

    class Stop(QuietObserver):
        seen: list = []

        def trial_event(self, kind: str, text: str) -> None:
            if kind == "line" and server_procs(sc):
                self.seen.extend(server_procs(sc))
                raise Stopped("the user stops the run")

    obs = Stop()
    with pytest.raises(Stopped):
        run(tmp_path / "runs", sc, observer=obs, ray=cluster.address, parallel="1", time_scale=0.2)
    assert obs.seen, "the server never ran"
    _, alive = psutil.wait_procs(obs.seen, timeout=10)
    assert not alive and not server_procs(sc), "a trial's server survived the run's close"


def test_executor_without_a_node_fits_nothing_it_cannot_place(cluster: LocalCluster):
    """ever_fits: a trial runs on one node, so it must fit the largest one."""
    res = hw_resource(SAMPLER)
    ex = RayExecutor(
        lambda j: (_ for _ in ()).throw(AssertionError("no submit")),
        f"x:{res[len('bringup-hw-') :]}",
        address=cluster.address,
        simulated=True,
    )
    try:
        live = len(ex.nodes())
        assert ex.width == live and ex.total_gpus == live
        assert ex.ever_fits(Job(1, "search", None, False, {}, need=1))  # type: ignore[arg-type]
        assert not ex.ever_fits(Job(2, "search", None, False, {}, need=2))  # type: ignore[arg-type]
        assert "bringup-hw-" in worker_command("hw:abc") and '"bringup-hw-abc": 1' in worker_command("hw:abc")
    finally:
        ex.close()


def test_a_real_engines_trial_gets_the_gpus_ray_assigns(cluster: LocalCluster, tmp_path: Path):
    """A real engine's need is Ray's GPUs: the task lands on the node that has one, and the trial
    sees the GPU ids Ray gave it (the engine's CUDA_VISIBLE_DEVICES), recorded with the node."""
    import dataclasses

    import ray

    r = Run(RunSettings(scenario=str(SAMPLER)), tmp_path)
    r.prepare()
    r._open()

    def as_real(job: Job):
        rt, tdir = r._remote_job(job)
        return dataclasses.replace(rt, real_gpus=True), tdir

    ex = RayExecutor(as_real, r.hw_fp, address=cluster.address, simulated=False)
    try:
        assert ex.total_gpus == 1 and ex.width == 1  # only b declares a GPU
        job = Job(1, "search", r.baseline, False, {}, need=1)
        assert (
            ex.fits(job)
            and ex.ever_fits(job)
            and not ex.ever_fits(Job(2, "search", r.baseline, False, {}, need=2))
        )
        ex.submit(job)
        assert not ex.fits(Job(3, "search", r.baseline, False, {}, need=1))  # its one GPU is taken
        d = ex.wait()
        b = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and "node-b" in n["Resources"])
    finally:
        ex.close()
    assert d.run is not None and d.run.outcome.status == "fails"  # the baseline fails on this machine
    assert d.job.gpus == ["0"] and d.job.where.endswith("/" + b[:8])
    assert (d.run.tdir / "server.log").read_text().strip()


def test_cli_runs_on_the_cluster_as_wide_as_its_gpus(cluster: LocalCluster, tmp_path: Path):
    """`bringup run --ray ADDRESS`: --parallel defaults to the cluster's width (two workers, one GPU each)."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bringup",
            "run",
            "--scenario",
            str(SAMPLER),
            "--ray",
            cluster.address,
            "--runs-dir",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    d = json.loads(out.stdout)
    assert d["status"] == "validated" and d["parallel"] == 2 and d["node_type"] == hw_resource(SAMPLER)
    assert all(a["where"].count("/") == 1 for a in d["attempts"])


def test_a_node_lost_mid_trial_is_run_again_not_failed(cluster: LocalCluster, tmp_path: Path):
    import ray

    sc = _copy(SAMPLER, tmp_path)
    local = run(tmp_path / "local", sc)
    killed: list[str] = []
    t_kill: list[float] = []
    servers: list[psutil.Process] = []

    class KillNode(QuietObserver):
        def __init__(self) -> None:
            self.run: Run | None = None

        def trial_event(self, kind: str, text: str) -> None:
            if killed or kind != "line" or self.run is None:
                return
            job = self.run.ex.in_flight()[0]
            node_id = job.where.split("/")[-1]
            if not node_id or job.where == "ray:pending":
                return
            servers.extend(server_procs(sc))
            for n in ray.nodes():
                if n["NodeID"].startswith(node_id):
                    name = next(k[5:] for k in n["Resources"] if k.startswith("node-"))
                    next(x for x in cluster.nodes if x.name == name).kill()
                    killed.append(node_id)
                    t_kill.append(time.monotonic())

    obs = KillNode()
    r = Run(
        RunSettings(scenario=str(sc), ray=cluster.address, parallel="1", time_scale=0.05),
        tmp_path / "ray",
        observer=obs,
    )
    obs.run = r
    res = r.execute()
    assert killed, "no node was killed mid-trial"
    assert len(res.lost_trials) == 1 and res.lost_trials[0].startswith(
        f"#1 on {socket.gethostname()}/{killed[0]}: "
    )
    assert "Error" in res.lost_trials[0]  # the Ray exception that said so
    print(f"lost: {res.lost_trials[0]}; run ended {time.monotonic() - t_kill[0]:.1f} s after the kill")
    assert findings(res) == findings(local)  # no verdict from the lost trial; still validated
    assert res.status == "validated"
    assert all(a.where.split("/")[-1] != killed[0] for a in res.attempts)  # both ran on the other node
    report = (Path(res.run_dir) / "FINDINGS.md").read_text()
    assert "## Where trials ran" in report and "lost with its node" in report
    assert res.node_type == hw_resource(SAMPLER) and res.node_type in report
    _, alive = psutil.wait_procs(servers, timeout=10)
    assert servers and not alive, "the lost node's server survived it"


def test_a_cancelled_remote_trial_tears_its_server_down_and_comes_back_cancelled(
    cluster: LocalCluster, tmp_path: Path
):
    """Preemption through Ray: the cancel reaches the task through the event sink, the task tears
    its server down as a local trial does, and the trial comes back cancelled, long before its end."""
    sc = _copy(SAMPLER, tmp_path)
    r = Run(RunSettings(scenario=str(sc), time_scale=1.0), tmp_path / "runs")
    r.prepare()
    r._open()
    ex = RayExecutor(r._remote_job, r.hw_fp, address=cluster.address, simulated=False, width=1)
    try:
        job = r.launcher.job(1, "search", r.baseline, {})
        ex.submit(job)
        end = time.monotonic() + 60
        while not server_procs(sc) and time.monotonic() < end:
            time.sleep(0.2)
        procs = server_procs(sc)
        assert procs, "the server never ran"
        t0 = time.monotonic()
        ex.cancel(job)
        d = ex.wait()
        assert d.cancelled and d.run is not None and time.monotonic() - t0 < 60
        _, alive = psutil.wait_procs(procs, timeout=10)
        assert not alive and not server_procs(sc), "a cancelled trial's server survived"
    finally:
        ex.close()
