"""The click/Typer help parser against the truth: bringup's own Typer commands, rendered live both
as plain click help and in Typer's Rich boxes, must parse to exactly the options click holds."""

from __future__ import annotations

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from bringup.cli import app
from bringup.help.text import parse_help

COMMANDS = ["trial", "run", "doctor", "space"]
TYPES = {int: "int", float: "float", str: "str"}


def _command(name: str):
    group = get_command(app)
    return group.get_command(group.context_class(group), name)


def _click_base(cmd) -> type:
    """click's own Command class (Typer >= 0.20 vendors click as typer._click)."""
    return next(
        c for c in type(cmd).__mro__ if c.__name__ == "Command" and c.__module__.endswith("click.core")
    )


def _plain(name: str) -> str:
    cmd = _command(name)
    ctx = cmd.context_class(cmd, info_name=name, max_content_width=80)
    fmt = ctx.make_formatter()
    _click_base(cmd).format_help(cmd, ctx, fmt)  # click's own layout, not Typer's Rich one
    return fmt.getvalue()


def _rich(name: str) -> str:
    return CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "100", "TERM": "dumb"}).output


@pytest.mark.parametrize("style", ["click", "rich"])
@pytest.mark.parametrize("name", COMMANDS)
def test_parse_matches_click_params(name, style):
    text = _plain(name) if style == "click" else _rich(name)
    spec = parse_help(text)
    assert spec.style == style
    opts = [p for p in _command(name).params if hasattr(p, "is_flag") and "--help" not in p.opts]
    assert opts
    assert {o.name for o in spec.options} == {max(p.opts, key=len) for p in opts}
    for p in opts:
        got = spec.get(max(p.opts, key=len))
        assert got.negatable == bool(p.secondary_opts), p.opts
        assert got.takes_value == (not p.is_flag), p.opts
        if not p.is_flag and type(p.default) in TYPES:
            assert got.value_type == TYPES[type(p.default)], (p.opts, got.value_type)
        if p.secondary_opts and p.show_default is not False and p.default is not None:
            assert got.default == str(bool(p.default)), p.opts
