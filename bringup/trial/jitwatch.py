"""A kernel compile under the server is progress, even when the log says nothing.

Real engines compile kernels at start-up, and some of it is silent for minutes: FlashInfer's JIT
builds its sampling kernels with ninja and nvcc (vLLM 0.24.0 on the H200: "init engine ... took
138 s", most of it that build, with no log line in between; ../shared/FACTS.md), DeepGEMM and
Triton call nvcc/ptxas, torch.compile's inductor compiles in a pool of `compile_worker`
processes. The hang deadline counts seconds without a new log line; while a process under the
server that compiles is using CPU, those seconds are not silence but a build. Such a launch is
slow, not hung, and the outcome says how long the build kept it quiet (`Timings.jit_silent`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psutil

# Process names (comm) of compilers and build drivers the engines' JITs run: ninja and nvcc
# (FlashInfer jit/cpp_ext.py, DeepGEMM, torch.utils.cpp_extension), nvcc's own stages cicc and
# ptxas (Triton runs ptxas), the host compiler nvcc drives (gcc/g++/cc1plus), and the linker.
COMPILERS = frozenset(
    {
        "ninja",
        "nvcc",
        "cicc",
        "ptxas",
        "fatbinary",
        "nvlink",
        "cudafe++",
        "gcc",
        "g++",
        "cc1plus",
        "cc1",
        "c++",
        "clang",
        "clang++",
        "ld",
        "collect2",
        "as",
    }
)
# A compile worker is a Python process; it is told apart by its command line (torch/_inductor/
# compile_worker/__main__.py, started by inductor's SubprocPool).
WORKER_MARKERS = ("compile_worker",)


def _is_compiler(p: psutil.Process) -> str | None:
    """The name to report if ``p`` compiles, else None."""
    try:
        name = p.name()
        if name in COMPILERS:
            return name
        if name.startswith("python") and any(m in " ".join(p.cmdline()) for m in WORKER_MARKERS):
            return "compile_worker"
    except (psutil.Error, OSError):
        return None
    return None


@dataclass
class JitWatch:
    """Looks under one process (the server's leader) for compilers that used CPU since the last look."""

    root_pid: int
    _cpu: dict[int, float] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)  # every compiler name seen busy, for the report

    def busy(self) -> list[str]:
        """Names of the compilers under the root that used CPU since the previous call."""
        try:
            procs = psutil.Process(self.root_pid).children(recursive=True)
        except (psutil.Error, OSError):
            return []
        names, cpu = [], {}
        for p in procs:
            name = _is_compiler(p)
            if name is None:
                continue
            try:
                t = sum(p.cpu_times()[:2])
            except (psutil.Error, OSError):
                continue
            cpu[p.pid] = t
            if t > self._cpu.get(p.pid, -1.0):  # new, or burnt CPU since the last look
                names.append(name)
        self._cpu = cpu
        self.seen.update(names)
        return sorted(set(names))
