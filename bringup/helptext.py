"""Parse an engine's argparse ``--help`` text into typed options.

The help text is the engine's own statement of what this version accepts: flag names, aliases,
argparse choices and defaults. Search spaces and flag validation are built from it, so a flag
that a version renamed (SGLang 0.5.23's ``--dsa-*`` for ``--nsa-*``) is never offered.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from bringup import secrets

_SECTION = re.compile(r"^([A-Za-z][^:]*):\s*$")
_CHOICES = re.compile(r"^\{([^}]*)\}")
_DEFAULT = re.compile(r"\(default:\s*(.*?)\)\s*$", re.S)


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

    @property
    def takes_value(self) -> bool:
        return self.metavar is not None or self.choices is not None

    @property
    def dest(self) -> str:
        """The argparse destination, as engines print it in their effective config."""
        if self.metavar and re.fullmatch(r"[A-Z0-9_]+", self.metavar):
            return self.metavar.lower()
        return self.name.lstrip("-").replace("-", "_")

    @property
    def all_names(self) -> list[str]:
        return [self.name, *self.aliases]


@dataclass
class HelpSpec:
    """All options of one engine version."""

    options: list[HelpOption]
    usage_prog: str = ""
    positionals: list[str] = field(default_factory=list)

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
        if not name.startswith("--"):
            return None
        hits = {id(o): o for n, o in self.by_name.items() if n.startswith(name)}
        return next(iter(hits.values())) if len(hits) == 1 else None

    def ambiguous(self, name: str) -> list[str]:
        """Option strings that a prefix could mean, when more than one (argparse's error)."""
        return sorted(n for n in self.by_name if n.startswith(name)) if name.startswith("--") else []

    def close_matches(self, name: str, n: int = 3) -> list[str]:
        return difflib.get_close_matches(name, list(self.by_name), n=n, cutoff=0.6)

    def by_dest(self) -> dict[str, HelpOption]:
        return {o.dest: o for o in self.options}


def _split_depth0(s: str, sep: str) -> list[str]:
    """Split on sep where not inside braces (choice lists contain commas)."""
    parts, depth, cur, i = [], 0, [], 0
    while i < len(s):
        c = s[i]
        depth += c == "{"
        depth -= c == "}"
        if depth == 0 and s.startswith(sep, i):
            parts.append("".join(cur))
            cur, i = [], i + len(sep)
            continue
        cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def _split_option_line(line: str) -> tuple[str, str]:
    """'  --a {x,y}    help...' -> ('--a {x,y}', 'help...'): two spaces end the spec."""
    body = line[2:]
    depth = 0
    for i, c in enumerate(body):
        depth += c == "{"
        depth -= c == "}"
        if depth == 0 and body.startswith("  ", i):
            return body[:i], body[i:].strip()
    return body.rstrip(), ""


def _parse_option_strings(spec: str) -> tuple[list[str], str | None, list[str] | None, bool, bool]:
    """Split '--a X, --b X' or '--a {x,y}' into names, metavar, choices, nargs_many, open."""
    names: list[str] = []
    metavar: str | None = None
    choices: list[str] | None = None
    many = False
    open_choices = False
    for i, part in enumerate(_split_depth0(spec, ", -")):
        part = ("-" if i else "") + part.strip()  # the separator ate one dash
        name, _, rest = part.partition(" ")
        names.append(name)
        rest = rest.strip()
        if not rest:
            continue
        if rest.startswith("{"):
            close = rest.index("}")
            choices = [c for c in rest[1:close].split(",") if c]
            open_choices = open_choices or rest[close + 1:].strip().startswith("or ")
        else:
            metavar = rest.split(" ")[0]
        many = many or "..." in rest
    return names, metavar, choices, many, open_choices


def parse_help(text: str) -> HelpSpec:
    """Parse argparse help output (SGLang and vLLM captures, several versions)."""
    lines = text.splitlines()
    # Join the usage block to find the program name and positionals.
    usage_prog = ""
    if lines and lines[0].startswith("usage:"):
        usage_prog = lines[0][len("usage:"):].strip().split(" [")[0].split(" --")[0]
    options: list[HelpOption] = []
    positionals: list[str] = []
    section = ""
    current: HelpOption | None = None
    help_lines: list[str] = []
    in_positionals = False

    def flush() -> None:
        nonlocal current, help_lines
        if current is not None:
            text_ = " ".join(h.strip() for h in help_lines if h.strip())
            current.help = text_
            dm = _DEFAULT.search(text_)
            if dm:
                current.default = dm.group(1).strip()
            options.append(current)
        current, help_lines = None, []

    for line in lines:
        sm = _SECTION.match(line)
        if sm and not line.startswith(" "):
            flush()
            section = sm.group(1).strip()
            in_positionals = section == "positional arguments"
            continue
        if not section:
            continue  # still in the usage block
        if re.match(r"^  -{1,2}[A-Za-z0-9]", line):
            flush()
            spec_, first_help = _split_option_line(line)
            names, metavar, choices, many, open_c = _parse_option_strings(spec_)
            long_names = [n for n in names if n.startswith("--")]
            negatable = False
            # argparse BooleanOptionalAction prints "--x, --no-x": one option, two spellings.
            if len(long_names) == 2 and long_names[1] == "--no-" + long_names[0][2:]:
                negatable = True
                names = [n for n in names if n != long_names[1]]
            canonical = long_names[0] if long_names else names[0]
            current = HelpOption(
                name=canonical,
                aliases=[n for n in names if n != canonical],
                metavar=metavar,
                choices=choices,
                section=section or "options",
                negatable=negatable,
                nargs_many=many,
                open_choices=open_c,
            )
            if first_help:
                help_lines.append(first_help)
            continue
        if in_positionals and re.match(r"^  [a-z_]+(\s|$)", line):
            flush()
            positionals.append(line.split()[0])
            continue
        if current is not None and (line.startswith("    ") or not line.strip()):
            help_lines.append(line)
            continue
        if current is not None and line.strip():
            # Section description lines (vLLM groups) end the previous option's help.
            flush()
    flush()
    kept = [o for o in options if o.name not in ("-h", "--help")]
    secrets.learn_from_help(kept)  # flags the help calls keys or passwords are redacted everywhere
    return HelpSpec(options=kept, usage_prog=usage_prog, positionals=positionals)


DATA_HELP = Path(__file__).parent / "data" / "help"


def bundled_help(engine: str, version: str) -> HelpSpec:
    """The help capture shipped with bringup for an engine version (e.g. sglang 0.5.23)."""
    candidates = sorted(DATA_HELP.glob(f"{engine}-{version}*.txt"))
    if not candidates:
        known = ", ".join(p.stem for p in sorted(DATA_HELP.glob("*.txt")))
        raise FileNotFoundError(f"no help capture for {engine} {version}; bundled: {known}")
    return parse_help(candidates[0].read_text())


def bundled_versions(engine: str) -> list[str]:
    out = []
    for p in sorted(DATA_HELP.glob(f"{engine}-*.txt")):
        v = p.stem[len(engine) + 1:]
        out.append(v.removesuffix("-cpu"))
    return out
