"""Loading the knowledge data files (YAML) with errors that name the file and the field."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from bringup.guard.limits import KNOWLEDGE_MAX, InputError, check_depth, check_nesting, read_text_limited

M = TypeVar("M", bound=BaseModel)

DATA = Path(__file__).resolve().parents[1] / "data"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class KnowledgeFileError(ValueError):
    """A data file that cannot be used: which file, which entry, what is wrong."""


def load_yaml(path: Path) -> Any:
    try:
        # libyaml's loader where it is built in: the same documents, ~10x faster (a run reads the
        # variable registry and the knowledge files each time it is prepared).
        text = read_text_limited(Path(path), KNOWLEDGE_MAX, "knowledge file")
        check_nesting(text, str(path), "knowledge file", yaml=True)
        doc = yaml.load(text, Loader=_LOADER)
        check_depth(doc, str(path), "knowledge file")
        return doc
    except InputError as e:
        raise KnowledgeFileError(str(e)) from None
    except (yaml.YAMLError, RecursionError) as e:
        raise KnowledgeFileError(f"{path}: not valid YAML: {e}") from e


def describe_validation(path: Path, where: str, err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"])
        parts.append(f"{where}{'.' + loc if loc else ''}: {e['msg']}")
    return f"{path}: " + "; ".join(parts)


def validated_entries(paths: list[Path], key: str, model: type[M]) -> Iterator[tuple[Path, str, M]]:
    """Each entry of the top-level `key:` list of each file, validated; ids unique across files."""
    seen: dict[str, Path] = {}
    for path in paths:
        doc = load_yaml(path) or {}
        entries = doc.get(key) if isinstance(doc, dict) else None
        if not isinstance(entries, list):
            raise KnowledgeFileError(f"{path}: expected a top-level '{key}:' list")
        for i, raw in enumerate(entries):
            where = f"{key}[{i}]" + (f" ({raw.get('id')})" if isinstance(raw, dict) and raw.get("id") else "")
            try:
                obj = model.model_validate(raw)
            except ValidationError as e:
                raise KnowledgeFileError(describe_validation(path, where, e)) from e
            ident = getattr(obj, "id", None)
            if ident is not None:
                if ident in seen:
                    raise KnowledgeFileError(f"{path}: {where}: duplicate id, also in {seen[ident]}")
                seen[ident] = path
            yield path, where, obj


@lru_cache(maxsize=1)
def classes() -> dict[str, str]:
    return dict(load_yaml(DATA / "classes.yaml")["classes"])


@lru_cache(maxsize=1)
def phases() -> list[str]:
    return list(load_yaml(DATA / "classes.yaml")["phases"])


def phase_index(phase: str | None) -> int:
    order = phases()
    return order.index(phase) if phase in order else -1


@lru_cache(maxsize=1)
def probe_implicates() -> dict[str, list[str]]:
    return dict(load_yaml(DATA / "classes.yaml").get("probe_implicates") or {})


@lru_cache(maxsize=1)
def probe_implicates_by_probe() -> dict[str, list[str]]:
    """What a failure of a users'-use probe (sampled, long-prompt, concurrency) implicates first."""
    return dict(load_yaml(DATA / "classes.yaml").get("probe_implicates_by_probe") or {})


@lru_cache(maxsize=1)
def hang_implicates() -> dict[str, list[str]]:
    """What a hang implicates, by the phase it hung in (classes.yaml)."""
    return dict(load_yaml(DATA / "classes.yaml").get("hang_implicates") or {})


@lru_cache(maxsize=1)
def disguises() -> dict[str, frozenset[str]]:
    """Class -> the classes it may show as under other settings (classes.yaml ``disguises``)."""
    raw = load_yaml(DATA / "classes.yaml").get("disguises") or {}
    return {k: frozenset(v) for k, v in raw.items()}


KNOWLEDGE_TEXT_KEYS = ("hint", "source", "reason", "note", "why", "description")
# The keys whose text a user reads as it is (a hint, a rule's reason): they cite no file of
# bringup's own (tests/test_user_facing.py). A `source` is for the experts who edit the knowledge
# and may cite bringup's own notes; a report shows it through `public_source`.
USER_TEXT_KEYS = ("hint", "reason", "note", "why")

# A citation of bringup's own tree or notes ("docs/facts.md", "bringup/data/help/...txt"), which a
# user who installed bringup does not have.
OWN_FILE = re.compile(
    r"\bbringup/(?:cli|core|data|dryrun|engines|env|facts|guard|help|knowledge|loadgen|observe|oracle|"
    r"record|report|scenario|search|session|templates|testmodel|trial|tuning|verify)\b[\w./-]*"
    r"|\bdocs/[\w./-]+\.md\b"
    r"|\b(?:rootcause|rules|factors|classes|knobs|engines|tolerances|generic|warnings)\.yaml\b"
)


def public_source(source: str) -> str:
    """A knowledge entry's `source` as a report shows it: its citations of bringup's own files left
    out ("sglang #26087 (docs/facts.md)" is "sglang #26087"), the public ones kept."""
    text = re.sub(r",?\s*(?:" + OWN_FILE.pattern + r")\s*,?", " ", source)
    text = re.sub(r"\(\s*\)", "", text)  # parentheses that held only such a citation
    text = re.sub(r"\(\s+", "(", re.sub(r"\s+\)", ")", text))
    parts = [p.strip(" ,") for p in text.split(";")]
    text = "; ".join(p for p in parts if p)
    if text.startswith("(") and text.endswith(")") and text.count("(") == 1:
        text = text[1:-1]
    return re.sub(r"\s{2,}", " ", text).strip()


def cut_values(text: str, keys: tuple[str, ...] = KNOWLEDGE_TEXT_KEYS) -> list[tuple[int, str, str, str]]:
    """Plain (unquoted) knowledge strings that YAML cut at " #": (line, key, value kept, text lost).

    YAML reads ``source: sglang #18870`` as "sglang" and drops the rest as a comment. PyYAML's
    scanner does not report comments, so this looks at the rest of the line after each plain
    scalar that is the value of one of ``keys``.
    """
    lines = text.splitlines()
    out: list[tuple[int, str, str, str]] = []
    tokens = list(yaml.scan(text, Loader=yaml.SafeLoader))
    for i in range(3, len(tokens)):
        key_tok, key, value_tok, val = tokens[i - 3], tokens[i - 2], tokens[i - 1], tokens[i]
        if not (
            isinstance(key_tok, yaml.KeyToken)
            and isinstance(key, yaml.ScalarToken)
            and isinstance(value_tok, yaml.ValueToken)
            and isinstance(val, yaml.ScalarToken)
        ):
            continue
        if key.value not in keys or not val.plain:
            continue
        row = val.end_mark.line
        rest = lines[row][val.end_mark.column :] if row < len(lines) else ""
        if rest.lstrip().startswith("#") and rest[:1].isspace():
            out.append((row + 1, key.value, val.value, rest.strip()))
    return out
