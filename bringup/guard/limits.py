"""Size limits on the files bringup reads whole (scenarios, knowledge data, model configs).

A 100 MB scenario once took 3 GB of memory and no answer in 300 s. Every file that is parsed
whole is first checked against a limit well above any real one (the largest shipped knowledge
file is 180 kB, the largest scenario 21 kB, a large model's config.json a few tens of kB), and
read as UTF-8 with one clear error for each way it can fail.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bringup.guard import files

SCENARIO_MAX = 2 << 20
KNOWLEDGE_MAX = 8 << 20
JSON_CONFIG_MAX = 16 << 20


MAX_DEPTH = 100  # nesting of a JSON or YAML value (a real config.json nests 3-4 deep, a scenario 6)


class InputError(ValueError):
    """A file that cannot be read as asked: names the file and what is wrong with it."""


def read_text_limited(path: Path, limit: int, what: str = "file") -> str:
    """The file's text, or InputError naming the file: missing, not a regular file (a FIFO, a
    device or a folder is refused at once: bringup/guard/files.py), too big, not UTF-8."""
    path = Path(path)
    try:
        return files.read_bytes(path, limit, what).decode("utf-8")
    except files.UnsafeFile as e:
        raise InputError(str(e)) from None
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason}); is this a {what}?") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None


# What a quoted string or a comment holds is no nesting: left out before brackets are counted.
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_YAML_SKIP = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\']|\'\')*\'|(?:^|(?<=\s))#[^\n]*', re.S | re.M)
_BRACKETS = re.compile(r"[^\[\]{}]+")


def nesting(text: str, yaml: bool = False, cap: int | None = None) -> int:
    """How deep brackets nest in a JSON (or flow-style YAML) text, outside strings and comments,
    without parsing it: a parser recurses once per level, and 100,000 levels of `[` in 100 kB end
    in a RecursionError (or worse) before any limit could be checked on the value. With `cap`, only
    whether it passes `cap` is exact (a number above it, or at most it): the count stops there, so a
    100,000-deep text is read to its 101st bracket."""
    bare = _BRACKETS.sub("", (_YAML_SKIP if yaml else _JSON_STRING).sub("", text))
    if cap is not None and bare.count("[") + bare.count("{") <= cap:
        return 0  # fewer opening brackets than the cap: it cannot nest deeper
    depth = deepest = 0
    for c in bare:
        depth = depth + 1 if c in "[{" else max(depth - 1, 0)
        if depth > deepest:
            deepest = depth
            if cap is not None and deepest > cap:
                break
    return deepest


def check_nesting(text: str, where: str, what: str, yaml: bool = False, limit: int = MAX_DEPTH) -> None:
    """InputError when the text nests deeper than `limit` (checked before it is parsed)."""
    if nesting(text, yaml, cap=limit) > limit:
        raise InputError(
            f"{where}: values nested more than {limit} deep, over the limit for a {what}; is this the right file?"
        )


def check_depth(obj: Any, where: str, what: str, limit: int = MAX_DEPTH) -> None:
    """InputError when a parsed value nests deeper than `limit` (YAML's block style nests by
    indentation, which `nesting` does not count) or refers to itself. Each container is visited
    once, by identity, without recursion: a YAML alias bomb (387 million references to a few
    lists) is nine lists here, not 387 million visits."""
    height: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(obj, False)]
    while stack:
        v, done = stack.pop()
        if not isinstance(v, dict | list | tuple):
            continue
        kids = list(v.values()) if isinstance(v, dict) else list(v)
        if done:
            on_path.discard(id(v))
            height[id(v)] = h = 1 + max((height.get(id(k), 0) for k in kids), default=0)
            if h > limit:
                raise InputError(
                    f"{where}: values nested more than {limit} deep, over the limit for a {what}"
                )
            continue
        if id(v) in height:
            continue
        if id(v) in on_path:
            raise InputError(
                f"{where}: a value that contains itself (a YAML alias to its own parent) in a {what}"
            )
        on_path.add(id(v))
        stack.append((v, True))
        stack.extend((k, False) for k in kids)


def loads_json(text: str, where: str, what: str, limit: int = MAX_DEPTH) -> Any:
    """A JSON value, its nesting bounded (InputError), or json's own ValueError for bad JSON."""
    check_nesting(text, where, what, limit=limit)
    return json.loads(text)


def read_json_object(path: Path, what: str) -> dict:
    """A JSON object from a file (config.json, a shard index), or InputError naming the fault."""
    text = read_text_limited(path, JSON_CONFIG_MAX, what)
    try:
        data = loads_json(text, str(path), what)
    except (json.JSONDecodeError, RecursionError) as e:
        raise InputError(f"{path}: not valid JSON ({e}); the {what} is damaged") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data
