"""GPU slots and ports for trials that run at once.

Trials that run concurrently must not share a GPU or a port: each gets a disjoint set of GPU
indices (its ``CUDA_VISIBLE_DEVICES``) and a port that no other trial of this run holds. A GPU
whose memory a torn-down server did not give back is set aside: no trial is launched into it
(the next one would fail for the machine's reason, not its own) until a reading shows it free.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

from bringup.guard import ranges
from bringup.trial.process import port_is_free


class SlotError(ValueError):
    """A parallel setting that cannot work on this machine: what is wrong and what to do."""


@dataclass
class GpuSlots:
    """The GPUs a run may use, which of them are taken, and which are held by a leftover."""

    gpus: list[str]  # CUDA_VISIBLE_DEVICES entries (indices or UUIDs), in the order given
    busy: set[str] = field(default_factory=set)
    held: set[str] = field(default_factory=set)  # memory not given back: not reused until free

    @property
    def total(self) -> int:
        return len(self.gpus)

    def free(self) -> list[str]:
        return [g for g in self.gpus if g not in self.busy and g not in self.held]

    def fits(self, need: int) -> bool:
        """Could a trial that needs ``need`` GPUs start now?"""
        return need == 0 or len(self.free()) >= need

    def ever_fits(self, need: int) -> bool:
        """Could it start on this machine at all (once the others finish)?"""
        return need <= len(self.gpus)

    def acquire(self, need: int) -> list[str]:
        """The lowest free GPUs (neighbours share a switch or NVLink more often than not)."""
        free = self.free()
        if len(free) < need:
            raise SlotError(f"{need} GPUs asked, {len(free)} free")
        got = free[:need]
        self.busy.update(got)
        return got

    def release(self, gpus: list[str], held: list[str] | None = None) -> None:
        """Give GPUs back; those in ``held`` still hold a leftover's memory and stay out."""
        self.busy.difference_update(gpus)
        self.held.update(held or [])

    def unhold(self, gpus: list[str]) -> None:
        self.held.difference_update(gpus)


def parse_gpus(value: str | None, count: int | None) -> list[str]:
    """The run's GPUs: ``--gpus 0,1`` as given, else every GPU the machine has (0..count-1)."""
    if value:
        items = [g.strip() for g in value.split(",") if g.strip()]
        if len(set(items)) != len(items):
            raise SlotError(f"--gpus {value!r} names a GPU twice")
        return items
    return [str(i) for i in range(count or 0)]


def parallel_width(value: str, gpus: int) -> int:
    """How many trials at once, at most: ``auto`` is one per GPU (a trial that needs several GPUs
    takes several of them, so fewer run; a machine without GPUs runs one at a time), a number is
    taken as asked."""
    if value == "auto":
        return max(1, gpus)
    try:
        n = int(value)
    except ValueError:
        raise SlotError(
            f"--parallel {value!r}: give a number of trials at once (1, 2, ...) or auto"
        ) from None
    if (bad := ranges.PARALLEL.problem(n)) is not None:
        raise SlotError(f"--parallel {value}: {bad}")
    return n


class PortPool:
    """Free ports, each handed to one trial at a time. They are drawn below the kernel's ephemeral
    range (32768 and up on Linux), where client connections take their local ports: a port picked
    there could be taken by a probe's own connection before the server binds it."""

    LOW, HIGH = 20000, 32000

    def __init__(self, host: str = "127.0.0.1", seed: int | None = None) -> None:
        self.host = host
        self.taken: set[int] = set()
        self._lock = threading.Lock()
        self._rng = random.Random(seed)

    def take(self) -> int:
        with self._lock:
            for _ in range(200):
                port = self._rng.randint(self.LOW, self.HIGH)
                if port not in self.taken and port_is_free(port, self.host):
                    self.taken.add(port)
                    return port
        raise SlotError(f"no free port between {self.LOW} and {self.HIGH} after 200 tries")

    def give(self, port: int) -> None:
        with self._lock:
            self.taken.discard(port)
