"""The ``bringup`` command line. Each command lives in its own module beside this one."""

from __future__ import annotations

import importlib
import pkgutil

import typer

app = typer.Typer(
    name="bringup",
    help="Bring an LLM inference server up on a new machine: find a configuration that works, "
    "prove its output is right, explain every failure, then make it fast.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)



@app.callback()
def _root() -> None:
    """bringup: find a launch configuration that works, prove it, explain failures, tune it."""


# Every module in this package registers its commands on `app` when imported.
for _mod in pkgutil.iter_modules(__path__):
    if not _mod.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_mod.name}")


def main() -> None:
    app()
