"""``bringup bench``: load an OpenAI-compatible server and report throughput, latency and goodput."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bringup.cli import app
from bringup.cli._common import SafeConsole, options, refusal, shown
from bringup.guard import ranges

if TYPE_CHECKING:
    from bringup.loadgen import BenchConfig, BenchResult, RequestRecord


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _point_table(res: BenchResult) -> Table:
    s = res.summary
    t = Table(
        title=escape(shown(f"{s.point}  ({res.model})")), title_justify="left"
    )  # the server names the model
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
        lines.append(f"[yellow]stopped early[/]: {escape(shown(s.stop_reason))}")
    for err, n in s.errors.items():  # the server's own words: text, never markup
        lines.append(f"[red]error[/] x{n}: {escape(shown(err))}")
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


class BenchOptions:
    """`bringup bench`'s options."""

    url: Annotated[str, typer.Option(help="Server base URL, e.g. http://127.0.0.1:8000")]
    model: Annotated[
        str | None, typer.Option(help="Model name to request (default: the first at /v1/models).")
    ] = None
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="VLLM_API_KEY",
            show_default=False,
            help="Bearer key for a server started with --api-key (or VLLM_API_KEY).",
        ),
    ] = None
    endpoint: Annotated[str, typer.Option(help="completions or chat.")] = "completions"
    num_prompts: Annotated[
        int | None,
        typer.Option(
            help="Requests to measure (default 100, or every line of --prompts).", **ranges.REQUESTS.option()
        ),
    ] = None
    concurrency: Annotated[
        int | None,
        typer.Option(help="Closed loop: keep N requests in flight.", **ranges.CONCURRENCY.option()),
    ] = None
    request_rate: Annotated[
        str | None,
        typer.Option(
            help="Open loop: Poisson arrivals at R req/s ('inf': all at once).", **ranges.RATE.list_option()
        ),
    ] = None
    max_concurrency: Annotated[
        int | None,
        typer.Option(help="Cap on requests in flight with --request-rate.", **ranges.CONCURRENCY.option()),
    ] = None
    burstiness: Annotated[
        float, typer.Option(help="Gamma shape of arrival gaps (1 = Poisson).", **ranges.BURSTINESS.option())
    ] = 1.0
    sweep_concurrency: Annotated[
        str | None,
        typer.Option(help="Sweep: e.g. 1,2,4,8 (one result row each).", **ranges.CONCURRENCY.list_option()),
    ] = None
    sweep_rate: Annotated[
        str | None,
        typer.Option(help="Sweep: e.g. 1,2,4,inf (one result row each).", **ranges.RATE.list_option()),
    ] = None
    input_len: Annotated[
        int,
        typer.Option(
            help="Synthetic prompt length in tokens (special tokens included).", **ranges.TOKENS.option()
        ),
    ] = 256
    output_len: Annotated[
        int, typer.Option(help="Tokens to generate per request (max_tokens).", **ranges.TOKENS.option())
    ] = 64
    range_ratio: Annotated[
        float, typer.Option(help="Spread of lengths around the means.", **ranges.SPREAD.option())
    ] = 0.0
    len_dist: Annotated[
        str, typer.Option(help="Length distribution with --range-ratio: uniform or normal.")
    ] = "uniform"
    prefix_len: Annotated[
        int,
        typer.Option(
            help="Shared prefix tokens before each synthetic prompt.", **ranges.PREFIX_TOKENS.option()
        ),
    ] = 0
    prompts: Annotated[
        Path | None, typer.Option(help='JSONL file: {"prompt": ..., "max_tokens": ...} per line.')
    ] = None
    tokenizer: Annotated[
        str, typer.Option(help="auto, server, words, or a path to tokenizer.json / its folder.")
    ] = "auto"
    seed: Annotated[int, typer.Option(help="Seed for prompts and arrivals.", **ranges.SEED.option())] = 0
    ignore_eos: Annotated[
        bool, typer.Option(help="Ask the server to ignore EOS so outputs have the asked length.")
    ] = True
    warmup: Annotated[
        int, typer.Option(help="Warm-up requests before measuring (not counted).", **ranges.WARMUP.option())
    ] = 1
    slo: Annotated[
        str | None, typer.Option(help="Latency targets, e.g. ttft_p99=2s,itl_p99=50ms,e2e_p90=10s.")
    ] = None
    abort_factor: Annotated[
        float | None,
        typer.Option(
            help="Stop early once an SLO is exceeded by this factor.", **ranges.ABORT_FACTOR.option()
        ),
    ] = None
    timeout: Annotated[
        float, typer.Option(help="Per-request time limit in seconds.", **ranges.SECONDS.option())
    ] = 300.0
    out: Annotated[Path | None, typer.Option(help="Write bench.json, bench.csv and requests.jsonl here.")] = (
        None
    )
    progress: Annotated[bool, typer.Option(help="Show a progress bar (only on a terminal).")] = True
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the summaries as JSON instead of tables.")
    ] = False


@app.command("bench")
@options(BenchOptions)
def bench_cmd(o: BenchOptions) -> None:
    """Benchmark a running OpenAI-compatible server (streaming, timed per token)."""
    # aiohttp and numpy load here, not when the CLI starts: the other commands need neither.
    from bringup.loadgen import BenchError, run_sweep, write_results
    from bringup.loadgen.runner import run_loop

    err = SafeConsole(stderr=True)
    cfg = _config(o, err)
    console = SafeConsole()
    if not console.is_terminal:
        console = SafeConsole(width=160)  # piped output: do not squeeze the sweep table to 80 columns
    bar = _Bar(cfg, err, show=o.progress and not o.json_out and sys.stderr.isatty())
    try:
        with bar.bar:
            results = run_loop(run_sweep(cfg, on_request=bar.on_request, on_point=bar.on_point))
    except BenchError as e:
        err.print(f"[red]error:[/] {escape(shown(e))}", soft_wrap=True, highlight=False)
        raise typer.Exit(1) from None
    if o.json_out:
        print(json.dumps([r.model_dump(mode="json", exclude={"requests"}) for r in results], indent=2))
    else:
        _print_results(results, console)
    if o.out is not None:
        paths = write_results(results, o.out)
        (err if o.json_out else console).print(
            f"wrote {', '.join(shown(p) for p in paths)}", highlight=False, markup=False
        )
    if all(r.summary.completed == 0 for r in results):
        raise typer.Exit(1)


def _config(o: BenchOptions, err: Console) -> BenchConfig:
    """The options as the load generator takes them; what it refuses ends here, exit 2."""
    from pydantic import ValidationError

    from bringup.loadgen import BenchConfig
    from bringup.loadgen.config import parse_slos

    try:
        return BenchConfig(
            url=o.url,
            api_key=o.api_key,
            model=o.model,
            endpoint=o.endpoint,
            num_prompts=o.num_prompts,
            concurrency=o.concurrency,
            request_rate=_one_rate(o.request_rate),
            max_concurrency=o.max_concurrency,
            burstiness=o.burstiness,
            sweep_concurrency=_numbers(o.sweep_concurrency, ranges.CONCURRENCY, "--sweep-concurrency"),
            sweep_rate=_numbers(o.sweep_rate, ranges.RATE, "--sweep-rate"),
            input_len=o.input_len,
            output_len=o.output_len,
            range_ratio=o.range_ratio,
            len_dist=o.len_dist,
            prefix_len=o.prefix_len,
            prompts_file=o.prompts,
            tokenizer=o.tokenizer,
            seed=o.seed,
            ignore_eos=o.ignore_eos,
            warmup=o.warmup,
            slos=parse_slos(o.slo),
            abort_factor=o.abort_factor,
            request_timeout_s=o.timeout,
        )
    except (ValidationError, ValueError) as e:
        err.print(f"[red]error:[/] {escape(shown(refusal(e)))}")
        raise typer.Exit(2) from None


def _numbers(text: str | None, kind: ranges.Range, name: str) -> list | None:
    """A sweep's comma-separated values, each in its kind's range (bringup/guard/ranges.py)."""
    return ranges.number_list(text, kind, name) if text else None


def _one_rate(text: str | None) -> float | None:
    if text is None:
        return None
    rates = ranges.number_list(text, ranges.RATE, "--request-rate")
    if len(rates) > 1:
        raise ValueError(f"--request-rate {text!r}: one rate (a sweep of rates is --sweep-rate)")
    return rates[0]


class _Bar:
    """One progress bar per point of the sweep, on stderr (hidden when not shown)."""

    def __init__(self, cfg: BenchConfig, err: Console, show: bool) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[failed]} failed"),
            TimeElapsedColumn(),
            console=err,
            disable=not show,
            transient=True,
        )
        self.points = cfg.points()
        total = cfg.num_prompts or (None if cfg.prompts_file else 100)
        self.tasks = {
            p.point_label(): self.bar.add_task(p.point_label(), total=total, failed=0, start=False)
            for p in self.points
        }
        self.point = 0

    def on_request(self, rec: RequestRecord) -> None:
        task = self.tasks[self.points[self.point].point_label()]
        self.bar.start_task(task)
        self.bar.advance(task)
        if not rec.ok:
            self.bar.update(task, failed=self.bar.tasks[task].fields["failed"] + 1)

    def on_point(self, res: BenchResult) -> None:
        n = res.summary.num_requests
        self.bar.update(self.tasks[res.summary.point], total=n, completed=n)
        self.point += 1


def _print_results(results: list[BenchResult], console: Console) -> None:
    for r in results:
        console.print(_point_table(r))
        for line in _summary_lines(r):
            console.print(line, highlight=False)
    if len(results) > 1:
        # never squeeze the sweep table into ellipses: a narrow terminal wraps it instead
        SafeConsole(width=max(console.width, 130), force_terminal=console.is_terminal).print(
            _sweep_table(results)
        )
