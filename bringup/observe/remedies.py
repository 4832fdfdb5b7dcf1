"""The engine's own remedies: the flags and values its failure lines advise, in order.

Engines often print what to do beneath a failure: SGLang's "Possible suggestions: 1. change to
tc_piecewise by --cuda-graph-backend-prefill=tc_piecewise 2. disable the prefill CUDA graph by
--cuda-graph-backend-prefill=disabled", vLLM's "Try increasing `gpu_memory_utilization` or
decreasing `max_model_len`", "set '--distributed-executor-backend ray'". Those are the cheapest
candidates a search has: the engine names the factor and often its value. This module reads them
generically (a `--flag=value`, `--flag value`, a backticked option name, a `VAR=value` in a line
that advises) from the failure's part of the log, leaving out the engine's dump of its whole
configuration, the source lines under traceback frames and CUDA's advice for debugging.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pydantic import BaseModel

from bringup.observe.tracebacks import strip_prefix


class Remedy(BaseModel):
    """One advised change: a flag (or env:NAME) and the value named for it (None: none named)."""

    flag: str
    value: str | None = None
    # "set" (use this value), "raise" / "lower" (move it that way), "remove" (drop the flag)
    action: str = "set"
    line: str = ""  # the advising line, without log decorations
    conditional: bool = False  # advice under "If this is intentional and you are using: ..." (weaker)


_ADVICE = re.compile(
    r"(?i)\b(try|please|use|by using|set|change|switch|disable|enable|consider|increas\w*|decreas\w*|reduc\w*"
    r"|lower|rais\w*|pass|add|specify|remove|instead)\b"
)
# A line that opens with "Using" reports what the engine chose ("Using KV cache dtype:
# torch.bfloat16", "Using FLASH_ATTN backend"): a status line of every launch, advice for none.
# (Bare "using" was an advice word until 2026-12-06: SGLang's KV-dtype line then read as the
# engine advising --kv-cache-dtype under a watchdog timeout that named nothing.)
_ADVICE_HEADER = re.compile(
    r"(?i)^\s*(possible (solutions|suggestions|fixes)|suggestions?|solutions?|to fix\b|workarounds?)"
)
_ITEM = re.compile(r"^\s*(\d+[.)]|[-*•])\s+")
# Not a remedy for the failure: CUDA's and the engines' advice for debugging, where to report.
_NOT_REMEDY = re.compile(
    r"(?i)(debug|TORCH_USE_CUDA_DSA|asynchronously reported|open an issue|pip install|ulimit"
    # What the engine chose by itself, and how to choose otherwise or quieten the note: lines a
    # launch that serves prints too, so advice for no failure (each seen in real logs,
    # tests/data/logs): SGLang's "Attention backend not specified. Use fa3 backend by default.",
    # vLLM's "Detected the chat template content format to be 'string'. You can set
    # `--chat-template-content-format` to override this.", "Resolved `--runner auto` to `--runner
    # pooling`. Pass the value explicitly to silence this message.", "Model Runner V2 requires
    # Triton; using the V1 model runner instead.", "To silence this warning, specify
    # disable_custom_all_reduce=True explicitly."
    r"|\bby default\.?\s*$|\bto (?:override|silence|suppress) (?:this|these|the)\b|[;,]\s*using\b.*\binstead\b)"
)
_PYDANTIC_TAIL = re.compile(r"\s*\[type=[^\]]*\]?.*$")  # pydantic's dump of the input after its message
_FRAME_LINE = re.compile(r'^\s+File "[^"]+", line \d+')
_FLAG = re.compile(
    r"(?<![\w-])(--[a-z0-9][a-z0-9-]*[a-z0-9])(?:=([^\s'\"`,;)]+)|[ \t]+(['\"]?)([^\s'\"`,;()]+)\3)?"
)
_BACKTICKED = re.compile(r"`([A-Za-z_][\w.-]*)(?:=([^`\s]+))?`")
_ENV_SET = re.compile(r"(?<![\w-])([A-Z][A-Z0-9]*_[A-Z0-9_]+)=([^\s'\"`,;)]+)")
_EXAMPLE = re.compile(r"\(e\.g\.,? ([^\s,)]+)")
_STOP = {
    "to",
    "or",
    "and",
    "if",
    "for",
    "when",
    "with",
    "the",
    "a",
    "an",
    "instead",
    "flag",
    "option",
    "argument",
    "in",
    "on",
    "by",
    "of",
    "is",
    "as",
    "appropriately",
    "not",
    "value",
    "values",
    "e.g.",
    "eg",
    "which",
    "that",
    "this",
    "it",
    "at",
    "be",
    "may",
    "can",
    "will",
    "(not",
    "from",
    "so",
}


def _direction(text: str) -> str | None:
    t = text.lower()
    if re.search(r"smaller|lower|decreas|reduc|less\b|fewer", t):
        return "lower"
    if re.search(r"larger|higher|increas|rais|bigger|more\b|greater", t):
        return "raise"
    return None


@lru_cache(maxsize=8)
def _options(engine: str | None) -> dict[str, bool]:
    """--flag -> whether it takes a value, from the engine's bundled help (empty: no help known)."""
    from bringup.help.text import DATA_HELP, parse_help

    out: dict[str, bool] = {}
    if engine:
        for p in sorted(DATA_HELP.glob(f"{engine}-*.txt")):
            for o in parse_help(p.read_text()).options:
                takes = o.metavar is not None or bool(o.choices)
                for n in [o.name, *[a for a in o.aliases if a.startswith("--")]]:
                    out[n] = out.get(n, False) or takes
    return out


def _flag_remedies(text: str, opts: dict[str, bool]) -> list[tuple[int, Remedy]]:
    out: list[tuple[int, Remedy]] = []
    for m in _FLAG.finditer(text):
        flag, value = m.group(1), m.group(2) or m.group(4)
        if value is not None:
            value = value.rstrip(".")
        if value is not None and (value.lower() in _STOP or value.startswith("-") or not value):
            value = None
        if value is not None and opts and flag in opts and not opts[flag]:
            value = None  # a switch: the next word is prose
        before, after = text[: m.start()], text[m.end() :]
        action = "set"
        if re.search(r"(?i)\b(not using|without|remove|drop)\s*['\"`]?$", before):
            action = "remove"
        elif value is None:
            action = _direction(after[:60] + " " + before[-40:]) or "set"
            ex = _EXAMPLE.search(after[:80])
            if ex and action != "set":
                value = ex.group(1).rstrip(".")
        out.append((m.start(), Remedy(flag=flag, value=value, action=action)))
    return out


def _named_remedies(text: str, opts: dict[str, bool]) -> list[tuple[int, Remedy]]:
    """Backticked option names (`gpu_memory_utilization`) and VAR=value settings."""
    out: list[tuple[int, Remedy]] = []
    for m in _BACKTICKED.finditer(text):
        name, value = m.group(1), m.group(2)
        if re.fullmatch(r"[A-Z][A-Z0-9]*_[A-Z0-9_]+", name):
            out.append((m.start(), Remedy(flag="env:" + name, value=value)))
            continue
        flag = "--" + name.replace("_", "-")
        if opts and flag not in opts:
            continue  # a backticked word that is no option of this engine
        action = _direction(text[max(0, m.start() - 30) : m.start()]) or "set"
        out.append((m.start(), Remedy(flag=flag if opts else name, value=value, action=action)))
    for m in _ENV_SET.finditer(text):
        if not any(r.flag == "env:" + m.group(1) for _, r in out):
            out.append((m.start(), Remedy(flag="env:" + m.group(1), value=m.group(2).rstrip("."))))
    return out


def _word_remedies(text: str, opts: dict[str, bool]) -> list[tuple[int, Remedy]]:
    """Options spelled in words in an advising line: "Decrease GPU memory utilization"."""
    out: list[tuple[int, Remedy]] = []
    for flag in opts:
        words = flag[2:].split("-")
        if len(words) < 2:
            continue
        m = re.search(r"(?<![\w-])" + r"[ _]".join(map(re.escape, words)) + r"(?![\w-])", text, re.I)
        if m:
            action = _direction(text[max(0, m.start() - 30) : m.start()]) or "set"
            out.append((m.start(), Remedy(flag=flag, action=action)))
    return out


# Advice for another situation than the failure's: "If this is intentional and you are using: - ray,
# set '--distributed-executor-backend ray'" (vLLM 0.24.0's world-size check, seen on the H200, where
# the machine simply had fewer GPUs than asked). What follows such a clause, on its line and in the
# list under it, is conditional: worth a look, not the way out.
_CONDITIONAL = re.compile(
    r"(?i)\bif (this is intentional|(?:you|they) (?:are|were) using|you (?:want|need|intend|have|really)|you know"
    # advice for another kind of failure than the one at hand ("3. if it is an OOM problem, set
    # --mem-fraction-static to a smaller value": SGLang's prefill-graph hint under an illegal
    # memory access)
    r"|(?:it|this) is an? [\w-]+ (?:problem|issue|error))\b"
)


# The one kind of failure a conditional clause names that the classifier can check: an
# out-of-memory ("3. if it is an OOM problem, set --mem-fraction-static ...", SGLang's graph-capture
# list under any capture error). Advice under it, beneath a failure of another class, is a listing.
_FOR_MEMORY = re.compile(r"(?i)\bif (?:it|this) is an? (?:oom|out[- ]of[- ]memory|memory)\b")


def advice_for_memory(line: str) -> bool:
    """The advising line's condition is an out-of-memory ("if it is an OOM problem, ...")."""
    return bool(_FOR_MEMORY.search(line))


def under_condition(lines: list[str]) -> list[bool]:
    """For each line, whether it sits under a conditional clause (_CONDITIONAL): the clause's own
    line from the clause on, and the list items or continuation lines after it, up to a blank line."""
    out: list[bool] = []
    active = False
    for raw in lines:
        text = strip_prefix(raw)[0]
        if not text.strip():
            active = False
        elif _CONDITIONAL.search(text):
            active = True
        elif active and not (_ITEM.match(text) or text.startswith((" ", "\t"))):
            active = False
        out.append(active)
    return out


def conditional_part(text: str) -> bool:
    """Whether a line's advice comes after a conditional clause on the line itself."""
    return bool(_CONDITIONAL.search(text))


_USAGE = re.compile(r"^\s*(usage:|\[-{1,2}[\w-]+[^\]]*\](\s+\[-{1,2}[\w-]+[^\]]*\])*\s*$)")


_OPTION_NAME = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*|`[^`]*`")


def prose(text: str) -> str:
    """The line without the option names it spells: an advice word inside one is no advice
    ("ValueError: --enable-lora requires --max-loras" advises nothing; "--enable-torch-compile"
    holds no "enable")."""
    return _OPTION_NAME.sub(" ", text)


def usage_line(text: str) -> bool:
    """argparse's usage block ("usage: api_server.py [-h] ...", "[--enable-x | --no-enable-x]"):
    every option the engine has, advice for none."""
    return bool(_USAGE.match(text))


def advising_lines(lines: list[str]) -> list[str]:
    """The lines that advise a change: an advice word, or an item of a "Possible solutions:" list."""
    from bringup.observe.effective import config_dump

    out: list[str] = []
    in_list = False
    prev_frame = False
    for raw in lines:
        text = strip_prefix(raw)[0]
        frame = bool(_FRAME_LINE.match(text))
        source = prev_frame and text.startswith((" ", "\t"))  # the code printed under a frame
        prev_frame = frame
        if not text.strip():
            in_list = False
            continue
        if _ADVICE_HEADER.match(text):
            in_list = True
            continue
        if frame or source or config_dump(raw) or _NOT_REMEDY.search(text) or usage_line(text):
            continue
        if (in_list and _ITEM.match(text)) or _ADVICE.search(prose(text)):
            out.append(_PYDANTIC_TAIL.sub("", text).strip())
        elif in_list and not _ITEM.match(text):
            in_list = False
    return out


def find_remedies(lines: list[str], engine: str | None) -> list[Remedy]:
    """The (flag, value) pairs the engine advises in these lines, in the order it printed them."""
    opts = _options(engine)
    out: list[Remedy] = []
    seen: set[tuple[str, str | None, str]] = set()
    cond = {strip_prefix(raw)[0].strip() for raw, c in zip(lines, under_condition(lines), strict=True) if c}
    for text in advising_lines(lines):
        found = _flag_remedies(text, opts) + _named_remedies(text, opts)
        if not found:
            found = _word_remedies(text, opts)
        for _, r in sorted(found, key=lambda x: x[0]):
            key = (r.flag, r.value, r.action)
            if key in seen:
                continue
            seen.add(key)
            conditional = text in cond or any(text.startswith(c) or c.startswith(text) for c in cond)
            out.append(r.model_copy(update={"line": text[:300], "conditional": conditional}))
    return out
