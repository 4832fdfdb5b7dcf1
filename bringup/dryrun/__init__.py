"""Ask the engine itself: the installed engine's own checks on a candidate, before any launch.

A dry run gives the candidate (flags, environment) and the target's facts (compute capability,
GPU memory and count, the model) to the INSTALLED engine's own validators, in a child process
that imports the engine once and describes the device from the facts instead of reading a GPU
(bringup/dryrun/vllm_child.py). The answer is a ``DryVerdict``: refused (with the engine's own
message), passes, or cannot check (why). A refusal becomes an ``Outcome`` (``refusal_outcome``)
that the search observes exactly as a launch's, marked "refused by vLLM 0.32.0's own check, no
launch". Engine differences live in the adapters (one module per engine: ``vllm``, ``sglang``),
chosen by the target's dialect through ``ADAPTERS``.

Graceful by design: no adapter for the engine, the engine not installed, another version
installed than the target's, a child that does not start or answer, a check that needs CUDA:
each is "cannot check (why)", said once in ``notes``, and the run carries on without it.
"""

from __future__ import annotations

import atexit
import dataclasses
import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from bringup.core.candidate import Candidate
from bringup.dryrun.child import Child
from bringup.observe.outcome import Outcome, Timings

Status = Literal["refused", "passes", "cannot"]
NO_GPU_ENV = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "", "ROCR_VISIBLE_DEVICES": ""}


@dataclass(frozen=True)
class DryVerdict:
    """The engine's own answer on one candidate."""

    status: Status
    message: str
    engine_version: str | None = None
    engine: str = ""  # display name: vLLM, SGLang
    check: str = ""  # which of the engine's checks spoke (attention, quantization, engine-config, ...)
    flag: str | None = None  # the factor the check is about, when it names one
    also: tuple[str, ...] = ()  # other flags whose values the refusal's reasons name (--block-size, ...)
    source: str = ""  # where in the engine's source the check lives
    traceback: tuple[str, ...] = ()
    seconds: float = 0.0
    phase: str | None = None  # where a launch would have died (the engine's own order of checks)

    @property
    def refused(self) -> bool:
        return self.status == "refused"

    @property
    def label(self) -> str:
        who = f"{self.engine} {self.engine_version}".strip()
        if self.status == "refused":
            return f"refused by {who}'s own check, no launch"
        if self.status == "passes":
            return f"passes {who}'s own checks"
        return f"cannot check with {who}" if who else "cannot check"

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "message": self.message,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "check": self.check,
            "flag": self.flag,
            "also": list(self.also),
            "source": self.source,
            "label": self.label,
            "seconds": round(self.seconds, 4),
        }


class DryAdapter(Protocol):
    """One engine's dry run: how to start its child and what to ask it."""

    display: str

    def child_argv(self, python: str, device: str) -> list[str]: ...
    def request(self, cand: Candidate, facts: dict[str, Any]) -> dict[str, Any]: ...
    def importable(self, python: str) -> str | None:
        """None when the engine can be imported by ``python``; else why not."""
        ...


def _adapters() -> dict[str, DryAdapter]:
    from bringup.dryrun.sglang import SglangDryRun
    from bringup.dryrun.vllm import VllmDryRun

    return {"vllm": VllmDryRun(), "sglang": SglangDryRun()}


@dataclass
class DryRun:
    """The dry run for one target: ``check(candidate)`` before every launch."""

    dialect: str
    python: str
    facts: dict[str, Any]
    target_version: str | None
    installed_version: str | None
    adapter: DryAdapter | None = None
    notes: list[str] = field(default_factory=list)  # said once: why it cannot check
    _child: Child | None = None
    _why_not: str | None = None
    _cache: dict[str, DryVerdict] = field(default_factory=dict)
    costs: list[float] = field(default_factory=list)  # seconds per answered candidate (warm)
    start_s: float | None = None  # the child's cold start (spawn to ready)
    # False: a copy that shares another DryRun's child (other facts, one import): close() leaves it
    owns_child: bool = True

    def __post_init__(self) -> None:
        self.adapter = self.adapter or _adapters().get(self.dialect)
        name = self.adapter.display if self.adapter else self.dialect
        if self.adapter is None:
            self._why_not = f"no dry-run adapter for {self.dialect}"
        elif self.installed_version is None:
            self._why_not = (
                self.adapter.importable(self.python) or f"{name} is not installed for {self.python}"
            )
        elif self.target_version and self.installed_version != self.target_version:
            self._why_not = (
                f"{name} {self.installed_version} is installed, the target is {self.target_version}: "
                "its checks would speak for another version"
            )
        if self._why_not:
            self.notes.append(f"dry run: cannot check: {self._why_not}")

    @property
    def display(self) -> str:
        return self.adapter.display if self.adapter else self.dialect

    @property
    def available(self) -> bool:
        return self._why_not is None

    def start(self) -> None:
        """Start the child now (non-blocking): its import overlaps with whatever comes next."""
        if self._why_not is None and self._child is None and self.adapter is not None:
            device = str(self.facts.get("device") or "cuda")
            # The device is the facts': the child never sees a GPU, so it can neither hold GPU
            # memory beside the run's servers (vLLM's FLASHINFER_MLA module allocates a CUDA
            # workspace at import) nor answer from the machine it happens to run on.
            self._child = Child(self.adapter.child_argv(self.python, device), env=NO_GPU_ENV)
            self._child.start()
            atexit.register(self._child.close)

    def check(self, cand: Candidate) -> DryVerdict:
        """The engine's own verdict on ``cand``; "cannot" (never an exception) where it cannot ask."""
        key = cand.key()
        if key in self._cache:
            return self._cache[key]
        v = self._ask(cand)
        self._cache[key] = v
        return v

    def _ask(self, cand: Candidate) -> DryVerdict:
        if self._why_not is not None or self.adapter is None:
            return self._cannot(self._why_not or "no adapter")
        self.start()
        assert self._child is not None
        t0 = time.time()
        cold = self._child.hello is None
        answer = self._child.ask(self.adapter.request(cand, self.facts))
        if cold and self._child.hello is not None and self._child.started_s is not None:
            self.start_s = float(self._child.hello.get("seconds") or 0.0)
        if answer is None:
            self._why_not = f"the {self.display} dry-run child failed: {self._child.error}"
            self.notes.append(f"dry run: cannot check: {self._why_not}")
            return self._cannot(self._why_not)
        if not cold:
            self.costs.append(time.time() - t0)
        status = answer.get("status")
        return DryVerdict(
            status if status in ("refused", "passes", "cannot") else "cannot",
            str(answer.get("message") or ""),
            self.installed_version,
            self.display,
            check=str(answer.get("check") or ""),
            flag=answer.get("flag"),
            also=tuple(str(f) for f in answer.get("also") or ()),
            source=str(answer.get("source") or ""),
            traceback=tuple(answer.get("traceback") or ()),
            phase=answer.get("phase"),
            seconds=float(answer.get("seconds") or 0.0),
        )

    def _cannot(self, why: str) -> DryVerdict:
        return DryVerdict("cannot", why, self.installed_version, self.display)

    def close(self) -> None:
        if self._child is not None and self.owns_child:
            self._child.close()

    def sharing(self, facts: dict[str, Any]) -> DryRun:
        """A copy that asks this dry run's child about another target's facts (one cold start for
        many runs: the benchmarks). The child is started here, before the copy is made: a copy of
        a not-yet-started dry run would start a child of its own that, not owning it, it never
        closes (420 MB a run)."""
        self.start()
        return dataclasses.replace(self, facts=dict(facts), _cache={}, notes=[], owns_child=False)


MODES: tuple[str, ...] = ("auto", "always", "never")  # --dry-run


def wanted(mode: str, facts: dict[str, Any], imitation: bool) -> bool:
    """Whether a run asks the engine's own checks before its launches.

    ``auto`` (the default): where a launch is expensive and what is launched is the installed
    engine itself, that is a GPU target of a real engine. Not on a CPU target (the child's cold
    start, 10-70 s, costs about what a launch of a small model does, and the first launch waits
    for it), and not for a scenario's imitation (``imitation``: the installed engine's checks
    would speak for another program than the one launched, and a scenario written from an older
    source may hold a configuration the installed version refuses). ``always``: every target
    (benchmarks/dryrun_predict.py asks the installed vLLM about the scenarios); ``never``."""
    if mode == "always":
        return True
    if mode != "auto":
        return False
    return facts.get("device") == "cuda" and not imitation


def for_target(target: Any, facts: dict[str, Any]) -> DryRun:
    """The dry run for a resolved target (bringup.engines.targets.Target): its engine's interpreter, the
    version it targets (a scenario's imitated one, or the installed one) and the installed one."""
    from bringup.facts.installed import distribution_version

    eng = target.engine
    dialect = eng.log_dialect
    python = eng.python
    try:
        installed = distribution_version(python, list(eng.info.distributions))
    except Exception:  # an adapter without distributions: not installed as far as we can tell
        installed = None
    return DryRun(dialect, python, dict(facts), target.version, installed)


# A pydantic ValidationError ends with a link, not with what was wrong.
_NOT_THE_MESSAGE = re.compile(r"^\s*For further information visit |^\s*$")


def _message_line(message: str) -> str:
    """The refusal's own line: the last one that says what was wrong (pydantic's "Value error, X"
    before its link)."""
    lines = [ln for ln in message.strip().splitlines() if not _NOT_THE_MESSAGE.search(ln)]
    return lines[-1].strip() if lines else ""


def refusal_outcome(v: DryVerdict, cand: Candidate, dialect: str) -> Outcome:
    """A refusal as the Outcome a launch that printed the engine's message would have had: the
    same classifier reads it (the engine's own traceback when there is one), launched=False."""
    from bringup.engines.explain import explain_lines

    lines = list(v.traceback) or [v.message]
    out = explain_lines(lines, dialect, settings=cand.settings())
    msg_line = _message_line(v.message)
    evidence = [e for e in out.evidence if e] or [msg_line]
    if msg_line and not any(msg_line[:120] in e for e in evidence):
        evidence.insert(0, msg_line)
    out.status = "fails"
    out.launched = False
    out.evidence = [f"{v.label} ({v.check}): {msg_line}", *evidence]
    out.failure_class = out.failure_class or "incompatible-options"
    out.phase = v.phase or "parse-args"
    named = [f for f in (v.flag, *v.also) if f]  # the check's own flags first, the check's flag before all
    out.implicates = [*named, *(f for f in out.implicates if f not in named)]
    for flag in named:
        level = cand.flag_dict.get(flag)
        if isinstance(level, str):
            out.implicated_levels = {**out.implicated_levels, flag: [level]}
    out.hint = f"{v.label} ({v.check}; {v.source or 'the engine source'}). {out.hint or ''}".strip()
    out.timings = Timings(total=v.seconds, simulated=0.0, overhead=v.seconds)
    out.exit_code = None
    out.engine = dialect
    out.engine_version = v.engine_version
    out.candidate = cand.to_json()
    out.candidate_key = cand.key()
    out.log_path = None
    return out
