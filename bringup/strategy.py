"""The strategy: which candidate to launch next, from the space, knowledge and outcomes so far.

Each level of each factor has a probability of being bad (of making a launch fail) on this
machine, model and engine version. Knowledge sets the priors (incompatible, risky, preferred,
the memory plan); every failure updates them: its signature names the factors it implicates,
and Bayes spreads the blame over the levels those factors really had (the *effective* values
read back from the log, not the requested ones). A numeric flag that ran out of memory moves
the way the signature says, past the bound its message gives. A flag the engine overrode is
frozen: varying it further is pointless. The next candidate is the one most likely to work,
then closest to the baseline, then cheapest; a candidate whose predicted effective
configuration was already launched is never proposed again.
"""

from __future__ import annotations

import heapq
import math
import re
from dataclasses import dataclass, field

from bringup.candidate import Candidate, FlagValue
from bringup.conditions import as_number
from bringup.effective import normalise
from bringup.envfactors import EnvFactors
from bringup.helptext import HelpSpec
from bringup.knowledge import Knowledge
from bringup.knowledge_files import phase_index
from bringup.outcome import Outcome
from bringup.results import Attempt, Pinned, StrategyState
from bringup.screening import ScreeningPolicy
from bringup.signatures import eval_limit, signature_by_id
from bringup.space import Factor, Space

UNKNOWN_DEFAULT = "<engine default>"
# A reason that refuses a level, and an engine saying that
# none of the levels it considered is valid (vLLM: "No valid attention backend found for cuda").
_REFUSAL = re.compile(
    r"not supported|unsupported|requires|not available|not valid|invalid|cannot|not compiled|"
    r"no kernel|only supported",
    re.IGNORECASE,
)
_NONE_VALID = re.compile(
    r"\bno (valid|suitable|compatible|available|supported) [\w -]{0,40}?(found|available|for)", re.IGNORECASE
)
P_INCOMPATIBLE, P_RISKY, P_PREFERRED = 0.97, 0.5, 0.02
# An untried level is a gamble: on new hardware most alternatives to the defaults fail (the seeds
# tried 6 that did), so it must earn its place against a suspected default.
P_UNSET, P_BASELINE, P_OTHER = 0.05, 0.05, 0.35
P_UNSET_ENV = 0.01  # a variable left at its default is rarely what breaks a bring-up
P_NEAR_BOUND = 0.45  # a level just past an out-of-memory value: probably still too much
NEAR_FRACTION = 0.03  # for fractions: "just past" means within this much
CERTAIN = 0.999
P_CAUSE = 0.9  # a level whose change alone changed the symptom
P_EXHAUSTED = 0.9  # a factor every level of which failed: kept, as likely bad as that says
P_ADJUST_ALT = (
    0.3  # another numeric flag the same failure says could move (the batch limit after a capture OOM)
)
P_ADVISED = 0.1  # a value the failure's own log line advises ("set X=0"): likely, not certain
MIN_P_SUCCESS = 0.01  # below this, launching is a waste: say that nothing left is likely to work
P_KNOWN_GOOD = 0.95  # a configuration validated before on this machine, engine version and model
OUTSIDE = 0.8  # this sure that what fails lies outside the space: stop and say so
# Trials in flight (parallel runs): the next proposal assumes each of them fails, with the levels it
# changes this likely bad, so that a batch tests different hypotheses (the "constant liar" of
# batch Bayesian optimisation), not k variants of one guess.
P_PENDING = 0.6


def _refused_levels(line: str, f: Factor) -> dict[str, str]:
    """The levels of a choice factor that a line refuses ("FLASH_ATTN: [compute capability not
    supported]"), each with its reason."""
    refused: dict[str, str] = {}
    for lv in f.levels:
        m = re.search(
            rf"(?<![\w-]){re.escape(str(lv))}(?![\w-])['\"]?\s*[:=]\s*\[?([^\]\}}]*)", line, re.IGNORECASE
        )
        if m and _REFUSAL.search(m.group(1)):
            refused[normalise(lv)] = m.group(1).strip(" ,")[:120]
    return refused


@dataclass
class Proposal:
    candidate: Candidate
    p_success: float
    reasons: list[str]
    predicted: dict[str, str]  # factor -> predicted effective value
    key: str  # predicted effective key

    def changes(self, baseline: Candidate) -> str:
        return self.candidate.describe_diff(baseline)


@dataclass
class Decision:
    """The next launch (a candidate, screened first or not), or none: the search ends."""

    candidate: Candidate | None
    p_success: float = 0.0
    reasons: list[str] = field(default_factory=list)
    screen: bool = False


@dataclass
class Observation:
    candidate: Candidate
    outcome: Outcome
    key: str
    source: str = "launch"  # launch | screen | journal


@dataclass
class Strategy:
    space: Space
    baseline: Candidate
    knowledge: Knowledge
    spec: HelpSpec | None = None
    change_cost: float = 0.25  # per factor changed from the baseline: prefer small, explainable changes
    p: dict[tuple[str, str], float] = field(default_factory=dict)
    frozen: dict[str, tuple[str, str]] = field(default_factory=dict)  # factor -> (value, why)
    default_eff: dict[str, tuple[str, str]] = field(default_factory=dict)  # factor -> (value, why)
    bounds: dict[str, list[float | None]] = field(default_factory=dict)  # factor -> [lo, hi] excluded
    near: dict[str, tuple[float, str]] = field(default_factory=dict)  # factor -> (value, direction)
    observations: list[Observation] = field(default_factory=list)
    unexplained: list[Observation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    blocked: tuple[str, str] | None = None  # a factor with no level left, and why
    outside: float = 0.0  # probability that what fails lies outside the space (the model, the machine)
    screening: ScreeningPolicy | None = None  # whether a candidate is screened before a full launch
    env: EnvFactors | None = None  # environment variables: their registry, and when they join the space
    moved: dict[str, list[str]] = field(default_factory=dict)
    refusals: dict[str, list[str]] = field(
        default_factory=dict
    )  # factor -> launches that refused all its levels  # signature -> numeric factors it moved
    best_left: Proposal | None = None  # the untried candidate judged too unlikely to launch, if that ended it
    _pending_moves: list[frozenset[tuple[str, str]]] = field(default_factory=list)  # see _next_beside
    cleared: set[tuple[str, str]] = field(
        default_factory=set
    )  # (factor, failure class): changing only that factor left that failure as it was
    refused_final: set[tuple[str, str]] = field(
        default_factory=set
    )  # (factor, level) refused for a reason no flag changes

    def __post_init__(self) -> None:
        for f in self.space.factors:
            if f.is_env:
                if f.p_unset is None:
                    f.p_unset = P_UNSET_ENV
                self._env_defaults(f)
                continue
            opt = self.spec.get(f.name) if self.spec is not None else None
            if opt is not None and opt.default not in (None, "None", "") and f.kind in ("number", "choice"):
                self.default_eff[f.name] = (normalise(opt.default), "the engine's --help default")
            forced = self.knowledge.prediction(f.name, "forced")
            if forced is not None:
                self.frozen[f.name] = (normalise(forced.value), f"rule {forced.rule_id}: {forced.reason}")
            dflt = self.knowledge.prediction(f.name, "default")
            if dflt is not None:
                self.default_eff[f.name] = (normalise(dflt.value), f"rule {dflt.rule_id}: {dflt.reason}")

    # -- environment variables -------------------------------------------------------------------
    def _env_defaults(self, f: Factor) -> None:
        """What an env factor is when unset (the registry's default), and whether the engine reads it."""
        if self.env is None:
            return
        d = self.env.default(f.dest)
        if d is not None:
            self.default_eff.setdefault(f.name, (d, "the engine's registry default"))
        if self.env.ignored(f.dest):
            value = self.default_eff.get(f.name, (UNKNOWN_DEFAULT, ""))[0]
            self.frozen[f.name] = (
                value,
                f"{f.dest} is not read by this engine version: setting it changes nothing",
            )

    def add_factor(self, f: Factor) -> None:
        """A factor joins the space mid-run (a variable the evidence called for). Launches
        already made had it at its default: their identities are recomputed so that none is
        proposed again under a new name."""
        if self.space.get(f.name) is not None:
            return
        self.space.factors.append(f)
        if f.is_env:
            f.p_unset = P_UNSET_ENV if f.p_unset is None else f.p_unset
            self._env_defaults(f)
        for o in self.observations:
            o.key = self.predicted_key(o.candidate)

    def _grow_env(self, outcome: Outcome, own_fix: bool = False) -> tuple[list[Factor], list[Factor]]:
        """Variables this failure calls for join the space: (named by its lines, ranked). With
        ``own_fix`` (the signature names the numbers to move), a ranked variable is never a first
        suspect, however many of the failure's words its name shares."""
        if self.env is None:
            return [], []
        named: list[Factor] = []
        ranked: list[Factor] = []
        # A signature that names only what no launch changes (the model's head size) is not
        # second-guessed by variables that merely share its words; a variable the log names is.
        outside_only = bool(outcome.implicates) and all(
            (g := self._factor_for(i)) is None or g.name in self.frozen for i in outcome.implicates
        )
        for prop in self.env.after_failure(outcome, self.space.names):
            if outside_only and prop.factor.origin != "log":
                continue
            if own_fix and prop.factor.origin == "ranked":
                prop.named = False
            if prop.named and prop.factor.p_unset is None:
                # The failure's own words name this variable's component: its default is as
                # suspect as any flag's (a variable merely in the space rarely is).
                prop.factor.p_unset = P_UNSET
            self.add_factor(prop.factor)
            if prop.advised is not None:
                key = (prop.factor.name, normalise(prop.advised))
                self.p[key] = min(self.p.get(key, 1.0), P_ADVISED)
            (named if prop.named else ranked).append(prop.factor)
            self.notes.append(f"{prop.factor.name} joined the search space: {prop.why}")
        return named, ranked

    # -- effective values ------------------------------------------------------------------------
    def base_level(self, f: Factor) -> FlagValue | None:
        return f.level_in(self.baseline.flag_dict, self.baseline.env_dict)

    def eff(self, f: Factor, level: FlagValue | None) -> str:
        if f.name in self.frozen:
            return self.frozen[f.name][0]
        if (
            level is None
            or level is False
            or (isinstance(level, str) and level.lower() == "auto" and f.name in self.default_eff)
        ):
            return self.default_eff.get(f.name, (UNKNOWN_DEFAULT, ""))[0]
        return normalise(level)

    def predicted_key(self, cand: Candidate) -> str:
        """Identity of what the engine would really run: factors by predicted effective value."""
        flags, env = cand.flag_dict, cand.env_dict
        parts = []
        for f in self.space.factors:
            level = f.level_in(flags, env)
            parts.append(f"{f.name}={self.eff(f, level)}")
        names = set(self.space.names)
        rest = sorted(f"{k}={normalise(v)}" for k, v in flags.items() if k not in names)
        rest += sorted(f"env:{k}={v}" for k, v in env.items() if "env:" + k not in names)
        return "|".join(parts + rest)

    # -- beliefs ---------------------------------------------------------------------------------
    def _level_for_verdicts(self, f: Factor, level: FlagValue | None) -> FlagValue | None:
        """Knowledge judges what the engine will really run."""
        if f.name in self.frozen:
            return self.frozen[f.name][0]
        if level is None and f.name in self.default_eff:
            return self.default_eff[f.name][0]
        return level

    def verdicts(self, f: Factor, level: FlagValue | None, others: dict[str, FlagValue] | None = None):
        lv = self._level_for_verdicts(f, level)
        if lv is None:
            return []
        return self.knowledge.verdicts(f.name, lv, others if others is not None else self.baseline.flag_dict)

    def prior(self, f: Factor, level: FlagValue | None, others: dict[str, FlagValue] | None = None) -> float:
        kinds = {v.kind for v in self.verdicts(f, level, others)}
        if "incompatible" in kinds:
            return P_INCOMPATIBLE
        if "risky" in kinds:
            return P_RISKY
        if "preferred" in kinds:
            return P_PREFERRED
        if level is None:
            return f.p_unset if f.p_unset is not None else P_UNSET
        base = self.base_level(f)
        if base is not None and normalise(base) == normalise(level):
            return P_BASELINE
        return P_OTHER

    def p_bad(self, f: Factor, level: FlagValue | None, others: dict[str, FlagValue] | None = None) -> float:
        key = (f.name, self.eff(f, level))
        p = self.p.get(key)
        if p is None:
            p = self.prior(f, level, others)
        num = as_number(self.eff(f, level)) if f.kind == "number" else None
        if num is not None:
            lo, hi = self.bounds.get(f.name, [None, None])
            if (hi is not None and num >= hi - 1e-9) or (lo is not None and num <= lo + 1e-9):
                return CERTAIN
            if f.name in self.near:
                v, direction = self.near[f.name]
                # Just below a failed fraction is probably still too much; a step of a few points
                # is the next thing to try (0.95 failed: 0.90 before 0.85), not a big jump.
                window = NEAR_FRACTION if v <= 1.0 else v * 0.4
                if (direction == "lower" and v - window <= num < v) or (
                    direction == "raise" and v < num <= v + window
                ):
                    p = max(p, P_NEAR_BOUND)
        return p

    # -- learning from outcomes ------------------------------------------------------------------
    def _moved_or_absent(self, flag: str, moved: list[str]) -> bool:
        """Adjustments in turn: a flag not in the space, or one already moved, goes last."""
        f = self._factor_for(flag)
        return f is None or f.name in moved

    def _factor_for(self, name: str) -> Factor | None:
        f = self.space.get(name)
        if f is None and self.spec is not None and name.startswith("--"):
            opt = self.spec.resolve(name)
            f = self.space.get(opt.name) if opt else None
        return f

    def observe(self, cand: Candidate, outcome: Outcome, source: str = "launch") -> Observation:
        if outcome.failure_class == "port-in-use":
            # The machine's state, not the candidate's: no evidence, and it may be launched again.
            return Observation(cand, outcome, self.predicted_key(cand), "port")
        # 1. What the engine really used: overrides freeze a factor, defaults name "unset".
        flags = cand.flag_dict
        f: Factor | None  # the loops below look factors up by name (None: not in the space)
        for f in self.space.factors:
            if f.is_env or f.dest not in outcome.effective:
                continue
            eff = normalise(outcome.effective[f.dest])
            req = flags.get(f.name)
            if req is None or normalise(req) == "auto":  # "auto" asks the engine to choose
                self.default_eff[f.name] = (eff, f"seen in launch {len(self.observations) + 1}")
            elif normalise(req) != eff and f.name not in self.frozen:
                self.frozen[f.name] = (
                    eff,
                    f"engine used {eff} when {req} was asked (launch {len(self.observations) + 1})",
                )
        obs = Observation(cand, outcome, self.predicted_key(cand), source)
        self.observations.append(obs)
        if outcome.status == "works":
            return obs
        self._refusals(outcome)
        self._missing_package(outcome)
        self._kv_floor(cand, outcome)
        self._unchanged_failure(obs)
        if outcome.status == "timeout" and outcome.failure_class is None:
            return obs  # a deadline, not evidence against any level
        # 2. Numeric flags the signature says must move: the first one in the space that an earlier
        # failure of the same signature has not moved yet (when lowering the memory fraction did
        # not cure a graph-capture OOM, the batch limit is next), else the first again.
        sig = signature_by_id(outcome.signature)
        certain = False
        if sig is not None:
            moved = self.moved.setdefault(sig.id, [])
            order = sorted(sig.adjust.items(), key=lambda kv: self._moved_or_absent(kv[0], moved))
            for flag, adj in order:
                f = self._factor_for(flag)
                if f is None or f.kind != "number":
                    continue
                cur = as_number(self.eff(f, flags.get(f.name)))
                if cur is None:
                    continue
                if f.name not in moved:
                    moved.append(f.name)
                if not self._room(f, cur, adj.direction):
                    # Bounded on that side already (a KV pool that must still hold one request):
                    # this flag cannot move that way; the next one the signature names is tried.
                    self.notes.append(
                        f"{f.name} cannot go {adj.direction} from {cur:g}: {sig.id} moves the next flag"
                    )
                    continue
                # The other flags the signature says could move are suspects too, for when this one
                # runs out of levels (bounded on both sides by two kinds of out-of-memory).
                for other in sig.adjust:
                    g = self._factor_for(other)
                    if g is not None and g is not f and g.name not in self.frozen:
                        key = (g.name, self.eff(g, g.level_in(flags, cand.env_dict)))
                        self.p[key] = max(self.p.get(key, 0.0), P_ADJUST_ALT)
                b = self.bounds.setdefault(f.name, [None, None])
                if adj.direction == "lower":
                    b[1] = upper = cur if b[1] is None else min(b[1], cur)
                    lim, line = self._limit(sig, adj.limit, outcome.evidence, cur)
                    if lim is not None:
                        b[1] = min(upper, lim * 0.95)  # a margin: free memory moves
                        self.notes.append(f"{f.name} must stay below {lim:.2f} ({sig.id}: {line[:120]})")
                    else:
                        self.near[f.name] = (cur, "lower")
                else:
                    b[0] = lower = cur if b[0] is None else max(b[0], cur)
                    lim, line = self._limit(sig, adj.limit, outcome.evidence, cur)
                    if lim is not None and lim > lower:
                        b[0] = lim
                        self.notes.append(f"{f.name} must be above {lim:.3f} ({sig.id}: {line[:120]})")
                    self.near[f.name] = (cur, "raise")
                certain = True
                break
        # A failure whose signature says which numbers to move (an out-of-memory) names its own
        # fix: variables that merely share its words (ranked, not named by a line) come after it.
        own_fix = sig is not None and any(self._factor_for(a) is not None for a in sig.adjust)
        env_named, env_ranked = self._grow_env(outcome, own_fix)
        # 3. Bayes over the implicated factors' effective levels.
        suspects: list[tuple[Factor, FlagValue | None]] = []
        # A factor the evidence names ("moe_backend='deep_gemm' is not supported") is the first
        # suspect, whatever the signature's generic list says.
        mentioned = self._named_by_lines(outcome.evidence)
        named_by_line = bool(mentioned)
        # A variable the failure's lines name comes right after the flags they name; those the
        # failure implicates by its nature come after the signature's own suspects.
        # A factor whose level loads the code the traceback failed in (its frames, bringup/data/
        # rootcause.yaml modules) is named by the evidence as surely as by a line.
        # (only where this launch ran such a level: trtllm kernels live inside flashinfer's package,
        # which does not make --attention-backend flashinfer a suspect of a launch that ran nsa).
        # Only when no specific signature spoke: a signature's own suspects know better than the
        # package a frame lives in (TRT-LLM's kernels live in flashinfer's package too).
        generic = not outcome.signature or outcome.signature.startswith("rootcause-")
        for n, lvs in outcome.implicated_levels.items() if generic else ():
            g = self._factor_for(n)
            if (
                g is not None
                and g.name not in mentioned
                and self.eff(g, g.level_in(flags, cand.env_dict)) in {normalise(x) for x in lvs}
            ):
                mentioned.append(g.name)
        mentioned += [f.name for f in env_named]
        for name in [*mentioned, *outcome.implicates, *(f.name for f in env_ranked)]:
            f = self._factor_for(name)
            if (
                f is None
                or f.name in self.frozen
                or any(s[0] is f for s in suspects)
                or (f.name, outcome.failure_class or "") in self.cleared
            ):
                continue
            level = f.level_in(flags, cand.env_dict)
            suspects.append((f, level))
        machine_only = bool(outcome.implicates) and all(
            i.split(".")[0] in ("model", "gpu", "host") for i in outcome.implicates
        )
        if (
            not suspects
            and not certain
            and not machine_only
            and outcome.failure_class in ("missing-dependency", "unknown", "bad-flag")
        ):
            # The signature names nothing in the space: blame what this candidate changed. (One that
            # names only the machine or the model, e.g. sgl-kernel with no build for this host, is
            # believed: real SGLang on CPU otherwise went back to the failure before; seen on this
            # project's machines.)
            for c in cand.diff(self.baseline):
                f = self._factor_for(c.flag)
                if f is not None and f.name not in self.frozen:
                    suspects.append((f, c.after if c.after is not False else None))
        if not suspects and not certain:
            # Nothing the search can change explains this failure: every candidate inherits it.
            self.unexplained.append(obs)
            # A signature that names its suspects, none of which the search can change, points
            # outside the space (the model, the machine); one that names nothing is weaker evidence.
            self.outside = 1 - (1 - self.outside) * (0.1 if outcome.implicates else 0.5)
            return obs
        if certain:
            return obs
        # Signatures name their suspects strongest first: the k-th gets 1/k of the weight. A failure
        # the probes found (no log line, no signature) says nothing about which kernel: equal weights.
        ranked = outcome.signature is not None or named_by_line
        # Variables the failure implicates only by its nature come last, always weighed by rank.
        ps = [
            self.p_bad(f, lv) / (rank + 1 if ranked or f in env_ranked else 1)
            for rank, (f, lv) in enumerate(suspects)
        ]
        none_bad = math.prod(1 - p for p in ps)
        denom = max(1e-9, 1 - none_bad)
        for (f, lv), p in zip(suspects, ps, strict=True):
            post = min(0.99, p / denom)
            key = (f.name, self.eff(f, lv))
            self.p[key] = max(self.p.get(key, 0.0), post)
            self._propagate(f, self.eff(f, lv), post, outcome.failure_class or "")
        self._differential(obs, [f for f, _ in suspects])
        return obs

    def _refusals(self, outcome: Outcome) -> None:
        """An error that names levels of a factor with a reason each ("No valid attention backend
        found ... Reasons: {FLASH_ATTN: [compute capability not supported], ...}") rules each named
        level out. When the engine says that no level is valid and no reason depends on another
        setting in the space (compute capability, head size: the machine's and the model's), nothing
        in the space can work: the factor is blocked and the search stops at once, quoting the line."""
        for line in outcome.evidence:
            for f in self.space.factors:
                if f.kind != "choice":
                    continue
                refused = _refused_levels(line, f)
                if len(refused) < 2:
                    self._refused_alone(line, f)
                    continue
                for e in refused:
                    self.p[(f.name, e)] = max(self.p.get((f.name, e), 0.0), CERTAIN)
                # Final: no reason depends on another setting the search could change, or the engine
                # said the same again after such a setting was changed (an NVFP4 checkpoint that
                # forces fp8 KV whatever --kv-cache-dtype says).
                seen = self.refusals.setdefault(f.name, [])
                seen.append(self.predicted_key(self.observations[-1].candidate) if self.observations else "")
                # A level refused before for a reason of its own (TRITON_MLA: compute capability) stays
                # refused whatever this line's reason for it depends on.
                for e, r in refused.items():
                    if not self._names_other_factor(r, f):
                        self.refused_final.add((f.name, e))
                final = all((f.name, e) in self.refused_final for e in refused) or len(set(seen)) >= 2
                if _NONE_VALID.search(line) and final and self.blocked is None:
                    self.blocked = (
                        f.name,
                        f"the engine refused every {f.name} it considered, for reasons no "
                        f"launch flag in the space changes ({', '.join(sorted(refused))}): "
                        f"{line.strip()[:400]}",
                    )
                    self.notes.append(f"{f.name}: refused here: {', '.join(sorted(refused))}")

    def _refused_alone(self, line: str, f: Factor) -> None:
        """One level refused with its reasons ("Selected backend AttentionBackendEnum.TRITON_MLA is
        not valid for this configuration. Reason: ['compute capability not supported', ...]"): a
        reason that depends on no other setting in the space (the GPU's compute capability) refuses
        that level whatever else a launch changes, so it is ruled out here; one that names another
        setting (kv_cache_dtype) is left to the Bayes update, which blames both."""
        for lv in f.levels:
            m = re.search(
                rf"(?<![\w-]){re.escape(str(lv))}(?![\w-]).{{0,80}}?\bReasons?:\s*\[([^\]]*)\]",
                line,
                re.IGNORECASE,
            )
            if m is None:
                continue
            reasons = [r.strip(" '\"") for r in m.group(1).split(",")]
            final = [r for r in reasons if _REFUSAL.search(r) and not self._names_other_factor(r, f)]
            if final:
                key = (f.name, normalise(lv))
                self.p[key] = max(self.p.get(key, 0.0), CERTAIN)
                self.refused_final.add(key)
                self.notes.append(f"{f.name} {lv}: refused here ({final[0]})")
            return

    def _missing_package(self, outcome: Outcome) -> None:
        """A package that does not import fails every level that loads it (bitsandbytes: both
        bnb-4bit and bnb-8bit; seen on the H200, where the search once tried the second after
        the first), not only the one this launch asked for."""
        if outcome.failure_class != "missing-dependency":
            return
        for name, levels in outcome.implicated_levels.items():
            f = self._factor_for(name)
            if f is None or f.name in self.frozen:
                continue
            for lv in levels:
                key = (f.name, normalise(lv))
                self.p[key] = max(self.p.get(key, 0.0), P_INCOMPATIBLE)

    def _named_by_lines(self, lines: list[str]) -> list[str]:
        """The flags the failure's lines name ("moe_backend='deep_gemm' is not supported"). A line
        that names more than two is the engine's dump of its whole configuration (vLLM's
        "Initializing a V1 LLM engine ... with config: ...", the last line before many hangs): it
        names every setting, so it points at none."""
        out: list[str] = []
        for line in lines:
            named = [
                f.name
                for f in self.space.factors
                if not f.is_env and (f.dest + "=" in line or f.dest + ":" in line or f.name + " " in line)
            ]
            if len(named) <= 2:
                out += [n for n in named if n not in out]
        return [f.name for f in self.space.factors if f.name in out]

    # -- numeric bounds -----------------------------------------------------------------------------
    def _numbers(self) -> dict[str, str]:
        """The machine's numeric facts as names a `limit` may use (gpu.memory_gib -> gpu_memory_gib)."""
        out = {}
        for k, v in self.knowledge.facts.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k.replace(".", "_")] = str(v)
        return out

    def _limit(self, sig, expr: str | None, lines: list[str], level: float) -> tuple[float | None, str]:
        """A bound a signature's `limit` reads from the failure's own line: arithmetic over the
        pattern's groups, the flag's `level` in that launch and the machine's numeric facts."""
        if not expr:
            return None, ""
        for line in lines:
            m = sig.regex.search(line)
            if m is None:
                continue
            lim = eval_limit(expr, {**self._numbers(), **m.groupdict(), "level": str(level)})
            if lim is not None:
                return lim, line.strip()
        return None, ""

    def _room(self, f: Factor, cur: float, direction: str) -> bool:
        """Whether any level of a numeric factor (its listed ones and its default) lies that way
        from ``cur`` inside the bounds learnt so far."""
        lo, hi = self.bounds.get(f.name, [None, None])
        for level in [None, *f.levels]:
            num = as_number(self.eff(f, level))
            if num is None or (num >= cur if direction == "lower" else num <= cur):
                continue
            if (lo is None or num > lo + 1e-9) and (hi is None or num < hi - 1e-9):
                return True
        return False

    def _kv_floor(self, cand: Candidate, outcome: Outcome) -> None:
        """A launch that got past KV allocation and said how many requests of the maximum length its
        pool holds bounds the memory fraction from below: the pool shrinks by the fraction's share of
        the GPU, and under one request the engine refuses to start (vLLM: "To serve at least one
        request ...", vllm/v1/core/kv_cache_utils.py). Evidence from the launch's own log, so it
        holds with or without knowledge. A report of under one request from a launch that went on
        contradicts the launch and is not used."""
        rep = outcome.kv_report or {}
        conc, pool = rep.get("max_concurrency"), rep.get("kv_budget_gib") or rep.get("kv_gib")
        gpu = as_number(self.knowledge.facts.get("gpu.memory_gib"))
        if not conc or not pool or not gpu or conc < 1 or rep.get("device") == "cpu":
            return
        for f in self.space.factors:
            cur = (
                as_number(self.eff(f, f.level_in(cand.flag_dict, cand.env_dict)))
                if f.sizes == "kv-pool"
                else None
            )
            if cur is None or not 0 < cur <= 1:
                continue
            floor = cur - float(pool) * (1 - 1 / float(conc)) / float(gpu)
            b = self.bounds.setdefault(f.name, [None, None])
            if b[0] is None or floor > b[0]:
                b[0] = floor
                self.notes.append(
                    f"{f.name} must stay above {floor:.3f}: at {cur:g} the KV pool of {float(pool):.2f} GiB "
                    f"held {float(conc):g} requests of the maximum length (launch {len(self.observations)})"
                )

    def _names_other_factor(self, reason: str, f: Factor) -> bool:
        """A refusal that depends on another setting (kv_cache_dtype, block size) is not final."""
        low = reason.lower()
        return any(
            g is not f and (g.dest.lower() in low or g.dest.lower().replace("_", " ") in low)
            for g in self.space.factors
        )

    @staticmethod
    def _failed_checks(o: Outcome) -> list[tuple[str, str]]:
        """What a failed launch failed: probes that disagreed, or surviving the phase it died in."""
        if o.status == "wrong-output":
            return [("probe", p.name) for p in o.probes if not p.passed]
        return [("phase", o.phase)] if o.phase and phase_index(o.phase) >= 0 else []

    @staticmethod
    def _passed(o: Outcome, check: tuple[str, str]) -> bool:
        kind, name = check
        if kind == "probe":
            return any(p.name == name and p.passed for p in o.probes)
        if o.status in ("works", "wrong-output"):
            return True  # it served: every start-up phase and the serving phases were survived
        return phase_index(o.phase) > phase_index(name) >= 0

    def _unchanged_failure(self, new: Observation) -> None:
        """Two failed launches that differ only in a factor of two levels (a switch, a variable's
        one value) and fail alike: changing it left the failure as it was, so it is not this
        failure's cause. Its blame for it is cleared, so that a change that did nothing is not
        carried into the next candidates. (Not a factor of more levels: two MoE backends that both
        answer wrongly leave the third suspect. Not numbers: a batch limit lowered too little fails
        the same way, and the next step down is the fix.)"""
        new_eff = self._effective_levels(new.candidate)
        for old in self.observations[:-1]:
            if old.source not in ("launch", "screen") or not self._same_failure(old.outcome, new.outcome):
                continue
            old_eff = self._effective_levels(old.candidate)
            differ = [f for f in self.space.factors if old_eff[f.name] != new_eff[f.name]]
            if len(differ) != 1 or differ[0].name in self.frozen or differ[0].kind == "number":
                continue
            f = differ[0]
            if {self.eff(f, lv) for lv in [None, *f.levels]} - {old_eff[f.name], new_eff[f.name]}:
                continue
            self.cleared.add((f.name, new.outcome.failure_class or ""))
            for e in (old_eff, new_eff):
                self.p.pop((f.name, e[f.name]), None)
            self.notes.append(
                f"{f.name}: launches {self.observations.index(old) + 1} and {len(self.observations)} differ "
                f"only in it and fail alike ({new.outcome.failure_class}): not the cause"
            )

    def _differential(self, new: Observation, suspects: list[Factor]) -> None:
        """Two failed launches that differ in one factor only: a failure the other launch went
        through unharmed was caused by this launch's level of that factor. (Not the other way
        round: a launch that died earlier never reached the check the later one failed, so its
        fix may merely have revealed the next failure.) When each launch passed the other's
        failed check, both symptoms are that factor's, and what the launches shared is cleared:
        a wrong answer that turns into batch-variant answers when only the MoE backend changes
        says the MoE backend is what moves the output."""
        new_eff = self._effective_levels(new.candidate)
        for old in self.observations[:-1]:
            if old.source not in ("launch", "screen") or old.outcome.status == "works":
                continue
            old_eff = self._effective_levels(old.candidate)
            differ = [f for f in self.space.factors if old_eff[f.name] != new_eff[f.name]]
            if len(differ) != 1 or differ[0].name in self.frozen:
                continue
            f = differ[0]
            caused = [
                (o, e)
                for o, e, other in ((old, old_eff, new), (new, new_eff, old))
                if any(self._passed(other.outcome, c) for c in self._failed_checks(o.outcome))
            ]
            for o, e in caused:
                self.p[(f.name, e[f.name])] = max(self.p.get((f.name, e[f.name]), 0.0), P_CAUSE)
                self._propagate(f, e[f.name], P_CAUSE, o.outcome.failure_class or "")
            if len(caused) < 2:
                continue
            flags, env = new.candidate.flag_dict, new.candidate.env_dict
            for g in suspects:  # shared by both launches: cleared (halved, not below the prior)
                key = (g.name, new_eff[g.name])
                if g is not f and key in self.p:
                    self.p[key] = max(self.prior(g, g.level_in(flags, env)), self.p[key] / 2)

    @staticmethod
    def _same_failure(a: Outcome, b: Outcome) -> bool:
        """Two failures alike: same class, same phase, and neither passed a check the other failed."""
        return (
            a.status == b.status
            and a.failure_class is not None
            and a.failure_class == b.failure_class
            and a.phase == b.phase
            and set(Strategy._failed_checks(a)) == set(Strategy._failed_checks(b))
        )

    def _effective_levels(self, cand: Candidate) -> dict[str, str]:
        flags, env = cand.flag_dict, cand.env_dict
        return {f.name: self.eff(f, f.level_in(flags, env)) for f in self.space.factors}

    def _propagate(self, f: Factor, bad: str, post: float, cls: str) -> None:
        """Kernels of one family tend to fail together (flashmla_kv, flashmla_sparse); a kernel
        with no variant for this GPU fails under every flag that selects it."""
        family = bad.split("_")[0]
        for g in self.space.factors:
            if g.kind not in ("choice",):
                continue
            for lv in g.levels:
                e = normalise(lv)
                key = (g.name, e)
                if g is f and e != bad and e.split("_")[0] == family and len(family) > 2:
                    self.p[key] = max(self.p.get(key, self.prior(g, lv)), 0.8 * post)
                elif g is not f and e == bad and cls in ("unsupported-hardware", "missing-dependency"):
                    self.p[key] = max(self.p.get(key, self.prior(g, lv)), post)

    # -- deciding the next launch ------------------------------------------------------------------
    def next_launch(
        self,
        known_good: list[Candidate],
        history: list[Attempt],
        screened_ok: set[str],
        pending: list[Candidate] | None = None,
    ) -> Decision:
        """The next launch of a run: a configuration validated here before (journal) first, then
        the best proposal, screened first where the screening policy says it pays; none when the
        evidence points outside the space or nothing left is likely enough to work.

        ``pending``: candidates launched and not yet answered (trials that run at once). The
        proposal then assumes each of them fails, so it tests another hypothesis, and says so;
        none (wait for them) when nothing else is likely enough to be worth a slot."""
        decision = self._next_beside(known_good, pending) if pending else self._next_candidate(known_good)
        if decision.candidate is not None and self.screening is not None:
            key = self.predicted_key(decision.candidate)
            decision.screen = key not in screened_ok and self.screening.worth_it(
                decision.p_success, self._only_numeric_changes(decision.candidate), history
            )
        return decision

    def _next_beside(self, known_good: list[Candidate], pending: list[Candidate]) -> Decision:
        """The best launch beside those in flight, as if each of them failed (nothing is learnt:
        the assumption is undone before the answer comes back)."""
        saved = (dict(self.p), self.blocked, self.best_left)
        keys = {self.predicted_key(c) for c in pending}
        changed: list[str] = []
        try:
            for c in pending:
                flags, env = c.flag_dict, c.env_dict
                for f in self.space.factors:
                    level, base = f.level_in(flags, env), self.base_level(f)
                    if normalise(level) == normalise(base):
                        continue
                    k = (f.name, self.eff(f, level))
                    self.p[k] = max(self.p.get(k, self.prior(f, level)), P_PENDING)
                    changed.append(f"{f.name} {f.describe_level(level)}")
            # A candidate that makes every change of one in flight, and more, is a variant of that
            # guess, not another hypothesis (a number moved to another value counts as the same
            # move: "less memory"): it waits for the answer.
            self._pending_moves = [m for c in pending if (m := self._moves(c))]
            decision = self._next_candidate(known_good, exclude=keys)
        finally:
            self.p, self.blocked, self.best_left = saved
            self._pending_moves = []
        if decision.candidate is not None:
            what = ", ".join(dict.fromkeys(changed)) or "the baseline"
            decision.reasons.append(
                f"launched beside {len(pending)} in flight, assuming they fail ({what}); "
                "spent for nothing if one of them works"
            )
        return decision

    def _moves(self, cand: Candidate) -> frozenset[tuple[str, str]]:
        """A candidate's hypothesis: the choices it changes, and which numbers it moves."""
        flags, env = cand.flag_dict, cand.env_dict
        out = set()
        for f in self.space.factors:
            level = f.level_in(flags, env)
            if normalise(level) != normalise(self.base_level(f)):
                out.add((f.name, "moved" if f.kind == "number" else self.eff(f, level)))
        return frozenset(out)

    def _variant_of_pending(self, cand: Candidate) -> bool:
        if not self._pending_moves:
            return False
        mine = self._moves(cand)
        return any(m <= mine for m in self._pending_moves)

    def _next_candidate(self, known_good: list[Candidate], exclude: set[str] | None = None) -> Decision:
        tried = {o.key for o in self.observations if o.source != "journal"} | (exclude or set())
        for cand in known_good:  # a configuration that worked here before: confirm it first
            if self.predicted_key(cand) not in tried:
                return Decision(
                    cand,
                    P_KNOWN_GOOD,
                    ["validated before on this machine, engine version and model (journal)"],
                )
        if self.blocked is not None:
            return Decision(None)  # the evidence says no level of a factor can work here
        if self.outside >= OUTSIDE:
            return Decision(None)  # the evidence points outside what the search can change
        prop = self.propose(exclude=exclude)
        if prop is not None and prop.p_success < MIN_P_SUCCESS:
            self.best_left = prop
            return Decision(None)
        if prop is None:
            return Decision(None)
        return Decision(prop.candidate, prop.p_success, prop.reasons)

    def still_worth(self, cand: Candidate, p_then: float) -> bool:
        """A candidate decided earlier (its screen passed, judged ``p_then`` likely by this
        measure): is it still untried, and not made much less likely by the answers that came back
        since? (Trials at once answer out of order.)"""
        tried = {o.key for o in self.observations if o.source != "screen"}
        return self.predicted_key(cand) not in tried and self.success_probability(cand) >= 0.5 * p_then

    def _only_numeric_changes(self, cand: Candidate) -> bool:
        kinds = [
            f.kind if (f := self.space.get(c.flag)) is not None else "other" for c in cand.diff(self.baseline)
        ]
        return bool(kinds) and all(k == "number" for k in kinds)

    # -- proposing ---------------------------------------------------------------------------------
    def _options(self, f: Factor) -> list[tuple[float, FlagValue | None, float, str]]:
        """(cost, level, p_bad, why) for each distinct effective level of a factor, cheapest first."""
        base = self.base_level(f)
        out: dict[str, tuple[float, FlagValue | None, float, str]] = {}
        # A frozen factor runs one value whatever is asked: keep the baseline's spelling of it.
        levels = [base] if f.name in self.frozen else [base, None, *f.levels]
        for level in levels:
            e = self.eff(f, level)
            p = self.p_bad(f, level)
            if p >= P_INCOMPATIBLE - 1e-9:
                continue  # incompatible by knowledge, or certainly bad after a failure
            changed = (
                normalise(level) != normalise(base)
                if level is not None and base is not None
                else level is not base
            )
            # Knowledge's preference waives the cost of a change; a merely low prior (a flag whose
            # default rarely breaks) does not: leaving the baseline's value is still a change.
            preferred = any(v.kind == "preferred" for v in self.verdicts(f, level))
            cost = -math.log(max(1e-6, 1 - p)) + (self.change_cost if changed and not preferred else 0.0)
            cost += f.level_cost(level)
            why = self._why(f, level, p)
            if e not in out or cost < out[e][0]:
                out[e] = (cost, level, p, why)
        return sorted(out.values(), key=lambda t: t[0])

    def _why(self, f: Factor, level: FlagValue | None, p: float) -> str:
        vs = self.verdicts(f, level)
        if vs:
            return f"{vs[0].kind}: {vs[0].reason}"
        if (f.name, self.eff(f, level)) in self.p:
            return f"suspected by earlier failures (p_bad {p:.2f})"
        return ""

    def propose(self, exclude: set[str] | None = None, max_pops: int = 20000) -> Proposal | None:
        tried = {o.key for o in self.observations} | (exclude or set())
        options = [self._options(f) for f in self.space.factors]
        for i, (f, o) in enumerate(zip(self.space.factors, options, strict=True)):
            if not o:
                # Knowledge rules out every level: nothing in the space can work. Only when it rules
                # out each of them: a level that launched and failed says nothing about the others,
                # and a plan that rules out the low memory fractions says nothing about the high ones
                # that failed for another reason (a graph-capture OOM the batch limit cures).
                vs = [
                    [v for v in self.verdicts(f, lv) if v.kind == "incompatible"] for lv in [None, *f.levels]
                ]
                if all(vs):
                    self.blocked = (f.name, vs[0][0].reason)
                    return None
                # Every level failed, each under some launch: then this factor is not (alone) the
                # cause, and giving up would leave untried what else the evidence implicates (a
                # hang that no custom all-reduce setting cures may be NCCL's P2P). Keep the
                # baseline's level, as likely bad as the evidence says, and search the rest.
                base = self.base_level(f)
                options[i] = [
                    (
                        -math.log(1 - P_EXHAUSTED),
                        base,
                        P_EXHAUSTED,
                        "every level failed under some launch: kept at the baseline's",
                    )
                ]
        start = tuple(0 for _ in options)
        # Equally likely candidates: the one that changes fewer environment variables first. A
        # variable joins the space on weaker evidence than a flag (words its name shares with the
        # failure); when the evidence cannot tell them apart, the flag is the likelier culprit.
        env_at = [i for i, f in enumerate(self.space.factors) if f.is_env]

        def env_changes(idx: tuple[int, ...]) -> int:
            return sum(1 for i in env_at if idx[i])

        heap = [(round(sum(o[0][0] for o in options), 9), 0, start)]
        seen = {start}
        pops = 0
        while heap and pops < max_pops:
            cost, _, idx = heapq.heappop(heap)
            pops += 1
            cand, p_success, reasons, predicted = self._compose(options, idx)
            key = self.predicted_key(cand)
            if key not in tried and self._combination_ok(cand) and not self._variant_of_pending(cand):
                return Proposal(cand, p_success, reasons, predicted, key)
            for i in range(len(idx)):
                if idx[i] + 1 < len(options[i]):
                    nxt = idx[:i] + (idx[i] + 1,) + idx[i + 1 :]
                    if nxt not in seen:
                        seen.add(nxt)
                        delta = options[i][idx[i] + 1][0] - options[i][idx[i]][0]
                        heapq.heappush(heap, (round(cost + delta, 9), env_changes(nxt), nxt))
        return None

    def _compose(self, options, idx) -> tuple[Candidate, float, list[str], dict[str, str]]:
        changes: dict[str, FlagValue | None] = {}
        p_success = 1.0 - self.outside
        reasons, predicted = [], {}
        for f, opts, i in zip(self.space.factors, options, idx, strict=True):
            _, level, p, why = opts[i]
            changes[f.name] = level
            p_success *= 1 - p
            predicted[f.name] = self.eff(f, level)
            base = self.base_level(f)
            if normalise(level) != normalise(base):
                away = (
                    self._why(f, base, self.p_bad(f, base))
                    if base is not None or f.name in self.default_eff
                    else ""
                )
                text = why or (f"away from the baseline's {f.describe_level(base)} ({away})" if away else "")
                if text:
                    reasons.append(f"{f.name} {f.describe_level(level)}: {text}")
        for k, v in self.space.fixed.items():
            changes[k] = v
        cand = self.baseline.with_changes(changes)
        return cand, p_success, reasons, predicted

    def _combination_ok(self, cand: Candidate) -> bool:
        """Rules with `with` conditions judge a level together with the rest of the candidate."""
        flags = cand.flag_dict
        for f in self.space.factors:
            level = f.level_in(flags, cand.env_dict)
            if any(v.kind == "incompatible" for v in self.verdicts(f, level, flags)):
                return False
        return True

    def success_probability(self, cand: Candidate) -> float:
        flags, env = cand.flag_dict, cand.env_dict
        prob = 1.0
        for f in self.space.factors:
            level = f.level_in(flags, env)
            prob *= 1 - self.p_bad(f, level, flags)
        return prob

    def explain_stop(self) -> str:
        """Why nothing (more) can be proposed, from the evidence."""
        fails = [o for o in self.observations if o.outcome.status != "works" and o.source != "journal"]
        if not fails:
            return "nothing was launched"
        if self.blocked:
            return f"nothing in the space can work: no level of {self.blocked[0]} can work here: {self.blocked[1]}"
        if self.unexplained:
            o = self.unexplained[-1].outcome
            parts = []
            for i in o.implicates:
                f = self._factor_for(i)
                if f is None:
                    what = {"model": "the model", "gpu": "the GPU", "host": "the machine"}.get(
                        i.split(".")[0], ""
                    )
                    parts.append(
                        f"{i}"
                        + (
                            f" (a property of {what}, not a launch flag)"
                            if what
                            else " (not in the search space)"
                        )
                    )
                elif f.name in self.frozen:
                    parts.append(f"{f.name} (the engine always uses {self.frozen[f.name][0]})")
            ev = o.evidence[0].strip()[:200] if o.evidence else ""
            same = sum(1 for x in fails if x.outcome.failure_class == o.failure_class)
            msg = (
                f"{o.failure_class} in {o.phase} ({same} of {len(fails)} launches); the evidence implicates only what "
                "no launch flag can change: " + ("; ".join(parts) if parts else "nothing in the space")
            )
            return msg + (f". Evidence: {ev}" if ev else "") + (f". Hint: {o.hint}" if o.hint else "")
        if self.blocked:
            return f"no level of {self.blocked[0]} can work here: {self.blocked[1]}"
        classes: dict[str, int] = {}
        for obs in fails:
            k = obs.outcome.failure_class or obs.outcome.status
            classes[k] = classes.get(k, 0) + 1
        top = max(classes, key=lambda k: classes[k])
        if self.best_left is not None:
            return (
                f"the most likely untried configuration ({self.best_left.changes(self.baseline)}) has only "
                f"{self.best_left.p_success:.1%} chance of working after {len(fails)} failed launches "
                f"({classes[top]} with {top})"
            )
        return (
            f"the space is exhausted: every configuration that could still work was launched or ruled out; "
            f"{classes[top]} of {len(fails)} launches failed with {top}"
        )

    def state(self) -> StrategyState:
        return StrategyState(
            frozen={k: Pinned(value=v, why=w) for k, (v, w) in self.frozen.items()},
            defaults={k: Pinned(value=v, why=w) for k, (v, w) in self.default_eff.items()},
            bounds=self.bounds,
            suspects={
                f"{k[0]}={k[1]}": round(v, 3) for k, v in sorted(self.p.items(), key=lambda kv: -kv[1])[:12]
            },
            notes=self.notes,
        )
