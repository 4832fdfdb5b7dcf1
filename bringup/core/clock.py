"""The clock a session runs on: wall time, or the simulated seconds a test double's launches stand for.

A real engine's launch costs the seconds it takes. A double that replays a slow machine (the
scenario engine) says how long each of its launches stands for, and a session's clock moves by
those seconds instead: a trial starts at the clock's time when it was submitted and ends its
simulated seconds later, trials that overlap in real time overlap on this clock too, and the
clock moves on only when the next trial to end on it is known.

The engine's world hands its session a fresh clock (`Engine.world().clock()`), and the executors, the tuner and
the reports read time through it, so that no core module asks whether it drives a double: each
difference between the two kinds of time is a method here, written once for each.
"""

from __future__ import annotations

import time
from typing import Literal, Protocol


class Clock(Protocol):
    """A session's clock. Readings are seconds since the clock was made."""

    kind: Literal["wall", "simulated"]  # what its readings count (tune.json's ``clock``)
    # Launch costs are the double's simulated seconds (what search.screening.ScreeningPolicy
    # weighs screens by), not the seconds they took.
    simulated: bool

    def now(self) -> float:
        """The clock's reading."""
        ...

    def end(self, start: float, seconds: float | None, cancelled_at: float | None = None) -> float:
        """When a trial that started at ``start`` ended on this clock: ``seconds`` is what it stands
        for (None: what it took), ``cancelled_at`` the reading when it was cancelled, if it was."""
        ...

    def reach(self, t: float) -> None:
        """A trial that ended at ``t`` was handed back: the clock is at least there now."""
        ...

    def knows_next_end(self, finished: int) -> bool:
        """With ``finished`` trials back and others still running, is the next to end known?"""
        ...

    def wait_s(self, until: float | None) -> float | None:
        """Real seconds to wait for a trial in flight before waking at reading ``until`` (None:
        as long as it takes)."""
        ...

    def woken(self, until: float | None) -> bool:
        """Has a wait for trials in flight reached its wake-up reading ``until``?"""
        ...

    def due(self, earliest: float, until: float | None) -> bool:
        """Does the earliest finished trial (ending at ``earliest``) come back before the wake-up
        at ``until`` (None: no wake-up)? If not, the clock moves on to ``until``."""
        ...

    def hours(self, seconds: float) -> float | None:
        """``seconds`` on this clock as the simulated hours a report shows (None: wall time)."""
        ...

    def cut_at_cancel(self, seconds: float) -> float | None:
        """A cancelled trial that ran ``seconds`` on this clock until its cancel: the seconds it
        stands for, when the clock ends it there (None: it stands for what it did)."""
        ...

    def of_real(self, real_s: float) -> float | None:
        """Real seconds of work done against the engine (a workload against its server) as seconds
        on this clock (None: they are what they took)."""
        ...


class WallClock:
    """Real time: a trial ends when it comes back, and the clock moves by itself."""

    kind: Literal["wall", "simulated"] = "wall"
    simulated = False

    def __init__(self) -> None:
        self._t0 = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._t0

    def end(self, start: float, seconds: float | None, cancelled_at: float | None = None) -> float:
        return self.now()

    def reach(self, t: float) -> None:
        pass

    def knows_next_end(self, finished: int) -> bool:
        return finished > 0  # the first trial to come back is the first to end

    def wait_s(self, until: float | None) -> float | None:
        return None if until is None else max(0.0, until - self.now())

    def woken(self, until: float | None) -> bool:
        return until is not None and self.now() >= until

    def due(self, earliest: float, until: float | None) -> bool:
        return True  # it came back: it has ended by now

    def hours(self, seconds: float) -> float | None:
        return None

    def cut_at_cancel(self, seconds: float) -> float | None:
        return None  # its outcome is what it did until its teardown

    def of_real(self, real_s: float) -> float | None:
        return None


class SimulatedClock:
    """The seconds a double's launches stand for: a trial ends at its start plus those seconds, and
    the clock moves only to the end of the trial handed back (or to a wake-up)."""

    kind: Literal["wall", "simulated"] = "simulated"
    simulated = True

    def __init__(self, scale: float = 1.0) -> None:
        self._now = 0.0
        self.scale = scale  # real seconds per simulated second (the double's time scale)

    def now(self) -> float:
        return self._now

    def end(self, start: float, seconds: float | None, cancelled_at: float | None = None) -> float:
        return cancelled_at if cancelled_at is not None else start + (seconds or 0.0)

    def reach(self, t: float) -> None:
        self._now = max(self._now, t)

    def knows_next_end(self, finished: int) -> bool:
        # Every trial in flight must finish (in real time) before the earliest simulated end is
        # known: one still running may end earlier on this clock than one already back.
        return False

    def wait_s(self, until: float | None) -> float | None:
        return None  # the clock does not move while trials run in real time

    def woken(self, until: float | None) -> bool:
        return False

    def due(self, earliest: float, until: float | None) -> bool:
        if until is None or earliest <= until:
            return True
        self.reach(until)  # a wake-up with nothing new: the session looks again at what is in flight
        return False

    def hours(self, seconds: float) -> float | None:
        return seconds / 3600

    def cut_at_cancel(self, seconds: float) -> float | None:
        # The trial ran on in real time; on this clock it ended at the cancel, and what it would
        # have shown after it is not known at that time.
        return seconds

    def of_real(self, real_s: float) -> float | None:
        return real_s / self.scale  # the double serves ``scale`` times faster than it stands for


def clock_for(simulated: bool) -> Clock:
    """A fresh clock of either kind (what tests and benchmarks that drive no engine ask for)."""
    return SimulatedClock() if simulated else WallClock()
