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
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from bringup.candidate import Candidate, FlagValue
from bringup.effective import (
    EffectiveConfig,
    find_overrides,
    parse_engine_config,
    parse_non_default_args,
    parse_server_args,
)
from bringup.helptext import HelpSpec, parse_help
from bringup.knowledge_files import DATA, KnowledgeFileError, load_yaml, phase_index


class PhaseMarker(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pattern: str
    phase: str


class OverrideRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pattern: str
    dest: str
    effective: str | None = None  # fixed value; else the pattern's (?P<value>...) group
    source: str = ""


class EngineInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    module: str
    distributions: list[str]
    model_flag: str
    help_args: list[str] = Field(default_factory=lambda: ["--help"])
    ready_paths: list[str] = Field(default_factory=lambda: ["/health"])
    ready_log: str | None = None
    phases: list[PhaseMarker] = Field(default_factory=list)
    overrides: list[OverrideRule] = Field(default_factory=list)
    config_aliases: dict[str, str] = Field(default_factory=dict)
    teardown_log: str | None = None


@lru_cache(maxsize=1)
def _all_info() -> dict[str, EngineInfo]:
    raw = load_yaml(DATA / "engines.yaml")
    return {name: EngineInfo.model_validate(v) for name, v in raw.items()}


def engine_info(name: str) -> EngineInfo:
    info = _all_info()
    if name not in info:
        raise KnowledgeFileError(f"unknown engine {name!r}; known: {', '.join(info)}")
    return info[name]


def help_cache_dir() -> Path:
    base = os.environ.get("BRINGUP_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "bringup")
    return Path(base) / "help"


@dataclass
class Engine:
    """A real engine installed in a Python environment (``python`` runs it)."""

    name: str
    python: str = field(default_factory=lambda: sys.executable)

    @property
    def info(self) -> EngineInfo:
        return engine_info(self.name)

    @property
    def log_dialect(self) -> str:
        """Whose log format and signatures apply (a scenario speaks its engine's dialect)."""
        return self.name

    # -- launching -------------------------------------------------------------------------
    def launch_argv(self, cand: Candidate, host: str, port: int) -> list[str]:
        return [self.python, "-m", self.info.module, self.info.model_flag, cand.model,
                "--host", host, "--port", str(port), *cand.argv_flags()]

    def command_prefix(self, cand: Candidate) -> list[str]:
        """The start of a copy-pasteable command (report only)."""
        return ["python", "-m", self.info.module, self.info.model_flag, cand.model]

    def launch_env(self, cand: Candidate) -> dict[str, str]:
        env = dict(os.environ)
        env.update(cand.env_dict)
        env.setdefault("PYTHONUNBUFFERED", "1")  # log lines must stream, not sit in a buffer
        return env

    # -- version and help ------------------------------------------------------------------
    def version(self) -> str | None:
        code = (
            "import importlib.metadata as m\n"
            f"for d in {self.info.distributions!r}:\n"
            "    try:\n        print(m.version(d)); break\n"
            "    except m.PackageNotFoundError: pass\n"
        )
        try:
            out = subprocess.run([self.python, "-c", code], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        v = out.stdout.strip().splitlines()
        return v[0] if v else None

    def help_text(self, version: str | None = None) -> str | None:
        """The engine's --help, captured once per version and cached."""
        version = version or self.version()
        if version is None:
            return None
        cache = help_cache_dir() / f"{self.name}-{version}.txt"
        if cache.exists():
            return cache.read_text()
        env = dict(os.environ)
        env["COLUMNS"] = "80"  # argparse wraps help to the terminal width; keep captures comparable
        try:
            out = subprocess.run([self.python, "-m", self.info.module, *self.info.help_args], capture_output=True,
                                 text=True, timeout=180, env=env)
        except (OSError, subprocess.TimeoutExpired):
            return None
        text = out.stdout
        if out.returncode != 0 or "usage:" not in text:
            return None
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(text)
        return text

    def help_spec(self, version: str | None = None) -> HelpSpec | None:
        text = self.help_text(version)
        return parse_help(text) if text else None

    # -- what the engine knows about its own machine and clock ---------------------------
    # A real engine knows nothing beyond its version and --help: the machine is read by doctor,
    # the model from its folder, and a launch costs the seconds it took. A test double that
    # replays another machine overrides these (bringup/engines/scenario.py), so that no core
    # module needs to know whether it drives a real engine or a double.
    simulated: ClassVar[bool] = False  # launch costs are a double's simulated seconds, not wall time
    tokenizer_kind: ClassVar[str] = "auto"  # the load generator's token counting for its answers

    def machine_facts(self) -> dict[str, Any] | None:
        """Facts about the machine and model that replace doctor's, or None: read the real ones."""
        return None

    def identity_scope(self) -> str | None:
        """A name that keeps journal priors of a replayed machine apart from real ones."""
        return None

    def model_identity(self, model: str) -> str | None:
        """The model's identity for the journal, where the engine knows better than its folder."""
        return None

    def default_model(self) -> str | None:
        """The model a double replays when none is named (a real engine has none)."""
        return None

    def known_answers(self) -> list[tuple[str, str]]:
        """(prompt, expected) pairs the engine's model is known to answer."""
        return []

    def default_baseline(self) -> str:
        """The flags a user of this engine starts from when none are given."""
        return ""

    def clock_scale(self) -> float:
        """Real seconds per engine second: the trial's deadlines (launch timeout, hang timeout) are
        in engine seconds and run this much faster or slower in real time. 1.0 for a real engine."""
        return 1.0

    def launch_seconds(self, lines: list[str]) -> float | None:
        """Seconds a launch stands for, when the engine's own clock says (None: wall time)."""
        return None

    # -- reading the log -------------------------------------------------------------------
    def phase_of(self, line: str) -> str | None:
        for m in self.info.phases:
            if re.search(m.pattern, line):
                return m.phase
        return None

    def before_teardown(self, lines: list[str]) -> list[str]:
        """The log up to the engine's first shutdown line (what follows is teardown noise)."""
        if not self.info.teardown_log:
            return lines
        rx = re.compile(self.info.teardown_log)
        for i, ln in enumerate(lines):
            if rx.search(ln):
                return lines[:i]
        return lines

    def is_ready_line(self, line: str) -> bool:
        return bool(self.info.ready_log and re.search(self.info.ready_log, line))

    def effective(self, lines: list[str], requested: dict[str, FlagValue],
                  spec: HelpSpec | None) -> EffectiveConfig:
        values: dict[str, Any] = {}
        evidence: dict[str, str] = {}
        source: list[str] = []
        aliases = self.info.config_aliases
        for line in lines:
            parsed = None
            for parser in (parse_server_args, parse_non_default_args, parse_engine_config):
                parsed = parser(line)
                if parsed:
                    break
            if parsed:
                source.append(line.rstrip())
                for k, v in parsed.items():
                    k = aliases.get(k, k)
                    values[k] = v
                    evidence[k] = line.rstrip()[:300]
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


def get_engine(name: str, python: str | None = None) -> Engine:
    engine_info(name)  # validates the name
    return Engine(name, python or sys.executable)


def later_phase(current: str, new: str | None) -> str:
    """Phases only move forward."""
    if new and phase_index(new) > phase_index(current):
        return new
    return current
