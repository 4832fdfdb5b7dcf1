"""Parse an engine's ``--help`` text into typed options.

The help text is the engine's own statement of what this version accepts: flag names, aliases,
choices and defaults. Search spaces and flag validation are built from it, so a flag that a
version renamed (SGLang 0.5.23's ``--dsa-*`` for ``--nsa-*``) is never offered.

Two families of help are read into the same ``HelpSpec``: argparse (SGLang, vLLM) and click,
which Typer apps print either plain (``--flag TEXT  help [default: x]``, ``--x / --no-x``,
choices as ``[a|b|c]``; ``transformers serve``) or in Rich boxes (``╭─ Options ─╮``).
"""

from __future__ import annotations

import re
from pathlib import Path

from bringup.guard import secrets
from bringup.help.spec import HelpOption, HelpSpec

_SECTION = re.compile(r"^([A-Za-z][^:]*):\s*$")
_CHOICES = re.compile(r"^\{([^}]*)\}")
_DEFAULT = re.compile(r"\(default:\s*(.*?)\)\s*$", re.S)


def _split_depth0(s: str, sep: str) -> list[str]:
    """Split on sep where not inside braces (choice lists contain commas)."""
    parts: list[str] = []
    cur: list[str] = []
    depth, i = 0, 0
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
            open_choices = open_choices or rest[close + 1 :].strip().startswith("or ")
        else:
            metavar = rest.split(" ")[0]
        many = many or "..." in rest
    return names, metavar, choices, many, open_choices


def parse_help(text: str) -> HelpSpec:
    """Parse an engine's help: argparse (SGLang, vLLM) or click/Typer (transformers serve)."""
    if is_click_help(text):
        from bringup.help.click_text import parse_click_help

        return parse_click_help(text)
    return parse_argparse_help(text)


def is_click_help(text: str) -> bool:
    """Click prints "Usage:" (capital U) and Typer's Rich mode draws boxes; argparse "usage:"."""
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return first.startswith("Usage:") or "╭─" in text[:3000]


def parse_argparse_help(text: str) -> HelpSpec:
    """Parse argparse help output (SGLang and vLLM captures, several versions)."""
    lines = text.splitlines()
    # Join the usage block to find the program name and positionals.
    usage_prog = ""
    if lines and lines[0].startswith("usage:"):
        usage_prog = lines[0][len("usage:") :].strip().split(" [")[0].split(" --")[0]
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


DATA_HELP = Path(__file__).resolve().parents[1] / "data" / "help"
_OPTION_LINE = re.compile(r"^  -{1,2}[A-Za-z0-9]")


def option_name_groups(text: str) -> list[list[str]]:
    """The option strings of each option a help text lists (`['--model-path', '--model']`), without
    the rest of a full parse: what knows a flag by all its names (bringup/core/reserved.py) reads
    every capture at the first candidate a process makes, so it is a scan of option lines only."""
    if is_click_help(text):
        from bringup.help.click_text import parse_click_help

        return [o.all_names for o in parse_click_help(text).options]
    out: list[list[str]] = []
    for line in text.splitlines():
        if _OPTION_LINE.match(line):
            out.append(_parse_option_strings(_split_option_line(line)[0])[0])
    return out


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
        v = p.stem[len(engine) + 1 :]
        out.append(v.removesuffix("-cpu"))
    return out
