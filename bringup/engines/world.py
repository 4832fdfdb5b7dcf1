"""Where an engine's launches happen: this machine in wall time, or a machine a double replays.

A real engine runs here. Its launches cost the seconds they take and hold this machine's GPUs;
doctor reads the machine, the model is its folder or hub id, a reference can be computed from its
weights, and the installed engine's own checks speak for what launches. Its user starts from the
engine's defaults, and nothing it prints is bringup's bookkeeping.

A test double replays another machine (bringup/engines/scenario.py): the machine's facts, a
clock of simulated seconds, a model that exists only in the scenario, the baseline its user starts
from. It says so by handing out another `World`. The engine interface carries this one method
(`Engine.world()`) for all of it, and the core asks the world the question it has (whose GPUs,
whose clock, is there a reference), never whether it drives a double.
"""

from __future__ import annotations

from typing import Any

from bringup.core.clock import Clock, WallClock


class World:
    """This machine, in wall time: what every real engine's launches happen in."""

    # How the load generator counts the tokens of an answer ("auto": the model's tokenizer).
    tokenizer_kind: str = "auto"
    # The launches hold this machine's GPUs (Ray assigns them), not a double's stand-ins.
    gpus_here: bool = True
    # The model's weights are here, so a reference (transformers on the same weights) can be run.
    weights_here: bool = True
    # The installed engine is what launches, so its own checks (bringup/dryrun/) speak for launches.
    installed_engine_launches: bool = True

    def clock(self) -> Clock:
        """A fresh clock for a session of launches: wall time."""
        return WallClock()

    def clock_scale(self) -> float:
        """Real seconds per engine second: the trial's deadlines (launch timeout, hang timeout) are
        in engine seconds and run this much faster or slower in real time."""
        return 1.0

    def launch_seconds(self, lines: list[str]) -> float | None:
        """Seconds a launch stands for, when its log says (None: the wall time it took)."""
        return None

    def bookkeeping(self, line: str) -> bool:
        """A line printed for bringup's accounting, not about the server's work (a double's clock):
        never evidence of what the server was doing."""
        return False

    def machine_facts(self) -> dict[str, Any] | None:
        """Facts about the machine and model that replace doctor's (None: read the real ones)."""
        return None

    def identity_scope(self) -> str | None:
        """A name that keeps journal priors of a replayed machine apart from real ones."""
        return None

    def model_identity(self, model: str) -> str | None:
        """The model's identity for the journal, where the world knows better than its folder."""
        return None

    def default_model(self) -> str | None:
        """The model launched when none is named (here: none, the user names one)."""
        return None

    def known_answers(self) -> list[tuple[str, str]]:
        """(prompt, expected) pairs the model is known to answer."""
        return []

    def default_baseline(self) -> str:
        """The flags a user starts from when none are given (here: the engine's defaults)."""
        return ""


HERE = World()  # stateless: one for every real engine
