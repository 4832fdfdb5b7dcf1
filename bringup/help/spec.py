"""What an engine's --help says, parsed: its options, their types, defaults and choices.

The data model shared by the help parsers (argparse's format in bringup/help/text.py, click's in
bringup/help/click_text.py), so that neither parser imports the other's module.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import cached_property


def flag_dest(flag: str) -> str:
    """The destination argparse gives a long option ("--kv-cache-dtype" -> "kv_cache_dtype")."""
    return flag.lstrip("-").replace("-", "_")


def dest_of(flag: str, opt: HelpOption | None) -> str:
    """A flag's destination: its option's, where --help knows it, else the one argparse would give."""
    return opt.dest if opt is not None else flag_dest(flag)


@dataclass
class HelpOption:
    """One option as the help text describes it."""

    name: str  # the canonical (first long) option string, e.g. "--kv-cache-dtype"
    aliases: list[str] = field(default_factory=list)  # every other option string
    metavar: str | None = None  # e.g. "MEM_FRACTION_STATIC"; None for a switch or a choice list
    choices: list[str] | None = None
    default: str | None = None  # as printed ("(default: X)"), when the help says
    help: str = ""
    section: str = "options"
    negatable: bool = False  # argparse BooleanOptionalAction: --x / --no-x
    nargs_many: bool = False  # "X [X ...]"
    open_choices: bool = False  # "{a,b} or name registered in ...": choices are suggestions
    value_type: str | None = None  # click/Typer: str, int, float, path, choice, bool (switch); argparse: None

    @property
    def takes_value(self) -> bool:
        return self.metavar is not None or self.choices is not None

    @property
    def dest(self) -> str:
        """The argparse destination, as engines print it in their effective config."""
        # A click metavar is a type name (TEXT, INTEGER), not the destination.
        if self.value_type is None and self.metavar and re.fullmatch(r"[A-Z0-9_]+", self.metavar):
            return self.metavar.lower()
        return flag_dest(self.name)

    @property
    def all_names(self) -> list[str]:
        return [self.name, *self.aliases]


@dataclass
class HelpSpec:
    """All options of one engine version."""

    options: list[HelpOption]
    usage_prog: str = ""
    positionals: list[str] = field(default_factory=list)
    allow_abbrev: bool = True  # argparse takes unique prefixes of long options; click does not
    style: str = "argparse"  # argparse | click | rich

    @cached_property
    def by_name(self) -> dict[str, HelpOption]:
        table: dict[str, HelpOption] = {}
        for opt in self.options:
            for n in opt.all_names:
                table.setdefault(n, opt)
            if opt.negatable:
                table.setdefault("--no-" + opt.name[2:], opt)
        return table

    def get(self, name: str) -> HelpOption | None:
        return self.by_name.get(name)

    def resolve(self, name: str) -> HelpOption | None:
        """Find an option the way argparse does: exact, then a unique prefix (allow_abbrev)."""
        if name in self.by_name:
            return self.by_name[name]
        if not name.startswith("--") or not self.allow_abbrev:
            return None
        hits = {id(o): o for n, o in self.by_name.items() if n.startswith(name)}
        return next(iter(hits.values())) if len(hits) == 1 else None

    def ambiguous(self, name: str) -> list[str]:
        """Option strings that a prefix could mean, when more than one (argparse's error)."""
        if not name.startswith("--") or not self.allow_abbrev:
            return []
        return sorted(n for n in self.by_name if n.startswith(name))

    def close_matches(self, name: str, n: int = 3) -> list[str]:
        return difflib.get_close_matches(name, list(self.by_name), n=n, cutoff=0.6)

    def by_dest(self) -> dict[str, HelpOption]:
        return {o.dest: o for o in self.options}
