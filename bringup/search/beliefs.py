"""Beliefs about what blocks a bring-up: one distribution over culprits per distinct failure.

A bring-up is an onion: the baseline holds several faults, and each launch shows the earliest one
its configuration still triggers. So the search keeps one :class:`Blocker` per distinct failure it
has seen (its class, phase and root line), and for each a posterior over *culprits*:

- a single condition ("--kv-cache-dtype is fp8_e4m3", "--gpu-memory-utilization is at least
  0.95"): the failure strikes while it holds, and changing it cures that failure;
- a pair of conditions, either of which makes it strike: a fix that needs two changes together
  (a variable and a flag), which no single change cures;
- ``outside``: nothing the search can change (the model, the machine).

Every later launch updates every blocker through a likelihood, never a deletion: a launch that
showed the failure again under a change lowers that change (a pair holding it keeps its weight);
one that went past the failure's phase without it lowers every culprit it still held (so the
change that cured it is kept in later candidates: progress); one that died earlier says nothing.
One that died in the same phase of another failure lowers what it held once per other failure: the
other failure struck first there, and a second launch where it strikes first again is the same
order seen twice, not a second witness.
Only the engine's own refusals and the hardware facts rule a level out outright, and those live
in the strategy, not here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from bringup.knowledge.conditions import as_number

# Likelihoods of what a launch showed, under a culprit that held in it or did not.
L_FIRED_NOT_HELD = 0.08  # the failure came back although the culprit was changed away
L_ABSENT_HELD = 0.04  # the launch went past the failure's phase although the culprit still held
L_SAME_PHASE_OTHER = 0.35  # another failure in the same phase: this one may be masked by it
# the level of a factor that cannot act at a launch's other levels (Strategy.mark_inert): a
# condition on it never holds there, and it is no level to widen a condition to
INERT = "<inert>"
PAIR_WEIGHT = 0.12  # a fix that needs two changes, against one that needs one
PAIR_TOP = 7  # pairs are formed among this many strongest single culprits
MIN_WEIGHT = 0.004  # a factor the failure does not name at all is still a (weak) culprit
W_FAMILY = 0.8  # a level of the same kernel family failed alike: they likely share the fault
W_OTHER_LEVEL = 0.3  # another level of the factor failed alike


@dataclass(frozen=True)
class Condition:
    """A factor's effective level is ``value`` (op eq), or at least / at most a number."""

    factor: str
    value: str
    op: str = "eq"  # eq | ge | le

    def holds(self, levels: Mapping[str, str]) -> bool:
        have = levels.get(self.factor)
        if have is None:
            return False
        if self.op == "eq":
            return have == self.value
        if self.op == "in":
            return have in self.value.split("|")
        a, b = as_number(have), as_number(self.value)
        if a is None or b is None:
            return False
        return a >= b - 1e-9 if self.op == "ge" else a <= b + 1e-9

    def describe(self) -> str:
        if self.op == "in":
            return f"{self.factor} in {{{self.value.replace('|', ', ')}}}"
        sym = {"eq": "=", "ge": ">=", "le": "<="}[self.op]
        return f"{self.factor}{sym}{self.value}"

    def widened(self, level: str) -> Condition | None:
        """This condition grown to take in another level of its factor (levels that fail together:
        one kernel family, one bug); None for numbers, which thresholds cover."""
        if (
            self.op not in ("eq", "in")
            or as_number(self.value.split("|")[0]) is not None
            or as_number(level) is not None
        ):
            return None
        have = set(self.value.split("|"))
        if level in have:
            return None
        return Condition(self.factor, "|".join(sorted(have | {level})), "in")

    def family_of(self, level: str) -> bool:
        """Another level shares this one's family (the first word of its name: flashmla_kv, flashmla_sparse)."""
        fam = {v.split("_")[0] for v in self.value.split("|") if len(v.split("_")[0]) > 2}
        return level.split("_")[0] in fam


@dataclass(frozen=True)
class Culprit:
    """One hypothesis: the failure strikes while any of ``conds`` holds (empty: outside the space)."""

    conds: tuple[Condition, ...]

    def held(self, levels: Mapping[str, str]) -> bool:
        return not self.conds or any(c.holds(levels) for c in self.conds)

    @property
    def outside(self) -> bool:
        return not self.conds

    def describe(self) -> str:
        if not self.conds:
            return "outside the space (the model, the machine)"
        return (
            " and ".join(c.describe() for c in self.conds)
            if len(self.conds) > 1
            else self.conds[0].describe()
        )


@dataclass
class Blocker:
    """A distinct failure and the posterior over what causes it."""

    key: str
    failure_class: str
    phase_rank: int  # the phase it strikes in (phase_index); serving failures rank after start-up
    first_seen: int  # launch number
    evidence: str  # its root line, for the report
    post: dict[Culprit, float] = field(default_factory=dict)
    seen: int = 1
    # (the other failure, a culprit it masked this one under): counted once (update)
    masked_by: set[tuple[str, Culprit]] = field(default_factory=set)

    def normalise(self) -> None:
        total = sum(self.post.values()) or 1.0
        for k in self.post:
            self.post[k] /= total

    def p_avoid(self, levels: Mapping[str, str]) -> float:
        """The chance a launch with these effective levels does not show this failure."""
        return sum(p for c, p in self.post.items() if not c.held(levels))

    def outside_mass(self) -> float:
        return sum(p for c, p in self.post.items() if c.outside)

    def mass_of(self, factor: str) -> float:
        """How much of the belief involves a factor (alone or in a pair)."""
        return sum(p for c, p in self.post.items() if any(x.factor == factor for x in c.conds))

    def top(self, n: int = 3) -> list[tuple[Culprit, float]]:
        return sorted(self.post.items(), key=lambda kv: -kv[1])[:n]

    def update(self, levels: Mapping[str, str], shown: str, other: str | None = None) -> None:
        """A launch with ``levels`` showed this failure (``fired``), went past it (``absent``), or
        died in its phase of something else (``same-phase``, ``other`` the key of what it died of);
        ``masked`` says nothing.

        Of ``same-phase`` launches, only the first that held a culprit beside one other failure
        lowers it: which of two failures of one phase strikes first is the engine's order, the same
        at every launch that holds both, so the second such launch is no new witness against the
        culprit (dev2: an NCCL error met after six launches of a hang had lowered every setting the
        hang's launches shared by 0.35 per launch, and the one change that revealed it took the
        blame)."""
        if shown == "masked":
            return
        if shown == "fired":
            self._widen(levels)
        for c in self.post:
            held = c.held(levels)
            if shown == "fired":
                like = 1.0 if held else L_FIRED_NOT_HELD
            elif shown == "absent":
                like = L_ABSENT_HELD if held else 1.0
            elif not held:
                like = 1.0
            elif other is None:
                like = L_SAME_PHASE_OTHER
            else:
                like = 1.0 if (other, c) in self.masked_by else L_SAME_PHASE_OTHER
                self.masked_by.add((other, c))
            self.post[c] *= like
        self.normalise()

    def _widen(self, levels: Mapping[str, str]) -> None:
        """The failure came back after a level of a factor was changed: either that factor is not
        the cause, or the new level fails as the old did. The second gets its share of the belief,
        larger within one kernel family."""
        grown: dict[Culprit, float] = {}
        for c, p in self.post.items():
            if len(c.conds) != 1 or c.held(levels):
                continue
            cond = c.conds[0]
            if levels.get(cond.factor) == INERT:
                continue
            w = cond.widened(levels.get(cond.factor, ""))
            if w is None:
                continue
            share = W_FAMILY if cond.family_of(levels[cond.factor]) else W_OTHER_LEVEL
            grown[Culprit((w,))] = grown.get(Culprit((w,)), 0.0) + p * share
        for c, p in grown.items():
            self.post[c] = self.post.get(c, 0.0) + p


def new_blocker(
    key: str,
    failure_class: str,
    phase_rank: int,
    launch: int,
    evidence: str,
    weights: Mapping[Condition, float],
    outside: float,
) -> Blocker:
    """A blocker first seen now: singles weighted by relevance (every condition given), pairs among
    the strongest, and ``outside``."""
    post: dict[Culprit, float] = {}
    for cond, w in weights.items():
        post[Culprit((cond,))] = max(w, MIN_WEIGHT)
    strongest = sorted(weights.items(), key=lambda kv: -kv[1])[:PAIR_TOP]
    for i, (a, wa) in enumerate(strongest):
        for c, wc in strongest[i + 1 :]:
            if a.factor != c.factor:
                post[Culprit((a, c))] = PAIR_WEIGHT * (wa * wc) ** 0.5
    post[Culprit(())] = outside
    blocker = Blocker(key, failure_class, phase_rank, launch, evidence, post)
    blocker.normalise()
    return blocker


def replay(blocker: Blocker, history: list[tuple[Mapping[str, str], Callable[[Blocker], str]]]) -> None:
    """Apply earlier launches to a blocker first seen later (what they showed of it)."""
    for levels, shown in history:
        blocker.update(levels, shown(blocker))
