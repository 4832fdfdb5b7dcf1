"""Environment variables as data: which variables an engine version reads, their types, defaults,
choices and meaning; which ones a log line names; which ones a failure implicates.

A candidate's environment (``Candidate.env``) and ``env:NAME`` factors were opaque strings until
now. This module gives them meaning, from data rather than code:

- **Registries.** :func:`load_registry` reads the engine's own registry from its installed source
  (``vllm/envs.py``, ``sglang/srt/environ.py``) with the AST, never importing the engine
  (:mod:`bringup.env.extract`); failing that, a bundled snapshot for that version
  (``bringup/data/env/<engine>-<version>.yaml``); failing that, an empty registry whose every
  answer is "unknown". Where each engine keeps its registry is data
  (``bringup/data/env/registries.yaml``).
- **Status.** :meth:`Registry.status` says what the engine does with a name: ``known``,
  ``deprecated`` (forwarded to a new name), ``ignored`` (of the engine's prefix but not read by
  this version: setting it is an override, requested is not effective; vLLM only logs
  "Unknown vLLM environment variable detected"), ``common`` (NCCL, CUDA, PyTorch...: read by a
  library, ``bringup/data/env/common.yaml``), ``foreign`` or ``unknown`` (no registry).
  :func:`env_overrides` turns a candidate's ignored variables into ``OverrideRecord`` entries.
- **Mentions.** :func:`mentions` finds variable names in log lines and error messages, with the
  value the line gives and whether it advises setting (``Set VLLM_USE_FLASHINFER_SAMPLER=0``) or
  unsetting it. :func:`names_in_knowledge` lists the ``env:NAME`` spellings of the knowledge files.
- **Levels and relevance.** :func:`levels` gives the levels worth trying for a variable;
  :func:`rank` orders variables by what a failure implicates (``bringup/data/env/relevance.yaml``).
- **The user's environment.** :func:`user_env` keeps the engine-relevant variables of an
  environment, secrets redacted.

Schemas of the data files: docs/knowledge.md ("Environment variables").
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from bringup.core.datafiles import DATA, KnowledgeFileError, load_yaml
from bringup.env.extract import ENV_DATA, registries, registry_spec, snapshot_path
from bringup.guard.secrets import is_secret_name, redact_env
from bringup.observe.outcome import OverrideRecord

# What Registry.status answers.
KNOWN, DEPRECATED, IGNORED, COMMON, FOREIGN, UNKNOWN = (
    "known",
    "deprecated",
    "ignored",
    "common",
    "foreign",
    "unknown",
)


# -- the model ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvVar:
    """One environment variable as its owner declares it.

    ``default`` is the value the owner uses when the variable is unset, as the owner's code
    computes it (``True``, ``0``, ``"auto"``, ``None``), and ``default_known`` says whether it
    could be worked out statically; ``default_text`` is the expression as written.
    """

    name: str
    type: str = "unknown"  # bool | int | float | str | choice | list | json | unknown
    default: Any = None
    default_known: bool = False
    default_text: str = ""
    choices: tuple[str, ...] = ()
    description: str = ""
    section: str = ""
    owner: str = ""  # the engine whose registry declares it, "common", or "log" (only named by a log line)
    source: str = ""
    secret: bool = False
    engine_sets: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def factor(self) -> str:
        """The name of this variable as a factor of the search space (``env:NAME``)."""
        return "env:" + self.name

    def default_level(self) -> str | None:
        """The default as the string one would put in the environment (None: unset or unknown)."""
        if not self.default_known or self.default is None:
            return None
        return _as_env_value(self.default)


@dataclass(frozen=True)
class Deprecation:
    """A deprecated name: the engine forwards it to ``replacement``, or (None) it has no effect."""

    name: str
    replacement: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Mention:
    """A variable named by a log line or an error message.

    ``value`` is the value the line gives (``NAME=VALUE``, ``NAME to 'VALUE'``); ``action`` is
    ``set`` when the line advises setting it (``Set X=0 to silence``, ``try setting X to Y``),
    ``unset`` when it advises removing it, and ``""`` when it only names it or reports what the
    engine did (``Overriding X to 'spawn'``).
    """

    name: str
    value: str | None = None
    action: str = ""
    text: str = ""


@dataclass(frozen=True)
class Ranked:
    """A variable with its relevance to a failure and the reasons, strongest first."""

    var: EnvVar
    score: float
    reasons: tuple[str, ...] = ()


@dataclass
class Registry:
    """The variables one engine version reads, and what it does with the others.

    ``origin`` is ``installed`` (read from the engine's source file at ``location``),
    ``snapshot`` (a bundled data file) or ``none`` (nothing known: every status is ``unknown``).
    """

    engine: str
    version: str | None
    variables: dict[str, EnvVar]
    deprecated: dict[str, Deprecation] = field(default_factory=dict)
    origin: str = "none"
    location: str = ""
    prefixes: tuple[str, ...] = ()
    renamed_prefixes: Mapping[str, str] = field(default_factory=dict)
    unknown_warning: str | None = None
    direct_reads: frozenset[str] = frozenset()
    problem: str = ""  # why the installed registry could not be read (then a snapshot or none)

    def __contains__(self, name: object) -> bool:
        return name in self.variables or name in self.direct_reads

    def __len__(self) -> int:
        return len(self.variables)

    def get(self, name: str) -> EnvVar | None:
        """The variable as this engine declares it, else as the common list does, else None."""
        if name in self.variables:
            return self.variables[name]
        if name in self.direct_reads:
            return EnvVar(
                name, owner=self.engine, source=f"read with os.getenv in {self.engine} {self.version}"
            )
        return common_vars().get(name)

    def replacement(self, name: str) -> str | None:
        """The name the engine reads instead of a deprecated one (None if none)."""
        dep = self.deprecated.get(name)
        if dep is not None:
            return dep.replacement
        for old, new in self.renamed_prefixes.items():
            if name.startswith(old):
                return new + name[len(old) :]
        return None

    def status(self, name: str) -> str:
        """known | deprecated | ignored | common | foreign | unknown (see the module docstring)."""
        if name in self:
            return KNOWN
        if name in self.deprecated:
            return DEPRECATED if self.deprecated[name].replacement else IGNORED
        if self.replacement(name):
            return DEPRECATED
        if self.origin == "none":
            return UNKNOWN
        if any(name.startswith(p) for p in self.prefixes):
            return IGNORED
        if name in common_vars():
            return COMMON
        return FOREIGN

    def is_ignored(self, name: str) -> bool:
        """True when this version does not read ``name``: setting it changes nothing."""
        return self.status(name) == IGNORED

    def explain(self, name: str) -> str:
        """One sentence on what this engine version does with ``name``, for reports and overrides."""
        st = self.status(name)
        who = f"{self.engine} {self.version or '(version unknown)'}"
        if st == KNOWN:
            return f"{name} is read by {who}."
        if st == DEPRECATED:
            note = self.deprecated[name].note if name in self.deprecated else ""
            return f"{name} is deprecated in {who}, which reads {self.replacement(name)} instead." + (
                f" {note}" if note else ""
            )
        if st == IGNORED:
            dep = self.deprecated.get(name)
            if dep is not None:
                return f"{name} is deprecated and has no effect in {who}." + (
                    f" {dep.note}" if dep.note else ""
                )
            line = self.unknown_warning.format(name=name) if self.unknown_warning else "nothing is logged"
            return f"{name} is not read by {who} ({self.origin} registry of {len(self)} variables); it logs: {line}."
        if st == COMMON:
            return f"{name} is read by a library the engine uses, not by {self.engine} itself."
        if st == UNKNOWN:
            return f"No registry of {self.engine} variables is known for this version."
        return f"{name} is not one of {who}'s variables."


# -- data files ----------------------------------------------------------------------------------------------


def _as_env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def bundled_versions(engine: str) -> list[str]:
    """Versions of ``engine`` whose registry is bundled as a snapshot."""
    return sorted(p.stem[len(engine) + 1 :] for p in ENV_DATA.glob(f"{engine}-*.yaml"))


def _var_from_entry(entry: Mapping[str, Any], owner: str, source: str = "") -> EnvVar:
    return EnvVar(
        name=entry["name"],
        type=entry.get("type", "unknown"),
        default=entry.get("default"),
        default_known="default" in entry,
        default_text=entry.get("default_text", ""),
        choices=tuple(str(c) for c in entry.get("choices") or ()),
        description=entry.get("description", "") or "",
        section=entry.get("section", "") or "",
        owner=owner,
        source=entry.get("source", source),
        secret=bool(entry.get("secret", False)) or is_secret_name(entry["name"]),
        engine_sets=dict(entry.get("engine_sets") or {}),
    )


@lru_cache(maxsize=1)
def _common_doc() -> dict[str, Any]:
    doc = load_yaml(ENV_DATA / "common.yaml") or {}
    for i, e in enumerate(doc.get("variables") or []):
        if not e.get("name") or not e.get("source"):
            raise KnowledgeFileError(f"{ENV_DATA / 'common.yaml'}: variables[{i}]: needs `name` and `source`")
    return doc


def common_vars() -> dict[str, EnvVar]:
    """Non-engine variables that matter in bring-up (NCCL, CUDA, PyTorch, Triton), by name."""
    return {e["name"]: _var_from_entry(e, "common") for e in _common_doc().get("variables") or []}


def _registry_from_doc(
    engine: str,
    version: str | None,
    doc: Mapping[str, Any],
    origin: str,
    location: str,
    spec: Mapping[str, Any],
) -> Registry:
    src = f"{engine} {version or ''} {spec.get('file', '')}".strip()
    variables = {e["name"]: _var_from_entry(e, engine, src) for e in doc.get("variables") or []}
    deprecated = {
        d["name"]: Deprecation(d["name"], d.get("replacement"), d.get("note", "") or "")
        for d in doc.get("deprecated") or []
    }
    unknown = spec.get("unknown") or {}
    return Registry(
        engine,
        version,
        variables,
        deprecated,
        origin,
        location,
        tuple(spec.get("prefixes") or ()),
        dict(spec.get("renamed_prefixes") or {}),
        unknown.get("warning"),
        frozenset(doc.get("direct_reads") or ()),
    )


# -- finding the installed engine ------------------------------------------------------------------------------

_FIND_SPEC = (
    "import importlib.util, sys\n"
    "s = importlib.util.find_spec(sys.argv[1])\n"
    "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')\n"
)


@lru_cache(maxsize=32)
def locate_package(package: str, python: str | None = None) -> Path | None:
    """The directory of ``package`` as ``python`` would import it, without importing it.

    ``importlib.util.find_spec`` of a top-level package only searches ``sys.path``; nothing of the
    package runs. With another interpreter (the engine's own venv) it runs in a subprocess.
    Cached per (package, interpreter). Paths are compared unresolved: two venvs' ``python`` links
    resolve to the same base interpreter but see different packages.
    """
    if python is None or os.path.abspath(python) == os.path.abspath(sys.executable):
        import importlib.util

        try:
            found = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            return None
        locs = list(found.submodule_search_locations or []) if found else []
        return Path(locs[0]) if locs else None
    try:
        out = subprocess.run([python, "-c", _FIND_SPEC, package], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = out.stdout.strip()
    return Path(text) if out.returncode == 0 and text else None


@lru_cache(maxsize=32)
def installed_version(engine: str, python: str | None = None) -> str | None:
    """The installed version of ``engine`` (its distributions in ``engines.yaml``), or None."""
    from bringup.facts.installed import distribution_version

    info = (load_yaml(DATA / "engines.yaml") or {}).get(engine) or {}
    return distribution_version(python or sys.executable, list(info.get("distributions") or [engine]))


@lru_cache(maxsize=16)
def _parse_installed(engine: str, path: str, mtime: float, scan: bool) -> dict[str, Any]:
    from bringup.env.extract import direct_reads, extract

    spec = registry_spec(engine)
    doc = extract(Path(path).read_text(), spec)
    if scan:
        known = {v["name"] for v in doc["variables"]}
        package_dir = Path(path).parents[len(Path(spec["file"]).parts) - 1]
        doc["direct_reads"] = direct_reads(package_dir, list(spec.get("prefixes") or []), known)
    return doc


def _snapshot_for(engine: str, version: str) -> Path | None:
    """The bundled snapshot for ``version``: exact, else its public part (``0.32.0+cpu`` ->
    ``0.32.0``), else its release (``0.5.23.post1`` -> ``0.5.23``)."""
    from packaging.version import InvalidVersion, Version

    names = [version]
    try:
        v = Version(version)
        names += [v.public, v.base_version]
    except InvalidVersion:
        pass
    for name in names:
        if snapshot_path(engine, name).is_file():
            return snapshot_path(engine, name)
    return None


def load_registry(
    engine: str,
    python: str | None = None,
    version: str | None = None,
    package_dir: Path | None = None,
    installed: bool = True,
) -> Registry:
    """The registry of ``engine``: installed source first, then the bundled snapshot, then none.

    ``python`` is the engine's interpreter (default: this one); ``version`` asks for a given
    version (when the installed one differs, the snapshot of ``version`` is used);
    ``package_dir`` names the package directory directly (tests, an unpacked wheel). A registry
    file this Python cannot parse falls back to the snapshot, and ``Registry.problem`` says why.
    ``installed=False`` reads the snapshot only (an engine double imitating a version).
    """
    if engine not in registries():  # an engine with no central registry (transformers serve)
        return Registry(engine, version, {}, {}, "none", "", (), {}, None)
    spec = registry_spec(engine)
    pkg = package_dir or (locate_package(spec["package"], python) if installed else None)
    have = None
    problem = ""
    if pkg is not None and (Path(pkg) / spec["file"]).is_file():
        have = installed_version(engine, python) if package_dir is None else version
        if version is None or have is None or have == version:
            path = Path(pkg) / spec["file"]
            try:
                doc = _parse_installed(
                    engine, str(path), path.stat().st_mtime, bool(spec.get("scan_direct_reads"))
                )
                return _registry_from_doc(engine, have or version, doc, "installed", str(path), spec)
            except (SyntaxError, ValueError, UnicodeDecodeError) as e:
                problem = f"{path}: cannot read the registry ({type(e).__name__}: {e})"
    if version is None and have is None and pkg is not None and package_dir is None:
        have = installed_version(engine, python)  # installed, but its registry file is elsewhere
    version = version or have
    snap = _snapshot_for(engine, version) if version is not None else None
    if snap is not None:
        reg = _registry_from_doc(engine, version, load_yaml(snap) or {}, "snapshot", str(snap), spec)
    else:
        unknown = spec.get("unknown") or {}
        reg = Registry(
            engine,
            version,
            {},
            {},
            "none",
            "",
            tuple(spec.get("prefixes") or ()),
            dict(spec.get("renamed_prefixes") or {}),
            unknown.get("warning"),
        )
    reg.problem = problem
    return reg


def env_overrides(registry: Registry, env: Mapping[str, str]) -> list[OverrideRecord]:
    """One override per variable of ``env`` that this engine version ignores.

    Requested is the value set; effective is None (the variable has no effect); the evidence is
    the engine's own warning where it logs one (vLLM: "Unknown vLLM environment variable
    detected: NAME"), else bringup's explanation.
    """
    out = []
    for name in sorted(env):
        if registry.is_ignored(name):
            evidence = (
                registry.unknown_warning.format(name=name)
                if registry.unknown_warning and name not in registry.deprecated
                else registry.explain(name)
            )
            out.append(
                OverrideRecord(flag="env:" + name, requested=env[name], effective=None, evidence=evidence)
            )
    return out


# -- names in log lines --------------------------------------------------------------------------------------

_NAME = r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+"
_Q = r"[`'\"]?"
_ASSIGN = re.compile(rf"(?<![\w.])(?P<name>{_NAME}){_Q}\s*=\s*(?P<q>[`'\"]?)(?P<value>[^\s`'\",;)\]]+)")
_TO = re.compile(
    rf"(?<![\w.]){_Q}(?P<name>{_NAME}){_Q}(?:\s+(?:environment\s+)?variable)?\s+to\s+"
    rf"(?P<q>[`'\"]?)(?P<value>[\w.:+\-/]+)(?P=q)"
)
_BARE = re.compile(rf"(?<![\w./-])(?P<name>{_NAME})(?![\w(])")
# "try" too: "try NCCL_P2P_DISABLE=1 on PCIe machines" (a signature's hint, NCCL's own advice) tells
# the value to set as plainly as "set" does
_ADVICE = re.compile(
    r"\b(?P<verb>unset|set|export|setting|passing|pass|launch(?:ing)? with|add|use|try)\b", re.I
)
_ADVICE_SETTING = re.compile(
    r"\b(?:try|consider|by|please|recommend(?:ed)?|you can|you may|could)\s+(?:\w+\s+){0,2}setting\b", re.I
)
_VALUEISH = re.compile(r"^(?:-?\d+(?:\.\d+)?|true|false|on|off|yes|no|none)$", re.I)
_ENV_PREFIX_WORDS = re.compile(r"environment\s+variables?\s*[`'\"]?$", re.I)
_METAVAR = re.compile(r"--[\w-]+[ =]\[?$")  # argparse usage: "[--hf-token [HF_TOKEN]]" is no variable


@lru_cache(maxsize=1)
def _known_prefixes() -> tuple[str, ...]:
    prefixes = set(_common_doc().get("user_prefixes") or [])
    for spec in registries().values():
        prefixes.update(spec.get("prefixes") or [])
    return tuple(sorted(prefixes))


def _advice(before: str) -> str:
    """set / unset / "" from the words before a name in the same clause."""
    clause = re.split(r"[.;!?]\s|\n", before)[-1][-80:]
    if _ADVICE_SETTING.search(clause):
        return "set"
    verbs = list(_ADVICE.finditer(clause))
    if not verbs:
        return ""
    verb = verbs[-1].group("verb").lower()
    if verb == "setting":  # "Setting X=1 for ..." reports what the engine does
        return ""
    return "unset" if verb == "unset" else "set"


def mentions(line: str, known: Iterable[str] | None = None) -> list[Mention]:
    """Variables named by one line, with the value it gives and whether it advises setting them.

    A bare upper-case name counts when it has a prefix of a known owner (``VLLM_``, ``NCCL_``,
    ``TORCH_``... from the data files), is in ``known``, or follows "environment variable"; a
    ``NAME=VALUE`` counts when it also is advised (``set``, ``export``, ``try setting``).
    """
    known_set = set(known or ())
    prefixes = _known_prefixes()
    out: list[Mention] = []
    seen: set[str] = set()

    def recognised(name: str, start: int, advised: bool) -> bool:
        return (
            name in known_set
            or name.startswith(prefixes)
            or advised
            or bool(_ENV_PREFIX_WORDS.search(line[:start]))
        )

    for rx in (_ASSIGN, _TO):
        for m in rx.finditer(line):
            name, value = m.group("name"), m.group("value")
            if rx is _TO and not (
                m.group("q") or _VALUEISH.match(value) or re.search(r"[\d:_.]|^[A-Z]+$", value)
            ):
                continue  # "Set X to increase this limit": not a value
            value = value.rstrip(".") or value
            action = _advice(line[: m.start()])
            if name in seen or not recognised(name, m.start(), bool(action)):
                continue
            seen.add(name)
            out.append(Mention(name, value, action, m.group(0)))
    for m in _BARE.finditer(line):
        name = m.group("name")
        if name in seen or not recognised(name, m.start(), False) or _METAVAR.search(line[: m.start()]):
            continue
        seen.add(name)
        out.append(Mention(name, None, _advice(line[: m.start()]), m.group(0)))
    out = [m for m in out if advice_holds(m.name, line)]
    order = {m.name: line.find(m.name) for m in out}
    return sorted(out, key=lambda m: order[m.name])


_SIZE = re.compile(r"^(?P<n>[\d.]+) ?(?P<unit>[KMGT]?)i?B$")


def _gib(text: str) -> str:
    """A size as PyTorch prints it ("406.50 MiB", "1.12 GiB", "512 B") in GiB; other text as is."""
    m = _SIZE.match(text.strip())
    if m is None:
        return text
    scale = {"": 1 / 2**30, "K": 1 / 2**20, "M": 1 / 2**10, "G": 1.0, "T": 2**10}[m["unit"]]
    return str(float(m["n"]) * scale)


@lru_cache(maxsize=1)
def _conditional_advice() -> tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...]:
    return tuple(
        (e["variable"], re.compile(e["pattern"]), tuple(e.get("requires") or ()))
        for e in _common_doc().get("conditional_advice") or []
    )


def advice_holds(name: str, line: str) -> bool:
    """False when ``line`` names ``name`` in advice that the library prints with every error of a
    kind under a condition the line itself shows unmet (PyTorch's "If reserved but unallocated
    memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" after an OOM whose
    reserved but unallocated memory is 1.12 of 94.97 GiB): that line is no evidence for it."""
    from bringup.observe.signatures import eval_limit

    for var, rx, requires in _conditional_advice():
        m = rx.search(line) if var == name else None
        if m is None:
            continue
        groups = {k: _gib(v) for k, v in m.groupdict().items() if v is not None}
        for expr in requires:
            value = eval_limit(expr, groups)
            if value is not None and value < 0:
                return False
    return True


def mentions_in_lines(lines: Iterable[str], known: Iterable[str] | None = None) -> list[Mention]:
    """:func:`mentions` over many lines, one per name in order of first mention; a name keeps
    its first advised value, else its first value, else its first mention."""
    best: dict[str, Mention] = {}
    order: list[str] = []
    known = list(known or ())

    def strength(m: Mention) -> tuple[bool, bool]:
        return (m.action == "set" and m.value is not None, m.value is not None)

    for line in lines:
        for m in mentions(line, known):
            if m.name not in best:
                best[m.name] = m
                order.append(m.name)
            elif strength(m) > strength(best[m.name]):
                best[m.name] = m
    return [best[n] for n in order]


def suggested_values(found: Iterable[Mention], name: str) -> list[str]:
    """The values the lines advise for ``name``, in order, without repeats."""
    out: list[str] = []
    for m in found:
        if m.name == name and m.value is not None and m.action == "set" and m.value not in out:
            out.append(m.value)
    return out


def _env_strings(node: Any) -> Iterable[str]:
    if isinstance(node, str):
        yield from re.findall(r"\benv:([A-Za-z_][A-Za-z0-9_]*)", node)
    elif isinstance(node, Mapping):
        if isinstance(node.get("env"), str):
            yield node["env"]
        for v in node.values():
            yield from _env_strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _env_strings(v)


@lru_cache(maxsize=1)
def _knowledge_names() -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    files = sorted((DATA / "signatures").glob("*.yaml")) + [DATA / "rules.yaml", DATA / "factors.yaml"]
    for path in files:
        doc = load_yaml(path) or {}
        for key in ("signatures", "rules", "factors"):
            for i, entry in enumerate(doc.get(key) or [] if isinstance(doc, dict) else []):
                where = f"{path.relative_to(DATA)}:{entry.get('id') or f'{key}[{i}]'}"
                for name in _env_strings(entry):
                    if where not in out.setdefault(name, []):
                        out[name].append(where)
    return {k: tuple(v) for k, v in out.items()}


def names_in_knowledge() -> dict[str, tuple[str, ...]]:
    """Variables named by the knowledge files (``env:NAME`` in signatures, rules, factors), with
    where: ``{"SGLANG_ENABLE_JIT_DEEPGEMM": ("signatures/sglang.yaml:<id>", ...)}``."""
    return dict(_knowledge_names())


# -- levels ----------------------------------------------------------------------------------------------


def levels(var: EnvVar, suggested: Iterable[str] = ()) -> list[str]:
    """The levels worth trying for a variable, as environment strings ("unset" is not included).

    A bool: the opposite of its default, then its default (``"1"``/``"0"``). A variable with
    choices: its choices. A number or a free string: only values a log line suggested, then the
    default; none when nothing was suggested (guessing numbers wastes launches).
    """
    suggested = [str(s) for s in suggested]
    default = var.default_level()
    out: list[str] = []
    if var.type == "bool":
        cur = default if default in ("0", "1") else None
        out = ["0", "1"] if cur == "1" else ["1", "0"]
        out = [*[s for s in suggested if s not in out], *out]
    elif var.choices:
        out = [*[s for s in suggested if s in var.choices], *var.choices]
    elif suggested:
        out = [*suggested, *([default] if default not in (None, "") else [])]
    seen: list[str] = []
    for lv in out:
        if lv not in seen:
            seen.append(lv)
    return seen


_TRUE, _FALSE = ("1", "true", "yes", "y", "on"), ("0", "false", "no", "n", "off")


def check_value(var: EnvVar, value: str) -> str | None:
    """Why ``value`` would be rejected or misread for ``var`` (None: it looks fine).

    vLLM raises on a value outside ``env_with_choices`` ("Invalid value 'x' for NAME. Valid
    options: [...]") and parses most bools with ``bool(int(...))``, so ``true`` crashes where
    ``1`` works; SGLang warns and falls back to the default on an unparsable value. A level a
    search proposes should pass this check.
    """
    v = value.strip()
    if var.choices:
        if var.type == "list":
            bad = [x for x in (p.strip() for p in v.split(",")) if x and x not in var.choices]
        else:
            bad = [v] if v not in var.choices else []
        if bad:
            return f"{var.name}: {', '.join(repr(b) for b in bad)} is not one of {', '.join(var.choices)}"
        return None
    if var.type == "bool":
        if "int(" in var.default_text and not re.fullmatch(r"-?\d+", v):
            return f"{var.name}: parsed as an integer ({var.default_text}); use 1 or 0"
        if v.lower() not in _TRUE + _FALSE and not re.fullmatch(r"-?\d+", v):
            return f"{var.name}: {value!r} is not a boolean; use 1 or 0"
    elif var.type == "int" and not re.fullmatch(r"[-+]?\d+", v):
        return f"{var.name}: {value!r} is not an integer"
    elif var.type == "float":
        try:
            float(v)
        except ValueError:
            return f"{var.name}: {value!r} is not a number"
    return None


# -- relevance ------------------------------------------------------------------------------------------------

# Weights of rank(): a component named by the evidence outweighs any number of components
# implied by the class alone; a name match outweighs a description match.
W_NAMED_BY_LOG, W_ADVISED, W_IMPLICATED_ENV, W_NAMED_IN_LOG = 1000, 100, 500, 200
W_CLASS_VARIABLE, W_EVIDENCE, W_IMPLICATED_FLAG, W_CLASS = 40, 10, 3, 1
W_IN_NAME, W_IN_TEXT = 3, 1
# A variable read by the function the failure was raised in (bringup/env/readers.py): as strong as a
# line of the log naming it, short of the failure's own lines naming it.
W_READ_IN_FRAME = W_NAMED_IN_LOG


@lru_cache(maxsize=1)
def _relevance() -> tuple[
    dict[str, tuple[str, ...]],
    dict[str, dict[str, tuple[str, ...]]],
    dict[str, tuple[str, ...]],
    dict[str, frozenset[str]],
]:
    """(components and their spellings, classes, other platforms' words, phases' components)."""
    path = ENV_DATA / "relevance.yaml"
    doc = load_yaml(path) or {}
    comps = {
        c: tuple(_norm(s).strip() for s in spellings)
        for c, spellings in (doc.get("components") or {}).items()
    }
    classes: dict[str, dict[str, tuple[str, ...]]] = {}
    for k, v in (doc.get("classes") or {}).items():
        v = v or {}
        extra = set(v) - {"components", "variables", "shared"}
        unknown = [c for c in v.get("components") or () if c not in comps]
        if extra or unknown:
            raise KnowledgeFileError(
                f"{path}: classes.{k}: unknown keys {sorted(extra)} or components {unknown}"
            )
        if v.get("variables") and k not in (doc.get("sources") or {}):
            raise KnowledgeFileError(f"{path}: classes.{k}: variables need a `sources.{k}` entry")
        classes[k] = {
            "components": tuple(v.get("components") or ()),
            "variables": tuple(v.get("variables") or ()),
            "shared": ("shared",) if v.get("shared") else (),
        }
    platforms = {k: tuple(v or ()) for k, v in (doc.get("other_platforms") or {}).items()}
    phases = {k: frozenset(v or ()) for k, v in (doc.get("phases") or {}).items()}
    unknown = sorted({c for v in phases.values() for c in v if c not in comps})
    if unknown:
        raise KnowledgeFileError(f"{path}: phases: unknown components {unknown}")
    return comps, classes, platforms, phases


def _norm(text: str) -> str:
    """Lower case, punctuation and _ - / as spaces, padded: whole-word phrase search by ``in``."""
    return " " + re.sub(r"\s+", " ", re.sub(r"[_\-/`'\".,:;()\[\]{}=<>|]", " ", text.lower())).strip() + " "


def _components_in(text: str) -> set[str]:
    """Components whose spellings occur in ``text``, also with CamelCase split (``WorkNCCL``)."""
    comps = _relevance()[0]
    split = re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", text)
    texts = (_norm(text), _norm(split))
    return {c for c, spellings in comps.items() if any(f" {s} " in t for s in spellings for t in texts)}


def other_platform(name: str, device: str | None) -> bool:
    """Whether a name (a variable's, a kernel backend's) marks another platform than ``device``
    (relevance.yaml other_platforms: SGLANG_AITER_*, the aiter attention backend on CUDA)."""
    words = _norm(name)
    return device is not None and any(f" {w} " in words for w in _relevance()[2].get(device, ()))


def absent_components(facts: Mapping[str, Any]) -> frozenset[str]:
    """The components this target does not have (relevance.yaml ``needs``: the MoE layers of a
    dense model), read from known facts only: an unknown fact leaves the component in."""
    doc = load_yaml(ENV_DATA / "relevance.yaml") or {}
    out = set()
    facts = dict(facts)
    if facts.get("model.quantization") is None and facts.get("model.architecture"):
        # a model that was read and has no quantization config has unquantized weights: no FP8 or
        # FP4 GEMM runs on it (an unread model, no architecture, stays unknown)
        facts["model.quantization"] = "none"
    for comp, needs in (doc.get("needs") or {}).items():
        for k, v in (needs or {}).items():
            have = facts.get(k)
            if have is not None and _lacks(have, v):
                out.add(comp)
    families = [str(f).lower() for f in (doc.get("model_families") or [])]
    mine = " ".join(str(facts.get(k) or "") for k in ("model.model_type", "model.architecture")).lower()
    if mine.strip():
        # Variables named after another model family than the target's (SGLANG_..._QWEN3_... on a
        # Llama) change nothing for it.
        out |= {"family:" + f for f in families if f not in mine.replace("-", "").replace("_", "")}
    return frozenset(out)


def one_gpu_components() -> frozenset[str]:
    """The components that need two GPUs or more (relevance.yaml ``needs``: NCCL, custom
    all-reduce, symmetric memory...): a launch on one GPU has no peer, so their settings do nothing."""
    return absent_components({"gpu.count": 1})


def _lacks(have: Any, need: Any) -> bool:
    """A known fact contradicts a need: {in: [mla, dsa]} one of these, {min: 2} at least this, else equal."""
    if isinstance(need, Mapping) and "in" in need:
        return _norm(str(have)).strip() not in {_norm(str(x)).strip() for x in need["in"]}
    if isinstance(need, Mapping) and "ne" in need:
        return _norm(str(have)) == _norm(str(need["ne"]))
    if isinstance(need, Mapping) and "min" in need:
        try:
            return float(have) < float(need["min"])
        except (TypeError, ValueError):
            return False
    return _norm(str(have)) != _norm(str(need))


# Variables that only log, debug or name a place: never a fix (a debug variable tried as
# one was a wasted launch: issue 22).
_NOT_A_FIX = re.compile(
    r"(^|_)(LOG|LOGGING|LOGLEVEL|DEBUG|TRACE|TRACING|VERBOSE|VERBOSITY|DUMP|PRINT|"
    r"LAUNCH_BLOCKING|USAGE_STATS|STATS|TELEMETRY|METRICS)(_|$)|(_PATH|_DIR|_FILE|_URL|_URI|_ROOT|_HOME|_PREFIX|_HOST|_PORT|_NAME|_ADDR)$"
)


def names_class_component(name: str, failure_class: str) -> bool:
    """A variable's name names a component the failure class implicates (relevance.yaml
    ``classes``: NCCL_SOCKET_IFNAME names nccl, which a distributed-init failure implicates)."""
    cls = _relevance()[1].get(failure_class, {})
    return bool(_components_in(name) & set(cls.get("components", ())))


def names_phase_component(name: str, phase: str | None) -> bool:
    """A setting's name names a component whose work the phase is (relevance.yaml ``phases``:
    --nnodes and NCCL_P2P_LEVEL name the distributed start-up, --kv-cache-dtype the KV cache's
    allocation): a failure there that names nothing else is likelier theirs."""
    return bool(phase) and bool(_components_in(name) & _relevance()[3].get(phase or "", frozenset()))


def class_draws_on_every_setting(failure_class: str) -> bool:
    """The class's resource is one every setting draws on (relevance.yaml ``shared``: GPU memory),
    so each setting the user chose is a suspect of it though no line names it: an adapter pool, a
    draft model, a graph batch list or a workspace all take from the memory an OOM ran out of."""
    return bool(_relevance()[1].get(failure_class, {}).get("shared"))


def names_absent_component(name: str, absent: Iterable[str]) -> bool:
    """A level or flag whose name names a component the target lacks (TRITON_MLA, --nsa-decode-backend
    on a GQA model): it changes nothing there, or is refused."""
    words = _norm(name.replace("-", " "))
    comps = _relevance()[0]
    for a in absent:
        for s in comps.get(a, ()):
            if f" {s} " in words or (len(s) > 4 and s.replace(" ", "") in words.replace(" ", "")):
                return True
    return False


def not_a_fix(name: str) -> bool:
    """A variable that only logs, debugs or names a path, address or name."""
    return bool(_NOT_A_FIX.search(name.upper()))


# The engine's own test harness: SGLang's SGLANG_TEST_* inject faults (..._CRASH_AFTER_STREAM_OUTPUTS,
# ..._STUCK_SCHEDULER_INIT, ..._RANDOM_FAILURE, ..._MAMBA_LAZY_ALLOC_FAIL) or point at test models;
# vLLM's VLLM_TEST_* force a path for its tests. One that shares a failure's words is no suspect
# (an out-of-memory once proposed SGLANG_TEST_MAMBA_LAZY_ALLOC_FAIL=1, which makes allocation fail);
# one the failure's lines name still joins.
_TEST_HOOK = re.compile(r"(^|_)TESTS?(_|$)")


def is_test_hook(name: str) -> bool:
    """A variable of the engine's own test harness (a TEST word in its name)."""
    return bool(_TEST_HOOK.search(name.upper()))


def of_absent_family(name: str, absent: Iterable[str]) -> bool:
    """A variable named after a model family the target is not (absent_components' family:...)."""
    up = name.upper().replace("-", "_")
    return any(
        a.startswith("family:") and re.search(rf"(^|_){re.escape(a[7:].upper())}\d*[A-Z]?(_|$)", up)
        for a in absent
    )


def _read_where(sites: Iterable[str], frames: list[str], package: str | None) -> str | None:
    from bringup.observe.links import read_here

    return read_here(sites, frames[-6:], package)


def _field(failure: Any, name: str, default: Any) -> Any:
    if isinstance(failure, Mapping):
        return failure.get(name, default)
    return getattr(failure, name, default)


def _component_weights(
    cls: Mapping[str, Any],
    failure_class: str,
    implicates: list[str],
    lines: list[str],
    absent: frozenset[str],
    named: Iterable[str] = (),
    hint: str | None = None,
) -> dict[str, int]:
    """How strongly the failure names each component: its lines most, then the flags it
    implicates, then its class; a component the target lacks (``absent``) not at all.

    The names of variables the engine's lines mention (``named``: "Unknown vLLM environment
    variable detected: VLLM_ATTENTION_BACKEND", "run with NCCL_DEBUG=INFO") are left out of
    ``lines``: the variable itself is named (rank's first reason), but the words of its name are no
    component the failure is about. Read as prose, a distributed-init hang whose log warned of the
    user's stale VLLM_ATTENTION_BACKEND called the attention variables (dev2). A signature's hint
    (``hint``, read whole) is different: a person who wrote "try NCCL_P2P_DISABLE=1 on PCIe
    machines" named the component (p2p) on purpose."""
    weight: dict[str, int] = {}
    for c in cls.get("components", ()):
        weight[c] = max(weight.get(c, 0), W_CLASS)
    for c in _components_in(failure_class):
        weight[c] = max(weight.get(c, 0), W_CLASS)
    for c in _components_in(" ".join(f for f in implicates if not f.startswith("env:"))):
        weight[c] = max(weight.get(c, 0), W_IMPLICATED_FLAG)
    names = sorted(set(named), key=len, reverse=True)
    text = " ".join(lines)
    for n in names:
        text = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", " ", text)
    for c in _components_in(f"{text} {hint or ''}"):
        weight[c] = W_EVIDENCE
    for c in absent:
        weight.pop(c, None)
    return weight


def _component_reasons(
    name: str, var: EnvVar, weight: Mapping[str, int]
) -> tuple[list[tuple[float, str]], list[tuple[float, str]]]:
    """The components the failure names that a variable is about, weighed: those the engine's own
    words for it name (its description, the section its registry files it under), three times as
    much where its name does too; and apart, those its name alone names. A word of the name alone is
    no reason to join (issue 36: "memory" in a failing frame's function, load_model_with_memory_saver,
    called in every ..._MEMORY_... variable of SGLang 0.5.16); among variables with a reason, it
    still tells them apart (of two variables read by the function that raised "The memory capacity
    is unbalanced", the ..._MEMORY_... one)."""
    name_comps = _components_in(name)
    text_comps = _components_in(f"{var.description} {var.section}")
    said_of: list[tuple[float, str]] = []
    named_only: list[tuple[float, str]] = []
    for c in sorted(weight, key=lambda c: (-weight[c], c)):
        if c in text_comps and c in name_comps:
            said_of.append((W_IN_NAME * weight[c], f"{c} (name and description)"))
        elif c in text_comps:
            said_of.append((W_IN_TEXT * weight[c], f"{c} (description)"))
        elif c in name_comps:
            named_only.append((W_IN_NAME * weight[c], f"{c} (name)"))
    return said_of, named_only


def rank(
    variables: Iterable[EnvVar],
    failure: Any,
    known: Iterable[str] | None = None,
    limit: int | None = None,
    device: str | None = None,
    log_lines: Iterable[str] = (),
    absent: Iterable[str] = (),
    read_in: Mapping[str, Iterable[str]] | None = None,
    package: str | None = None,
) -> list[Ranked]:
    """The variables a failure implicates, most implicated first (only those with a reason).

    ``failure`` is an :class:`~bringup.observe.outcome.Outcome` (or anything with ``failure_class``,
    ``implicates``, ``evidence`` and ``hint``, attributes or keys). In order of strength:

    1. a variable named by the failure's own lines (evidence, hint) ranks first, higher still
       when the line advises a value; one the registry lacks is returned as ``owner="log"``;
       then one named elsewhere in ``log_lines`` (the whole log, when the caller has it);
    2. a variable the signature implicates (``env:NAME`` in ``implicates``);
    3. a variable ``relevance.yaml`` lists as changed first for the failure class (only among
       ``variables``: a variable this engine lacks is not added);
    4. components (``relevance.yaml``: sampler, nccl, custom all-reduce, cuda graph...) named by
       the evidence (weight 10), by the implicated flags (3) and by the failure class (1), matched
       against the variable's name (x3) and its description and section (x1).

    ``device`` (cuda, cpu) leaves out variables of other platforms (``VLLM_ROCM_*``...) unless a
    line names them; ``absent`` (components the target lacks, ``absent_components``: ``moe`` for a
    dense model) weighs nothing, and a variable whose name names one is left out the same way. ``known`` adds names a line may mention without a known prefix. Ties break
    by name, so the order is deterministic.

    5. a variable read by the very function a failing frame is in (``read_in``: name -> the
       "path:function" sites of the engine's source that read it, bringup/env/readers.py; the
       failure's ``frames``): the code it switches is the code that failed.

    A word the variable's name shares with the failure's prose is no reason (issue 36: a variable
    named ...ERROR... joined on a line that said "error", ...VALIDATION on a validation error).
    """
    failure_class = _field(failure, "failure_class", None) or ""
    implicates = list(_field(failure, "implicates", None) or [])
    evidence = [str(x) for x in (_field(failure, "evidence", None) or [])]
    hint = _field(failure, "hint", None)
    lines = evidence + ([hint] if hint else [])
    pool = {v.name: v for v in variables}
    known_names = list(pool) + list(known or ())
    found = mentions_in_lines(lines, known_names)
    elsewhere = {m.name: m for m in mentions_in_lines(log_lines, known_names)}
    cls = _relevance()[1].get(failure_class, {})
    absent = frozenset(absent)
    said = [m.name for m in mentions_in_lines(evidence, known_names)]
    weight = _component_weights(cls, failure_class, implicates, evidence, absent, said, hint)
    implicated_env = [f[4:] for f in implicates if f.startswith("env:")]
    for mention in [*found, *elsewhere.values()]:
        pool.setdefault(mention.name, common_vars().get(mention.name) or EnvVar(mention.name, owner="log"))
    for name in implicated_env:
        pool.setdefault(name, common_vars().get(name) or EnvVar(name, owner="knowledge"))
    first_for_class = cls.get("variables", ())
    by_name = {m.name: m for m in found}
    frames = [str(f) for f in (_field(failure, "frames", None) or [])]
    out: list[Ranked] = []
    for name, var in pool.items():
        score = 0.0
        reasons: list[str] = []
        m = by_name.get(name)
        m_else = elsewhere.get(name) if m is None else None
        if (
            m is None
            and m_else is None
            and name not in implicated_env
            and (other_platform(name, device) or _components_in(name) & absent)
        ):
            continue
        if m is not None:
            score += W_NAMED_BY_LOG + (W_ADVISED if m.action == "set" else 0)
            reasons.append(f"named by the failure's lines: {m.text}")
        elif m_else is not None:
            score += W_NAMED_IN_LOG + (W_ADVISED if m_else.action == "set" else 0)
            reasons.append(f"named in the log: {m_else.text}")
        if name in implicated_env:
            score += W_IMPLICATED_ENV
            reasons.append("implicated by the signature")
        if name in first_for_class:
            score += W_CLASS_VARIABLE
            reasons.append(f"changed first for {failure_class}")
        said_of, named_only = _component_reasons(name, var, weight)
        score += sum(w for w, _ in said_of)
        reasons += [why for _, why in said_of]
        if read_in and frames and (site := _read_where(read_in.get(name, ()), frames, package)):
            score += W_READ_IN_FRAME
            reasons.append(f"read by the code that failed ({site})")
        if score >= W_EVIDENCE:  # a reason of its own first (a class's component alone is not one)
            score += sum(w for w, _ in named_only)
            reasons += [why for _, why in named_only]
        if score > 0:
            out.append(Ranked(var, score, tuple(reasons)))
    out.sort(key=lambda r: (-r.score, r.var.name))
    return out[:limit] if limit is not None else out


# -- the user's environment -----------------------------------------------------------------------------------


def user_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The engine-relevant variables of an environment (default: this process's), secrets redacted.

    Relevant: a prefix or a name listed in ``common.yaml`` (``user_prefixes``, ``user_names``).
    Secret-looking names (TOKEN, SECRET, PASSWORD, API_KEY...) keep their name, not their value.
    """
    environ = os.environ if environ is None else environ
    doc = _common_doc()
    prefixes = tuple(doc.get("user_prefixes") or ())
    names = set(doc.get("user_names") or ())
    kept = {k: v for k, v in environ.items() if k in names or k.startswith(prefixes)}
    return dict(sorted(redact_env(kept).items()))


# Where a launch runs, not how: set per slot by bringup (the target's GPUs), never part of a candidate.
# Where things are, not how the engine runs (vLLM's registry reads LD_LIBRARY_PATH and CUDA_HOME too):
# never part of a candidate, never searched (seen: a search that dropped LD_LIBRARY_PATH).
_PLUMBING = re.compile(r"(PATH|_HOME|_DIR|_ROOT|PRELOAD|_CACHE|_VERSION)$")
_PLACEMENT = frozenset(
    {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"}
)


def launch_environment(registry: Registry, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The user's variables that change how the engine runs, as they reach every launch: part of
    each candidate, so that the journal, minimizing and the final command see them and a fix is
    never credited to a flag when a variable did it. Only variables the engine's registry knows
    (or would ignore: its own prefix, an unknown name) and the common NCCL/CUDA/PyTorch settings
    count; an image's informational variables (CUDA_VERSION, NVIDIA_REQUIRE_CUDA, CUDA_HOME: seen
    on the H200 machine) and plumbing (PYTHONPATH) do not. Secrets are left out (they still reach
    the engine through the inherited environment, but never a file)."""
    keep = (KNOWN, DEPRECATED, IGNORED, COMMON)
    return {
        k: v
        for k, v in user_env(environ).items()
        if not is_secret_name(k)
        and registry.status(k) in keep
        and k not in _PLACEMENT
        and not _PLUMBING.search(k)
    }
