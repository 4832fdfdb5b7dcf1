"""Ray is an optional extra: bringup imports and runs without it, and --ray without it says how
to get it (the cluster tests themselves are in tests/test_ray.py, marked slow)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bringup.rayexec import RayMissing, import_ray, resource_name, worker_command
from bringup.run import Run, RunError, RunSettings

SAMPLER = (
    Path(__file__).resolve().parents[1]
    / "bringup/data/scenarios/qwen25-7b-sm120-flashinfer-sampler-vllm.yaml"
)


def test_bringup_never_imports_ray_unless_a_run_asks():
    code = (
        "import sys, bringup.run, bringup.rayexec, bringup.cli.run, bringup.cli.doctor; "
        "print('ray' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert out.stdout.strip() == "False"


def test_ray_flag_without_ray_says_how_to_install_it(monkeypatch, tmp_path: Path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(RayMissing, match=r"pip install 'bringup\[ray\]'"):
        import_ray()
    with pytest.raises(RunError, match=r"pip install 'bringup\[ray\]'"):
        Run(RunSettings(scenario=str(SAMPLER), ray="auto"), tmp_path).execute()


def test_node_resource_is_named_from_the_hardware_fingerprint():
    assert resource_name("hw:2221da1de8") == "bringup-hw-2221da1de8"
    # A replayed machine's scope keeps journals apart, not machines: the same hash, the same nodes.
    assert resource_name("scenario:qwen:d84eb11dbb") == "bringup-hw-d84eb11dbb"
    assert worker_command("hw:ab", "10.0.0.1:6379") == (
        "ray start --address 10.0.0.1:6379 --resources '{\"bringup-hw-ab\": 1}'"
    )
