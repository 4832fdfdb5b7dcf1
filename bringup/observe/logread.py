"""Read a server log of any size in bounded memory, keeping what the classifier needs.

`bringup explain` used to read the whole file (2.96 GB of memory for a 1 GB log, 520 MB for
50 MB of random bytes). The classifier only needs the lines that say something: the first
occurrence of each distinct line (numbers ignored, so a metrics line printed a million times
counts once), every line a fatal signature, a phase marker or an error word matches, and the
tail. The file is streamed in bounded reads; a line longer than `max_line` is cut; lines of
binary garbage are counted, not kept.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bringup.guard.safetext import is_binary, safe_line

_DIGITS = re.compile(r"\d+(\.\d+)?")
_NOTABLE = re.compile(
    r"(Error|Exception|error:|FAILED|Traceback|Assertion|assert|fatal|Killed|"
    r"out of memory|nan|Application startup complete|fired up|Starting vLLM|"
    r"non-default args|shutdown|Shutting down)",
    re.I,
)
_READ = 1 << 16  # one bounded read: a line is never held whole beyond this


@dataclass
class LogSelection:
    lines: list[str]
    total_lines: int = 0
    kept_lines: int = 0
    binary_lines: int = 0
    cut_lines: int = 0
    over_budget: int = 0  # distinct lines left out once the kept lines held max_kept_bytes
    notes: list[str] = field(default_factory=list)


_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def _raw_lines(path: Path, max_line: int):
    """Lines as bytes, each at most max_line bytes (the rest of a longer line is skipped)."""
    with open(path, "rb") as f:
        while True:
            raw = f.readline(_READ)
            if not raw:
                return
            cut = False
            if not raw.endswith(b"\n"):
                while True:  # skip the rest of an overlong line in bounded reads
                    more = f.readline(_READ)
                    if not more:
                        break
                    cut = True
                    if more.endswith(b"\n"):
                        break
            if len(raw) > max_line:
                raw, cut = raw[:max_line], True
            yield raw.rstrip(b"\r\n"), cut


@dataclass
class _Budget:
    left: int
    over: int = 0  # lines refused once the budget was spent

    def take(self, text: str) -> bool:
        if len(text) > self.left:
            self.over += 1
            return False
        self.left -= len(text)
        return True


def select_lines(
    path: Path,
    notable: Callable[[str], bool] | None = None,
    head: int = 400,
    max_distinct: int = 30000,
    max_notable: int = 20000,
    tail: int = 3000,
    max_line: int = 4000,
    repeats: int = 3,
    max_kept_bytes: int = 24 << 20,
) -> LogSelection:
    """The lines worth classifying, in file order, with memory bounded whatever the file."""
    check = notable or (lambda s: bool(_NOTABLE.search(s)))
    kept: dict[int, str] = {}
    counts: dict[int, int] = {}
    last: collections.deque[tuple[int, str]] = collections.deque(maxlen=tail)
    sel = LogSelection([])
    n_notable = 0
    budget = _Budget(max_kept_bytes)  # what the distinct and notable lines may hold (head and tail aside)
    i = -1
    for i, (raw, cut) in enumerate(_raw_lines(path, max_line)):
        text = raw.decode("utf-8", errors="replace")
        if cut:
            sel.cut_lines += 1
        if is_binary(text):
            sel.binary_lines += 1
            continue
        # Colour codes are formatting (vLLM colours its process tags): dropped, so the traceback
        # parser still sees the tags; every other escape sequence is escaped, never passed on.
        text = safe_line(_COLOUR.sub("", text), max_line)
        last.append((i, text))
        if i < head:
            kept[i] = text
            continue
        h = hash(_DIGITS.sub("0", text[:512]))
        c = counts.get(h, 0)
        if c >= repeats:
            continue
        if len(counts) < max_distinct * 4:
            counts[h] = c + 1
        distinct = len(kept) < max_distinct
        if (distinct or (n_notable < max_notable and check(text))) and budget.take(text):
            kept[i] = text
            n_notable += not distinct
    sel.total_lines = i + 1
    sel.over_budget = budget.over
    for j, text in last:
        kept[j] = text
    sel.lines = [kept[k] for k in sorted(kept)]
    sel.kept_lines = len(sel.lines)
    if sel.binary_lines:
        sel.notes.append(f"{sel.binary_lines} line(s) of binary data skipped")
    if sel.cut_lines:
        sel.notes.append(f"{sel.cut_lines} overlong line(s) cut to {max_line} bytes")
    if sel.over_budget:
        sel.notes.append(
            f"cap hit: {sel.over_budget} distinct line(s) left out once {max_kept_bytes >> 20} MiB were kept"
        )
    return sel
