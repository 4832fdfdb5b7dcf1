"""Engine flags bringup sets itself (model, host, port), refused in every spelling before a launch.

A user's `--port=N` passed the old check (a token compared with "--port"): vLLM listened on the
user's port, bringup probed its own, and a working server was reported as a hang; `--model=X`
had another model validated. argparse reads `--port N`, `--port=N` and any unique prefix
(`--po=N` where nothing else starts so, allow_abbrev) the same way, so this reads a token as the
engine's parser would: through its --help (`HelpSpec.resolve`), and without one by its name.
"""

from __future__ import annotations

from collections.abc import Iterable

from bringup.help.spec import HelpSpec

_WHY = {
    "--port": "give the port with bringup's own --port, not as an engine flag",
    "--host": "bringup sets the host and port of every server it launches: leave the engine's --host out",
    "model": "give the model with bringup's own --model, not as an engine flag",
}


def _canonical(name: str, spec: HelpSpec | None) -> set[str]:
    """Every option string the engine would take `name` for (its aliases too)."""
    opt = spec.resolve(name) if spec else None
    if opt is None:
        return {name}
    return {opt.name, *getattr(opt, "all_names", [])}


def reserved_flag(tokens: Iterable[str], spec: HelpSpec | None, model_flag: str | None) -> str | None:
    """The message for the first token that sets a reserved flag, or None."""
    model_names = {"--model", "--model-path", *([model_flag] if model_flag else [])}
    reserved = {"--port": "--port", "--host": "--host", **{m: "model" for m in model_names}}
    for tok in tokens:
        if not tok.startswith("--"):
            continue
        name = tok.partition("=")[0]
        for n in _canonical(name, spec):
            if n in reserved:
                return (
                    f"{_WHY[reserved[n]]} ({tok.partition('=')[0]}{' in ' + repr(tok) if '=' in tok else ''})"
                )
    return None
