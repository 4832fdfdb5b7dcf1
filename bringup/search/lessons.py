"""What a failed launch's own words say about single levels, kept for the strategy.

The strategy (``strategy.py``) decides the next launch; this module only reads. From a failure's
evidence it keeps:

- **refusals**: levels of a choice the engine refused by name, with its reason ("FLASH_ATTN:
  [compute capability not supported]"), final where no reason names another setting of the space;
  and the proof of "impossible here" when the engine says no level is valid for such reasons;
- **risk floors**: levels made likely to fail (a refused level's kind, a package that did not
  import);
- **numeric bounds**: the number a message gives (free memory, a KV pool that holds few
  requests), as a bound of the flag a signature says must move, and which way a number must move
  (a signature's adjust, or the engine's own advice), read by the next blocker as threshold
  culprits.

What it needs of the strategy is the :class:`Reader` protocol: the space, knowledge's facts, the
frozen factors, effective values and the notes the run reports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Protocol

from bringup.core.candidate import Candidate, FlagValue
from bringup.knowledge.conditions import as_number
from bringup.knowledge.rules import Knowledge
from bringup.observe.effective import normalise
from bringup.observe.outcome import Outcome
from bringup.observe.signatures import eval_limit, signature_by_id
from bringup.search.space import Factor, Space

_REFUSAL = re.compile(
    r"not supported|unsupported|requires|not available|not valid|invalid|cannot|not compiled|"
    r"no kernel|only supported",
    re.IGNORECASE,
)
_NONE_VALID = re.compile(
    r"\bno (valid|suitable|compatible|available|supported) [\w -]{0,40}?(found|available|for)", re.IGNORECASE
)
P_MISSING_PACKAGE = 0.9  # a level that loads a package that did not import


def adj_direction(action: str) -> Literal["lower", "raise"]:
    """A remedy's action as a signature's adjust direction (lower or raise)."""
    return "lower" if action == "lower" else "raise"


def _refused_levels(line: str, f: Factor) -> dict[str, str]:
    """The levels of a choice factor a line refuses ("FLASH_ATTN: [compute capability not
    supported]"), each with its reason."""
    refused: dict[str, str] = {}
    for lv in f.levels:
        m = re.search(
            rf"(?<![\w-]){re.escape(str(lv))}(?![\w-])['\"]?\s*[:=]\s*\[?([^\]\}}]*)", line, re.IGNORECASE
        )
        if m and _REFUSAL.search(m.group(1)):
            refused[normalise(lv)] = m.group(1).strip(" ,")[:120]
    return refused


class Reader(Protocol):
    """What the lessons read of the strategy."""

    space: Space
    knowledge: Knowledge
    frozen: dict[str, tuple[str, str]]
    notes: list[str]

    def eff(self, f: Factor, level: FlagValue | None) -> str: ...

    def factor_for(self, name: str) -> Factor | None: ...


@dataclass
class Lessons:
    """Single levels' lessons from failed launches (module docstring); the strategy weighs them."""

    refused: dict[tuple[str, str], str] = field(default_factory=dict)  # (factor, level) -> the refusal
    risk_floor: dict[tuple[str, str], float] = field(default_factory=dict)  # levels made riskier by evidence
    blocked: tuple[str, str] | None = None  # a factor the engine refused every level of, and why
    refusals: dict[str, list[str]] = field(
        default_factory=dict
    )  # factor -> launches that refused levels of it
    bounds: dict[str, list[float | None]] = field(default_factory=dict)  # factor -> [lo, hi] excluded
    near: dict[str, tuple[float, str]] = field(
        default_factory=dict
    )  # factor -> (value that failed, way to move)
    adjusted: dict[str, str] = field(
        default_factory=dict
    )  # the last failure's numbers that must move, and which way
    moved: dict[str, list[str]] = field(default_factory=dict)  # signature -> numeric factors it moved

    def read(self, s: Reader, cand: Candidate, outcome: Outcome, key: str, launch: int) -> None:
        """A failed launch's lessons (``key``: its predicted identity; ``launch``: its number)."""
        self._refusals(s, outcome, key)
        self._missing_package(s, outcome)
        self._kv_floor(s, cand, outcome, launch)
        self._numeric_bounds(s, cand, outcome)

    def _refusals(self, s: Reader, outcome: Outcome, key: str) -> None:
        """An error that names levels of a factor with a reason each rules each named level out.
        When the engine says no level is valid for reasons no setting in the space changes,
        nothing in the space can work: the factor is blocked (the proof of "impossible here")."""
        for line in outcome.evidence:
            for f in s.space.factors:
                if f.kind != "choice":
                    continue
                refused = _refused_levels(line, f)
                if len(refused) < 2:
                    self._refused_alone(s, line, f)
                    continue
                seen = self.refusals.setdefault(f.name, [])
                seen.append(key)
                final = []
                for e, r in refused.items():
                    if not self._names_other_factor(s, r, f):
                        self.refused[(f.name, e)] = f"refused by the engine: {r}"
                        final.append(e)
                    else:
                        self.risk_floor[(f.name, e)] = max(self.risk_floor.get((f.name, e), 0.0), 0.8)
                every = all((f.name, e) in self.refused for e in refused)
                if _NONE_VALID.search(line) and (every or len(set(seen)) >= 2):
                    if self.blocked is None:
                        self.blocked = (
                            f.name,
                            f"the engine refused every {f.name} it considered, for reasons no launch flag in "
                            f"the space changes ({', '.join(sorted(refused))}): {line.strip()[:400]}",
                        )
                        s.notes.append(f"{f.name}: refused here: {', '.join(sorted(refused))}")

    def _refused_alone(self, s: Reader, line: str, f: Factor) -> None:
        """One level refused with its reasons ("Selected backend X is not valid for this
        configuration. Reason: ['compute capability not supported']"): final when no reason names
        another setting of the space."""
        for lv in f.levels:
            m = re.search(
                rf"(?<![\w-]){re.escape(str(lv))}(?![\w-]).{{0,80}}?\bReasons?:\s*\[([^\]]*)\]",
                line,
                re.IGNORECASE,
            )
            if m is None:
                continue
            reasons = [r.strip(" '\"") for r in m.group(1).split(",")]
            final = [r for r in reasons if _REFUSAL.search(r) and not self._names_other_factor(s, r, f)]
            if final:
                self.refused[(f.name, normalise(lv))] = f"refused by the engine: {final[0]}"
                s.notes.append(f"{f.name} {lv}: refused here ({final[0]})")
                self._refused_kind(s, f, str(lv), final)
            return

    def _refused_kind(self, s: Reader, f: Factor, lv: str, reasons: list[str]) -> None:
        """A reason that names a kind some of the factor's levels carry in their names ("MLA not
        supported" for FLASH_ATTN, while TRITON_MLA, FLASHMLA... carry it) refuses the levels of the
        refused one's kind: every level without that word becomes as risky as a refusal is likely."""
        names = [str(x) for x in f.levels]
        for r in reasons:
            for w in re.findall(r"[A-Za-z][A-Za-z0-9]{1,}", r):
                wl = w.lower()
                if wl in ("not", "supported", "compute", "capability", "unsupported", "for", "this", "is"):
                    continue
                carry = [n for n in names if wl in n.lower()]
                if carry and wl not in lv.lower():
                    for n in names:
                        if wl not in n.lower() and n != lv:
                            key = (f.name, normalise(n))
                            self.risk_floor[key] = max(self.risk_floor.get(key, 0.0), 0.8)
                    s.notes.append(
                        f"{f.name}: levels without '{w}' in their name are likely refused as {lv} was"
                    )

    def _names_other_factor(self, s: Reader, reason: str, f: Factor) -> bool:
        low = reason.lower()
        return any(
            g is not f and (g.dest.lower() in low or g.dest.lower().replace("_", " ") in low)
            for g in s.space.factors
        )

    def _missing_package(self, s: Reader, outcome: Outcome) -> None:
        """A package that does not import fails every level that loads it (bnb-4bit and bnb-8bit)."""
        if outcome.failure_class != "missing-dependency":
            return
        for name, levels in outcome.implicated_levels.items():
            f = s.factor_for(name)
            if f is None or f.name in s.frozen:
                continue
            for lv in levels:
                key = (f.name, normalise(lv))
                self.risk_floor[key] = max(self.risk_floor.get(key, 0.0), P_MISSING_PACKAGE)

    # -- numeric bounds ------------------------------------------------------------------------------
    def _numbers(self, s: Reader) -> dict[str, str]:
        out = {}
        for k, v in s.knowledge.facts.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k.replace(".", "_")] = str(v)
        return out

    def _limit(
        self, s: Reader, sig, expr: str | None, lines: list[str], level: float
    ) -> tuple[float | None, str]:
        if not expr:
            return None, ""
        for line in lines:
            m = sig.regex.search(line)
            if m is None:
                continue
            lim = eval_limit(expr, {**self._numbers(s), **m.groupdict(), "level": str(level)})
            if lim is not None:
                return lim, line.strip()
        return None, ""

    def _room(self, s: Reader, f: Factor, cur: float, direction: str) -> bool:
        lo, hi = self.bounds.get(f.name, [None, None])
        for level in [None, *f.levels]:
            num = as_number(s.eff(f, level))
            if num is None or (num >= cur if direction == "lower" else num <= cur):
                continue
            if (lo is None or num > lo + 1e-9) and (hi is None or num < hi - 1e-9):
                return True
        return False

    def _numeric_bounds(self, s: Reader, cand: Candidate, outcome: Outcome) -> None:
        """The numeric flag a signature says must move (an out-of-memory: the memory fraction, then
        the batch limit), bounded by the number its message gives. Read by the next blocker as a
        threshold culprit ("at least 0.95")."""
        self.adjusted = {}
        sig = signature_by_id(outcome.signature)
        if sig is None or not sig.adjust:
            self._advised_direction(s, cand, outcome)
            return
        flags = cand.flag_dict
        moved = self.moved.setdefault(sig.id, [])
        order = sorted(
            sig.adjust.items(), key=lambda kv: (g := s.factor_for(kv[0])) is None or g.name in moved
        )
        for flag, adj in order:
            f = s.factor_for(flag)
            if f is None or f.kind != "number":
                continue
            cur = as_number(s.eff(f, flags.get(f.name)))
            if cur is None:
                continue
            if f.name not in moved:
                moved.append(f.name)
            if not self._room(s, f, cur, adj.direction):
                s.notes.append(
                    f"{f.name} cannot go {adj.direction} from {cur:g}: {sig.id} moves the next flag"
                )
                continue
            # Only a number the engine's own message gives is a hard bound ("less than desired GPU
            # memory utilization (0.999, 139.66 GiB)"); otherwise the next blocker holds thresholds
            # ("at least 0.95", "at least 0.92"...) as culprits, lowered or kept by what follows.
            lim, line = self._limit(s, sig, adj.limit, outcome.evidence, cur)
            b = self.bounds.setdefault(f.name, [None, None])
            if adj.direction == "lower":
                if lim is not None:
                    b[1] = (
                        lim * 0.95 if b[1] is None else min(b[1], lim * 0.95)
                    )  # a margin: free memory moves
                    s.notes.append(f"{f.name} must stay below {lim:.2f} ({sig.id}: {line[:120]})")
                self.near[f.name] = (cur, "lower")
            else:
                if lim is not None and lim > cur:
                    b[0] = lim if b[0] is None else max(b[0], lim)
                    s.notes.append(f"{f.name} must be above {lim:.3f} ({sig.id}: {line[:120]})")
                self.near[f.name] = (cur, "raise")
            self.adjusted[f.name] = adj.direction
            break

    def _advised_direction(self, s: Reader, cand: Candidate, outcome: Outcome) -> None:
        """With no signature that says which way a number must move, the engine's own advice may
        ("Decrease GPU memory utilization or reduce GPU memory used by other processes"): the first
        number it tells to go down or up is a threshold culprit in that direction, as a signature's
        would be (no hard bound: the advice gives no number)."""
        for r in outcome.remedies or []:
            if r.conditional or r.action not in ("lower", "raise"):
                continue
            f = s.factor_for(r.flag)
            if f is None or f.kind != "number" or f.name in s.frozen:
                continue
            cur = as_number(s.eff(f, f.level_in(cand.flag_dict, cand.env_dict)))
            if cur is None:
                continue
            direction = adj_direction(r.action)
            self.adjusted[f.name] = direction
            self.near[f.name] = (cur, direction)
            return

    def _kv_floor(self, s: Reader, cand: Candidate, outcome: Outcome, launch: int) -> None:
        """A launch that reported its KV pool and how many requests of the maximum length it holds
        bounds the memory fraction from below (vllm/v1/core/kv_cache_utils.py)."""
        rep = outcome.kv_report or {}
        conc, pool = rep.get("max_concurrency"), rep.get("kv_budget_gib") or rep.get("kv_gib")
        gpu = as_number(s.knowledge.facts.get("gpu.memory_gib"))
        if not conc or not pool or not gpu or conc < 1 or rep.get("device") == "cpu":
            return
        for f in s.space.factors:
            cur = (
                as_number(s.eff(f, f.level_in(cand.flag_dict, cand.env_dict)))
                if f.sizes == "kv-pool"
                else None
            )
            if cur is None or not 0 < cur <= 1:
                continue
            floor = cur - float(pool) * (1 - 1 / float(conc)) / float(gpu)
            b = self.bounds.setdefault(f.name, [None, None])
            if b[0] is None or floor > b[0]:
                b[0] = floor
                s.notes.append(
                    f"{f.name} must stay above {floor:.3f}: at {cur:g} the KV pool of {float(pool):.2f} GiB "
                    f"held {float(conc):g} requests of the maximum length (launch {launch})"
                )
