"""The memory plan checked against what the engine reported, one launch at a time.

After each launch, the KV-cache report in the engine's log is compared with the plan for the
same memory fraction; the relative error goes into the journal, where `memory_model_for`
reads it back so that later plans on this machine correct themselves.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.guard import secrets
from bringup.observe.outcome import Outcome
from bringup.record.journal import Journal

if TYPE_CHECKING:
    from bringup.facts.modelinfo import Fingerprint


def record_kv(
    out: Outcome,
    trial_dir: Path,
    dialect: str,
    facts: dict,
    fingerprint: Fingerprint | None,
    journal: Journal,
    hw_fp: str,
    model_id: str,
    run_id: str,
    seq: int,
) -> None:
    """Attach the engine's KV report to the outcome and journal the plan's error (best effort)."""
    try:
        from bringup.facts import memplan

        lines = (trial_dir / "server.log").read_text(errors="replace").splitlines()
        report = memplan.parse_kv_report(lines, dialect)
        if not report:
            return
        out.kv_report = report
        secrets.write_text(trial_dir / "outcome.json", out.model_dump_json(indent=2))
        plan = plan_for(out, dialect, facts, fingerprint)
        if plan is None:
            return
        cmp = memplan.compare(plan, report)
        rel = cmp.get("kv_gib_rel_error") if isinstance(cmp, dict) else None
        journal.add_plan_error(hw_fp, dialect, model_id, run_id, seq, plan.to_dict(), report, rel)
    except (OSError, ValueError, TypeError, KeyError):
        return


def plan_for(out: Outcome, dialect: str, facts: dict, fingerprint: Fingerprint | None):
    """The memory plan for the fraction and parallelism this launch really used, or None."""
    from bringup.facts import memplan

    f = facts
    frac = out.effective.get("mem_fraction_static") or out.effective.get("gpu_memory_utilization")
    if frac is None:
        return None
    if f.get("device") == "cpu" and dialect == "vllm" and f.get("host.memory_gib"):
        try:  # the CPU build reserves a fraction of host memory
            return memplan.plan(
                gpu_mem_gib=float(f["host.memory_gib"]),
                mem_fraction=float(frac),
                engine="vllm",
                fp=fingerprint,
                device="cpu",
            )
        except (ValueError, TypeError):
            return None
    if f.get("device") != "cuda" or not f.get("gpu.memory_gib"):
        return None
    tp = int(out.effective.get("tp_size") or out.effective.get("tensor_parallel_size") or 1)
    kw: dict[str, Any] = {
        "gpu_mem_gib": float(f["gpu.memory_gib"]),
        "tp": tp,
        "mem_fraction": float(frac),
        "engine": dialect,
        "gpus": f.get("gpu.count"),
        "compute_capability": f.get("gpu.compute_capability"),
    }
    if fingerprint is not None:
        kw["fp"] = fingerprint
    elif f.get("model.weights_gib"):
        rep = float(f.get("model.replicated_gib") or 0.0)
        kw["weights_gib"] = (float(f["model.weights_gib"]) - rep) / tp + rep
    else:
        return None
    try:
        return memplan.plan(**kw)
    except (ValueError, TypeError, ZeroDivisionError):
        return None
