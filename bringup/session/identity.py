"""Who a run is about: the machine's fingerprint, the model's identity, the facts rules read.

The journal keys earlier outcomes by these, so a later run on the same machine, engine version
and model inherits what was learned, and a run on another machine does not. An engine that
replays another machine (the scenario double) supplies its own facts and scope.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.engines.targets import Target

if TYPE_CHECKING:
    from bringup.facts.modelinfo import Fingerprint

_FP_KEYS = ("device", "gpu.name", "gpu.count", "gpu.compute_capability", "gpu.memory_gib", "cpu.count")


def hardware_fingerprint(facts: dict, scope: str | None) -> str:
    blob = json.dumps({k: facts.get(k) for k in _FP_KEYS}, sort_keys=True, default=str)
    h = hashlib.sha256(blob.encode()).hexdigest()[:10]
    return f"{scope}:{h}" if scope else f"hw:{h}"


def model_identity(target: Target) -> str:
    own = target.world.model_identity(target.model)
    if own is not None:
        return own
    p = Path(target.model)
    cfg = p / "config.json"
    if cfg.is_file():
        h = hashlib.sha256(cfg.read_bytes()).hexdigest()[:10]
        size = sum(f.stat().st_size for f in p.glob("*.safetensors"))
        return f"{p.resolve()}#{h}:{size}"
    return target.model


def gather_facts(target: Target) -> tuple[dict[str, Any], Fingerprint | None]:
    """Facts for knowledge rules: the engine's own (a double's), or doctor's and the model fingerprint's."""
    own = target.world.machine_facts()
    if own is not None:
        return own, None
    from bringup.facts import hardware, modelinfo

    facts = dict(hardware.facts(hardware.snapshot()))
    fp = None
    if Path(target.model).is_dir():
        try:
            fp = modelinfo.fingerprint(target.model)
            facts.update(modelinfo.facts(fp))
        except (OSError, ValueError) as e:  # a model folder bringup cannot read is not fatal here
            facts["model.error"] = str(e)
    facts["engine.name"] = target.engine.log_dialect
    facts["engine.version"] = target.version
    return facts, fp
