"""The SGLang dry-run child: ServerArgs construction and its checks, the device from the facts.

Standalone (no bringup import), the same pipe protocol as vllm_child.py. torch.cuda's device
queries answer from the facts (capability, name, count, memory) before SGLang is imported, then
``prepare_server_args(argv)`` parses the candidate's flags with SGLang's own parser and builds
``ServerArgs``, whose ``__post_init__`` runs SGLang's argument checks and overrides (the FA3 range
of compute capabilities, the forced backends for sparse attention). An AssertionError or
ValueError raised from SGLang's own argument code is a refusal; anything else (a check that
needs a real GPU, a kernel package the environment lacks) is "cannot check".

Not exercised on this project's machines yet: SGLang was not installed when it was written
(docs/dryrun.md). Its answers are only ever "passes", "refused" from SGLang's own files, or
"cannot".
"""

from __future__ import annotations

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
    torch.cuda.get_device_capability = lambda device=None: tuple(_STATE["cap"])
    torch.cuda.get_device_name = lambda device=None: str(_STATE["name"])
    torch.cuda.get_device_properties = props  # type: ignore[assignment]
    torch.cuda.mem_get_info = lambda device=None: (int(_STATE["mem"]), int(_STATE["mem"]))


def _own(e: BaseException) -> bool:
    """Raised from SGLang's own argument code (server_args.py, arg_groups/)."""
    frames = traceback.extract_tb(e.__traceback__)
    return (
        bool(frames)
        and any("server_args" in f.filename or "arg_groups" in f.filename for f in frames[-2:])
        and isinstance(e, (AssertionError, ValueError))
    )


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
    try:
        prepare_server_args(["--model-path", req.get("model") or "model", *list(req.get("argv") or [])])
    except SystemExit as e:
        return {"status": "refused", "message": f"argparse: {e}", "check": "argparse"}
    except Exception as e:
        text = f"{type(e).__name__}: {e}"
        if _own(e):
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)).splitlines()
            return {
                "status": "refused",
                "message": text,
                "check": "server-args",
                "traceback": tb,
                "source": "sglang/srt/server_args.py ServerArgs.__post_init__",
            }
        return {"status": "cannot", "message": f"server args: {text}", "check": "server-args"}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {"status": "passes", "message": "passes SGLang's ServerArgs checks", "check": "server-args"}


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
