"""The ``bringup`` command line. Each command lives in its own module beside this one.

Every command module is imported at start so Typer can list it, so each keeps its top level light
(typer, rich, this package) and imports what it works with inside its command function: `bringup
--help` then loads no Optuna, aiohttp, Jinja2, NumPy or pydantic, and `doctor`, `explain` and
`report` run where the optional packages are missing (tests/cli/test_cli_imports.py;
benchmarks/cli_startup.py measures the time).
"""

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


def argv_problem(args: list[str]) -> str | None:
    """An argument that is not text: bytes that are not UTF-8 (Python keeps them as lone
    surrogates, and they failed only when a trial was serialised, after the launch) or a NUL."""
    for i, a in enumerate(args, 1):
        if "\x00" in a:
            return f"argument {i} holds a NUL byte"
        bad = next((c for c in a if "\udc80" <= c <= "\udcff"), None)
        if bad is not None:
            shown = a.encode("utf-8", "surrogateescape")[:80]
            return f"argument {i} is not valid UTF-8 ({shown!r}): give flags and --env values as UTF-8 text"
    return None


def main() -> None:
    """Run a command; errors that say what is wrong with an input or a folder end it with that
    message and exit 2, never a traceback (issue 14)."""
    import sys

    if bad := argv_problem(sys.argv[1:]):
        print(f"error: {bad}", file=sys.stderr)
        sys.exit(2)
    try:
        app()
    except Exception as e:
        _refused(e)
        raise
    except BaseException as e:  # Interrupted (a BaseException) outside a command's own handling
        if type(e).__name__ != "Interrupted":
            raise
        print(f"interrupted ({e}); servers torn down.", file=sys.stderr)
        sys.exit(e.exit_code)  # type: ignore[attr-defined]


def _refused(e: Exception) -> None:
    """An error that says what is wrong with an input or a folder: its message, exit 2; else return."""
    import errno
    import sys

    # the classes load only when something went wrong: `bringup --help` stays light
    from bringup.core.candidate import FlagError
    from bringup.core.datafiles import KnowledgeFileError
    from bringup.core.reserved import ReservedFlag
    from bringup.facts.preflight import PreflightError
    from bringup.guard.files import UnsafeFile
    from bringup.guard.limits import InputError
    from bringup.guard.safetext import safe_line
    from bringup.record.journal import JournalDamaged

    refused = (
        JournalDamaged,
        PreflightError,
        InputError,
        KnowledgeFileError,
        UnsafeFile,
        ReservedFlag,
        FlagError,
    )
    if isinstance(e, refused):
        print(f"error: {safe_line(str(e))}", file=sys.stderr)  # it may quote a file's bytes
        sys.exit(2)
    if isinstance(e, OSError) and e.errno in (
        errno.EROFS,
        errno.EACCES,
        errno.EPERM,
        errno.ENOSPC,
        errno.EDQUOT,
    ):
        where = f" {e.filename}" if e.filename else ""
        print(
            f"error: cannot write{where}: {e.strerror or e}. Nothing recorded so far was changed; "
            "free space or give a writable --runs-dir.",
            file=sys.stderr,
        )
        sys.exit(2)
    if type(e).__name__ == "OperationalError" and "full" in str(e):  # sqlite3: database or disk is full
        print(
            f"error: the journal cannot be written: {e}. What was recorded before is intact (resume "
            "once space is free); the run is marked interrupted where the disk allowed it.",
            file=sys.stderr,
        )
        sys.exit(2)
