"""The model fingerprint: what a model folder is, read from config.json and safetensors headers.

No tensor is loaded and no ML library is imported: config.json and hf_quant_config.json are JSON,
and a safetensors file starts with an 8-byte little-endian header length followed by a JSON header
that gives every tensor's dtype, shape and byte range (``data_offsets``). Summing those ranges gives
the exact weight bytes by dtype, even for a 400 GB checkpoint, in milliseconds.

KV-cache bytes per token are modelled per attention kind and engine; the layouts and their
sources are documented on ``kv_cache_bytes`` and in docs/machine-and-model.md.
"""

from __future__ import annotations

import json
import math
import re
import struct
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bringup.guard import files
from bringup.guard.limits import read_json_object

GIB = 1024**3

# Bytes per element of each safetensors dtype (for parameter counts; byte totals come from the
# header's data_offsets, never from these).
DTYPE_BYTES: dict[str, float] = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "F4": 0.5,
}
# Largest header we accept: real ones are a few MB (DeepSeek-V3 shards: ~100 KB each).
MAX_HEADER = 256 * 1024 * 1024

# KV-cache element sizes by the engines' --kv-cache-dtype names.
KV_DTYPE_BYTES: dict[str, float] = {
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "float32": 4,
    "fp32": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "int8": 1,
    "fp4": 0.5,
    "fp4_e2m1": 0.5,
    "nvfp4": 0.5,
}

# Names of tensors that SGLang/vLLM keep whole on every tensor-parallel rank (the rest is split):
# norms; MLA's down-projections (ReplicatedLinear in DeepSeek-V2/V3 attention); DSA's indexer;
# the MoE router and its bias. Source: sglang python/sglang/srt/models/deepseek_v2.py
# (q_a_proj / kv_a_proj_with_mqa as ReplicatedLinear), deepseek_nsa indexer; vLLM deepseek_v2.py.
_REPLICATED = re.compile(
    r"(norm\.|norm$|layernorm|\.q_a_proj\.|\.kv_a_proj_with_mqa\.|\.indexer\.|\.mlp\.gate\.(weight|bias)"
    r"|e_score_correction_bias|rotary_emb)"
)
_EXPERT = re.compile(r"\.experts\.")
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
# Tensors that are quantisation metadata, not parameters.
_NOT_PARAM = re.compile(r"(scale|zeros|g_idx|_amax|input_scale|weight_scale_2|qzeros|zero_point)")


# ---------------------------------------------------------------------------------------------
# safetensors headers


class SafetensorsError(ValueError):
    pass


def read_safetensors_header(path: str | Path) -> dict[str, Any]:
    """The JSON header of a .safetensors file (tensor name -> {dtype, shape, data_offsets})."""
    path = Path(path)
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise SafetensorsError(f"{path}: shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        if n <= 1 or n > MAX_HEADER:
            raise SafetensorsError(f"{path}: implausible header length {n}")
        raw = f.read(n)
    if len(raw) != n:
        raise SafetensorsError(f"{path}: header cut short ({len(raw)} of {n} bytes)")
    try:
        header = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise SafetensorsError(f"{path}: header is not UTF-8 (byte {e.start}: {e.reason})") from None
    except (json.JSONDecodeError, RecursionError) as e:
        raise SafetensorsError(f"{path}: header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    header["__header_bytes__"] = 8 + n
    return header


def check_safetensors_file(path: str | Path) -> None:
    """A header that parses and tensors whose offsets are well formed (data is not read). A file
    shorter than its header says is reported only when it holds some data: a header-only file
    (`write_safetensors_header_only`, for --load-format dummy) is legitimate."""
    path = Path(path)
    header = read_safetensors_header(path)
    size = path.stat().st_size - header["__header_bytes__"]
    end = 0
    for name, info in header.items():
        if name.startswith("__"):
            continue
        offs = info.get("data_offsets") if isinstance(info, dict) else None
        if not (
            isinstance(offs, list)
            and len(offs) == 2
            and all(isinstance(x, int) for x in offs)
            and 0 <= offs[0] <= offs[1]
        ):
            raise SafetensorsError(f"{path}: tensor {name!r} has no valid data_offsets")
        end = max(end, offs[1])
    if 0 < size < end:
        raise SafetensorsError(f"{path}: cut short ({size} bytes of tensor data, the header says {end})")


def write_safetensors_header_only(
    path: str | Path, tensors: dict[str, tuple[str, list[int]]], metadata: dict[str, str] | None = None
) -> int:
    """Write a safetensors file whose header is real and whose data is a hole of the right size.

    The file is extended with truncate(), so on Linux file systems it is sparse: a "16 GB" model
    takes a few KB of disk. For tests and demos of the fingerprint; returns the data bytes.
    """
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = metadata
    offset = 0
    for name, (dtype, shape) in tensors.items():
        nbytes = math.ceil(math.prod(shape) * DTYPE_BYTES[dtype])
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # safetensors pads the header to 8 bytes
    path = Path(path)
    with files.open_write(path, text=False) as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        f.truncate(8 + len(blob) + offset)
    return offset


def synthetic_tensors(
    fp: Fingerprint, quant: str = "none", layers: int | None = None, dtype: str = "BF16"
) -> dict[str, tuple[str, list[int]]]:
    """Tensor names, dtypes and shapes of a checkpoint with this fingerprint's dimensions.

    Names follow the Hugging Face Llama / DeepSeek-V3 layouts (MLA down/up projections, the DSA
    indexer, routed and shared experts, and MTP layers past num_hidden_layers). With
    quant="nvfp4", MLP and expert weights are stored as ModelOpt does: U8 holding two FP4 values,
    an F8_E4M3 scale per 16 values, and F32 global scales; attention stays in ``dtype``.
    For header-only stand-ins (``write_safetensors_header_only``): tests and dry runs.
    """
    t: dict[str, tuple[str, list[int]]] = {}
    h, n_layers = fp.hidden_size, layers if layers is not None else fp.layers

    def linear(name: str, out_f: int, in_f: int, q: bool = False) -> None:
        if q and quant == "nvfp4":
            t[f"{name}.weight"] = ("U8", [out_f, in_f // 2])
            t[f"{name}.weight_scale"] = ("F8_E4M3", [out_f, in_f // 16])
            t[f"{name}.weight_scale_2"] = ("F32", [])
            t[f"{name}.input_scale"] = ("F32", [])
        else:
            t[f"{name}.weight"] = (dtype, [out_f, in_f])

    t["model.embed_tokens.weight"] = (dtype, [fp.vocab_size or 0, h])
    total = n_layers + (fp.mtp_layers if fp.moe else 0)
    for i in range(total):
        p = f"model.layers.{i}"
        t[f"{p}.input_layernorm.weight"] = (dtype, [h])
        t[f"{p}.post_attention_layernorm.weight"] = (dtype, [h])
        a = f"{p}.self_attn"
        if fp.attention in ("mla", "dsa"):
            qk = (fp.qk_nope_head_dim or 0) + (fp.qk_rope_head_dim or 0)
            if fp.q_lora_rank:
                linear(f"{a}.q_a_proj", fp.q_lora_rank, h)
                t[f"{a}.q_a_layernorm.weight"] = (dtype, [fp.q_lora_rank])
                linear(f"{a}.q_b_proj", fp.heads * qk, fp.q_lora_rank)
            else:
                linear(f"{a}.q_proj", fp.heads * qk, h)
            linear(f"{a}.kv_a_proj_with_mqa", (fp.kv_lora_rank or 0) + (fp.qk_rope_head_dim or 0), h)
            t[f"{a}.kv_a_layernorm.weight"] = (dtype, [fp.kv_lora_rank or 0])
            linear(
                f"{a}.kv_b_proj",
                fp.heads * ((fp.qk_nope_head_dim or 0) + (fp.v_head_dim or 0)),
                fp.kv_lora_rank or 0,
            )
            linear(f"{a}.o_proj", h, fp.heads * (fp.v_head_dim or 0))
            if fp.attention == "dsa":
                idx, nh = fp.index_head_dim or 128, fp.index_n_heads or 64
                linear(f"{a}.indexer.wq_b", nh * idx, fp.q_lora_rank or h)
                linear(f"{a}.indexer.wk", idx, h)
                t[f"{a}.indexer.k_norm.weight"] = (dtype, [idx])
                t[f"{a}.indexer.k_norm.bias"] = (dtype, [idx])
                linear(f"{a}.indexer.weights_proj", nh, h)
        else:
            linear(f"{a}.q_proj", fp.heads * fp.head_dim, h)
            linear(f"{a}.k_proj", fp.kv_heads * fp.head_dim, h)
            linear(f"{a}.v_proj", fp.kv_heads * fp.head_dim, h)
            linear(f"{a}.o_proj", h, fp.heads * fp.head_dim)
        m = f"{p}.mlp"
        if fp.moe and fp.experts and i >= (fp.first_dense_layers or 0):
            inter = fp.moe_intermediate_size or fp.intermediate_size or 4 * h
            t[f"{m}.gate.weight"] = (dtype, [fp.experts, h])
            if fp.attention in ("mla", "dsa"):
                t[f"{m}.gate.e_score_correction_bias"] = ("F32", [fp.experts])
            for e in range(fp.experts):
                for proj, o, i_ in (("gate_proj", inter, h), ("up_proj", inter, h), ("down_proj", h, inter)):
                    linear(f"{m}.experts.{e}.{proj}", o, i_, q=True)
            for s_ in range(fp.shared_experts or 0):
                sh = f"{m}.shared_experts" if s_ == 0 else f"{m}.shared_experts.{s_}"
                for proj, o, i_ in (("gate_proj", inter, h), ("up_proj", inter, h), ("down_proj", h, inter)):
                    linear(f"{sh}.{proj}", o, i_, q=True)
        else:
            inter = fp.intermediate_size or 4 * h
            for proj, o, i_ in (("gate_proj", inter, h), ("up_proj", inter, h), ("down_proj", h, inter)):
                linear(f"{m}.{proj}", o, i_, q=True)
    t["model.norm.weight"] = (dtype, [h])
    if not fp.tied_embeddings:
        t["lm_head.weight"] = (dtype, [fp.vocab_size or 0, h])
    return t


def write_header_only_model(
    out_dir: str | Path,
    config: dict[str, Any],
    shards: int = 1,
    quant: str = "none",
    layers: int | None = None,
) -> Path:
    """A model folder with config.json and sharded header-only safetensors (with an index)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files.write_text(out / "config.json", json.dumps(config, indent=1))
    fp = from_config(config)
    tensors = synthetic_tensors(fp, quant=quant, layers=layers)
    names = list(tensors)
    per = math.ceil(len(names) / shards)
    weight_map: dict[str, str] = {}
    total = 0
    for s in range(shards):
        chunk = names[s * per : (s + 1) * per]
        fname = "model.safetensors" if shards == 1 else f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        total += write_safetensors_header_only(out / fname, {n: tensors[n] for n in chunk}, {"format": "pt"})
        weight_map.update(dict.fromkeys(chunk, fname))
    if shards > 1:
        files.write_text(
            out / "model.safetensors.index.json",
            json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1),
        )
    return out


@dataclass
class WeightInventory:
    """Exact bytes of the checkpoint's tensors, by dtype and by how TP splits them."""

    files: list[str] = field(default_factory=list)
    tensors: int = 0
    bytes_by_dtype: dict[str, int] = field(default_factory=dict)
    total_bytes: int = 0
    # How tensor parallelism treats the bytes (see _REPLICATED): split across ranks, kept whole on
    # every rank, or not loaded at all (MTP / next-token-prediction layers past num_hidden_layers,
    # which engines load only for speculative decoding).
    sharded_bytes: int = 0
    replicated_bytes: int = 0
    expert_bytes: int = 0  # included in sharded_bytes
    mtp_bytes: int = 0
    params: int = 0  # estimate: unpacked element count of weights, scales excluded
    problems: list[str] = field(default_factory=list)  # missing or truncated shards

    @property
    def total_gib(self) -> float:
        return self.total_bytes / GIB


def weight_files(model_dir: str | Path) -> tuple[list[Path], list[str]]:
    """The checkpoint's safetensors files (from the index when there is one) and missing ones."""
    model_dir = Path(model_dir)
    index = model_dir / "model.safetensors.index.json"
    if index.exists():
        weight_map = read_json_object(index, "shard index").get("weight_map", {})
        names = sorted(set(weight_map.values()))
        files = [model_dir / n for n in names if (model_dir / n).exists()]
        missing = [n for n in names if not (model_dir / n).exists()]
        return files, missing
    files = sorted(model_dir.glob("*.safetensors"))
    # Mistral repos ship consolidated.safetensors beside the HF shards; engines load one set.
    if len(files) > 1:
        files = [f for f in files if not f.name.startswith("consolidated")] or files
    return files, []


def weight_inventory(
    model_dir: str | Path, num_hidden_layers: int | None = None, packed_factor: dict[str, int] | None = None
) -> WeightInventory:
    """Read every shard's header and add up the bytes; nothing else of the files is read.

    ``packed_factor`` maps a dtype to parameters per element for packed formats (U8 holds two
    FP4 values in NVFP4/MXFP4 checkpoints; I32 holds eight int4 values in GPTQ/AWQ).
    """
    files, missing = weight_files(model_dir)
    inv = WeightInventory(files=[f.name for f in files])
    inv.problems.extend(f"missing shard {m}" for m in missing)
    packed_factor = packed_factor or {}
    for path in files:
        try:
            header = read_safetensors_header(path)
        except (SafetensorsError, OSError) as e:
            inv.problems.append(str(e))
            continue
        header_bytes = header.pop("__header_bytes__")
        header.pop("__metadata__", None)
        end = 0
        for name, t in header.items():
            start, stop = t["data_offsets"]
            nbytes = int(stop) - int(start)
            end = max(end, int(stop))
            dtype = t["dtype"]
            inv.tensors += 1
            inv.bytes_by_dtype[dtype] = inv.bytes_by_dtype.get(dtype, 0) + nbytes
            inv.total_bytes += nbytes
            layer = _LAYER.search(name)
            if num_hidden_layers is not None and layer and int(layer.group(1)) >= num_hidden_layers:
                inv.mtp_bytes += nbytes
                continue
            if _REPLICATED.search(name):
                inv.replicated_bytes += nbytes
            else:
                inv.sharded_bytes += nbytes
                if _EXPERT.search(name):
                    inv.expert_bytes += nbytes
            if not _NOT_PARAM.search(name):
                inv.params += math.prod(t["shape"]) * packed_factor.get(dtype, 1)
        size = path.stat().st_size
        if size < header_bytes + end:
            inv.problems.append(
                f"{path.name}: truncated ({size} bytes on disk, header needs {header_bytes + end})"
            )
    inv.bytes_by_dtype = dict(sorted(inv.bytes_by_dtype.items(), key=lambda kv: -kv[1]))
    return inv


# ---------------------------------------------------------------------------------------------
# config.json


@dataclass
class Quantization:
    method: str = "none"  # none | fp8 | nvfp4 | mxfp4 | awq | gptq | int8 | int4 | bitsandbytes | ...
    source: str | None = None  # config.json quantization_config | hf_quant_config.json
    quant_method: str | None = None  # the checkpoint's own word (modelopt, compressed-tensors, ...)
    weight_block_size: list[int] | None = None
    group_size: int | None = None
    bits: int | None = None
    kv_cache: str | None = None  # kv_cache_quant_algo, e.g. "fp8"


@dataclass
class Fingerprint:
    path: str | None
    architecture: str | None
    model_type: str | None
    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    head_dim: int  # q/k head size (for MLA: qk_nope_head_dim + qk_rope_head_dim)
    v_head_dim: int | None
    attention: str  # mha | gqa | mla | dsa
    vocab_size: int | None = None
    intermediate_size: int | None = None
    max_context: int | None = None
    dtype: str | None = None
    # MLA / DSA
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    qk_rope_head_dim: int | None = None
    index_head_dim: int | None = None
    index_topk: int | None = None
    index_n_heads: int | None = None
    # MoE
    moe: bool = False
    experts: int | None = None
    experts_per_token: int | None = None
    shared_experts: int | None = None
    moe_intermediate_size: int | None = None
    first_dense_layers: int | None = None
    mtp_layers: int = 0
    sliding_window: int | None = None
    sliding_layers: int = 0
    tied_embeddings: bool = False
    quantization: Quantization = field(default_factory=Quantization)
    weights: WeightInventory | None = None

    @property
    def weights_gib(self) -> float | None:
        return self.weights.total_gib if self.weights else None

    @property
    def params_b(self) -> float | None:
        """Billions of parameters: from the headers when there are weights, else from the config."""
        if self.weights and self.weights.params:
            return self.weights.params / 1e9
        est = estimate_params(self)
        return est / 1e9 if est else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["weights_gib"] = self.weights_gib
        d["params_b"] = self.params_b
        return d


def _first(cfg: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        v = cfg.get(k)
        if v is not None:
            return v
    return None


def text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The language model's part of a config (multimodal configs nest it in text_config)."""
    for key in ("text_config", "language_config", "llm_config"):
        sub = cfg.get(key)
        if isinstance(sub, dict) and (sub.get("num_hidden_layers") or sub.get("hidden_size")):
            merged = dict(sub)
            merged.setdefault("architectures", cfg.get("architectures"))
            merged.setdefault("quantization_config", cfg.get("quantization_config"))
            merged.setdefault("torch_dtype", cfg.get("torch_dtype") or cfg.get("dtype"))
            return merged
    return cfg


def parse_quantization(cfg: dict[str, Any], hf_quant: dict[str, Any] | None = None) -> Quantization:
    """Name the weight format from config.json's quantization_config and hf_quant_config.json."""
    qc = cfg.get("quantization_config")
    if not qc and hf_quant:
        q = hf_quant.get("quantization", hf_quant)
        algo = str(q.get("quant_algo") or "").lower()
        return Quantization(
            method=_modelopt_algo(algo),
            source="hf_quant_config.json",
            quant_method=(hf_quant.get("producer") or {}).get("name", "modelopt"),
            group_size=q.get("group_size"),
            kv_cache=_lower(q.get("kv_cache_quant_algo")),
        )
    if not qc:
        return Quantization()
    qm = str(qc.get("quant_method") or "").lower()
    out = Quantization(
        source="config.json quantization_config",
        quant_method=qm or None,
        group_size=qc.get("group_size"),
        bits=qc.get("bits") or qc.get("w_bit"),
    )
    if hf_quant:
        out.kv_cache = _lower((hf_quant.get("quantization") or {}).get("kv_cache_quant_algo"))
    out.kv_cache = out.kv_cache or _lower(qc.get("kv_cache_quant_algo"))
    if qm == "fp8":
        out.method = "fp8"
        out.weight_block_size = qc.get("weight_block_size")
    elif qm in ("modelopt", "modelopt_fp4", "modelopt_fp8"):
        out.method = _modelopt_algo(str(qc.get("quant_algo") or qm).lower())
    elif qm in ("awq", "awq_marlin"):
        out.method = "awq"
    elif qm in ("gptq", "gptq_marlin"):
        out.method = "gptq"
    elif qm == "mxfp4":
        out.method = "mxfp4"
    elif qm == "compressed-tensors":
        out.method = _compressed_tensors(qc)
    elif qm == "bitsandbytes":
        out.method = "bitsandbytes"
    else:
        out.method = qm or "unknown"
    return out


def _lower(v: Any) -> str | None:
    return str(v).lower() if v else None


def _modelopt_algo(algo: str) -> str:
    if "nvfp4" in algo or "fp4" in algo:
        return "nvfp4"
    if "fp8" in algo:
        return "fp8"
    if "int4" in algo or "w4a" in algo:
        return "int4"
    if "int8" in algo or "w8a" in algo:
        return "int8"
    return algo or "unknown"


def _compressed_tensors(qc: dict[str, Any]) -> str:
    fmt = str(qc.get("format") or "").lower()
    if "nvfp4" in fmt:
        return "nvfp4"
    if "mxfp4" in fmt:
        return "mxfp4"
    for group in (qc.get("config_groups") or {}).values():
        w = (group or {}).get("weights") or {}
        bits, kind = w.get("num_bits"), str(w.get("type") or "").lower()
        if bits == 4 and kind == "float":
            return "nvfp4" if w.get("group_size") == 16 else "fp4"
        if bits == 8 and kind == "float":
            return "fp8"
        if bits == 8:
            return "int8"
        if bits == 4:
            return "int4"
    if "float-quantized" in fmt:
        return "fp8"
    return "compressed-tensors"


def from_config(
    cfg: dict[str, Any], hf_quant: dict[str, Any] | None = None, path: str | None = None
) -> Fingerprint:
    """A fingerprint from config.json contents alone (no weights)."""
    c = text_config(cfg)
    archs = c.get("architectures") or cfg.get("architectures") or []
    layers = int(_first(c, "num_hidden_layers", "n_layer", "num_layers") or 0)
    hidden = int(_first(c, "hidden_size", "n_embd", "d_model") or 0)
    heads = int(_first(c, "num_attention_heads", "n_head", "num_heads") or 0)
    kv_heads = int(_first(c, "num_key_value_heads", "num_kv_heads", "multi_query_group_num") or heads)
    kv_lora = c.get("kv_lora_rank")
    qk_nope, qk_rope = c.get("qk_nope_head_dim"), c.get("qk_rope_head_dim")
    has_indexer = any(c.get(k) is not None for k in ("index_topk", "index_head_dim", "index_n_heads"))
    if kv_lora:
        attention = "dsa" if has_indexer else "mla"
        head_dim = int((qk_nope or 0) + (qk_rope or 0)) or int(c.get("head_dim") or 0)
        v_head_dim = c.get("v_head_dim")
    else:
        head_dim = int(c.get("head_dim") or (hidden // heads if heads else 0))
        v_head_dim = c.get("v_head_dim") or head_dim
        attention = "gqa" if kv_heads < heads else "mha"
    experts = _first(c, "n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts")
    per_tok = _first(c, "num_experts_per_tok", "num_experts_per_token", "moe_topk", "top_k")
    layer_types = c.get("layer_types") or []
    fp = Fingerprint(
        path=path,
        architecture=archs[0] if archs else None,
        model_type=c.get("model_type") or cfg.get("model_type"),
        layers=layers,
        hidden_size=hidden,
        heads=heads,
        kv_heads=1 if kv_lora else kv_heads,  # MLA caches one latent "head"
        head_dim=head_dim,
        v_head_dim=v_head_dim,
        attention=attention,
        vocab_size=_first(c, "vocab_size"),
        intermediate_size=_first(c, "intermediate_size", "n_inner", "ffn_hidden_size"),
        max_context=_first(c, "max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"),
        dtype=str(_first(c, "torch_dtype", "dtype") or "") or None,
        kv_lora_rank=kv_lora,
        q_lora_rank=c.get("q_lora_rank"),
        qk_nope_head_dim=qk_nope,
        qk_rope_head_dim=qk_rope,
        index_head_dim=c.get("index_head_dim") if has_indexer else None,
        index_topk=c.get("index_topk"),
        index_n_heads=c.get("index_n_heads"),
        moe=bool(experts and int(experts) > 1),
        experts=int(experts) if experts else None,
        experts_per_token=int(per_tok) if per_tok and experts else None,
        shared_experts=_first(c, "n_shared_experts", "num_shared_experts"),
        moe_intermediate_size=c.get("moe_intermediate_size"),
        first_dense_layers=c.get("first_k_dense_replace"),
        mtp_layers=int(c.get("num_nextn_predict_layers") or 0),
        sliding_window=c.get("sliding_window")
        if (c.get("use_sliding_window", True) and c.get("sliding_window"))
        else None,
        sliding_layers=sum(1 for t in layer_types if "sliding" in str(t)),
        tied_embeddings=bool(c.get("tie_word_embeddings", cfg.get("tie_word_embeddings", False))),
        quantization=parse_quantization(c, hf_quant),
    )
    if fp.index_head_dim is None and has_indexer:
        fp.index_head_dim = 128  # DeepSeek-V3.2's indexer width, the NSA pools' assumption
    return fp


def fingerprint(model_dir: str | Path, read_weights: bool = True) -> Fingerprint:
    """The fingerprint of a model folder: config.json (+ hf_quant_config.json) and weight headers."""
    model_dir = Path(model_dir)
    cfg_path = model_dir / "config.json"
    if not cfg_path.exists():
        raise FileNotFoundError(f"{model_dir}: no config.json")
    cfg = read_json_object(cfg_path, "model config")  # InputError (a ValueError) names the damage
    hq_path = model_dir / "hf_quant_config.json"
    hf_quant = read_json_object(hq_path, "quantization config") if hq_path.exists() else None
    fp = from_config(cfg, hf_quant, path=str(model_dir))
    if read_weights:
        files, missing = weight_files(model_dir)
        if files or missing:
            fp.weights = weight_inventory(
                model_dir, num_hidden_layers=fp.layers or None, packed_factor=_packing(fp.quantization.method)
            )
    return fp


def _packing(method: str) -> dict[str, int]:
    if method in ("nvfp4", "mxfp4", "fp4"):
        return {"U8": 2}
    if method in ("gptq", "awq", "int4"):
        return {"I32": 8}
    return {}


def estimate_params(fp: Fingerprint) -> int | None:
    """Parameters from the config, for dense and MoE decoders of the usual shapes (an estimate)."""
    if not (fp.layers and fp.hidden_size and fp.vocab_size):
        return None
    h, L = fp.hidden_size, fp.layers
    if fp.attention in ("mla", "dsa"):
        q_in = fp.q_lora_rank or h
        attn = (h * fp.q_lora_rank if fp.q_lora_rank else 0) + q_in * fp.heads * fp.head_dim
        attn += h * ((fp.kv_lora_rank or 0) + (fp.qk_rope_head_dim or 0))
        attn += (fp.kv_lora_rank or 0) * fp.heads * ((fp.qk_nope_head_dim or 0) + (fp.v_head_dim or 0))
        attn += fp.heads * (fp.v_head_dim or 0) * h
    else:
        attn = h * fp.heads * fp.head_dim * 2 + h * fp.kv_heads * fp.head_dim * 2
    inter = fp.intermediate_size or 4 * h
    # Older decoders have a two-matrix MLP (up, down); modern ones are gated (gate, up, down).
    mats = 2 if (fp.model_type or "") in _UNGATED_MLP else 3
    dense_mlp = mats * h * inter
    if fp.moe and fp.experts:
        moe_inter = fp.moe_intermediate_size or inter
        moe_mlp = 3 * h * moe_inter * (fp.experts + (fp.shared_experts or 0)) + h * fp.experts
        dense = fp.first_dense_layers or 0
        mlp = dense * dense_mlp + (L - dense) * moe_mlp
    else:
        mlp = L * dense_mlp
    embeddings = (1 if fp.tied_embeddings else 2) * h * fp.vocab_size
    return int(L * attn + mlp + embeddings)


_UNGATED_MLP = {
    "gpt2",
    "gpt_neox",
    "gptj",
    "opt",
    "bloom",
    "falcon",
    "phi",
    "gpt_bigcode",
    "starcoder2",
    "mpt",
}


# ---------------------------------------------------------------------------------------------
# KV cache


@dataclass
class KVCost:
    """KV-cache bytes per token on one GPU.

    ``budget_bytes`` is what the engine divides its KV budget by to get a token count;
    ``alloc_bytes`` is what each token really occupies. They differ for SGLang's DSA pool (see
    ``kv_cache_bytes``), so the reported KV size can exceed the budget.
    """

    kv_dtype: str
    budget_bytes: float
    alloc_bytes: float
    layout: str  # a short description, e.g. "MLA latent 576 x 1 B + indexer 132 B, 78 layers"


def resolve_kv_dtype(
    fp: Fingerprint, kv_dtype: str = "auto", engine: str = "sglang", compute_capability: float | None = None
) -> str:
    """What ``--kv-cache-dtype auto`` becomes.

    SGLang forces DSA models (DeepSeek-V3.2, GLM-5) to fp8_e4m3 on compute capability >= 10 and
    bfloat16 below (docs/facts.md; server_args.py _set_default_nsa_kv_cache_dtype). Otherwise auto
    means the model's dtype.
    """
    kv = kv_dtype.lower()
    if kv != "auto":
        return kv
    if fp.attention == "dsa" and engine == "sglang":
        return "fp8_e4m3" if (compute_capability or 0) >= 10 else "bfloat16"
    dt = (fp.dtype or "bfloat16").lower().replace("torch.", "")
    return dt if dt in KV_DTYPE_BYTES else "bfloat16"


def kv_cache_bytes(
    fp: Fingerprint,
    kv_dtype: str = "auto",
    engine: str = "sglang",
    tp: int = 1,
    compute_capability: float | None = None,
    dsa_fp8_layout: str = "flashmla",
    dsa_exact_cell: bool = False,
) -> KVCost:
    """KV-cache bytes per token on one GPU of a TP group.

    MHA/GQA: K and V per layer, each kv_heads_per_gpu x head_dim elements, kv_heads_per_gpu =
    max(1, kv_heads // tp) (SGLang get_num_kv_heads; vLLM replicates heads when tp > kv_heads).
    MLA: one compressed latent per layer, kv_lora_rank + qk_rope_head_dim elements, the same on
    every TP rank (SGLang MLATokenToKVPool, vLLM MLAAttentionSpec num_kv_heads=1).
    DSA (MLA + a lightning indexer): the MLA latent plus the indexer key cache, index_head_dim FP8
    values + one fp32 scale per 128 = 132 bytes per layer (SGLang NSATokenToKVPool
    index_k_with_scale_buffer; vLLM DeepseekV32IndexerCache head_dim + head_dim // 128 * 4).
    With fp8 KV the DSA latent is stored as 512 fp8 + 4 fp32 scales + 64 bf16 RoPE = 656 bytes
    ("flashmla" layout: vLLM fp8_ds_mla, SGLang's flashmla backends) or as a plain 576-byte fp8
    row ("trtllm" layout: SGLang's trtllm NSA backends).
    SGLang sizes the pool with its generic MLA cell, (kv_lora_rank + rope) x element size + the
    indexer (model_runner_kv_cache_mixin.get_cell_size_per_token), so with the 656-byte layout the
    pool it allocates is 788/708 of its budget: 425,664 tokens x 78 layers x 788 B = 24.37 GiB,
    the seeds' GLM-5 figure. Later SGLang versions size the pool with the real row
    (mem_cache/kv_cache_configurator.py returns kv_cache_dim, 656 for flashmla fp8): pass
    ``dsa_exact_cell=True`` for those.
    FP4 KV: 0.5 byte per element plus one 1-byte scale per 16 elements.
    """
    kv = resolve_kv_dtype(fp, kv_dtype, engine, compute_capability)
    if kv not in KV_DTYPE_BYTES:
        raise ValueError(f"unknown KV-cache dtype {kv!r}")
    el = KV_DTYPE_BYTES[kv]
    is_fp4 = el == 0.5
    L = fp.layers
    if fp.attention in ("mla", "dsa"):
        latent = (fp.kv_lora_rank or 0) + (fp.qk_rope_head_dim or 0)
        per_layer = latent * el + (latent / 16 if is_fp4 else 0)
        budget = alloc = per_layer
        layout = f"MLA latent {latent} x {el:g} B"
        if fp.attention == "dsa":
            idx = fp.index_head_dim or 128
            indexer = idx + idx // 128 * 4
            if el == 1 and dsa_fp8_layout == "flashmla":
                alloc = (
                    (fp.kv_lora_rank or 0)
                    + (fp.kv_lora_rank or 0) // 128 * 4
                    + (fp.qk_rope_head_dim or 0) * 2
                )
                budget = alloc if (engine == "vllm" or dsa_exact_cell) else per_layer
                layout = f"DSA fp8 latent {alloc:g} B (512 fp8 + scales + bf16 rope)"
            alloc += indexer
            budget += indexer
            layout += f" + indexer {indexer} B"
        return KVCost(kv, budget * L, alloc * L, f"{layout}, {L} layers")
    kv_heads = max(1, fp.kv_heads // max(1, tp))
    elems = kv_heads * (fp.head_dim + (fp.v_head_dim or fp.head_dim))
    per_layer = elems * el + (elems / 16 if is_fp4 else 0)
    return KVCost(
        kv,
        per_layer * L,
        per_layer * L,
        f"K+V {kv_heads} heads x ({fp.head_dim}+{fp.v_head_dim or fp.head_dim}) x {el:g} B, {L} layers",
    )


def weights_per_gpu_bytes(fp: Fingerprint, tp: int = 1, ep: int = 1) -> int | None:
    """Weight bytes one GPU holds: split tensors / tp, plus replicated ones whole.

    Experts are split over tp either way: with expert parallelism (ep <= tp) each rank holds
    experts/ep whole experts, each sharded tp/ep ways, which is the same bytes as plain TP.
    MTP layers are not counted (engines load them only for speculative decoding).
    """
    if not fp.weights:
        return None
    del ep  # same bytes per GPU for ep <= tp; kept in the signature for callers' clarity
    inv = fp.weights
    return int(inv.sharded_bytes / max(1, tp) + inv.replicated_bytes)


# ---------------------------------------------------------------------------------------------
# facts


def facts(fp: Fingerprint) -> dict[str, Any]:
    """Flat facts for knowledge rules."""
    return {
        "model.architecture": fp.architecture,
        "model.model_type": fp.model_type,
        "model.attention": fp.attention,
        "model.moe": fp.moe,
        "model.experts": fp.experts,
        "model.experts_per_token": fp.experts_per_token,
        "model.quantization": fp.quantization.method,
        "model.kv_cache_quant": fp.quantization.kv_cache,
        "model.head_dim": fp.head_dim,
        "model.v_head_dim": fp.v_head_dim,
        "model.kv_lora_rank": fp.kv_lora_rank,
        "model.qk_rope_head_dim": fp.qk_rope_head_dim,
        "model.index_head_dim": fp.index_head_dim,
        "model.heads": fp.heads,
        "model.kv_heads": fp.kv_heads,
        "model.hidden_size": fp.hidden_size,
        "model.intermediate_size": fp.intermediate_size,
        "model.vocab_size": fp.vocab_size,
        "model.layers": fp.layers,
        "model.max_context": fp.max_context,
        "model.dtype": fp.dtype,
        "model.weights_gib": round(fp.weights_gib, 3) if fp.weights_gib is not None else None,
        "model.params_b": round(fp.params_b, 3) if fp.params_b is not None else None,
    }


def report_lines(fp: Fingerprint, kv_dtypes: tuple[str, ...] = ("bfloat16", "fp8_e4m3")) -> list[str]:
    q = fp.quantization
    out = [f"{fp.architecture or '?'} ({fp.model_type or '?'}) at {fp.path}"]
    att = fp.attention.upper()
    if fp.attention in ("mla", "dsa"):
        att += (
            f": kv_lora_rank {fp.kv_lora_rank}, qk_nope {fp.qk_nope_head_dim}, qk_rope {fp.qk_rope_head_dim}, "
            f"v {fp.v_head_dim}"
        )
        if fp.attention == "dsa":
            att += f"; indexer head_dim {fp.index_head_dim}, top-k {fp.index_topk}"
    out.append(
        f"{fp.layers} layers, hidden {fp.hidden_size}, {fp.heads} heads / {fp.kv_heads} KV heads, "
        f"head_dim {fp.head_dim}; attention {att}"
    )
    if fp.moe:
        out.append(
            f"MoE: {fp.experts} experts, {fp.experts_per_token} per token"
            + (f", {fp.shared_experts} shared" if fp.shared_experts else "")
            + (f", first {fp.first_dense_layers} layers dense" if fp.first_dense_layers else "")
        )
    out.append(
        f"quantization: {q.method}"
        + (f" ({q.quant_method})" if q.quant_method and q.quant_method != q.method else "")
        + (f", block {q.weight_block_size}" if q.weight_block_size else "")
        + (f", KV {q.kv_cache}" if q.kv_cache else "")
    )
    out.append(f"max context: {fp.max_context}, dtype {fp.dtype}")
    if fp.weights:
        w = fp.weights
        by = ", ".join(f"{k} {v / GIB:.2f} GiB" for k, v in w.bytes_by_dtype.items())
        out.append(f"weights: {w.total_gib:.2f} GiB in {len(w.files)} files, {w.tensors} tensors ({by})")
        if w.mtp_bytes:
            out.append(
                f"  of which MTP layers (not loaded without speculative decoding): {w.mtp_bytes / GIB:.2f} GiB"
            )
        out.extend(f"  problem: {p}" for p in w.problems)
    if fp.params_b:
        out.append(
            f"parameters: {fp.params_b:.2f} B"
            + ("" if fp.weights and fp.weights.params else " (from config)")
        )
    for kv in kv_dtypes:
        c = kv_cache_bytes(fp, kv)
        out.append(f"KV cache per token ({kv}, one GPU at TP 1): {c.alloc_bytes:,.0f} B  [{c.layout}]")
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m bringup.facts.modelinfo MODEL_DIR [--json]``: no CLI dependencies."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m bringup.facts.modelinfo")
    ap.add_argument("model_dir")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    fp = fingerprint(a.model_dir)
    if a.json:
        print(json.dumps({"fingerprint": fp.to_dict(), "facts": facts(fp)}, indent=2))
    else:
        print("\n".join(report_lines(fp)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
