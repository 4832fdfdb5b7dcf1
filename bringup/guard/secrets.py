"""Keep secrets (tokens, keys, passwords) out of every log and report bringup writes.

Two layers, because either alone leaks:

- by name: a flag (``--api-key``, ``--admin-api-key``, ``--ssl-keyfile-password``, ``--hf-token``,
  any flag named like a key/token/password/secret, or one the engine's ``--help`` describes as
  an API key or password) or an environment variable (``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``,
  ``*_KEY``) has its value replaced by ``***`` wherever bringup records flags or variables;
- by value: every secret value bringup has seen in this process (registered when a candidate
  is made) is replaced in any text before it is written: the engine's log as stored, outcome,
  candidate, run and findings JSON, FINDINGS.md, report.html, the SQLite journal, tune results.
  ``Bearer <token>`` and ``--secret-flag VALUE`` patterns are replaced even for values bringup
  never saw (a log that echoes a token from elsewhere).

A secret value lives only in memory: the launch argv and the probes' ``Authorization`` header.
A candidate read back from disk holds ``***``; `restore` puts back the value this process knows
for that name (or leaves ``***``, which is then the key the server and its probes share).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar, cast

REDACTED = "***"
MIN_VALUE_LEN = 4  # shorter values are not replaced in free text (they would mangle every log)

_SECRET_NAME = re.compile(
    r"((^|_)(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?)($|_))|((API|ACCESS|PRIVATE|SECRET|ADMIN)_?KEY)"
    r"|((SIGNING|ENCRYPTION|MASTER|SERVICE|HF|OPENAI|SSL)_KEY$)|(^KEY$)|(AUTH_?TOKEN)|(SECRET)|(PASSWORD)",
    re.I,
)
_SECRET_FLAGS = {
    "--api-key",
    "--hf-token",
    "--ssl-keyfile-password",
    "--admin-api-key",
    "--token",
    "--api-keys",
    "--access-token",
}
_SECRET_FLAG_NAME = re.compile(
    r"^--(?:[\w-]*-)?(api-keys?|token|password|passwd|passphrase|secret|credentials?)$"
    r"|^--[\w-]*(secret|password)[\w-]*$",
    re.I,
)
# What an engine's --help says of a flag that carries a secret (vLLM: "If provided, the server
# will require one of these keys to be presented in the header"; SGLang: "Set API key of the server").
_HELP_MARKS = re.compile(
    r"keys? to be presented|\bapi[ -]?keys?\b|\bpassword\b|\bsecret\b|\bbearer\b"
    r"|\b(access|auth|authentication) token\b",
    re.I,
)

_lock = threading.Lock()
_values: dict[str, str] = {}  # name (flag or env variable) -> the secret value this process holds
_help_flags: set[str] = set()  # flags the engine's --help marks as secrets


def is_secret_name(name: str) -> bool:
    """An environment variable (or dict key) whose value is a secret."""
    return bool(_SECRET_NAME.search(name.lstrip("-").replace("-", "_")))


def is_secret_flag(flag: str) -> bool:
    """A command-line flag whose value is a secret."""
    base = flag.split("=", 1)[0]
    return base in _SECRET_FLAGS or base in _help_flags or bool(_SECRET_FLAG_NAME.match(base))


def learn_from_help(options: Iterable[Any]) -> set[str]:
    """Mark the flags whose help text describes a key, token or password (any engine's --help)."""
    found: set[str] = set()
    for opt in options:
        if getattr(opt, "takes_value", True) and _HELP_MARKS.search(getattr(opt, "help", "") or ""):
            found.update(getattr(opt, "all_names", [getattr(opt, "name", "")]))
    with _lock:
        _help_flags.update(n for n in found if n)
    return found


def register(name: str, value: object) -> None:
    """Remember a secret this process holds, so every writer can replace it by value."""
    if isinstance(value, (list, tuple)):
        for v in value:
            register(name, v)
        return
    if not isinstance(value, str) or not value or value == REDACTED:
        return
    with _lock:
        _values[name] = value
        _values[f"{name}#{value}"] = value  # several values for one name (--api-key a b)


def forget(name: str, value: str) -> None:
    """Stop replacing a value registered under ``name`` (a test's made-up secret must not go on
    scrubbing whatever later text happens to contain it)."""
    with _lock:
        _values.pop(f"{name}#{value}", None)
        if _values.get(name) == value:
            del _values[name]


def register_candidate(flags: Mapping[str, object], env: Mapping[str, str]) -> None:
    for k, v in flags.items():
        if is_secret_flag(k):
            register(k, v)
    for k, v in env.items():
        if is_secret_name(k):
            register(k, v)


def known_value(name: str) -> str | None:
    with _lock:
        return _values.get(name)


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking variables, longest first (so substrings are replaced last)."""
    env = os.environ if env is None else env
    vals = {v for k, v in env.items() if is_secret_name(k) and v and len(v) >= MIN_VALUE_LEN}
    return sorted(vals, key=len, reverse=True)


def _known_values() -> list[str]:
    with _lock:
        vals = {v for v in _values.values() if len(v) >= MIN_VALUE_LEN}
    return sorted(vals, key=len, reverse=True)


_BEARER = re.compile(r"(\bBearer\s+)([A-Za-z0-9._~+/=-]{4,})", re.I)
_FLAG_VALUE = re.compile(r"(?<![\w-])(--[\w-]+)(=|\s+)(?!--)(\"[^\"]*\"|'[^']*'|[^\s,;'\"\]\)}]+)")
# NAME=VALUE as a shell or a log prints an environment: upper-case names only (a Python repr's
# `max_tokens=None` is not an environment variable), values of at least MIN_VALUE_LEN characters.
_ENV_VALUE = re.compile(r"(?<![\w])([A-Z_][A-Z0-9_]*)=([^\s'\",;)\]}]{4,})")


def _sub_flag(m: re.Match[str]) -> str:
    return f"{m.group(1)}{m.group(2)}{REDACTED}" if is_secret_flag(m.group(1)) else m.group(0)


def _sub_env(m: re.Match[str]) -> str:
    return f"{m.group(1)}={REDACTED}" if is_secret_name(m.group(1)) else m.group(0)


def scrub_text(text: str, extra: Iterable[str] = ()) -> str:
    """Text with every secret replaced: known values, Bearer tokens, `--secret-flag VALUE`."""
    if not text:
        return text
    vals = sorted(
        {*_known_values(), *(v for v in extra if v and len(v) >= MIN_VALUE_LEN)}, key=len, reverse=True
    )
    for v in vals:
        if v in text:
            text = text.replace(v, REDACTED)
    if "--" in text:
        text = _FLAG_VALUE.sub(_sub_flag, text)
    if "=" in text:
        text = _ENV_VALUE.sub(_sub_env, text)
    if " " in text and "bearer" in text.lower():  # (a plain find first: a server log is long)
        text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def scrub(obj: Any) -> Any:
    """A JSON-like object with secrets redacted by key name and by value (for any writer)."""
    if isinstance(obj, Mapping):
        return {
            k: (
                REDACTED
                if isinstance(k, str)
                and (is_secret_flag(k) or is_secret_name(k))
                and obj[k] not in (None, True, False)
                else scrub(v)
            )
            for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        items = redact_argv(list(obj)) if all(isinstance(x, str) for x in obj) else list(obj)
        return [scrub(x) for x in items]
    if isinstance(obj, str):
        return scrub_text(obj)
    return obj


class Redactor:
    """Replaces secrets in text; built once per trial from its environment (and knows every
    value registered in this process, read at call time)."""

    def __init__(self, env: Mapping[str, str] | None = None, extra: list[str] | None = None):
        self.values = secret_values(env) + [v for v in (extra or []) if v and len(v) >= MIN_VALUE_LEN]

    def __call__(self, text: str) -> str:
        return scrub_text(text, self.values)


def redact_key(key: str) -> str:
    """A configuration key (``--flag=value|env:NAME=value|...``, the journal's effective_key) with
    the value of every secret flag or variable replaced: the key is normalised (lower-cased),
    so the value no longer matches the registered secret and must go by name."""
    parts = []
    for part in key.split("|"):
        name, eq, _ = part.partition("=")
        bare = name[4:] if name.startswith("env:") else name
        secret = is_secret_name(bare) if name.startswith("env:") else is_secret_flag(name)
        parts.append(f"{name}={REDACTED}" if eq and secret else scrub_text(part))
    return "|".join(parts)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (REDACTED if is_secret_name(k) else v) for k, v in env.items()}


def redact_flags(flags: Mapping[str, object]) -> dict[str, object]:
    return {
        k: (REDACTED if is_secret_flag(k) and v not in (None, True, False) else v) for k, v in flags.items()
    }


def redact_argv(argv: list[str]) -> list[str]:
    out, hide = [], False
    for tok in argv:
        if hide and not tok.startswith("--"):
            out.append(REDACTED)
            continue
        hide = False
        name, eq, _ = tok.partition("=")
        if name.startswith("--") and is_secret_flag(name):
            if eq:
                out.append(f"{name}={REDACTED}")
            else:
                out.append(tok)
                hide = True  # every value up to the next flag (--api-key a b)
            continue
        out.append(tok)
    return out


_V = TypeVar("_V")


def _restored(name: str, v: _V) -> _V:
    """One value read back from disk, with the secret this process knows for its name. It keeps
    its kind: ``***`` becomes the known string, a redacted tuple the known tuple of strings (so a
    candidate's ``FlagValue`` stays one)."""
    if v == REDACTED:
        return cast(_V, known_value(name) or v)
    if isinstance(v, (list, tuple)) and REDACTED in v and known_value(name):
        vals = sorted({x for k, x in _values.items() if k.startswith(name + "#")})
        return cast(_V, tuple(vals)) if vals else v
    return v


def restore(flags: Mapping[str, _V], env: Mapping[str, str]) -> tuple[dict[str, _V], dict[str, str]]:
    """Flags and variables read back from disk (``***``) with the values this process knows."""
    back = _restored

    return ({k: back(k, v) for k, v in flags.items()}, {k: str(back(k, v)) for k, v in env.items()})


def write_text(path: Any, text: str, encoding: str = "utf-8") -> None:
    """The one way bringup writes a record or report: secrets replaced first, then written as a
    fresh file renamed over the name (bringup/guard/files.py: a link planted there is replaced,
    never written through; a reader never sees half a file)."""
    from bringup.guard import files

    files.write_text(path, scrub_text(text), atomic=True, encoding=encoding)


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}
