"""The next candidate: the untried configuration most likely to work, near those that got furthest.

Candidates are grown from the baseline and from every configuration already launched (so a change
that got a launch past one failure is where the next one starts: progress is kept), one change at
a time, up to three, by a beam search over the factors the beliefs implicate (plus those to put
back). Each is scored by the log of its chance of working (every blocker avoided, no new failure
brought by the levels it changes) minus a cost per change from the baseline and the levels' own
costs (no CUDA graphs is slow), so the smallest explainable fix wins a tie.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bringup.core.candidate import Candidate, FlagValue
from bringup.observe.effective import normalise
from bringup.search.beliefs import INERT

if TYPE_CHECKING:
    from bringup.search.space import Factor
    from bringup.search.strategy import Observation, Strategy

BEAM = 6
DEPTH = 3
MIN_MASS = 0.02  # a factor carrying this much of some blocker's belief is worth changing
MAX_STARTS = 8
P_EXCLUDED = 0.97
ANCHOR_SUSPECT = 0.25  # a change this much suspected of its launch's own failure is not kept free


@dataclass
class Proposal:
    candidate: Candidate
    p_success: float
    reasons: list[str]
    predicted: dict[str, str]
    key: str

    def changes(self, baseline: Candidate) -> str:
        return self.candidate.describe_diff(baseline)


Config = dict[str, FlagValue | None]


def _same(a: FlagValue | None, b: FlagValue | None) -> bool:
    return normalise(a) == normalise(b) if a is not None and b is not None else a is b


def _progress(s: Strategy) -> list[Observation]:
    """The observations that say how far a configuration got: launches, screens, the journal's, and
    the engine's own refusals (a refused configuration got past what it no longer shows)."""
    return [o for o in s.observations if o.source in ("launch", "screen", "journal", "dry-run")]


def _config(o: Observation, factors: dict[str, Factor]) -> Config:
    """An observed candidate's level of every factor."""
    flags, env = o.candidate.flag_dict, o.candidate.env_dict
    return {n: f.level_in(flags, env) for n, f in factors.items()}


def _furthest(s: Strategy, sc: _Scorer) -> list[Config]:
    """The configurations of the launches that got furthest, when one got further than another:
    what a person keeps while they go on. Changes are counted from the nearest of these or the
    baseline, so keeping a launch's progress costs nothing and undoing a change that got past a
    failure costs as much as making one (a three-mistake bring-up dropped two of the user's
    settings, got a phase further, then put one back because only the other was a suspect; the
    minimal fix is still found after validation, by minimizing)."""
    obs = _progress(s)
    if not obs or max(o.reach for o in obs) <= min(o.reach for o in obs):
        return []
    top = max(o.reach for o in obs)
    shown = {b.key: b for b in s.blockers}
    out = []
    for o in (o for o in obs if o.reach == top):
        cfg = _config(o, sc.factors)
        b = shown.get(o.blocker)
        changed = [n for n in sc.factors if not _same(cfg[n], sc.base[n])]
        # a launch whose own failure its changes are suspects of (tp 1 got past the NCCL hang by
        # skipping NCCL, and ran out of memory) is no progress to keep
        if not (b is not None and any(b.mass_of(n) >= ANCHOR_SUSPECT for n in changed)):
            out.append(cfg)
    return out


class _Scorer:
    def __init__(self, s: Strategy):
        self.s = s
        self.factors = {f.name: f for f in s.space.factors}
        self.base: Config = {n: s.base_level(f) for n, f in self.factors.items()}
        self.options: dict[str, list[FlagValue | None]] = {}
        self.risk: dict[tuple[str, str], float] = {}
        self.preferred: set[tuple[str, str]] = set()  # knowledge prefers it: no cost to change to it
        self.judged: set[str] = (
            set()
        )  # factors knowledge has a verdict on (worth changing before any failure)
        for n, f in self.factors.items():
            opts: list[FlagValue | None] = []
            seen: set[str] = set()
            cand_levels = (
                [self.base[n]] if n in s.frozen else [self.base[n], None, *s.advised.get(n, []), *f.levels]
            )
            for lv in cand_levels:
                if f.kind == "switch" and lv not in (None, True) and lv is not self.base[n]:
                    continue
                e = s.eff(f, lv)
                if e in seen:
                    continue
                r = s.risk(f, lv)
                self.risk[(n, e)] = r
                kinds = {v.kind for v in s.verdicts(f, lv)}
                if kinds:
                    self.judged.add(n)
                if "preferred" in kinds:
                    self.preferred.add((n, e))
                if r >= P_EXCLUDED - 1e-9 and not _same(lv, self.base[n]):
                    continue
                seen.add(e)
                opts.append(lv)
            self.options[n] = opts
        self.anchors = [self.base, *_furthest(s, self)]

    def levels(self, cfg: Config) -> dict[str, str]:
        return self.s.mark_inert({n: self.s.eff(f, cfg.get(n)) for n, f in self.factors.items()})

    def score(self, cfg: Config) -> tuple[float, float]:
        lv = self.levels(cfg)
        p = math.prod(b.p_avoid(lv) for b in self.s.blockers)
        cost = 0.0
        for n, f in self.factors.items():
            r = 0.0 if lv[n] == INERT else self.risk.get((n, lv[n]))  # an inert level does nothing
            if r is None:
                r = self.risk[(n, lv[n])] = self.s.risk(f, cfg.get(n))
            p *= 1 - min(r, 1.0)
            if not _same(cfg.get(n), self.base[n]):
                cost += f.level_cost(cfg.get(n))
        cost += min(self._changes(cfg, anchor, lv) for anchor in self.anchors)
        if p <= 0:
            return -1e9, 0.0
        return math.log(p) - cost, p

    def _changes(self, cfg: Config, anchor: Config, lv: dict[str, str]) -> float:
        """The cost of the changes that lead from ``anchor`` to ``cfg``: a change to a level
        knowledge prefers is free."""
        return sum(
            0.0 if (n, lv[n]) in self.preferred else self.s.change_cost
            for n in self.factors
            if not _same(cfg.get(n), anchor.get(n))
        )

    def key(self, cfg: Config) -> tuple[str, ...]:
        lv = self.levels(cfg)
        return tuple(lv[n] for n in self.factors)


def _relevant(s: Strategy, starts: list[Config], sc: _Scorer) -> list[str]:
    out = set(s.advised) | sc.judged
    for b in s.blockers:
        for n in sc.factors:
            if b.mass_of(n) >= MIN_MASS:
                out.add(n)
    for cfg in starts:
        out |= {n for n in sc.factors if not _same(cfg.get(n), sc.base[n])}
    # a parallel size over the machine's GPUs is worth changing though no failure named it yet
    base_levels = sc.levels(sc.base)
    out |= {n for n, f in sc.factors.items() if s.over_gpus(f, base_levels[n])}
    return [n for n in sc.factors if n in out and n not in s.frozen]


def _starts(s: Strategy, sc: _Scorer) -> list[Config]:
    # A configuration the engine's own checks refused (dry-run) is progress as a launch is: its
    # other changes got it past what it no longer shows. Left out, a fix of four changes was out
    # of reach from the baseline (DEPTH 3) and the search went back (vLLM on the H200, 2026-12-03).
    obs = _progress(s)
    chosen = sorted(obs, key=lambda o: -o.reach)[:3] + obs[-4:]
    return [dict(sc.base), *(_config(o, sc.factors) for o in chosen)][:MAX_STARTS]


def _search(
    sc: _Scorer, starts: list[Config], names: list[str]
) -> dict[tuple[str, ...], tuple[float, float, Config]]:
    seen: dict[tuple[str, ...], tuple[float, float, Config]] = {}
    frontier: list[Config] = []
    for cfg in starts:
        k = sc.key(cfg)
        if k not in seen:
            seen[k] = (*sc.score(cfg), cfg)
            frontier.append(cfg)
    for _ in range(DEPTH):
        grown: list[tuple[float, Config]] = []
        for cfg in frontier:
            for n in names:
                for lv in sc.options[n]:
                    if _same(lv, cfg.get(n)):
                        continue
                    nxt = {**cfg, n: lv}
                    k = sc.key(nxt)
                    if k in seen:
                        continue
                    val, p = sc.score(nxt)
                    seen[k] = (val, p, nxt)
                    grown.append((val, nxt))
        grown.sort(key=lambda t: -t[0])
        frontier = [c for _, c in grown[:BEAM]]
        if not frontier:
            break
    return seen


def _reasons(s: Strategy, cfg: Config, sc: _Scorer) -> list[str]:
    out = []
    for n, f in sc.factors.items():
        if _same(cfg.get(n), sc.base[n]):
            continue
        e = s.eff(f, cfg.get(n))
        why = ""
        if e in (normalise(v) for v in s.advised.get(n, [])):
            why = "advised by the engine's log"
        else:
            base_e = s.eff(f, sc.base[n])
            for b in s.blockers:
                mass = sum(
                    p for c, p in b.post.items() if any(x.factor == n and x.value == base_e for x in c.conds)
                )
                if mass >= MIN_MASS:
                    why = f"away from {f.describe_level(sc.base[n])}, a likely cause of {b.failure_class} ({mass:.0%})"
                    break
        vs = s.verdicts(f, cfg.get(n))
        if vs:
            why = f"{vs[0].kind}: {vs[0].reason}"
        out.append(f"{n} {f.describe_level(cfg.get(n))}" + (f": {why}" if why else ""))
    return out


def propose(s: Strategy, tried: set[str], limit: int = 1) -> list[Proposal]:
    """The ``limit`` best untried candidates, best first."""
    sc = _Scorer(s)
    starts = _starts(s, sc)
    names = _relevant(s, starts, sc)
    found = _search(sc, starts, names)
    tied: set[str] = set()
    out = _pick(s, sc, found, tried, limit, tied)
    # a rule that called a better candidate incompatible as a whole names the factors to change with
    # it: search again with those in (the plan's memory fraction beside a dropped tp 8)
    if tied - set(names) - set(s.frozen):
        names = [*names, *sorted(tied - set(names) - set(s.frozen))]
        found = {**found, **_search(sc, starts, names)}
        out = _pick(s, sc, found, tried, limit)
    if len(out) < limit:
        everything = [n for n in sc.factors if n not in s.frozen]
        if set(everything) - set(names):
            more = _search(sc, starts, everything)
            out = _pick(s, sc, {**found, **more}, tried, limit)
    return out


def _pick(
    s: Strategy, sc: _Scorer, found, tried: set[str], limit: int, tied: set[str] | None = None
) -> list[Proposal]:
    """The best untried candidates. A candidate that a rule calls incompatible as a whole
    (combination_risk) is scored down by that risk, not dropped, and the factors the rule ties to it
    go into ``tied``; scanning stops once no candidate left can beat the ``limit`` best so far (a
    risk only lowers a score)."""
    picked: list[tuple[float, Proposal]] = []
    for val, p, cfg in sorted(found.values(), key=lambda t: -t[0]):
        if val <= -1e8 or (len(picked) >= limit and val <= picked[limit - 1][0]):
            break
        changes = {n: cfg.get(n) for n in sc.factors}
        cand = s.baseline.with_changes({**changes, **s.space.fixed})
        key = s.predicted_key(cand)
        if key in tried or s.variant_of_pending(cand):
            continue
        tried = tried | {key}
        combo = s.combination_risk(cand)
        if combo > 0 and tied is not None:
            tied.update(s.combination_culprits(cand))
        if combo >= 1.0:
            continue
        if combo > 0:
            val, p = val + math.log1p(-combo), p * (1 - combo)
        picked.append((val, Proposal(cand, p, _reasons(s, cfg, sc), sc.levels(cfg), key)))
        picked.sort(key=lambda t: -t[0])
    return [pr for _, pr in picked[:limit]]
