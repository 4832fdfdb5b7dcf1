"""The performance knobs a tuner may turn, for one engine version and machine."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from bringup.core import reserved
from bringup.core.datafiles import DATA, KnowledgeFileError, describe_validation, load_yaml
from bringup.help.text import HelpSpec
from bringup.knowledge.conditions import compile_condition

DEFAULT = "default"  # a knob level meaning: do not pass the flag
# Levels of a switch (a flag without a value, e.g. vLLM's --async-scheduling / --no-async-scheduling):
# "on" passes --flag, "off" passes --no-flag. A switch's levels are strings like every other
# knob's, so that the sampler and tune.json treat them alike.
SWITCH = {"on": True, "off": False}


class KnobSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    flag: str
    engines: list[str] | None = None
    levels: Any
    when: Any = None
    monotone_memory: bool = False


@dataclass
class Knob:
    flag: str
    levels: list[str]
    monotone_memory: bool = False


class KnobError(ValueError):
    pass


def _gpu_divisors(facts: Mapping[str, Any]) -> list[str]:
    n = int(facts.get("gpu.count") or 1)
    return [str(d) for d in range(1, n + 1) if n % d == 0]


def load_knobs(
    engine: str,
    spec: HelpSpec | None,
    facts: Mapping[str, Any],
    only: list[str] | None = None,
    overrides: dict[str, list[str]] | None = None,
) -> list[Knob]:
    path = DATA / "knobs.yaml"
    raw = load_yaml(path) or {}
    out: list[Knob] = []
    for i, entry in enumerate(raw.get("knobs") or []):
        try:
            ks = KnobSpec.model_validate(entry)
        except ValidationError as e:
            raise KnowledgeFileError(describe_validation(path, f"knobs[{i}]", e)) from e
        if ks.engines and engine not in ks.engines:
            continue
        opt = spec.resolve(ks.flag) if spec else None
        if spec is not None and opt is None:
            continue
        if ks.when is not None and not compile_condition(ks.when, lambda k: k, f"knobs[{i}].when").holds(
            facts.get
        ):
            continue
        levels = _gpu_divisors(facts) if ks.levels == "gpu-divisors" else [str(v) for v in ks.levels]
        if len(levels) < 2:
            continue
        out.append(Knob(opt.name if opt else ks.flag, levels, ks.monotone_memory))
    _override(out, overrides or {}, engine, spec)
    if only:
        names = []
        for f in only:
            opt = spec.resolve(f if f.startswith("-") else "--" + f) if spec else None
            names.append(opt.name if opt else f)
        missing = [n for n in names if all(k.flag != n for k in out)]
        if missing:
            raise KnobError(
                f"--knobs: no levels known for {', '.join(missing)}; give them with --knob FLAG=v1,v2"
            )
        out = [k for k in out if k.flag in names]
    return out


def with_base_levels(knobs: list[Knob], base_flags: Mapping[str, Any]) -> list[Knob]:
    """The working configuration's own values are levels too (it is the point to beat); a knob it
    does not set gets the level DEFAULT (the flag is not passed: the engine decides)."""
    for k in knobs:
        v = base_flags.get(k.flag)
        if v is None:
            if DEFAULT not in k.levels:
                k.levels = [DEFAULT, *k.levels]
        elif isinstance(v, bool):
            if _level(v) not in k.levels:
                k.levels = [*k.levels, _level(v)]
        elif str(v) not in k.levels:
            k.levels = sorted([*k.levels, str(v)], key=lambda x: (float(x) if _num(x) else math.inf, x))
    return knobs


def start_point(knobs: list[Knob], base_flags: Mapping[str, Any]) -> dict[str, str]:
    return {
        k.flag: _level(base_flags[k.flag]) if base_flags.get(k.flag) is not None else DEFAULT for k in knobs
    }


def _level(value: Any) -> str:
    """A flag's value as a knob level: a switch given or negated is "on" or "off"."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def as_changes(knobs: Mapping[str, str]) -> dict[str, str | bool | None]:
    """Knob levels as flag changes: DEFAULT removes the flag, "on"/"off" set a switch."""
    return {f: (None if v == DEFAULT else SWITCH.get(v, v)) for f, v in knobs.items()}


def _num(x: str) -> bool:
    try:
        float(x)
        return True
    except ValueError:
        return False


PARALLEL = ("--tensor-parallel-size", "--data-parallel-size", "--pipeline-parallel-size")


def parallel_check(facts: Mapping[str, Any], base_flags: Mapping[str, Any]):
    """Rule out parallel layouts that need more GPUs than the machine has."""
    gpus = int(facts.get("gpu.count") or 1)

    def check(knobs: Mapping[str, str]) -> str | None:
        knobs = {f: v for f, v in knobs.items() if v != DEFAULT}
        need = 1
        for f in PARALLEL:
            v = knobs.get(f, base_flags.get(f))
            if v is not None and _num(str(v)):
                need *= int(float(v))
        ep = knobs.get("--expert-parallel-size")
        tp = knobs.get("--tensor-parallel-size", base_flags.get("--tensor-parallel-size", 1))
        if (
            ep is not None
            and _num(str(ep))
            and int(float(ep))
            > int(float(tp or 1))
            * int(float(knobs.get("--data-parallel-size", base_flags.get("--data-parallel-size", 1)) or 1))
        ):
            return f"expert-parallel size {ep} exceeds tp x dp"
        if need > gpus:
            return f"needs {need} GPUs (tp x dp x pp); the machine has {gpus}"
        return None

    return check


def _override(out: list[Knob], overrides: dict[str, list[str]], engine: str, spec: HelpSpec | None) -> None:
    """The user's --knob levels, in place of the data's (a new knob where the data has none); a flag
    bringup sets itself (host, port, model: bringup/core/reserved.py) is refused."""
    for flag, levels in overrides.items():
        try:
            reserved.refuse([flag], "--knob", engine, spec)
        except reserved.ReservedFlag as e:
            raise KnobError(str(e)) from None
        opt = spec.resolve(flag) if spec else None
        if spec is not None and opt is None:
            raise KnobError(f"--knob {flag}: this engine version has no such flag")
        name = opt.name if opt else flag
        existing = next((k for k in out if k.flag == name), None)
        if existing:
            existing.levels = levels
        else:
            out.append(Knob(name, levels))


def parse_knob_overrides(items: list[str]) -> dict[str, list[str]]:
    out = {}
    for it in items:
        flag, sep, vals = it.partition("=")
        levels = [v.strip() for v in vals.split(",") if v.strip()]
        if not sep or len(levels) < 2:
            raise KnobError(f"--knob {it!r}: write FLAG=v1,v2[,...] with at least two levels")
        out[flag if flag.startswith("-") else "--" + flag] = levels
    return out
