"""``bringup run --ray ADDRESS --node-types all|TYPE,...``: the terminal side of bringup/session/nodetypes.py.

Several runs at once share one terminal, so no live table: each type prints one dim line per
launch and one per attempt, prefixed with its type; the end is one table, a line per type.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.table import Table
from rich.text import Text

from bringup.cli._common import err_console, out_console, print_json, usage_error

if TYPE_CHECKING:
    from bringup.record.results import Attempt, Purpose, RunResult
    from bringup.search.space import Space
    from bringup.session.nodetypes import NodeTypesResult
    from bringup.session.settings import RunSettings


class TypeLines:
    """One node type's progress as plain lines on stderr (a RunObserver, bringup.session.settings)."""

    def __init__(self, node_type: str) -> None:
        self.tag = node_type.removeprefix("bringup-hw-")

    def started(self, run_id: str, run_dir: Path, space: Space, resumed: int) -> None:
        err_console.print(f"[{self.tag}] run {run_id}: {space.size():,} configurations", markup=False)

    def launching(self, seq: int, purpose: Purpose, changes: str, screen: bool) -> None:
        err_console.print(f"[{self.tag}] #{seq} {purpose}: {changes[:100]}", markup=False, style="dim")

    def trial_event(self, kind: str, text: str) -> None:
        if kind == "gpu":
            err_console.print(f"[{self.tag}] gpu: {text}", markup=False)

    def attempted(self, attempt: Attempt) -> None:
        why = "all probes passed" if attempt.status == "works" else (attempt.failure_class or "")
        err_console.print(f"[{self.tag}] #{attempt.number} {attempt.status}: {why}", markup=False)

    def finished(self, result: RunResult) -> None:
        pass


def table(res: NodeTypesResult) -> Table:
    """The end of a bring-up over node types: a line per type, with where its report is."""
    from bringup.session.nodetypes import verdict

    t = Table(
        title=f"{sum(x.validated for x in res.types)} of {len(res.types)} node types validated", box=None
    )
    for c in ("node type", "nodes", "verdict", "why", "command", "launches", "wall s", "report"):
        t.add_column(c, overflow="fold")
    for x in res.types:
        style = "green" if x.validated else ("yellow" if x.status in ("no-node", "interrupted") else "red")
        launches = str(x.launches) + (f"+{x.minimize_launches}" if x.minimize_launches else "")
        t.add_row(
            x.node_type,
            str(x.nodes),
            Text(verdict(x), style=style),
            Text(x.why),
            Text(x.command or ""),
            launches,
            f"{x.wall_seconds:.1f}",
            Text(x.report or x.findings or ""),
        )
    return t


def node_types_if_asked(
    settings: RunSettings, root: Path, asked: str | None, json_out: bool, resume: bool
) -> None:
    """`bringup run`'s branch for --node-types: returns at once without it, else never returns."""
    if asked is not None:
        run_node_types(settings, root, asked, json_out, resume)


def facts_of_node_type(settings: RunSettings) -> tuple[dict, Any] | None:
    """A resumed run of one node type (RUNS_DIR/<type>, its settings name the type) reads the facts
    of a node of that type again, not this machine's; None for any other run."""
    from bringup.session.nodetypes import facts_for_type
    from bringup.trial.rayexec import RayClusterError, RayMissing

    try:
        return facts_for_type(settings)
    except (RayClusterError, RayMissing) as e:
        raise usage_error(str(e)) from None


def run_node_types(settings: RunSettings, root: Path, asked: str, json_out: bool, resume: bool) -> NoReturn:
    """Bring up every asked node type; exit 0 when each validated, 1 when one did not, 2 on bad
    usage (no cluster, no node type at all), 128+N on a signal after every type's trials are down."""
    if not settings.ray or resume:
        raise usage_error(
            "--node-types needs --ray ADDRESS and a new run (resume one type's run with "
            "--resume --runs-dir RUNS_DIR/<type>)"
        )
    from bringup.session.nodetypes import SUMMARY_MD, NodeTypes
    from bringup.trial.process import Interrupted
    from bringup.trial.rayexec import RayClusterError, RayMissing

    def on_term(signum: int, frame: object) -> None:
        raise Interrupted(signum)

    old = signal.signal(signal.SIGTERM, on_term)
    nt = NodeTypes(settings, root, asked, observer_for=None if json_out else TypeLines)
    try:
        res = nt.execute()
    except (RayClusterError, RayMissing) as e:
        raise usage_error(str(e)) from None
    except (Interrupted, KeyboardInterrupt) as e:
        code = e.exit_code if isinstance(e, Interrupted) else 130
        err_console.print("[bold yellow]interrupted; every node type's trials torn down.[/]")
        raise typer.Exit(code) from None
    finally:
        signal.signal(signal.SIGTERM, old)
    if json_out:
        print_json(res.model_dump())
    else:
        out_console.print(table(res))
        for x in res.types:
            if x.note:
                out_console.print(f"{x.node_type}: {x.note}", style="dim", markup=False)
        out_console.print(f"summary: {root / SUMMARY_MD}")
    raise typer.Exit(0 if res.all_validated else 1)
