"""The generic layer of the classifier: a class for an exception no signature knows.

Signatures know exact error strings. A log from a new engine version, a new GPU or a new
package fails with text nobody wrote down, yet its Python exception still says a lot: its type
(ImportError), its message (which package, which flag, "out of resource: shared memory"), and
its frames (raised inside graph capture, inside the flashinfer package). The rules in
``bringup/data/rootcause.yaml`` turn that into a class, a phase and the implicated factors, and
the module map there says which factor level loads a package that failed to import.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from bringup.core.datafiles import DATA, KnowledgeFileError, classes, load_yaml, phases
from bringup.help.spec import flag_dest
from bringup.observe.links import imports_value
from bringup.observe.tracebacks import PyException, errorish, frame_text

ROOTCAUSE_FILE = DATA / "rootcause.yaml"


def _known_class(v: str) -> str:
    if v not in classes():
        raise ValueError(f"unknown class {v!r}")
    return v


FailureClass = Annotated[str, AfterValidator(_known_class)]  # a class of classes.yaml


class ModuleLevel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    engine: str
    factor: str  # a flag or env:NAME
    level: str | None = None  # None: whatever level of the factor this launch used


class ModuleEntry(BaseModel):
    """A package or kernel library and the factor levels that load it."""

    model_config = ConfigDict(extra="forbid")
    id: str
    names: list[str] = Field(default_factory=list)  # regexes for the name in a message
    frames: str | None = None  # regex over "path:function" of a frame raised inside it
    levels: list[ModuleLevel] = Field(default_factory=list)
    source: str

    def named_in(self, text: str) -> bool:
        return any(re.search(rf"(?<![\w-]){n}(?![\w])", text) for n in self.names)

    def raised_in(self, frames: str) -> bool:
        # One frame a line: "^" in a pattern ("(^|/)flash_attn/") is the start of a frame's path,
        # not only of the first frame's.
        return bool(self.frames and frames and re.search(self.frames, frames, re.MULTILINE))


class FramePhase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    frames: str
    phase: str


class RootRule(BaseModel):
    """Exception type / message / frames / phase -> class, implicated factors, hint."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")
    id: str
    failure_class: FailureClass = Field(alias="class")
    types: str | None = None  # regex over the exception's short type name (fullmatch)
    message: str | None = None  # regex searched in the message (with its continuation lines)
    frames: str | None = None  # regex searched in the frames ("path:function" lines)
    phases: list[str] | None = None  # the failure's phase (from frames, else the log) must be one of these
    requires_module: bool = False  # only when the exception names a package of the module map
    at_import: bool = False  # only when the process failed while importing its modules (at_import())
    phase: str | None = None  # the phase when neither the frames nor the log's markers tell
    min_flags: int = 0  # only when the message names at least this many of the engine's flags
    # ... of which at least this many the launch set itself, when its settings are known (a message
    # that compares the user's value with a default names two flags, but one setting is wrong)
    min_set: int = 0
    # only when the message is the import of what a dotted value of this launch's settings names
    # ("No module named 'my_plugins'" for my_plugins.workers.MyWorker; links.imports_value)
    imports_setting: bool = False
    engines: list[str] | None = None
    priority: int = 50
    implicates: list[str] = Field(default_factory=list)
    adjust: dict[str, dict] = Field(default_factory=dict)
    note: str | None = None  # an evidence line formatted from the message's named groups
    hint: str
    source: str

    @field_validator("phases")
    @classmethod
    def _known_phases(cls, v: list[str] | None) -> list[str] | None:
        for p in v or []:
            if p not in phases():
                raise ValueError(f"unknown phase {p!r}")
        return v

    @field_validator("phase")
    @classmethod
    def _known_phase(cls, v: str | None) -> str | None:
        if v is not None and v not in phases():
            raise ValueError(f"unknown phase {v!r}")
        return v


class Component(BaseModel):
    """Where in the engine an exception no rule knows was raised, and the class that gives it."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")
    id: str
    frames: str  # regex over "path:function" of the innermost frames
    failure_class: FailureClass = Field(alias="class")
    source: str


class RootCauseFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    modules: list[ModuleEntry]
    frame_phases: list[FramePhase]
    rules: list[RootRule]
    components: list[Component] = Field(default_factory=list)
    # the class of an exception no rule knows, raised in the engine, by the phase it struck in
    by_phase: dict[str, str] = Field(default_factory=dict)


@lru_cache(maxsize=1)
def knowledge() -> RootCauseFile:
    from pydantic import ValidationError

    from bringup.core.datafiles import describe_validation

    try:
        doc = RootCauseFile.model_validate(load_yaml(ROOTCAUSE_FILE))
    except ValidationError as e:
        raise KnowledgeFileError(describe_validation(ROOTCAUSE_FILE, "rootcause", e)) from e
    for fp in doc.frame_phases:
        if fp.phase not in phases():
            raise KnowledgeFileError(f"{ROOTCAUSE_FILE}: frame_phases: unknown phase {fp.phase!r}")
    return doc


def rule_by_id(rule_id: str | None) -> RootRule | None:
    return next((r for r in knowledge().rules if r.id == rule_id), None) if rule_id else None


# -- facts read from one exception ------------------------------------------------------------


def frames_phase(exc: PyException) -> str | None:
    """The phase the innermost recognisable frame belongs to (graph capture, KV allocation, ...).
    Module-level frames (``<module>``) are skipped: an import chain says where a package was
    imported (SGLang 0.5.23 imports its model loader while resolving its arguments), not what
    the engine was doing."""
    for fr in reversed(exc.frames):
        if fr.func == "<module>":
            continue
        text = f"{fr.module_path}:{fr.func}"
        for fp in knowledge().frame_phases:
            if re.search(fp.frames, text):
                return fp.phase
    return None


def engine_from_frames(exc: PyException) -> str | None:
    """Which engine raised it, from the package paths in its frames (None: cannot tell)."""
    paths = " ".join(f.module_path for f in exc.frames)
    for name, rx in (
        ("vllm", r"(^|\s)vllm/"),
        ("sglang", r"(^|\s)sglang/"),
        ("transformers", r"transformers/(cli|commands)/serv"),
    ):
        if re.search(rx, paths):
            return name
    return None


@lru_cache(maxsize=8)
def known_flags(engine: str | None) -> frozenset[str]:
    """Every option string of the engine's bundled --help captures (all versions)."""
    from bringup.help.text import DATA_HELP, parse_help

    names: set[str] = set()
    if engine:
        for p in sorted(DATA_HELP.glob(f"{engine}-*.txt")):
            for o in parse_help(p.read_text()).options:
                names.add(o.name)
                names.update(a for a in o.aliases if a.startswith("--"))
    return frozenset(names)


@lru_cache(maxsize=8)
def choice_flags(engine: str | None) -> frozenset[str]:
    """The engine's flags whose values are argparse choices (any bundled version)."""
    from bringup.help.text import DATA_HELP, parse_help

    names: set[str] = set()
    if engine:
        for p in sorted(DATA_HELP.glob(f"{engine}-*.txt")):
            names.update(o.name for o in parse_help(p.read_text()).options if o.choices)
    return frozenset(names)


_FLAG = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*[a-z0-9]")
_SNAKE = re.compile(r"(?<![\w./-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w/])")
_ENV = re.compile(r"\b((?:VLLM|SGLANG|NCCL|CUDA|TORCH|PYTORCH|HF|TRANSFORMERS)_[A-Z0-9_]+)\b")


def flags_named(message: str, engine: str | None) -> list[str]:
    """Flags the message names: literal --flags, and snake_case names of the engine's flags."""
    known = known_flags(engine)
    out: list[str] = []
    for m in _FLAG.finditer(message):
        if (not known or m.group(0) in known) and m.group(0) not in out:
            out.append(m.group(0))
    if known:
        for m in _SNAKE.finditer(message):
            flag = "--" + m.group(0).replace("_", "-")
            if flag in known and flag not in out:
                out.append(flag)
    return out


def envs_named(message: str) -> list[str]:
    out: list[str] = []
    for m in _ENV.finditer(message):
        name = "env:" + m.group(1).rstrip("_")
        if name not in out:
            out.append(name)
    return out


# Lines of an exception's message that name no factor of the failure: CUDA's advice for debugging
# ("For debugging consider passing CUDA_LAUNCH_BLOCKING=1", "Compile with `TORCH_USE_CUDA_DSA`"),
# pydantic's link; and pydantic's dump of the input ("[type=value_error, input_value=...]").
_BOILERPLATE = re.compile(
    r"(?i)(debug|asynchronously reported|TORCH_USE_CUDA_DSA|Search for .cudaError|For further information visit)"
)
_PYDANTIC_TAIL = re.compile(r"\s*\[type=[^\]]*\]?.*$")


def naming_text(exc: PyException) -> str:
    """The message as evidence of which factors failed: without debugging boilerplate and dumps."""
    lines = [ln for ln in exc.full_message.splitlines() if not _BOILERPLATE.search(ln)]
    return "\n".join(_PYDANTIC_TAIL.sub("", ln) for ln in lines)


_IMPORT_MACHINERY = re.compile(r"^<frozen |importlib|runpy")


def at_import(exc: PyException, max_inner: int = 4) -> bool:
    """The process failed while importing its modules, before it did anything: every frame down to
    the innermost ``<module>`` one is module-level code or the import machinery, and at most a few
    calls follow it (transformers' version check, a registry that refuses a name). An engine that
    fails so is refusing the installed packages, not the launch's settings."""
    modules = [i for i, f in enumerate(exc.frames) if f.func == "<module>"]
    last = max(modules, default=-1)
    if last < 0 or len(exc.frames) - 1 - last > max_inner:
        return False
    # One <module> frame is the script that was run (`python -m sglang.launch_server` runs its
    # module-level code, which calls into the engine: a FileNotFoundError its argument checks raise
    # is no import failure); an import shows a module importing another: two <module> frames or more.
    if len(modules) < 2:
        return False
    return all(f.func == "<module>" or _IMPORT_MACHINERY.search(f.file) for f in exc.frames[:last])


def flags_by_words(message: str, engine: str | None) -> list[str]:
    """Flags whose name the message spells in words: "Tensor parallel size (8)", "desired GPU memory
    utilization" (a name of two words or more, any case, spaces or underscores between them)."""
    out: list[str] = []
    for flag in sorted(known_flags(engine)):
        words = flag[2:].split("-")
        if len(words) < 2:
            continue
        if re.search(r"(?<![\w-])" + r"[ _-]".join(map(re.escape, words)) + r"(?![\w-])", message, re.I):
            out.append(flag)
    return out


_NO_VALUE = {"true", "false", "none", "auto", "null", "default"}
_NOT_FACTORS = {"model", "model_tag", "model_path", "served_model_name", "host", "port", "tokenizer_path"}


def known_settings(
    log_lines: list[str], engine: str | None, launched: dict[str, str] | None
) -> dict[str, str]:
    """The launch's settings as far as they are known: the log's dump of them, overlaid by the
    ones the caller launched with (a trial knows its own; `explain` has only the log)."""
    return {**launch_settings(log_lines, engine), **(launched or {})}


def launch_settings(log_lines: list[str], engine: str | None) -> dict[str, str]:
    """--flag -> value this launch set, from the engine's dump of its arguments (vLLM's "non-default
    args", SGLang's server_args, which lists every argument: there only values that differ from the
    help's default count). Empty when the log has no dump."""
    from bringup.observe.effective import parse_non_default_args, parse_server_args

    defaults = _defaults(engine)
    for ln in log_lines:
        if (args := parse_non_default_args(ln)) is not None:
            return {"--" + k.replace("_", "-"): _as_text(v) for k, v in args.items() if k not in _NOT_FACTORS}
        if (args := parse_server_args(ln)) is not None:
            return _set_in_dump(args, defaults)
    return {}


def _as_text(v: object) -> str:
    """A dumped value as the user wrote it: a list as its items, a dict as JSON."""
    import json

    if isinstance(v, (list, tuple)):
        return " ".join(str(x) for x in v)
    if isinstance(v, dict):
        try:
            return json.dumps(v)
        except (TypeError, ValueError):
            return str(v)
    return str(v)


# A value that reads as an argument left alone, where the help prints no default (SGLang's help
# prints none): a dump of every argument names these for every launch.
_DEFAULT_LOOKING = {"none", "false", "0", "1", "", "auto", "[]", "{}"}


def _set_in_dump(args: dict, defaults: dict[str, str]) -> dict[str, str]:
    out = {}
    for k, v in args.items():
        flag = "--" + k.replace("_", "-")
        if k in _NOT_FACTORS:
            continue
        known = defaults.get(flag)
        if str(v) == known or (known is None and str(v).strip("'\"").lower() in _DEFAULT_LOOKING):
            continue
        out[flag] = _as_text(v)
    return out


@lru_cache(maxsize=8)
def _defaults(engine: str | None) -> dict[str, str]:
    from bringup.help.text import DATA_HELP, parse_help

    out: dict[str, str] = {}
    if engine:
        for p in sorted(DATA_HELP.glob(f"{engine}-*.txt")):
            for o in parse_help(p.read_text()).options:
                if o.default is not None:
                    out[o.name] = str(o.default).strip("'\"")
    return out


def flags_by_value(message: str, settings: dict[str, str]) -> list[str]:
    """Flags whose value this launch set is quoted in the message ("Cannot find the config file for
    modelopt_fp4" names --quantization modelopt_fp4; "'/tmp/no-such-draft'" names the speculative
    config that holds that path; "No module named 'my_plugins'" the worker class
    my_plugins.Worker). The distinctive pieces of a value only (bringup/observe/links.py): numbers
    with their unit, never yes/no."""
    from bringup.observe.links import quoted, value_tokens

    out: list[str] = []
    lines = message.splitlines()
    for flag, value in settings.items():
        if any(quoted(lines, tok) for tok in value_tokens(value)) or imports_value(message, value):
            out.append(flag)
    return out


def modules_of(exc: PyException) -> list[ModuleEntry]:
    """Packages the exception names (import errors, NameError, message) or was raised inside."""
    text = f"{exc.type}: {exc.full_message}"
    frames = frame_text(exc)
    named = [m for m in knowledge().modules if m.named_in(text)]
    inside = [m for m in knowledge().modules if m not in named and m.raised_in(frames)]

    # Raised inside: the innermost package first (the one whose frame is deepest).
    def depth(m: ModuleEntry) -> int:
        lines = frames.splitlines()
        return max((i for i, ln in enumerate(lines) if m.raised_in(ln)), default=-1)

    return named + sorted(inside, key=depth, reverse=True)


def module_levels(mods: list[ModuleEntry], engine: str | None) -> dict[str, list[str]]:
    """factor -> levels that load these packages, for this engine (every engine when unknown)."""
    out: dict[str, list[str]] = {}
    for m in mods:
        for lv in m.levels:
            if engine is not None and lv.engine != engine:
                continue
            levels = out.setdefault(lv.factor, [])
            if lv.level is not None and lv.level not in levels:
                levels.append(lv.level)
    return out


# -- matching the rules -----------------------------------------------------------------------


@dataclass
class RuleMatch:
    rule: RootRule | None  # None: an exception no rule knows
    exc: PyException
    phase: str | None  # from the frames, when they tell
    implicates: list[str] = field(default_factory=list)
    implicated_levels: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def priority(self) -> int:
        return self.rule.priority if self.rule else 0


def requested_levels(levels: dict[str, list[str]], log_lines: list[str]) -> dict[str, list[str]]:
    """The module levels this launch asked for, when its log says (vLLM's "non-default args",
    SGLang's server_args, a command line): a missing flashinfer implicates the flag set to
    FLASHINFER, not every flag that has a flashinfer level. Empty when the log names none."""
    config = [ln for ln in log_lines if re.search(r"non-default args|server_args=|Namespace\(|--\w", ln)]
    out: dict[str, list[str]] = {}
    for factor, lvls in levels.items():
        for lv in lvls:
            q = re.escape(lv)
            if any(re.search(rf"(['\"=]|\s){q}(['\",)\s]|$)", ln) for ln in config):
                out.setdefault(factor, []).append(lv)
    return out


def _rule_fits(rule: RootRule, exc: PyException, facts: dict) -> re.Match[str] | bool:
    """The rule's message match (True when it has no message pattern), or False when it does not fit."""
    if rule.engines is not None and facts["engine"] is not None and facts["engine"] not in rule.engines:
        return False
    if rule.types and not re.fullmatch(rule.types, exc.short_type):
        return False
    m = re.search(rule.message, facts["message"]) if rule.message else None
    if rule.message and m is None:
        return False
    checks = (
        not rule.frames or re.search(rule.frames, facts["frames"]),
        rule.phases is None or facts["phase"] in rule.phases,
        not rule.requires_module
        or any(mod.named_in(f"{exc.type}: {facts['message']}") for mod in facts["mods"]),
        len(facts["flags"]) >= rule.min_flags,
        not facts["launched"] or sum(1 for f in facts["flags"] if f in facts["launched"]) >= rule.min_set,
        not rule.at_import or at_import(exc),
        not rule.imports_setting or facts["imports_setting"],
    )
    if not all(checks):
        return False
    return m if m is not None else True


def _first_rule(exc: PyException, facts: dict) -> tuple[RootRule | None, dict[str, str | None]]:
    for rule in knowledge().rules:
        fit = _rule_fits(rule, exc, facts)
        if fit is not False:
            return rule, (fit.groupdict() if isinstance(fit, re.Match) else {})
    return None, {}


def _notes(
    chosen: RootRule | None, groups: dict, asked: dict, mods: list[ModuleEntry], exc, engine
) -> list[str]:
    notes: list[str] = []
    if chosen is not None and chosen.note:
        try:
            notes.append(chosen.note.format(**{k: v for k, v in groups.items() if v is not None}))
        except (KeyError, IndexError, ValueError):
            pass
    if asked:
        notes.append("this launch asked for: " + "; ".join(f"{f} {', '.join(v)}" for f, v in asked.items()))
    text = f"{exc.type}: {exc.full_message}"
    for mod in mods:
        lv = module_levels([mod], engine)
        if not lv:
            continue
        chosen_by = "; ".join(f"{f} {', '.join(v)}" if v else f for f, v in lv.items())
        how = "named in the error" if mod.named_in(text) else "raised inside it"
        notes.append(f"{mod.id} ({how}) is used by: {chosen_by}")
    return notes


def match_rules(
    exc: PyException,
    engine: str | None,
    phase_reached: str | None,
    log_lines: list[str] | None = None,
    launched: dict[str, str] | None = None,
) -> RuleMatch:
    """The first rule that fits the exception, with the factors it implicates. ``launched``: the
    launch's own settings, when known (else the log's dump of its arguments is read)."""
    engine = engine or engine_from_frames(exc)
    log_lines = log_lines or []
    fphase = frames_phase(exc)
    naming = naming_text(exc)
    settings = known_settings(log_lines, engine, launched)
    flags = [*flags_named(naming, engine)]
    for f in [*flags_by_words(naming, engine), *flags_by_value(naming, settings)]:
        if f not in flags:
            flags.append(f)
    mods = modules_of(exc)
    facts = {
        "engine": engine,
        "message": exc.full_message,
        "frames": frame_text(exc),
        "phase": fphase or phase_reached,
        "flags": flags,
        "mods": mods,
        # (a name the user wrote: a flag with choices picks a backend, whose missing package is a
        # missing dependency, not a wrong value)
        "launched": settings,
        "imports_setting": any(
            imports_value(exc.full_message, v) for f, v in settings.items() if f not in choice_flags(engine)
        ),
    }
    chosen, groups = _first_rule(exc, facts)
    levels = module_levels(mods, engine)
    asked = requested_levels(levels, log_lines)
    if asked:
        # The launch's own levels first; the other factors that could load it stay as weaker suspects.
        levels = {**asked, **{f: v for f, v in levels.items() if f not in asked}}
    known = known_flags(engine)
    # A rule lists the flags of every engine; keep those this engine has (when its --help is known).
    generic = [
        f for f in (chosen.implicates if chosen else []) if not known or not f.startswith("--") or f in known
    ]
    implicates: list[str] = []
    for name in [*flags, *levels, *generic, *envs_named(naming)]:
        if name not in implicates:
            implicates.append(name)
    # What this launch set comes first among the suspects: it is what the launch changed.
    implicates.sort(key=lambda f: f not in settings)
    notes = _notes(chosen, groups, asked, mods, exc, engine)
    return RuleMatch(chosen, exc, fphase, implicates, {f: v for f, v in levels.items() if v}, notes)


def _frame_names(exc: PyException) -> list[str]:
    """An exception's frames as "path:function", outermost first (how links and rootcause.yaml
    components read a frame)."""
    return [f"{f.module_path}:{f.func}" for f in exc.frames]


def where_class(
    exc: PyException,
    engine: str | None,
    phase: str | None,
    log_lines: list[str],
    launched: dict[str, str] | None = None,
    later: Sequence[PyException] = (),
) -> tuple[str, str] | None:
    """The class of an exception no signature or rule knows, from where it was raised (issue 36):
    a launch setting the failure links by its value or the module it selects makes it the setting's
    (bad-flag); else the component of its innermost frames (rootcause.yaml ``components``: tokenizer
    and config loading is model-load, ...); else the phase it struck in (``by_phase``). None when no
    frame is in the engine or a library it loads: then it is unknown, and says so.

    ``later``: the exceptions its chain raised from it ("The above exception was the direct cause
    of the following exception"). A library's exception holds only the library's frames (httpcore's
    ConnectError in ``map_exceptions``); the one raised from it carries the engine's frames that
    called the library (vLLM CPU's ``entrypoints/mcp/tool_server.py`` for an unreachable
    ``--tool-server``), and a person reads the chain whole."""
    from bringup.observe.links import Setting, links, package_path

    engine = engine or engine_from_frames(exc)
    frames = _frame_names(exc)
    ours = any(package_path(f, engine) for f in frames) or bool(modules_of(exc))
    if not ours:
        for e in later:
            engine = engine or engine_from_frames(e)
            outer = _frame_names(e)
            if any(package_path(f, engine) for f in outer):
                frames, ours = [*outer, *frames], True
                break
    comp = next((c for c in knowledge().components if any(re.search(c.frames, f) for f in frames[-4:])), None)
    if not ours and comp is None:
        return None
    # What the launch was given (a trial knows its argv) is the user's; the rest of a dump is the
    # engine's own choice, which links by value or module only (SGLang dumps every argument).
    settings = [
        Setting(flag, value, flag_dest(flag), None, launched is None or flag in launched)
        for flag, value in known_settings(log_lines, engine, launched).items()
    ]
    given = set(launched or ())
    message = [ln for ln in f"{exc.type}: {naming_text(exc)}".splitlines() if ln.strip()]
    for link in links(message, frames, settings, engine):
        # a setting given to this launch whose component the failing frames are in selected that
        # path (`--enable-return-routed-experts` and SGLang's routed_experts.py capturer)
        if link.kind in ("value", "module") or (link.kind == "component" and link.name in given):
            return "bad-flag", f"{link.name}: {link.why}"
    if comp is not None:
        return comp.failure_class, f"raised in {comp.id}"
    cls = knowledge().by_phase.get(phase or "")
    return (cls, f"raised in the engine while in {phase}") if cls else None


# A native error line names the source file it was raised in: a CUDA check macro's "Failed: Cuda
# error /workspace/csrc/custom_all_reduce.cuh:455 'invalid argument'" (vLLM csrc/custom_all_reduce.cuh
# and sgl-kernel csrc/allreduce/custom_all_reduce.cuh CUDACHECK), c10's "Exception raised from f at
# /pytorch/c10/cuda/CUDAException.cpp:43". Its path is the failure's innermost frame.
_NATIVE_AT = re.compile(
    r"(?P<path>(?:[\w.+-]+/)+[\w.+-]+\.(?:cuh|cu|cpp|cc|cxx|hpp|hh|h|c))[:(](?P<line>\d+)"
)


@dataclass
class NativeWhere:
    """Where a failure with no Python exception was raised, read from a native error line."""

    failure_class: str
    why: str
    path: str  # the source file, the failure's innermost frame
    line: str  # the error line that names it
    levels: dict[str, list[str]]  # the levels that load the code it names (rootcause.yaml modules)


def native_where(lines: list[str], phase: str | None, engine: str | None = None) -> NativeWhere | None:
    """The class of a failure with no Python exception whose error line names a native source file
    (issue 36, a class from where it raised): the component that file belongs to (rootcause.yaml
    ``components``), else the phase it struck in (``by_phase``: the file is in the engine or a
    library it loads); and the levels that load the code it names, as for a frame (``modules``:
    custom_all_reduce.cuh is the custom all-reduce, which --disable-custom-all-reduce turns off).
    None where no error line names a native source."""
    for line in reversed(lines):
        m = _NATIVE_AT.search(line) if errorish(line) else None
        if m is None:
            continue
        path = m.group("path")
        mods = [x for x in knowledge().modules if x.named_in(line) or x.raised_in(path)]
        levels = module_levels(mods, engine)
        comp = next((c for c in knowledge().components if re.search(c.frames, path)), None)
        if comp is not None:
            return NativeWhere(comp.failure_class, f"raised in {comp.id} ({path})", path, line, levels)
        cls = knowledge().by_phase.get(phase or "")
        if cls is None:
            return None
        return NativeWhere(cls, f"raised in native code ({path}) while in {phase}", path, line, levels)
    return None


# describe's ending, where the root exception was raised ("... in __call__ (torch/_ops.py:865)"):
# present only when its traceback reached the log. Read back by the search (one failure, one place)
# and by observe/guards.py (the engine's source at that line).
RAISED_AT = re.compile(r" in (?P<func>[\w<>.]+) \((?P<path>[^()]*):(?P<line>\d+)\)$")


def describe(exc: PyException) -> str:
    """One line: the exception and where it was raised."""
    where = ""
    if exc.frames:
        f = exc.frames[-1]
        where = f" in {f.func} ({f.module_path}:{f.line})"
    key = exc.key_line
    if key is not exc.line and exc.message:  # pydantic: the message is on the next line
        msg = key.text.strip()
    else:
        msg = exc.full_message.splitlines()[0] if exc.full_message else ""
    return f"{exc.short_type}{': ' + msg[:160] if msg else ''}{where}"
