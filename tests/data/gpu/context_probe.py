"""Measure, on a GPU machine, what memory.used a CUDA context and cuBLAS take before any model:
the startup overhead that bringup.facts.memplan subtracts before the engine's first free-memory reading."""

import json

import pynvml
import torch

pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)


def used_mib() -> float:
    return pynvml.nvmlDeviceGetMemoryInfo(h).used / 2**20


out = {"used_before_mib": used_mib()}
torch.cuda.init()
x = torch.zeros(1, device="cuda")
torch.cuda.synchronize()
out["used_after_context_mib"] = used_mib()
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
(a @ a).sum().item()
torch.cuda.synchronize()
out["used_after_cublas_mib"] = used_mib()
out["torch_allocated_mib"] = torch.cuda.memory_allocated() / 2**20
out["torch_reserved_mib"] = torch.cuda.memory_reserved() / 2**20
free, total = torch.cuda.mem_get_info()
out["mem_get_info_free_mib"], out["mem_get_info_total_mib"] = free / 2**20, total / 2**20
p = torch.cuda.get_device_properties(0)
out["props"] = {
    k: getattr(p, k)
    for k in (
        "name",
        "major",
        "minor",
        "total_memory",
        "multi_processor_count",
        "shared_memory_per_block",
        "shared_memory_per_block_optin",
        "shared_memory_per_multiprocessor",
        "L2_cache_size",
        "regs_per_multiprocessor",
    )
    if hasattr(p, k)
}
out["torch"] = torch.__version__
out["torch_cuda"] = torch.version.cuda
print(json.dumps(out, indent=1))
