"""What a bring-up run is asked to do (`RunSettings`), what it tells a live display (`RunObserver`),
and the error for bad input (`RunError`).

Kept apart from the loop (bringup/session/run.py) because everything that starts or resumes a run
reads them without running one: the CLI fills the settings from its options, the journal keeps them
to resume, a node of a Ray cluster resolves the same target from them (bringup/session/nodetypes.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from bringup.engines.targets import Target, resolve_target
from bringup.guard import ranges
from bringup.record.results import Attempt, Purpose, RunResult
from bringup.search.space import Space


def settings_target(s: RunSettings) -> Target:
    """The engine and model a run's settings name (here, or on a node that gathers its facts)."""
    return resolve_target(
        engine=s.engine,
        model=s.model,
        scenario=Path(s.scenario) if s.scenario else None,
        python=s.python,
        time_scale=s.time_scale,
        gpus=s.gpus,
    )


class RunError(ValueError):
    """Bad input for a run: what is wrong and what to do."""


class RunSettings(BaseModel):
    engine: str | None = None
    model: str | None = None
    scenario: str | None = None
    python: str | None = None
    time_scale: float = ranges.TIME_SCALE.field(0.01)
    baseline: str = ""  # NAME=VALUE ... --flag x: the starting command's environment and flags
    env: dict[str, str] = Field(default_factory=dict)  # more of the starting environment (--env)
    vary: list[str] = Field(default_factory=list)
    fix: dict[str, Any] = Field(default_factory=dict)
    # flags (or env:NAME) of the starting command kept as given: every other setting of it is a
    # suspect the search may undo (issue 36); the model is always kept
    keep: list[str] = Field(default_factory=list)
    space_file: str | None = None
    knowledge: bool = True
    screen: Literal["auto", "always", "never"] = "auto"
    # Every number's range is bringup/guard/ranges.py's, for a library user as for the CLI (issue 40).
    screen_layers: int = ranges.LAYERS.field(4)
    max_launches: int = ranges.LAUNCHES.field(12)
    max_hours: float | None = ranges.HOURS.field(None)
    minimize: bool = True
    max_minimize_launches: int = ranges.MORE_LAUNCHES.field(8)
    retry_known: bool = False
    timeout: float = ranges.SECONDS.field(1800.0)
    hang_timeout: float = ranges.SECONDS.field(600.0)
    answers: list[tuple[str, str]] = Field(default_factory=list)
    batch: int = ranges.BATCH.field(8)
    long_tokens: int = ranges.LONG_TOKENS.field(256)
    # The reference-differential probe: a file from `bringup reference`, "auto" (in-process with
    # transformers when the model is a local folder that fits) or "none" (bringup/verify/reference.py).
    reference: str = "auto"
    # Trials at once: "1" (one after another), a number, or "auto" (as many as the GPUs hold with
    # the baseline's need); each on its own GPUs and port (bringup/trial/slots.py, bringup/trial/executor.py).
    parallel: str = "1"
    gpus: str | None = None  # the GPUs the run may use (CUDA_VISIBLE_DEVICES entries); None: all
    # Trials on a Ray cluster (bringup/trial/rayexec.py): "auto" (the cluster running here, else a
    # one-node one) or its address; None: on this machine. With it, parallel "auto" is as many
    # trials as the cluster's nodes of this hardware have GPUs.
    ray: str | None = None
    # With ray: the node type whose nodes take the trials, the Ray resource they declare
    # (``bringup-hw-<hash>``; bringup/session/nodetypes.py runs one bring-up per type); None: this machine's.
    node_type: str | None = None
    # Before each launch, ask the installed engine's own checks with the target's facts
    # (bringup/dryrun/; a refused candidate is observed as its refusal and never launched):
    # "auto" (a GPU target of a real engine, where an adapter and the target's version are
    # installed: bringup.dryrun.wanted), "always" (scenarios and CPU targets too) or "never".
    dry_run: Literal["auto", "always", "never"] = "auto"
    # Lessons of other runs (bringup lessons export): files or folders (bringup/session/learned.py).
    lessons: list[str] = Field(default_factory=list)


class RunObserver(Protocol):
    """Progress of a run, for a live display. Every method is optional to act on."""

    def started(self, run_id: str, run_dir: Path, space: Space, resumed: int) -> None: ...
    def launching(self, seq: int, purpose: Purpose, changes: str, screen: bool) -> None: ...
    def trial_event(self, kind: str, text: str) -> None: ...
    def attempted(self, attempt: Attempt) -> None: ...
    def finished(self, result: RunResult) -> None: ...


class QuietObserver:
    def started(self, run_id: str, run_dir: Path, space: Space, resumed: int) -> None:
        pass

    def launching(self, seq: int, purpose: Purpose, changes: str, screen: bool) -> None:
        pass

    def trial_event(self, kind: str, text: str) -> None:
        pass

    def attempted(self, attempt: Attempt) -> None:
        pass

    def finished(self, result: RunResult) -> None:
        pass
