"""The scenario engine as an adapter: launched like an engine, read in its engine's dialect.

A scenario imitates SGLang or vLLM (its `engine` field), so its log is read with that engine's
phase markers, effective-config parser and signatures: the pipeline runs unchanged.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from bringup.candidate import Candidate
from bringup.engines.base import Engine, EngineInfo, engine_info


@dataclass
class ScenarioEngine(Engine):
    scenario_path: Path = Path()
    dialect: str = "sglang"
    time_scale: float = 0.01
    extra_args: list[str] = field(default_factory=list)

    @property
    def info(self) -> EngineInfo:
        return engine_info(self.dialect)

    @property
    def log_dialect(self) -> str:
        return self.dialect

    def launch_argv(self, cand: Candidate, host: str, port: int) -> list[str]:
        return [self.python, "-m", "bringup.scenario", "serve", "--scenario", str(self.scenario_path),
                "--time-scale", repr(self.time_scale), *self.extra_args, "--",
                self.info.model_flag, cand.model, "--host", host, "--port", str(port), *cand.argv_flags()]

    def version(self) -> str | None:  # the scenario says which version it imitates
        return None


def scenario_engine(path: Path, dialect: str, time_scale: float, python: str | None = None) -> ScenarioEngine:
    return ScenarioEngine(name="scenario", python=python or sys.executable, scenario_path=Path(path).resolve(),
                          dialect=dialect, time_scale=time_scale)
