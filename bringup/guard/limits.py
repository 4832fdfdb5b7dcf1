"""Size limits on the files bringup reads whole (scenarios, knowledge data, model configs).

A 100 MB scenario once took 3 GB of memory and no answer in 300 s. Every file that is parsed
whole is first checked against a limit well above any real one (the largest shipped knowledge
file is 180 kB, the largest scenario 21 kB, a large model's config.json a few tens of kB), and
read as UTF-8 with one clear error for each way it can fail.
"""

from __future__ import annotations

import json
from pathlib import Path

SCENARIO_MAX = 2 << 20
KNOWLEDGE_MAX = 8 << 20
JSON_CONFIG_MAX = 16 << 20


class InputError(ValueError):
    """A file that cannot be read as asked: names the file and what is wrong with it."""


def read_text_limited(path: Path, limit: int, what: str = "file") -> str:
    """The file's text, or InputError naming the file: missing, a folder, too big, not UTF-8."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise InputError(f"{path}: is a folder, not a {what}")
        if size > limit:
            raise InputError(
                f"{path}: {size / 2**20:.1f} MB is over the {limit / 2**20:.0f} MB limit for a {what}; "
                f"is this the right file?"
            )
        with open(path, "rb") as f:
            data = f.read(limit + 1)  # a file that grows while read is still bounded
        if len(data) > limit:
            raise InputError(f"{path}: over the {limit / 2**20:.0f} MB limit for a {what}")
        return data.decode("utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason}); is this a {what}?") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None


def read_json_object(path: Path, what: str) -> dict:
    """A JSON object from a file (config.json, a shard index), or InputError naming the fault."""
    text = read_text_limited(path, JSON_CONFIG_MAX, what)
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise InputError(f"{path}: not valid JSON ({e}); the {what} is damaged") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data
