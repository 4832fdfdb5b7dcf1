"""The offline evaluator: what a configuration would measure under a workload, without a server.

A discrete-event simulation of the scenario engine: the same `StepModel` (bringup/scenario/
perf.py) prices each step and the same `Replica` scheduler (bringup/scenario/scheduler.py) fills
it, as in the server; only the clock differs (virtual here, real sleeps there). The clients
imitate the load generator (`bringup.loadgen`): the same prompt lengths for the same seed, a
closed loop (N requests in flight) or open-loop arrivals (`arrival_times`), and the same
metric definitions (`summarize`): TTFT, ITL, TPOT, E2E, throughput and goodput under SLOs.

Everything is in simulated seconds. A server run with `--time-scale X` measured by `bench()`
reports real seconds: divide its latencies by X (multiply its rates by X) to compare.

    from bringup.oracle.perfsim import expected
    m = expected(sc, {"mem-fraction-static": 0.88, "max-running-requests": 64},
                 {"concurrency": 64, "input_len": 2048, "output_len": 256, "num_prompts": 200,
                  "slo": {"ttft_p99": 3.0, "itl_p99": 0.1}})
    m["goodput_rps"], m["ttft_p99_s"], m["feasible"]

Configurations the scenario's rules make fail (or hang, or answer wrongly) come out
`feasible: False` with the phase they would fail in, exactly as the server would behave.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import io
import itertools
import math
import sys
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bringup.loadgen.client import RequestRecord
from bringup.loadgen.config import SLO, BenchConfig
from bringup.loadgen.metrics import BenchSummary, summarize
from bringup.loadgen.runner import arrival_times
from bringup.loadgen.workload import sample_lengths
from bringup.scenario.config import ScenarioConfig, compute_config, decide
from bringup.scenario.engine_args import help_for, parse_engine_argv
from bringup.scenario.perf import StepModel
from bringup.scenario.scheduler import Replica, ScheduledRequest, pick_replica
from bringup.scenario.schema import Scenario, ScenarioRule

Flags = Mapping[str, Any] | Sequence[str] | str
Workload = Mapping[str, Any] | BenchConfig

# Event kinds, in the order they run at one instant: steps end (and the next step is planned)
# before new arrivals join, so a request that arrives as a step starts waits for the next one,
# as it does in the server.
_STEP_END, _ARRIVE, _START = 0, 1, 2
CHAT_TOKENS = 4  # "user", ":", "assistant", ":" around a chat prompt (http.py's chat_prompt)


# -- inputs -------------------------------------------------------------------------------------
def flags_argv(sc: Scenario, flags: Flags) -> list[str]:
    """Engine argv from a dict ({"mem-fraction-static": 0.9, "disable-cuda-graph": True}), a list or
    a command-line string; the model flag is added when missing."""
    if isinstance(flags, str):
        import shlex

        argv = shlex.split(flags)
    elif isinstance(flags, Mapping):
        argv = _dict_argv(flags)
    else:
        argv = list(flags)
    model_flag = "--model-path" if sc.engine == "sglang" else "--model"
    spec = help_for(sc.engine, sc.engine_version)[0]
    given = {o.name for o in (spec.resolve(t.split("=", 1)[0]) for t in argv if t.startswith("--")) if o}
    if (opt := spec.get(model_flag)) is not None and opt.name not in given:
        argv = [model_flag, sc.model.name, *argv]
    return argv


def _dict_argv(flags: Mapping[str, Any]) -> list[str]:
    argv: list[str] = []
    for key, v in flags.items():
        name = key if key.startswith("-") else "--" + key.replace("_", "-")
        if v is None or v is False:
            continue  # not given: the engine's (or the scenario's) default applies
        if v is True:
            argv.append(name)
        elif isinstance(v, (list, tuple)):
            argv += [name, *map(str, v)]
        else:
            argv += [name, str(v)]
    return argv


def engine_config(sc: Scenario, flags: Flags, env: Mapping[str, str] | None = None) -> ScenarioConfig:
    """The effective configuration the server would compute for these flags. A flag the engine's
    argparse rejects raises ValueError with argparse's message."""
    spec, text = help_for(sc.engine, sc.engine_version)
    argv = flags_argv(sc, flags)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            req = parse_engine_argv(argv, spec, sc.engine, text)
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        raise ValueError(lines[-1] if lines else f"bad flags: {argv}") from None
    return compute_config(sc, spec, req.flags, req.positionals, dict(env or {}))


def bench_config(workload: Workload) -> BenchConfig:
    """A loadgen BenchConfig from a workload dict: BenchConfig's own fields (concurrency or
    request_rate [+ max_concurrency, burstiness], input_len, output_len, num_prompts,
    range_ratio, len_dist, seed, slos), plus `slo` as the tuner writes it ({"ttft_p99": 2.0,
    "itl_p99": 0.05}, seconds) or as the CLI does ("ttft_p99=2s,itl_p99=50ms")."""
    if isinstance(workload, BenchConfig):
        return workload
    w = dict(workload)
    slo = w.pop("slo", None)
    if isinstance(slo, Mapping):
        w["slos"] = [_slo(k, v) for k, v in slo.items()]
    elif slo is not None:
        w["slos"] = slo
    w.setdefault("url", "http://simulated")
    if w.get("concurrency") is None and w.get("request_rate") is None:
        w["request_rate"] = math.inf
    return BenchConfig(**w)


def _slo(key: str, target_s: float) -> SLO:
    metric, _, stat = key.lower().partition("_")
    return SLO(metric={"e2el": "e2e"}.get(metric, metric), stat=stat or "p99", target_s=float(target_s))


def workload_lengths(bc: BenchConfig) -> tuple[list[int], list[int]]:
    """Prompt and output token counts per request, as `bench()` draws them for this seed (the
    scenario server has no tokenizer, so the load generator builds prompts of exact word counts)."""
    if bc.prompts_file is not None:
        raise ValueError(
            "the evaluator takes synthetic workloads (input_len, output_len), not a prompts file"
        )
    n = bc.num_prompts or 100
    rng = np.random.default_rng(bc.seed)
    ins = sample_lengths(rng, n, max(bc.input_len, 1), bc.in_range_ratio, bc.len_dist)
    outs = sample_lengths(rng, n, bc.output_len, bc.out_range_ratio, bc.len_dist)
    # A shared prefix is prompt like any other (no prefix cache is modelled); the chat endpoint
    # wraps the text as "user: ...\nassistant:", four more tokens by the server's count.
    extra = bc.prefix_len + (CHAT_TOKENS if bc.endpoint == "chat" else 0)
    return [int(x) + extra for x in ins], [int(x) for x in outs]


# -- the simulation -----------------------------------------------------------------------------
@dataclasses.dataclass
class SimResult:
    """One simulated benchmark. `summary` is a loadgen BenchSummary in simulated seconds (ms
    fields in simulated ms); None when the configuration is infeasible."""

    feasible: bool
    summary: BenchSummary | None
    records: list[RequestRecord]
    model: StepModel | None
    failure_phase: str | None = None
    failure_rule: str | None = None
    failure_action: str | None = None  # fail | hang | garbage | inconsistent
    mean_batch: float = 0.0  # time-averaged decoding requests per replica
    peak_running: int = 0  # most requests one replica ran at once (prefilling + decoding)
    steps: int = 0


def _infeasible(
    rule: ScenarioRule | None, cfg: ScenarioConfig, max_output: int
) -> tuple[str, str | None] | None:
    """(action, phase) when the rule keeps this configuration from serving the workload right."""
    if rule is None:
        return None
    action = rule.fail or rule.hang
    if action is not None:
        if action.phase == "decode" and action.after_tokens is not None and action.after_tokens >= max_output:
            return None  # it dies only past the tokens this workload asks for
        phase = action.phase
        if phase == "graph-capture" and not cfg.cuda_graphs:
            phase = "warmup"  # as the server: the kernel first runs in the warm-up pass
        return ("fail" if rule.fail else "hang"), phase
    assert rule.serve is not None
    return (rule.serve.mode, None) if rule.serve.mode != "ok" else None


def simulate(
    sc: Scenario,
    flags: Flags,
    workload: Workload,
    seed: int | None = None,
    env: Mapping[str, str] | None = None,
) -> SimResult:
    """Run the workload against the configuration on a virtual clock. `seed`: the step-noise
    seed (default: the engine's seed flag if given, else performance.seed)."""
    if sc.performance is None:
        raise ValueError(f"scenario {sc.name} has no performance section")
    cfg = engine_config(sc, flags, env)
    bc = bench_config(workload)
    ins, outs = workload_lengths(bc)
    rule = decide(sc, cfg)
    bad = _infeasible(rule, cfg, max(outs))
    if bad is not None:
        return SimResult(
            False,
            None,
            [],
            None,
            failure_phase=bad[1],
            failure_rule=rule.label if rule else None,
            failure_action=bad[0],
        )
    model = StepModel.build(sc, cfg)
    if seed is not None:
        model = dataclasses.replace(model, seed=seed)
    return _run(model, ins, outs, bc)


def _run(model: StepModel, ins: list[int], outs: list[int], bc: BenchConfig) -> SimResult:
    n = len(ins)
    reps = [Replica(model, r) for r in range(model.dp)]
    ends: list[list[float]] = [[] for _ in reps]
    busy_time = [0.0] * len(reps)
    batch_time = [0.0] * len(reps)
    active = [False] * len(reps)  # a step is planned or running
    jobs: list[ScheduledRequest | None] = [None] * n
    released = [0.0] * n
    heap: list[tuple[float, int, int, Any]] = []
    seq = itertools.count()
    rr = itertools.count()

    def send(i: int, t: float) -> None:
        job = ScheduledRequest(max(ins[i], 1), max(outs[i], 1), arrival=t, index=i)
        jobs[i] = job
        rep = pick_replica(reps, next(rr), model.dispatch)
        rep.add(job)
        r = rep.index
        if not active[r]:
            active[r] = True
            heapq.heappush(heap, (t, _START, next(seq), r))

    peak = 0

    def start(r: int, t: float) -> None:
        nonlocal peak
        step = reps[r].plan()
        peak = max(peak, reps[r].running)
        heapq.heappush(heap, (t + step.duration, _STEP_END, next(seq), (r, step, t)))

    backlog: deque[int] = deque()
    inflight = 0
    closed = bc.concurrency is not None
    cap = bc.concurrency if closed else bc.max_concurrency
    if closed:
        nxt = min(bc.concurrency or 1, n)
        for i in range(nxt):
            send(i, 0.0)
        inflight = nxt
    else:
        times = arrival_times(n, bc.request_rate or math.inf, bc.burstiness, bc.seed)
        for i in range(n):
            released[i] = float(times[i])
            heapq.heappush(heap, (float(times[i]), _ARRIVE, next(seq), i))
        nxt = n

    last = 0.0
    while heap:
        t, kind, _, payload = heapq.heappop(heap)
        if kind == _ARRIVE:
            if cap is not None and inflight >= cap:
                backlog.append(payload)
            else:
                inflight += 1
                send(payload, t)
        elif kind == _START:
            start(payload, t)
        else:
            r, step, began = payload
            rep = reps[r]
            _, finished = rep.commit(step)
            ends[r].append(t)
            busy_time[r] += t - began
            batch_time[r] += step.decode * (t - began)
            if rep.idle:
                active[r] = False
            else:
                start(r, t)
            for _job in finished:  # each finished request frees a client slot
                last = t
                inflight -= 1
                if closed and nxt < n:
                    inflight += 1
                    send(nxt, t)
                    nxt += 1
                elif backlog:
                    inflight += 1
                    send(backlog.popleft(), t)

    records = []
    arrays = [np.asarray(e) for e in ends]
    for i, job in enumerate(jobs):
        assert job is not None and job.done
        times_i = arrays[job.replica][job.first_step : job.first_step + job.output_tokens]
        ttft = float(times_i[0] - job.arrival)
        e2e = float(times_i[-1] - job.arrival)
        out = job.output_tokens
        records.append(
            RequestRecord.model_construct(
                index=i,
                ok=True,
                cancelled=False,
                error=None,
                status=200,
                arrival_at_s=job.arrival if closed else released[i],
                sent_at_s=job.arrival,
                ttft_s=ttft,
                e2e_s=e2e,
                tpot_s=(e2e - ttft) / (out - 1) if out > 1 else None,
                itl_s=np.diff(times_i).tolist(),
                chunks=out,
                input_tokens=job.prompt_tokens,
                output_tokens=out,
                expected_output_tokens=out,
                output_tokens_source="usage",
                text=None,
            )
        )
    shape = {
        "concurrency": bc.concurrency,
        "request_rate": None if closed else (bc.request_rate or math.inf),
        "max_concurrency": bc.max_concurrency,
    }
    summary = summarize(records, last, bc.slos, bc.point_label(), **shape)
    busy = sum(busy_time)
    return SimResult(
        True,
        summary,
        records,
        model,
        mean_batch=sum(batch_time) / busy if busy else 0.0,
        peak_running=peak,
        steps=sum(len(e) for e in ends),
    )


# -- the evaluator's answer ---------------------------------------------------------------------
def metrics(res: SimResult) -> dict[str, Any]:
    """The flat metrics a tuner reads (simulated seconds)."""
    out: dict[str, Any] = {
        "feasible": res.feasible,
        "failure_phase": res.failure_phase,
        "failure_rule": res.failure_rule,
        "failure_action": res.failure_action,
    }
    s = res.summary
    if s is None:
        out.update(goodput_rps=0.0, output_tps=0.0, rps=0.0)
        return out
    out.update(
        goodput_rps=s.request_goodput if s.request_goodput is not None else s.request_throughput,
        output_goodput_tps=s.output_goodput if s.output_goodput is not None else s.output_throughput,
        output_tps=s.output_throughput,
        rps=s.request_throughput,
        slo_attainment=s.slo_attainment,
        slos_met=s.slos_met,
        duration_s=s.duration_s,
        completed=s.completed,
    )
    for name in ("ttft", "itl", "tpot", "e2e"):
        st = getattr(s, f"{name}_ms")
        for k in ("mean", "p50", "p90", "p99"):
            v = getattr(st, k)
            out[f"{name}_{k}_s"] = None if v is None else v / 1e3
    m = res.model
    assert m is not None
    out.update(
        mean_batch=res.mean_batch,
        peak_running=res.peak_running,
        steps=res.steps,
        kv_capacity_tokens=m.kv_capacity,
        max_running=m.max_running,
        chunk=m.chunk if m.chunk < 1 << 40 else None,
        graph_max_bs=m.graph_max_bs,
        tp=m.tp,
        dp=m.dp,
        seed=m.seed,
    )
    return out


def expected(
    sc: Scenario,
    flags: Flags,
    workload: Workload,
    seed: int | None = None,
    runs: int = 1,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The metrics of `flags` under `workload` (simulated seconds): goodput_rps, output_tps, rps,
    ttft/itl/tpot/e2e mean, p50, p90, p99 (`*_s`), slo_attainment, slos_met, feasible,
    failure_phase (and failure_rule, failure_action), plus mean_batch, kv_capacity_tokens,
    max_running, chunk, graph_max_bs, tp, dp. With runs > 1, numbers are averaged over the noise
    seeds seed, seed+1, ... (booleans: all runs)."""
    if runs < 1:
        raise ValueError("runs must be at least 1")
    first = simulate(sc, flags, workload, seed, env)
    base = metrics(first)
    if runs == 1 or not first.feasible:
        return base
    s0 = first.model.seed if first.model else 0
    every = [base] + [metrics(simulate(sc, flags, workload, s0 + k, env)) for k in range(1, runs)]
    out = dict(base)
    for key, v in base.items():
        vals = [m[key] for m in every]
        if isinstance(v, bool):
            out[key] = all(vals)
        elif isinstance(v, (int, float)) and all(isinstance(x, (int, float)) for x in vals):
            out[key] = float(np.mean(vals))
    out["seed"] = s0
    return out


def grid(
    sc: Scenario,
    axes: Mapping[str, Iterable[Any]],
    workload: Workload,
    base: Flags | None = None,
    objective: str = "goodput_rps",
    seed: int | None = None,
) -> list[dict[str, Any]]:
    """Every combination of `axes` (flag -> levels) on top of `base`, best first by `objective`
    (infeasible points last). Each row: {"flags": {...}, **expected(...)}."""
    base_argv = flags_argv(sc, base if base is not None else [])
    bc = bench_config(workload)
    names = list(axes)
    rows = []
    for combo in itertools.product(*(list(axes[k]) for k in names)):
        point = dict(zip(names, combo, strict=True))
        # argparse keeps the last value of a repeated flag: the point overrides the base
        rows.append({"flags": point, **expected(sc, [*base_argv, *_dict_argv(point)], bc, seed)})
    rows.sort(key=lambda r: (not r["feasible"], -(r.get(objective) or 0.0)))
    return rows


# -- command line: python -m bringup.oracle.perfsim FILE [options] [-- FLAGS] ----------------
def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    from bringup.scenario.loader import load_scenario, scenario_path

    args = list(sys.argv[1:] if argv is None else argv)
    flags: list[str] = []
    if "--" in args:
        cut = args.index("--")
        args, flags = args[:cut], args[cut + 1 :]
    p = argparse.ArgumentParser(
        prog="python -m bringup.oracle.perfsim",
        description="Expected metrics of a scenario configuration (simulated seconds).",
    )
    p.add_argument("scenario", help="scenario file or shipped name")
    p.add_argument("--concurrency", type=int)
    p.add_argument("--request-rate", type=float)
    p.add_argument("--input-len", type=int, default=256)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--num-prompts", type=int, default=200)
    p.add_argument("--slo", default=None, help="e.g. ttft_p99=2s,itl_p99=50ms")
    p.add_argument("--seed", type=int, default=None, help="step-noise seed")
    p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="FLAG=V1,V2,...",
        help="evaluate every combination (repeatable); prints the best rows",
    )
    p.add_argument("--top", type=int, default=10)
    o = p.parse_args(args)
    path = Path(o.scenario)
    sc = load_scenario(path if path.exists() else scenario_path(o.scenario))
    wl: dict[str, Any] = {"input_len": o.input_len, "output_len": o.output_len, "num_prompts": o.num_prompts}
    if o.concurrency is not None:
        wl["concurrency"] = o.concurrency
    elif o.request_rate is not None:
        wl["request_rate"] = o.request_rate
    if o.slo:
        wl["slos"] = o.slo
    if not o.grid:
        print(json.dumps(expected(sc, flags, wl, o.seed), indent=2))
        return 0
    axes = {}
    for g in o.grid:
        key, _, vals = g.partition("=")
        axes[key] = [v for v in vals.split(",") if v]
    rows = grid(sc, axes, wl, flags or None, seed=o.seed)
    for r in rows[: o.top]:
        keep = {k: r.get(k) for k in ("goodput_rps", "output_tps", "ttft_p99_s", "itl_p99_s", "mean_batch")}
        print(json.dumps({"flags": r["flags"], "feasible": r["feasible"], **keep}))
    print(f"{sum(r['feasible'] for r in rows)} of {len(rows)} feasible")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
