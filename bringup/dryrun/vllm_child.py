"""The vLLM dry-run child: runs in the ENGINE's interpreter, imports vLLM once, answers candidates.

Standalone on purpose (no bringup import: the engine's environment may not have bringup). It
reads one JSON request per line on stdin and writes one JSON answer per line on the private
pipe it was given (vLLM logs to stdout, so fd 1 is sent to stderr). EOF on stdin ends it: the
child dies with bringup.

For a GPU target the platform is vLLM's own CUDA platform class with the device described by the
facts (compute capability, memory, count) instead of read from a GPU, the way vLLM's tests mock
``current_platform`` (tests/v1/attention/test_attention_backends_selection.py patches
``vllm.platforms.current_platform`` and ``get_device_capability``). It is installed before any
other vLLM module binds ``current_platform`` at import. The CPU build lacks the CUDA extensions,
so their availability flags are set as a CUDA wheel has them (FA2/FA3/FA4, FlashMLA): what is
left is vLLM's own Python check. A check that still needs CUDA (a call into torch.cuda, a
package the CPU build does not ship, such as flashinfer) is "cannot check", never a refusal.

Checks, in vLLM's own order: the argument parser (``make_arg_parser``), ``EngineArgs`` and, for a
model folder, ``create_engine_config()`` (ModelConfig, CacheConfig, ParallelConfig, the
quantization config's minimum capability in ``VllmConfig._get_quantization_config``); then the
attention selector (``current_platform.get_attn_backend_cls``) on the model's head size, dtype,
KV-cache dtype, block size, MLA / sparse / sinks. Without a folder (a scenario: facts only) the
selector runs on the facts and the quantization method's ``get_min_capability()`` is compared as
``_get_quantization_config`` does.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import time
import traceback
import types
from typing import Any

# This file's folder holds bringup's adapters (vllm.py, sglang.py): never let them shadow the engine.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

# Reasons vLLM's AttentionBackend.validate_configuration gives (vllm/v1/attention/backend.py):
# the engine's own check. Anything else (a kernel library not built) is about this build.
_OWN_REASONS = (
    "head_size not supported",
    "dtype not supported",
    "kv_cache_dtype not supported",
    "block_size not supported",
    "partial multimodal token full attention not supported",
    "MLA not supported",
    "non-MLA not supported",
    "attention sinks not supported",
    "sparse not supported",
    "non-sparse not supported",
    "per-head quant scales not supported",
    "compute capability not supported",
    "not supported",  # attention type X not supported, sliding window, R-SWA, ...
)
_NEEDS_CUDA = (
    "Torch not compiled with CUDA",
    "No CUDA GPUs",
    "NVML",
    "libcuda",
    "CUDA driver",
    "nvidia-smi",
    "Found no NVIDIA driver",
    "No module named",
    "is not available, likely was not compiled",
    "requires the CUDA",
)
_STATE: dict[str, Any] = {"cap": (9, 0), "mem": 80 << 30, "count": 1, "name": "GPU"}


def _install_platform(device: str) -> str:
    """vLLM's platform for the facts' device: CUDA mocked from the facts, or the CPU build's own."""
    import vllm.platforms as plat

    if device != "cuda":
        return type(plat.current_platform).__name__
    sys.modules.setdefault("vllm._C_stable_libtorch", types.ModuleType("vllm._C_stable_libtorch"))
    import vllm.platforms.cuda as cuda
    from vllm.platforms.interface import DeviceCapability

    class FactsCudaPlatform(cuda.NonNvmlCudaPlatform):
        """vLLM's CUDA platform whose device is the facts' (never read from a GPU)."""

        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:  # type: ignore[override]
            return DeviceCapability(*_STATE["cap"])

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return str(_STATE["name"])

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return int(_STATE["mem"])

        @classmethod
        def device_count(cls) -> int:
            return int(_STATE["count"])

        @classmethod
        def is_fully_connected(cls, physical_device_ids: list[int]) -> bool:
            return True

    plat._current_platform = FactsCudaPlatform()  # type: ignore[assignment]
    # Extensions a CUDA wheel has and the CPU build does not: their Python checks stay.
    _flash_attn_as_built()
    with contextlib.suppress(ImportError):
        import vllm.v1.attention.ops.flashmla as fm

        fm._flashmla_C_AVAILABLE = fm._flashmla_extension_C_AVAILABLE = True
    # Quantization modules ask compiled CUTLASS kernels at import whether they support this
    # capability (torch.ops._C.cutlass_scaled_mm_supports_*): absent on the CPU build. Answer "no
    # kernel" (a kernel choice, not a check); the methods' minimum capabilities stay vLLM's own.
    # On a CUDA build (the H200's vLLM 0.24.0) the kernels are there and answer for themselves.
    import vllm._custom_ops as ops

    if not _kernels_built(ops):
        for attr in dir(ops):
            if attr.startswith("cutlass_") and "supports" in attr:
                setattr(ops, attr, lambda *a, **k: False)
    return "FactsCudaPlatform"


def _kernels_built(ops: Any) -> bool:
    """vLLM's compiled CUDA kernels load here (a CUDA wheel, not the CPU build): their capability
    queries are pure functions of the capability asked, no GPU needed."""
    try:
        ops.cutlass_scaled_mm_supports_fp8(90)
    except Exception:
        return False
    return True


def _flash_attn_as_built() -> None:
    """vllm.vllm_flash_attn refuses to import without its CUDA extensions: load its interface
    module under a bare package first, mark FA2/FA3/FA4 built, then import the real package."""
    import importlib

    import vllm

    name = "vllm.vllm_flash_attn"
    folder = os.path.join(os.path.dirname(vllm.__file__), "vllm_flash_attn")
    if not os.path.isdir(folder):
        return
    pkg = types.ModuleType(name)
    pkg.__path__ = [folder]
    sys.modules[name] = pkg
    try:
        fai = importlib.import_module(name + ".flash_attn_interface")
        fai.FA2_AVAILABLE = fai.FA3_AVAILABLE = fai.FA4_AVAILABLE = True  # type: ignore[attr-defined]
    finally:
        del sys.modules[name]
    with contextlib.suppress(ImportError):
        importlib.import_module(name)


def _needs_cuda(text: str) -> bool:
    return any(s in text for s in _NEEDS_CUDA)


def _tb(e: BaseException) -> list[str]:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__)).splitlines()


# Where vLLM's server parser lives: 0.32.0 (vllm/entrypoints/launchers/cli_args.py), 0.24.0
# (vllm/entrypoints/openai/cli_args.py). The child speaks for whichever version is installed.
_CLI_ARGS = ("vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.openai.cli_args")


def _first_module(names: tuple[str, ...]) -> str:
    """The first of ``names`` that this vLLM has (module paths move between versions)."""
    import importlib.util

    for name in names:
        with contextlib.suppress(ImportError):
            if importlib.util.find_spec(name) is not None:
                return name
    return names[0]


def _selector(**fields: Any) -> Any:
    """vLLM's AttentionSelectorConfig with the fields this version has (0.24.0 has no
    has_sliding_window; a field a version lacks is one its selector does not check)."""
    from vllm.v1.attention.selector import AttentionSelectorConfig

    return AttentionSelectorConfig(
        **{k: v for k, v in fields.items() if k in AttentionSelectorConfig._fields}
    )


def _parse(argv: list[str], model: str) -> Any:
    """vLLM's own argument parser on the candidate's flags; SystemExit carries argparse's message."""
    import importlib

    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    make_arg_parser = importlib.import_module(_first_module(_CLI_ARGS)).make_arg_parser

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            args = parser.parse_args(["--model", model, *argv])
        except SystemExit as e:
            raise ValueError(err.getvalue().strip().splitlines()[-1] if err.getvalue() else str(e)) from None
    return AsyncEngineArgs.from_cli_args(args)


def _selector_config(ea: Any, facts: dict[str, Any], vcfg: Any) -> tuple[Any, str]:
    """The selector's inputs: from vLLM's own ModelConfig when there is one, else from the facts."""
    import torch

    if vcfg is not None:
        mc, cc = vcfg.model_config, vcfg.cache_config
        return _selector(
            head_size=mc.get_head_size(),
            dtype=mc.dtype,
            kv_cache_dtype=cc.cache_dtype,
            block_size=cc.block_size if cc.user_specified_block_size else None,
            use_mla=mc.use_mla,
            use_sparse=bool(getattr(mc, "is_deepseek_mla", False) and _sparse(facts)),
            has_sink=facts.get("model.model_type") in ("gpt_oss",),
            has_sliding_window=mc.get_sliding_window() is not None,
        ), "ModelConfig"
    attention = facts.get("model.attention") or "gqa"
    mla = attention in ("mla", "dsa")
    if mla:
        head = int(facts.get("model.kv_lora_rank") or 512) + int(facts.get("model.qk_rope_head_dim") or 64)
    else:
        head = int(facts.get("model.head_dim") or 128)
    dtype_name = ea.dtype if ea.dtype not in (None, "auto") else (facts.get("model.dtype") or "bfloat16")
    dtype = {
        "half": torch.float16,
        "float16": torch.float16,
        "float": torch.float32,
        "float32": torch.float32,
    }.get(str(dtype_name), torch.bfloat16)
    return _selector(
        head_size=head,
        dtype=dtype,
        kv_cache_dtype=_kv_dtype(ea, facts),  # a CacheDType from the parser
        block_size=ea.block_size,
        use_mla=mla,
        use_sparse=attention == "dsa",
        has_sink=facts.get("model.model_type") in ("gpt_oss",),
        has_sliding_window=bool(facts.get("model.sliding_window")),
    ), "facts"


def _kv_dtype(ea: Any, facts: dict[str, Any]) -> str:
    """The KV-cache dtype asked, or the checkpoint's own (an NVFP4/FP8 checkpoint with an fp8 KV
    scheme makes "auto" fp8, as vllm/utils/torch_utils.py resolve_kv_cache_dtype_string does)."""
    asked = ea.kv_cache_dtype or "auto"
    own = str(facts.get("model.kv_cache_quant") or "")
    return "fp8" if asked == "auto" and "fp8" in own.lower() else asked


def _sparse(facts: dict[str, Any]) -> bool:
    return facts.get("model.attention") == "dsa"


def _attention(ea: Any, facts: dict[str, Any], vcfg: Any) -> dict[str, Any]:
    """The attention selector on this configuration: None when it passes."""
    import vllm.platforms as plat
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    sel, inputs = _selector_config(ea, facts, vcfg)
    ac = getattr(ea, "attention_config", None)
    name = getattr(ac, "backend", None) if ac is not None else None
    name = name or getattr(ea, "attention_backend", None)
    backend = None
    if name:
        backend = name if isinstance(name, AttentionBackendEnum) else AttentionBackendEnum[str(name).upper()]
    ctx: Any = contextlib.nullcontext()
    if vcfg is not None:
        from vllm.config import set_current_vllm_config

        ctx = set_current_vllm_config(vcfg)
    try:
        with ctx:
            chosen = plat.current_platform.get_attn_backend_cls(backend, attn_selector_config=sel)  # type: ignore[arg-type]
    except ValueError as e:
        return _attention_refusal(e, str(backend.name if backend else "auto"), sel, inputs)
    except Exception as e:  # a call into CUDA itself: this build cannot answer
        return {
            "status": "cannot",
            "message": f"attention selector: {type(e).__name__}: {e}",
            "check": "attention",
        }
    return {"status": "passes", "chosen": str(chosen).rsplit(".", 1)[-1]}


_BUILD = re.compile(
    r"is not available|No module named|requires the CUDA|not compiled|Torch not compiled|"
    r"^(ImportError|ModuleNotFoundError|OSError|AssertionError): "
)
_REASONS = re.compile(r"Reason: (\[.*\])\s*$|(\w+): \[([^\]]*)\]", re.S)


def _reasons(msg: str) -> list[list[str]]:
    """The reason lists in a selector error: one for a selected backend, one per backend for auto."""
    import ast

    m = re.search(r"Reason: (\[.*\])\s*$", msg, re.S)
    if m:
        try:
            v = ast.literal_eval(m.group(1))
            return [[str(x) for x in v]] if isinstance(v, list) else [[m.group(1)]]
        except (ValueError, SyntaxError):
            return [[m.group(1).strip("[]")]]
    return [[x.strip() for x in body.split(", ")] for _name, body in re.findall(r"(\w+): \[([^\]]*)\]", msg)]


# vLLM's own reasons (vllm/v1/attention/backend.py validate_configuration) that name a property a
# flag sets: a backend refused for it is cured by another backend or by another value of that flag.
_REASON_FLAGS = {
    "block_size not supported": "--block-size",
    "kv_cache_dtype not supported": "--kv-cache-dtype",
    "dtype not supported": "--dtype",
}


def _reason_flags(own: list[list[str]]) -> list[str]:
    """The flags whose values the refusal's reasons name, in the order first named."""
    out: list[str] = []
    for reasons in own:
        for r in reasons:
            flag = next((f for k, f in _REASON_FLAGS.items() if r.strip().startswith(k)), None)
            if flag and flag not in out:
                out.append(flag)
    return out


def _attention_refusal(e: ValueError, backend: str, sel: Any, inputs: str) -> dict[str, Any]:
    """A selector refusal is the engine's verdict only when it rests on vLLM's own checks; a backend
    ruled out only because this build cannot import its kernels says nothing about a CUDA build."""
    msg = str(e)
    per_backend = _reasons(msg)
    own = [[r for r in rs if not _BUILD.search(r)] for rs in per_backend]
    # Selected: refused when one of its reasons is vLLM's own. Auto: refused only when every
    # candidate backend was refused by vLLM's own reasons (one ruled out by this build alone might
    # have been the choice on a CUDA build).
    refused = bool(own) and (all(own) if backend == "auto" else bool(own[0]))
    if not refused:
        return {"status": "cannot", "message": f"attention selector ({backend}): {msg}", "check": "attention"}
    return {
        "status": "refused",
        "message": f"ValueError: {msg}",
        "check": "attention",
        "phase": "load-weights",  # vLLM selects the backend while it builds the model's layers
        "flag": "--attention-backend" if backend != "auto" else None,
        "also": _reason_flags(own),
        "traceback": _tb(e),
        "inputs": f"{sel!r} (from {inputs})",
        "source": "vllm/platforms/cuda.py get_attn_backend_cls; vllm/v1/attention/backend.py validate_configuration",
    }


def _quantization(ea: Any, facts: dict[str, Any]) -> dict[str, Any] | None:
    """Facts only: the method's minimum capability, compared as VllmConfig._get_quantization_config does."""
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS, get_quantization_config

    method = ea.quantization or facts.get("model.quantization")
    if not method or method not in QUANTIZATION_METHODS or facts.get("device") != "cuda":
        return None
    try:
        need = get_quantization_config(method).get_min_capability()
    except Exception as e:  # its module calls a CUDA kernel at import on this build
        return {
            "status": "cannot",
            "message": f"quantization {method}: {type(e).__name__}: {e}",
            "check": "quantization",
        }
    have = _STATE["cap"][0] * 10 + _STATE["cap"][1]
    if have < need:
        return {
            "status": "refused",
            "message": (
                f"ValueError: The quantization method {method} is not supported for the current GPU. "
                f"Minimum capability: {need}. Current capability: {have}."
            ),
            "check": "quantization",
            "flag": "--quantization" if ea.quantization else None,
            "source": "vllm/config/vllm.py VllmConfig._get_quantization_config; the method's get_min_capability()",
        }
    return None


def _engine_config(ea: Any) -> tuple[Any, dict[str, Any] | None]:
    """create_engine_config() on a real model folder: vLLM's whole config validation."""
    try:
        return ea.create_engine_config(), None
    except SystemExit as e:
        return None, {"status": "refused", "message": f"SystemExit: {e}", "check": "engine-config"}
    except Exception as e:
        text = f"{type(e).__name__}: {e}"
        if _needs_cuda(text):
            return None, {
                "status": "cannot",
                "message": f"engine config needs CUDA here: {text}",
                "check": "engine-config",
            }
        return None, {
            "status": "refused",
            "message": text,
            "check": "engine-config",
            "traceback": _tb(e),
            "source": "vllm/engine/arg_utils.py EngineArgs.create_engine_config",
        }


@contextlib.contextmanager
def _environment(env: dict[str, str]):
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def answer(req: dict[str, Any]) -> dict[str, Any]:
    facts = req.get("facts") or {}
    cc = float(facts.get("gpu.compute_capability") or 9.0)
    _STATE.update(
        cap=(int(cc), round((cc - int(cc)) * 10)),
        mem=int(float(facts.get("gpu.memory_gib") or 80) * (1 << 30)),
        count=int(facts.get("gpu.count") or 1),
        name=str(facts.get("gpu.name") or "GPU"),
    )
    model = req.get("model") or "model"
    folder = os.path.isfile(os.path.join(model, "config.json"))
    with _environment(req.get("env") or {}):
        try:
            ea = _parse(list(req.get("argv") or []), model)
        except ValueError as e:
            return {"status": "refused", "message": str(e), "check": "argparse", "source": "vllm arg parser"}
        vcfg, chosen = None, None
        if folder:
            vcfg, bad = _engine_config(ea)
            if bad is not None:
                return bad
        else:
            bad = _quantization(ea, facts)
            if bad is not None:
                return bad
        if facts.get("device") == "cuda":
            att = _attention(ea, facts, vcfg)
            if att["status"] != "passes":
                return att
            chosen = att["chosen"]
        checked = (
            "engine config, attention selector" if folder else "attention selector, quantization capability"
        )
        if facts.get("device") != "cuda":
            checked = "engine config" if folder else "argument parser"
        picked = f"; a valid attention backend exists (here: {chosen})" if chosen else ""
        return {
            "status": "passes",
            "message": f"passes vLLM's own checks ({checked}){picked}",
            "check": checked,
        }


def main() -> None:
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # vLLM's log lines go to stderr, not into the protocol
    sys.stdout = sys.stderr
    device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
    t0 = time.time()
    try:
        import vllm

        platform = _install_platform(device)
        version = vllm.__version__
        # Import the parser and config modules now, not at the first candidate. Only a warm-up:
        # with the hub offline (HF_HUB_OFFLINE=1, as on the H200) vLLM 0.24.0 looks the
        # placeholder model up and fails, which says nothing about a candidate.
        with contextlib.suppress(Exception):
            _parse([], "model")
        hello = {"ready": True, "version": version, "platform": platform, "seconds": time.time() - t0}
    except Exception as e:
        hello = {"ready": False, "error": f"{type(e).__name__}: {e}", "seconds": time.time() - t0}
    out.write(json.dumps(hello) + "\n")
    if not hello["ready"]:
        return
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        t = time.time()
        try:
            res = answer(req)
        except Exception as e:  # never a crash: the run carries on without this answer
            res = {
                "status": "cannot",
                "message": f"dry run failed: {type(e).__name__}: {e}",
                "check": "child",
            }
        res["id"] = req.get("id")
        res["seconds"] = round(time.time() - t, 4)
        out.write(json.dumps(res, default=str) + "\n")


if __name__ == "__main__":
    main()
