"""GPU hygiene around launches (bringup/facts/gpus.py), with a fake NVML and a fake nvidia-smi."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bringup.core.candidate import Candidate
from bringup.engines.base import get_engine
from bringup.engines.targets import TargetError, resolve_target
from bringup.facts.gpus import GpuWatch, read_usage, visible_indices
from bringup.trial.launch import Trial, TrialSettings

GIB = 1024**3
MIB = 1024**2


class NVMLError(Exception):
    pass


class FakeNVML:
    """The pynvml calls bringup makes, answering from a script of readings (one per nvmlInit)."""

    NVML_NVLINK_MAX_LINKS = 2

    def __init__(self, readings, fail_init=None, fail_memory_on=None):
        self.readings = list(readings)  # each: list of (used_bytes, [(pid, used_bytes), ...]) per GPU
        self.fail_init = fail_init
        self.fail_memory_on = fail_memory_on
        self.inits = 0
        self.now = None

    def nvmlInit(self):
        if self.fail_init:
            raise NVMLError(self.fail_init)
        self.now = self.readings[min(self.inits, len(self.readings) - 1)]
        self.inits += 1

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return b"580.95.05"

    def nvmlSystemGetCudaDriverVersion(self):
        return 13000

    def nvmlDeviceGetCount(self):
        return len(self.now)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return "NVIDIA H200"

    def nvmlDeviceGetMemoryInfo(self, h):
        if self.fail_memory_on == h:
            raise NVMLError("GPU is lost")
        return SimpleNamespace(total=140 * GIB, used=self.now[h][0])

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-{h}"

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=f"00000000:{h:02d}:00.0")

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return (9, 0)

    def nvmlDeviceGetNvLinkState(self, h, link):
        raise NVMLError("Not Supported")

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in self.now[h][1]]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        return []


def names(pid):
    return {4242: "python3: python -m vllm.entrypoints.openai.api_server"}.get(pid, "")


IDLE = [(600 * MIB, []), (600 * MIB, [])]
BUSY0 = [(90 * GIB, [(4242, 89 * GIB)]), (600 * MIB, [])]

SMI_GPUS = (
    "index, name, uuid, memory.total [MiB], memory.used [MiB]\n0, NVIDIA H200, GPU-0, 143771 MiB, 92000 MiB\n"
)
SMI_APPS = "gpu_uuid, pid, process_name, used_memory [MiB]\nGPU-0, 4242, python3, 91000 MiB\n"


def _read(nvml, smi=None, which=lambda _: "/usr/bin/nvidia-smi"):
    return lambda: read_usage(nvml, run=smi, which=which, name_of=names)


def test_nvml_reading_names_processes():
    r = _read(FakeNVML([BUSY0]))()
    assert r.source == "nvml" and [g.used_mib for g in r.gpus] == [90 * 1024, 600]
    (p,) = r.processes()
    assert (p.pid, p.gpu, p.used_mib) == (4242, 0, 89 * 1024) and "vllm" in p.name


def test_no_gpu_is_a_no_op_that_says_why():
    watch = GpuWatch(_read(FakeNVML([], fail_init="Driver Not Loaded"), which=lambda _: None))
    msgs, held, rec = watch.before_launch(None)
    assert held is None and len(msgs) == 1
    assert (
        "no NVIDIA GPU here" in msgs[0]
        and "Driver Not Loaded" in msgs[0]
        and "nvidia-smi is not on PATH" in msgs[0]
    )
    assert rec["gpus"] == "none"
    assert watch.after_teardown(None) == ([], {})  # nothing to wait for
    again = watch.before_launch(None)
    assert again[0] == [] and again[2] == rec  # said once, recorded every time


def test_nvml_error_mid_read_falls_back_to_nvidia_smi():
    calls = []

    def smi(argv):
        calls.append(argv[1])
        return SMI_GPUS if argv[1].startswith("--query-gpu") else SMI_APPS

    r = _read(FakeNVML([IDLE], fail_memory_on=0), smi)()
    assert r.source == "nvidia-smi"
    assert any("NVML failed while reading GPU 0" in p and "GPU is lost" in p for p in r.problems)
    assert r.gpus[0].used_mib == 92000
    (p,) = r.processes()
    assert (p.pid, p.gpu, p.used_mib) == (4242, 0, 91000) and "vllm" in p.name  # psutil name over smi's


def test_nvidia_smi_that_fails_is_said():
    r = _read(FakeNVML([], fail_init="Unknown Error"), lambda argv: None)()
    assert r.source == "none" and not r.gpus
    assert "nvidia-smi --query-gpu failed" in r.why_none() and "Unknown Error" in r.why_none()


def test_busy_gpus_are_named_before_the_first_launch_only():
    watch = GpuWatch(_read(FakeNVML([BUSY0, BUSY0, BUSY0])))
    msgs, held, rec = watch.before_launch(None)
    assert held is None
    assert msgs == [
        "GPU 0 (NVIDIA H200) is busy: 92160 of 143360 MiB in use; pid 4242 "
        "(python3: python -m vllm.entrypoints.openai.api_server) on GPU 0, 91136 MiB"
    ]
    assert rec["used_mib_before"] == {0: 92160, 1: 600}
    assert watch.before_launch(None)[0] == []


def test_memory_given_back_after_teardown():
    serving = [(60 * GIB, [(777, 59 * GIB)]), (600 * MIB, [])]
    t = [0.0]
    watch = GpuWatch(
        _read(FakeNVML([IDLE, serving, serving, IDLE])),
        settle_timeout=10,
        poll=1,
        sleep=lambda s: t.__setitem__(0, t[0] + s),
        clock=lambda: t[0],
    )
    watch.before_launch(None)
    msgs, rec = watch.after_teardown(None)
    assert msgs == [] and rec["used_mib_after"] == {0: 600, 1: 600} and rec["returned_s"] == 2.0
    assert watch.held is None


def test_memory_held_stops_the_next_launch_and_names_the_holder():
    held_state = [(60 * GIB, [(4242, 59 * GIB)]), (600 * MIB, [])]
    t = [0.0]
    watch = GpuWatch(
        _read(FakeNVML([IDLE] + [held_state] * 50 + [IDLE])),
        settle_timeout=5,
        poll=1,
        sleep=lambda s: t.__setitem__(0, t[0] + s),
        clock=lambda: t[0],
    )
    watch.before_launch(None)
    msgs, rec = watch.after_teardown(None)
    assert msgs[0] == "GPU memory not given back 5 s after teardown:"
    assert "GPU 0: 61440 MiB in use, 600 MiB before the last launch" in msgs
    assert any("pid 4242" in m and "vllm" in m for m in msgs)
    _, held, rec = watch.before_launch(None)
    assert held is not None and held.processes[0].pid == 4242 and rec["held"] == held.evidence()


def test_a_hold_on_another_gpu_does_not_stop_this_trial():
    held_on_1 = [(600 * MIB, []), (60 * GIB, [(4242, 59 * GIB)])]
    watch = GpuWatch(_read(FakeNVML([IDLE, held_on_1, held_on_1])), settle_timeout=0)
    watch.before_launch([0])
    assert watch.after_teardown([0])[0] == []
    assert watch.before_launch([0])[1] is None


def test_trial_reports_gpu_memory_held_without_launching(tmp_path):
    held_state = [(60 * GIB, [(4242, 59 * GIB)])]
    watch = GpuWatch(_read(FakeNVML([[IDLE[0]], held_state, held_state])), settle_timeout=0)
    watch.before_launch(None)
    watch.after_teardown(None)  # the previous trial's server left 60 GiB
    eng = get_engine("transformers", gpus="0")
    cand = Candidate.make("transformers", "/nonexistent/model")
    out = Trial(eng, cand, tmp_path / "t", TrialSettings(gpu_watch=watch)).run()
    assert out.status == "fails" and out.failure_class == "gpu-memory-held" and not out.launched
    assert out.phase == "spawn" and any("pid 4242" in e for e in out.evidence)
    assert not (tmp_path / "t" / "server.pid").exists()  # nothing was started
    assert (tmp_path / "t" / "outcome.json").exists()


@pytest.mark.slow
def test_cuda_visible_devices_from_the_target(tiny_model):
    eng = resolve_target(engine="transformers", model=str(tiny_model), gpus="2,3").engine
    env = eng.launch_env(Candidate.make("transformers", str(tiny_model), env={"CUDA_VISIBLE_DEVICES": "0"}))
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert (
        visible_indices("2,3") == [2, 3]
        and visible_indices("GPU-abc") is None
        and visible_indices("") is None
    )
    with pytest.raises(TargetError, match="GPU indices or UUIDs"):
        resolve_target(engine="transformers", model=str(tiny_model), gpus="all")
