"""Lessons learned by a finished run, for the next run on another machine: their schema and scope.

A lesson is what one bring-up proved, in a form another machine can use: the failure it resolved
(its class, phase, signature and root line with the numbers, paths and addresses taken out, so
the same failure reads the same on any box), the changes that cured it there, the scope it was
learned in (the engine and its version, the GPU and how many, their link, driver and CUDA, the
model's architecture, attention, quantization, dtype and size), and its `source` (the run, the
machine's fingerprint, the trial logs that prove it). Files of lessons are written by `bringup
lessons export` (bringup/report/learned.py) and read by `bringup run --lessons`
(bringup/session/learned.py); docs/lessons.md is the schema in words.

Not to be confused with bringup/search/lessons.py, which reads what one failure says about single
levels *inside* a run. A lesson here outlives its run.

How far a lesson reaches (`reach`): each scope field is the same (1), near (a weight below 1: another
patch of the same engine series, another GPU of the same architecture, another size of the same
model architecture, another GPU count, link, driver or CUDA minor) or out of reach (another engine,
engine series, device, compute capability, model architecture, attention kind, quantization or
dtype): a lesson out of reach on any field changes nothing in a run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bringup.core.datafiles import DATA, classes, load_yaml, phases

LessonValue = str | bool | list[str] | None  # a flag's value as YAML keeps it (None: not given)

# How much a near field keeps of a lesson's weight (docs/lessons.md, "How far a lesson reaches").
NEAR = {
    "engine_version": 0.6,  # another release of the same series (SGLang 0.5.16 and 0.5.23)
    "gpu": 0.6,  # another GPU of the same compute capability (H100 and H200)
    "gpu_count": 0.6,  # memory per GPU and the collectives change with it
    "link": 0.8,
    "driver": 0.9,
    "cuda": 0.8,  # another minor of the same CUDA major
    "weights_gib": 0.7,  # the same architecture at another size; halved again past 4x
    "unknown": 0.8,  # one side does not know the fact
}
# The most a lesson is believed, in exact scope at full strength: a prior, never a certainty (the
# rest of the belief says the failure is not there at all; the launches decide).
PRIOR_MAX = 0.9
# A weakened lesson (a later run saw its fix fail the same way) is a belief only, never the first launch.
FIRST_MIN = 0.5
WEAKEN = 0.3  # what one contradicting run leaves of a lesson's strength
_SAME_SIZE = 0.02  # sizes within 2% are one size (a checkpoint's bytes, rounded)
_OUT_OF_REACH = (
    "engine",
    "device",
    "compute_capability",
    "architecture",
    "attention",
    "quantization",
    "dtype",
)


def _text(v: Any) -> Any:
    """YAML reads 0.8 as a float and 8 as an int: a flag value is text (a switch a bool)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    if isinstance(v, list):
        return [str(x) for x in v]
    return v


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class FixChange(Strict):
    """One change of a fix: the flag (or env:NAME), the baseline's value and the cure's (None: not given)."""

    flag: str
    before: LessonValue = None
    after: LessonValue = None

    @field_validator("before", "after", mode="before")
    @classmethod
    def _as_text(cls, v: Any) -> Any:
        return _text(v)

    @field_validator("flag")
    @classmethod
    def _spelled(cls, v: str) -> str:
        if not (v.startswith("--") and len(v) > 2) and not (v.startswith("env:") and len(v) > 4):
            raise ValueError(f"{v!r}: a fix changes a flag spelled --name or a variable spelled env:NAME")
        return v

    def describe(self) -> str:
        if self.after is None:
            return f"drop {self.flag}"
        if self.after is True:
            return self.flag
        after = " ".join(self.after) if isinstance(self.after, list) else str(self.after)
        return f"{self.flag[4:]}={after}" if self.flag.startswith("env:") else f"{self.flag} {after}"


class Failure(Strict):
    """The failure a lesson resolved, as it reads on any machine."""

    key: str  # its identity across runs (bringup.search.evidence.blocker_key): class|phase|root
    failure_class: str = Field(alias="class")
    phase: str | None = None
    signature: str | None = None
    root: str = ""  # the root line, normalised (bringup.search.evidence.normalised_line)

    @field_validator("failure_class")
    @classmethod
    def _known_class(cls, v: str) -> str:
        if v not in classes() and v != "wrong-output":
            raise ValueError(f"{v!r} is not a failure class (one of: {', '.join(sorted(classes()))})")
        return v

    @field_validator("phase")
    @classmethod
    def _known_phase(cls, v: str | None) -> str | None:
        if v is not None and v not in phases():
            raise ValueError(f"{v!r} is not a phase (one of: {', '.join(phases())})")
        return v

    @field_validator("root", "key")
    @classmethod
    def _normalised(cls, v: str) -> str:
        if any(c.isdigit() for c in v) or "/" in v.replace("<path>", ""):
            raise ValueError(
                "holds a number or a path: a lesson keeps its root line normalised (numbers as #, "
                "paths as <path>), so that it reads the same on every machine"
            )
        return v


class Scope(Strict):
    """Where a lesson was learned: the run's facts that decide whether it holds elsewhere."""

    engine: str
    engine_version: str | None = None
    device: Literal["cuda", "cpu"]
    gpu: str | None = None
    compute_capability: float | None = None
    gpu_count: int = Field(0, ge=0, le=4096)
    link: str | None = None
    driver: str | None = None
    cuda: str | None = None
    architecture: str | None = None
    attention: str | None = None
    quantization: str | None = None
    dtype: str | None = None
    weights_gib: float | None = Field(None, gt=0)

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, v: str) -> str:
        known = _engines()
        if v not in known:
            raise ValueError(f"{v!r} is not an engine bringup launches ({', '.join(known)})")
        return v

    @field_validator("engine_version")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                Version(v)
            except InvalidVersion:
                raise ValueError(f"{v!r} is not a version (PEP 440)") from None
        return v

    @model_validator(mode="after")
    def _a_machine(self) -> Scope:
        """A scope some machine can have: a GPU target names its GPUs, a CPU target has none."""
        cc = self.compute_capability
        if self.device == "cuda":
            if not self.gpu or self.gpu_count < 1:
                raise ValueError("a cuda scope needs its GPU name and a GPU count of at least 1")
            if cc is not None and not (1.0 <= cc < 20.0 and abs(cc * 10 - round(cc * 10)) < 1e-6):
                raise ValueError(f"compute capability {cc} is no GPU's (major.minor, 1.0 to 19.9)")
        elif self.gpu or cc is not None or self.gpu_count:
            raise ValueError("a cpu scope has no GPU: leave gpu, compute_capability and gpu_count out")
        return self

    @classmethod
    def of(cls, facts: dict[str, Any]) -> Scope:
        """The scope of a run's facts (the keys `bringup doctor`, the model fingerprint and a
        scenario give)."""
        w = facts.get("model.weights_gib")
        cc = facts.get("gpu.compute_capability")
        return cls(
            engine=str(facts.get("engine.name") or ""),
            engine_version=_str(facts.get("engine.version")),
            device="cuda" if facts.get("device") == "cuda" else "cpu",
            gpu=_str(facts.get("gpu.name")),
            compute_capability=float(cc) if cc is not None else None,
            gpu_count=int(facts.get("gpu.count") or 0) if facts.get("device") == "cuda" else 0,
            link=_str(facts.get("gpu.link")) if facts.get("device") == "cuda" else None,
            driver=_str(facts.get("gpu.driver")),
            cuda=_str(facts.get("gpu.cuda")),
            architecture=_str(facts.get("model.architecture")),
            attention=_str(facts.get("model.attention")),
            # an unquantized model is "none"; None only where the model is unknown
            quantization=_str(facts.get("model.quantization"))
            or ("none" if facts.get("model.architecture") else None),
            dtype=_str(facts.get("model.dtype")),
            weights_gib=float(f"{float(w):.3g}") if w and float(w) > 0 else None,  # a tiny model: 0.0034
        )

    def describe(self) -> str:
        eng = f"{self.engine} {self.engine_version or '?'}"
        hw = (
            f"{self.gpu_count} x {self.gpu} (SM {self.compute_capability})"
            + (f", {self.link}" if self.link and self.link != "none" else "")
            if self.device == "cuda"
            else "CPU"
        )
        model = ", ".join(
            str(x)
            for x in (self.architecture, self.attention, self.quantization, self.dtype)
            if x not in (None, "", "none")
        )
        size = f", {self.weights_gib:g} GiB" if self.weights_gib else ""
        return f"{eng} on {hw}; {model or 'model ?'}{size}"


@lru_cache(maxsize=1)
def _engines() -> list[str]:
    """The engines bringup launches (engines.yaml's keys)."""
    return sorted((load_yaml(DATA / "engines.yaml") or {}).keys())


def _str(v: Any) -> str | None:
    return None if v is None or v == "" else str(v)


def relative_path(v: str) -> str:
    """A trial log named relative to its run's folder: a lesson holds no path of the machine it came from."""
    if (
        v.startswith(("/", "~", "\\"))
        or (len(v) > 1 and v[1] == ":")
        or ".." in v.replace("\\", "/").split("/")
    ):
        raise ValueError(f"{v!r}: a trial is named relative to its run's folder (trials/NN-...)")
    return v


class Evidence(Strict):
    """A launch of some run, by its trial log relative to that run's folder."""

    run: str
    trial: str
    line: str = ""

    @field_validator("trial")
    @classmethod
    def _relative(cls, v: str) -> str:
        return relative_path(v)

    @field_validator("line")
    @classmethod
    def _no_path(cls, v: str) -> str:
        if "/" in v.replace("<path>", ""):
            raise ValueError("holds a path: evidence lines are kept normalised (paths as <path>)")
        return v


class Source(Strict):
    """Where a lesson was learned: the run, the machine's fingerprint, the trial logs that prove it."""

    run: str
    machine: str
    trials: list[str] = Field(min_length=1)
    exported: str = ""

    @field_validator("trials")
    @classmethod
    def _relative(cls, v: list[str]) -> list[str]:
        return [relative_path(t) for t in v]


class Lesson(Strict):
    """What one run proved: this failure, on this scope, is cured by this fix."""

    id: str
    failure: Failure
    fix: list[FixChange] = Field(min_length=1)
    scope: Scope
    minimal: bool = False  # the fix was verified 1-minimal (search/minimize.py)
    strength: float = Field(1.0, gt=0, le=1)
    source: Source
    confirmed: list[Source] = Field(default_factory=list)  # later runs that learned the same
    against: list[Evidence] = Field(default_factory=list)  # launches that saw the fix fail the same way
    conflict: str | None = None  # set by `lessons merge`: what another copy says

    @model_validator(mode="after")
    def _own_id(self) -> Lesson:
        want = lesson_id(self.failure, self.fix, self.scope)
        if self.id != want:
            raise ValueError(
                f"id {self.id} does not match its failure, fix and scope ({want}): a lesson edited by "
                "hand needs the id its content gives"
            )
        flags = [c.flag for c in self.fix]
        if len(set(flags)) != len(flags):
            raise ValueError("the fix changes one flag twice")
        return self

    def describe_fix(self) -> str:
        return ", ".join(c.describe() for c in self.fix)


def lesson_id(failure: Failure, fix: list[FixChange], scope: Scope) -> str:
    """The same failure cured the same way on the same scope has one id, whichever machine learned
    it (a fleet's nodes agree); strength, evidence and sources are not part of it."""
    blob = json.dumps(
        {
            "failure": failure.key,
            "fix": [[c.flag, c.before, c.after] for c in fix],
            "scope": scope.model_dump(exclude_none=True),
        },
        sort_keys=True,
        default=str,
    )
    return "L-" + hashlib.sha256(blob.encode()).hexdigest()[:10]


# -- how far a lesson reaches ---------------------------------------------------------------------
@dataclass
class Reach:
    """How a lesson's scope meets a run's: `exact`, `near` (with a weight below 1) or `none`."""

    kind: Literal["exact", "near", "none"]
    weight: float
    why: list[str] = field(default_factory=list)  # each field that is not the same, and how far


def _series(v: str | None) -> tuple[int, ...] | None:
    """An engine's release series: the major version, or major.minor under 1.0 (0.5.x)."""
    try:
        rel = Version(v).release if v else None
    except InvalidVersion:
        return None
    if not rel:
        return None
    return tuple(rel[:2]) if rel[0] == 0 else (rel[0],)


def _major_minor(v: str | None) -> tuple[str, ...]:
    return tuple((v or "").split(".")[:2])


def reach(lesson: Scope, here: Scope) -> Reach:
    """How far a lesson learned on `lesson` reaches on `here` (module docstring; docs/lessons.md)."""
    for name in _OUT_OF_REACH:
        a, b = getattr(lesson, name), getattr(here, name)
        if a is not None and b is not None and str(a).lower() != str(b).lower():
            return Reach("none", 0.0, [f"{name}: {a} there, {b} here"])
    if lesson.engine_version != here.engine_version and (
        _series(lesson.engine_version) != _series(here.engine_version) or _series(here.engine_version) is None
    ):
        return Reach(
            "none", 0.0, [f"engine version: {lesson.engine_version} there, {here.engine_version} here"]
        )
    if lesson.cuda and here.cuda and _major_minor(lesson.cuda)[:1] != _major_minor(here.cuda)[:1]:
        return Reach("none", 0.0, [f"CUDA major: {lesson.cuda} there, {here.cuda} here"])
    w, why = 1.0, list[str]()
    for name in ("engine_version", "gpu", "gpu_count", "link", "driver", "cuda"):
        a, b = getattr(lesson, name), getattr(here, name)
        if name == "cuda" and _major_minor(a) == _major_minor(b):
            continue
        w, why = _near(name, a, b, w, why)
    for name in _OUT_OF_REACH:  # a fact one side does not know
        a, b = getattr(lesson, name), getattr(here, name)
        if (a is None) != (b is None):
            w *= NEAR["unknown"]
            why.append(
                f"{name}: {a if a is not None else 'unknown'} there, {b if b is not None else 'unknown'} here"
            )
    w, why = _size(lesson.weights_gib, here.weights_gib, w, why)
    return Reach("exact" if not why else "near", w, why)


def _near(name: str, a: Any, b: Any, w: float, why: list[str]) -> tuple[float, list[str]]:
    if a == b:
        return w, why
    factor = NEAR["unknown"] if (a is None) != (b is None) else NEAR[name]
    return w * factor, [
        *why,
        f"{name}: {a if a is not None else 'unknown'} there, {b if b is not None else 'unknown'} here",
    ]


def _size(a: float | None, b: float | None, w: float, why: list[str]) -> tuple[float, list[str]]:
    """Another size of the same architecture: near, and farther past a factor of 4."""
    if a is None and b is None:
        return w, why
    if a is None or b is None:
        return w * NEAR["unknown"], [*why, "model size: unknown on one side"]
    ratio = max(a, b) / min(a, b)
    if ratio <= 1 + _SAME_SIZE:
        return w, why
    factor = NEAR["weights_gib"] * (0.5 if ratio > 4 else 1.0)
    return w * factor, [*why, f"model size: {a:g} GiB there, {b:g} GiB here"]


def weight(lesson: Lesson, here: Scope) -> Reach:
    """The lesson's reach here, its weight scaled by its strength (a contradicted lesson weighs less)."""
    r = reach(lesson.scope, here)
    return Reach(r.kind, 0.0 if r.kind == "none" else round(PRIOR_MAX * r.weight * lesson.strength, 4), r.why)


def first_worthy(lesson: Lesson, r: Reach) -> bool:
    """Exact scope and a strength nothing has cut below FIRST_MIN: its fix is the first launch."""
    return r.kind == "exact" and lesson.strength >= FIRST_MIN
