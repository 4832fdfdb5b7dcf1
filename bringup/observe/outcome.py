"""The outcome of one trial, as it is written to outcome.json and printed with --json."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_serializer

from bringup.observe.remedies import Remedy

# cancelled: the run stopped the trial before it answered (preempted by a likelier full launch):
# no verdict on its candidate.
Status = Literal["works", "fails", "wrong-output", "timeout", "cancelled"]


class Timings(BaseModel):
    to_ready: float | None = None  # launch to ready (seconds)
    total: float = 0.0  # launch to the end of teardown
    probes: float | None = None
    teardown: float | None = None
    fatal_to_teardown: float | None = None  # the fatal line (or exit) to the end of teardown
    simulated: float | None = None  # scenarios: simulated seconds the launch stands for
    overhead: float | None = None  # bringup's own pre-launch work (version, --help, validation)
    ready_lag: float | None = None  # the engine's last start-up line to bringup seeing it ready
    # Seconds without a log line while a compiler under the server worked (a JIT build: slow, not
    # hung), and the compilers seen (bringup/trial/jitwatch.py)
    jit_silent: float | None = None
    jit_tools: list[str] = Field(default_factory=list)


class ProbeResult(BaseModel):
    """One probe of the ladder: what the probe runner returns and what outcome.json records."""

    name: str
    passed: bool
    detail: str = ""
    seconds: float = 0.0
    phase: str = "ready"
    kind: str = "ok"  # ok | skipped (cannot apply; passed) | server-error (HTTP 5xx / dropped) | disagree | nan | stall

    @field_serializer("seconds")
    def _round(self, v: float) -> float:
        return round(v, 3)


class OverrideRecord(BaseModel):
    flag: str
    requested: Any = None
    effective: Any = None
    evidence: str = ""


# A compile that kept a launch silent this long is worth a line in the report (issue 23: say when
# a launch was slow only because a cache was cold).
COLD_START_S = 10.0


class Outcome(BaseModel):
    status: Status
    failure_class: str | None = None
    phase: str | None = None
    evidence: list[str] = Field(default_factory=list)
    hint: str | None = None
    implicates: list[str] = Field(default_factory=list)
    signature: str | None = None
    # factor -> the levels that load the package the failure names or was raised in (a missing
    # flash_attn: {"--attention-backend": ["FLASH_ATTN"]}); empty when it names none.
    implicated_levels: dict[str, list[str]] = Field(default_factory=dict)
    root_exception: str | None = None  # the root exception: "Type: message in function (file:line)"
    # The engine's own advice beneath the failure, in its order: flag (or env:NAME), the value it names
    # (None: only a direction or none), action set/raise/lower/remove, the line (bringup/observe/remedies.py).
    remedies: list[Remedy] = Field(default_factory=list)
    # The root exception's frames, innermost last, as "module/path.py:function" (Classification.frames).
    frames: list[str] = Field(default_factory=list)
    # The engine's own words about the implementations it picked ("Using FLASH_ATTN attention
    # backend", "Selected CutlassFP8ScaledMMLinearKernel for Fp8LinearMethod"), first seen first: a
    # kernel family a failure may belong to though its lines do not name it (Engine.implementation_lines).
    selected: list[str] = Field(default_factory=list)
    requested: dict[str, Any] = Field(default_factory=dict)
    effective: dict[str, Any] = Field(default_factory=dict)
    overrides: list[OverrideRecord] = Field(default_factory=list)
    timings: Timings = Field(default_factory=Timings)
    probes: list[ProbeResult] = Field(default_factory=list)
    log_path: str | None = None
    launched: bool = True
    exit_code: int | None = None
    engine: str = ""
    engine_version: str | None = None
    candidate: dict[str, Any] = Field(default_factory=dict)
    candidate_key: str = ""
    argv: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    kv_report: dict[str, Any] | None = None
    bench: dict[str, Any] | None = None  # a workload run while the server was up (tuning)
    teardown: dict[str, Any] | None = None
    gpu: dict[str, Any] | None = (
        None  # GPU memory before the launch and after teardown (bringup/facts/gpus.py)
    )

    @property
    def works(self) -> bool:
        return self.status == "works"

    def key_evidence(self) -> str:
        return self.evidence[0] if self.evidence else ""

    def cold_start(self) -> str:
        """Why this launch was slow to start, when kernel compilers kept it quiet: a cold JIT cache
        (FlashInfer, DeepGEMM, Triton, inductor), which the next start on this machine reuses.
        Empty when no compiler worked through a silence of COLD_START_S or more."""
        t = self.timings
        if not t.jit_silent or t.jit_silent < COLD_START_S:
            return ""
        share = f" of its {t.to_ready:.0f} s to ready" if t.to_ready else ""
        tools = ", ".join(t.jit_tools) or "a compiler"
        return (
            f"{t.jit_silent:.0f} s{share} were kernels compiling ({tools}) with no log line: a cold JIT "
            f"cache, which later starts on this machine reuse"
        )
