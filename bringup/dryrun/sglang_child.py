"""The SGLang dry-run child: ServerArgs construction and its checks, the device from the facts.

Standalone (no bringup import), the same pipe protocol as vllm_child.py. torch.cuda's device
queries answer from the facts (capability, name, count, memory) before SGLang is imported, then
``prepare_server_args(argv)`` parses the candidate's flags with SGLang's own parser and builds
``ServerArgs``, whose ``__post_init__`` runs SGLang's argument checks and overrides (the FA3 range
of compute capabilities, the forced backends for sparse attention, the context length against the
model's), then ``check_server_args()``, the checks the engine runs before it starts a process.
For a model folder it then does what the scheduler does first, before any weight or GPU memory:
``ModelConfig.from_server_args`` and, for a quantized candidate, the loader's ``get_quant_config``
(which looks for the method's config file: "Cannot find the config file for awq"). An
AssertionError or ValueError raised from SGLang's own argument, config or quantization lookup code
is a refusal; anything else (a check that needs a real GPU, a kernel package the
environment lacks) is "cannot check".

Run against SGLang 0.5.16 (its H200 site, on this CPU machine and on the H200: docs/dryrun.md).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
import traceback
import types
from typing import Any

# This file's folder holds bringup's adapters (vllm.py, sglang.py): never let them shadow the engine.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

_STATE: dict[str, Any] = {"cap": (9, 0), "mem": 80 << 30, "count": 1, "name": "GPU"}


def _mock_cuda() -> None:
    import torch

    props = lambda i=0: types.SimpleNamespace(  # noqa: E731
        name=_STATE["name"],
        major=_STATE["cap"][0],
        minor=_STATE["cap"][1],
        total_memory=_STATE["mem"],
        multi_processor_count=132,
    )
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: int(_STATE["count"])
    torch.cuda.current_device = lambda: 0  # torch's Triton check asks it at SGLang's import (torchao)
    torch.cuda.get_device_capability = lambda device=None: tuple(_STATE["cap"])
    torch.cuda.get_device_name = lambda device=None: str(_STATE["name"])
    torch.cuda.get_device_properties = props  # type: ignore[assignment]
    torch.cuda.mem_get_info = lambda device=None: (int(_STATE["mem"]), int(_STATE["mem"]))


# SGLang's own checking code: its argument post-processing, its model config, the loader's lookup
# of the quantization config file (sglang/srt/server_args.py, arg_groups/, configs/,
# model_loader/weight_utils.py get_quant_config).
_OWN_FILES = ("server_args", "arg_groups", "/configs/", "weight_utils")


def _own(e: BaseException) -> bool:
    """A ValueError or AssertionError (a JSON value it parses, too) on its way out of SGLang's
    own checking code. Environment trouble (no GPU, a missing kernel package) raises otherwise:
    RuntimeError, ImportError, AttributeError."""
    frames = traceback.extract_tb(e.__traceback__)
    return (
        bool(frames)
        and any(any(k in f.filename for k in _OWN_FILES) for f in frames)
        and isinstance(e, (AssertionError, ValueError))
    )


def _model_checks(server_args: Any) -> None:
    """The scheduler's first steps for a model folder, before weights or GPU memory: SGLang's
    ModelConfig, then the quantization config lookup (each raises what a launch would print)."""
    if not os.path.isfile(os.path.join(str(server_args.model_path), "config.json")):
        return
    from sglang.srt.configs.model_config import ModelConfig  # type: ignore[import-not-found]

    mc = ModelConfig.from_server_args(server_args)
    if getattr(mc, "quantization", None):
        from sglang.srt.configs.load_config import LoadConfig  # type: ignore[import-not-found]
        from sglang.srt.model_loader.weight_utils import get_quant_config  # type: ignore[import-not-found]

        get_quant_config(mc, LoadConfig(load_format=server_args.load_format), {}, None)


def answer(req: dict[str, Any]) -> dict[str, Any]:
    facts = req.get("facts") or {}
    cc = float(facts.get("gpu.compute_capability") or 9.0)
    _STATE.update(
        cap=(int(cc), round((cc - int(cc)) * 10)),
        mem=int(float(facts.get("gpu.memory_gib") or 80) * (1 << 30)),
        count=int(facts.get("gpu.count") or 1),
        name=str(facts.get("gpu.name") or "GPU"),
    )
    from sglang.srt.server_args import prepare_server_args  # type: ignore[import-not-found]

    saved = {k: os.environ.get(k) for k in req.get("env") or {}}
    os.environ.update(req.get("env") or {})
    phase = "parse-args"
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):  # argparse's message, for the answer
            server_args = prepare_server_args(
                ["--model-path", req.get("model") or "model", *list(req.get("argv") or [])]
            )
        # The engine's next check, before it starts any process (entrypoints/engine.py
        # _launch_subprocesses -> ServerArgs.check_server_args: parallel sizes, the served name's
        # colon, LoRA, chunked prefill against the page size); absent in older versions.
        check = getattr(server_args, "check_server_args", None)
        if callable(check):
            check()
        phase = "load-weights"  # the model config and quantization lookup run as the scheduler starts
        _model_checks(server_args)
    except SystemExit as e:
        said = err.getvalue().strip().splitlines()
        return {
            "status": "refused",
            "message": said[-1] if said else f"argparse: exit {e}",
            "check": "argparse",
        }
    except Exception as e:
        text = f"{type(e).__name__}: {e}"
        if _own(e):
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)).splitlines()
            return {
                "status": "refused",
                "message": text,
                "check": "server-args" if phase == "parse-args" else "model-config",
                "traceback": tb,
                "phase": phase,
                "source": (
                    "sglang/srt/server_args.py ServerArgs.__post_init__, check_server_args"
                    if phase == "parse-args"
                    else "sglang/srt/configs/model_config.py ModelConfig; model_loader/weight_utils.py get_quant_config"
                ),
            }
        return {"status": "cannot", "message": f"{phase}: {text}", "check": "server-args"}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {
        "status": "passes",
        "message": "passes SGLang's own checks (ServerArgs, model config)",
        "check": "server-args",
    }


def main() -> None:
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    t0 = time.time()
    try:
        _mock_cuda()
        import sglang  # type: ignore[import-not-found]
        import sglang.srt.server_args  # type: ignore[import-not-found]  # noqa: F401

        hello = {"ready": True, "version": getattr(sglang, "__version__", "?"), "seconds": time.time() - t0}
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
        except Exception as e:
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
