"""The search space: factors (a flag or an env var) and their levels, for one engine version.

Built from the engine's own --help (argparse choices) for the built-in list of flags that matter
in bring-up (``bringup/data/factors.yaml``), filtered to what this version offers, then narrowed
or widened by the user (``--vary``, ``--fix``, or a space file). Every factor also has the level
"unset": the flag is not passed and the engine picks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from bringup.core import reserved
from bringup.core.candidate import Candidate, FlagValue, format_value
from bringup.core.datafiles import DATA, KnowledgeFileError, describe_validation, load_yaml
from bringup.env.registry import absent_components, names_absent_component, other_platform
from bringup.help.spec import dest_of
from bringup.help.text import HelpSpec
from bringup.knowledge.conditions import values_equal
from bringup.observe.effective import normalise


class SpaceError(ValueError):
    """A --vary/--fix/space file that cannot be used: what is wrong and what to do."""


class FactorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    flag: str | None = None
    env: str | None = None
    engines: list[str] | None = None
    kind: str = "choice"  # choice | switch | number | env
    levels: Any = "choices"  # "choices" or a list
    only: list[Any] | None = None
    cost: float = 0.0
    group: str | None = None
    source: str | None = None
    # The chance that leaving the flag unset (the engine's default) is what fails, before any
    # evidence; None: the strategy's general prior. Flags whose default rarely breaks a bring-up
    # (batch limits, collectives) say so, so that merely having them in the space does not make
    # every candidate look riskier.
    p_unset: float | None = None
    # What the flag sizes, for evidence that reads the engine's own memory report: "kv-pool" (the
    # memory fraction whose share of the GPU becomes the KV cache, so a launch's reported pool
    # predicts the lowest fraction that still holds one request; bringup/strategy.py).
    sizes: str | None = None
    # Facts the flag only matters under ({model.moe: true}: a MoE kernel backend does nothing for a
    # dense model, which has no expert layers). A factor whose needs a known fact contradicts is
    # left out of the search (``drop_inapplicable``); an unknown fact keeps it.
    needs: dict[str, Any] | None = None


@dataclass
class Factor:
    name: str  # "--flag" or "env:NAME"
    kind: str
    levels: list[FlagValue]  # not including "unset"
    dest: str
    cost: dict[str, float] = field(default_factory=dict)  # by normalised level
    group: str | None = None
    origin: str = "builtin"  # builtin | vary | space-file
    p_unset: float | None = None  # prior that the engine default fails (None: the strategy's)
    sizes: str | None = None  # "kv-pool": the memory fraction that sizes the KV cache (FactorSpec)
    needs: dict[str, Any] | None = None  # facts the flag only matters under (FactorSpec)

    @property
    def is_env(self) -> bool:
        return self.name.startswith("env:")

    def level_in(self, flags: dict[str, FlagValue], env: dict[str, str]) -> FlagValue | None:
        """This factor's level in a candidate's flags and environment (None: unset)."""
        return env.get(self.name[4:]) if self.is_env else flags.get(self.name)

    def level_cost(self, level: FlagValue | None) -> float:
        return 0.0 if level is None else self.cost.get(normalise(level), 0.0)

    def describe_level(self, level: FlagValue | None) -> str:
        return "unset" if level is None else format_value(level)


@dataclass(frozen=True)
class Target:
    """What the search may vary on this target, read from known facts only (an unknown fact keeps a
    factor): a factor whose ``needs`` a fact contradicts (the MoE backend of a dense model), one
    whose name names a component the model lacks (an NSA backend on a GQA model), and levels of
    another platform (ROCm's aiter kernels on CUDA) are not searched. The same test holds for the
    factors the space starts with and for those a failure's lines call in later: a flag the engine
    names for a component this model does not have is still nothing to change here."""

    facts: Mapping[str, Any] = field(default_factory=dict)
    absent: frozenset[str] = frozenset()

    @classmethod
    def of(cls, facts: Mapping[str, Any]) -> Target:
        return cls(dict(facts), absent_components(facts))

    def why_not(self, f: Factor) -> str | None:
        """Why a factor is not searched on this target, or None."""
        for k, v in (f.needs or {}).items():
            have = self.facts.get(k)
            if have is not None and not values_equal(have, v):
                want, got = (str(x).lower() if isinstance(x, bool) else x for x in (v, have))
                return f"needs {k} = {want}; this target: {got}"
        if f.origin in ("builtin", "log") and names_absent_component(f.name, self.absent):
            return "its kernels serve a component this model does not have"
        return None

    def unwanted_level(self, level: str) -> bool:
        """A level of another platform, or one named for a component the model lacks."""
        return other_platform(level, self.facts.get("device")) or names_absent_component(level, self.absent)


@dataclass
class Space:
    engine: str
    factors: list[Factor]
    fixed: dict[str, FlagValue] = field(default_factory=dict)
    target: Target = field(default_factory=Target)

    def get(self, name: str) -> Factor | None:
        return next((f for f in self.factors if f.name == name), None)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.factors]

    def size(self) -> int:
        n = 1
        for f in self.factors:
            n *= len(f.levels) + 1
        return n


def _load_specs(path: Path | None = None) -> list[FactorSpec]:
    path = path or DATA / "factors.yaml"
    doc = load_yaml(path) or {}
    out = []
    for i, raw in enumerate(doc.get("factors") or []):
        try:
            out.append(FactorSpec.model_validate(raw))
        except ValidationError as e:
            raise KnowledgeFileError(describe_validation(path, f"factors[{i}]", e)) from e
    return out


def _levels_for(spec: FactorSpec, opt, where: str) -> list[FlagValue]:
    if spec.kind == "switch":
        return [True]
    if spec.levels == "choices":
        if opt is None or not opt.choices:
            raise SpaceError(f"{where}: {spec.flag} has no argparse choices in this version; list its levels")
        levels: list[FlagValue] = list(opt.choices)
        if spec.only:
            levels = [lv for lv in levels if lv in [str(x) for x in spec.only]]
        return levels
    if not isinstance(spec.levels, list) or not spec.levels:
        raise SpaceError(f"{where}: levels must be 'choices' or a non-empty list")
    levels = [lv if isinstance(lv, bool) else str(lv) for lv in spec.levels]
    if opt is not None and opt.choices and not opt.open_choices:
        levels = [lv for lv in levels if lv in opt.choices]
    return levels


def _factor(spec: FactorSpec, helpspec: HelpSpec | None, origin: str, where: str) -> Factor | None:
    if spec.env:
        if not spec.levels or spec.levels == "choices":
            raise SpaceError(f"{where}: env:{spec.env} needs a list of levels")
        return Factor(
            "env:" + spec.env,
            "env",
            [str(x) for x in spec.levels],
            spec.env,
            {},
            spec.group,
            origin,
            spec.p_unset,
        )
    if not spec.flag:
        raise SpaceError(f"{where}: give `flag` or `env`")
    opt = helpspec.resolve(spec.flag) if helpspec else None
    if helpspec is not None and opt is None:
        return None  # this version does not offer the flag
    name = opt.name if opt else spec.flag
    levels = _levels_for(spec, opt, where)
    if not levels:
        return None
    cost = {normalise(lv): spec.cost for lv in levels} if spec.cost else {}
    kind = spec.kind if spec.kind != "choice" or opt is None or opt.takes_value else "switch"
    return Factor(
        name,
        kind,
        levels,
        dest_of(name, opt),
        cost,
        spec.group,
        origin,
        spec.p_unset,
        spec.sizes,
        spec.needs,
    )


def drop_levels(space: Space, baseline: Candidate, unwanted: Callable[[str], bool]) -> list[str]:
    """Leave out of the built-in choice factors the levels ``unwanted`` names (those of another
    platform than the machine's: SGLang's `aiter` backends are ROCm's kernels, as the vLLM MoE
    backends' `only:` list says by hand); the baseline's own level always stays. Returns what went."""
    gone = []
    for f in space.factors:
        if f.origin != "builtin" or f.kind != "choice":
            continue
        base = f.level_in(baseline.flag_dict, baseline.env_dict)
        keep = [lv for lv in f.levels if not unwanted(str(lv)) or lv == base]
        if keep and len(keep) < len(f.levels):
            gone += [f"{f.name} {lv}" for lv in f.levels if lv not in keep]
            f.levels = keep
    return gone


def drop_inapplicable(space: Space, target: Target | Mapping[str, Any]) -> list[str]:
    """Leave out of the search the factors the target rules out (``Target.why_not``: the MoE
    backend of a dense model; the engine ignores the flag there, so every level fails as the
    baseline does and each launch is wasted). The baseline's own value of such a flag stays on its
    command line; it is only not varied. Returns what went, with why."""
    target = target if isinstance(target, Target) else Target.of(target)
    space.target = target
    gone: list[str] = []
    keep: list[Factor] = []
    for f in space.factors:
        why = target.why_not(f)
        if why is None:
            keep.append(f)
        else:
            gone.append(f"{f.name} ({why})")
    space.factors = keep
    return gone


def spec_for_flag(engine: str, flag: str, helpspec: HelpSpec | None) -> Factor | None:
    """The factor a flag makes by the built-in list's entry for it (its levels, costs and needs),
    or None when the list has none for this engine (the caller makes a plain one)."""
    for i, s in enumerate(_load_specs()):
        if s.flag is None or (s.engines is not None and engine not in s.engines):
            continue
        name = _canonical_or_none(s.flag, helpspec)
        if name == flag:
            try:
                return _factor(s, helpspec, "log", f"factors.yaml: factors[{i}]")
            except SpaceError:
                return None
    return None


def _canonical_or_none(flag: str, helpspec: HelpSpec | None) -> str | None:
    if helpspec is None:
        return flag
    opt = helpspec.resolve(flag)
    return opt.name if opt is not None else None


def build_space(
    engine: str,
    helpspec: HelpSpec | None,
    baseline: Candidate,
    vary: list[str] | None = None,
    fix: dict[str, FlagValue] | None = None,
    space_file: Path | None = None,
) -> Space:
    """The factors a search may change, for this engine version, around a baseline."""
    specs = [s for s in _load_specs() if s.engines is None or engine in s.engines]
    origin = "builtin"
    _refuse_reserved(
        engine, helpspec, [(k, "--fix") for k in fix or {}] + [(v, "--vary") for v in vary or []]
    )
    if space_file is not None:
        specs, file_fix = _read_space_file(space_file)
        origin = "space-file"
        _refuse_reserved(
            engine,
            helpspec,
            [(k, f"space file {space_file}: fix") for k in file_fix]
            + [(s.flag, f"space file {space_file}: factors[{i}]") for i, s in enumerate(specs) if s.flag],
        )
        fix = {**file_fix, **(fix or {})}
    factors: list[Factor] = []
    for i, s in enumerate(specs):
        f = _factor(s, helpspec, origin, f"{space_file or 'factors.yaml'}: factors[{i}]")
        if f is not None and all(x.name != f.name for x in factors):
            factors.append(f)
    if vary:
        chosen: list[Factor] = []
        for name in vary:
            canon = _canonical(name, helpspec)
            existing = next((f for f in factors if f.name == canon), None)
            if existing is None:
                spec = FactorSpec(flag=canon, kind="choice")
                opt = helpspec.resolve(canon) if helpspec else None
                if opt is not None and not opt.takes_value:
                    spec.kind = "switch"
                elif opt is None or not opt.choices:
                    raise SpaceError(
                        f"--vary {name}: bringup cannot list levels for this flag (no argparse "
                        "choices); give them in a space file (--space FILE)"
                    )
                existing = _factor(spec, helpspec, "vary", f"--vary {name}")
                if existing is None:
                    raise SpaceError(f"--vary {name}: this engine version has no such flag")
            chosen.append(existing)
        factors = chosen
    fixed: dict[str, FlagValue] = {}
    for k, v in (fix or {}).items():
        canon = _canonical(k, helpspec) if not k.startswith("env:") else k
        fixed[canon] = v
    factors = [f for f in factors if f.name not in fixed]
    # The baseline's own values are levels too (a model card may use a value the list lacks).
    base, base_env = baseline.flag_dict, baseline.env_dict
    for f in factors:
        own = f.level_in(base, base_env)
        if own is not None and not any(normalise(own) == normalise(lv) for lv in f.levels):
            f.levels.insert(0, own)
    return Space(engine, factors, fixed)


def _refuse_reserved(engine: str, helpspec: HelpSpec | None, named: list[tuple[str, str]]) -> None:
    """SpaceError naming where a flag bringup sets itself (host, port, socket, model, served name)
    came from: a fix, a varied flag, a space file's entry (bringup/core/reserved.py)."""
    for name, origin in named:
        flag = name if name.startswith(("-", "env:")) else "--" + name
        try:
            reserved.refuse([flag], origin, engine, helpspec)
        except reserved.ReservedFlag as e:
            raise SpaceError(str(e)) from None


def _canonical(name: str, helpspec: HelpSpec | None) -> str:
    if name.startswith("env:"):
        return name
    flag = name if name.startswith("-") else "--" + name
    if helpspec is not None:
        opt = helpspec.resolve(flag)
        if opt is None:
            hint = helpspec.close_matches(flag)
            raise SpaceError(
                f"{name}: this engine version has no such flag"
                + (f" (did you mean {', '.join(hint)}?)" if hint else "")
            )
        return opt.name
    return flag


class _SpaceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    factors: list[FactorSpec]
    fix: dict[str, Any] = {}


def _read_space_file(path: Path) -> tuple[list[FactorSpec], dict[str, FlagValue]]:
    doc = load_yaml(path)
    try:
        sf = _SpaceFile.model_validate(doc)
    except ValidationError as e:
        raise SpaceError(describe_validation(path, "space", e)) from e
    for s in sf.factors:
        if s.env is None and s.levels == "choices" and s.kind == "number":
            raise SpaceError(f"{path}: factor {s.flag}: a number factor needs a list of levels")
    fix: dict[str, FlagValue] = {k: (v if isinstance(v, bool) else str(v)) for k, v in sf.fix.items()}
    return sf.factors, fix


def parse_fix(items: list[str]) -> dict[str, FlagValue]:
    out: dict[str, FlagValue] = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep or not k:
            raise SpaceError(
                f"--fix {it!r}: write FLAG=VALUE, e.g. --fix --tp-size=8 or --fix env:NCCL_P2P_DISABLE=1"
            )
        out[k if k.startswith(("-", "env:")) else "--" + k] = v
    return out


def add_baseline_flags(space: Space, baseline: Candidate, helpspec: HelpSpec | None) -> list[str]:
    """Every flag of the user's baseline is a factor the search can change or drop: one the built-in
    list lacks joins with its own value (and its argparse choices, if any) as levels; "unset" (the
    engine's default) is always a level. A flag the user fixed (--fix) stays as given. Returns the
    flags that joined."""
    added = []
    for name, value in baseline.flag_dict.items():
        if space.get(name) is not None or name in space.fixed:
            continue
        opt = helpspec.resolve(name) if helpspec is not None else None
        dest = dest_of(name, opt)
        if value is True:
            f = Factor(name, "switch", [True], dest, {}, None, "baseline", 0.02)
        else:
            levels: list[FlagValue] = [value] if not isinstance(value, list) else [format_value(value)]
            # a flag of a component this target lacks (an FP8 GEMM backend on an unquantized model)
            # is undone, never varied: its other levels change nothing here either
            lacks = space.target.why_not(Factor(name, "choice", [], dest, origin="log")) is not None
            if opt is not None and opt.choices and not opt.open_choices and not lacks:
                levels += [c for c in opt.choices if normalise(c) != normalise(levels[0])]
            f = Factor(name, "choice", levels, dest, {}, None, "baseline", 0.02)
        space.factors.append(f)
        added.append(name)
    return added
