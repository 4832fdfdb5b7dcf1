"""The scenario file format: Pydantic models, field by field (documented in docs/scenarios.md).

A scenario says which engine and version it imitates, on what hardware, with which model, how
long each start-up phase takes, what the engine decides on its own (defaults, forced values,
warnings) and, through ordered rules, how a configuration ends: failing in a phase, hanging, or
serving (right, wrong, or batch-dependent output).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bringup.knowledge.conditions import Condition

if TYPE_CHECKING:
    from bringup.help.text import HelpSpec

Engine = Literal["sglang", "vllm"]
# Start-up phases in the order the engines walk them (bringup/data/classes.yaml `phases` keeps the
# same order): distributed-init (NCCL, custom all-reduce, symmetric memory) after the arguments are
# parsed and before weights load; kernel-warmup (autotuning, JIT kernel builds) after the KV cache
# and before CUDA graphs, as vLLM's gpu_worker.compile_or_warm_up_model runs kernel_warmup before
# capture_model.
FAIL_PHASES = (
    "parse-args",
    "distributed-init",
    "load-weights",
    "kv-alloc",
    "kernel-warmup",
    "graph-capture",
    "warmup",
    "first-request",
    "decode",
)
HANG_PHASES = FAIL_PHASES[1:]
WARN_AT = (
    "startup",
    "config",
    "distributed-init",
    "load-weights",
    "kv-alloc",
    "kernel-warmup",
    "graph-capture",
    "ready",
)
FailPhase = Literal[
    "parse-args",
    "distributed-init",
    "load-weights",
    "kv-alloc",
    "kernel-warmup",
    "graph-capture",
    "warmup",
    "first-request",
    "decode",
]
HangPhase = Literal[
    "distributed-init",
    "load-weights",
    "kv-alloc",
    "kernel-warmup",
    "graph-capture",
    "warmup",
    "first-request",
    "decode",
]
WarnAt = Literal[
    "startup",
    "config",
    "distributed-init",
    "load-weights",
    "kv-alloc",
    "kernel-warmup",
    "graph-capture",
    "ready",
]
# ok: right answers; garbage: fluent wrong answers; salad: random tokens (broken numerics that do
# not raise); inconsistent: greedy output depends on the batch. Faults only users' requests show
# (docs/scenarios.md, "Faults users see"): sampler: a request with temperature > 0 gets tokens its
# own top logprobs rule out (greedy is right); long-prompt: random tokens once the prompt is longer
# than `over` tokens (chunked prefill); concurrency: greedy output changes once more than `over`
# requests share the batch.
ServeMode = Literal["ok", "garbage", "salad", "inconsistent", "sampler", "long-prompt", "concurrency"]
BATCH_MODES = ("inconsistent", "concurrency")  # output depends on the batch a request shares


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Hardware(_Strict):
    gpu: str
    compute_capability: float
    count: int = Field(ge=1)
    memory_gib: float = Field(gt=0)
    smem_per_block_kib: float | None = None
    link: Literal["nvlink", "pcie"] | None = None


class Model(_Strict):
    name: str  # the model path the trial passes (--model-path / --model)
    architecture: str
    model_type: str
    attention: Literal["mha", "gqa", "mla", "dsa"]
    moe: bool = False
    quantization: str | None = None
    weights_gib: float = Field(gt=0)  # the whole checkpoint as loaded on the GPUs
    layers: int = Field(ge=1)
    replicated_gib: float = Field(0.0, ge=0)  # held by every GPU besides its shard (embeddings, ...)
    context_length: int = Field(131072, ge=1)
    dtype: str = "bfloat16"
    kv_heads: int = Field(8, ge=1)  # for mha/gqa KV sizes
    head_dim: int = Field(128, ge=1)


class Timing(_Strict):
    """Simulated seconds; the server sleeps each × --time-scale."""

    start: float = Field(10.0, ge=0)  # process start, distributed init
    load_weights: float = Field(60.0, ge=0)
    load_weights_dummy: float | None = Field(None, ge=0)  # --load-format dummy; default 5% of load_weights
    kv_alloc: float = Field(5.0, ge=0)
    graph_capture: float = Field(30.0, ge=0)
    warmup: float = Field(2.0, ge=0)  # SGLang's own warm-up request; vLLM's post-capture warm-up
    distributed_init: float = Field(0.0, ge=0)  # NCCL / custom all-reduce set-up (after `start`)
    kernel_warmup: float = Field(0.0, ge=0)  # autotuning, JIT kernel builds (after the KV cache)
    per_output_token: float = Field(0.03, ge=0)
    prefill_per_token: float = Field(0.0, ge=0)


class Performance(_Strict):
    """Serving speed as a function of the knobs and the load (docs/scenarios.md, "Performance model").

    Simulated seconds. The engine runs in steps; each step decodes one token for every running
    request and prefills up to the chunked-prefill size of prompt tokens. A step costs
    overhead + max(weights read, compute) + KV read (+ eager and all-reduce terms), times noise.
    """

    hbm_gbps: float = Field(gt=0)  # effective GPU memory bandwidth (GB/s): weights and KV read per step
    per_token_s: float = Field(gt=0)  # compute per token in a step (decode or prompt), whole model on one GPU
    step_overhead_s: float = Field(0.002, ge=0)  # per step: scheduling, sampling, graph launch
    eager_overhead_s: float = Field(0.0, ge=0)  # extra per step that runs without a CUDA graph
    tp_efficiency: float = Field(1.0, gt=0, le=1)  # compute share each TP rank past the first adds
    allreduce_s: float = Field(0.0, ge=0)  # TP > 1: per step (latency of the all-reduces)
    allreduce_per_token_s: float = Field(0.0, ge=0)  # TP > 1: per token in the step
    noise_sigma: float = Field(0.0, ge=0, le=1)  # lognormal sigma of each step's time (mean kept)
    seed: int = 0  # noise seed, unless the engine's own seed flag is given


class Entry(_Strict):
    """A default (applies when the flag is absent) or a forced value (applies whatever was asked)."""

    when: Any = None
    set: dict[str, Any]
    log: list[str] = Field(default_factory=list)
    why: str | None = None
    _condition: Condition = PrivateAttr(default_factory=Condition)
    _flags: dict[str, Any] = PrivateAttr(default_factory=dict)  # canonical flag -> value

    @property
    def condition(self) -> Condition:
        """Compiled by the loader against the engine's help."""
        return self._condition

    @property
    def flags(self) -> dict[str, Any]:
        """`set` with canonical flag names and typed values (filled by the loader)."""
        return self._flags

    @field_validator("set")
    @classmethod
    def _not_empty(cls, v: dict[str, Any]) -> dict[str, Any]:
        if not v:
            raise ValueError("set at least one flag")
        return v


class Warning_(_Strict):
    when: Any = None
    log: list[str] = Field(min_length=1)
    at: WarnAt = "startup"
    why: str | None = None
    _condition: Condition = PrivateAttr(default_factory=Condition)

    @property
    def condition(self) -> Condition:
        return self._condition


class Fail(_Strict):
    phase: FailPhase
    lines: list[str] = Field(min_length=1)
    exit_code: int | None = None  # None: the engine's usual (see docs)
    after_tokens: int | None = Field(None, ge=0)  # decode only: tokens generated before dying
    request: Literal["error", "drop"] | None = None  # serving deaths: HTTP 500 or a dropped connection
    # the CUDA graphs' own failure (their capture runs out of memory): a launch without CUDA graphs
    # (--enforce-eager, --disable-cuda-graph) captures none and does not meet it
    graphs: bool = False

    @model_validator(mode="after")
    def _tokens_for_decode(self) -> Fail:
        if self.after_tokens is not None and self.phase != "decode":
            raise ValueError(f"after_tokens applies to phase decode only, not {self.phase}")
        if self.request is not None and self.phase not in ("first-request", "decode"):
            raise ValueError(f"request applies to phases first-request and decode only, not {self.phase}")
        if self.exit_code is not None and not -64 <= self.exit_code <= 255:
            raise ValueError("exit_code must be 0..255, or -N to die by signal N")
        return self


class Repeat(_Strict):
    """Lines a hung engine keeps printing (vLLM's shm_broadcast warning every 60 s): output, but
    not progress; a watcher that counts any new line as progress never calls the hang."""

    every: float = Field(gt=0)  # simulated seconds between repeats
    lines: list[str] = Field(min_length=1)


class Hang(_Strict):
    phase: HangPhase
    lines: list[str] = Field(default_factory=list)
    after_tokens: int | None = Field(None, ge=0)
    repeat: Repeat | None = None

    @model_validator(mode="after")
    def _tokens_for_decode(self) -> Hang:
        if self.after_tokens is not None and self.phase != "decode":
            raise ValueError(f"after_tokens applies to phase decode only, not {self.phase}")
        return self


class Serve(_Strict):
    mode: ServeMode = "ok"
    over: int | None = Field(None, ge=1)  # long-prompt: prompt tokens; concurrency: requests at once

    @model_validator(mode="after")
    def _threshold(self) -> Serve:
        needs = self.mode in ("long-prompt", "concurrency")
        if needs and self.over is None:
            raise ValueError(f"serve mode {self.mode} needs `over` (its threshold)")
        if not needs and self.over is not None:
            raise ValueError(f"`over` applies to serve modes long-prompt and concurrency, not {self.mode}")
        return self


class ScenarioRule(_Strict):
    """What the double does when its condition holds: fail, hang or serve (knowledge.rules.Rule is
    the product's rule about flag levels)."""

    id: str | None = None
    when: Any = None
    fail: Fail | None = None
    hang: Hang | None = None
    serve: Serve | None = None
    why: str | None = None
    _condition: Condition = PrivateAttr(default_factory=Condition)

    @model_validator(mode="after")
    def _one_action(self) -> ScenarioRule:
        given = [k for k in ("fail", "hang", "serve") if getattr(self, k) is not None]
        if len(given) != 1:
            have = ", ".join(given) if given else "none"
            raise ValueError(f"a rule needs exactly one of fail, hang, serve (has: {have})")
        return self

    @property
    def condition(self) -> Condition:
        return self._condition

    @property
    def action(self) -> str:
        return "fail" if self.fail else "hang" if self.hang else "serve"

    @property
    def label(self) -> str:
        return self.id or self.action


class OtherwiseFactor(_Strict):
    """Per factor: the levels the rules model; any other effective level gets this action."""

    flag: str  # a flag (resolved like a condition key) or env:NAME
    levels: list[Any] = Field(min_length=1)  # modelled levels; null means "not set"
    fail: Fail | None = None
    hang: Hang | None = None
    serve: Serve | None = None
    why: str | None = None
    _target: str = PrivateAttr(default="")

    @model_validator(mode="after")
    def _one_action(self) -> OtherwiseFactor:
        given = [k for k in ("fail", "hang", "serve") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"an otherwise factor needs exactly one of fail, hang, serve (has: {', '.join(given) or 'none'})"
            )
        return self

    @property
    def target(self) -> str:
        """The canonical flag or env:NAME (filled by the loader)."""
        return self._target


class Otherwise(_Strict):
    """What a configuration that no rule names does. `factors` are checked in order (the first
    whose effective level is not among its `levels` decides), then `default`."""

    default: Literal["serve"] | ScenarioRule = "serve"
    factors: list[OtherwiseFactor] = Field(default_factory=list)
    why: str | None = None

    @field_validator("default", mode="before")
    @classmethod
    def _default_action(cls, v: Any) -> Any:
        return v if v == "serve" or not isinstance(v, dict) or "when" not in v else _no_when(v)


def _no_when(v: dict) -> dict:
    raise ValueError("otherwise.default takes no `when`: it applies when no rule and no factor did")


class Answer(_Strict):
    prompt: str = Field(min_length=1)
    expected: str = Field(min_length=1)
    wrong: str | None = None  # what `garbage` answers instead (default: derived from expected)


class Expectation(_Strict):
    """A launch a test makes through the oracle and one real trial: `changes` from the baseline
    (`--flag value` tokens, `--no-flag`, or `NAME=VALUE` env tokens first), and what it must do."""

    changes: str = ""  # empty: the baseline itself
    status: Literal["works", "fails", "wrong-output", "timeout"]
    phase: str | None = None
    why: str | None = None


class Scenario(_Strict):
    name: str
    description: str
    engine: Engine
    engine_version: str
    # The engine flags a user would start from (the model card's command, without the model, host
    # and port): where `bringup run` and the benchmarks begin. Optional; checked against the help.
    baseline: str | None = None
    hardware: Hardware
    model: Model
    timing: Timing = Field(default_factory=Timing)
    performance: Performance | None = None  # None: timing.per_output_token, whatever the load
    defaults: list[Entry] = Field(default_factory=list)
    force: list[Entry] = Field(default_factory=list)
    warnings: list[Warning_] = Field(default_factory=list)
    rules: list[ScenarioRule] = Field(default_factory=list)
    # What configurations no rule names do. None (test scenarios only): serve correctly; every
    # shipped scenario says it explicitly (tests/scenario/test_scenario_shipped.py).
    otherwise: Otherwise | None = None
    answers: list[Answer] = Field(default_factory=list)
    # True: written from public bug reports for the blind search; no knowledge rule or signature names
    # its trap on purpose (tests/session/test_search.py does not require the knowledge search to solve it).
    blind: bool = False
    # Machine-readable expectations for tests: launches (baseline plus changes) and their outcome.
    expect: list[Expectation] = Field(default_factory=list)
    _path: str = PrivateAttr(default="")

    @field_validator("engine_version", mode="before")
    @classmethod
    def _version_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v

    @field_validator("baseline")
    @classmethod
    def _baseline_flags(cls, v: str | None, info: ValidationInfo) -> str | None:
        """Flags the engine version's help accepts, and none that the trial itself sets."""
        engine, version = info.data.get("engine"), info.data.get("engine_version")
        if v is None or engine is None or version is None:
            return v
        from bringup.core.candidate import FlagError, bad_text, parse_command
        from bringup.help.text import bundled_versions

        if version not in bundled_versions(engine):
            return v  # the loader reports the unknown version
        from bringup.core.reserved import role_of
        from bringup.scenario.engine_args import help_for

        spec = help_for(engine, version)[0]
        if bad := bad_text(v):  # a NUL reaches no process: refused here, not after a launch
            raise ValueError(f"the baseline {bad}")
        try:
            flags, _env = parse_command(v, spec)
        except FlagError as e:
            raise ValueError(f"{e} ({engine} {version})") from None
        for name in flags:
            if role_of(name, engine, spec) is not None:
                raise ValueError(f"leave out {name}: the trial sets the model, host, port and served name")
        return v

    @property
    def path(self) -> str:
        return self._path

    def help_spec(self) -> HelpSpec:
        from bringup.scenario.engine_args import help_for

        return help_for(self.engine, self.engine_version)[0]

    def facts(self) -> dict[str, Any]:
        """Flat facts for knowledge rules (the same keys bringup reads from a real machine)."""
        hw, m = self.hardware, self.model
        return {
            "gpu.name": hw.gpu,
            "gpu.count": hw.count,
            "gpu.compute_capability": float(hw.compute_capability),
            "gpu.memory_gib": hw.memory_gib,
            "gpu.smem_per_block_kib": hw.smem_per_block_kib,
            "gpu.link": hw.link,
            "device": "cuda",
            "model.architecture": m.architecture,
            "model.model_type": m.model_type,
            "model.attention": m.attention,
            "model.moe": m.moe,
            "model.quantization": m.quantization,
            "model.weights_gib": m.weights_gib,
            "model.layers": m.layers,
            "model.max_context": m.context_length,
            "engine.name": self.engine,
            "engine.version": self.engine_version,
        }
