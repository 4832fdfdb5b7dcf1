"""One adapter per engine, driven by ``bringup/data/engines.yaml``.

An adapter knows how to launch the engine (an argv list through ``python -m``), give it a port
and a model path, where it answers when ready, its installed version, its ``--help`` (parsed
into options and cached per version), and how to read phases and the effective configuration
back from its log.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bringup.core.candidate import Candidate, FlagValue
from bringup.core.datafiles import DATA, KnowledgeFileError, load_yaml, phase_index
from bringup.engines.world import HERE, World
from bringup.facts.installed import distribution_version
from bringup.guard import files
from bringup.help.text import HelpSpec, parse_help
from bringup.observe.effective import (
    EffectiveConfig,
    find_overrides,
    parse_engine_config,
    parse_non_default_args,
    parse_server_args,
)
from bringup.verify.probes import ProbeConfig
from bringup.verify.reference import precision_of

_HELP_TEXT = re.compile(r"\[--[\w-]+|^\s*usage: |^\s+--[\w-]+[ =,]")


class PhaseMarker(BaseModel):
    """A progress line of the engine and the phase it starts. ``pattern`` is a regex; ``all`` is a
    pattern of meaning: every regex in it found in the line, in any order and any case ("capture"
    and "cuda graph"), so a reworded line of the next version still counts; ``unless`` (any case)
    rules the line out ("finished", "took")."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    pattern: str | None = None
    all_of: list[str] = Field(default_factory=list, alias="all")
    unless: str | None = None
    phase: str

    @model_validator(mode="after")
    def _one_kind(self) -> PhaseMarker:
        if not self.pattern and not self.all_of:
            raise ValueError("a phase marker needs a pattern or an all: list")
        return self

    def matches(self, line: str) -> bool:
        if self.pattern and not re.search(self.pattern, line):
            return False
        if any(not re.search(w, line, re.IGNORECASE) for w in self.all_of):
            return False
        return not (self.unless and re.search(self.unless, line, re.IGNORECASE))


class OverrideRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pattern: str
    dest: str
    effective: str | None = None  # fixed value; else the pattern's (?P<value>...) group
    source: str = ""


class ProbeSupport(BaseModel):
    """What of the OpenAI API the engine's server really offers, for the probe ladder."""

    model_config = ConfigDict(extra="forbid")
    list_models: bool = True  # /v1/models lists the served model (else the probes name it themselves)
    ignore_eos: bool = True  # the completions API accepts vLLM's `ignore_eos` extension
    logprobs: bool = True  # completions return token logprobs (else no NaN check on them)
    top_k: bool = True  # completions take `top_k` (and `n`): the sampled probes' top-k set
    seeded: bool = True  # the same request `seed` promises the same tokens (best effort)
    # completions take `return_token_ids` (or ignore it, as pydantic does unknown fields); a server
    # that answers HTTP 422 to unknown fields is not sent it
    token_ids: bool = True
    batch_flags: list[str] = Field(default_factory=list)  # flags that set the maximum batch
    # The engine's periodic scheduler line (running requests, tokens/s): a stall's evidence.
    scheduler_log: str | None = None
    source: str = ""


def batch_of(flags: dict, names: list[str]) -> int | None:
    """The launch's maximum batch, from the first of `names` it sets (None: the engine's default)."""
    for n in names:
        v = flags.get(n)
        if v is None or isinstance(v, bool):
            continue
        try:
            return int(v)
        except (TypeError, ValueError):
            continue
    return None


class GpuNeed(BaseModel):
    """How many GPUs one launch takes, read from its flags: trials that run at once get disjoint
    GPUs (bringup/trial/slots.py), so a candidate must say how many it needs before it is placed."""

    model_config = ConfigDict(extra="forbid")
    product: list[str] = Field(default_factory=list)  # flags whose values multiply (tp x pp x dp)
    # the ones of them that split the weights (tp x pp; data parallel replicates them): below the
    # split the weights need, a launch cannot load them (Strategy.limit_weights)
    shard: list[str] = Field(default_factory=list)
    # flags that change the size of the weights themselves (a quantization): the split they need
    # is not known where a launch sets one other than the baseline's
    resize: list[str] = Field(default_factory=list)
    # A flag (or its default, when absent) at one of these values spreads the model over every
    # visible GPU (transformers' device_map "auto"): such a launch takes the whole machine.
    all_when: dict[str, list[str]] = Field(default_factory=dict)
    source: str = ""


class StartupMemory(BaseModel):
    """The engine reserves a share of the device's memory (of host memory, on a CPU build) when it
    starts, and stops if less than that is free then: a level of ``flag`` whose share is over what
    the machine has free cannot start (Strategy.limit_memory weighs it before any launch)."""

    model_config = ConfigDict(extra="forbid")
    flag: str | None = None  # the share (0-1] of the device's memory asked for; None: no such check
    # by device (cuda, cpu): memory the engine's own processes take before its check (a CUDA
    # context; on the CPU build, the API server and the engine core)
    overhead_gib: dict[str, float] = Field(default_factory=dict)
    source: str = ""


class ReservedFlags(BaseModel):
    """Flags that choose where the server listens and what it serves, which bringup sets itself:
    refused from every origin (bringup/core/reserved.py reads them, with their aliases from the help
    captures)."""

    model_config = ConfigDict(extra="forbid")
    flags: dict[str, Literal["host", "port", "socket", "model"]] = Field(default_factory=dict)
    source: str = ""


class ApiKeySource(BaseModel):
    """Where the server reads the key its clients must send (its flag first, then its variables,
    in the engine's own order): the probes and the load generator send it as a Bearer token."""

    model_config = ConfigDict(extra="forbid")
    flags: list[str] = Field(default_factory=list)
    env: list[str] = Field(default_factory=list)
    source: str = ""


class EngineInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    module: str
    display_name: str = ""  # how reports name it (SGLang, vLLM, transformers serve)
    command: list[str] = Field(default_factory=list)  # subcommand words after the module (`serve`)
    distributions: list[str]
    model_flag: str | None  # None: the model is the first positional argument
    fixed_args: list[str] = Field(default_factory=list)  # always passed (e.g. `--log-level info`)
    env: dict[str, str] = Field(default_factory=dict)  # set for every launch and help capture
    install_hint: str = ""
    probes: ProbeSupport = Field(default_factory=ProbeSupport)
    help_args: list[str] = Field(default_factory=lambda: ["--help"])
    ready_paths: list[str] = Field(default_factory=lambda: ["/health"])
    ready_log: str | None = None
    phases: list[PhaseMarker] = Field(default_factory=list)
    overrides: list[OverrideRule] = Field(default_factory=list)
    config_aliases: dict[str, str] = Field(default_factory=dict)
    # CLI dests whose effective value sits nested in the printed config (dotted path): SGLang 0.5.23
    # folds --cuda-graph-backend-decode into cuda_graph_config.decode.backend and prints both, the
    # flat field as asked and the nested one as resolved. The nested value wins.
    config_paths: dict[str, str] = Field(default_factory=dict)
    teardown_log: str | None = None
    # The lines of the engine's own shutdown sequence, whoever started it: when one of them comes
    # before the teardown marker, the engine began to stop by itself (a failure of its own front
    # end after it was up), and what follows is that failure, not noise.
    shutdown_log: str | None = None
    # Lines where the engine says which implementation it picked ("Using FlashInfer for top-p &
    # top-k sampling."): evidence that names a component when output is silently wrong.
    implementation_log: list[str] = Field(
        default_factory=lambda: [
            r"\bUsing\b.{1,80}?\b(backend|kernel|sampler|sampling|GEMM|attention|MoE|all-?reduce)\b",
            # "Selected CutlassFP8ScaledMMLinearKernel for Fp8LinearMethod" (vllm
            # model_executor/layers/quantization/kernels: the kernel a quantized layer runs)
            r"\bSelected\s+\S*(Kernel|Backend|kernel|backend)\b",
        ]
    )
    log_marker: str | None = None  # a regex that tells this engine's log apart (bringup explain)
    gpus: GpuNeed = Field(default_factory=GpuNeed)
    startup_memory: StartupMemory = Field(default_factory=StartupMemory)
    reserved: ReservedFlags = Field(default_factory=ReservedFlags)
    api_key: ApiKeySource = Field(default_factory=ApiKeySource)


@lru_cache(maxsize=1)
def _all_info() -> dict[str, EngineInfo]:
    raw = load_yaml(DATA / "engines.yaml")
    return {name: EngineInfo.model_validate(v) for name, v in raw.items()}


def engine_names() -> tuple[str, ...]:
    """The real engines bringup knows how to launch (the entries of engines.yaml)."""
    return tuple(_all_info())


def display_name(name: str) -> str:
    """The engine's name in reports; a name engines.yaml does not know is shown as given."""
    info = _all_info().get(name)
    return (info.display_name or name) if info else name


def engine_info(name: str) -> EngineInfo:
    info = _all_info()
    if name not in info:
        raise KnowledgeFileError(f"unknown engine {name!r}; known: {', '.join(info)}")
    return info[name]


def help_cache_dir() -> Path:
    base = os.environ.get("BRINGUP_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "bringup")
    return Path(base) / "help"


def _canonical(names: list[str], spec: HelpSpec | None) -> list[str]:
    """Flag names as the engine's --help spells them (an alias resolved), where it knows them."""
    return [opt.name if (opt := spec.get(n) if spec is not None else None) is not None else n for n in names]


@dataclass
class Engine:
    """A real engine installed in a Python environment (``python`` runs it)."""

    name: str
    python: str = field(default_factory=lambda: sys.executable)
    gpus: str | None = None  # the target's CUDA_VISIBLE_DEVICES (None: inherit the environment's)

    @property
    def info(self) -> EngineInfo:
        return engine_info(self.name)

    @property
    def log_dialect(self) -> str:
        """Whose log format and signatures apply (a scenario speaks its engine's dialect)."""
        return self.name

    # -- launching -------------------------------------------------------------------------
    def model_args(self, model: str) -> list[str]:
        """The model as the engine takes it: behind its flag, or positional."""
        return [self.info.model_flag, model] if self.info.model_flag else [model]

    def launch_argv(self, cand: Candidate, host: str, port: int) -> list[str]:
        return [
            self.python,
            "-m",
            self.info.module,
            *self.info.command,
            *self.model_args(cand.model),
            "--host",
            host,
            "--port",
            str(port),
            *self.info.fixed_args,
            *cand.argv_flags(),
        ]

    def command_prefix(self, cand: Candidate) -> list[str]:
        """The start of a copy-pasteable command (report only)."""
        return ["python", "-m", self.info.module, *self.info.command, *self.model_args(cand.model)]

    def launch_env(self, cand: Candidate) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.info.env)
        env.update(cand.env_dict)
        if self.gpus is not None:  # the target's GPUs win over an inherited or candidate value
            env["CUDA_VISIBLE_DEVICES"] = self.gpus
        env.setdefault("PYTHONUNBUFFERED", "1")  # log lines must stream, not sit in a buffer
        return env

    def api_key(self, cand: Candidate, env: Mapping[str, str]) -> str | None:
        """The key the server launched with these flags and this environment wants from its
        clients, read where the engine reads it (engines.yaml `api_key:`, the flag before the
        variables): VLLM_API_KEY inherited from the user's shell is never in the candidate (a
        secret), yet the server requires it (round three: a working server reported failing in
        `ready` with HTTP 401). None: the server wants none."""
        flags = cand.flag_dict
        for name in self.info.api_key.flags:
            v = flags.get(name)
            v = v[0] if isinstance(v, tuple) and v else v
            if isinstance(v, str) and v:
                return v
        return next((env[n] for n in self.info.api_key.env if env.get(n)), None)

    def parallel_flags(self, spec: HelpSpec | None) -> list[str]:
        """The flags whose product is a launch's GPU count, by their canonical names."""
        return _canonical(self.info.gpus.product, spec)

    def shard_flags(self, spec: HelpSpec | None) -> tuple[list[str], list[str]]:
        """The flags whose product splits the weights over GPUs, and those that change the weights'
        size, by their canonical names."""
        return _canonical(self.info.gpus.shard, spec), _canonical(self.info.gpus.resize, spec)

    def gpus_needed(self, cand: Candidate, spec: HelpSpec | None, machine_gpus: int) -> int:
        """GPUs one launch of ``cand`` takes on a machine with ``machine_gpus`` (0: none needed)."""
        if machine_gpus <= 0:
            return 0
        need = self.info.gpus
        flags = cand.flag_dict

        def value(name: str) -> FlagValue | None:
            opt = spec.get(name) if spec is not None else None
            key = opt.name if opt is not None else name
            v = flags.get(key, flags.get(name))
            return v if v is not None else (opt.default if opt is not None else None)

        for name, spread in need.all_when.items():
            if str(value(name)) in spread:
                return machine_gpus
        n = 1
        for name in need.product:
            try:
                n *= max(1, int(str(value(name) or 1)))
            except ValueError:
                pass  # the engine rejects a non-number itself, on one GPU's worth of launch
        return n

    def probe_config(self, cfg: ProbeConfig, cand: Candidate) -> ProbeConfig:
        """The probe settings for this engine's server: what its API lacks is not asked for."""
        sup = self.info.probes
        return replace(
            cfg,
            list_models=sup.list_models and cfg.list_models,
            ignore_eos=sup.ignore_eos and cfg.ignore_eos,
            logprobs=sup.logprobs and cfg.logprobs,
            top_k=sup.top_k and cfg.top_k,
            seeded=sup.seeded and cfg.seeded,
            token_ids=sup.token_ids and cfg.token_ids,
            max_batch=cfg.max_batch or batch_of(cand.flag_dict, sup.batch_flags),
            model_name=cfg.model_name or (None if sup.list_models else cand.model),
            reference_precision=precision_of(cand.flag_dict),
        )

    # -- version and help ------------------------------------------------------------------
    def version(self) -> str | None:
        return distribution_version(self.python, self.info.distributions)

    def help_text(self, version: str | None = None) -> str | None:
        """The engine's --help, captured once per version and cached."""
        version = version or self.version()
        if version is None:
            return None
        cache = help_cache_dir() / f"{self.name}-{version}.txt"
        if cache.exists():
            return cache.read_text()
        env = dict(os.environ)
        env.update(self.info.env)
        env["COLUMNS"] = "80"  # argparse and click wrap help to the terminal width; keep captures comparable
        try:
            out = subprocess.run(
                [self.python, "-m", self.info.module, *self.info.command, *self.info.help_args],
                capture_output=True,
                text=True,
                timeout=180,
                env=env,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        text = out.stdout
        if out.returncode != 0 or "usage:" not in text.lower():  # argparse "usage:", click "Usage:"
            return None
        cache.parent.mkdir(parents=True, exist_ok=True)
        files.write_text(cache, text)
        return text

    def help_spec(self, version: str | None = None) -> HelpSpec | None:
        text = self.help_text(version)
        return parse_help(text) if text else None

    # -- where its launches happen --------------------------------------------------------
    def world(self) -> World:
        """This machine in wall time (bringup/engines/world.py). A test double that replays
        another machine hands out its own, so that no core module asks which it drives."""
        return HERE

    def env_registry(self, version: str | None):
        """The environment variables this engine version reads (bringup.env.registry.Registry)."""
        from bringup.env.registry import load_registry

        return load_registry(self.log_dialect, self.python, version)

    # -- reading the log -------------------------------------------------------------------
    def phase_of(self, line: str) -> str | None:
        if _HELP_TEXT.search(line):
            return None  # an argparse usage or help line names flags, not progress ("[--cudagraph-capture-sizes ...]")
        for m in self.info.phases:
            if m.matches(line):
                return m.phase
        return None

    def teardown_line(self, line: str) -> bool:
        """The engine's own shutdown line (engines.yaml teardown_log): what follows is teardown."""
        marker = self.info.teardown_log
        return marker is not None and re.search(marker, line) is not None

    def before_teardown(self, lines: list[str]) -> list[str]:
        """The log up to the engine's first shutdown line (what follows is teardown noise), unless
        the engine's shutdown sequence began before that line: then the engine stopped itself and
        the whole log is its failure (vLLM 0.24.0, after "Starting vLLM server", stops its engine
        core with SIGTERM and then prints the API server's own traceback: a TLS certificate that
        does not exist, tests/data/logs/vllm-h100-real-ssl-certfile-missing.log)."""
        own = self.info.shutdown_log
        for i, ln in enumerate(lines):
            if self.teardown_line(ln):
                return lines[:i]
            if own is not None and re.search(own, ln):
                return lines
        return lines

    def implementation_lines(self, lines: list[str], limit: int = 6) -> list[str]:
        """The engine's own words about the implementations it picked, first seen first."""
        out: list[str] = []
        for line in lines:
            if any(re.search(p, line) for p in self.info.implementation_log):
                text = line.strip()[:300]
                if text not in out:
                    out.append(text)
                if len(out) >= limit:
                    break
        return out

    def is_ready_line(self, line: str) -> bool:
        return bool(self.info.ready_log and re.search(self.info.ready_log, line))

    def effective(
        self, lines: list[str], requested: dict[str, FlagValue], spec: HelpSpec | None
    ) -> EffectiveConfig:
        values: dict[str, Any] = {}
        evidence: dict[str, str] = {}
        source: list[str] = []
        aliases = self.info.config_aliases
        for line in lines:
            parsed = _config_line(line)
            if parsed:
                source.append(line.rstrip())
                for k, v in parsed.items():
                    k = aliases.get(k, k)
                    values[k] = v
                    evidence[k] = line.rstrip()[:300]
                for dest, path in self.info.config_paths.items():
                    found, v = _at_path(parsed, path)
                    if found:
                        values[dest] = v
                        evidence[dest] = f"{path}={v!r} in " + line.rstrip()[:260]
                continue
            for rule in self.info.overrides:
                m = re.search(rule.pattern, line)
                if m:
                    val = rule.effective if rule.effective is not None else m.groupdict().get("value")
                    if val is not None:
                        values[rule.dest] = val
                        evidence[rule.dest] = line.rstrip()
        overrides = find_overrides(requested, values, spec, evidence)
        return EffectiveConfig(values=values, source_lines=source, overrides=overrides)


def _config_line(line: str) -> dict[str, Any] | None:
    """The configuration a line prints (SGLang's server_args, vLLM's non-default args or engine
    config), or None."""
    for parser in (parse_server_args, parse_non_default_args, parse_engine_config):
        parsed = parser(line)
        if parsed:
            return parsed
    return None


def _at_path(config: dict[str, Any], path: str) -> tuple[bool, Any]:
    """(True, value) at a dotted path of nested dicts; (False, None) where the path is absent."""
    node: Any = config
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    return True, node


def get_engine(name: str, python: str | None = None, gpus: str | None = None) -> Engine:
    engine_info(name)  # validates the name
    return Engine(name, python or sys.executable, gpus)


def later_phase(current: str, new: str | None) -> str:
    """Phases only move forward."""
    if new and phase_index(new) > phase_index(current):
        return new
    return current
