"""Load and validate a scenario file; every error names the file, the field and what is wrong.

Validation happens in two steps: the YAML shape with Pydantic (unknown keys, types, phases,
one action per rule), then against the imitated engine's real help capture: condition keys and
`set` flags must be options of that engine version, with values its argparse would accept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from bringup.guard.limits import SCENARIO_MAX, InputError, check_depth, check_nesting, read_text_limited
from bringup.help.text import HelpOption, HelpSpec, bundled_versions
from bringup.knowledge.conditions import ConditionError, as_number, compile_condition
from bringup.scenario.engine_args import help_for, type_for
from bringup.scenario.schema import Scenario

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "data" / "scenarios"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where built in: same documents, faster


class ScenarioError(ValueError):
    """A scenario that cannot be used: `file: field: what is wrong`."""


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (("." if out else "") + str(part))
    return out or "(top level)"


def _describe(path: Path, err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key (not part of the scenario format; see docs/scenarios.md)"
        parts.append(f"{_loc(tuple(e['loc']))}: {msg}")
    return f"{path}: " + "; ".join(parts)


def _key_resolver(spec: HelpSpec, engine: str, version: str):
    def resolve(key: str) -> str:
        if key.startswith("env:"):
            name = key[4:]
            if not name:
                raise ValueError("env: needs a variable name, e.g. env:SGLANG_ENABLE_JIT_DEEPGEMM")
            return key
        bare = key.lstrip("-")
        for cand in (f"--{bare}", f"--{bare.replace('_', '-')}"):
            opt = spec.resolve(cand)
            if opt is not None:
                return opt.name
        amb = spec.ambiguous(f"--{bare}")
        if len(amb) > 1:
            raise ValueError(f"ambiguous flag --{bare} for {engine} {version}: could be {', '.join(amb[:6])}")
        hint = spec.close_matches(f"--{bare.replace('_', '-')}")
        extra = f" (did you mean {', '.join(hint)}?)" if hint else ""
        raise ValueError(f"unknown flag --{bare} for {engine} {version}{extra}")

    return resolve


def _coerce(opt: HelpOption, value: Any, engine: str, where: str) -> Any:
    """A value the engine's argparse would accept for this option, typed as it would type it."""
    if not opt.takes_value:
        if not isinstance(value, bool):
            raise ScenarioError(f"{where}: {opt.name} is a switch; set it to true or false, not {value!r}")
        if value is False and not opt.negatable:
            return False
        return value
    if isinstance(value, bool):
        raise ScenarioError(f"{where}: {opt.name} takes a value, not {value!r}")
    items = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not opt.nargs_many:
        raise ScenarioError(f"{where}: {opt.name} takes one value, not a list")
    if value is None:
        return None
    out = []
    for v in items:
        if isinstance(v, (dict, list)):
            raise ScenarioError(f"{where}: {opt.name}: expected a scalar value, got {v!r}")
        if opt.choices and not opt.open_choices and str(v) not in opt.choices:
            raise ScenarioError(
                f"{where}: {v!r} is not a choice of {opt.name} (choose from {', '.join(opt.choices)})"
            )
        t = type_for(opt, engine)
        if t in (int, float):
            n = as_number(v)
            if n is None or (t is int and n != int(n)):
                raise ScenarioError(
                    f"{where}: {opt.name} needs {'an int' if t is int else 'a float'}, got {v!r}"
                )
            v = t(n)
        elif t is not None:
            try:
                v = t(str(v))
            except ValueError:
                raise ScenarioError(f"{where}: {opt.name}: invalid {t.__name__} value {v!r}") from None
        out.append(v)
    return out if opt.nargs_many and isinstance(value, list) else out[0]


def load_scenario(path: str | Path) -> Scenario:
    """Read, validate and compile a scenario (conditions resolved against the engine's help)."""
    path = Path(path)
    try:
        text = read_text_limited(path, SCENARIO_MAX, "scenario file")
        check_nesting(text, str(path), "scenario file", yaml=True)
        raw = yaml.load(text, Loader=_LOADER)
        check_depth(raw, str(path), "scenario file")
    except InputError as e:
        raise ScenarioError(str(e)) from None
    except (yaml.YAMLError, RecursionError) as e:
        raise ScenarioError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise ScenarioError(f"{path}: expected a mapping of scenario fields at the top level")
    try:
        sc = Scenario.model_validate(raw)
    except ValidationError as e:
        raise ScenarioError(_describe(path, e)) from None
    sc._path = str(path)
    if sc.engine_version not in bundled_versions(sc.engine):
        known = ", ".join(f"{sc.engine} {v}" for v in bundled_versions(sc.engine)) or "none"
        raise ScenarioError(
            f"{path}: engine_version: no help capture for {sc.engine} {sc.engine_version}; bundled: {known}"
        )
    spec, _ = help_for(sc.engine, sc.engine_version)
    resolve = _key_resolver(spec, sc.engine, sc.engine_version)
    try:
        for group in ("defaults", "force"):
            for i, entry in enumerate(getattr(sc, group)):
                where = f"{group}[{i}]"
                entry._condition = compile_condition(entry.when, resolve, f"{where}.when")
                flags: dict[str, Any] = {}
                for key, value in entry.set.items():
                    try:
                        flag = resolve(str(key))
                    except ValueError as e:
                        raise ScenarioError(f"{path}: {where}.set.{key}: {e}") from None
                    if flag.startswith("env:"):
                        raise ScenarioError(f"{path}: {where}.set.{key}: only flags can be set, not env vars")
                    opt = spec.get(flag)
                    assert opt is not None
                    try:
                        flags[flag] = _coerce(opt, value, sc.engine, f"{where}.set.{key}")
                    except ScenarioError as e:
                        raise ScenarioError(f"{path}: {e}") from None
                entry._flags = flags
        for i, w in enumerate(sc.warnings):
            w._condition = compile_condition(w.when, resolve, f"warnings[{i}].when")
        ids: dict[str, int] = {}
        for i, rule in enumerate(sc.rules):
            rule._condition = compile_condition(rule.when, resolve, f"rules[{i}].when")
            if rule.id:
                if rule.id in ids:
                    raise ScenarioError(
                        f"{path}: rules[{i}].id: duplicate id {rule.id!r} (also rules[{ids[rule.id]}])"
                    )
                ids[rule.id] = i
        if sc.otherwise is not None:
            for i, fac in enumerate(sc.otherwise.factors):
                try:
                    fac._target = resolve(fac.flag)
                except ValueError as e:
                    raise ScenarioError(f"{path}: otherwise.factors[{i}].flag: {e}") from None
            if not isinstance(sc.otherwise.default, str):
                sc.otherwise.default._condition = compile_condition(None, resolve, "otherwise.default")
                sc.otherwise.default.id = sc.otherwise.default.id or "otherwise"
    except ConditionError as e:
        raise ScenarioError(f"{path}: {e}") from None
    return sc


def bundled_scenarios() -> list[Path]:
    """The scenarios shipped with bringup."""
    return sorted(SCENARIO_DIR.glob("*.yaml"))


def scenario_path(name: str) -> Path:
    """A shipped scenario by file stem (e.g. 'glm5-nvfp4-sm120') or a path."""
    p = Path(name)
    if p.exists():
        return p
    cand = SCENARIO_DIR / (name if name.endswith(".yaml") else f"{name}.yaml")
    if cand.exists():
        return cand
    known = ", ".join(q.stem for q in bundled_scenarios())
    raise ScenarioError(f"{name}: no such scenario file; shipped: {known}")
