"""The scenario engine as an adapter: launched like an engine, read in its engine's dialect.

A scenario imitates SGLang or vLLM (its `engine` field), so its log is read with that engine's
phase markers, effective-config parser and signatures: the pipeline runs unchanged. What a
double knows that a real engine does not (the machine it replays, its simulated clock, its
model's known answers, the baseline its user starts from) it says through the world it hands
out (`Replayed`, bringup/engines/world.py), so the core never asks whether it drives a
double. This is the only module outside ``bringup/scenario/`` that imports the double.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from bringup.core.candidate import Candidate
from bringup.core.clock import Clock, SimulatedClock
from bringup.engines.base import Engine, EngineInfo, engine_info
from bringup.engines.world import World
from bringup.help.text import HelpSpec


class ScenarioLoadError(ValueError):
    """A scenario file that cannot be used: what is wrong."""


@dataclass
class ScenarioEngine(Engine):
    scenario_path: Path = Path()
    dialect: str = "sglang"
    time_scale: float = 0.01
    extra_args: list[str] = field(default_factory=list)
    scenario: Any = None  # bringup.scenario.schema.Scenario

    @property
    def info(self) -> EngineInfo:
        return engine_info(self.dialect)

    @property
    def log_dialect(self) -> str:
        return self.dialect

    def launch_argv(self, cand: Candidate, host: str, port: int) -> list[str]:
        from bringup.scenario import serve_argv

        flags = [*self.model_args(cand.model), "--host", host, "--port", str(port), *cand.argv_flags()]
        argv = serve_argv(self.scenario_path, flags, self.time_scale, self.python)
        if self.extra_args:
            cut = argv.index("--")
            argv[cut:cut] = self.extra_args
        return argv

    def version(self) -> str | None:  # the scenario says which version it imitates
        return self.scenario.engine_version if self.scenario is not None else None

    def help_spec(self, version: str | None = None) -> HelpSpec | None:
        v = version or self.version()
        if v is None:
            return None  # no scenario loaded: no help
        from bringup.scenario.engine_args import help_for

        return help_for(self.dialect, v)[0]  # the double's own parse, once per process

    def world(self) -> World:
        return Replayed(self.scenario, self.time_scale)

    def env_registry(self, version: str | None):
        """The imitated version's registry, from bringup's snapshot (never an installed engine's)."""
        return snapshot_registry(self.dialect, version or self.version())


@dataclass(frozen=True)
class Replayed(World):
    """The machine a scenario replays: its facts, its model, its clock of simulated seconds.

    Its GPUs are the double's stand-ins (Ray's ``bringup-gpu`` resource), its model has no weights
    to run a reference on, and the installed engine is not what launches, so its own checks speak
    for nothing here."""

    scenario: Any  # bringup.scenario.schema.Scenario
    time_scale: float

    tokenizer_kind = "words"
    gpus_here = False
    weights_here = False
    installed_engine_launches = False

    def clock_scale(self) -> float:
        """The scenario server sleeps each simulated second x time_scale: so do the deadlines."""
        return self.time_scale

    def clock(self) -> Clock:
        """The simulated seconds the scenario's launches stand for (its server prints them)."""
        return SimulatedClock(self.time_scale)

    def launch_seconds(self, lines: list[str]) -> float | None:
        from bringup.scenario import parse_clock

        clocks = [c for line in lines if (c := parse_clock(line)) is not None]
        return max(clocks) if clocks else None

    def bookkeeping(self, line: str) -> bool:
        from bringup.scenario import parse_clock

        return parse_clock(line) is not None

    def machine_facts(self) -> dict[str, Any] | None:
        facts = dict(self.scenario.facts())
        facts.setdefault("model.replicated_gib", getattr(self.scenario.model, "replicated_gib", None) or 0.0)
        return facts

    def identity_scope(self) -> str | None:
        return f"scenario:{self.scenario.name}"

    def model_identity(self, model: str) -> str | None:
        return f"scenario-model:{model}"

    def default_model(self) -> str | None:
        return self.scenario.model.name

    def known_answers(self) -> list[tuple[str, str]]:
        return [(a.prompt, a.expected) for a in self.scenario.answers]

    def default_baseline(self) -> str:
        return getattr(self.scenario, "baseline", None) or ""


@lru_cache(maxsize=8)
def snapshot_registry(dialect: str, version: str | None):
    """A bundled snapshot never changes while the process runs: read it once (a run reads it at
    every start; benchmarks start hundreds of runs)."""
    from bringup.env.registry import load_registry

    return load_registry(dialect, version=version, installed=False)


def scenario_engine(path: Path, time_scale: float, python: str | None = None) -> ScenarioEngine:
    """Load a scenario file and wrap it as an engine (ScenarioLoadError when it cannot be used)."""
    import importlib.util

    from bringup.core.datafiles import KnowledgeFileError
    from bringup.scenario import ScenarioError, load_scenario

    missing = [m for m in ("starlette", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        raise ScenarioLoadError(
            f"the scenario engine needs {', '.join(missing)}: pip install 'bringup[scenario]'"
        )
    try:
        sc = load_scenario(Path(path))
    except (ScenarioError, KnowledgeFileError, FileNotFoundError) as e:
        raise ScenarioLoadError(str(e)) from e
    return ScenarioEngine(
        name="scenario",
        python=python or sys.executable,
        scenario_path=Path(path).resolve(),
        dialect=sc.engine,
        time_scale=time_scale,
        scenario=sc,
    )
