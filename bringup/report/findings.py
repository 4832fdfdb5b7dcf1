"""The bring-up report: FINDINGS.md (for a person, in a minute) and findings.json (the same data).

A reader must see at once: does it work, with which command, what fixed it, and why every other
attempt failed, with the evidence line that proves it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bringup.core.datafiles import classes, public_source
from bringup.engines.base import display_name
from bringup.guard import secrets
from bringup.guard.limits import InputError, loads_json, read_text_limited
from bringup.guard.safetext import md_block, md_code, md_text, safe_text
from bringup.observe.outcome import OverrideRecord
from bringup.record.results import RunResult

if TYPE_CHECKING:
    from bringup.tuning.result import TuneResult

FINDINGS_MAX = 64 << 20  # a run of a thousand trials writes a few MB


def _md(text: str | None, limit: int = 2000) -> str:
    """Text from outside (a log line, a probe's detail) as Markdown prose or a table cell
    (bringup/guard/safetext.py: pipes, HTML and control characters escaped)."""
    return md_text(text, limit)


def _code(text: object, limit: int = 2000) -> str:
    """Text from outside as a code span it cannot break out of (bringup/guard/safetext.py)."""
    return md_code(text, limit)


def _duration(a) -> str:
    if a.simulated_s is not None:
        return f"{a.simulated_s / 60:.1f} min sim. ({a.wall_s:.0f} s real)"
    return f"{a.wall_s:.0f} s"


def describe_machine(r: RunResult) -> str:
    f = r.facts
    if f.get("device") == "cuda" or f.get("gpu.count"):
        bits = [
            f"{f.get('gpu.count', '?')} × {f.get('gpu.name', 'GPU')}",
            f"compute capability {f.get('gpu.compute_capability')}",
            f"{f.get('gpu.memory_gib')} GiB",
        ]
        if f.get("gpu.smem_per_block_kib"):
            bits.append(f"{f['gpu.smem_per_block_kib']} KiB shared memory per block")
        if f.get("gpu.link") and f.get("gpu.link") != "none":
            bits.append(str(f["gpu.link"]))
        return ", ".join(bits)
    return f"no GPU (CPU build): {f.get('cpu.count', '?')} CPUs, {f.get('host.memory_gib', '?')} GiB"


def describe_model(r: RunResult) -> str:
    f = r.facts
    bits = [str(f.get("model.architecture") or r.model)]
    if f.get("model.attention"):
        bits.append(f"{str(f['model.attention']).upper()} attention")
    if f.get("model.moe"):
        bits.append("MoE")
    if f.get("model.quantization") and f.get("model.quantization") != "none":
        bits.append(str(f["model.quantization"]).upper())
    if f.get("model.weights_gib"):
        bits.append(f"{float(f['model.weights_gib']):.3g} GiB of weights")
    return ", ".join(bits)


def _probes(r: RunResult) -> list[str]:
    """The final configuration's probes, and where the reference came from (or why none)."""
    if not r.final_probes:
        return []
    L = [
        "",
        "## Probes on the final configuration",
        "",
        ", ".join(f"{p.name} ({'passed' if p.passed else 'FAILED'})" for p in r.final_probes)
        + (": all passed." if all(p.passed for p in r.final_probes) else "."),
    ]
    for probe in r.final_probes:
        if probe.name in ("known-answers", "reference", "long-decode", "batch-invariance"):
            L.append(f"- {probe.name}: {_md(probe.detail, 200)}")
    if r.reference and not any(p.name == "reference" for p in r.final_probes):
        L.append(f"- reference: not on the ladder: {_md(r.reference, 240)}")
    return L


def render_markdown(r: RunResult, tunes: Sequence[TuneResult] = ()) -> str:
    """The bring-up, then each tuning of the run (its verdict and spreads), when given."""
    L: list[str] = []
    engine = f"{display_name(r.engine)} {r.engine_version or ''}".strip()
    L.append(f"# Bring-up: {r.model} on {describe_machine(r)}, {engine}")
    L.append("")
    full = sum(1 for a in r.attempts if a.purpose == "search")
    time_txt = (
        f"{r.simulated_hours:.2f} simulated hours of launches"
        if r.simulated_hours is not None
        else f"{sum(a.wall_s for a in r.attempts if a.purpose != 'minimize') / 60:.1f} min of launches"
    )
    if r.validated:
        L.append(
            f"**Result: validated** after {r.launches} launch{'es' if r.launches != 1 else ''} "
            f"({r.screening_launches} screening with dummy weights, {full} full), {time_txt}"
            + (
                f"; {r.journal_priors} earlier trials on this machine were used from the journal"
                if r.journal_priors
                else ""
            )
            + "."
        )
        if r.minimal_fix_str:
            how = (
                f"verified by removing each change in turn, {r.minimize_launches} extra launch{'es' if r.minimize_launches != 1 else ''}"
                if r.minimal_fix_verified
                else "not minimised: the minimize budget ran out"
            )
            L.append(f"Minimal fix from the baseline: {_code(r.minimal_fix_str)} ({how}).")
        elif r.attempts and r.attempts[0].status == "works" and r.attempts[0].changes == "(baseline)":
            L.append("The baseline itself works: no fix was needed.")
        L.append("")
        L += md_block(r.final_command or "")
    else:
        verdict = (
            "impossible here (proved by the engine's refusals and the hardware facts)"
            if r.status == "impossible"
            else "not found within the budget"
        )
        L.append(f"**Result: {verdict}** ({r.status}) after {r.launches} launches, {time_txt}.")
        L.append("")
        L.append(f"Why the search stopped: {_md(r.stop_reason)}")
    L.append("")
    L.append(
        f"Machine: {describe_machine(r)}. Model: {describe_model(r)}. Knowledge rules: {'on' if r.knowledge else 'off (signatures only)'}."
    )
    L.append("")
    L.append("Baseline:")
    L += md_block(r.baseline_command)
    L.append("")
    L.append("## Attempts")
    L.append("")
    L.append("| # | changed from baseline | kind | status | class | phase | evidence | time |")
    L.append("|---|---|---|---|---|---|---|---|")
    baseline_launched = any(a.changes == "(baseline)" for a in r.attempts)
    risky = [p for p in r.predictions if p.verdict in ("incompatible", "risky")]
    if not baseline_launched and risky:
        why = "; ".join(f"{p.flag} {p.level}: {p.reason}" for p in risky[:2])
        L.append(f"| 0 | (baseline, not launched) | plan | predicted fail | | | {_md(why, 300)} | 0 s |")
    for a in r.attempts:
        kind = {
            "search": "full",
            "screen": "screen (dummy weights, fewer layers)",
            "minimize": "minimize (full)",
            "dry-run": "dry run (engine's own check, no launch)",
        }[a.purpose]
        ev = a.evidence if a.status != "works" else "all probes passed"
        L.append(
            f"| {a.number} | {_md(a.changes)} | {kind} | {a.status} | {a.failure_class or ''} | "
            f"{a.phase or ''} | {_code(ev, 220)} | {_duration(a)} |"
        )
    L.extend(_where(r))
    L.extend(_cold_starts(r))
    fails = [a for a in r.attempts if a.status not in ("works", "cancelled")]  # cancelled: no verdict
    if fails:
        L.append("")
        L.append("## What the failures mean")
        L.append("")
        by: dict[tuple, list] = {}
        for a in fails:
            by.setdefault((a.failure_class, a.phase, a.signature), []).append(a)
        meaning = classes()
        for (cls, phase, sig), group in by.items():
            nums = ", ".join(str(a.number) for a in group)
            head = f"**{cls or group[0].status} in {phase or '?'} (attempt{'s' if len(group) > 1 else ''} {nums}):**"
            text = meaning.get(cls or "", "")
            hint = group[0].hint or ""
            L.append(f"- {head} {text} {_md(hint)}".rstrip())
            L.append(
                f"  Evidence: {_code(group[0].evidence, 300)}" + (f" (signature {_code(sig)})" if sig else "")
            )
    ov: dict[str, OverrideRecord] = {}
    for a in r.attempts:
        for o in a.overrides:
            ov.setdefault(o.flag, o)
    if ov or r.strategy_state.frozen:
        L.append("")
        L.append("## Engine overrides seen")
        L.append("")
        for flag, o in ov.items():
            L.append(
                f"- {_code(flag)}: asked {_code(o.requested)}, the engine used {_code(o.effective)}. "
                "Varying it further is pointless on this engine version."
                + (f" Evidence: {_code(o.evidence, 200)}" if o.evidence else "")
            )
        for flag, fr in r.strategy_state.frozen.items():
            if flag not in ov:
                L.append(
                    f"- {_code(flag)}: the engine uses {_code(fr.value)} whatever is asked ({_md(fr.why)})."
                )
    defaults = r.strategy_state.defaults
    if defaults:
        L.append("")
        L.append("## What the engine chose by itself")
        L.append("")
        for flag, d in defaults.items():
            L.append(f"- {_code(flag)} (not given): {_code(d.value)} ({_md(d.why)})")
    if r.predictions:
        L.append("")
        L.append("## Knowledge about the baseline before any launch")
        L.append("")
        for p in r.predictions:
            facts = ", ".join(f"{k}={v}" for k, v in p.facts.items())
            L.append(
                f"- {_code(f'{p.flag} {p.level}')}: **{p.verdict}**: {_md(p.reason)} "
                f"(facts: {facts or 'none'}"
                + (f"; source: {_md(src)})" if (src := public_source(p.source)) else ")")
            )
    if r.warnings:
        L.append("")
        L.append("## Warnings worth knowing")
        L.append("")
        for w in r.warnings[:8]:
            L.append(f"- {_code(w, 240)}")
    L += _probes(r)
    L += _lessons(r)
    notes = r.strategy_state.notes
    if notes:
        L.append("")
        L.append("## Bounds read from error messages")
        L.append("")
        for n in notes:
            L.append(f"- {_md(n)}")
    L += _tunings(tunes)
    L.append("")
    L.append(
        f"Run folder: {_code(r.run_dir)} (each attempt's log and outcome.json under `trials/`). "
        f"Run id `{r.run_id}`; resume with `bringup run --resume --run-id {r.run_id}`."
    )
    return safe_text("\n".join(L) + "\n")  # the document's last pass: FINDINGS.md and `bringup report`


def _lessons(r: RunResult) -> list[str]:
    """The lessons of other runs this run used (bringup run --lessons): how far each reached, how
    much it weighed, whether its fix was the first launch; and the files or entries refused."""
    if not r.lessons and not r.lessons_refused:
        return []
    L = ["", "## Lessons of other runs", ""]
    for u in r.lessons:
        fix = ", ".join(
            f"{c.get('flag')} {c.get('after')}" if c.get("after") is not None else f"drop {c.get('flag')}"
            for c in u.lesson.get("fix", [])
        )
        failure = u.lesson.get("failure", {})
        src = u.lesson.get("source", {})
        how = "exact scope" if u.how == "exact" else "near (" + "; ".join(u.why) + ")"
        first = ": its fix was the first candidate" if u.first else ""
        L.append(
            f"- `{u.id}` ({how}, weight {u.weight:.2f}){first}: `{_md(fix)}` cured "
            f"{failure.get('class')} in {failure.get('phase')} in run `{src.get('run')}` on `{src.get('machine')}`"
        )
    for why in r.lessons_refused:
        L.append(f"- refused: {_md(why)[:300]}")
    return L


def _tunings(tunes: Sequence[TuneResult]) -> list[str]:
    from bringup.tuning.findings import tune_markdown

    L: list[str] = []
    for t in tunes:
        L += ["", *tune_markdown(t)]
    return L


def _cold_starts(r: RunResult) -> list[str]:
    """A line per launch whose start was slow only because kernels compiled (a cold JIT cache)."""
    cold = [a for a in r.attempts if a.cold_start]
    return [""] + [f"Slow start of attempt {a.number}: {_md(a.cold_start)}." for a in cold] if cold else []


def _where(r: RunResult) -> list[str]:
    """Which nodes ran the trials (a Ray cluster), and the trials lost with a node and run again."""
    nodes: dict[str, list[int]] = {}
    for a in r.attempts:
        if a.where and a.where != "local":
            nodes.setdefault(a.where, []).append(a.number)
    if not nodes and not r.lost_trials:
        return []
    L = ["", "## Where trials ran", ""]
    if r.node_type:
        L.append(
            f"On a Ray cluster, on its nodes of this hardware (Ray resource `{r.node_type}`), "
            f"{r.parallel} trial{'s' if r.parallel != 1 else ''} at once at most."
        )
        L.append("")
    for where, nums in nodes.items():
        L.append(f"- `{where}`: {', '.join(f'#{n}' for n in nums)}")
    for lost in r.lost_trials:
        L.append(f"- lost with its node and launched again (not a failure of the candidate): {_md(lost)}")
    return L


def write_report(r: RunResult, run_dir: Path) -> Path:
    run_dir = Path(run_dir)
    secrets.write_text(run_dir / "findings.json", json.dumps(r.model_dump(), indent=2, default=str))
    path = run_dir / "FINDINGS.md"
    secrets.write_text(path, render_markdown(r))
    return path


class FindingsDamaged(ValueError):
    """findings.json cannot be read: the file and the place of the fault are named."""


def load_result(run_dir: Path) -> RunResult:
    path = Path(run_dir) / "findings.json"
    try:
        data = loads_json(read_text_limited(path, FINDINGS_MAX, "findings.json"), str(path), "findings.json")
        return RunResult.model_validate(data)
    except InputError as e:  # not a file, too big, not UTF-8, nested too deep
        raise FindingsDamaged(f"{e}; run the run again to rewrite it") from None
    except UnicodeDecodeError as e:
        raise FindingsDamaged(
            f"{path}: not UTF-8 (byte {e.start}); run the run again to rewrite it"
        ) from None
    except json.JSONDecodeError as e:
        raise FindingsDamaged(f"{path}: not JSON at line {e.lineno} column {e.colno} ({e.msg})") from None
    except ValueError as e:  # pydantic: the field and what is wrong with it
        first = str(e).splitlines()
        where = " ".join(first[1:3]).strip() if len(first) > 1 else str(e)
        raise FindingsDamaged(f"{path}: not a bringup result: {where[:300]}") from None
