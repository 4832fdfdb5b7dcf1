"""The strategy: which candidate to launch next, and when the search is over.

It holds three things, each in its own module:

- **evidence** (``evidence.py``): what each failed launch names, and which distinct failure it is;
- **beliefs** (``beliefs.py``): one :class:`Blocker` per distinct failure, a posterior over its
  culprits (single levels, pairs of levels that must change together, or nothing in the space),
  updated by every launch through likelihoods; plus what is certain: levels the engine itself
  refused, levels knowledge or the hardware facts exclude, numeric bounds read from the engine's
  own messages;
- **proposal** (``proposal.py``): the untried candidate most likely to get past every blocker and
  to bring no new one, near the configurations that got furthest (progress is kept).

A candidate's chance of working is the product, over blockers, of the chance it avoids each, times
the chance that none of the levels it changes brings a new failure (knowledge's verdicts, the
phases those levels already survived). Nothing is given up before the budget is spent unless the
engine's own refusals or the hardware facts prove that nothing in the space can work: the three
verdicts are validated, impossible here (with that proof) and not found (with the candidates still
believed most likely).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from bringup.core import reserved
from bringup.core.candidate import Candidate, FlagValue, format_value
from bringup.core.datafiles import disguises, hang_implicates
from bringup.env.registry import (
    class_draws_on_every_setting,
    names_absent_component,
    names_class_component,
    names_phase_component,
    one_gpu_components,
)
from bringup.help.text import HelpSpec
from bringup.knowledge.conditions import as_number
from bringup.knowledge.rules import Knowledge, Verdict
from bringup.observe import links
from bringup.observe.effective import normalise, same_value
from bringup.observe.fieldreaders import readers as field_readers
from bringup.observe.links import Setting, model_widths, read_in_module
from bringup.observe.outcome import Outcome
from bringup.observe.ports import server_port_race
from bringup.record.results import Attempt, Pinned, StrategyState
from bringup.search import evidence as ev
from bringup.search.beliefs import INERT, L_FIRED_NOT_HELD, W_FAMILY, Blocker, Condition, Culprit, new_blocker
from bringup.search.envfactors import EnvFactors
from bringup.search.lessons import Lessons
from bringup.search.proposal import Proposal, propose
from bringup.search.screening import ScreeningPolicy
from bringup.search.space import Factor, Space, spec_for_flag

_GUARD = re.compile(r"(^|_)(ALLOW|SKIP|IGNORE|BYPASS|UNSAFE|DISABLE_\w*CHECK)(_|$)")
# The chance that a level brings a failure of its own (before any launch ran it).
P_INCOMPATIBLE, P_RISKY, P_PREFERRED = 0.97, 0.5, 0.02
P_UNSET, P_OTHER, P_BASELINE = 0.05, 0.3, 0.05
P_NUM_STEP, P_NUM_FAR = (
    0.12,
    2.0,
)  # a number moved away from the baseline's: a step, and per relative distance
P_UNSET_ENV = 0.01
P_ADVISED = 0.08  # a value the engine's own log advises
P_NEAR_BOUND = 0.45  # just past an out-of-memory value: probably still too much
# Beyond a number the engine's message gives (free memory, a KV pool's floor): very likely to fail
# again, but one reading of a machine whose memory others share, not the engine refusing the level,
# so it stays a candidate, the last one tried. As a certainty it left some searches nothing to launch
# with budget left (6.7% of the sealed composed faults gave up so).
P_BEYOND_BOUND = 0.96
NEAR_FRACTION = 0.03
# A share of memory over what the machine had free when the run began (less the engine's own
# processes): the engine's start-up check stops it. A prediction from one reading of free memory,
# which others may change, so likely, not certain; within MEM_SLACK of the total, a coin toss.
P_OVER_FREE = 0.9
MEM_SLACK = 0.03
CERTAIN = 0.999
P_KNOWN_GOOD = 0.95
IMPOSSIBLE_OUTSIDE = 0.8  # a failure this sure to lie outside the space, seen twice: impossible here
P_PENDING = 0.6
# What a passed screen leaves for the full launch to show: memory (fewer layers and dummy weights
# use less of it), tensor-parallel start-up (a one-GPU screen has none) and answers (dummy weights
# cannot be checked). A factor's risk is weighed by this share once its screen passed, and only
# the memory blockers still count whole (bringup/search/screening.py: what a screen can and cannot judge).
SCREEN_BLIND = 0.3
# A foreseen failure (expect) that is not there at all: a condition that never holds.
_NOT_THERE = Culprit((Condition("(the lesson does not hold here)", "yes"),))
_SCREEN_BLIND_CLASSES = frozenset({"oom-weights", "oom-kv-cache", "oom-graph-capture", "wrong-output"})


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
    source: str = "launch"  # launch | screen | journal | port
    reach: int = 0
    blocker: str = ""


def _screen_shows(b: Blocker) -> str:
    """What a passed screen says about a blocker: absent, unless a screen cannot judge its kind."""
    return "masked" if b.failure_class in _SCREEN_BLIND_CLASSES else "absent"


@dataclass
class Strategy:
    space: Space
    baseline: Candidate
    knowledge: Knowledge
    spec: HelpSpec | None = None
    change_cost: float = 0.25  # per factor changed from the baseline: prefer small, explainable changes
    screening: ScreeningPolicy | None = None
    env: EnvFactors | None = None
    frozen: dict[str, tuple[str, str]] = field(default_factory=dict)  # factor -> (value, why)
    overridden: dict[str, tuple[str, str]] = field(default_factory=dict)  # user's flag -> (value used, why)
    default_eff: dict[str, tuple[str, str]] = field(default_factory=dict)
    observations: list[Observation] = field(default_factory=list)
    screens_passed: set[str] = field(default_factory=set)  # predicted keys whose screen passed
    # factor -> the machine's GPU count, for the flags whose product is a launch's GPU count
    # (engines.yaml gpus.product): a level above it asks for GPUs that are not there
    gpu_limit: dict[str, int] = field(default_factory=dict)
    # the flags whose product is a launch's GPU count (engines.yaml gpus.product), for inert_factors
    parallel: list[str] = field(default_factory=list)
    # factor -> (GiB free at the engine's start-up check, GiB in all) for the share of memory the
    # engine reserves when it starts (engines.yaml startup_memory): a share over it cannot start
    mem_room: dict[str, tuple[float, float]] = field(default_factory=dict)
    # the flags that split the weights (engines.yaml gpus.shard) and the smallest split whose
    # share of the weights is no more than one GPU's memory (limit_weights); 0: not known
    shard: list[str] = field(default_factory=list)
    min_split: int = 0
    resize: list[str] = field(default_factory=list)  # flags that change the weights' size (quantization)
    # factors a failure of a one-GPU launch named: inert there by the prior (mark_inert), but the
    # evidence says otherwise (NCCL initialises for one rank too), so they act everywhere
    not_inert: set[str] = field(default_factory=set)
    blockers: list[Blocker] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    advised: dict[str, list[str]] = field(default_factory=dict)  # factor -> values the log advised
    passed: dict[tuple[str, str], int] = field(default_factory=dict)  # (factor, level) -> furthest reach
    # what failures said of single levels: refusals, risk floors, numeric bounds (lessons.py)
    lessons: Lessons = field(default_factory=Lessons)
    env_weight: dict[str, float] = field(
        default_factory=dict
    )  # variable -> how directly the last failure named it
    # variable -> values the last failure itself advises ("set NAME=1", "try NAME=1" in its lines or
    # its signature's hint): the way out it names, so never its culprit at that value. Not a flag's
    # remedy: those are read from prose that also says what was asked ("A CUDA device was asked for
    # (--device cuda)" gave "cuda" as advice, and the launch's own --device cuda went unsuspected)
    advised_now: dict[str, set[str]] = field(default_factory=dict)
    best_left: Proposal | None = None
    not_here: set[str] = field(default_factory=set)  # flags named by a log that the target rules out
    _pending_moves: list[frozenset[tuple[str, str]]] = field(default_factory=list)
    _one_gpu_inert: tuple[int, frozenset[str]] = (-1, frozenset())
    # failures lessons of other runs foresee, not yet seen here: key -> {culprit: weight} (expect)
    expected: dict[str, dict[Culprit, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in self.space.factors:
            self._init_factor(f)

    def _init_factor(self, f: Factor) -> None:
        if f.is_env:
            if f.p_unset is None:
                f.p_unset = P_UNSET_ENV
            self._env_defaults(f)
            return
        opt = self.spec.get(f.name) if self.spec is not None else None
        if opt is not None and opt.default not in (None, "None", "") and f.kind in ("number", "choice"):
            self.default_eff[f.name] = (normalise(opt.default), "the engine's --help default")
        forced = self.knowledge.prediction(f.name, "forced")
        if forced is not None:
            self.frozen[f.name] = (normalise(forced.value), f"rule {forced.rule_id}: {forced.reason}")
        dflt = self.knowledge.prediction(f.name, "default")
        if dflt is not None:
            self.default_eff[f.name] = (normalise(dflt.value), f"rule {dflt.rule_id}: {dflt.reason}")

    def _env_defaults(self, f: Factor) -> None:
        if self.env is None:
            return
        d = self.env.default(f.dest)
        # a variable the user set is two levels, as given and unset, whatever the registry says its
        # default is: the snapshot may not be the installed version's, and code that asks whether
        # it is set at all reads the two apart (issue 36: every setting of theirs can be undone)
        if d is not None and f.dest not in self.baseline.env_dict:
            self.default_eff.setdefault(f.name, (d, "the engine's registry default"))
        if self.env.ignored(f.dest):
            value = self.default_eff.get(f.name, (ev.UNSET_DEFAULT, ""))[0]
            self.frozen[f.name] = (
                value,
                f"{f.dest} is not read by this engine version: setting it changes nothing",
            )

    def add_factor(self, f: Factor) -> None:
        """A factor joins the space mid-run (a variable or flag the evidence called for). Launches
        already made had it at its default: their identities are recomputed."""
        if self.space.get(f.name) is not None:
            return
        self.space.factors.append(f)
        self._init_factor(f)
        self._rekey()

    # -- what the lessons hold, for readers outside the search --------------------------------------
    @property
    def blocked(self) -> tuple[str, str] | None:
        """A factor the engine refused every level of, and why (the proof of "impossible here")."""
        return self.lessons.blocked

    @property
    def bounds(self) -> dict[str, list[float | None]]:
        """Numeric bounds read from the engine's messages: factor -> [lo, hi] excluded."""
        return self.lessons.bounds

    # -- effective values ------------------------------------------------------------------------
    def base_level(self, f: Factor) -> FlagValue | None:
        return f.level_in(self.baseline.flag_dict, self.baseline.env_dict)

    def _imposed(self, f: Factor, level: FlagValue | None) -> str | None:
        """The value the engine runs whatever this level asks: a frozen factor's, or, for a level
        asked of a user's flag the engine overrode, the override's (taken to hold alike; only
        dropping the flag is another configuration). None where the level stands for itself."""
        if f.name in self.frozen:
            return self.frozen[f.name][0]
        if f.name in self.overridden and level is not None and level is not False:
            return self.overridden[f.name][0]
        return None

    def eff(self, f: Factor, level: FlagValue | None) -> str:
        imposed = self._imposed(f, level)
        if imposed is not None:
            return imposed
        if (
            level is None
            or level is False
            or (isinstance(level, str) and level.lower() == "auto" and f.name in self.default_eff)
        ):
            d = self.default_eff.get(f.name)
            return normalise(d[0]) if d is not None else ev.UNSET_DEFAULT
        return normalise(level)

    def predicted_key(self, cand: Candidate) -> str:
        """Identity of what the engine would really run: factors by predicted effective value."""
        flags, env = cand.flag_dict, cand.env_dict
        parts = [f"{f.name}={self.eff(f, f.level_in(flags, env))}" for f in self.space.factors]
        names = set(self.space.names)
        rest = sorted(f"{k}={normalise(v)}" for k, v in flags.items() if k not in names)
        rest += sorted(f"env:{k}={v}" for k, v in env.items() if "env:" + k not in names)
        return "|".join(parts + rest)

    def levels_of(self, cand: Candidate, inert: bool = True) -> dict[str, str]:
        flags, env = cand.flag_dict, cand.env_dict
        levels = {f.name: self.eff(f, f.level_in(flags, env)) for f in self.space.factors}
        return self.mark_inert(levels) if inert else levels

    def mark_inert(self, levels: dict[str, str]) -> dict[str, str]:
        """Levels with the factors that cannot act at them marked INERT: on a launch of one GPU
        (the product of its parallel sizes), nothing talks to a peer, so NCCL, custom all-reduce
        and symmetric-memory settings (relevance.yaml components that need two GPUs) do nothing.
        A culprit on an inert factor is not held there: a one-GPU launch that did not hang says
        nothing against NCCL_P2P_DISABLE as the cause of a hang at four. A prior, which a failure
        that names the setting overrules (not_inert). An unset size counts as unknown, not as one
        (SGLang's --help gives --tp-size no default): read as one, it cost the sealed splits
        (docs/composed-faults.md, 2026-12-06)."""
        gpus = 1.0
        for name in self.parallel:
            n = as_number(levels.get(name, ""))
            if n is None:
                return levels
            gpus *= n
        if not self.parallel or gpus > 1:
            return levels
        for name in self._inert_on_one_gpu():
            if name in levels and name not in self.not_inert:
                levels[name] = INERT
        return levels

    def _inert_on_one_gpu(self) -> frozenset[str]:
        n, names = self._one_gpu_inert
        if n == len(self.space.factors):
            return names
        comps = one_gpu_components()
        # a component that names a parallel flag itself (distributed: "tensor parallel") is not one
        # of them: the parallel size is what makes the launch one GPU
        comps = frozenset(c for c in comps if not any(names_absent_component(p, {c}) for p in self.parallel))
        names = frozenset(
            f.name
            for f in self.space.factors
            if f.name not in self.parallel and names_absent_component(f.name, comps)
        )
        self._one_gpu_inert = (len(self.space.factors), names)
        return names

    def factor_for(self, name: str) -> Factor | None:
        f = self.space.get(name)
        if f is None and self.spec is not None and name.startswith("--"):
            opt = self.spec.resolve(name)
            f = self.space.get(opt.name) if opt else None
        if f is None and name.startswith("env:") is False and not name.startswith("--"):
            f = self.space.get("env:" + name)
        return f

    def _flag_factor(self, name: str) -> Factor | None:
        """The factor for a flag a remedy names; a flag the engine has but the space lacks joins it,
        by the built-in list's entry where it has one, unless the target rules it out (a MoE
        backend that a wrong answer implicates, on a dense model)."""
        f = self.factor_for(name)
        if f is not None or self.spec is None or not name.startswith("--"):
            return f
        opt = self.spec.resolve(name)
        if opt is None or opt.name in self.space.fixed or opt.name in self.not_here:
            return None
        if reserved.role_of(opt.name, self.space.engine, self.spec) is not None:
            # bringup sets it on every launch (the server's port, host, model): a signature that
            # implicates --port names bringup's own choice, never a level to search
            return None
        f = spec_for_flag(self.space.engine, opt.name, self.spec)
        if f is None:
            kind = "choice" if opt.takes_value else "switch"
            levels: list[FlagValue] = (
                list(opt.choices) if opt.choices else ([] if opt.takes_value else [True])
            )
            f = Factor(opt.name, kind, levels, opt.dest, {}, None, "log")
        f.levels = [lv for lv in f.levels if not self.space.target.unwanted_level(str(lv))]
        why = self.space.target.why_not(f)
        if why is not None:
            self.not_here.add(opt.name)
            self.notes.append(f"{opt.name} is named by the log but not searched on this target: {why}")
            return None
        self.add_factor(f)
        self.notes.append(f"{opt.name} joined the search space: the engine's log names it")
        return f

    # -- knowledge -------------------------------------------------------------------------------
    def _level_for_verdicts(self, f: Factor, level: FlagValue | None) -> FlagValue | None:
        imposed = self._imposed(f, level)
        if imposed is not None:
            return imposed
        if level is None and f.name in self.default_eff:
            return self.default_eff[f.name][0]
        return level

    def verdicts(self, f: Factor, level: FlagValue | None, others: dict[str, FlagValue] | None = None):
        lv = self._level_for_verdicts(f, level)
        if lv is None:
            return []
        return self.knowledge.verdicts(f.name, lv, others if others is not None else self.baseline.flag_dict)

    def risk(self, f: Factor, level: FlagValue | None, others: dict[str, FlagValue] | None = None) -> float:
        """The chance that this level brings a failure of its own (not one already seen)."""
        e = self.eff(f, level)
        if (f.name, e) in self.lessons.refused:
            return 1.0
        num = as_number(e) if f.kind == "number" else None
        if num is not None:
            lo, hi = self.lessons.bounds.get(f.name, [None, None])
            if (hi is not None and num >= hi - 1e-9) or (lo is not None and num <= lo + 1e-9):
                return max(P_BEYOND_BOUND, self.lessons.risk_floor.get((f.name, e), 0.0))
        r = self._own_risk(f, level, e, num, others)
        reach = self.passed.get((f.name, e))
        if reach is not None:
            r *= 1 - ev.survived(reach)  # a level that got a launch this far brings no failure before it
        return max(r, self.lessons.risk_floor.get((f.name, e), 0.0))

    def _near_bound(self, f: Factor, num: float) -> bool:
        """Just past a number that ran out of memory: probably still too much (0.95 failed: 0.92)."""
        if f.name not in self.lessons.near:
            return False
        v, direction = self.lessons.near[f.name]
        window = NEAR_FRACTION if v <= 1.0 else v * 0.4
        return (direction == "lower" and v - window <= num < v) or (
            direction == "raise" and v < num <= v + window
        )

    def _own_risk(
        self,
        f: Factor,
        level: FlagValue | None,
        e: str,
        num: float | None,
        others: dict[str, FlagValue] | None,
    ) -> float:
        """The risk of a level before what launches with it survived: knowledge, advice, distance."""
        kinds = {v.kind for v in self.verdicts(f, level, others)}
        base = self.base_level(f)
        if "incompatible" in kinds or self.over_gpus(f, e) or self.under_split(f, e, others):
            return P_INCOMPATIBLE
        if "risky" in kinds:
            r = P_RISKY
        elif "preferred" in kinds:
            r = P_PREFERRED
        elif e == self.eff(f, base):
            r = P_BASELINE
        elif e in (normalise(v) for v in self.advised.get(f.name, [])):
            r = P_ADVISED
        elif num is not None and (b := as_number(self.eff(f, base))) is not None:
            # A number far from the baseline's risks the other side: less memory for the KV cache
            # when a fraction goes down, a smaller batch than the load needs.
            r = P_NUM_STEP + min(0.6, P_NUM_FAR * abs(num - b) / max(abs(b), 1e-9))
        elif level is None:
            r = f.p_unset if f.p_unset is not None else P_UNSET
        else:
            r = P_OTHER
        if num is not None and self._near_bound(f, num):
            r = max(r, P_NEAR_BOUND)
        if num is not None and f.name in self.mem_room:
            # a hazard of its own, beside the distance from the user's value: both must be escaped
            r = 1 - (1 - r) * (1 - self._over_free(num, *self.mem_room[f.name]))
        # a variable that overrides one of the engine's own checks hides a failure, it does not fix
        # it (VLLM_ALLOW_LONG_MAX_MODEL_LEN past the model's length): a last resort
        guard = f.is_env and e != self.eff(f, base) and bool(_GUARD.search(f.dest))
        return max(r, P_RISKY) if guard else r

    # -- what other runs learned (bringup/session/learned.py) -----------------------------------------
    def expect(
        self,
        key: str,
        cls: str,
        phase: str | None,
        cure: dict[str, FlagValue | None],
        weight: float,
        why: str,
    ) -> list[str]:
        """A failure (``key``, as evidence.blocker_key gives it) this run is expected to meet, with
        the changes that cured it elsewhere (flag or env:NAME -> value, None: dropped), believed
        with ``weight`` because ``why``: a predicted blocker whose culprit is the levels the cure
        changes (each of them: the cure needed all), and with the rest of the weight not there at
        all; the cure's values join the levels to try. Launches update it as any blocker; when the
        failure is seen, its own evidence is read and this culprit kept beside it with ``weight``.
        A prior, never a certainty. Returns the factors it names (none: nothing in this space)."""
        conds: list[Condition] = []
        for name, value in cure.items():
            f = self._flag_factor(name)
            if f is None or f.name in self.frozen or weight <= 0:
                continue
            conds.append(Condition(f.name, self.eff(f, self.base_level(f))))
            if (
                value is not None
                and value is not True
                and not any(normalise(x) == normalise(value) for x in f.levels)
            ):
                f.levels.insert(0, value)
        if not conds:
            return []
        culprit = Culprit(tuple(conds))
        foreseen = {**self.expected.get(key, {}), culprit: weight}  # two lessons of one failure: both
        status = "wrong-output" if key.startswith("wrong-output|") else "fails"
        rank = ev.reach_of(Outcome(status=status, failure_class=cls, phase=phase))
        post = {**foreseen, _NOT_THERE: math.prod(1 - w for w in foreseen.values())}
        self.blockers = [b for b in self.blockers if not (b.key == key and key in self.expected)]
        self.blockers.append(Blocker(key, cls, rank, 0, f"expected: {why}"[:300], post, seen=0))
        self.blockers[-1].normalise()
        self.expected[key] = foreseen
        self.notes.append(f"expected {cls} ({weight:.0%}), cured by changing {culprit.describe()}: {why}")
        return [c.factor for c in conds]

    # -- learning from outcomes ------------------------------------------------------------------
    def observe(self, cand: Candidate, outcome: Outcome, source: str = "launch") -> Observation:
        if server_port_race(outcome):  # the machine's race for the server's port: nothing learned
            return Observation(cand, outcome, self.predicted_key(cand), "port")
        self._read_effective(cand, outcome)
        obs = Observation(cand, outcome, self.predicted_key(cand), source, ev.reach_of(outcome))
        self.observations.append(obs)
        if source == "screen" and outcome.status == "works":
            # A screen that passed went past every failure a screen can show (a kernel, a backend,
            # a refused argument): those blockers are absent at its levels. Memory and answers are
            # for the full launch to say.
            self.screens_passed.add(obs.key)
            for b in self.blockers:
                if _screen_shows(b) == "absent":
                    b.update(self.levels_of(cand), "absent")
            return obs
        if outcome.status != "works":
            self.lessons.read(self, cand, outcome, obs.key, len(self.observations))
            self._grow_env(outcome)
        levels = self.levels_of(cand)
        for name, e in levels.items():
            if obs.reach > self.passed.get((name, e), -1):
                self.passed[(name, e)] = obs.reach
        if outcome.status == "works" or outcome.status == "cancelled":
            for b in self.blockers:
                b.update(levels, "absent")
            return obs
        if outcome.status == "timeout" and outcome.failure_class is None:
            return obs  # a deadline, not evidence about any setting
        key = self._failure_key(outcome)
        obs.blocker = key
        current = self._blocker_seen(key)
        for b in self.blockers:
            if b is current:
                b.update(levels, "fired")
            elif source == "screen" and _screen_shows(b) == "masked":
                continue  # a screen past a memory blocker's phase says nothing of memory
            else:
                b.update(levels, self._shown(b, obs.reach, key, outcome), key)
        if current is not None:
            current.seen += 1
        else:
            self._new_blocker(cand, outcome, obs, levels, key)
        return obs

    def _failure_key(self, outcome: Outcome) -> str:
        """The failure's key (evidence.blocker_key); the same root exception read once without a
        class (`unknown`: its traceback had not reached the log when the server was stopped) and
        once with one is the failure seen before, under that one's key (evidence.raised_identity);
        so is the same exception raised at the same place (file and line, evidence.raised_at),
        whatever class each launch's settings made of it (a variable bringup had just set, read by
        the failing module, made the next reading `bad-flag`: as two failures, the change took the
        blame for an error that was there before it). Two classes of one message with no place in
        common stay two failures: the class then may say what the launch's own settings selected,
        and that difference is evidence (merged, a composed-fault split never read, sealed4, fell
        from 96.7% to 91.7%)."""
        key = ev.blocker_key(outcome)
        ident = ev.raised_identity(outcome)
        if ident is None:
            return key
        seen = next(
            (o.blocker for o in self.observations if o.blocker and ev.raised_identity(o.outcome) == ident),
            key,
        )
        unread = outcome.failure_class == "unknown" or seen.startswith("unknown|")
        site = ev.raised_at(outcome)
        same_site = site is not None and any(
            o.blocker == seen and ev.raised_at(o.outcome) == site for o in self.observations
        )
        return seen if unread or same_site else key

    def _blocker_seen(self, key: str) -> Blocker | None:
        """The blocker of a failure seen before; None for a new one, and for one only a lesson
        foresaw (expect): its own evidence is read now (_new_blocker keeps the lesson's culprit)."""
        current = next((b for b in self.blockers if b.key == key), None)
        if current is not None and key in self.expected:
            self.blockers.remove(current)
            return None
        return current

    @staticmethod
    def _shown(b: Blocker, reach: int, key: str, outcome: Outcome | None = None) -> str:
        if b.key.startswith("wrong-output|") and outcome is not None:
            # a wrong answer is a failed probe: absent when a launch that served passed those probes
            checks = set(b.key.split("|", 1)[1].split(","))
            passed = {p.name for p in outcome.probes if p.passed}
            failed = {p.name for p in outcome.probes if not p.passed}
            if outcome.status == "works" or (checks and checks <= passed):
                return "absent"
            return "same-phase" if checks & failed else "masked"
        if reach > b.phase_rank:
            if outcome is not None and outcome.failure_class in disguises().get(b.failure_class, ()):
                return "same-phase"  # it may have been this failure in another dress (classes.yaml)
            return "absent"
        if reach == b.phase_rank and key != b.key:
            return "same-phase"
        return "masked"

    def _new_blocker(
        self, cand: Candidate, outcome: Outcome, obs: Observation, levels: dict[str, str], key: str
    ) -> None:
        base_levels = self.levels_of(self.baseline, inert=False)
        # read with every factor at its level: that a one-GPU launch has no peer is a prior, and a
        # failure that names an NCCL variable all the same overrules it (not_inert)
        raw = self.levels_of(cand, inert=False)
        # what this launch set away from the baseline, for a failure nothing else explains: a
        # setting put back to the engine's own default is not one (the default is the engine's
        # tested path, and a person who got further by undoing their settings does not put them
        # back for a failure that names nothing)
        default = {f.name: self.eff(f, None) for f in self.space.factors}
        changed = {n for n, e in raw.items() if base_levels.get(n) != e and e != default.get(n)}
        named = ev.relevance(
            outcome,
            self.space.factors,
            raw,
            changed,
            self._flag_factor,
            self._aliases(),
            self._settings(cand, raw),
            self.space.engine,
            model_widths(self.space.target.facts),
        )
        woken = {n for n, w in named.weights.items() if w >= ev.W_SIGNATURE / 2 and levels.get(n) == INERT}
        self.not_inert |= woken
        if not any(w >= ev.W_ENV_NAMED for w in self.env_weight.values()):
            ev.phase_weights(named, outcome, self._flag_factor)  # nothing named: the phase's settings
        levels = self.levels_of(cand)  # a remedy may have added a factor
        self._take_advice(named)
        weights = self._culprit_weights(
            levels, named, outcome.failure_class or "", outcome.phase, list(outcome.frames or [])
        )
        weights.update(self._named_families(levels, outcome))
        outside = ev.OUTSIDE_MACHINE if self._machine_only(outcome, named) else ev.OUTSIDE_PRIOR
        b = new_blocker(
            key,
            outcome.failure_class or outcome.status,
            obs.reach,
            len(self.observations),
            (ev.root_line(outcome) or "")[:300],
            weights,
            outside,
        )
        for culprit, w in self.expected.pop(
            key, {}
        ).items():  # foreseen by a lesson: kept beside the evidence
            b.post[culprit] = b.post.get(culprit, 0.0) + w * (
                1.0 if culprit.held(levels) else L_FIRED_NOT_HELD
            )
        b.normalise()
        for o in self.observations[:-1]:
            if o.source in ("launch", "screen", "dry-run") and o.outcome.status != "cancelled":
                if o.source == "screen" and _screen_shows(b) == "masked":
                    continue  # a screen says nothing of memory or answers
                shown = (
                    "absent" if o.outcome.status == "works" else self._shown(b, o.reach, o.blocker, o.outcome)
                )
                b.update(self.levels_of(o.candidate), shown, o.blocker or None)
        self.blockers.append(b)
        top = b.top(2)
        self.notes.append(
            f"launch {len(self.observations)}: new failure ({b.failure_class}); most likely "
            + "; ".join(f"{c.describe()} ({p:.0%})" for c, p in top)
        )

    def _culprit_weights(
        self,
        levels: dict[str, str],
        named: ev.Named,
        cls: str,
        phase: str | None = None,
        frames: list[str] | None = None,
    ) -> dict[Condition, float]:
        """A new failure's single culprits, each weighed by how directly the failure names its
        factor (evidence.relevance), the user's own choices among them raised (W_USER_SET), and
        the user's own variables for a component the failure's class implicates or that the failing
        code's modules read (bringup/env/readers.py), the user's own settings for a component whose
        work the failing phase is (--nnodes in the distributed start-up, --kv-cache-dtype in the KV
        cache's allocation: a person asks which of their settings touch what failed), and every
        setting of theirs for a class whose resource all settings draw on (memory), raised to
        W_USER_COMPONENT."""
        weights: dict[Condition, float] = {}
        # the user's own settings are the first suspects of a failure that names nothing; beside
        # a failure that names its settings, they stay weak ones (ev.W_USER_PRIOR)
        named_any = named.strong(ev.W_SIGNATURE / 2)  # leads (a word, the phase) name nothing
        user_prior = 3 * ev.W_BASE_FLAG if named_any else ev.W_USER_PRIOR
        # an out-of-memory: every setting draws on the memory, and the engine's advice (the
        # fraction, the context) says what to move, not what ate it (relevance.yaml `shared`)
        shared = class_draws_on_every_setting(cls)
        phase_list = set(hang_implicates().get(phase or "", ()))
        for f in self.space.factors:
            if f.name in self.frozen or levels[f.name] == INERT:
                continue  # (an inert factor cannot have caused what this launch showed)
            if f.name in self.lessons.adjusted:
                # a number the failure says must move one way (an out-of-memory: the memory
                # fraction down) is a culprit at this value *and beyond* it (_thresholds): the
                # value alone would let a larger one look like an escape from too much memory
                continue
            mine = self._user_set(f, levels[f.name])
            base = user_prior if mine else (ev.W_BASE_ENV if f.is_env else ev.W_BASE_FLAG)
            if levels[f.name] in self.advised_now.get(f.name, ()):
                # the launch already runs the level this failure advises ("try NCCL_P2P_DISABLE=1"
                # with it set): the failure names it as the way out, not as what failed; a failure
                # that then persists was behind the one that level fixed
                weights[Condition(f.name, levels[f.name])] = base
                continue
            w = named.weights.get(f.name, 0.0) + base
            if named.weights.get(f.name, 0.0) > 0 and mine:
                w = max(w, ev.W_USER_SET)
            elif mine and (
                shared
                or (f.is_env and names_class_component(f.dest, cls))
                or (f.is_env and self._read_by_failing_code(f, frames or []))
                # a setting on the phase's own list of suspects (classes.yaml hang_implicates) is
                # weighed by that list already: the phase is one piece of evidence, counted once
                # (the user's --tensor-parallel-size 4, which their 70 B model needs, on a hang's
                # list of the distributed start-up)
                or (names_phase_component(f.dest, phase) and f.name not in phase_list)
            ):
                w = max(w, ev.W_USER_COMPONENT)
            w = max(w, self.env_weight.get(f.name, 0.0))
            weights[Condition(f.name, levels[f.name])] = w
            family = self._family(f, levels[f.name])
            if family:  # kernels of one family tend to fail together (flashmla_kv, flashmla_sparse)
                weights[Condition(f.name, "|".join(sorted(family)), "in")] = w * W_FAMILY
        for name, direction in self.lessons.adjusted.items():
            weights.update(self._thresholds(name, levels[name], direction))
        return weights

    def _read_by_failing_code(self, f: Factor, frames: list[str]) -> bool:
        """A module among the failing frames reads this variable (bringup/env/readers.py)."""
        if self.env is None or not frames:
            return False
        return read_in_module(self.env.read_in().get(f.dest, ()), frames, self.space.engine) is not None

    def _settings(self, cand: Candidate, levels: dict[str, str]) -> list[Setting]:
        """The launch's settings as the failure links read them (bringup/observe/links.py): each
        factor's value in this launch as given, its destination and --help group, and whether it is
        the user's own choice. A factor the engine overrides here (frozen) is left out: what ran
        was not its value."""
        flags, env = cand.flag_dict, cand.env_dict
        readers = self._field_readers()
        out = []
        for f in self.space.factors:
            if f.name in self.frozen or levels.get(f.name) == INERT:
                continue
            lv = f.level_in(flags, env)
            opt = None if f.is_env or self.spec is None else self.spec.get(f.name)
            value = "" if lv is None or lv is False else format_value(lv)
            out.append(
                Setting(
                    f.name,
                    value,
                    f.dest,
                    opt.section if opt else None,
                    self._user_set(f, levels[f.name]),
                    () if f.is_env else readers.get(f.dest, ()),
                )
            )
        return out

    def _field_readers(self) -> Mapping[str, tuple[str, ...]]:
        """Where this engine version's code reads each setting's field (bringup/observe/fieldreaders.py)."""
        version = self.env.registry.version if self.env is not None else None
        return field_readers(self.space.engine, version)

    def _user_set(self, f: Factor, level: str) -> bool:
        """The level is the user's own choice: the baseline sets it, to something other than what
        the engine would pick by itself."""
        return level == self._users_level(f)

    def _users_level(self, f: Factor) -> str | None:
        """The user's own choice of this factor (the baseline's effective level, set to other than
        what the engine picks by itself); None where the user left it."""
        base = self.base_level(f)
        if base is None or base is False:
            return None
        mine = self.eff(f, base)
        return mine if mine != self.eff(f, None) else None

    def _users_factors(self) -> list[Factor]:
        """The factors the user set (their level is the user's own choice), the engine's overrides
        left out: what ran was not the user's value."""
        return [
            f for f in self.space.factors if f.name not in self.frozen and self._users_level(f) is not None
        ]

    def _named_families(self, levels: dict[str, str], outcome: Outcome) -> dict[Condition, float]:
        """A kernel family the failure names (a library in a failing frame's path, the kernel a load
        line says was selected): every level of a factor in that family is a suspect together, the
        launch's own level with them when the engine chose it (a default, auto), so the way out is a
        level outside the family, not a sibling of the one that failed (vLLM's flashinfer_cutlass
        after flashinfer_trtllm). Weighed as a signature's first suspect: a lead, not a proof."""
        in_frames = {t for t in links.library_tokens(outcome.frames or [], self.space.engine) if len(t) >= 5}
        named = set(in_frames)
        if outcome.frames:
            # what the engine says it selected is printed by every launch, working ones too: it
            # names the family of a failure raised in the engine's code, not of fluent wrong output
            named |= links.selected_tokens([*(outcome.selected or []), *outcome.evidence])
        named = {t for t in named if len(t) >= 5}
        if not named:
            return {}
        # the kernel factors with a level in that family: every one whose launch level is in it, or
        # whose level the engine chose (a default, auto: it may be one of them)
        kernels: list[tuple[Factor, str, set[str]]] = []
        for f in self.space.factors:
            cur = levels.get(f.name)
            if f.kind != "choice" or f.is_env or cur in (None, INERT) or f.name in self.frozen:
                continue
            fam = {e for lv in f.levels if set(links.words(e := self.eff(f, lv))) & named}
            chose = cur == ev.UNSET_DEFAULT or cur == "auto" or self.eff(f, None) == cur
            if fam and (cur in fam or chose):
                kernels.append((f, cur, fam))
        # of those, the ones the failure's own words are about ("...LinearKernel" for
        # --linear-backend), when some are: a family word alone (cutlass) names kernels of several
        # components. Asked of these factors only: a word of any other setting (the all-reduce
        # backends a selection line lists) once left the attention backend out of a flashinfer
        # failure it could be the cause of.
        in_code = {links.stem(w) for text in (outcome.frames or [])[-4:] for w in links.words(text)}
        said = in_code | {links.stem(w) for text in outcome.selected or [] for w in links.words(text)}
        about = {f.name for f, _, _ in kernels if links.subject_words(f.dest, 3) & said}
        # the library the frames name, as the kernel levels spell it (flashinfer, not the sampler's
        # own words a library token may carry)
        library = {links.stem(w) for _, _, fam in kernels for e in fam for w in links.words(e)}
        library &= {links.stem(t) for t in in_frames}
        if not any(links.subject_words(f.dest, 3) & in_code for f, _, _ in kernels) and (
            self._library_switched_here(library, in_code, {f.name for f, _, _ in kernels})
        ):
            return {}
        own = in_frames | {links.stem(w) for text in outcome.frames or [] for w in links.words(text)}
        out: dict[Condition, float] = {}
        for f, cur, fam in kernels:
            if about and f.name not in about:
                continue
            # a family only a selection line names (every launch prints it) is this failure's only
            # where the failing frames are about that factor's component (a failure in the MoE
            # routing capturer once blamed "Using FLASH_ATTN attention backend", 36%)
            if not any({links.stem(w) for w in links.words(e)} & own for e in fam) and not (
                links.subject_words(f.dest, 3) & own
            ):
                continue
            out[Condition(f.name, "|".join(sorted(fam | {cur})), "in")] = ev.W_SIGNATURE
            self.notes.append(
                f"launch {len(self.observations)}: the failure names the {'/'.join(sorted(named))} kernels; "
                f"{f.name} {', '.join(sorted(fam))} suspected together"
            )
        return out

    def _library_switched_here(self, library: set[str], in_code: set[str], kernels: set[str]) -> bool:
        """A setting other than the kernel factors switches this library on in the component the
        failing frames are in: its name holds the library's ("VLLM_USE_FLASHINFER_SAMPLER") and its
        other words the frames' ("topk_topp_sampler.py"). The library was called by that
        component's code, not by an attention or GEMM backend of the same family: a FlashInfer
        sampler's JIT failure once made the flashinfer levels of --linear-backend and
        --attention-backend first suspects, and six launches went to them."""
        package = {links.stem(w) for w in ("vllm", "sglang", "transformers", self.space.engine or "")}
        for f in self.space.factors:
            if f.name in kernels or f.name in self.frozen:
                continue
            sw = links.subject_words(f.dest, 4) - package
            if sw & library and (sw - library) & in_code:
                return True
        return False

    def _family(self, f: Factor, level: str) -> set[str]:
        """The levels of a choice factor that share this one's family (the first word of the name),
        this one included; empty when it has no sibling."""
        head = level.split("_")[0]
        if f.kind != "choice" or len(head) < 3 or as_number(level) is not None:
            return set()
        sib = {e for lv in f.levels if (e := self.eff(f, lv)).split("_")[0] == head}
        return sib | {level} if sib - {level} else set()

    def _thresholds(self, name: str, cur: str, direction: str) -> dict[Condition, float]:
        """Culprits of a number a failure says must move: "at least cur" (or "at most"), then the
        listed levels past it, each half as likely (a step of a few points is the likeliest cure)."""
        f = self.space.get(name)
        c = as_number(cur)
        if f is None or c is None:
            return {}
        nums = sorted({n for lv in [None, *f.levels] if (n := as_number(self.eff(f, lv))) is not None})
        past = [n for n in nums if n < c] if direction == "lower" else [n for n in nums if n > c]
        past = sorted(past, reverse=direction == "lower")
        op = "ge" if direction == "lower" else "le"
        out = {Condition(name, normalise(cur), op): 2.0}
        for k, n in enumerate(past[:4]):
            out[Condition(name, normalise(str(n)), op)] = 2.0 / 3 ** (k + 1)
        return out

    def _aliases(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        if self.spec is None:
            return out
        for f in self.space.factors:
            opt = None if f.is_env else self.spec.get(f.name)
            if opt is not None and opt.aliases:
                out[f.name] = tuple(a for a in opt.aliases if not a.startswith("--"))
        return out

    def _take_advice(self, named: ev.Named) -> None:
        """Values the log advises become levels, and the likeliest of them."""
        for name, vals in named.advised.items():
            f = self.space.get(name)
            if f is None:
                continue
            for v in vals:
                if f.kind != "switch" and not any(normalise(x) == normalise(v) for x in f.levels):
                    f.levels.insert(0, v)
                self.advised.setdefault(name, []).append(v)

    def _machine_only(self, outcome: Outcome, named: ev.Named) -> bool:
        """The failure implicates only the model or the machine, or settings the engine does not let
        a launch change (frozen), and names nothing else strongly."""
        if not outcome.implicates:
            return False
        for i in outcome.implicates:
            g = self.factor_for(i)
            if (
                i.split(".")[0] not in ("model", "gpu", "host")
                and g is not None
                and g.name not in self.frozen
            ):
                return False
        return not named.strong(ev.W_SIGNATURE / 3, self.frozen)

    def _read_effective(self, cand: Candidate, outcome: Outcome) -> None:
        """What the engine really used: overrides freeze a factor (the user's own flag is only noted
        as overridden), defaults name "unset". The launches made so far are identified again when a
        value changed (a launch that left a default is the same configuration as one that named
        it): a stale identity would launch it twice."""
        flags = cand.flag_dict
        changed = False
        for f in self.space.factors:
            if f.is_env or f.dest not in outcome.effective:
                continue
            eff = normalise(outcome.effective[f.dest])
            req = flags.get(f.name)
            if req is None or normalise(req) == "auto":
                changed |= self.default_eff.get(f.name, ("",))[0] != eff
                self.default_eff[f.name] = (eff, f"seen in launch {len(self.observations) + 1}")
            elif f.name in self.frozen:
                continue
            elif req == self.base_level(f):
                changed |= self._note_override(f, req, outcome.effective[f.dest])
            elif not same_value(req, outcome.effective[f.dest]):
                changed = True
                self.frozen[f.name] = (
                    eff,
                    f"engine used {eff} when {req} was asked (launch {len(self.observations) + 1})",
                )
        if changed:
            self._rekey()

    def _note_override(self, f: Factor, req: FlagValue, used: object) -> bool:
        """The user's own flag, and what the engine ran for it: overridden is noted, never frozen
        (issue 36, item 1: every setting of theirs can be undone; an override may hold only beside
        another setting, and a flag may do more than the one value the engine reports). Its other
        levels are taken to be overridden alike; dropping it stays another configuration. An
        override a later launch does not repeat (it held beside another setting) is forgotten."""
        if same_value(req, used):
            return self.overridden.pop(f.name, None) is not None
        if f.name in self.overridden:
            return False
        eff = normalise(used)
        why = f"engine used {eff} when {req} was asked (launch {len(self.observations) + 1})"
        self.overridden[f.name] = (eff, why)
        self.notes.append(
            f"{f.name}: the {why}; another level is taken to be overridden alike, and dropping the"
            " user's flag stays a candidate"
        )
        return True

    def _rekey(self) -> None:
        """Every launch's identity again, from what is known now of the engine's values."""
        for o in self.observations:
            o.key = self.predicted_key(o.candidate)
        self.screens_passed = {
            o.key for o in self.observations if o.source == "screen" and o.outcome.status == "works"
        }

    def _grow_env(self, outcome: Outcome) -> None:
        """Variables this failure calls for join the space (named by its lines, or ranked)."""
        self.env_weight = {}
        self.advised_now = {}
        if self.env is None:
            return
        # A failure that implicates only what no launch changes (the model's head size) is not
        # second-guessed by variables that merely share its words; a variable the log names is.
        own_fix = (outcome.failure_class or "").startswith("oom")
        props = self.env.after_failure(outcome, self.space.names)
        joining = {p.factor.name for p in props}
        # (an implicated variable that joins now is inside the space, not outside it)
        outside_only = bool(outcome.implicates) and all(
            ((g := self.factor_for(i)) is None and i not in joining)
            or (g is not None and g.name in self.frozen)
            for i in outcome.implicates
        )
        for prop in props:
            if outside_only and prop.factor.origin != "log":
                continue
            # An out-of-memory names its own fix (the numbers to move): a variable that merely shares
            # its words comes after them.
            if not prop.named or (own_fix and prop.factor.origin != "log"):
                prop.factor.origin = "ranked"
                prop.named = False
            self.env_weight[prop.factor.name] = ev.W_ENV_NAMED if prop.named else ev.W_ENV_RANKED
            if prop.advised is not None:
                self.advised_now.setdefault(prop.factor.name, set()).add(normalise(prop.advised))
                if prop.advised not in self.advised.get(prop.factor.name, []):
                    self.advised.setdefault(prop.factor.name, []).append(prop.advised)
            if not prop.known:
                self.add_factor(prop.factor)
                self.notes.append(f"{prop.factor.name} joined the search space: {prop.why}")

    # -- deciding the next launch ------------------------------------------------------------------
    def limit_gpus(self, parallel_flags: list[str], gpus: int) -> None:
        """The machine has ``gpus`` GPUs: a parallel size above that (tensor, pipeline, data
        parallel: the flags whose product is the GPU count) is as good as incompatible. A fact of
        the hardware, not a rule of any engine or model; a level only, so still tried if nothing
        else is left. The flags also say how many GPUs a launch uses (mark_inert)."""
        self.parallel = [f.name for flag in parallel_flags if (f := self.space.get(flag)) is not None]
        self._one_gpu_inert = (-1, frozenset())
        if gpus <= 0:
            return
        for flag in parallel_flags:
            f = self.space.get(flag)
            if f is not None:
                self.gpu_limit[f.name] = gpus
                self.notes.append(f"hardware: {gpus} GPU(s) here, so {f.name} above {gpus} cannot be placed")

    def limit_weights(
        self,
        shard_flags: list[str],
        resize_flags: list[str],
        weights_gib: float | None,
        replicated_gib: float | None,
        gpu_gib: float | None,
    ) -> None:
        """The model's weights (``weights_gib``, of which ``replicated_gib`` sit on every GPU)
        cannot load on GPUs of ``gpu_gib`` split fewer ways than their size needs: a split of tensor
        x pipeline parallel sizes below that is as good as incompatible. A fact of the machine
        and the model's files, not a rule of any engine (so it holds with --no-knowledge, as the
        GPU count does); a level only, still tried if nothing else is left. Not where a launch asks
        for another quantization than the baseline's (its weights are another size)."""
        # every one of them, in the space or not: a baseline's pipeline size splits the weights too
        self.shard = [f.name if (f := self.space.get(flag)) is not None else flag for flag in shard_flags]
        self.resize = list(resize_flags)
        if not self.shard or not weights_gib or not gpu_gib or weights_gib <= gpu_gib:
            return
        rep = min(float(replicated_gib or 0.0), float(weights_gib))
        if rep >= gpu_gib:
            return
        # the fewest ways whose share fits: (weights - replicated) / n + replicated <= one GPU
        split = math.ceil((weights_gib - rep) / (gpu_gib - rep) - 1e-9)
        self.min_split = split
        self.notes.append(
            f"hardware: {weights_gib:.1f} GiB of weights on GPUs of {gpu_gib:.1f} GiB, so a split "
            f"({' x '.join(self.shard)}) below {split} cannot load them"
        )

    def under_split(self, f: Factor, level: str, others: dict[str, FlagValue] | None) -> bool:
        """This level of a weight-splitting size, with the other sizes of the launch (unset: 1,
        both engines' default), splits the weights fewer ways than they need (limit_weights)."""
        if self.min_split <= 1 or f.name not in self.shard:
            return False
        flags = dict(others or {})
        base = self.baseline.flag_dict
        if any(str(flags.get(k)) != str(base.get(k)) for k in self.resize):
            return False
        split = 1.0
        for name in self.shard:
            v = level if name == f.name else flags.get(name)
            n = as_number(v) if v is not None and v != ev.UNSET_DEFAULT else 1.0
            if n is None:
                return False
            split *= max(n, 1.0)
        return split < self.min_split

    def limit_memory(self, flag: str | None, free_gib: float | None, total_gib: float | None) -> None:
        """The machine has ``free_gib`` of ``total_gib`` free when the engine checks (measured as
        the run began, less the engine's own processes): a share of ``flag`` asking for more stops
        at start-up (vLLM's "less than desired GPU memory utilization"). A fact of the machine now,
        so a risk of the level (P_OVER_FREE), not a verdict: the engine's default is no exception
        (the vLLM CPU build's 0.92 does not start on a 23.5 GiB machine with 21.5 GiB free)."""
        f = self.space.get(flag) if flag else None
        if f is None or not free_gib or not total_gib or f.kind != "number":
            return
        self.mem_room[f.name] = (free_gib, total_gib)
        self.notes.append(
            f"hardware: about {free_gib:.1f} of {total_gib:.1f} GiB free at start-up, so {f.name} above "
            f"{free_gib / total_gib:.2f} cannot start"
        )

    @staticmethod
    def _over_free(share: float, free_gib: float, total_gib: float) -> float:
        """The risk that a share of the memory does not start with ``free_gib`` free."""
        need = share * total_gib
        if need > free_gib:
            return P_OVER_FREE
        return P_RISKY if need > free_gib - MEM_SLACK * total_gib else 0.0

    def over_gpus(self, f: Factor, level: str) -> bool:
        """A parallel size above the machine's GPU count (limit_gpus), whatever the factor's kind
        (a baseline flag joins as a choice of its own value)."""
        n = as_number(level)
        return n is not None and n > self.gpu_limit.get(f.name, math.inf)

    def success_probability(self, cand: Candidate) -> float:
        """The chance a full launch of ``cand`` validates: it avoids every blocker seen and every
        factor's own risk. A screen of it that passed is evidence: what a screen would have shown
        (a kernel, a backend, an argument refused) did not happen, so only what a screen is blind
        to remains (SCREEN_BLIND)."""
        levels = self.levels_of(cand)
        screened = self.predicted_key(cand) in self.screens_passed
        p = math.prod(
            b.p_avoid(levels)
            for b in self.blockers
            if not screened or b.failure_class in _SCREEN_BLIND_CLASSES
        )
        flags, env = cand.flag_dict, cand.env_dict
        blind = SCREEN_BLIND if screened else 1.0
        for f in self.space.factors:
            p *= 1 - blind * self.risk(f, f.level_in(flags, env), flags)
        return p

    def next_launch(
        self,
        known_good: list[Candidate],
        history: list[Attempt],
        screened_ok: set[str],
        pending: list[Candidate] | None = None,
    ) -> Decision:
        """The next launch: a configuration validated here before first, then the best proposal,
        screened first where the screening policy says it pays; none only when the search is over
        (impossible here, or nothing untried is left)."""
        decision = self._next_candidate(known_good, pending or [])
        if decision.candidate is not None and self.screening is not None:
            key = self.predicted_key(decision.candidate)
            decision.screen = key not in screened_ok and self.screening.worth_it(
                decision.p_success, self._only_numeric_changes(decision.candidate), history
            )
        return decision

    def _next_candidate(self, known_good: list[Candidate], pending: list[Candidate]) -> Decision:
        exclude = {self.predicted_key(c) for c in pending}
        tried = {o.key for o in self.observations if o.source not in ("journal", "port")} | exclude
        for cand in known_good:
            if self.predicted_key(cand) not in tried:
                return Decision(
                    cand,
                    P_KNOWN_GOOD,
                    ["validated before on this machine, engine version and model (journal)"],
                )
        if self.impossible() is not None:
            return Decision(None)
        bare = self._without_users_settings()
        if bare is not None and self.predicted_key(bare) not in tried:
            return Decision(
                bare,
                self.success_probability(bare),
                [
                    "before blaming the model or the machine: the same failure twice, its words naming "
                    "nothing the user set; the engine's defaults without any of the user's own settings"
                ],
            )
        self._pending_moves = [m for c in pending if (m := self._moves(c))]
        try:
            moves = set().union(*self._pending_moves) if self._pending_moves else set()
            props = propose(self, tried, limit=6 if pending else 1)
            if pending and not any(not (self._moves(p.candidate) & moves) for p in props):
                props += propose(self, tried, limit=30)[len(props) :]  # look further for another hypothesis
        finally:
            self._pending_moves = []
        if not props:
            return Decision(None)
        # Beside trials in flight, assume they fail: another hypothesis, not one of their changes again
        # (nothing is learnt from the assumption; the beliefs move only with real answers).
        prop = next((p for p in props if not (self._moves(p.candidate) & moves)), props[0])
        reasons = list(prop.reasons)
        if pending:
            what = ", ".join(sorted(f"{n} {v}" for n, v in moves)) or "the baseline"
            reasons.append(f"launched beside {len(pending)} in flight, assuming they fail ({what})")
        return Decision(prop.candidate, prop.p_success, reasons)

    def _moves(self, cand: Candidate) -> frozenset[tuple[str, str]]:
        flags, env = cand.flag_dict, cand.env_dict
        out = set()
        for f in self.space.factors:
            level = f.level_in(flags, env)
            if normalise(level) != normalise(self.base_level(f)):
                out.add((f.name, "moved" if f.kind == "number" else self.eff(f, level)))
        return frozenset(out)

    def variant_of_pending(self, cand: Candidate) -> bool:
        if not self._pending_moves:
            return False
        mine = self._moves(cand)
        return any(m <= mine for m in self._pending_moves)

    def still_worth(self, cand: Candidate, p_then: float) -> bool:
        tried = {o.key for o in self.observations if o.source != "screen"}
        return self.predicted_key(cand) not in tried and self.success_probability(cand) >= 0.5 * p_then

    def _only_numeric_changes(self, cand: Candidate) -> bool:
        """Whether ``cand`` differs only in numbers (memory fractions, batch sizes) from the baseline
        or from a candidate whose screen passed: a screen of it would pass blindly."""
        refs = [self.baseline] + [
            o.candidate for o in self.observations if o.source == "screen" and o.outcome.status == "works"
        ]
        for ref in refs:
            kinds = [f.kind if (f := self.space.get(c.flag)) is not None else "other" for c in cand.diff(ref)]
            if kinds and all(k == "number" for k in kinds):
                return True
        return False

    def combination_risk(self, cand: Candidate) -> float:
        """The chance that a candidate's levels together bring a failure that a rule with `with`
        conditions predicts (a memory plan for this parallel size, a backend with this dtype): each
        level such a rule calls incompatible with the rest of this candidate, though not with the
        baseline's (the scorer counted that one already), risks P_INCOMPATIBLE. A prediction, not
        the engine's refusal: it lowers the candidate and never removes it (the memory plan called
        a T4's own default fraction too much, by a rounding, and every one-GPU launch was barred)."""
        return 1 - (1 - P_INCOMPATIBLE) ** len(self.combination_culprits(cand))

    def combination_culprits(self, cand: Candidate) -> list[str]:
        """The factors whose level a rule calls incompatible with the rest of this candidate, though
        not with the baseline's (combination_risk): the ones to change with it (dropping a parallel
        size a memory plan calls too big for 0.999 of one GPU asks for a smaller fraction too)."""
        flags, env = cand.flag_dict, cand.env_dict
        out = []
        for f in self.space.factors:
            level = f.level_in(flags, env)
            if not self._refused(f, level, flags):
                continue
            if not self._refused(f, level) or self._no_level_left(f, flags):
                out.append(f.name)
        return out

    def _refusal(
        self, f: Factor, level: FlagValue | None, others: dict[str, FlagValue] | None = None
    ) -> Verdict | None:
        """The first rule that calls this level incompatible beside ``others`` (the baseline's
        settings by default), or None."""
        return next((v for v in self.verdicts(f, level, others) if v.kind == "incompatible"), None)

    def _refused(
        self, f: Factor, level: FlagValue | None, others: dict[str, FlagValue] | None = None
    ) -> bool:
        return self._refusal(f, level, others) is not None

    def _no_level_left(self, f: Factor, flags: dict[str, FlagValue]) -> bool:
        """Every level of ``f`` is refused beside this candidate's other settings, where some level
        is not beside the baseline's: the other settings are what a rule refuses, whatever this
        one is set to (a parallel size dropped to one GPU whose weights no memory fraction holds,
        where the baseline's own fraction was refused only for start-up headroom)."""
        return self._every_level_refused(f, flags) is not None and self._every_level_refused(f) is None

    def _every_level_refused(self, f: Factor, others: dict[str, FlagValue] | None = None) -> Verdict | None:
        """The refusal of ``f``'s unset level when a rule refuses every level of it beside ``others``
        (the baseline's settings by default), else None."""
        first: Verdict | None = None
        for lv in [None, *f.levels]:
            refusal = self._refusal(f, lv, others)
            if refusal is None:
                return None
            if first is None:
                first = refusal
        return first

    # -- verdicts ------------------------------------------------------------------------------------
    def impossible(self) -> str | None:
        """The proof that nothing in the space can work here, or None. Only the engine's own
        refusals and the hardware facts prove it: a factor whose every level the engine refused
        for reasons no setting changes, a factor knowledge rules out at every level, or a failure
        whose evidence names only the model or the machine, seen again after a change."""
        if self.lessons.blocked is not None:
            return f"no level of {self.lessons.blocked[0]} can work here: {self.lessons.blocked[1]}"
        for f in self.space.factors:
            if (refusal := self._every_level_refused(f)) is not None:
                return f"no level of {f.name} can work here: {refusal.reason}"
        for b in self._outside_blockers():
            if self._users_settings_cleared(b):
                o = next(o.outcome for o in reversed(self.observations) if o.blocker == b.key)
                props = ", ".join(i for i in o.implicates if i.split(".")[0] in ("model", "gpu", "host"))
                return (
                    f"{b.failure_class} in {o.phase} ({b.seen} launches, unchanged by every change): the engine "
                    f"refuses a property of the model or the machine that no launch flag changes ({props}). "
                    f"Evidence: {b.evidence[:200]}" + (f". Hint: {o.hint}" if o.hint else "")
                )
        return None

    def _outside_blockers(self) -> list[Blocker]:
        """Failures seen twice that the beliefs place outside the space (the model, the machine)."""
        return [b for b in self.blockers if b.seen >= 2 and b.outside_mass() >= IMPOSSIBLE_OUTSIDE]

    def _users_settings_cleared(self, b: Blocker) -> bool:
        """A person's check before blaming the model or the machine: the failure was seen on a
        launch without any of the user's own settings (every one undone, or changed). Beliefs that
        lean outside the space after two launches are not a proof while a setting the user chose has
        never been away: a failure whose words name nothing can still be that setting's."""
        mine = [(f, self._users_level(f)) for f in self._users_factors()]
        if not mine:
            return True
        for o in self.observations:
            if o.blocker != b.key:
                continue
            flags, env = o.candidate.flag_dict, o.candidate.env_dict
            if all(self.eff(f, f.level_in(flags, env)) != lv for f, lv in mine):
                return True
        return False

    def _without_users_settings(self) -> Candidate | None:
        """The baseline with every setting of the user's undone (the engine's own defaults for
        them), when a failure the beliefs place outside the space has not been seen so."""
        if not any(not self._users_settings_cleared(b) for b in self._outside_blockers()):
            return None
        return self.baseline.with_changes({f.name: None for f in self._users_factors()})

    def propose(self, exclude: set[str] | None = None) -> Proposal | None:
        """The best untried candidate (None: nothing untried is left)."""
        tried = {o.key for o in self.observations if o.source not in ("journal", "port")} | (exclude or set())
        props = propose(self, tried, limit=1)
        return props[0] if props else None

    def leads(self, n: int = 3) -> list[Proposal]:
        """The untried candidates believed most likely, for a search that stopped short."""
        tried = {o.key for o in self.observations if o.source not in ("journal", "port")}
        return propose(self, tried, limit=n)

    def explain_stop(self) -> str:
        fails = [o for o in self.observations if o.outcome.status != "works" and o.source != "journal"]
        if not fails:
            return "nothing was launched"
        proof = self.impossible()
        if proof is not None:
            return "nothing in the space can work: " + proof
        return (
            "not found: every configuration the search can form was launched or ruled out; " + self.summary()
        )

    def summary(self) -> str:
        """What still blocks, and the untried candidates most believed in."""
        parts = []
        for b in sorted((b for b in self.blockers if b.seen), key=lambda b: -b.seen)[:3]:
            c, p = b.top(1)[0]
            parts.append(f"{b.failure_class} ({b.seen}x; likeliest cause {c.describe()}, {p:.0%})")
        text = "still failing: " + "; ".join(parts) if parts else ""
        self.best_left = None
        leads = self.leads(3)
        if leads:
            self.best_left = leads[0]
            text += ". Most likely untried: " + "; ".join(
                f"{p.changes(self.baseline) or 'the baseline'} ({p.p_success:.1%})" for p in leads
            )
        return text

    def state(self) -> StrategyState:
        suspects: dict[str, float] = {}
        for b in self.blockers:
            for c, p in b.top(4):
                suspects[c.describe()] = max(suspects.get(c.describe(), 0.0), round(p, 3))
        return StrategyState(
            frozen={k: Pinned(value=v, why=w) for k, (v, w) in self.frozen.items()},
            defaults={k: Pinned(value=v, why=w) for k, (v, w) in self.default_eff.items()},
            bounds=self.lessons.bounds,
            suspects=dict(sorted(suspects.items(), key=lambda kv: -kv[1])[:12]),
            notes=self.notes,
        )
