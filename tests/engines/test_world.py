"""Where launches happen: a real engine's world is this machine, the double's is the one it replays,
and the core asks the world its question (whose clock, whose GPUs, is there a reference) instead of
asking whether it drives a double."""

from __future__ import annotations

import re
from pathlib import Path

from bringup.core.clock import SimulatedClock, WallClock
from bringup.engines.base import Engine
from bringup.engines.scenario import Replayed
from bringup.engines.targets import Target, resolve_target
from bringup.engines.world import World
from bringup.session.prepare import dry_run, run_reference, screening_policy
from bringup.session.settings import RunSettings
from tests.paths import ROOT

SCENARIOS = ROOT / "bringup" / "data" / "scenarios"
# What used to be the double's hooks on Engine: they belong to its world now.
MOVED = (
    "simulated",
    "tokenizer_kind",
    "machine_facts",
    "identity_scope",
    "model_identity",
    "default_model",
    "known_answers",
    "default_baseline",
    "clock",
    "clock_scale",
    "launch_seconds",
    "bookkeeping",
)


def test_a_real_engine_launches_on_this_machine_in_wall_time():
    w = Engine(name="vllm").world()
    assert isinstance(w.clock(), WallClock) and w.clock_scale() == 1.0
    assert w.gpus_here and w.weights_here and w.installed_engine_launches
    assert w.machine_facts() is None and w.identity_scope() is None and w.default_model() is None
    assert w.launch_seconds(["t=12.0"]) is None and not w.bookkeeping("anything")


def test_a_scenario_replays_its_machine_model_and_clock():
    t = resolve_target(scenario=SCENARIOS / "glm5-nvfp4-sm120.yaml", time_scale=0.02)
    w = t.world
    assert isinstance(w, Replayed) and isinstance(w.clock(), SimulatedClock)
    assert w.clock_scale() == 0.02
    assert not (w.gpus_here or w.weights_here or w.installed_engine_launches)
    facts = w.machine_facts()
    assert facts is not None and facts.get("gpu.count") == 8  # the seeds' machine, not this one
    assert t.model == w.default_model() and w.identity_scope() == f"scenario:{w.scenario.name}"
    assert [(a.prompt, a.expected) for a in t.answers] == w.known_answers() != []


def test_the_engine_interface_has_no_hook_only_the_double_uses():
    assert [h for h in MOVED if hasattr(Engine, h)] == []


def test_no_product_module_asks_whether_it_drives_a_double():
    asks = re.compile(r"engine(\(\))?\.simulated\b|\bisinstance\([^)]*ScenarioEngine")
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "bringup").rglob("*.py")
        if "scenario" not in p.parts[-2:] and asks.search(p.read_text())
    ]
    assert offenders == []


class _Elsewhere(World):
    """A world whose weights, GPUs and engine are not here (what a double says), on wall time."""

    weights_here = False
    gpus_here = False
    installed_engine_launches = False


class _Remote(Engine):
    def world(self) -> World:
        return _Elsewhere()


def test_the_session_takes_its_answers_from_the_world(tmp_path: Path):
    s = RunSettings()
    here = Target(Engine(name="vllm"), "m", None, None)
    there = Target(_Remote(name="vllm"), "m", None, None)
    ref, why = run_reference(s, there, {}, [], tmp_path, journal=True)
    assert ref is None and "no reference" in why
    # On a GPU target `--dry-run auto` asks the installed engine, unless it is not what launches.
    auto = RunSettings(dry_run="auto")
    assert dry_run(auto, there, {"device": "cuda"}, strategy=None) is None  # type: ignore[arg-type]
    # Launch costs are weighed on the world's clock: wall seconds on both (the double's simulated
    # seconds come with its clock, not with where it runs).
    assert not screening_policy(s, here, {}).simulated and not screening_policy(s, there, {}).simulated
