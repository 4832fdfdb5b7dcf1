"""Parse click / Typer ``--help`` into the same ``HelpSpec`` as argparse help.

``transformers serve`` is a Typer command. Click prints it plain::

    Options:
      --continuous-batching / --no-continuous-batching
                                      Enable continuous batching ...  [default:
                                      no-continuous-batching]
      --attn-implementation TEXT      Attention implementation (e.g.
      --reasoning [on|off|auto]       Reasoning mode ...  [default: auto]

and Typer's Rich mode draws the same table in boxes, with the switch's negation and the type in
their own columns (``<str>``, ``<int>``, ``<on|off|auto>`` in recent Typer; ``TEXT``,
``[on|off|auto]`` in older ones)::

    ╭─ Options ──────────────────────────────────────────╮
    │ --compile      --no-compile   <bool>   Enable ...  │
    │ --dtype                       <str>    Override ...│

Both are turned into rows of (names, type, help) first, then into ``HelpOption``s, so the rest of
bringup (flag validation, the search space) does not know which family the engine uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bringup.help.spec import HelpOption, HelpSpec

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_BOX_TOP = re.compile(r"^\s*╭─+\s*(?P<title>[^─╮]*?)\s*─*╮\s*$")
_BOX_BOTTOM = re.compile(r"^\s*╰─*╯\s*$")
_PLAIN_SECTION = re.compile(r"^([A-Z][A-Za-z ]*):\s*$")
_DEFAULT = re.compile(r"\[default:\s*(?P<v>[^\]]*)\]")
# click's ParamType names and Typer's <type> spellings
_TYPES = {
    "TEXT": "str",
    "STR": "str",
    "INTEGER": "int",
    "INT": "int",
    "FLOAT": "float",
    "BOOLEAN": "bool",
    "BOOL": "bool",
    "PATH": "path",
    "FILE": "path",
    "FILENAME": "path",
    "DIRECTORY": "path",
    "UUID": "str",
    "INTEGER RANGE": "int",
    "FLOAT RANGE": "float",
}


@dataclass
class _Row:
    names: list[str]
    metavar: str | None
    help_lines: list[str] = field(default_factory=list)
    section: str = "Options"


def _type_of(metavar: str | None) -> tuple[str | None, list[str] | None]:
    """(value_type, choices) of a click metavar: TEXT, <int>, [a|b|c], <a|b|c>, INTEGER RANGE."""
    if metavar is None:
        return None, None
    m = re.fullmatch(r"[\[<]([^\]>]*\|[^\]>]*)[\]>]", metavar)
    if m:
        return "choice", [c.strip() for c in m.group(1).split("|") if c.strip()]
    bare = re.sub(r"\s*\[[^\]]*\]$", "", metavar).strip("<>").strip()  # "<int range> [x>=1]"
    return _TYPES.get(bare.upper(), _TYPES.get(bare.split(" ")[0].upper(), "str")), None


def _join_help(lines: list[str]) -> str:
    """Join wrapped help lines; click breaks words after a hyphen ("no-" / "enable-cors")."""
    out = ""
    for ln in (x.strip() for x in lines):
        if not ln:
            continue
        if out.endswith("-") and len(out) > 1 and out[-2].isalnum():
            out += ln
        else:
            out += (" " if out else "") + ln
    return out


def _split_names(tokens: list[str]) -> tuple[list[str], str | None]:
    """Option strings and the metavar from the first column(s) of a row."""
    names: list[str] = []
    metavar = None
    for tok in tokens:
        for part in re.split(r"\s*/\s*|,\s*", tok.strip()):
            if not part:
                continue
            if part.startswith("-") and metavar is None:
                name, _, rest = part.partition(" ")
                names.append(name)
                if rest.strip():
                    metavar = rest.strip()
            elif metavar is None:
                metavar = part
    return names, metavar


def _plain_rows(lines: list[str]) -> tuple[list[_Row], list[str]]:
    rows: list[_Row] = []
    positionals: list[str] = []
    section = ""
    cur: _Row | None = None
    for line in lines:
        sm = _PLAIN_SECTION.match(line)
        if sm and not line.startswith(" "):
            section, cur = sm.group(1), None
            continue
        if not section or section == "Usage":
            continue
        if section.lower().startswith("argument"):
            m = re.match(r"^  (\[?[A-Za-z_][\w-]*\]?(?:\.\.\.)?)(\s|$)", line)
            if m:
                positionals.append(m.group(1).strip("[].").lower())
            continue
        m = re.match(r"^  (-{1,2}[A-Za-z0-9][^ ]*(?:(?:, | / | )\S+)*)(?:\s{2,}(.*))?$", line)
        if m:
            spec = m.group(1)
            names, metavar = _split_names(re.split(r"(?<=\S) (?=-)|, ", spec))
            cur = _Row(names, metavar, [m.group(2) or ""], section)
            rows.append(cur)
            continue
        if cur is not None and line.startswith("    "):
            cur.help_lines.append(line)
    return rows, positionals


def _box_rows(lines: list[str]) -> tuple[list[_Row], list[str]]:
    rows: list[_Row] = []
    positionals: list[str] = []
    section: str | None = None
    cur: _Row | None = None
    help_col: int | None = None
    for line in lines:
        top = _BOX_TOP.match(line)
        if top:
            section, cur, help_col = top.group("title").strip() or "Options", None, None
            continue
        if _BOX_BOTTOM.match(line):
            section, cur = None, None
            continue
        if section is None or "│" not in line:
            continue
        body = line.strip()
        body = body[1:] if body.startswith("│") else body
        body = body[:-1] if body.endswith("│") else body
        body = body.rstrip()
        content = body[1:] if body.startswith(" ") else body  # one space of padding inside the box
        if section.lower().startswith("argument"):
            m = re.match(r"^\s*\*?\s*([A-Za-z_][\w-]*)\s{2,}", content)
            if m and not content.startswith("   " * 5):
                positionals.append(m.group(1).lower())
            continue
        m = re.match(
            r"^(?:\*\s+)?(-{1,2}[A-Za-z0-9])", content
        )  # an option starts the row; help text is indented
        if m:
            cells = [c for c in re.split(r"\s{2,}", content.lstrip("* ")) if c]
            name_cells = [c for c in cells if c.startswith("-")]
            rest = cells[len(name_cells) :]
            names, metavar = _split_names(name_cells)
            if (
                rest
                and metavar is None
                and re.fullmatch(
                    r"(<[^>]+>|\[[^\]]*\|[^\]]*\]|[A-Z][A-Z ]*[A-Z]|[A-Z]+)"
                    r"( \[[^\]|]*\])?",
                    rest[0],
                )
            ):
                metavar, rest = rest[0], rest[1:]
            first = "  ".join(rest)
            if rest:
                help_col = len(content) - len(content.lstrip()) + content.find(rest[0])
            cur = _Row(names, metavar, [first], section)
            rows.append(cur)
            continue
        if cur is not None and content.strip():
            if help_col is None or len(content) - len(content.lstrip()) >= min(help_col, 8):
                cur.help_lines.append(content.strip())
    return rows, positionals


def _option(row: _Row) -> HelpOption:
    longs = [n for n in row.names if n.startswith("--")]
    negatable = False
    names = list(row.names)
    if len(longs) >= 2 and longs[1] == "--no-" + longs[0][2:]:
        negatable = True
        names.remove(longs[1])
    canonical = longs[0] if longs else names[0]
    help_text = _join_help(row.help_lines)
    value_type, choices = _type_of(row.metavar)
    metavar = row.metavar
    if value_type == "bool" and (negatable or row.metavar in ("<bool>",)):
        metavar = None  # a switch: Typer shows <bool> in the type column but takes no value
    if metavar is None and value_type is None:
        value_type = "bool"
    default = None
    dm = list(_DEFAULT.finditer(help_text))
    if dm:
        default = dm[-1].group("v").strip()
        if negatable:  # click prints the switch's default as the option string that is on
            default = (
                "False"
                if default == "no-" + canonical[2:]
                else "True"
                if default == canonical[2:]
                else default
            )
    return HelpOption(
        name=canonical,
        aliases=[n for n in names if n != canonical],
        metavar=metavar if value_type != "choice" else None,
        choices=choices,
        default=default,
        help=help_text,
        section=row.section.strip() or "Options",
        negatable=negatable,
        nargs_many=bool(metavar and metavar.endswith("...")),
        value_type=value_type,
    )


def parse_click_help(text: str) -> HelpSpec:
    """Parse click's plain help or Typer's Rich-boxed help into a ``HelpSpec``."""
    lines = [_ANSI.sub("", ln).rstrip("\r") for ln in text.splitlines()]
    usage = next((ln.strip() for ln in lines if ln.strip().startswith("Usage:")), "")
    usage_prog = re.split(r" \[| [A-Z_]{3,}\b", usage[len("Usage:") :].strip())[0] if usage else ""
    boxed = any(_BOX_TOP.match(ln) for ln in lines)
    rows, positionals = _box_rows(lines) if boxed else _plain_rows(lines)
    options = [_option(r) for r in rows if r.names]
    options = [o for o in options if o.name not in ("--help", "-h")]
    return HelpSpec(
        options=options,
        usage_prog=usage_prog,
        positionals=positionals,
        allow_abbrev=False,
        style="rich" if boxed else "click",
    )
