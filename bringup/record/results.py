"""What a bring-up run returns and records: its attempts and its result (findings.json).

These models are the boundary between the run and everything that reads it afterwards (the
Markdown and HTML reports, `bringup tune --run`, `--json`), so every field is typed: a report
never reads a dict by key that nobody promised it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from bringup.observe.outcome import OverrideRecord, ProbeResult

# dry-run: refused by the installed engine's own check (bringup/dryrun/), never launched.
Purpose = Literal["search", "screen", "minimize", "dry-run"]


class Attempt(BaseModel):
    number: int
    purpose: Purpose  # search | screen | minimize (the minimal fix, search/minimize.py)
    changes: str
    status: str
    failure_class: str | None = None
    phase: str | None = None
    evidence: str = ""
    wall_s: float = 0.0
    simulated_s: float | None = None
    p_success: float | None = None
    reasons: list[str] = Field(default_factory=list)
    trial_dir: str = ""
    overrides: list[OverrideRecord] = Field(default_factory=list)
    hint: str | None = None
    signature: str | None = None
    # Trials at once (bringup/trial/executor.py): where it ran, and its span on the run's clock
    # (simulated seconds for a double); empty when trials ran one at a time.
    gpus: list[str] = Field(default_factory=list)
    where: str = ""
    clock_start_s: float | None = None
    clock_end_s: float | None = None
    cold_start: str = ""  # a start slowed by kernel compiles (Outcome.cold_start), for the report

    @field_validator("purpose", mode="before")
    @classmethod
    def _renamed(cls, v: Any) -> Any:
        return "minimize" if v == "explain" else v  # findings written before the rename


class Prediction(BaseModel):
    """What knowledge said about one of the baseline's levels before any launch."""

    flag: str
    level: str
    verdict: str  # incompatible | risky | preferred | forced | default
    reason: str
    source: str
    rule: str
    facts: dict[str, Any] = Field(default_factory=dict)
    value: Any = None


class Pinned(BaseModel):
    value: str
    why: str


class StrategyState(BaseModel):
    """The strategy's beliefs at the end of a run, for the report."""

    frozen: dict[str, Pinned] = Field(default_factory=dict)  # the engine uses this value whatever is asked
    defaults: dict[str, Pinned] = Field(default_factory=dict)  # what the engine picks when a flag is unset
    bounds: dict[str, list[float | None]] = Field(default_factory=dict)
    suspects: dict[str, float] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class LessonUse(BaseModel):
    """A lesson of another run that this run read and used (bringup/session/learned.py): how far its
    scope reached here, the weight it was given, whether its fix was the first launch."""

    id: str
    how: Literal["exact", "near"]
    weight: float
    first: bool = False  # its fix, on the baseline, was the first candidate
    why: list[str] = Field(default_factory=list)  # the scope fields that differ, and how far
    where: str = ""  # the file and entry it was read from
    lesson: dict[str, Any] = Field(default_factory=dict)  # the entry as read (for the run's export)


class RunResult(BaseModel):
    run_id: str
    run_dir: str
    status: str  # validated | impossible | not-found | budget | interrupted
    validated: bool
    launches: int
    screening_launches: int
    minimize_launches: int
    parallel: int = 1  # trials at once, at most (bringup run --parallel)
    reference: str = ""  # where the reference probe's answers came from, or why there was none
    lost_trials: list[str] = Field(default_factory=list)  # trials lost with their node, run again
    node_type: str | None = None  # on a Ray cluster: the Ray resource its nodes of this hardware declare
    simulated_hours: float | None
    wall_seconds: float
    final_command: str | None
    final_candidate: dict[str, Any] | None  # Candidate.to_json() of the validated configuration
    minimal_fix: list[str] = Field(default_factory=list)
    minimal_fix_str: str | None = None
    minimal_fix_verified: bool = False
    stop_reason: str = ""
    attempts: list[Attempt] = Field(default_factory=list)
    baseline: dict[str, Any] = Field(default_factory=dict)  # Candidate.to_json() of the starting command
    baseline_command: str = ""
    predictions: list[Prediction] = Field(default_factory=list)  # before any launch: plan and rule verdicts
    engine: str = ""
    engine_version: str | None = None
    model: str = ""
    facts: dict[str, Any] = Field(default_factory=dict)  # the scalar facts rules read
    strategy_state: StrategyState = Field(default_factory=StrategyState)
    journal_priors: int = 0
    hardware_fp: str = ""  # the machine's identity in the journal (a lesson's source names it)
    lessons: list[LessonUse] = Field(default_factory=list)  # lessons of other runs this one used
    lessons_refused: list[str] = Field(default_factory=list)  # lesson files or entries it could not use
    knowledge: bool = True
    final_probes: list[ProbeResult] = Field(default_factory=list)  # the probe ladder on the validated launch
    warnings: list[str] = Field(default_factory=list)  # non-fatal lines worth knowing, from that launch

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "explain_launches" in data and "minimize_launches" not in data:
            data = {
                **data,
                "minimize_launches": data["explain_launches"],
            }  # findings written before the rename
        return data
