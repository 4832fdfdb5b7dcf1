"""``bringup bench``: load an OpenAI-compatible server and report throughput, latency and goodput."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bringup.cli import app
from bringup.cli._common import finite, positive, shown

if TYPE_CHECKING:
    from bringup.loadgen import BenchResult, RequestRecord


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _point_table(res: BenchResult) -> Table:
    s = res.summary
    t = Table(title=f"{s.point}  ({res.model})", title_justify="left")
    t.add_column("latency (ms)")
    for col in ("mean", "p50", "p90", "p99"):
        t.add_column(col, justify="right")
    for name in ("ttft", "itl", "tpot", "e2e"):
        st = getattr(s, f"{name}_ms")
        t.add_row(name.upper(), _ms(st.mean), _ms(st.p50), _ms(st.p90), _ms(st.p99))
    return t


def _summary_lines(res: BenchResult) -> list[str]:
    s = res.summary
    lines = [
        f"requests: {s.completed} ok, {s.failed} failed"
        + (f", {s.cancelled} cancelled" if s.cancelled else "")
        + f" in {s.duration_s:.2f} s"
        + (f"  (warm-up failures: {res.warmup_failed})" if res.warmup_failed else ""),
        f"throughput: {s.request_throughput:.2f} req/s, {s.output_throughput:.1f} output tok/s, "
        f"{s.total_token_throughput:.1f} total tok/s",
        f"tokens: {s.input_tokens} in, {s.output_tokens} out"
        + ("" if s.output_tokens_from_usage else " (some counted as chunks: the server sent no usage)")
        + (f", {s.mean_tokens_per_chunk:.2f} tokens/chunk" if s.mean_tokens_per_chunk else ""),
    ]
    if s.good_requests is not None:
        lines.append(
            f"goodput: {s.request_goodput:.2f} req/s, {s.output_goodput:.1f} output tok/s "
            f"({s.good_requests} good requests, attainment {100 * (s.slo_attainment or 0):.0f}%)"
        )
        for c in s.slo_checks:
            lines.append(
                f"  {c.slo} <= {c.target_ms:g} ms: measured {_ms(c.measured_ms)} ms "
                f"{'[green]met[/]' if c.met else '[red]missed[/]'}; {c.good_requests} requests within"
            )
        lines.append(f"SLOs met: {'[green]yes[/]' if s.slos_met else '[red]no[/]'}")
    if s.stopped_early:
        lines.append(f"[yellow]stopped early[/]: {s.stop_reason}")
    for err, n in s.errors.items():
        lines.append(f"[red]error[/] x{n}: {err}")
    return lines


def _short(point: str) -> str:
    return point.replace("max_concurrency=", "cap=").replace("concurrency=", "c=").replace("rate=", "r=")


def _sweep_table(results: list[BenchResult]) -> Table:
    t = Table(title="sweep (latencies in ms)", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for c in (
        "point",
        "ok/fail",
        "req/s",
        "out tok/s",
        "TTFT p50",
        "TTFT p99",
        "ITL p99",
        "TPOT p50",
        "good req/s",
        "SLOs",
    ):
        t.add_column(c, justify="left" if c == "point" else "right", no_wrap=True)
    for r in results:
        s = r.summary
        t.add_row(
            _short(s.point),
            f"{s.completed}/{s.failed}",
            f"{s.request_throughput:.2f}",
            f"{s.output_throughput:.0f}",
            _ms(s.ttft_ms.p50),
            _ms(s.ttft_ms.p99),
            _ms(s.itl_ms.p99),
            _ms(s.tpot_ms.p50),
            "-" if s.request_goodput is None else f"{s.request_goodput:.2f}",
            "-" if s.slos_met is None else ("yes" if s.slos_met else "no"),
        )
    return t


@app.command("bench")
def bench_cmd(
    url: str = typer.Option(..., help="Server base URL, e.g. http://127.0.0.1:8000"),
    model: str = typer.Option(None, help="Model name to request (default: the first at /v1/models)."),
    api_key: str = typer.Option(
        None,
        envvar="VLLM_API_KEY",
        show_default=False,
        help="Bearer key for a server started with --api-key (or VLLM_API_KEY).",
    ),
    endpoint: str = typer.Option("completions", help="completions or chat."),
    num_prompts: int = typer.Option(
        None, min=1, help="Requests to measure (default 100, or every line of --prompts)."
    ),
    concurrency: int = typer.Option(None, min=1, help="Closed loop: keep N requests in flight."),
    request_rate: str = typer.Option(
        None, help="Open loop: Poisson arrivals at R req/s ('inf': all at once)."
    ),
    max_concurrency: int = typer.Option(None, min=1, help="Cap on requests in flight with --request-rate."),
    burstiness: float = typer.Option(
        1.0, help="Gamma shape of arrival gaps (1 = Poisson).", callback=positive
    ),
    sweep_concurrency: str = typer.Option(None, help="Sweep: e.g. 1,2,4,8 (one result row each)."),
    sweep_rate: str = typer.Option(None, help="Sweep: e.g. 1,2,4,inf (one result row each)."),
    input_len: int = typer.Option(
        256, min=1, help="Synthetic prompt length in tokens (special tokens included)."
    ),
    output_len: int = typer.Option(64, min=1, help="Tokens to generate per request (max_tokens)."),
    range_ratio: float = typer.Option(
        0.0, min=0.0, max=0.99, help="Spread of lengths around the means.", callback=finite
    ),
    len_dist: str = typer.Option(
        "uniform", help="Length distribution with --range-ratio: uniform or normal."
    ),
    prefix_len: int = typer.Option(0, min=0, help="Shared prefix tokens before each synthetic prompt."),
    prompts: Path = typer.Option(None, help='JSONL file: {"prompt": ..., "max_tokens": ...} per line.'),
    tokenizer: str = typer.Option(
        "auto", help="auto, server, words, or a path to tokenizer.json / its folder."
    ),
    seed: int = typer.Option(0, help="Seed for prompts and arrivals."),
    ignore_eos: bool = typer.Option(
        True, help="Ask the server to ignore EOS so outputs have the asked length."
    ),
    warmup: int = typer.Option(1, min=0, help="Warm-up requests before measuring (not counted)."),
    slo: str = typer.Option(None, help="Latency targets, e.g. ttft_p99=2s,itl_p99=50ms,e2e_p90=10s."),
    abort_factor: float = typer.Option(
        None, help="Stop early once an SLO is exceeded by this factor.", callback=positive
    ),
    timeout: float = typer.Option(300.0, help="Per-request time limit in seconds.", callback=positive),
    out: Path = typer.Option(None, help="Write bench.json, bench.csv and requests.jsonl here."),
    progress: bool = typer.Option(True, help="Show a progress bar (only on a terminal)."),
    json_out: bool = typer.Option(False, "--json", help="Print the summaries as JSON instead of tables."),
) -> None:
    """Benchmark a running OpenAI-compatible server (streaming, timed per token)."""
    # aiohttp and numpy load here, not when the CLI starts: the other commands need neither.
    from pydantic import ValidationError
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from bringup.loadgen import BenchConfig, BenchError, run_sweep, write_results
    from bringup.loadgen.config import parse_number_list, parse_slos
    from bringup.loadgen.runner import run_loop

    err = Console(stderr=True)
    try:
        cfg = BenchConfig(
            url=url,
            api_key=api_key,
            model=model,
            endpoint=endpoint,
            num_prompts=num_prompts,
            concurrency=concurrency,
            request_rate=None if request_rate is None else parse_number_list(request_rate)[0],
            max_concurrency=max_concurrency,
            burstiness=burstiness,
            sweep_concurrency=parse_number_list(sweep_concurrency, int) if sweep_concurrency else None,
            sweep_rate=parse_number_list(sweep_rate) if sweep_rate else None,
            input_len=input_len,
            output_len=output_len,
            range_ratio=range_ratio,
            len_dist=len_dist,
            prefix_len=prefix_len,
            prompts_file=prompts,
            tokenizer=tokenizer,
            seed=seed,
            ignore_eos=ignore_eos,
            warmup=warmup,
            slos=parse_slos(slo),
            abort_factor=abort_factor,
            request_timeout_s=timeout,
        )
    except (ValidationError, ValueError) as e:
        msgs = (
            [f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors()]
            if isinstance(e, ValidationError)
            else [str(e)]
        )
        err.print(f"[red]error:[/] {escape(shown('; '.join(msgs)))}")
        raise typer.Exit(2) from None

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # piped output: do not squeeze the sweep table to 80 columns
    show = progress and not json_out and sys.stderr.isatty()
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failed]} failed"),
        TimeElapsedColumn(),
        console=err,
        disable=not show,
        transient=True,
    )
    points = cfg.points()
    total = cfg.num_prompts or (None if cfg.prompts_file else 100)
    tasks = {
        p.point_label(): bar.add_task(p.point_label(), total=total, failed=0, start=False) for p in points
    }
    state = {"point": 0}

    def on_request(rec: RequestRecord) -> None:
        task = tasks[points[state["point"]].point_label()]
        bar.start_task(task)
        bar.advance(task)
        if not rec.ok:
            bar.update(task, failed=bar.tasks[task].fields["failed"] + 1)

    def on_point(res: BenchResult) -> None:
        bar.update(
            tasks[res.summary.point], total=res.summary.num_requests, completed=res.summary.num_requests
        )
        state["point"] += 1

    try:
        with bar:
            results = run_loop(run_sweep(cfg, on_request=on_request, on_point=on_point))
    except BenchError as e:
        err.print(f"[red]error:[/] {escape(shown(e))}", soft_wrap=True, highlight=False)
        raise typer.Exit(1) from None

    if json_out:
        print(json.dumps([r.model_dump(mode="json", exclude={"requests"}) for r in results], indent=2))
    else:
        for r in results:
            console.print(_point_table(r))
            for line in _summary_lines(r):
                console.print(line, highlight=False)
        if len(results) > 1:
            # never squeeze the sweep table into ellipses: a narrow terminal wraps it instead
            Console(width=max(console.width, 130), force_terminal=console.is_terminal).print(
                _sweep_table(results)
            )
    if out is not None:
        paths = write_results(results, out)
        (err if json_out else console).print(
            f"wrote {', '.join(shown(p) for p in paths)}", highlight=False, markup=False
        )
    if all(r.summary.completed == 0 for r in results):
        raise typer.Exit(1)
