"""``bringup report``: reprint a run's report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bringup.cli import app
from bringup.cli._common import err_console, options, out_console, print_json, runs_root, shown, usage_error


def find_run_dir(run: str, runs_dir: Path | None) -> Path:
    p = Path(run)
    if (p / "findings.json").is_file():
        return p
    root = runs_root(runs_dir)
    if (root / "runs" / run / "findings.json").is_file():
        return root / "runs" / run
    j = root / "journal.sqlite"
    if j.is_file():
        from bringup.record.journal import Journal

        row = Journal(j, readonly=True).run(run)
        if row and (Path(row.run_dir) / "findings.json").is_file():
            return Path(row.run_dir)
    raise usage_error(
        f"no finished run {run!r}: give a run folder (with findings.json) or a run id in "
        f"{root} (bringup run prints both)"
    )


class ReportOptions:
    """`bringup report`'s options."""

    run: Annotated[str, typer.Argument(help="A run folder or run id.")]
    runs_dir: Annotated[Path | None, typer.Option(help="Runs folder (default ./bringup-runs).")] = None
    json_out: Annotated[bool, typer.Option("--json", help="Print findings.json.")] = False
    html: Annotated[
        bool, typer.Option("--html", help="Write report.html (bring-up and tuning) and print its path.")
    ] = False


@app.command("report")
@options(ReportOptions)
def report_cmd(o: ReportOptions) -> None:
    """Reprint FINDINGS.md of a run (regenerated from findings.json)."""
    from bringup.report.findings import (  # inside: `bringup --help` stays fast
        FindingsDamaged,
        load_result,
        render_markdown,
    )

    d = find_run_dir(o.run, o.runs_dir)
    try:
        result = load_result(d)
    except FindingsDamaged as e:
        raise usage_error(str(e)) from None
    if o.html:
        from bringup.report.html import load_tunes, write_html

        out_console.print(str(write_html(d, result, load_tunes(d))))
        return
    if o.json_out:
        print_json(result.model_dump())
    else:
        from bringup.tuning.result import load_tunes

        text = render_markdown(result, load_tunes(d))
        try:  # a read-only runs folder still gets its report on the terminal
            from bringup.guard import secrets

            secrets.write_text(d / "FINDINGS.md", text)
        except OSError as e:
            err_console.print(
                f"FINDINGS.md not rewritten ({shown(e.strerror or e)}); printing the report only",
                markup=False,
            )
        out_console.print(text, markup=False, highlight=False)
