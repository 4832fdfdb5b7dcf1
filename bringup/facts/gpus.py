"""GPU hygiene around launches: who holds the GPUs, and did the last server give its memory back.

A launch into a GPU that a previous server (or someone else) still fills fails with an
out-of-memory error that blames the candidate's flags. So, around each trial:

- before the first launch, say which GPUs are busy and with what (pid, process, memory);
- before each launch, record the memory in use on the trial's GPUs;
- after teardown, wait (bounded) until that memory is back; if it is not, name the processes
  holding it, and the next trial reports the machine failure class ``gpu-memory-held`` instead of
  launching into a full GPU.

GPUs are read with NVML (nvidia-ml-py) and, when NVML does not answer, ``nvidia-smi``; both
through ``bringup.facts.hardware``. On a machine without NVIDIA GPUs every step is a no-op that says so.
Tests inject a fake NVML module and fake ``nvidia-smi`` runner through parameters.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bringup.facts import hardware

MIB = 1024**2
# Memory used may differ by a few MiB between two idle readings (driver bookkeeping); more than
# this above the pre-launch reading after teardown is memory still held.
TOLERANCE_MIB = 256
# A GPU counts as busy before a launch when this much is in use or some process is on it.
BUSY_MIB = 1024


@dataclass
class GpuProcess:
    pid: int
    gpu: int
    used_mib: int | None = None  # None: NVML/nvidia-smi does not say (some containers)
    name: str = ""  # process name and the start of its command line, when this host can see it

    def describe(self) -> str:
        mem = f"{self.used_mib} MiB" if self.used_mib is not None else "memory not reported"
        return f"pid {self.pid} ({self.name or 'not visible from here'}) on GPU {self.gpu}, {mem}"


@dataclass
class GpuUse:
    index: int
    name: str
    total_mib: int
    used_mib: int
    processes: list[GpuProcess] = field(default_factory=list)


@dataclass
class GpuReading:
    """The GPUs' memory and processes now, or why there is nothing to read."""

    gpus: list[GpuUse] = field(default_factory=list)
    source: str = "none"  # nvml | nvidia-smi | none
    problems: list[str] = field(default_factory=list)  # why NVML / nvidia-smi did not answer

    def used(self, indices: list[int] | None = None) -> dict[int, int]:
        return {g.index: g.used_mib for g in self.gpus if indices is None or g.index in indices}

    def processes(self, indices: list[int] | None = None) -> list[GpuProcess]:
        return [p for g in self.gpus if indices is None or g.index in indices for p in g.processes]

    def why_none(self) -> str:
        return (
            "no NVIDIA GPU here ("
            + "; ".join(self.problems or ["nothing answered"])
            + "): GPU checks are off"
        )


def _process_name(pid: int) -> str:
    """'python3: python -m vllm...' for a pid this host can see; '' otherwise (another PID namespace)."""
    try:
        import psutil

        p = psutil.Process(pid)
        cmd = " ".join(p.cmdline())[:80]
        return f"{p.name()}: {cmd}" if cmd else p.name()
    except Exception:  # NoSuchProcess, AccessDenied, no psutil
        return ""


def _from_nvml(raw: dict[str, Any], name_of: Callable[[int], str]) -> list[GpuUse]:
    out = []
    for g in raw.get("gpus", []):
        idx = int(g["index"])
        procs = [
            GpuProcess(
                int(p["pid"]),
                idx,
                int(p["used_bytes"]) // MIB if p.get("used_bytes") is not None else None,
                name_of(int(p["pid"])),
            )
            for p in g.get("processes") or []
        ]
        out.append(
            GpuUse(
                idx,
                str(g["name"]),
                int(g["memory_total"]) // MIB,
                int(g.get("memory_used") or 0) // MIB,
                procs,
            )
        )
    return out


def parse_compute_apps(
    text: str, uuid_to_index: dict[str, int], name_of: Callable[[int], str]
) -> list[GpuProcess]:
    """``nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv``."""
    rows = list(csv.reader(io.StringIO(text.strip())))
    out = []
    for row in rows[1:]:
        if len(row) < 4 or not row[1].strip().isdigit():
            continue
        uuid, pid, pname, used = (c.strip() for c in row[:4])
        mib = hardware._int_or_none(used)
        name = name_of(int(pid)) or pname
        out.append(GpuProcess(int(pid), uuid_to_index.get(uuid, -1), mib, name))
    return out


def read_usage(
    nvml: Any = None,
    run: Callable[[list[str]], str | None] | None = None,
    which: Callable[[str], str | None] = shutil.which,
    name_of: Callable[[int], str] = _process_name,
) -> GpuReading:
    """Memory in use and processes per GPU: NVML first, nvidia-smi when NVML does not answer."""
    problems: list[str] = []
    raw = hardware.read_nvml(nvml, processes=True, errors=problems)
    if raw is not None:
        return GpuReading(_from_nvml(raw, name_of), "nvml", problems)
    if which("nvidia-smi") is None:
        problems.append("nvidia-smi is not on PATH")
        return GpuReading([], "none", problems)
    run = run or hardware._run
    text = run(["nvidia-smi", "--query-gpu=index,name,uuid,memory.total,memory.used", "--format=csv"])
    if not text:
        problems.append("nvidia-smi --query-gpu failed (no driver, or no GPU visible)")
        return GpuReading([], "none", problems)
    base = hardware.parse_query_gpu_csv(text)
    uses = {g.index: GpuUse(g.index, g.name, g.memory_total_mib, g.memory_used_mib or 0) for g in base}
    apps = run(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name,used_memory", "--format=csv"])
    if apps:
        for p in parse_compute_apps(apps, {g.uuid: g.index for g in base if g.uuid}, name_of):
            if p.gpu in uses:
                uses[p.gpu].processes.append(p)
    else:
        problems.append("nvidia-smi --query-compute-apps failed: processes unknown")
    return GpuReading(list(uses.values()), "nvidia-smi", problems)


def visible_indices(value: str | None) -> list[int] | None:
    """CUDA_VISIBLE_DEVICES as NVML indices; None (watch every GPU) when unset or given as UUIDs.

    NVML numbers GPUs in PCI order, CUDA by default fastest first; on the usual box of one GPU
    model the two agree (set CUDA_DEVICE_ORDER=PCI_BUS_ID to be sure).
    """
    if value is None or not value.strip():
        return None
    parts = [p.strip() for p in value.split(",") if p.strip()]
    return [int(p) for p in parts] if all(p.isdigit() for p in parts) else None


@dataclass
class Held:
    """Memory a torn-down server did not give back, and who holds it."""

    gpus: dict[int, tuple[int, int]]  # index -> (MiB before the launch, MiB now)
    processes: list[GpuProcess]

    def evidence(self) -> list[str]:
        lines = [
            f"GPU {i}: {now} MiB in use, {before} MiB before the last launch"
            for i, (before, now) in sorted(self.gpus.items())
        ]
        lines += [p.describe() for p in self.processes] or [
            "no process is listed on these GPUs (a driver-held "
            "context, or processes in another PID namespace)"
        ]
        return lines


class GpuWatch:
    """Readings around each launch. One per process (``default_watch``), so that ``bringup run``'s
    trials share it: a hold found after one trial's teardown stops the next launch."""

    def __init__(
        self,
        reader: Callable[[], GpuReading] = read_usage,
        settle_timeout: float = 30.0,
        poll: float = 0.5,
        tolerance_mib: int = TOLERANCE_MIB,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.reader = reader
        self.settle_timeout = settle_timeout
        self.poll = poll
        self.tolerance = tolerance_mib
        self.sleep = sleep
        self.clock = clock
        self.announced = False
        self.before: dict[int, int] | None = None  # the last launch's reading (one trial at a time)
        self.held: Held | None = None
        self.no_gpu: dict[str, str] | None = None
        # Trials that run at once (on disjoint GPUs) share this watch: a hold is kept per GPU, and
        # each trial passes its own pre-launch reading back to after_teardown.
        self._lock = threading.Lock()

    def before_launch(self, indices: list[int] | None) -> tuple[list[str], Held | None, dict[str, Any]]:
        """(messages, a hold that must stop this launch, the record for the outcome)."""
        if self.no_gpu is not None:  # a machine without GPUs does not grow one between launches
            return [], None, dict(self.no_gpu)
        r = self.reader()
        if not r.gpus:
            self.announced = True
            self.no_gpu = {"gpus": "none", "note": r.why_none()}
            return [r.why_none()], None, dict(self.no_gpu)
        msgs: list[str] = []
        with self._lock:
            if not self.announced:
                self.announced = True
                msgs.extend(describe_busy(r, indices))
            used = r.used(indices)
            if self.held is not None:
                mine = {i: v for i, v in self.held.gpus.items() if indices is None or i in indices}
                still = {
                    i: (b, used.get(i, 0))
                    for i, (b, _) in mine.items()
                    if used.get(i, 0) > b + self.tolerance
                }
                if still:
                    held = Held(still, [p for p in r.processes(list(still))])
                    return msgs, held, {"source": r.source, "used_mib_before": used, "held": held.evidence()}
                if mine:
                    rest = {i: v for i, v in self.held.gpus.items() if i not in mine}
                    self.held = Held(rest, self.held.processes) if rest else None
                    msgs.append("the GPU memory held after the last teardown is back")
            self.before = used
        return msgs, None, {"source": r.source, "used_mib_before": used}

    def is_back(self, indices: list[int]) -> bool:
        """A fresh reading: is the memory held on these GPUs back (their hold then cleared)?"""
        with self._lock:
            if self.held is None or not any(i in self.held.gpus for i in indices):
                return True
        used = self.reader().used(indices)
        with self._lock:
            if self.held is None:
                return True
            still = {
                i
                for i in indices
                if i in self.held.gpus and used.get(i, 0) > self.held.gpus[i][0] + self.tolerance
            }
            if still:
                return False
            rest = {i: v for i, v in self.held.gpus.items() if i not in indices}
            self.held = Held(rest, self.held.processes) if rest else None
            return True

    def after_teardown(
        self, indices: list[int] | None, before: dict[int, int] | None = None
    ) -> tuple[list[str], dict[str, Any]]:
        """Wait (bounded) until the memory in use is back to the pre-launch reading (``before``:
        this trial's own reading, given back by the caller when trials run at once)."""
        before = before if before is not None else self.before
        if before is None:
            return [], {}
        t0 = self.clock()
        while True:
            r = self.reader()
            used = r.used(indices)
            over = {i: (b, used.get(i, 0)) for i, b in before.items() if used.get(i, 0) > b + self.tolerance}
            if not over:
                return [], {"used_mib_after": used, "returned_s": round(self.clock() - t0, 2)}
            if self.clock() - t0 >= self.settle_timeout:
                mine = Held(over, r.processes(list(over)))
                with self._lock:
                    gpus = {**(self.held.gpus if self.held else {}), **over}
                    self.held = Held(gpus, [*(self.held.processes if self.held else []), *mine.processes])
                msgs = [
                    f"GPU memory not given back {self.settle_timeout:.0f} s after teardown:",
                    *mine.evidence(),
                ]
                return msgs, {"used_mib_after": used, "held": mine.evidence()}
            self.sleep(self.poll)


def describe_busy(r: GpuReading, indices: list[int] | None) -> list[str]:
    """One line per GPU in use before the first launch (memory, processes), or that all are free."""
    lines = []
    for g in r.gpus:
        if indices is not None and g.index not in indices:
            continue
        if g.used_mib >= BUSY_MIB or g.processes:
            who = "; ".join(p.describe() for p in g.processes) or "no process listed"
            lines.append(f"GPU {g.index} ({g.name}) is busy: {g.used_mib} of {g.total_mib} MiB in use; {who}")
    scope = "the trial's GPUs" if indices is not None else "every GPU"
    return lines or [f"{scope} free before the first launch (via {r.source})"]


_DEFAULT: GpuWatch | None = None


def default_watch() -> GpuWatch:
    """The process-wide watch (trials of one run share what the last teardown left)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = GpuWatch(settle_timeout=float(os.environ.get("BRINGUP_GPU_SETTLE_S", "30")))
    return _DEFAULT
