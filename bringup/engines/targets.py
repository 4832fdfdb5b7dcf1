"""What a command runs against: a real engine in a Python environment, or a scenario.

Resolving a target reads the engine's version and its --help (options for validation and the
search space), and the facts (hardware, model) that knowledge rules are evaluated against.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from bringup.engines.base import Engine, engine_info, engine_names, get_engine
from bringup.engines.world import World
from bringup.help.text import HelpSpec
from bringup.verify.probes import KnownAnswer

ENGINES = engine_names()  # from bringup/data/engines.yaml
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class TargetError(ValueError):
    """Bad usage: what is wrong and what to do."""


@dataclass
class Target:
    engine: Engine
    model: str
    spec: HelpSpec | None
    version: str | None
    answers: list[KnownAnswer] = field(default_factory=list)

    @property
    def world(self) -> World:
        """Where its launches happen (this machine, or the one a double replays)."""
        return self.engine.world()


def resolve_target(
    engine: str | None = None,
    model: str | None = None,
    scenario: Path | None = None,
    python: str | None = None,
    time_scale: float = 0.01,
    gpus: str | None = None,
) -> Target:
    """``gpus``: CUDA_VISIBLE_DEVICES for every trial of this target (e.g. "0,1"); None inherits it."""
    if gpus is not None and not re.fullmatch(
        r"\s*(GPU-[\w-]+|MIG-[\w/-]+|\d+)(\s*,\s*(GPU-[\w-]+|MIG-[\w/-]+|\d+))*\s*", gpus
    ):
        raise TargetError(f"--gpus {gpus!r}: give GPU indices or UUIDs separated by commas, e.g. 0,1")
    if scenario is not None:
        # The test double, behind the engine interface: the only place that names it.
        from bringup.engines.scenario import ScenarioLoadError, scenario_engine

        if time_scale <= 0:
            raise TargetError("--time-scale must be positive")
        try:
            eng: Engine = scenario_engine(Path(scenario), time_scale, python)
        except ScenarioLoadError as e:
            raise TargetError(f"scenario {scenario}: {e}") from e
        if engine and engine != eng.log_dialect:
            raise TargetError(
                f"--engine {engine} contradicts the scenario's engine {eng.log_dialect}; drop --engine"
            )
        eng.gpus = gpus
        answers = [KnownAnswer(p, e) for p, e in eng.world().known_answers()]
        version = eng.version()
        return Target(
            eng, model or eng.world().default_model() or "", eng.help_spec(version), version, answers
        )
    if not engine:
        raise TargetError(f"say which engine: --engine {' | '.join(ENGINES)} (or --scenario FILE)")
    if engine not in ENGINES:
        raise TargetError(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")
    if not model:
        raise TargetError("say which model: --model PATH (a model folder or a hub id such as org/name)")
    if not Path(model).exists() and not _HUB_ID.match(model):
        raise TargetError(
            f"model {model!r} is not a folder here and not a hub id (org/name); "
            "make a tiny one with `bringup testmodel DIR`"
        )
    if Path(model).exists():
        from bringup.facts.preflight import PreflightError, check_model

        try:
            check_model(Path(model))
        except PreflightError as e:
            raise TargetError(str(e)) from None
    eng = get_engine(engine, python, gpus)
    version = eng.version()
    if version is None:
        hint = engine_info(engine).install_hint or f"pip install {engine}"
        raise TargetError(
            f"{engine} is not installed for {eng.python}: install it ({hint}) or pass --python "
            "with the interpreter of the engine's environment"
        )
    spec = eng.help_spec(version)
    return Target(
        eng,
        str(Path(model).resolve()) if Path(model).exists() else model,
        spec,
        version,
        model_answers(Path(model)),
    )


def model_answers(folder: Path) -> list[KnownAnswer]:
    """Known answers written next to a model (`bringup testmodel --preset known` writes them):
    a JSON object {prompt: expected}. A model without the file has none."""
    from bringup.guard.limits import JSON_CONFIG_MAX, loads_json, read_text_limited

    f = folder / "bringup_answers.json"
    if not f.is_file():
        return []
    try:
        data = loads_json(read_text_limited(f, JSON_CONFIG_MAX, "answers file"), str(f), "answers file")
    except ValueError as e:  # InputError too: not a file, too big, nested too deep
        raise TargetError(f"{f} is not a JSON file of answers ({e}): fix or delete it") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise TargetError(f"{f} must be a JSON object of prompt -> expected answer (strings)")
    return [KnownAnswer(p, e) for p, e in data.items()]
