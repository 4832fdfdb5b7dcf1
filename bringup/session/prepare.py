"""What a bring-up run starts from: its baseline, knowledge, search space, screens, GPUs and reference.

Each is a function of the settings and the target's facts, decided once before the first launch
and never again; `PreparedRun` holds them, typed, and the loop (bringup/session/run.py, a
`PreparedRun`) only reads them. Kept apart so that the loop reads as the loop, and so that
`bringup space` sees exactly the space a run would search without running it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.core.candidate import Candidate, FlagError, parse_flags, split_env
from bringup.core.reserved import ReservedFlag, refuse
from bringup.engines.targets import Target
from bringup.env.registry import absent_components, launch_environment
from bringup.guard.secrets import is_secret_name
from bringup.knowledge.rules import Knowledge, memory_model_for
from bringup.record.journal import Journal
from bringup.search.envfactors import EnvFactors
from bringup.search.screening import ScreeningPolicy, one_gpu_screen, screen_flags
from bringup.search.space import Space, add_baseline_flags, build_space, drop_inapplicable, drop_levels
from bringup.search.space import Target as SearchTarget
from bringup.search.strategy import Strategy
from bringup.session.identity import gather_facts, hardware_fingerprint, model_identity
from bringup.session.launching import Launcher
from bringup.session.learned import Learned, use_lessons
from bringup.session.settings import QuietObserver, RunError, RunObserver, RunSettings, settings_target
from bringup.trial.launch import Trial
from bringup.trial.slots import GpuSlots, SlotError, parallel_width, parse_gpus
from bringup.verify.probes import KnownAnswer

if TYPE_CHECKING:
    from bringup.dryrun import DryRun
    from bringup.facts.modelinfo import Fingerprint


def starting_point(s: RunSettings, t: Target) -> tuple[Candidate, Any]:
    """The baseline candidate (the user's starting command), and the engine's variable registry."""
    baseline = s.baseline or t.world.default_baseline()  # a scenario's user starts from its command
    origin = "--baseline" if s.baseline else "the scenario's baseline"
    try:
        env, tokens = split_env(baseline)
        refuse(tokens, origin, t.engine.log_dialect, t.spec, t.engine.info.model_flag)
        flags = parse_flags(tokens, t.spec)
    except ReservedFlag as e:
        raise RunError(str(e)) from None
    except FlagError as e:
        raise RunError(
            f"{origin}: {e}; check the flag against the engine's --help ({t.engine.log_dialect} {t.version})"
        ) from None
    # The user's own engine-relevant variables reach every launch: they are part of the
    # candidate, so a fix is never credited to a flag when a variable did it.
    registry = t.engine.env_registry(t.version)
    env = {**launch_environment(registry), **env, **s.env}
    return Candidate.make(t.engine.log_dialect, t.model, flags, env, label="baseline"), registry


def run_knowledge(
    s: RunSettings,
    t: Target,
    facts: dict[str, Any],
    fingerprint: Fingerprint | None,
    journal: Journal | None,
    hw_fp: str,
) -> Knowledge:
    """The rules for this target, with the memory plan corrected by its past errors here."""
    errors = journal.plan_errors(hw_fp, t.engine.log_dialect) if journal else []
    mem = memory_model_for(facts, t.engine.log_dialect, fingerprint, errors) if s.knowledge else None
    return Knowledge(facts, t.engine.log_dialect, t.version, enabled=s.knowledge, memory_model=mem)


def search_space(
    s: RunSettings, t: Target, baseline: Candidate, facts: dict[str, Any], registry: Any
) -> tuple[Space, EnvFactors, list[str]]:
    """The factors the search may change, the environment variables among them, and what is not
    searched on this target (and why)."""
    fix = {**kept(s.keep, baseline, t), **s.fix}
    space = build_space(
        t.engine.log_dialect,
        t.spec,
        baseline,
        vary=s.vary or None,
        fix=fix or None,
        space_file=Path(s.space_file) if s.space_file else None,
    )
    here = SearchTarget.of(facts)
    space.target = here
    drop_levels(space, baseline, here.unwanted_level)
    # (a space the user chose, by --vary or a file, is searched as given)
    not_here = drop_inapplicable(space, here) if not (s.vary or s.space_file) else []
    if not (s.vary or s.space_file):
        add_baseline_flags(space, baseline, t.spec)
    env = EnvFactors(registry, device=facts.get("device"), absent=absent_components(facts))
    # Every variable the user sets is a suspect that can be undone (issue 36), whoever reads it:
    # the engine, a library it loads (NCCL_NET, UCX_TLS, a plugin's own), or nobody known. The
    # fresh dev4 split (2026-12-05) showed the hole: the user's NCCL_NET=IB on a machine without
    # InfiniBand was no factor at all (neither the engine's registry nor the common list has it),
    # so nothing could drop it. A secret is never searched over: its value would be a level. (The
    # inherited environment is filtered before it reaches the baseline: launch_environment.)
    for f in env.initial({k: v for k, v in baseline.env_dict.items() if not is_secret_name(k)}):
        if f.name not in space.names and f.name[4:] not in (s.fix or {}) and f.name not in fix:
            space.factors.append(f)
    return space, env, not_here


def kept(keep: list[str], baseline: Candidate, t: Target) -> dict[str, Any]:
    """--keep FLAG: the starting command's own value of each, pinned (as --fix FLAG=VALUE would)."""
    out: dict[str, Any] = {}
    flags, env = baseline.flag_dict, baseline.env_dict
    for k in keep:
        if k.startswith("env:"):
            if k[4:] not in env:
                raise RunError(
                    f"--keep {k}: the starting command does not set {k[4:]}; pin a value with --fix {k}=VALUE"
                )
            out[k] = env[k[4:]]
            continue
        opt = t.spec.resolve(k if k.startswith("-") else "--" + k) if t.spec is not None else None
        name = opt.name if opt is not None else (k if k.startswith("-") else "--" + k)
        if name not in flags:
            raise RunError(
                f"--keep {k}: the starting command does not set {name}; pin a value with --fix {name}=VALUE"
            )
        out[name] = flags[name]
    return out


def screening_policy(s: RunSettings, t: Target, facts: dict[str, Any]) -> ScreeningPolicy:
    """When to screen a candidate cheaply (dummy weights, fewer layers) before its full launch."""
    w = facts.get("model.weights_gib")
    return ScreeningPolicy(
        s.screen, screen_flags(t.spec, s.screen_layers), float(w) if w else 0.0, t.world.clock().simulated
    )


def gpu_plan(
    s: RunSettings, t: Target, facts: dict[str, Any], screening: ScreeningPolicy, strategy: Strategy
) -> tuple[GpuSlots, int, dict[str, Any]]:
    """The run's GPUs, how many trials run at once on them, and the flags that shrink a screen to
    one GPU (empty: screens keep their parallel sizes)."""
    try:
        gpus = parse_gpus(s.gpus, int(facts.get("gpu.count") or 0))
        width = parallel_width(s.parallel, len(gpus))
    except SlotError as e:
        raise RunError(str(e)) from None
    # Screens run on one GPU each where their few layers fit, so they run side by side.
    shrink = (
        one_gpu_screen(facts, s.screen_layers, t.engine.parallel_flags(t.spec))
        if width > 1 and screening.flags
        else {}
    )
    screening.beside = bool(shrink) and screening.big_model
    strategy.limit_gpus(t.engine.parallel_flags(t.spec), len(gpus))
    strategy.limit_weights(
        *t.engine.shard_flags(t.spec),
        facts.get("model.weights_gib"),
        facts.get("model.replicated_gib"),
        weights_room(t, facts, strategy),
    )
    limit_memory(t, facts, strategy)
    return GpuSlots(gpus), width, shrink


def weights_room(t: Target, facts: dict[str, Any], strategy: Strategy | None = None) -> float | None:
    """GiB one GPU has for weights: what is free as the run begins (else all of it), less what
    the engine's own processes take there first (engines.yaml startup_memory: a CUDA context),
    and no more than the memory plan's KV budget of a GPU with no weights at the highest memory
    fraction the run may ask for (its highest level, the baseline's included; CUDA graphs left
    out): both engines size the KV cache as that share less the weights and what else they need
    (vLLM gpu_worker.determine_available_memory, SGLang model_runner.profile_max_num_token;
    bringup/facts/memplan.py), so weights above it leave no cache at all ("No available memory
    for the cache blocks", "Not enough memory. Please try to increase --mem-fraction-static")
    whatever else the launch changes."""
    if facts.get("device") != "cuda":
        return None
    free = facts.get("gpu.memory_free_gib") or facts.get("gpu.memory_gib")
    if not free:
        return None
    room = float(free) - t.engine.info.startup_memory.overhead_gib.get("cuda", 0.0)
    share = _largest_share(t, strategy)
    total = facts.get("gpu.memory_gib")
    if share is None or not total:
        return room
    from bringup.facts import memplan

    # the memory plan of one GPU with no weights at that share: what its KV budget would be is the
    # most the weights can take and leave any cache (CUDA graphs left out, the lenient side)
    try:
        bound = memplan.plan(
            gpu_mem_gib=float(total),
            mem_fraction=share,
            engine=t.engine.log_dialect,  # the arithmetic of the engine whose logs it writes
            weights_gib=0.0,
            disable_cuda_graph=True,
        ).kv_budget_gib
    except ValueError:  # an engine the plan does not model
        return room
    if 0 < bound < room:
        room = bound
        if strategy is not None:
            strategy.notes.append(
                f"hardware: at a memory fraction of {share:g} at most, {room:.1f} GiB of each "
                f"{float(total):.1f} GiB GPU can hold weights and leave a KV cache (the memory plan)"
            )
    return room


def _largest_share(t: Target, strategy: Strategy | None) -> float | None:
    """The highest level of the engine's memory fraction (engines.yaml startup_memory.flag) the
    run may launch with; None where it has no such factor (nothing bounds the weights' room)."""
    flag = fraction_flag(t)
    if strategy is None or flag is None:
        return None
    f = strategy.space.get(flag)
    if f is None or f.kind != "number":
        return None
    from bringup.knowledge.conditions import as_number

    shares = [n for lv in [*f.levels, strategy.base_level(f)] if (n := as_number(lv)) is not None]
    shares = [n for n in shares if 0 < n <= 1]
    return max(shares) if shares else None


def fraction_flag(t: Target) -> str | None:
    """The engine's memory-fraction flag (engines.yaml startup_memory.flag) as this version's
    --help spells it; None for an engine with none."""
    flag = t.engine.info.startup_memory.flag
    if flag is None:
        return None
    opt = t.spec.resolve(flag) if t.spec is not None else None
    return opt.name if opt is not None else flag


def limit_memory(t: Target, facts: dict[str, Any], strategy: Strategy) -> None:
    """The memory free as the run begins, less what the engine's own processes take before its
    start-up check (engines.yaml startup_memory), on the device the engine reserves it from: the
    GPUs, or host memory for a CPU build."""
    need = t.engine.info.startup_memory
    device = facts.get("device")
    if need.flag is None or device not in need.overhead_gib:
        return
    on = {"cpu": ("host.memory_available_gib", "host.memory_gib")}.get(
        device, ("gpu.memory_free_gib", "gpu.memory_gib")
    )
    free, total = facts.get(on[0]), facts.get(on[1])
    if free is None or total is None:
        return
    strategy.limit_memory(fraction_flag(t), float(free) - need.overhead_gib[device], float(total))


def run_reference(
    s: RunSettings, t: Target, facts: dict[str, Any], gpus: list[str], root: Path, journal: bool
) -> tuple[Any, str]:
    """The model's own output for the reference probe (None: not on the ladder), and why."""
    from bringup.verify.reference import ReferenceError, reference_for

    if not t.world.weights_here or not journal:
        return None, "no reference for a scenario or an offline plan"
    try:
        mem = facts.get("gpu.memory_gib")
        return reference_for(
            t.model,
            s.reference,
            cache_dir=root / "references",
            gpu=gpus[0] if gpus else None,
            gpu_memory_gib=float(mem) if mem else None,
        )
    except ReferenceError as e:
        raise RunError(f"--reference: {e}") from None


def dry_run(s: RunSettings, t: Target, facts: dict[str, Any], strategy: Strategy) -> DryRun | None:
    """The installed engine's own checks (bringup/dryrun/), started now: its import overlaps with
    the run's own start. None: not asked for (bringup.dryrun.wanted: --dry-run auto asks on a GPU
    target of a real engine)."""
    from bringup.dryrun import for_target, wanted

    if not wanted(s.dry_run, facts, imitation=not t.world.installed_engine_launches):
        return None

    dry = for_target(t, facts)
    strategy.notes += dry.notes
    dry.start()
    return dry


@dataclass
class PreparedRun:
    """A run's settings and everything decided from them before the first launch."""

    settings: RunSettings
    root: Path
    run_id: str | None = None  # given: resume this run
    observer: RunObserver = field(default_factory=QuietObserver)
    # Facts and model fingerprint gathered on a node of the run's node type (bringup/session/nodetypes.py),
    # as `gather_facts` returns them; None: gathered on this machine.
    node_facts: tuple[dict, Fingerprint | None] | None = None
    # What runs one trial on this machine: `Trial` (a real launch), or one with the same
    # constructor and `run() -> Outcome` (bringup.oracle.inprocess.InProcessTrial answers a
    # scenario launch in-process, for benchmarks that run the loop hundreds of times).
    trial_factory: Callable[..., Any] = Trial
    # Set by prepare():
    target: Target = field(init=False)
    baseline: Candidate = field(init=False)  # the user's starting command
    facts: dict[str, Any] = field(init=False)  # what knowledge rules read (the machine, the model)
    fingerprint: Fingerprint | None = field(init=False)  # the model's (None: a double's, or none)
    hw_fp: str = field(init=False)  # the machine's identity in the journal
    model_id: str = field(init=False)  # the model's identity in the journal
    journal: Journal | None = field(default=None, init=False)  # None: an offline plan
    knowledge: Knowledge = field(init=False)
    space: Space = field(init=False)
    env: EnvFactors = field(init=False)  # the environment variables among the factors
    screening: ScreeningPolicy = field(init=False)
    strategy: Strategy = field(init=False)
    reference: Any = field(init=False)  # bringup.verify.reference.Reference, or None
    reference_why: str = field(init=False)  # where the reference came from, or why there is none
    launcher: Launcher = field(init=False)
    dry: DryRun | None = field(init=False)  # the installed engine's own checks, if asked
    learned: Learned = field(init=False)  # lessons of other runs in reach (bringup/session/learned.py)

    def prepare_offline(self) -> None:
        """Everything but the journal: for `bringup space`."""
        self._prepare(journal=False)

    def prepare(self) -> None:
        self._prepare(journal=True)

    def _prepare(self, journal: bool) -> None:
        s = self.settings
        self.target = t = settings_target(s)
        self.baseline, registry = starting_point(s, t)
        self.facts, self.fingerprint = (
            (dict(self.node_facts[0]), self.node_facts[1]) if self.node_facts else gather_facts(t)
        )
        self.hw_fp = hardware_fingerprint(self.facts, t.world.identity_scope())
        self.model_id = model_identity(t)
        self.journal = Journal(self.root / "journal.sqlite") if journal else None
        self.knowledge = run_knowledge(s, t, self.facts, self.fingerprint, self.journal, self.hw_fp)
        self.space, self.env, not_here = search_space(s, t, self.baseline, self.facts, registry)
        self.screening = screening_policy(s, t, self.facts)
        self.strategy = Strategy(
            self.space, self.baseline, self.knowledge, t.spec, screening=self.screening, env=self.env
        )
        self.strategy.notes += [f"not searched on this target: {g}" for g in not_here]
        self.learned = use_lessons(s.lessons, t, self.facts, self.baseline, self.strategy)
        answers = [KnownAnswer(p, e) for p, e in s.answers] + list(t.answers)
        slots, width, shrink = gpu_plan(s, t, self.facts, self.screening, self.strategy)
        self.reference, self.reference_why = run_reference(s, t, self.facts, slots.gpus, self.root, journal)
        self.launcher = Launcher(
            t,
            s,
            self.screening,
            answers,
            self.reference,
            slots,
            width,
            shrink,
            self.trial_factory,
            self.observer.trial_event,
        )
        self.dry = dry_run(s, t, self.facts, self.strategy)
