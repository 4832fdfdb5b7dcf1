"""``bringup lessons``: what finished runs proved, kept for the next machine (docs/lessons.md).

`export` writes a run's lessons (bringup/report/learned.py), `list` and `show` print them with their
scope and evidence, `merge` joins two machines' files without resolving a disagreement by
overwriting (bringup/knowledge/learned_files.py); `bringup run --lessons PATH` reads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from bringup.cli import app
from bringup.cli._common import err_console, options, out_console, print_json, shown, usage_error

if TYPE_CHECKING:
    from bringup.knowledge.learned import Lesson
    from bringup.knowledge.learned_files import Loaded

lessons_app = typer.Typer(
    name="lessons",
    help="Lessons that travel: what a run proved (a failure, the fix that cured it, the scope it holds "
    "in), exported for `bringup run --lessons` on the next machine.",
    no_args_is_help=True,
)
app.add_typer(lessons_app, name="lessons")

PATHS_HELP = "Lesson files or folders (default: BRINGUP_LESSONS, a path list)."


def _paths(given: list[Path] | None) -> list[Path]:
    import os

    paths = list(given or []) or [
        Path(p) for p in os.environ.get("BRINGUP_LESSONS", "").split(os.pathsep) if p
    ]
    if not paths:
        raise usage_error("no lessons named: give a file or folder, or set BRINGUP_LESSONS")
    return paths


def _read(paths: list[Path]) -> Loaded:
    """The lessons at ``paths``; each refusal printed (the file, the entry, why)."""
    from bringup.knowledge.learned_files import read_lessons

    loaded = read_lessons(paths)
    for why in loaded.refused:
        err_console.print(f"refused: {shown(why, 400)}", markup=False)
    return loaded


class ExportOptions:
    """`bringup lessons export`'s options."""

    runs: Annotated[list[str], typer.Argument(help="Finished runs: run folders or run ids.")]
    out: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--out",
            help="A file (its lessons are kept: the new ones are merged in) or a folder (one file per "
            "run, RUN.yaml); default: print the YAML.",
        ),
    ] = None
    runs_dir: Annotated[
        Path | None, typer.Option(help="Runs folder for run ids (default ./bringup-runs).")
    ] = None


@lessons_app.command("export")
@options(ExportOptions)
def export_cmd(o: ExportOptions) -> None:
    """Write the lessons of finished runs: each failure on the way to the fix, the changes that cured
    it, the scope, and the trial logs that prove it."""
    from bringup.cli.report import find_run_dir
    from bringup.knowledge.learned_files import dump, merge, write_lessons
    from bringup.report.learned import ExportError, learned

    per_run: list[tuple[str, list[Lesson]]] = []
    for run in o.runs:
        d = find_run_dir(run, o.runs_dir)
        try:
            ex = learned(d)
        except ExportError as e:
            raise usage_error(str(e)) from None
        for note in ex.notes:
            err_console.print(shown(note, 300), markup=False)
        per_run.append((d.name, ex.lessons))
        err_console.print(f"{d.name}: {len(ex.lessons)} lesson(s)", markup=False)
    out = Path(o.out) if o.out else None
    if out is not None and (out.is_dir() or o.out.endswith(("/", "\\"))):  # type: ignore[union-attr]
        for name, lessons in per_run:
            if lessons:
                write_lessons(out / f"{name}.yaml", lessons)
                out_console.print(str(out / f"{name}.yaml"))
        return
    old = [ls for ls, _ in _existing(out).lessons] if out is not None else []
    merged, notes = merge([old, *(ls for _, ls in per_run)])
    for note in notes:
        err_console.print(shown(note, 400), markup=False)
    if out is None:
        out_console.print(dump(merged), markup=False, highlight=False, end="")
    else:
        write_lessons(out, merged)
        out_console.print(f"{out}: {len(merged)} lesson(s) ({len(old)} there before)")


def _existing(path: Path) -> Loaded:
    """The lessons already in an export's file (refused entries stop the export: never lost)."""
    from bringup.knowledge.learned_files import Loaded

    if not path.exists() and not path.is_symlink():
        return Loaded()
    loaded = _read([path])
    if loaded.refused:
        raise usage_error(f"{path}: holds entries that cannot be read (above); fix them or write elsewhere")
    return loaded


class ListOptions:
    """`bringup lessons list`'s options."""

    paths: Annotated[list[Path] | None, typer.Argument(help=PATHS_HELP)] = None
    json_out: Annotated[bool, typer.Option("--json", help="Print the lessons as JSON.")] = False


@lessons_app.command("list")
@options(ListOptions)
def list_cmd(o: ListOptions) -> None:
    """One line per lesson: its failure, fix, scope, strength, where it was learned; refusals on stderr."""
    loaded = _read(_paths(o.paths))
    if o.json_out:
        print_json([ls.model_dump(mode="json", by_alias=True) for ls, _ in loaded.lessons])
    else:
        out_console.print(_table([ls for ls, _ in loaded.lessons]))
    if loaded.refused:
        raise typer.Exit(2)


def _table(lessons: list[Lesson]) -> Table:
    t = Table(box=None, header_style="bold")
    for c in ("id", "failure", "fix", "scope", "strength", "learned in"):
        t.add_column(c, overflow="fold")
    for ls in lessons:
        mark = (" conflict" if ls.conflict else "") + (f" against {len(ls.against)}" if ls.against else "")
        t.add_row(
            ls.id,
            Text(f"{ls.failure.failure_class} / {ls.failure.phase or '?'}"),
            Text(shown(ls.describe_fix(), 60)),
            Text(shown(ls.scope.describe(), 70)),
            Text(f"{ls.strength:g}{mark}", style="red" if mark else ""),
            Text(
                f"{ls.source.run} ({ls.source.machine})" + (f" +{len(ls.confirmed)}" if ls.confirmed else "")
            ),
        )
    return t


class ShowOptions:
    """`bringup lessons show`'s options."""

    id: Annotated[str, typer.Argument(help="A lesson id (or its start: L-07).")]
    paths: Annotated[list[Path] | None, typer.Argument(help=PATHS_HELP)] = None


@lessons_app.command("show")
@options(ShowOptions)
def show_cmd(o: ShowOptions) -> None:
    """Every copy of a lesson: failure, fix, scope, evidence (the trial logs), confirmations, conflicts."""
    loaded = _read(_paths(o.paths))
    found = [(ls, where) for ls, where in loaded.lessons if ls.id.startswith(o.id)]
    if not found:
        raise usage_error(f"no lesson {o.id!r} in {', '.join(str(p) for p in _paths(o.paths))}")
    for ls, where in found:
        out_console.print("\n".join(describe(ls, where)), markup=False, highlight=False)
    if loaded.refused:
        raise typer.Exit(2)


def describe(ls: Lesson, where: str) -> list[str]:
    """A lesson in words, for `show`."""
    f, src = ls.failure, ls.source
    out = [
        f"{ls.id}  ({where})",
        f"  failure   {f.failure_class} in {f.phase or '?'}"
        + (f", signature {f.signature}" if f.signature else ""),
        f"  root      {f.root}",
        f"  fix       {ls.describe_fix()}" + ("  (minimal: verified)" if ls.minimal else "  (not minimised)"),
        f"  scope     {ls.scope.describe()}",
        f"            driver {ls.scope.driver or '?'}, CUDA {ls.scope.cuda or '?'}",
        f"  strength  {ls.strength:g}",
        f"  learned   run {src.run} on {src.machine}, exported {src.exported or '?'}",
        *(f"    proof   {t}" for t in src.trials),
        *(f"  confirmed run {s.run} on {s.machine}: {', '.join(s.trials)}" for s in ls.confirmed),
        *(f"  AGAINST   run {e.run}: {e.trial}: {e.line}" for e in ls.against),
    ]
    if ls.conflict:
        out.append(f"  CONFLICT  {ls.conflict}")
    return out


class MergeOptions:
    """`bringup lessons merge`'s options."""

    inputs: Annotated[list[Path], typer.Argument(help="Two (or more) lesson files or folders.")]
    out: Annotated[Path, typer.Option("-o", "--out", help="The merged file.")]


@lessons_app.command("merge")
@options(MergeOptions)
def merge_cmd(o: MergeOptions) -> None:
    """Join machines' lessons: the same lesson once (every machine that learned it kept); where they
    disagree, both copies kept, each saying what the other says."""
    from bringup.knowledge.learned_files import merge, write_lessons

    if len(o.inputs) < 2:
        raise usage_error("merge needs two lesson files or folders (A B -o C)")
    groups = []
    for p in o.inputs:
        loaded = _read([p])
        if loaded.refused:
            raise usage_error(f"{p}: holds entries that cannot be read (above): nothing was written")
        groups.append([ls for ls, _ in loaded.lessons])
    merged, notes = merge(groups)
    write_lessons(o.out, merged)
    for note in notes:
        out_console.print(shown(note, 500), markup=False)
    kept = sum(len(g) for g in groups)
    out_console.print(
        f"{o.out}: {len(merged)} lesson(s) from {kept}, {len(notes)} conflict(s) kept and shown"
    )
