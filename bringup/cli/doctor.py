"""``bringup doctor``, ``bringup model`` and ``bringup plan``: the machine, the model, the memory plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from bringup.cli import app
from bringup.cli._common import SafeConsole, options, refuse_damaged_model
from bringup.guard import ranges

if TYPE_CHECKING:  # the command imports them inside: `bringup --help` stays light
    from bringup.facts.memplan import Plan
    from bringup.facts.modelinfo import Fingerprint

console = SafeConsole()


class DoctorOptions:
    """`bringup doctor`'s options."""

    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print one JSON object (gpus, driver, cuda, topology, packages, facts)."),
    ] = False
    smem: Annotated[
        bool | None,
        typer.Option(
            "--smem/--no-smem",
            help="Measure SM count and shared memory per block (default: "
            "where PyTorch is installed, from torch.cuda.get_device_properties).",
        ),
    ] = None
    from_dir: Annotated[
        Path | None,
        typer.Option(
            "--from", help="Read a folder recorded with `python -m bringup.facts.hardware --record`."
        ),
    ] = None


@app.command("doctor")
@options(DoctorOptions)
def doctor_cmd(o: DoctorOptions) -> None:
    """The machine: GPUs, compute capability, memory, driver, CUDA, GPU links, CPUs, engine packages."""
    from bringup.facts import hardware  # inside each command: `bringup --help` imports no command's modules

    snap = hardware.from_recorded(o.from_dir) if o.from_dir else hardware.snapshot(smem=o.smem)
    f, src = hardware.facts_with_sources(snap)
    if o.as_json:
        d = snap.to_dict()
        d["facts"], d["fact_sources"] = f, src
        from bringup.session.identity import hardware_fingerprint
        from bringup.trial.rayexec import resource_name

        d["fingerprint"] = hardware_fingerprint(f, None)
        d["ray_resource"] = resource_name(d["fingerprint"])
        typer.echo(json.dumps(d, indent=2))
        return
    if snap.gpus:
        console.print(_gpu_table(snap, f, src))
    else:
        console.print(
            "[bold]No NVIDIA GPU[/bold] on this machine: CPU targets only (such as the vLLM CPU build)."
        )
    console.print(f"host: {f['cpu.count']} CPUs, {f['host.memory_gib']} GiB memory")
    console.print(_package_table(snap))
    for n in snap.notes:
        console.print(f"note: {n}")
    from bringup.session.identity import hardware_fingerprint
    from bringup.trial.rayexec import worker_command  # Ray itself is not imported

    fp = hardware_fingerprint(f, None)
    console.print(
        f"hardware fingerprint: {fp}; a Ray worker of this machine joins with: {worker_command(fp)}",
        soft_wrap=True,
    )


def _gpu_table(snap: Any, f: dict[str, Any], src: dict[str, str]) -> Table:
    t = Table(
        title=f"{len(snap.gpus)} GPU(s), driver {snap.driver or '?'}, CUDA {snap.cuda or '?'}, "
        f"link {snap.topology.link}"
    )
    for col in ("#", "name", "cc", "memory", "SMs", "smem/block (opt-in)"):
        t.add_column(col)
    for g in snap.gpus:
        smem_txt = (
            f"{g.smem_per_block_optin // 1024} KiB (measured, {g.smem_source})"
            if g.smem_per_block_optin
            else (
                f"{f['gpu.smem_per_block_kib']} KiB (table)"
                if src["gpu.smem_per_block_kib"] == "table"
                else "?"
            )
        )
        t.add_row(
            str(g.index),
            g.name,
            g.compute_capability or "?",
            f"{g.memory_gib:.1f} GiB",
            str(g.multiprocessor_count or "?"),
            smem_txt,
        )
    return t


def _package_table(snap: Any) -> Table:
    from bringup.facts import hardware

    pk = Table(title="packages")
    pk.add_column("package")
    pk.add_column("version")
    for name, ver in snap.packages.items():
        dist = snap.package_dists.get(name)
        label = name + (f" [{dist}]" if dist and dist not in (name, hardware.PACKAGES[name][0]) else "")
        pk.add_row(label, ver or "[dim]absent[/dim]")
    return pk


def _model_cmd(model_dir: Path, as_json: bool, kv_dtype: list[str]) -> None:
    from bringup.facts import modelinfo

    refuse_damaged_model(model_dir)
    try:
        fp = modelinfo.fingerprint(model_dir)
    except (OSError, ValueError) as e:  # PreflightError, SafetensorsError: the file and the fault
        raise typer.BadParameter(str(e)) from None
    if as_json:
        d = {
            "fingerprint": fp.to_dict(),
            "facts": modelinfo.facts(fp),
            "kv_bytes_per_token": {k: modelinfo.kv_cache_bytes(fp, k).alloc_bytes for k in kv_dtype},
        }
        typer.echo(json.dumps(d, indent=2, default=str))
        return
    for line in modelinfo.report_lines(fp, tuple(kv_dtype)):
        console.print(line, highlight=False)


@app.command("model")
def model_cmd(
    model_dir: Path = typer.Argument(..., help="Model folder (config.json, safetensors)."),
    as_json: bool = typer.Option(False, "--json", help="Print the fingerprint and its facts as JSON."),
    kv_dtype: list[str] = typer.Option(
        ["bfloat16", "fp8_e4m3"], "--kv-dtype", help="KV dtypes to cost per token."
    ),
) -> None:
    """The model's fingerprint: architecture, attention kind, MoE, quantization, exact weight bytes."""
    _model_cmd(model_dir, as_json, kv_dtype)


@app.command("fingerprint", hidden=True)
def fingerprint_cmd(
    model_dir: Path = typer.Argument(...),
    as_json: bool = typer.Option(False, "--json"),
    kv_dtype: list[str] = typer.Option(["bfloat16", "fp8_e4m3"], "--kv-dtype"),
) -> None:
    """Same as `bringup model`."""
    _model_cmd(model_dir, as_json, kv_dtype)


class PlanOptions:
    """`bringup plan`'s options."""

    model_dir: Annotated[
        Path | None,
        typer.Argument(help="Model folder (config.json; safetensors optional with --weights-gib)."),
    ] = None
    weights_gib: Annotated[
        float | None,
        typer.Option(
            "--weights-gib", help="Weights per GPU in GiB (overrides the headers).", **ranges.GIB.option()
        ),
    ] = None
    gpus: Annotated[
        int | None,
        typer.Option(
            "--gpus",
            help="GPUs on the machine (default: what doctor finds, else tp).",
            **ranges.GPUS.option(),
        ),
    ] = None
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel size.", **ranges.GPUS.option())] = 1
    ep: Annotated[int, typer.Option("--ep", help="Expert-parallel size.", **ranges.GPUS.option())] = 1
    mem_fraction: Annotated[
        float,
        typer.Option(
            "--mem-fraction",
            help="SGLang --mem-fraction-static / vLLM --gpu-memory-utilization.",
            **ranges.FRACTION.option(),
        ),
    ]
    engine: Annotated[str, typer.Option("--engine", help="sglang or vllm.")] = "sglang"
    gpu_mem_gib: Annotated[
        float | None,
        typer.Option(
            "--gpu-mem-gib", help="Memory per GPU in GiB (default: this machine's).", **ranges.GIB.option()
        ),
    ] = None
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="The engine's --kv-cache-dtype.")] = "auto"
    cc: Annotated[
        float | None,
        typer.Option(
            "--cc", help="Compute capability (default: this machine's).", **ranges.COMPUTE_CAPABILITY.option()
        ),
    ] = None
    context_len: Annotated[
        int | None,
        typer.Option("--context-len", help="Max context (default: the model's).", **ranges.SIZE.option()),
    ] = None
    max_running_requests: Annotated[
        int | None,
        typer.Option(
            "--max-running-requests",
            help="SGLang --max-running-requests / vLLM --max-num-seqs.",
            **ranges.SIZE.option(),
        ),
    ] = None
    cuda_graph_max_bs: Annotated[int | None, typer.Option("--cuda-graph-max-bs", **ranges.SIZE.option())] = (
        None
    )
    chunked_prefill_size: Annotated[
        int | None, typer.Option("--chunked-prefill-size", **ranges.SIZE.option())
    ] = None
    device: Annotated[
        str | None,
        typer.Option("--device", help="cuda or cpu (default: cuda when a GPU or --gpu-mem-gib is given)."),
    ] = None
    runs_dir: Annotated[
        Path | None,
        typer.Option(
            "--runs-dir",
            help="Correct the plan with what engines reported on this "
            "machine before (the journal of that runs folder).",
        ),
    ] = None
    as_json: Annotated[bool, typer.Option("--json")] = False


@app.command("plan")
@options(PlanOptions)
def plan_cmd(o: PlanOptions) -> None:
    """Will it fit? Weights per GPU, the KV pool and its tokens, and the CUDA-graph headroom."""
    from bringup.facts import hardware, memplan, modelinfo

    if o.model_dir is None and o.weights_gib is None:
        raise typer.BadParameter("give a model folder, --weights-gib, or both")
    fp = None
    if o.model_dir is not None:
        refuse_damaged_model(o.model_dir)
        try:
            fp = modelinfo.fingerprint(o.model_dir)
        except (OSError, ValueError) as e:  # PreflightError, SafetensorsError: the file and the fault
            raise typer.BadParameter(str(e)) from None
    p = _plan(o, fp)
    if o.runs_dir is not None and (o.runs_dir / "journal.sqlite").is_file():
        from bringup.record.journal import Journal
        from bringup.session.identity import hardware_fingerprint

        hw_fp = hardware_fingerprint(hardware.facts(hardware.snapshot()), None)
        p = memplan.corrected(p, Journal(o.runs_dir / "journal.sqlite").plan_errors(hw_fp, o.engine))
    if o.as_json:
        typer.echo(json.dumps(p.to_dict(), indent=2))
        return
    _print_plan(p)


def _plan(o: PlanOptions, fp: Fingerprint | None) -> Plan:
    """The plan, on this machine's GPUs (or its host memory, for the vLLM CPU build) unless the
    options name another machine."""
    from bringup.facts import memplan

    gpu_mem_gib, cc, gpus, device, host_avail = _machine(o)
    try:
        return memplan.plan(
            gpu_mem_gib=gpu_mem_gib,
            tp=o.tp,
            ep=o.ep,
            mem_fraction=o.mem_fraction,
            engine=o.engine,
            fp=fp,
            weights_gib=o.weights_gib,
            gpus=gpus if gpus and gpus >= o.tp else None,
            kv_dtype=o.kv_dtype,
            compute_capability=cc,
            context_len=o.context_len,
            max_running_requests=o.max_running_requests,
            cuda_graph_max_bs=o.cuda_graph_max_bs,
            chunked_prefill_size=o.chunked_prefill_size,
            device=device or "cuda",
            host_available_gib=host_avail,
        )
    except ValueError as e:
        raise typer.BadParameter(str(e)) from e


def _machine(o: PlanOptions) -> tuple[Any, Any, Any, str | None, float | None]:
    """(GPU memory, compute capability, GPUs, device, host memory available): as given, else this
    machine's (its host memory for the vLLM CPU build when it has no GPU)."""
    from bringup.facts import hardware

    gpu_mem_gib, cc, gpus, device, host_avail = o.gpu_mem_gib, o.cc, o.gpus, o.device, None
    if gpu_mem_gib is None or cc is None or gpus is None:
        f = hardware.facts(hardware.snapshot())
        if gpu_mem_gib is None:
            if f["gpu.memory_gib"]:
                gpu_mem_gib = f["gpu.memory_gib"]
            elif o.engine == "vllm" and f["host.memory_gib"]:
                gpu_mem_gib, device = f["host.memory_gib"], device or "cpu"
                host_avail = _host_available_gib()
            else:
                raise typer.BadParameter(
                    "no GPU found here: pass --gpu-mem-gib (and --cc) to plan for another machine"
                )
        cc = cc if cc is not None else f["gpu.compute_capability"]
        gpus = gpus if gpus is not None else (f["gpu.count"] or None)
    return gpu_mem_gib, cc, gpus, device, host_avail


def _print_plan(p: Any) -> None:
    colour = {"fits": "green", "tight": "yellow", "graph-capture-risk": "red", "does-not-fit": "red"}[
        p.verdict
    ]
    t = Table(
        title=f"{p.engine} on {p.gpus or 'CPU'} x {p.gpu_mem_gib:.1f} GiB, tp {p.tp}, fraction {p.mem_fraction}"
    )
    t.add_column("")
    t.add_column("per GPU", justify="right")
    t.add_row("weights", f"{p.weights_per_gpu_gib:.2f} GiB ({p.weights_source})")
    t.add_row("KV budget", f"{p.kv_budget_gib:.2f} GiB")
    t.add_row("KV pool", f"{p.kv_gib:.2f} GiB" if p.kv_gib is not None else "? (no model config)")
    t.add_row("KV tokens", f"{p.kv_tokens:,}" if p.kv_tokens is not None else "?")
    if p.kv_bytes_per_token:
        t.add_row("KV per token", f"{p.kv_bytes_per_token:,.0f} B ({p.kv_dtype})")
    t.add_row("outside the fraction", f"{p.outside_fraction_gib:.2f} GiB")
    if p.free_after_pools_gib is not None:
        t.add_row("left after pools", f"{p.free_after_pools_gib:.2f} GiB")
        t.add_row("needed for graph capture", f"{p.reserve_min_gib:.2f} GiB")
        t.add_row("engine's default reserve", f"{p.reserve_engine_gib:.2f} GiB")
    console.print(t)
    console.print(f"verdict: [bold {colour}]{p.verdict}[/bold {colour}]")
    for r in p.reasons:
        console.print(f"  - {r}", highlight=False)


def _host_available_gib() -> float | None:
    try:
        import psutil

        from bringup.facts.hardware import GIB

        return psutil.virtual_memory().available / GIB
    except Exception:
        return None
