"""Ray is an optional extra: bringup imports and runs without it, and --ray without it says how
to get it (the cluster tests themselves are in tests/trial/test_ray.py, marked slow)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import bringup.trial.rayexec as rayexec
from bringup.cli import app
from bringup.session.run import Run, RunError, RunSettings
from bringup.trial.rayexec import RayClusterError, RayMissing, import_ray, resource_name, worker_command
from bringup.trial.slots import SlotError
from tests.paths import ROOT

SAMPLER = ROOT / "bringup/data/scenarios/qwen25-7b-sm120-flashinfer-sampler-vllm.yaml"


@pytest.mark.slow
def test_bringup_never_imports_ray_unless_a_run_asks():
    code = (
        "import sys, bringup.session.run, bringup.trial.rayexec, bringup.cli.run, bringup.cli.doctor, "
        "bringup.cli.tune, bringup.tuning.session; "
        "print('ray' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert out.stdout.strip() == "False"


def test_ray_flag_without_ray_says_how_to_install_it(monkeypatch, tmp_path: Path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(RayMissing, match=r"pip install 'bringup\[ray\]'"):
        import_ray()
    with pytest.raises(RunError, match=r"pip install 'bringup\[ray\]'"):
        Run(RunSettings(scenario=str(SAMPLER), ray="auto"), tmp_path).execute()


TUNE = ROOT / "bringup/data/scenarios/tune-llama31-70b-fp8-h200-sglang.yaml"


def _tune(tmp_path: Path, *extra: str):
    args = ["tune", "--scenario", str(TUNE), "--trials", "1", "--sweep", "", "--runs-dir", str(tmp_path)]
    return CliRunner().invoke(app, [*args, *extra])


def test_tune_ray_without_ray_says_how_to_install_it(monkeypatch, tmp_path: Path):
    monkeypatch.setitem(sys.modules, "ray", None)
    res = _tune(tmp_path, "--ray", "auto")
    assert res.exit_code == 2 and "pip install 'bringup[ray]'" in res.output, res.output


@pytest.mark.parametrize(("extra", "width"), [((), "auto"), (("--parallel", "3"), "3")])
def test_tune_ray_takes_parallel_as_run_does(monkeypatch, tmp_path: Path, extra, width):
    """--ray alone is as wide as the cluster (parallel auto), --parallel N caps it; a cluster
    without a node of this hardware is a usage error that says so, before any point runs."""
    asked: list = []

    def no_node(remote_for, hw_fp, address, parallel, local_gpus, simulated, **kw):
        asked.append((address, parallel, local_gpus, simulated, kw["finish"] is not None))
        raise RayClusterError(f"no live Ray node declares {resource_name(hw_fp)}")

    monkeypatch.setattr(rayexec, "cluster_executor", no_node)
    res = _tune(tmp_path, "--ray", "10.0.0.1:6379", *extra)
    assert res.exit_code == 2 and "no live Ray node declares bringup-hw-" in res.output, res.output
    assert asked == [("10.0.0.1:6379", width, 2, True, True)]  # the scenario's machine: 2 GPUs


def test_cluster_executor_width_is_parallel_or_the_clusters(monkeypatch):
    got: list = []
    monkeypatch.setattr(rayexec, "RayExecutor", lambda *a, **kw: got.append(kw["width"]))
    for parallel in ("auto", "3"):
        rayexec.cluster_executor(lambda j: None, "hw:ab", "auto", parallel, 2, True)  # type: ignore[arg-type,return-value]
    assert got == [None, 3]
    with pytest.raises(SlotError):
        rayexec.cluster_executor(lambda j: None, "hw:ab", "auto", "two", 2, True)  # type: ignore[arg-type,return-value]


def test_node_resource_is_named_from_the_hardware_fingerprint():
    assert resource_name("hw:2221da1de8") == "bringup-hw-2221da1de8"
    # A replayed machine's scope keeps journals apart, not machines: the same hash, the same nodes.
    assert resource_name("scenario:qwen:d84eb11dbb") == "bringup-hw-d84eb11dbb"
    assert worker_command("hw:ab", "10.0.0.1:6379") == (
        "ray start --address 10.0.0.1:6379 --resources '{\"bringup-hw-ab\": 1}'"
    )
