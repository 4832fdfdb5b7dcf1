"""Memory and capacity figures for the log lines (per GPU), from the scenario and the config.

They only need to look like a real engine's and move the right way with the knobs (a higher
memory fraction gives a bigger KV cache, fewer layers load faster and use less memory). Which
configurations run out of memory is decided by the scenario's rules, not by these numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bringup.knowledge.conditions import as_number
from bringup.scenario.config import ScenarioConfig
from bringup.scenario.schema import Scenario


@dataclass(frozen=True)
class Sizing:
    total_gib: float  # GPU memory
    avail_start: float  # free before the weights
    weights: float  # weights on one GPU
    kv_gib: float
    kv_tokens: int
    graph_gib: float
    avail_end: float  # free after KV cache and graphs
    layers: int
    layer_fraction: float
    context_len: int
    max_running: int
    kv_bytes_per_token: int
    graph_max_bs: int

    def template_values(self) -> dict[str, str]:
        """Placeholders a scenario's start-up lines may use, so that a quoted message agrees with
        the figures the double's own log printed before it (a real engine's do): ``{kv_gib}`` the
        KV pool, ``{kv_tokens}`` the tokens it holds (as vLLM's "estimated maximum model length"),
        ``{kv_need_gib}`` what one request of the context length needs, ``{context_len}`` that
        length (the model's own when none is asked), ``{weights_gib}``."""
        return {
            "kv_gib": f"{self.kv_gib:.2f}",
            "kv_tokens": str(self.kv_tokens),
            "kv_need_gib": f"{self.context_len * self.kv_bytes_per_token / (1 << 30):.2f}",
            "weights_gib": f"{self.weights:.2f}",
            "context_len": str(self.context_len),
        }


def _kv_dtype_bytes(kv: str, model_dtype: str) -> float:
    kv = (kv or "auto").lower()
    if kv == "auto":
        kv = model_dtype
    if "fp4" in kv or "nvfp4" in kv or "4bit" in kv:
        return 0.5
    if "fp8" in kv or "int8" in kv:
        return 1.0
    return 2.0 if "32" not in kv else 4.0


def _context(cfg: ScenarioConfig, sc: Scenario) -> int:
    raw = cfg.value("context_length", "max_model_len")
    if isinstance(raw, str):  # vLLM accepts 32k / 1m
        s = raw.strip().lower()
        mult = {"k": 1000, "m": 1000_000}.get(s[-1:], 1)
        n = as_number(s[:-1] if mult > 1 else s)
        raw = int(n * mult) if n is not None else None
    n = as_number(raw)
    return int(n) if n else sc.model.context_length


def free_before_weights(total_gib: float) -> float:
    """GiB free on one GPU before the weights load (the CUDA context and the engine's own take the
    rest): what the log's first memory line shows, and what weights must fit in."""
    return round(total_gib * 0.985 - 0.55, 2)


def weights_per_gpu(weights_gib: float, replicated_gib: float, split: int) -> float:
    """GiB of weights on one GPU when they are split ``split`` ways (tensor x pipeline parallel);
    the replicated part (embeddings, norms) is on every GPU."""
    return (weights_gib - replicated_gib) / split + replicated_gib


def kv_bytes_per_token(model: Mapping[str, Any], tp: int, kv_dtype: str, layers: int | None = None) -> int:
    """Bytes one token of KV cache takes on one GPU: a scenario's ``model`` mapping (attention,
    kv_heads, head_dim, layers, dtype; the schema's defaults where absent) at this tensor-parallel
    size and KV-cache dtype. What the double's KV lines count, and what the composer's KV law
    (bringup/oracle/faults/laws.py) asks of one request."""
    per = _kv_dtype_bytes(kv_dtype, str(model.get("dtype") or "bfloat16"))
    attention = model.get("attention")
    if attention in ("mla", "dsa"):
        # MLA caches one 512+64 latent per token and layer on every rank; DSA adds its indexer keys.
        per_layer = (656 if per <= 1 else 1152) + (132 if attention == "dsa" else 0)
    else:
        heads, head_dim = int(model.get("kv_heads") or 8), int(model.get("head_dim") or 128)
        per_layer = int(2 * max(heads // tp, 1) * head_dim * per)
    return max(int(per_layer * (layers or int(model["layers"]))), 1)


def compute_sizing(sc: Scenario, cfg: ScenarioConfig) -> Sizing:
    m, hw = sc.model, sc.hardware
    override = cfg.layer_override()
    layers = min(override, m.layers) if override else m.layers
    frac_layers = layers / m.layers
    tp = cfg.tp
    total = hw.memory_gib
    avail_start = free_before_weights(total)
    weights = weights_per_gpu(m.weights_gib, m.replicated_gib, tp) * frac_layers
    kv_dtype = str(cfg.value("kv_cache_dtype") or "auto")
    bpt = kv_bytes_per_token(m.model_dump(), tp, kv_dtype, layers)
    if sc.engine == "sglang":
        frac = as_number(cfg.value("mem_fraction_static")) or 0.85
        kv = frac * total - weights - 1.0
    else:
        frac = as_number(cfg.value("gpu_memory_utilization")) or 0.9
        kv = frac * total - weights - 2.5  # vLLM profiles activations before sizing the cache
    kv = max(kv, 0.25)
    page = 64 if m.attention == "dsa" else 16
    tokens = max(int(kv * (1 << 30) / bpt) // page * page, page)
    graph_bs = int(
        as_number(cfg.value("cuda_graph_max_bs_decode", "cuda_graph_max_bs", "max_cudagraph_capture_size"))
        or 256
    )
    graph = (0.35 + 0.0045 * graph_bs) * max(frac_layers, 0.1) if cfg.cuda_graphs else 0.0
    avail_end = max(total - frac * total - graph, 0.3)
    ctx = _context(cfg, sc)
    mr = as_number(cfg.value("max_running_requests", "max_num_seqs"))
    max_running = int(mr) if mr else max(min(4096, tokens // 256), 16)
    return Sizing(
        total,
        avail_start,
        round(weights, 2),
        round(kv, 2),
        tokens,
        round(graph, 2),
        round(avail_end, 2),
        layers,
        frac_layers,
        ctx,
        max_running,
        bpt,
        graph_bs,
    )
