"""Files of lessons (bringup/knowledge/learned.py): read with every refusal named, written, merged.

A team keeps its lessons in a folder under git; `bringup run --lessons` reads what is there and
must go on without whatever it cannot trust: a file that is not a regular file (a FIFO would block
the read forever, a symbolic link may point anywhere), one too big for a file of lessons, damaged
YAML, an entry with an unknown field, a scope no machine can have, a fix that sets a flag bringup
sets itself (host, port, model: bringup/core/reserved.py) or holds a secret. Each refusal names the
file and the entry (`lessons[3] (L-...)`), and the other entries of the file are kept.

Merging two machines' files never resolves a disagreement by overwriting: the same lesson with the
same verdict is one entry (the second machine joins its `confirmed`); copies that disagree (one
machine saw the other's fix fail the same way) are both kept, each with a `conflict` that names the
other; two fixes for one failure in each other's reach are both kept and said to disagree.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from bringup.core.datafiles import describe_validation
from bringup.core.reserved import reserved_flag
from bringup.guard.secrets import is_secret_flag, is_secret_name
from bringup.knowledge.learned import Lesson, reach

LESSONS_MAX = 4 << 20  # a lesson is about 1 kB: 4 MB is thousands of them
MAX_FILES = 2000  # in one folder, all levels
SUFFIXES = (".yaml", ".yml")
SCHEMA = 1
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TOP = {"schema", "lessons"}


@dataclass
class Loaded:
    """What a set of lesson files gave: the lessons (each with where it was read) and the refusals."""

    lessons: list[tuple[Lesson, str]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def add(self, other: Loaded) -> None:
        self.lessons += other.lessons
        self.refused += other.refused


def lesson_files(path: Path) -> tuple[list[Path], list[str]]:
    """The files a --lessons path names: the file itself, or every *.yaml / *.yml below a folder
    (hidden folders such as .git left out, symbolic links not followed); and what was refused."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return [], [f"{path}: cannot read: {e.strerror or e}"]
    if stat.S_ISLNK(st.st_mode):
        return [], [
            f"{path}: a symbolic link; lessons are read only from regular files and folders (copy it)"
        ]
    if not stat.S_ISDIR(st.st_mode):
        return [path], []
    files: list[Path] = []
    refused: list[str] = []
    for dirpath, dirnames, filenames in os.walk(path):  # os.walk does not follow links to folders
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(SUFFIXES):
                files.append(Path(dirpath) / name)
        if len(files) > MAX_FILES:
            refused.append(f"{path}: over {MAX_FILES} lesson files; only the first {MAX_FILES} were read")
            return files[:MAX_FILES], refused
    return files, refused


def read_file_text(path: Path) -> str:
    """A lesson file's text. Never follows a symbolic link nor waits on a FIFO or a device: only a
    regular file of at most LESSONS_MAX bytes is read (OSError or ValueError with the reason)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file (a FIFO, a device or a socket): lessons are read from files")
        if st.st_size > LESSONS_MAX:
            raise ValueError(
                f"{st.st_size / 2**20:.0f} MB is over the {LESSONS_MAX >> 20} MB limit for a file of lessons"
            )
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            data = f.read(LESSONS_MAX + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > LESSONS_MAX:
        raise ValueError(f"over the {LESSONS_MAX >> 20} MB limit for a file of lessons")
    return data.decode("utf-8")


def _why_unreadable(e: BaseException) -> str:
    if isinstance(e, OSError) and e.errno == errno.ELOOP:
        return "a symbolic link; lessons are read only from regular files (copy it)"
    if isinstance(e, OSError):
        return f"cannot read: {e.strerror or e}"
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 text (byte {e.start}): is this a file of lessons?"
    return str(e)


def fix_problem(lesson: Lesson) -> str | None:
    """Why a lesson's fix cannot be used anywhere: it sets a flag bringup sets itself, or a secret."""
    if why := reserved_flag([c.flag for c in lesson.fix if c.flag.startswith("--")], None, None):
        return f"its fix sets a flag bringup sets itself: {why}"
    for c in lesson.fix:
        name = c.flag[4:] if c.flag.startswith("env:") else None
        if (name is not None and is_secret_name(name)) or (name is None and is_secret_flag(c.flag)):
            return f"its fix sets {c.flag}, which holds a secret: a lesson never carries one"
        for v in c.after if isinstance(c.after, list) else [c.after]:
            if isinstance(v, str) and (v.startswith(("/", "~")) or v[1:3] == ":\\"):
                return f"its fix sets {c.flag} to a path of the machine it came from ({v[:80]})"
    return None


def parse_lessons(text: str, where: str) -> Loaded:
    """The lessons of one file's text, each entry validated on its own."""
    out = Loaded()
    try:
        doc = yaml.load(text, Loader=_LOADER)
    except (yaml.YAMLError, RecursionError) as e:
        out.refused.append(f"{where}: not valid YAML: {str(e).splitlines()[0] if str(e) else e}")
        return out
    if doc is None:
        return out
    if not isinstance(doc, dict) or not isinstance(doc.get("lessons"), list):
        out.refused.append(
            f"{where}: expected a top-level 'lessons:' list (`bringup lessons export` writes one)"
        )
        return out
    unknown = sorted(set(doc) - _TOP)
    if unknown:
        out.refused.append(f"{where}: unknown top-level field(s) {', '.join(map(str, unknown))}")
        return out
    for i, raw in enumerate(doc["lessons"]):
        entry = f"lessons[{i}]" + (f" ({raw.get('id')})" if isinstance(raw, dict) and raw.get("id") else "")
        try:
            lesson = Lesson.model_validate(raw)
        except ValidationError as e:
            out.refused.append(describe_validation(Path(where), entry, e))
            continue
        if why := fix_problem(lesson):
            out.refused.append(f"{where}: {entry}: {why}")
            continue
        out.lessons.append((lesson, f"{where}: {entry}"))
    return out


def read_lessons(paths: list[Path]) -> Loaded:
    """Every lesson under the given files and folders; what could not be used, each with its reason."""
    out = Loaded()
    for p in paths:
        files, refused = lesson_files(Path(p))
        out.refused += refused
        for f in files:
            try:
                text = read_file_text(f)
            except (OSError, ValueError) as e:
                out.refused.append(f"{f}: {_why_unreadable(e)}")
                continue
            out.add(parse_lessons(text, str(f)))
    return out


# -- writing ----------------------------------------------------------------------------------------
HEADER = (
    "# Lessons bringup learned: a failure, the fix that cured it and the scope it\n"
    "# holds in, each with its source. Read by `bringup run --lessons PATH`; `bringup lessons list`.\n"
)


def as_data(lessons: list[Lesson]) -> dict[str, Any]:
    """The file's data: empty lists (no confirmation, no evidence against) left out."""
    rows = [ls.model_dump(mode="json", by_alias=True, exclude_none=True) for ls in lessons]
    return {"schema": SCHEMA, "lessons": [{k: v for k, v in r.items() if v != []} for r in rows]}


def dump(lessons: list[Lesson]) -> str:
    return HEADER + yaml.safe_dump(as_data(lessons), sort_keys=False, width=120, allow_unicode=True)


def write_lessons(path: Path, lessons: list[Lesson]) -> None:
    """Write a file of lessons whole (a temporary file renamed over it: never half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(dump(lessons), encoding="utf-8")
    os.replace(tmp, path)


# -- merging ----------------------------------------------------------------------------------------
def _verdict(ls: Lesson) -> tuple[float, tuple[tuple[str, str], ...]]:
    return round(ls.strength, 4), tuple(sorted((e.run, e.trial) for e in ls.against))


def _says(ls: Lesson) -> str:
    against = (
        f"; its fix failed the same way in run {ls.against[-1].run} ({ls.against[-1].trial})"
        if ls.against
        else ""
    )
    return f"strength {ls.strength:g} from run {ls.source.run} on {ls.source.machine}{against}"


def merge(groups: list[list[Lesson]]) -> tuple[list[Lesson], list[str]]:
    """One list of the lessons of several files (module docstring); and what was said about them."""
    merged: list[Lesson] = []
    notes: list[str] = []
    for lessons in groups:
        for ls in lessons:
            ls = ls.model_copy(update={"conflict": None}, deep=True)
            same = next((m for m in merged if m.id == ls.id and _verdict(m) == _verdict(ls)), None)
            if same is None:
                merged.append(ls)
                continue
            runs = {same.source.run, *(s.run for s in same.confirmed)}
            for s in [ls.source, *ls.confirmed]:
                if s.run not in runs:
                    same.confirmed.append(s)
                    runs.add(s.run)
    for ls in merged:
        text = _conflicts(ls, merged)
        if text:
            ls.conflict = text
            notes.append(f"conflict kept: {ls.id} ({ls.failure.failure_class}: {ls.describe_fix()}): {text}")
    return merged, notes


def _conflicts(ls: Lesson, merged: list[Lesson]) -> str:
    said = []
    for other in merged:
        if other is ls:
            continue
        if other.id == ls.id:
            said.append(f"another copy disagrees: {_says(other)} (this one: {_says(ls)})")
        elif (
            other.failure.key == ls.failure.key
            and other.describe_fix() != ls.describe_fix()
            and reach(other.scope, ls.scope).kind != "none"
        ):
            said.append(
                f"another fix for the same failure in reach: {other.id} ({other.describe_fix()}), {_says(other)}"
            )
    return "; ".join(said)
