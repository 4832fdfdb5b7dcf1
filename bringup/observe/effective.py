"""Read the *effective* configuration back from an engine's startup log.

Requested is not effective: engines override flags (vLLM CPU ignores FLASH_ATTN, SGLang forces
an fp8 KV cache for DSA models on Blackwell). Engines print what they really use as Python
reprs: SGLang ``server_args=ServerArgs(k=v, ...)`` (a dict literal ``server_args={...}`` in 0.5.23),
vLLM ``non-default args: {...}`` and ``Initializing a V1 LLM engine (...) with config: k=v, ...``. This module parses those
reprs tolerantly (values that are not literals, like ``torch.bfloat16``, stay strings).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from bringup.core.candidate import FlagValue
from bringup.guard import secrets
from bringup.help.spec import dest_of
from bringup.help.text import HelpSpec


def _unquoted(s: str, start: int = 0):
    """(index, char, depth) for each character outside quotes; depth counts the ([{< nesting
    around it (a closing bracket reports the depth it closes to)."""
    depth, quote, i = 0, None, start
    while i < len(s):
        c = s[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        else:
            if c in ")]}>":
                depth -= 1
            yield i, c, depth
            if c in "([{<":
                depth += 1
        i += 1


def _split_top(s: str, sep: str = ",") -> list[str]:
    """Split on sep outside brackets and quotes."""
    parts, last = [], 0
    for i, c, depth in _unquoted(s):
        if c == sep and depth == 0:
            parts.append(s[last:i])
            last = i + 1
    if s[last:].strip():
        parts.append(s[last:])
    return parts


def _value(text: str) -> Any:
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def parse_kv_repr(body: str) -> dict[str, Any]:
    """'a=1, b='x', c=torch.bfloat16' -> {'a': 1, 'b': 'x', 'c': 'torch.bfloat16'}."""
    out: dict[str, Any] = {}
    for part in _split_top(body):
        k, eq, v = part.partition("=")
        k = k.strip()
        if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            out[k] = _value(v)
    return out


def _balanced(s: str, start: int) -> str | None:
    """The text between the bracket at s[start] and its match (quote-aware)."""
    for i, c, depth in _unquoted(s, start):
        if i > start and c in ")]}>" and depth == 0:
            return s[start + 1 : i]
    return None


def parse_server_args(line: str) -> dict[str, Any] | None:
    """SGLang: ``server_args=ServerArgs(...)`` (0.5.10 and before), or ``server_args={...}``, a
    dict literal of the resolved arguments (0.5.23: ``entrypoints/engine.py`` logs
    ``server_args.resolved_dict()``; seen on this project's machines)."""
    i = line.find("ServerArgs(")
    if i >= 0:
        body = _balanced(line, i + len("ServerArgs"))
        return parse_kv_repr(body) if body is not None else None
    i = line.find("server_args={")
    if i < 0:
        return None
    j = i + len("server_args=")
    body = _balanced(line, j)
    if body is None:
        return None
    v = _value("{" + body + "}")
    if isinstance(v, dict):
        return {str(k): x for k, x in v.items()}
    return _split_dict(body)


def parse_non_default_args(line: str) -> dict[str, Any] | None:
    """vLLM: ``non-default args: {'port': 8000, ...}``."""
    i = line.find("non-default args:")
    if i < 0:
        return None
    j = line.find("{", i)
    if j < 0:
        return None
    body = _balanced(line, j)
    if body is None:
        return None
    v = _value("{" + body + "}")
    if isinstance(v, dict):
        return v
    return _split_dict(body)


def _split_dict(body: str) -> dict[str, Any]:
    """A dict repr holding non-literal values (enums, ``torch.bfloat16``): its key: value pairs,
    each value a literal where it is one, else its text."""
    out: dict[str, Any] = {}
    for part in _split_top(body):
        k, _, val = part.partition(":")
        out[str(_value(k))] = _value(val)
    return out


def parse_engine_config(line: str) -> dict[str, Any] | None:
    """vLLM: ``Initializing a V1 LLM engine (v0.32.0) with config: k=v, ...``."""
    m = re.search(r"with config: (.*)$", line)
    if not m or "LLM engine" not in line:
        return None
    return parse_kv_repr(m.group(1))


def config_dump(line: str) -> bool:
    """Whether a line is the engine's dump of its whole configuration: it names every setting, so
    as evidence of what went wrong it points at none."""
    return any(p(line) for p in (parse_engine_config, parse_non_default_args, parse_server_args))


_INTEGER = re.compile(r"[+-]?\d+")


def canonical_number(v: Any) -> str | None:
    """A number as the engine's CLI takes it back: an integer exactly ('4096', never '4096.0', which
    an int flag refuses), any other value in its shortest form ('0.9' for 0.90); None for text that
    is no number. Stop reasons, suspects and reports show the values `normalise` keeps, so a line
    can be pasted back into the engine's command (issue 39: `--max-model-len=4096.0` for a flag
    given as 4096)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        t = v.strip()
        if _INTEGER.fullmatch(t):
            return str(int(t))
        try:
            v = float(t)
        except ValueError:
            return None
    if not isinstance(v, float):
        return None
    return str(int(v)) if v.is_integer() and abs(v) < 2**53 else repr(v)


def normalise(v: Any) -> str:
    """Compare values across CLI strings and Python reprs: '0.88' == 0.88, '4096' == 4096.0,
    True == 'true'. Numbers keep the engine's canonical spelling (`canonical_number`)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "none"
    if isinstance(v, (tuple, list)):
        return ",".join(normalise(x) for x in v)
    if isinstance(v, dict):
        # a JSON-valued setting as the user wrote it and as the engine prints it back (a Python
        # dict repr, other quotes, other key order) is one value, not an override
        return (
            "{"
            + ",".join(
                f"{normalise(k)}:{normalise(x)}" for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))
            )
            + "}"
        )
    if (n := canonical_number(v)) is not None:
        return n
    s = str(v).strip()
    if s.startswith("{") and s.endswith("}"):
        parsed = _mapping(s)
        if parsed is not None:
            return normalise(parsed)
    low = s.lower()
    if low in ("true", "false", "none"):
        return low
    low = low.removeprefix("torch.")
    return _DTYPE_SYNONYMS.get(low, low)


def same_value(requested: Any, effective: Any) -> bool:
    """Whether the engine used what was asked: the same value once normalised, or, for a setting
    whose value is a mapping (a JSON flag), every key asked for holds its value in what the engine
    printed (vLLM prints ``--kv-transfer-config '{"kv_connector": "X"}'`` back as
    ``KVTransferConfig(kv_connector='X', engine_id=..., ...)``, its defaults filled in: no override)."""
    if normalise(requested) == normalise(effective):
        return True
    if isinstance(effective, str) and effective.strip()[:1] in ("[", "("):
        # a list printed as its repr ("['a:B']" for --logits-processors a:B)
        parsed = _value(effective)
        if isinstance(parsed, (list, tuple)) and normalise(requested) == normalise(parsed):
            return True
    asked, used = _as_mapping(requested), _as_mapping(effective)
    if not asked or used is None:
        return False
    return all(k in used and normalise(v) == normalise(used[k]) for k, v in asked.items())


def _as_mapping(v: Any) -> dict | None:
    """A dict, a JSON object or dict literal, or a ``Name(k=v, ...)`` repr, as a dict; else None."""
    if isinstance(v, dict):
        return v
    if not isinstance(v, str):
        return None
    text = v.strip()
    if text.startswith("{"):
        return _mapping(text)
    m = re.match(r"^[A-Za-z_]\w*\(", text)
    if m and text.endswith(")"):
        body = _balanced(text, m.end() - 1)
        return parse_kv_repr(body) if body is not None else None
    return None


# An enum member as Python prints it inside a dict ("<CompilationMode.VLLM_COMPILE: 3>"): vLLM's
# printed compilation_config holds some, which no literal parser reads. Read as the member's name
# ("VLLM_COMPILE"), which is what a user's JSON gives (-cc '{"cudagraph_mode": "NONE"}').
_ENUM_REPR = re.compile(r"<(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*): [^<>]*>")


def _mapping(text: str) -> dict | None:
    """A JSON object or a Python dict literal, parsed (an enum member read as its name); None
    when the text is neither."""
    from bringup.observe.links import structured

    out = structured(text.strip())
    if out is None and "<" in text:
        out = structured(_ENUM_REPR.sub(lambda m: repr(m.group(1)), text.strip()))
    return out if isinstance(out, dict) else None


# One dtype, two names: PyTorch's own aliases (docs.pytorch.org tensor_attributes: "torch.float16 or
# torch.half", "torch.float32 or torch.float"), which vLLM's --dtype takes as choices ("'half' for
# FP16 ... 'float16' is the same as 'half'", "'float' is shorthand for FP32") and its config line
# prints by the canonical name (dtype=torch.float16 when half was asked): not an override.
_DTYPE_SYNONYMS = {"half": "float16", "float": "float32"}


@dataclass
class Override:
    flag: str
    requested: FlagValue | None  # None: not requested (the engine chose it by default)
    effective: Any
    evidence: str = ""

    def to_json(self) -> dict:
        return {
            "flag": self.flag,
            "requested": self.requested,
            "effective": self.effective,
            "evidence": self.evidence,
        }


@dataclass
class EffectiveConfig:
    values: dict[str, Any] = field(default_factory=dict)  # by argparse dest
    source_lines: list[str] = field(default_factory=list)
    overrides: list[Override] = field(default_factory=list)

    def get(self, dest: str, default: Any = None) -> Any:
        return self.values.get(dest, default)


def find_overrides(
    requested: dict[str, FlagValue], values: dict[str, Any], spec: HelpSpec | None, evidence: dict[str, str]
) -> list[Override]:
    """Flags whose effective value differs from what was asked."""
    out: list[Override] = []
    for flag, req in requested.items():
        if secrets.is_secret_flag(flag):
            continue  # the log bringup read holds *** for it: a comparison would be a false override
        opt = spec.get(flag) if spec else None
        dest = dest_of(flag, opt)
        if dest not in values:
            continue
        eff = values[dest]
        if not same_value(req, eff):
            out.append(Override(flag, req, eff, evidence.get(dest, "")))
    return out
