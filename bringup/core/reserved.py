"""Engine flags bringup sets itself (host, port, socket, model), refused in every
spelling and from every origin before a launch.

bringup launches each server on its own host and port and probes the model it launched by its own
name. A user's `--port=N` once passed a check that compared tokens with "--port": vLLM listened on
the user's port, bringup probed its own, and a working server was reported as a hang; `--model=X`
had another model validated. Round three found the same settings coming in through other doors: a
fix (`--fix port=...`, `--fix host=0.0.0.0`), a space file, `tune --config`, a unix socket (`--uds`:
vLLM then ignores host and port). So the list lives in data (`reserved:` in
bringup/data/engines.yaml, per engine, with its source), each flag's aliases come from the engines'
help captures (bringup/data/help/), and a name is read as the engine's argparse reads it: exact,
`--name=value`, a dest spelled with underscores (vLLM's parser takes `--served_model_name`), and a
unique prefix (argparse's allow_abbrev: `--po=N`).

Two layers: each origin checks what it brings with its own name in the message (`refuse`, or
`reserved_flag` for a message), and every `Candidate` checks its own flags when it is made
(`check_flags`), so nothing that becomes a launch (a lesson's fix, a tuning knob, a journal row)
goes around it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from bringup.core.datafiles import DATA, load_yaml
from bringup.help.spec import HelpSpec
from bringup.help.text import DATA_HELP, option_name_groups

_WHY = {
    "port": "give the port with bringup's own --port, not as an engine flag",
    "host": "bringup sets the host and port of every server it launches: leave the engine's --host out",
    "socket": "bringup reaches every server on its own host and port: a unix socket would leave that port "
    "unserved (a working server reported as a hang); leave it out",
    "model": "give the model with bringup's own --model, not as an engine flag",
}


class ReservedFlag(ValueError):
    """A flag bringup sets itself, given from somewhere (the origin): a usage error, exit 2."""

    def __init__(self, message: str, flag: str, origin: str):
        super().__init__(message)
        self.flag, self.origin = flag, origin


@dataclass(frozen=True)
class _Table:
    roles: dict[str, str]  # every option string that sets a reserved setting -> its role
    known: frozenset[str]  # every option string the engine's captured help lists


@lru_cache(maxsize=1)
def _engines_doc() -> dict:
    doc = load_yaml(DATA / "engines.yaml")
    return doc if isinstance(doc, dict) else {}


def _data_flags(engine: str | None) -> dict[str, str]:
    """flag -> role, from engines.yaml's `reserved:` (every engine's, when the engine is unknown)."""
    out: dict[str, str] = {}
    for name, info in _engines_doc().items():
        if engine is not None and engine in _engines_doc() and name != engine:
            continue
        flags = ((info or {}).get("reserved") or {}).get("flags") or {}
        out.update({str(k): str(v) for k, v in flags.items()})
    return out


@lru_cache(maxsize=8)
def _table(engine: str | None) -> _Table:
    """The reserved option strings of an engine: engines.yaml's flags and, from every help capture
    of it, each one's aliases (SGLang's `--model` is `--model-path`)."""
    roles = _data_flags(engine)
    known: set[str] = set()
    engines = [engine] if engine in _engines_doc() else list(_engines_doc())
    for eng in engines:
        for capture in sorted(DATA_HELP.glob(f"{eng}-*.txt")):
            for names in option_name_groups(capture.read_text(encoding="utf-8", errors="replace")):
                known.update(names)
                role = next((roles[n] for n in names if n in roles), None)
                if role is not None:
                    roles.update({n: role for n in names if n.startswith("-")})
    return _Table(roles, frozenset(known) | frozenset(roles))


def _spellings(name: str) -> list[str]:
    """The option strings argparse could take `name` for: itself and, for a long option spelled
    with underscores, its dashed form (vLLM's FlexibleArgumentParser turns `--a_b` into `--a-b`)."""
    dashed = "--" + name[2:].replace("_", "-") if name.startswith("--") else name
    return [name] if dashed == name else [name, dashed]


def role_of(
    name: str, engine: str | None, spec: HelpSpec | None = None, model_flag: str | None = None
) -> str | None:
    """The reserved setting an option string sets (host, port, socket, model), or None."""
    table = _table(engine)
    roles = (
        table.roles if not model_flag or model_flag in table.roles else {**table.roles, model_flag: "model"}
    )
    for n in _spellings(name):
        if n in roles:
            return roles[n]
        opt = spec.resolve(n) if spec is not None else None
        if opt is not None:
            return next((roles[a] for a in opt.all_names if a in roles), None)
        exact = n in table.known or (spec is not None and spec.get(n) is not None)
        if not exact and n.startswith("--") and len(n) > 2:
            # a prefix argparse would expand: refused whether it is unique (it means the reserved
            # flag) or ambiguous (the engine would reject it anyway)
            hit = next((roles[r] for r in sorted(roles) if r.startswith("--") and r.startswith(n)), None)
            if hit is not None:
                return hit
    return None


def _message(role: str, tok: str, origin: str | None) -> str:
    name, eq, _ = tok.partition("=")
    where = f" in {tok!r}" if eq else ""
    return f"{origin + ': ' if origin else ''}{_WHY[role]} ({name}{where})"


def reserved_flag(
    tokens: Iterable[str], spec: HelpSpec | None, model_flag: str | None, engine: str | None = None
) -> str | None:
    """The message for the first token that sets a reserved flag, or None. Tokens are flags as
    typed (`--port=1`, `--po`, `-p`) or flag names (a fix's, a lesson's); values are skipped."""
    for tok in tokens:
        if not isinstance(tok, str) or not tok.startswith("-") or tok in ("-", "--"):
            continue
        role = role_of(tok.partition("=")[0], engine, spec, model_flag)
        if role is not None:
            return _message(role, tok, None)
    return None


def refuse(
    tokens: Iterable[str],
    origin: str,
    engine: str | None,
    spec: HelpSpec | None = None,
    model_flag: str | None = None,
) -> None:
    """ReservedFlag naming `origin` (`--fix`, `space file X`, `tune --config`, `lessons L-...`) for
    the first token or flag name that sets a reserved setting; for any origin that brings flags."""
    for tok in tokens:
        if not isinstance(tok, str) or not tok.startswith("-") or tok in ("-", "--"):
            continue
        role = role_of(tok.partition("=")[0], engine, spec, model_flag)
        if role is not None:
            raise ReservedFlag(_message(role, tok, origin), tok.partition("=")[0], origin)


def check_flags(engine: str, flags: Iterable[str], origin: str) -> None:
    """The check every candidate passes when it is made (bringup.core.candidate): its flag names,
    by the engine's data alone (a candidate knows no help spec; its flags are canonical names)."""
    refuse(flags, origin, engine)
