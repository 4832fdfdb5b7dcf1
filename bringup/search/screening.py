"""Screening: a cheap launch (dummy weights, fewer layers) before a full one, and when it pays.

A screen finds kernel failures in a fraction of a full launch but cannot judge memory or
answers. The strategy asks this policy whether the next candidate is worth screening first;
the run only carries the decision out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from bringup.core.datafiles import phase_index
from bringup.help.text import HelpSpec
from bringup.record.results import Attempt

ScreenMode = Literal["auto", "always", "never"]
LONG_LAUNCH_S = 300  # a full launch this long makes even a memory-only change worth a screen
BIG_MODEL_GIB = 20
GAMBLE = 0.6  # below this chance of success, a full launch is a gamble worth screening
# What a screen costs before one has been run here: it repeats the engine's start-up (spawn,
# imports, distributed init, a dummy load, profiling a few layers), which takes 40-60 s in the
# shipped scenarios' timing (taken from real logs) and as much on the vLLM CPU build here.
SCREEN_COST_S = 60.0


def screen_flags(spec: HelpSpec | None, layers: int) -> dict[str, Any] | None:
    """The flags that turn a launch into a screen on this engine version, or None (cannot)."""
    if spec is None:
        return None
    lf = spec.get("--load-format")
    if lf is None or (lf.choices and "dummy" not in lf.choices):
        return None
    shrink = json.dumps({"num_hidden_layers": layers})
    for flag in ("--json-model-override-args", "--hf-overrides"):
        if spec.get(flag) is not None:
            return {"--load-format": "dummy", flag: shrink}
    return {"--load-format": "dummy"}


def one_gpu_screen(facts: dict[str, Any], layers: int, parallel_flags: list[str]) -> dict[str, Any]:
    """The parallel sizes that put a screen on one GPU, when its few layers fit there with room to
    spare (dummy weights: the layers' share of the checkpoint), so that screens of a many-GPU launch
    run side by side on a machine's GPUs. Empty: it does not fit, or the facts do not say. A
    screen on one GPU cannot show a tensor-parallel failure (NCCL, custom all-reduce): the full
    launch still does."""
    try:
        weights, total, mem = (
            float(facts[k]) for k in ("model.weights_gib", "model.layers", "gpu.memory_gib")
        )
    except (KeyError, TypeError, ValueError):
        return {}
    if not parallel_flags or total <= 0 or weights * min(layers, total) / total > 0.5 * mem:
        return {}
    return {flag: 1 for flag in parallel_flags}


@dataclass
class ScreeningPolicy:
    mode: ScreenMode
    flags: dict[str, Any] | None  # None: this engine cannot screen
    weights_gib: float
    simulated: bool  # launch costs are the engine's simulated seconds
    # Screens run beside other trials on a GPU or so each while a full launch takes the machine:
    # then a screen costs a sliver of a full launch, and it pays before any full launch.
    beside: bool = False

    @property
    def big_model(self) -> bool:
        """Big enough that a full launch is long and a screen's few layers save most of it."""
        return self.weights_gib >= BIG_MODEL_GIB

    def cost_s(self, a: Attempt) -> float:
        """What a launch cost: the engine's simulated seconds, or the real ones."""
        return (a.simulated_s or 0.0) if self.simulated else a.wall_s

    def worth_it(self, p_success: float, only_numeric: bool, history: list[Attempt]) -> bool:
        """Screening finds kernel failures in a fraction of a full launch, but cannot judge
        memory: worth it for big models once a full launch has shown how memory behaves, and
        while the next candidate is a gamble."""
        if self.mode == "never" or self.flags is None:
            return False
        if self.mode == "always":
            return True
        full = [a for a in history if a.purpose == "search" and a.status != "cancelled"]
        if any(a.failure_class == "wrong-output" for a in full):
            return False  # dummy weights cannot check known answers: a screen would pass blindly
        if self.beside:
            return self._beside_worth_it(p_success, only_numeric, full, history)
        if only_numeric and max((self.cost_s(a) for a in full), default=0.0) < LONG_LAUNCH_S:
            # Memory fractions and batch sizes: a screen (fewer layers, less memory) passes them
            # blindly and only catches a kernel failure the change did not cause; worth a launch
            # only where a full launch is long (the seeds' 400 GB model: 10 minutes and more).
            return False
        if not (self.big_model and bool(full) and p_success < GAMBLE):
            return False
        # A screen saves what a failing full launch would have cost beyond the screen itself. The
        # last full launch's failure is the measure of what the next one costs: one that failed
        # within a screen's time (a hang in distributed start-up, a backend refused before the
        # weights load) fails as cheaply as a screen, and a screen that passes costs a launch more.
        failed = [a for a in full if a.status != "works"]
        if not failed:
            return True
        if failed[-1].phase and phase_index(failed[-1].phase) < phase_index("load-weights"):
            # A screen skips the weights and most layers, nothing before them: a failure (or a hang
            # and its deadline) in distributed start-up costs a screen as much as a full launch.
            return False
        return (1 - p_success) * self.cost_s(failed[-1]) > self._screen_cost(history)

    def _screen_cost(self, history: list[Attempt]) -> float:
        screens = self._screen_spans(history)
        return min(screens) if screens else SCREEN_COST_S

    def _screen_spans(self, history: list[Attempt]) -> list[float]:
        """What the screens that ran to their end took (a cancelled one was cut short)."""
        return [
            self.cost_s(a)
            for a in history
            if a.purpose == "screen" and a.status != "cancelled" and self.cost_s(a) > 0
        ]

    def remaining_s(self, elapsed: float, history: list[Attempt]) -> float:
        """How much longer a screen that has run ``elapsed`` seconds is expected to run: the mean
        of what the screens that ran longer than that had left (before any ran: the prior cost of
        a screen). One that has outlasted every screen so far (slow, or hanging until the hang
        deadline) is expected to run on as long again as it is overdue: nothing else says how long."""
        spans = self._screen_spans(history) or [SCREEN_COST_S]
        left = [d - elapsed for d in spans if d > elapsed]
        return sum(left) / len(left) if left else elapsed - max(spans)

    def _beside_worth_it(
        self, p_success: float, only_numeric: bool, full: list[Attempt], history: list[Attempt]
    ) -> bool:
        """Screens on one GPU beside other trials: no full launch needs to have shown memory first
        (a screen on a GPU of its own cannot judge it anyway), and the same price rule holds: a
        gamble before any full launch has failed, then what a failing launch costs beyond a screen."""
        if only_numeric:
            return False
        failed = [a for a in full if a.status != "works"]
        if not failed:
            return p_success < GAMBLE
        return (1 - p_success) * self.cost_s(failed[-1]) > self._screen_cost(history)
