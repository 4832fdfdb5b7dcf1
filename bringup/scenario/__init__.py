"""The scenario engine: a test double that imitates an inference engine from a scenario file.

It accepts a real engine's flags (checked against that version's --help capture), prints that
engine's log lines, fails, hangs or serves as the scenario's rules say, and answers the OpenAI
API on loopback, so launch, log watching, probes and classification run unchanged against it.

    python -m bringup.scenario serve --scenario FILE [--time-scale X] -- ENGINE FLAGS...
    python -m bringup.scenario check FILE [-- ENGINE FLAGS...]

This module stays import-light; the server's modules load only when it starts.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the lazy names below are, for readers and type checkers
    from bringup.scenario.loader import (
        SCENARIO_DIR,
        ScenarioError,
        bundled_scenarios,
        load_scenario,
        scenario_path,
    )
    from bringup.scenario.logfmt import CLOCK_PREFIX, CLOCK_RE, parse_clock
    from bringup.scenario.schema import Scenario

__all__ = [
    "CLOCK_PREFIX",
    "CLOCK_RE",
    "SCENARIO_DIR",
    "Scenario",
    "ScenarioError",
    "bundled_scenarios",
    "load_scenario",
    "parse_clock",
    "scenario_path",
    "serve_argv",
]


_LAZY = {
    "SCENARIO_DIR": "bringup.scenario.loader",
    "ScenarioError": "bringup.scenario.loader",
    "bundled_scenarios": "bringup.scenario.loader",
    "load_scenario": "bringup.scenario.loader",
    "scenario_path": "bringup.scenario.loader",
    "Scenario": "bringup.scenario.schema",
    "CLOCK_PREFIX": "bringup.scenario.logfmt",
    "CLOCK_RE": "bringup.scenario.logfmt",
    "parse_clock": "bringup.scenario.logfmt",
}


def __getattr__(name: str) -> Any:
    """Names load on first use: `python -m bringup.scenario` must not pay for pydantic up front."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def serve_argv(
    scenario: str | Path, engine_flags: list[str], time_scale: float = 1.0, python: str | None = None
) -> list[str]:
    """The argv that launches a scenario server (engine flags include --model-path/--model, --host, --port)."""
    return [
        python or sys.executable,
        "-m",
        "bringup.scenario",
        "serve",
        "--scenario",
        str(scenario),
        "--time-scale",
        repr(float(time_scale)),
        "--",
        *engine_flags,
    ]
