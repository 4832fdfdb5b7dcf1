"""A test double for the search: a world of faults answered in-process, with no engine.

Each fault has a trigger (a predicate over a candidate's flags and environment) and the outcome a
launch that hits it shows (class, phase, root line...). A launch shows the fault of the earliest
phase among those it triggers (an onion: an earlier failure hides a later one); a launch that
triggers none works. ``solve`` drives a Strategy against a world as ``Run`` does (observe, then ask
for the next launch) and returns every launch, so a test can assert the exact path and a bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bringup.core.candidate import Candidate
from bringup.core.datafiles import phase_index
from bringup.observe.outcome import Outcome
from bringup.search.strategy import Strategy
from tests.paths import DATA

Trigger = Callable[[dict[str, Any], dict[str, str]], bool]


@dataclass
class Fault:
    name: str
    when: Trigger
    failure_class: str
    phase: str
    root: str
    implicates: list[str] = field(default_factory=list)
    signature: str | None = None
    evidence: list[str] = field(default_factory=list)
    hint: str | None = None
    frames: list[str] = field(default_factory=list)  # the root exception's, innermost last
    remedies: list[Any] = field(default_factory=list)  # observe.remedies.Remedy

    def outcome(self) -> Outcome:
        return Outcome(
            status="fails",
            failure_class=self.failure_class,
            phase=self.phase,
            root_exception=self.root,
            evidence=[self.root, *self.evidence],
            implicates=list(self.implicates),
            signature=self.signature,
            hint=self.hint,
            frames=list(self.frames),
            remedies=list(self.remedies),
        )


@dataclass
class World:
    faults: list[Fault]

    def answer(self, cand: Candidate) -> Outcome:
        flags, env = cand.flag_dict, cand.env_dict
        hit = [f for f in self.faults if f.when(flags, env)]
        if not hit:
            return Outcome(status="works")
        return min(hit, key=lambda f: phase_index(f.phase)).outcome()


def solve(s: Strategy, world: World, budget: int = 12) -> list[tuple[Candidate, Outcome]]:
    """Launch what the strategy proposes until one works or it proposes nothing."""
    out: list[tuple[Candidate, Outcome]] = []
    while len(out) < budget:
        d = s.next_launch([], [], set())
        if d.candidate is None:
            break
        o = world.answer(d.candidate)
        s.observe(d.candidate, o)
        out.append((d.candidate, o))
        if o.status == "works":
            break
    return out


@dataclass
class LogFault(Fault):
    """A fault whose outcome is what bringup's own classifier reads in a real log
    (tests/data/logs), with the effective configuration the engine would print for the launch
    (``effective``: dest -> the value of the launched flag, or the engine's default)."""

    log: str = ""
    effective: dict[str, tuple[str, str]] = field(default_factory=dict)  # dest -> (flag, default)

    def outcome_for(self, flags: dict[str, Any]) -> Outcome:

        from bringup.engines.explain import explain_file

        o = explain_file(DATA / "logs" / self.log)
        o.effective = {dest: str(flags.get(flag) or dflt) for dest, (flag, dflt) in self.effective.items()}
        return o


def log_fault(name: str, when: Trigger, log: str, **effective: tuple[str, str]) -> LogFault:
    return LogFault(name, when, "", "", "", log=log, effective=dict(effective))


@dataclass
class LogWorld(World):
    """A world whose faults are real logs: a launch shows the earliest-phase fault it triggers,
    as the real classifier reads it (the phase comes from the log, not from the test)."""

    def answer(self, cand: Candidate) -> Outcome:
        flags, env = cand.flag_dict, cand.env_dict
        hit = [f.outcome_for(flags) for f in self.faults if isinstance(f, LogFault) and f.when(flags, env)]
        if not hit:
            return Outcome(status="works")
        return min(hit, key=lambda o: phase_index(o.phase or "spawn"))
