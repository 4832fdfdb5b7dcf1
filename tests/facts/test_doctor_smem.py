"""bringup doctor reads SM count and shared memory per block from the device where PyTorch is
installed (torch.cuda.get_device_properties), not from the compute-capability table."""

from __future__ import annotations

from types import SimpleNamespace

from bringup.facts import hardware
from tests.facts.test_gpus import IDLE, FakeNVML


class FakeTorch:
    """torch.cuda as the H200 machine answers it (227 KiB opt-in, 132 SMs; docs/facts.md)."""

    def __init__(self, n=2):
        self.calls = 0
        self.cuda = SimpleNamespace(
            is_available=lambda: True, device_count=lambda: n, get_device_properties=self._props
        )

    def _props(self, i):
        self.calls += 1
        return SimpleNamespace(shared_memory_per_block_optin=232448, multi_processor_count=132)


def test_auto_reads_the_device_through_torch(monkeypatch):
    monkeypatch.setattr(hardware, "smem_via_libcuda", lambda: None)
    torch = FakeTorch()
    snap = hardware.snapshot(smem=None, nvml=FakeNVML([IDLE]), torch=torch)
    assert snap.sources["smem"] == "torch" and torch.calls == 2
    f, src = hardware.facts_with_sources(snap)
    assert (f["gpu.smem_per_block_kib"], src["gpu.smem_per_block_kib"]) == (227, "measured")
    assert (f["gpu.multiprocessor_count"], src["gpu.multiprocessor_count"]) == (132, "measured")


def test_torch_is_asked_before_the_driver_when_installed(monkeypatch):
    monkeypatch.setattr(
        hardware,
        "smem_via_libcuda",
        lambda: [{"index": i, "smem_per_block_optin": 1, "multiprocessor_count": 1} for i in range(2)],
    )
    snap = hardware.snapshot(smem=None, nvml=FakeNVML([IDLE]), torch=FakeTorch())
    assert snap.sources["smem"] == "torch" and snap.gpus[0].multiprocessor_count == 132


def test_not_measured_falls_back_to_the_table():
    snap = hardware.snapshot(smem=False, nvml=FakeNVML([IDLE]), torch=FakeTorch())
    f, src = hardware.facts_with_sources(snap)
    assert "smem" not in snap.sources and src["gpu.smem_per_block_kib"] == "table"
    assert f["gpu.multiprocessor_count"] is None


def test_a_cpu_torch_measures_nothing_and_says_so(monkeypatch):
    monkeypatch.setattr(hardware, "smem_via_libcuda", lambda: None)
    cpu = SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: False))
    snap = hardware.snapshot(smem=None, nvml=FakeNVML([IDLE]), torch=cpu)
    assert snap.sources["smem"] == "unavailable" and any("could not be measured" in n for n in snap.notes)
