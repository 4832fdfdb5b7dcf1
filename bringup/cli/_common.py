"""Shared pieces of the CLI: consoles, engine resolution, outcome rendering."""

from __future__ import annotations

import functools
import inspect
import json
import sys
import time
import typing
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:  # every command module imports this one: keep `bringup --help` free of pydantic
    from bringup.observe.outcome import Outcome


def _safe_segments(buffer: Iterable[Segment]) -> Iterator[Segment]:
    from bringup.guard.safetext import safe_text

    for seg in buffer:
        if seg.control or seg.text.isascii() and seg.text.isprintable():
            yield seg  # the console's own cursor moves, or plain text (the common case, kept fast)
        else:
            yield Segment(safe_text(seg.text), seg.style, seg.control)


class SafeConsole(Console):
    """A console that writes no escape sequence, control character, bidi control or invisible
    character it did not make itself: every segment of text it is about to write goes through
    `safe_text` (bringup/guard/safetext.py), shown as ``\\x1b`` or ``\\u202e``. The one place every
    terminal line of bringup passes (tables, status lines, progress bars, the live run table), so a
    string from outside that a command forgot to pass through `shown` still cannot retitle the
    terminal or reorder a line (issue 40). Rich's own styles and cursor moves are added after this
    pass (styles) or are control segments (moves), so they are kept."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(_safe_segments(buffer))


out_console = SafeConsole(highlight=False, soft_wrap=True)
err_console = SafeConsole(stderr=True, highlight=False)

STATUS_STYLE = {
    "works": "bold green",
    "fails": "bold red",
    "wrong-output": "bold magenta",
    "timeout": "bold yellow",
    "cancelled": "dim",
}

# `--ray` of `run` and `tune` (bringup/trial/rayexec.py): one text, one meaning.
RAY_HELP = (
    "Run the trials on a Ray cluster: auto (the cluster running here, else a one-node one) or its "
    "address (HEAD:6379). Its nodes of this machine's hardware take the trials; `bringup doctor` "
    "prints how a worker declares it. Needs pip install 'bringup[ray]'."
)


Opts = TypeVar("Opts")


def options(cls: type[Opts]) -> Callable[[Callable[[Opts], None]], Callable[..., None]]:
    """A command whose options are the annotated attributes of ``cls`` (each ``name:
    Annotated[type, typer.Option(...)] = default``; no default: required), handed to it as one
    ``cls`` object. The command's function then holds only what it does (parse, call the library,
    print), and its options read as one table; typer sees the same parameters, in the same order."""
    hints = typing.get_type_hints(cls, include_extras=True)
    params = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=cls.__dict__.get(name, inspect.Parameter.empty),
            annotation=hint,
        )
        for name, hint in hints.items()
    ]

    def wrap(fn: Callable[[Opts], None]) -> Callable[..., None]:
        @functools.wraps(fn)
        def command(**given: Any) -> None:
            o = object.__new__(cls)
            vars(o).update(given)
            return fn(o)

        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = dict(hints)
        return command

    return wrap


def tears_down_on_signal(fn: Callable[[Opts], None]) -> Callable[[Opts], None]:
    """A command that launches servers: SIGTERM, SIGINT and SIGHUP tear them down (exit 143, 130,
    129) while it runs, and the handlers go when it returns (bringup/trial/process.py
    `handling_signals`; opened on the main thread, where Python runs handlers)."""

    @functools.wraps(fn)
    def command(o: Opts) -> None:
        from bringup.trial.process import handling_signals

        with handling_signals():
            fn(o)

    return command


def refusal(e: ValueError) -> str:
    """What a settings object (Pydantic) or a range (bringup/guard/ranges.py) refused, on one line:
    the field and why, as `--sweep: -1 must be at least 1`."""
    errors = getattr(e, "errors", None)
    if callable(errors):  # a pydantic ValidationError
        return "; ".join(
            f"{'.'.join(map(str, x['loc'])) or 'settings'}: {str(x['msg']).removeprefix('Value error, ')}"
            for x in errors()
        )
    return str(e)


def usage_error(msg: str) -> typer.Exit:
    """Bad usage: say what was wrong and what to do; exit code 2. The message is text, not Rich
    markup: "pip install 'bringup[ray]'" keeps its brackets."""
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(msg)}")
    return typer.Exit(2)


def refuse_damaged_model(model: str | Path) -> None:
    """A local model folder that cannot load (a bad safetensors header, a truncated shard, a shard
    the index lists but that is missing) is refused before anything else, with the file and the
    damage named (exit 2). `plan` said "fits" with one shard of two damaged."""
    from bringup.facts.preflight import model_problems

    p = Path(model)
    if p.is_dir() and (problems := model_problems(p)):
        raise usage_error("the model cannot load: " + "; ".join(problems))


def runs_root(runs_dir: Path | None) -> Path:
    return Path(runs_dir) if runs_dir else Path.cwd() / "bringup-runs"


def writable_runs_root(runs_dir: Path | None) -> Path:
    """The runs folder, refused with a clear error (exit 2) before any launch when read-only."""
    from bringup.facts.preflight import PreflightError, check_writable

    root = runs_root(runs_dir)
    try:
        check_writable(root)
    except PreflightError as e:
        raise usage_error(str(e)) from None
    return root


def new_trial_dir(root: Path, engine: str, key: str) -> Path:
    """A fresh trial folder under the runs folder, made (a name taken by anything, a dangling link
    included, is stepped over; a link on the way is refused, exit 2: bringup/guard/files.py)."""
    from bringup.guard import files

    stamp = time.strftime("%Y%m%d-%H%M%S")
    d = root / "trials" / f"{stamp}-{engine}-{key[:8]}"
    n = 1
    while files.is_taken(d):
        n += 1
        d = root / "trials" / f"{stamp}-{engine}-{key[:8]}-{n}"
    try:
        return files.make_dirs(d, inside=root)
    except files.UnsafeFile as e:
        raise usage_error(str(e)) from None


def print_json(obj: object) -> None:
    from bringup.guard import secrets

    sys.stdout.write(secrets.scrub_text(json.dumps(obj, indent=2, default=str)) + "\n")
    sys.stdout.flush()


def _render_remedies(console, o: Outcome) -> None:
    """The engine's own advice beneath the failure (bringup/observe/remedies.py), in its order."""
    items = [
        f"{r.flag}{'=' + r.value if r.value is not None else ''}{' (' + r.action + ')' if r.action != 'set' else ''}"
        for r in o.remedies
    ]
    if items:
        console.print(Text.assemble(("engine's remedies ", "bold"), shown(", ".join(items))))


def shown(text: object, limit: int = 2000) -> str:
    """Text from outside (a log line, a model name, user input) as it may reach a terminal: secrets
    replaced, control characters and escape sequences escaped, cut to `limit`. Print it inside a
    rich `Text` (never as a markup string: `[/dev/shm]` is text, not a closing tag)."""
    from bringup.guard import secrets
    from bringup.guard.safetext import safe_line

    return secrets.scrub_text(safe_line(str(text), limit))


def render_outcome(o: Outcome, console: Console = out_console) -> None:
    console.print(_headline(o))
    if o.evidence and o.status != "works":
        console.print("[bold]evidence[/]")
        for line in o.evidence:
            console.print(Text("  " + shown(line, 400)))
    if o.root_exception and o.status != "works":
        console.print(Text.assemble(("root exception ", "bold"), shown(o.root_exception)))
    if o.implicates and o.status != "works":
        console.print(Text.assemble(("implicates ", "bold"), shown(", ".join(o.implicates))))
    if o.hint and o.status != "works":
        console.print(Text.assemble(("hint ", "bold"), shown(o.hint)))
    _render_remedies(console, o)
    if o.overrides:
        console.print("[bold]engine overrides[/] (requested → effective)")
        for ov in o.overrides:
            console.print(Text(shown(f"  {ov.flag}: {ov.requested} → {ov.effective}")))
    if o.probes:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        table.add_column("probe")
        table.add_column("")
        table.add_column("detail", overflow="fold")
        for p in o.probes:
            ok = Text("pass", style="green") if p.passed else Text("FAIL", style="red")
            table.add_row(Text(shown(p.name)), ok, Text(shown(p.detail, 160)))
        console.print(table)
    if o.warnings:
        console.print("[bold]warnings worth knowing[/]")
        for w in o.warnings[:5]:
            console.print(Text("  " + shown(w, 300)))
    if o.log_path:
        console.print(Text(f"log: {shown(str(o.log_path))}", style="dim"))


def _headline(o: Outcome) -> Text:
    """STATUS  class in phase (timings)."""
    style = STATUS_STYLE.get(o.status, "bold")
    head = Text(o.status.upper(), style=style)
    if o.failure_class:
        head.append(f"  {o.failure_class}", style="bold")
    if o.phase and o.status != "works":
        head.append(f" in phase {o.phase}")
    t = o.timings
    bits = []
    if t.to_ready is not None:
        bits.append(f"ready in {t.to_ready:.1f} s")
    bits.append(f"total {t.total:.1f} s")
    if t.fatal_to_teardown is not None:
        bits.append(f"fatal line to teardown {t.fatal_to_teardown:.2f} s")
    if t.simulated is not None:
        bits.append(f"simulated {t.simulated:.0f} s")
    if not o.launched:
        bits.append("not launched")
    if t.total > 0 or not o.launched:
        head.append("   (" + ", ".join(bits) + ")", style="dim")
    return head
