"""Knowledge rules: verdicts about levels of the search space, before any launch.

Rules live in ``bringup/data/rules.yaml`` (schema in docs/knowledge.md): conditions over facts
(hardware from `bringup doctor` or a scenario, the model fingerprint, the engine and its
version) and over the candidate's other flags give a verdict on levels of a flag:
incompatible, risky or preferred, or a prediction of the engine's effective value (forced,
default). Memory-fraction levels also get verdicts computed by the memory plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, field_validator

from bringup.core.candidate import FlagValue
from bringup.core.datafiles import DATA, KnowledgeFileError, validated_entries
from bringup.knowledge.conditions import Condition, ConditionError, compile_condition, values_equal

if TYPE_CHECKING:
    from bringup.facts.modelinfo import Fingerprint

FACT_PREFIXES = ("gpu.", "model.", "engine.", "host.", "cpu.")
FACT_KEYS = ("device",)
VerdictKind = Literal["incompatible", "risky", "preferred", "forced", "default"]
MEMORY_FLAGS = ("--mem-fraction-static", "--gpu-memory-utilization")


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: str
    flags: list[str]
    levels: list[Any] | None = None  # None: any level
    engines: list[str] | None = None
    versions: str | None = None
    when: Any = None
    with_: Any = Field(default=None, alias="with")
    verdict: VerdictKind
    value: Any = None
    reason: str
    source: str

    @field_validator("flags")
    @classmethod
    def _dashes(cls, v: list[str]) -> list[str]:
        for f in v:
            if not (f.startswith("--") or f.startswith("env:")):
                raise ValueError(f"flag {f!r} must be spelled --name or env:NAME")
        return v

    @field_validator("versions")
    @classmethod
    def _spec(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                SpecifierSet(v)
            except InvalidSpecifier as e:
                raise ValueError(f"not a version range: {v!r} ({e})") from e
        return v


def _fact_key(key: str) -> str:
    if key in FACT_KEYS or key.startswith(FACT_PREFIXES):
        return key
    raise ValueError(f"unknown fact {key!r}: facts start with {', '.join(FACT_PREFIXES)} or are 'device'")


def _flag_key(key: str) -> str:
    if key.startswith("env:"):
        return key
    return key if key.startswith("--") else "--" + key


@dataclass
class CompiledRule:
    rule: Rule
    when: Condition
    with_: Condition
    path: Path

    def level_matches(self, level: FlagValue | None) -> bool:
        if self.rule.levels is None:
            return True
        return level is not None and any(values_equal(level, x) for x in self.rule.levels)


def load_rules(paths: list[Path] | None = None) -> list[CompiledRule]:
    paths = paths if paths is not None else [DATA / "rules.yaml"]
    out: list[CompiledRule] = []
    for path, where, rule in validated_entries(paths, "rules", Rule):
        if rule.verdict in ("forced", "default") and rule.value is None:
            raise KnowledgeFileError(f"{path}: {where}: verdict {rule.verdict} needs a value")
        try:
            when = compile_condition(rule.when, _fact_key, f"{where}.when")
            with_ = compile_condition(rule.with_, _flag_key, f"{where}.with")
        except ConditionError as e:
            raise KnowledgeFileError(f"{path}: {e}") from e
        out.append(CompiledRule(rule, when, with_, Path(path)))
    return out


@lru_cache(maxsize=1)
def default_rules() -> tuple[CompiledRule, ...]:
    return tuple(load_rules())


@dataclass
class Verdict:
    kind: str  # incompatible | risky | preferred | forced | default | plan
    reason: str
    source: str
    rule_id: str
    facts_used: dict[str, Any] = field(default_factory=dict)
    value: Any = None

    def to_json(self) -> dict:
        return {
            "verdict": self.kind,
            "reason": self.reason,
            "source": self.source,
            "rule": self.rule_id,
            "facts": self.facts_used,
            **({"value": self.value} if self.value is not None else {}),
        }


def _version_ok(spec: str | None, version: str | None) -> bool:
    if spec is None:
        return True
    if version is None:
        return False
    try:
        return Version(version) in SpecifierSet(spec)
    except InvalidVersion:
        return False


class Knowledge:
    """The rules that apply to one machine, model and engine version."""

    def __init__(
        self,
        facts: Mapping[str, Any],
        engine: str,
        version: str | None,
        rules: tuple[CompiledRule, ...] | list[CompiledRule] | None = None,
        enabled: bool = True,
        memory_model: Any = None,
    ):
        self.facts = dict(facts)
        self.engine = engine
        self.version = version
        self.enabled = enabled
        rules = default_rules() if rules is None else rules
        lookup = self.facts.get
        self.rules = (
            [
                r
                for r in rules
                if enabled
                and (r.rule.engines is None or engine in r.rule.engines)
                and _version_ok(r.rule.versions, version)
                and r.when.holds(lookup)
            ]
            if enabled
            else []
        )
        self.memory_model = memory_model if enabled else None

    def _facts_used(self, r: CompiledRule) -> dict[str, Any]:
        return {k: self.facts.get(k) for k in sorted(r.when.targets)}

    def verdicts(
        self, flag: str, level: FlagValue | None, others: Mapping[str, FlagValue] | None = None
    ) -> list[Verdict]:
        """Verdicts on one level of a flag (None: the flag is not given)."""
        out: list[Verdict] = []
        others = others or {}
        for r in self.rules:
            if flag not in r.rule.flags or r.rule.verdict in ("forced", "default"):
                continue
            if not r.level_matches(level):
                continue
            if r.with_.clauses and not r.with_.holds(lambda k: others.get(k)):
                continue
            out.append(Verdict(r.rule.verdict, r.rule.reason, r.rule.source, r.rule.id, self._facts_used(r)))
        if flag in MEMORY_FLAGS and level is not None and self.memory_model is not None:
            v = self.memory_model(flag, level, others)
            if v is not None:
                out.append(v)
        return out

    def prediction(self, flag: str, kind: str) -> Verdict | None:
        """A forced or default effective value for a flag, if a rule predicts one."""
        for r in self.rules:
            if flag in r.rule.flags and r.rule.verdict == kind:
                return Verdict(
                    kind, r.rule.reason, r.rule.source, r.rule.id, self._facts_used(r), r.rule.value
                )
        return None

    def applicable(self) -> list[dict]:
        return [
            {
                "id": r.rule.id,
                "verdict": r.rule.verdict,
                "flags": r.rule.flags,
                "levels": r.rule.levels,
                "facts": self._facts_used(r),
            }
            for r in self.rules
        ]


def memory_model_for(
    facts: Mapping[str, Any],
    engine: str,
    fingerprint: Fingerprint | None = None,
    history_errors: list[float] | None = None,
):
    """A function giving the memory plan's verdict on a memory-fraction level, or None when the
    facts do not allow a plan (no GPU memory size, no weights). Past errors of the plan on this
    machine (from the journal) correct it."""
    from bringup.facts import memplan

    gpu_mem = facts.get("gpu.memory_gib")
    weights_total = facts.get("model.weights_gib")
    if facts.get("device") != "cuda" or not gpu_mem or (fingerprint is None and not weights_total):
        return None
    replicated = facts.get("model.replicated_gib") or 0.0

    def verdict(flag: str, level: FlagValue, others: Mapping[str, FlagValue]) -> Verdict | None:
        try:
            frac = float(level)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
        tp = 1
        for name in ("--tensor-parallel-size", "--tp-size"):
            if name in others:
                try:
                    tp = int(others[name])  # type: ignore[arg-type]
                except (TypeError, ValueError):
                    pass
        kw: dict[str, Any] = {
            "gpu_mem_gib": float(gpu_mem),
            "tp": tp,
            "mem_fraction": frac,
            "engine": engine,
            "gpus": facts.get("gpu.count"),
            "compute_capability": facts.get("gpu.compute_capability"),
            "disable_cuda_graph": bool(others.get("--disable-cuda-graph") or others.get("--enforce-eager")),
        }
        if fingerprint is not None:
            kw["fp"] = fingerprint
        else:
            assert (
                weights_total is not None
            )  # no fingerprint: the guard above returned unless weights are known
            kw["weights_gib"] = (float(weights_total) - replicated) / tp + replicated
        try:
            p = memplan.plan(**kw)
            if history_errors:
                p = memplan.corrected(p, history_errors)
        except (ValueError, TypeError, ZeroDivisionError):
            return None
        used = {"gpu.memory_gib": gpu_mem, "model.weights_gib": weights_total, "tp": tp}
        reason = "; ".join(p.reasons[:2]) if getattr(p, "reasons", None) else p.verdict
        src = "bringup's memory plan (`bringup plan` prints it)"
        if p.verdict == "does-not-fit":
            return Verdict("incompatible", f"memory plan: does not fit ({reason})", src, "memory-plan", used)
        if p.verdict == "graph-capture-risk":
            return Verdict(
                "risky", f"memory plan: CUDA-graph capture at risk ({reason})", src, "memory-plan", used
            )
        free = getattr(p, "free_after_pools_gib", None)
        if p.verdict == "tight" and free is not None and free < 0.5 * p.reserve_engine_gib:
            # Less than half of what the engine's own sizing keeps outside the pools: the seeds'
            # 0.95 on 96 GB left ~4.7 GiB there and died in graph capture.
            return Verdict(
                "risky",
                f"memory plan: only {free:.1f} GiB left outside the pools, under half of "
                f"the {p.reserve_engine_gib:.1f} GiB the engine's default sizing keeps for activations "
                "and CUDA graphs",
                src,
                "memory-plan",
                used,
            )
        return None

    return verdict
