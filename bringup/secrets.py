"""Keep secrets (tokens, keys, passwords) out of every log and report bringup writes."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

_SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL|_KEY$|^KEY$|AUTH)", re.I)
_SECRET_FLAGS = {"--api-key", "--hf-token", "--ssl-keyfile-password", "--admin-api-key"}
REDACTED = "***"


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking variables, longest first (so substrings are replaced last)."""
    env = os.environ if env is None else env
    vals = {v for k, v in env.items() if is_secret_name(k) and v and len(v) >= 4}
    return sorted(vals, key=len, reverse=True)


class Redactor:
    """Replaces known secret values in text; built once per trial from its environment."""

    def __init__(self, env: Mapping[str, str] | None = None, extra: list[str] | None = None):
        self.values = secret_values(env) + [v for v in (extra or []) if v and len(v) >= 4]

    def __call__(self, text: str) -> str:
        for v in self.values:
            if v in text:
                text = text.replace(v, REDACTED)
        return text


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (REDACTED if is_secret_name(k) else v) for k, v in env.items()}


def redact_flags(flags: Mapping[str, object]) -> dict[str, object]:
    return {k: (REDACTED if k in _SECRET_FLAGS else v) for k, v in flags.items()}


def redact_argv(argv: list[str]) -> list[str]:
    out, hide = [], False
    for tok in argv:
        if hide:
            out.append(REDACTED)
            hide = False
            continue
        name, eq, _ = tok.partition("=")
        if name in _SECRET_FLAGS:
            if eq:
                out.append(f"{name}={REDACTED}")
            else:
                out.append(tok)
                hide = True
            continue
        out.append(tok)
    return out
