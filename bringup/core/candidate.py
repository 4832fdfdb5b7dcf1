"""A candidate: one launch configuration (engine, model, flags, environment).

Flags are kept by their canonical long name, so ``--tp 8`` and ``--tp-size 8`` are the same
candidate. A candidate renders to an argv list (never a shell string), has a canonical key so it
is never launched twice, and diffs against another candidate.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Union

from bringup.core import reserved
from bringup.guard import secrets
from bringup.help.text import HelpSpec

FlagValue = Union[str, bool, tuple[str, ...]]  # True: switch given; False: --no-x

_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")


class FlagError(ValueError):
    """A flag list that the engine's help says it would reject, in argparse's words."""

    def __init__(self, message: str, flag: str | None = None):
        super().__init__(message)
        self.flag = flag


def bad_text(text: str) -> str | None:
    """What makes a flag or variable unusable, or None: a NUL byte (no program can be given one),
    bytes that are not UTF-8 (Python keeps them as surrogates; no record can hold them)."""
    if "\x00" in text:
        return "holds a NUL byte"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raw = text.encode("utf-8", "surrogateescape")[:60]
            return f"holds bytes that are not UTF-8 ({raw!r})"
    return None


def _split(text: str) -> list[str]:
    """Shell-style words; an unbalanced quote is a FlagError that says so, not a traceback."""
    try:
        return shlex.split(text)
    except ValueError as e:
        raise FlagError(f"cannot read {text[:200]!r} as a command line: {e} (check the quotes)") from None


def _is_flag_token(tok: str) -> bool:
    return tok.startswith("-") and not _NUMBER.match(tok) and tok != "-"


def parse_flags(argv: list[str] | str, spec: HelpSpec | None = None) -> dict[str, FlagValue]:
    """Turn engine CLI tokens into {canonical flag: value}.

    With a help spec, aliases and unique prefixes resolve as argparse would, and a switch never
    swallows the next token. Without one, a flag followed by a non-flag token takes it as value.
    """
    tokens = _split(argv) if isinstance(argv, str) else list(argv)
    out: dict[str, FlagValue] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not _is_flag_token(tok):
            raise FlagError(f"unexpected argument {tok!r}: flags must start with '-'", tok)
        name, eq, inline = tok.partition("=")
        negated = False
        opt = spec.resolve(name) if spec else None
        if spec is not None:
            if opt is None:
                amb = spec.ambiguous(name)
                if len(amb) > 1:
                    raise FlagError(f"ambiguous option: {name} could match {', '.join(amb)}", name)
                hint = spec.close_matches(name)
                extra = f" (did you mean {', '.join(hint)}?)" if hint else ""
                raise FlagError(f"unrecognized arguments: {tok}{extra}", name)
            negated = opt.negatable and (name.startswith("--no-") and not opt.name.startswith("--no-"))
            canonical = opt.name
        else:
            canonical = name
        takes_value = opt.takes_value if opt else None
        if eq:
            value: FlagValue = inline
        elif takes_value is False or negated:
            value = not negated
        elif takes_value is None and (i >= len(tokens) or _is_flag_token(tokens[i])):
            value = True
        else:
            if i >= len(tokens) or _is_flag_token(tokens[i]):
                raise FlagError(f"argument {name}: expected one argument", name)
            if opt is not None and opt.nargs_many:
                vals = []
                while i < len(tokens) and not _is_flag_token(tokens[i]):
                    vals.append(tokens[i])
                    i += 1
                value = tuple(vals) if len(vals) > 1 else vals[0]
            else:
                value = tokens[i]
                i += 1
        if opt is not None and opt.choices and not opt.open_choices and isinstance(value, str):
            if value not in opt.choices:
                choices = ", ".join(repr(c) for c in opt.choices)
                raise FlagError(f"argument {name}: invalid choice: {value!r} (choose from {choices})", name)
        out[canonical] = value
    return out


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ENV_TOKEN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)


def parse_env(items: list[str]) -> dict[str, str]:
    """`NAME=VALUE` items (from --env options) into a dict, checked."""
    out: dict[str, str] = {}
    for it in items:
        name, sep, value = it.partition("=")
        if not sep or not _ENV_NAME.match(name):
            raise FlagError(
                f"{it!r} is not NAME=VALUE (an environment variable, e.g. VLLM_USE_FLASHINFER_SAMPLER=0)",
                name or it,
            )
        out[name] = value
    return out


def split_env(argv: list[str] | str) -> tuple[dict[str, str], list[str]]:
    """Leading `NAME=VALUE` tokens (as a shell command line puts them before the program) and the
    rest. Only leading ones: `--flag=x` starts with a dash and `NAME=VALUE` after a flag is a value."""
    tokens = _split(argv) if isinstance(argv, str) else list(argv)
    env: dict[str, str] = {}
    i = 0
    while i < len(tokens) and (m := _ENV_TOKEN.match(tokens[i])):
        env[m.group(1)] = m.group(2)
        i += 1
    return env, tokens[i:]


def parse_command(
    argv: list[str] | str, spec: HelpSpec | None = None
) -> tuple[dict[str, FlagValue], dict[str, str]]:
    """A command as a person writes it, `NAME=VALUE ... --flag x ...`: (flags, env)."""
    env, rest = split_env(argv)
    return parse_flags(rest, spec), env


def render_flags(flags: dict[str, FlagValue]) -> list[str]:
    argv: list[str] = []
    for name, value in flags.items():
        if value is True:
            argv.append(name)
        elif value is False:
            argv.append("--no-" + name[2:])
        elif isinstance(value, tuple):
            argv += [name, *value]
        else:
            argv += [name, str(value)]
    return argv


def format_value(value: FlagValue) -> str:
    if value is True:
        return "on"
    if value is False:
        return "off"
    if isinstance(value, tuple):
        return " ".join(value)
    return str(value)


@dataclass(frozen=True)
class Change:
    flag: str  # a flag, or "env:NAME"
    before: FlagValue | None  # None: absent
    after: FlagValue | None

    def describe(self) -> str:
        if self.after is None:
            return f"drop {self.flag}"
        if self.after is True:
            return self.flag
        return f"{self.flag} {format_value(self.after)}"


@dataclass(frozen=True)
class Candidate:
    engine: str
    model: str
    flags: tuple[tuple[str, FlagValue], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        # The one place every candidate passes, whatever made it (a baseline, a fix, a space file,
        # a tuning knob, a lesson, a journal row): a flag that sets the host, port, socket, model
        # or served name never becomes a launch (bringup/core/reserved.py), and no flag or variable
        # holds what no process can be given or no record can hold (a NUL byte, bytes that are not
        # UTF-8: a traceback after the launch, with nothing recorded).
        origin = self.label or "a candidate"
        reserved.check_flags(self.engine, [k for k, _ in self.flags], origin)
        for k, v in self.flags:
            for text in (k, *(v if isinstance(v, tuple) else (v,) if isinstance(v, str) else ())):
                if bad := bad_text(text):
                    raise FlagError(f"{origin}: {k} {bad}", k)
        for name, value in self.env:
            if bad := bad_text(name) or bad_text(value):
                raise FlagError(
                    f"{origin}: the variable {name} {bad}; set it as UTF-8 text, or unset it", name
                )

    @classmethod
    def make(
        cls,
        engine: str,
        model: str,
        flags: dict[str, FlagValue] | None = None,
        env: dict[str, str] | None = None,
        label: str = "",
    ) -> Candidate:
        # Secrets: remember the real values (so writers can replace them), and put back the ones
        # a candidate read from disk lost (`***`), so a resumed run launches what the user gave.
        flags, env = secrets.restore(flags or {}, env or {})
        secrets.register_candidate(flags, env)
        return cls(engine, model, tuple(flags.items()), tuple(sorted(env.items())), label)

    @property
    def flag_dict(self) -> dict[str, FlagValue]:
        return dict(self.flags)

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    def argv_flags(self) -> list[str]:
        return render_flags(self.flag_dict)

    def with_changes(self, changes: Mapping[str, FlagValue | None], label: str = "") -> Candidate:
        """Set (value), or remove (None) flags and env vars ("env:NAME")."""
        flags, env = self.flag_dict, self.env_dict
        for k, v in changes.items():
            target, key = (env, k[4:]) if k.startswith("env:") else (flags, k)
            if v is None:
                target.pop(key, None)
            else:
                target[key] = v  # type: ignore[assignment]
        return Candidate.make(self.engine, self.model, flags, env, label or self.label)

    def canonical(self) -> dict:
        def norm(v: FlagValue) -> object:
            return list(v) if isinstance(v, tuple) else v

        # Secret values never leave memory: not in the key, not in any JSON (bringup.guard.secrets).
        return {
            "engine": self.engine,
            "model": self.model,
            "flags": secrets.redact_flags({k: norm(v) for k, v in sorted(self.flags)}),
            "env": secrets.redact_env(dict(sorted(self.env))),
        }

    def settings(self) -> dict[str, str]:
        """The launch's own flags and variables as text ("--flag" or "env:NAME" -> value), for the
        classifier: a failure that quotes one of their values, or is raised in the module one
        selects, is that setting's (issue 36). Switches (True) quote nothing and stay out."""
        canon = self.canonical()
        out = {
            k: " ".join(map(str, v)) if isinstance(v, list) else format_value(v)
            for k, v in canon["flags"].items()
            if v is not True
        }
        out.update({"env:" + k: str(v) for k, v in canon["env"].items()})
        return out

    def key(self) -> str:
        blob = json.dumps(self.canonical(), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def diff(self, base: Candidate) -> list[Change]:
        """Changes that turn base into self, flags first then env, in a stable order."""
        out: list[Change] = []
        a, b = base.flag_dict, self.flag_dict
        for k in list(a) + [k for k in b if k not in a]:
            if a.get(k) != b.get(k):
                out.append(Change(k, a.get(k), b.get(k)))
        ea, eb = base.env_dict, self.env_dict
        for k in sorted(set(ea) | set(eb)):
            if ea.get(k) != eb.get(k):
                out.append(Change("env:" + k, ea.get(k), eb.get(k)))
        return out

    def describe_diff(self, base: Candidate) -> str:
        changes = self.diff(base)
        return ", ".join(c.describe() for c in changes) if changes else "(baseline)"

    def shell_command(self, prefix: list[str]) -> str:
        """A copy-pasteable command line (for reports only; launches use argv lists)."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in secrets.redact_env(self.env_dict).items())
        cmd = shlex.join([*prefix, *secrets.redact_argv(self.argv_flags())])
        return f"{env} {cmd}".strip()

    def to_json(self) -> dict:
        d = self.canonical()
        d["label"] = self.label
        return d

    @classmethod
    def from_json(cls, d: dict) -> Candidate:
        flags = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d.get("flags", {}).items()}
        return cls.make(d["engine"], d["model"], flags, d.get("env", {}), d.get("label", ""))


def change_tokens(changes: list[Change]) -> list[str]:
    """Changes as the words a user types: `NAME=VALUE`, `--flag`, `--flag value`, `(drop --flag)`."""
    toks: list[str] = []
    for c in changes:
        if c.flag.startswith("env:"):
            toks.append(f"{c.flag[4:]}={c.after}" if c.after is not None else f"(unset {c.flag[4:]})")
        elif c.after is None:
            toks.append(f"(drop {c.flag})")
        elif c.after is True:
            toks.append(c.flag)
        else:
            toks += [c.flag, format_value(c.after) if isinstance(c.after, tuple) else str(c.after)]
    return toks
