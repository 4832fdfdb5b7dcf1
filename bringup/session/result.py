"""Result assembly: a bring-up run's attempts and its end as the typed records the reports read.

An attempt is one trial as the report shows it (its changes from the baseline, status, evidence,
span on the run's clock); the result is the whole run (`bringup.record.results.RunResult`: what
validated, the final command, the minimal fix, the launches it took, what knowledge predicted).
Kept apart from the loop (bringup/session/run.py) because it only reads what the loop did: it
decides nothing, and everything that reads a run afterwards (findings.json, FINDINGS.md, the HTML
report, `bringup tune --run`, `--json`) reads what it makes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.core.candidate import Candidate, change_tokens
from bringup.observe.outcome import Outcome
from bringup.record.results import Attempt, Prediction, Purpose, RunResult
from bringup.search.minimize import MinimalFix
from bringup.search.space import Space
from bringup.search.strategy import Strategy

if TYPE_CHECKING:
    from bringup.session.run import Run


def attempt_of(
    baseline: Candidate,
    seq: int,
    purpose: Purpose,
    cand: Candidate,
    out: Outcome,
    tdir: Path,
    wall: float,
    extra: dict[str, Any],
) -> Attempt:
    """One trial as the report shows it."""
    return Attempt(
        number=seq,
        purpose=purpose,
        changes=cand.describe_diff(baseline),
        status=out.status,
        failure_class=out.failure_class,
        phase=out.phase,
        evidence=out.key_evidence()[:300],
        wall_s=extra.get("wall_s", wall) or wall,
        simulated_s=out.timings.simulated,
        p_success=extra.get("p_success"),
        reasons=extra.get("reasons", []),
        trial_dir=str(tdir),
        overrides=list(out.overrides),
        hint=out.hint,
        signature=out.signature,
        gpus=extra.get("gpus", []),
        where=extra.get("where", ""),
        clock_start_s=extra.get("clock_start_s"),
        clock_end_s=extra.get("clock_end_s"),
        cold_start=out.cold_start(),
    )


def predictions(space: Space, baseline: Candidate, strategy: Strategy) -> list[Prediction]:
    """What knowledge said about the baseline's own levels before any launch."""
    out = []
    for f in space.factors:
        level = f.level_in(baseline.flag_dict, baseline.env_dict)
        for v in strategy.verdicts(f, level):
            out.append(Prediction(flag=f.name, level=f.describe_level(level), **v.to_json()))
    return out


def _final_probes(attempts: list[Attempt]) -> tuple[list[Any], list[str]]:
    """The probe ladder and the warnings of the last validated search launch."""
    ok = [a for a in attempts if a.purpose == "search" and a.status == "works"]
    if ok:
        try:
            o = Outcome.model_validate_json((Path(ok[-1].trial_dir) / "outcome.json").read_text())
            return o.probes, o.warnings
        except (OSError, ValueError):
            pass
    return [], []


def run_result(
    run: Run,
    status: str,
    stop_reason: str,
    validated: Candidate | None,
    fix: MinimalFix | None,
    t0: float,
    priors: int,
    search_clock: float | None,
) -> RunResult:
    """The whole run as findings.json keeps it. ``search_clock``: the run's clock when the search
    ended (one trial at a time, the sum of its launches; at once, the time to the first validated
    configuration: launches beside it overlap); None: when the run ended."""
    eng = run.target.engine
    search = [a for a in run.attempts if a.purpose in ("search", "screen")]
    clock = search_clock if search_clock is not None else run.ex.now()
    probes, warnings = _final_probes(run.attempts)
    final = fix.final if fix else None
    minimal = fix.changes if fix else []
    return RunResult(
        final_probes=probes,
        warnings=warnings,
        parallel=run.launcher.width,
        lost_trials=list(run.lost),
        reference=run.reference_why,
        node_type=getattr(run.ex, "resource", None),
        run_id=run.run_id or "",
        run_dir=str(run.run_dir),
        status=status,
        validated=validated is not None,
        launches=len(search),
        screening_launches=sum(1 for a in search if a.purpose == "screen"),
        minimize_launches=sum(1 for a in run.attempts if a.purpose == "minimize"),
        simulated_hours=run.ex.clock.hours(run.replayed_s + clock),
        wall_seconds=time.time() - t0,
        final_command=final.shell_command(eng.command_prefix(final)) if final else None,
        final_candidate=final.to_json() if final else None,
        minimal_fix=[c.describe() for c in minimal],
        minimal_fix_str=" ".join(change_tokens(minimal)) if minimal else None,
        minimal_fix_verified=fix.verified if fix else False,
        stop_reason=stop_reason,
        attempts=run.attempts,
        baseline=run.baseline.to_json(),
        baseline_command=run.baseline.shell_command(eng.command_prefix(run.baseline)),
        predictions=predictions(run.space, run.baseline, run.strategy),
        engine=eng.log_dialect,
        engine_version=run.target.version,
        model=run.target.model,
        facts={k: v for k, v in run.facts.items() if not isinstance(v, (dict, list))},
        strategy_state=run.strategy.state(),
        journal_priors=priors,
        hardware_fp=run.hw_fp,
        lessons=run.learned.uses,
        lessons_refused=run.learned.refused,
        knowledge=run.settings.knowledge,
    )


def keep_result(run: Run, result: RunResult) -> None:
    """The result into the journal, findings.json, FINDINGS.md and the HTML report."""
    assert run.journal is not None and run.run_id is not None
    run.journal.finish_run(run.run_id, result.status, result.model_dump())
    from bringup.report.findings import write_report
    from bringup.report.html import load_tunes, write_html

    write_report(result, run.run_dir)
    write_html(run.run_dir, result, load_tunes(run.run_dir))


def resume_hint(proven: bool, max_launches: int, run_id: str | None) -> str:
    """How to go on searching where a run stopped short (nothing after a proof of impossibility)."""
    if proven:
        return ""
    return (
        f". Resume the search with: bringup run --resume --run-id {run_id} --max-launches {max_launches + 6}"
    )
