"""Fault atoms and base scenarios: the data files' schema (docs/composed-faults.md), loaded.

An atom is one thing that goes wrong in a real bring-up: what triggers it (a scenario `when:`
condition on flags and variables), where it strikes and what the engine prints (a scenario rule's
action), what a user's baseline carries that sets it off (`inject`), which changes avoid it
(`fixes`, alternatives) and where it comes from (`source`). A base is a scenario without rules: a
machine, a model, an engine version and the command a user starts from.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bringup.core.datafiles import DATA, KnowledgeFileError, load_yaml
from bringup.scenario.schema import Entry, Fail, Hang, Serve, Warning_

FAULTS = DATA / "faults"
# A split is any atom file of the faults folder but the bases. Readable splits are those whose name
# starts with "dev" (dev.yaml, dev2.yaml, ...): whoever changes the search may read them, and the
# benchmark prints and writes their cases in full. Every other split (heldout.yaml, sealed.yaml) is
# sealed: never read while the search changes. `both` in the benchmark means dev + heldout, as it
# always did.
Split = str
OPEN_PREFIX = "dev"  # a split whose name starts with this is readable; every other one is sealed
BASES_FILE = "bases.yaml"
Kind = Literal[
    "bad-value",
    "missing-package",
    "missing-device",
    "dtype",
    "quantization",
    "no-kernel-image",
    "oom-weights",
    "oom-kv",
    "oom-graph",
    "illegal-memory-access",
    "sampler",
    "nccl-hang",
    "hang",  # a hang that is not NCCL's: a JIT or autotuner that keeps logging, a barrier that waits
    "distributed",  # a collective or its transport fails to set up (not a hang)
    "wrong-output",
]
# How the log names the way out: a value in a hint or remedy line (`log`), only the failing frame's
# file path or component (`frame`), or nothing at all (`none`: the facts must do it).
NamedBy = Literal["log", "frame", "none"]


class Atom(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: str
    engine: Literal["vllm", "sglang", "transformers"]
    versions: list[str] = Field(min_length=1)  # engine versions as a scenario imitates them
    kind: Kind
    source: str = Field(min_length=8)
    description: str = ""
    needs: dict[str, Any] = Field(default_factory=dict)  # facts test (condition syntax on facts keys)
    inject: str = ""  # what the user's baseline carries: NAME=VALUE tokens, then flags
    when: Any = None  # the trigger, in the scenario rule `when:` syntax
    fail: Fail | None = None
    hang: Hang | None = None
    serve: Serve | None = None
    warnings: list[Warning_] = Field(default_factory=list)  # lines the engine prints beside it
    # Values the engine imposes whatever was asked (scenario `force:` entries, docs/scenarios.md): a
    # requested flag the engine silently overrides, with the warning it prints (its `log`).
    force: list[Entry] = Field(default_factory=list)
    fixes: list[str] = Field(min_length=1)  # alternatives; each a change list (see fix_tokens)
    named_by: NamedBy
    # The failure class a right reading of the engine's words gives (bringup/data/classes.yaml):
    # the benchmark reports how often the classifier agrees.
    expect_class: str = Field(alias="class")
    why: str = ""

    @model_validator(mode="after")
    def _one_action(self) -> Atom:
        given = [k for k in ("fail", "hang", "serve") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"an atom needs exactly one of fail, hang, serve (has: {', '.join(given) or 'none'})"
            )
        return self

    @property
    def phase(self) -> str:
        action = self.fail or self.hang
        return action.phase if action is not None else "decode"

    @property
    def needs_two(self) -> bool:
        """Its first fix changes two things, and both are needed (the trigger is an any-of)."""
        return len(fix_tokens(self.fixes[0])) > 1 and isinstance(self.when, list)

    def rule(self) -> dict[str, Any]:
        """The scenario rule this atom becomes (its id is the atom's)."""
        out: dict[str, Any] = {"id": self.id, "why": self.source}
        if self.when is not None:
            out["when"] = self.when
        for k in ("fail", "hang", "serve"):
            v = getattr(self, k)
            if v is not None:
                out[k] = v.model_dump(exclude_none=True, exclude_defaults=k == "fail")
        if self.kind == "oom-graph" and self.fail is not None:
            # the memory of the CUDA graphs: a launch without graphs captures none (as vLLM's
            # --enforce-eager and SGLang's --disable-cuda-graph do), so it cannot run out there
            out["fail"]["graphs"] = True
        return out


class Base(BaseModel):
    """A scenario without rules (the scenario file format, docs/scenarios.md), for composing."""

    model_config = ConfigDict(extra="allow")

    name: str
    engine: Literal["vllm", "sglang", "transformers"]
    engine_version: str


def fix_tokens(fix: str) -> list[str]:
    """A fix's changes: `--flag value`, `--switch`, `NAME=VALUE`, `drop:--flag`, `drop:NAME`,
    split so that each item is one change (a flag with its value)."""
    out: list[str] = []
    for tok in fix.split():
        if tok.startswith("--") or tok.startswith("drop:") or ("=" in tok and not tok.startswith("-")):
            out.append(tok)
        elif out:
            out[-1] += f" {tok}"
        else:
            raise ValueError(f"fix {fix!r}: a value with no flag before it")
    return out


@lru_cache(maxsize=1)
def _classes() -> frozenset[str]:
    doc = load_yaml(DATA / "classes.yaml") or {}
    return frozenset((doc.get("classes") or {}).keys())


def _entries(path: Path, key: str) -> list[dict[str, Any]]:
    doc = load_yaml(path) or {}
    items = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise KnowledgeFileError(f"{path}: expected a top-level '{key}:' list")
    return items


def splits(root: Path = FAULTS) -> list[str]:
    """The split names: every `<name>.yaml` of the faults folder except the bases."""
    return sorted(p.stem for p in root.glob("*.yaml") if p.name != BASES_FILE)


def is_sealed(split: str) -> bool:
    """A sealed split is reported in aggregate only: no atom ids, baselines or log lines. Readable
    splits are the ones named dev* (dev, dev2, ...)."""
    return not split.startswith(OPEN_PREFIX)


@lru_cache(maxsize=8)
def load_atoms(split: Split, root: Path = FAULTS) -> tuple[Atom, ...]:
    """The atoms of one split (`<split>.yaml`: dev, dev2, heldout, sealed, ...), validated; ids unique."""
    if split not in splits(root):
        raise KnowledgeFileError(f"{root}: no split {split!r} (splits: {', '.join(splits(root))})")
    path = root / f"{split}.yaml"
    atoms: list[Atom] = []
    seen: set[str] = set()
    for i, raw in enumerate(_entries(path, "atoms")):
        try:
            atom = Atom.model_validate(raw)
        except ValueError as e:
            raise KnowledgeFileError(f"{path}: atoms[{i}]: {e}") from None
        if atom.id in seen:
            raise KnowledgeFileError(f"{path}: atoms[{i}]: duplicate id {atom.id}")
        seen.add(atom.id)
        for fix in atom.fixes:
            fix_tokens(fix)
        if atom.expect_class not in _classes():
            raise KnowledgeFileError(
                f"{path}: atoms[{i}].class: {atom.expect_class!r} is not a class of classes.yaml"
            )
        atoms.append(atom)
    return tuple(atoms)


@lru_cache(maxsize=4)
def weights_oom_lines(engine: str, root: Path = FAULTS) -> tuple[str, ...]:
    """The engine's lines for weights that do not fit (bases.yaml ``weights_oom``); none for an
    engine the file does not give (then no such rule is composed)."""
    path = root / BASES_FILE
    doc = load_yaml(path) or {}
    entry = (doc.get("weights_oom") or {}).get(engine) or {}
    if entry and not entry.get("source"):
        raise KnowledgeFileError(f"{path}: weights_oom.{engine}: give its source")
    return tuple(entry.get("lines") or ())


@lru_cache(maxsize=2)
def load_bases(root: Path = FAULTS) -> tuple[dict[str, Any], ...]:
    """The base scenarios (bases.yaml): scenario mappings without rules."""
    path = root / "bases.yaml"
    out = []
    for i, raw in enumerate(_entries(path, "bases")):
        try:
            Base.model_validate(raw)
        except ValueError as e:
            raise KnowledgeFileError(f"{path}: bases[{i}]: {e}") from None
        if "rules" in raw:
            raise KnowledgeFileError(f"{path}: bases[{i}]: a base has no rules (atoms bring them)")
        out.append(raw)
    return tuple(out)


def base_facts(base: dict[str, Any]) -> dict[str, Any]:
    """A base scenario's machine and model as the facts a run reads (knowledge, the laws)."""
    hw, m = base["hardware"], base["model"]
    return {
        "gpu.name": hw["gpu"],
        "gpu.count": hw.get("count", 1),
        "gpu.compute_capability": float(hw["compute_capability"]),
        "gpu.memory_gib": hw["memory_gib"],
        "gpu.link": hw.get("link"),
        "device": "cuda",
        "model.architecture": m["architecture"],
        "model.model_type": m["model_type"],
        "model.attention": m["attention"],
        "model.moe": bool(m.get("moe", False)),
        "model.quantization": m.get("quantization"),
        "model.dtype": m.get("dtype", "bfloat16"),
        "model.weights_gib": m["weights_gib"],
        "engine.name": base["engine"],
        "engine.version": str(base["engine_version"]),
    }
