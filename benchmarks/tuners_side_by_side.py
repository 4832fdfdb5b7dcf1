"""Issue 38: `bringup tune` against the engine's own tuner, on one engine, side by side.

    python benchmarks/tuners_side_by_side.py --engine vllm --model /tmp/tiny --grid vllm-cpu \\
        --config "--gpu-memory-utilization 0.3" --out /tmp/tuners-vllm [--grid-points 8] ...

In one session, on one machine, in this order:

1. **The peer**: the engine's own tuner over the grid (tuners_peer.py: `vllm bench sweep serve`,
   or SGLang's `bench_serving` over the grid), each point measured by the engine's own load
   generator, `--peer-runs` runs per launch. The defaults point is measured first.
2. **The SLO**, from the peer's measurement of the defaults: TTFT p99 and ITL p99 limits at the
   ``--slo-quantile`` of the defaults' requests, so the defaults do not already meet it
   (tuners_decide.py ``slo_from_defaults``; the rule and the defaults' own figures are recorded).
   The peer's pick is then its own best point under that SLO, from its own measurements.
3. **bringup**: `bringup tune` (the real command) over the same knobs and levels, the same workload
   and SLO, with repeats, at most ``--bringup-share`` of the grid's launches (search and repeats
   together); its winner is named only beyond noise, or it keeps the defaults.
4. **The final round**: the defaults, bringup's winner and the peer's pick, each launched again and
   measured by the same load generator (bringup's), ``--final-rounds`` rounds, every configuration
   once a round in rotated order: the ratio bringup / peer is paired by round.

Writes OUT/report.json (everything), OUT/table.md, the SVG (``--svg``) and each side's own files
(OUT/peer/, OUT/bringup-runs/). Each phase's result is kept as soon as it is known
(OUT/peer.json, OUT/bringup.json): ``--reuse`` starts from them after an interruption.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tuners_decide as decide  # noqa: E402
from tuners_peer import PEERS, PointRun, ServerDied, Workload, server  # noqa: E402

from bringup.core.candidate import Candidate, FlagError, parse_flags  # noqa: E402
from bringup.engines.base import Engine, get_engine  # noqa: E402
from bringup.loadgen import BenchConfig, bench  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", required=True, choices=sorted(PEERS))
    ap.add_argument("--model", required=True, help="model folder (served by its path)")
    ap.add_argument(
        "--config", default="", help="the base configuration's flags, on every launch of every side"
    )
    ap.add_argument(
        "--grid", required=True, help="a profile of tuners_grid.yaml (vllm-gpu, vllm-cpu, sglang-gpu)"
    )
    ap.add_argument("--grid-file", type=Path, default=decide.GRID_FILE)
    ap.add_argument(
        "--grid-points", type=int, help="at most this many points (a sub-grid; default: the whole grid)"
    )
    ap.add_argument(
        "--levels",
        action="append",
        default=[],
        metavar="FLAG=default,V1,...",
        help="only these knobs, at these levels (repeatable; in place of the profile's choice of levels)",
    )
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument(
        "--range-ratio", type=float, default=0.0, help="mixed lengths: uniform in [L(1-r), L(1+r)]; 0: fixed"
    )
    ap.add_argument("--num-prompts", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--peer-runs", type=int, default=2, help="the peer's runs per launch (`--num-runs`)")
    ap.add_argument(
        "--peer-pythonpath",
        default="",
        help="put before PYTHONPATH for the peer's own tuner: what its benchmark needs beyond the engine "
        "(vllm bench sweep serve: pandas, vLLM's bench extra)",
    )
    ap.add_argument("--slo-quantile", type=float, default=0.75)
    ap.add_argument(
        "--bringup-share",
        type=float,
        default=0.3,
        help="bringup's launches, at most this share of the grid's",
    )
    ap.add_argument("--bringup-trials", type=int, help="override: search launches")
    ap.add_argument(
        "--bringup-repeats", type=int, help="override: repeat rounds (finalist 1: 2 launches a round)"
    )
    ap.add_argument("--reference", default="auto", help="bringup tune --reference")
    ap.add_argument(
        "--final-rounds", type=int, default=3, help="launches of each configuration in the final round"
    )
    ap.add_argument(
        "--final-benches",
        type=int,
        default=1,
        help="benchmarks per final-round launch (samples within a launch)",
    )
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--port", type=int, default=18400)
    ap.add_argument("--ready-timeout", type=int, default=900)
    ap.add_argument(
        "--references",
        type=Path,
        help="a references folder to link into bringup's runs folder (a cached reference)",
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--svg", type=Path, help="the plot (default OUT/goodput-vs-launches.svg)")
    ap.add_argument("--reuse", action="store_true", help="keep OUT/peer.json and OUT/bringup.json when there")
    return ap.parse_args(argv)


class Setup:
    """The engine, the base configuration, the grid and the workload: what every phase shares."""

    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.engine: Engine = get_engine(a.engine)
        self.version = self.engine.version()
        self.spec = self.engine.help_spec(self.version)
        try:
            self.base = Candidate.make(a.engine, a.model, parse_flags(a.config, self.spec))
        except FlagError as e:
            raise SystemExit(f"--config: {e}") from None
        full = decide.with_levels(decide.load_grid(a.grid, a.grid_file), a.levels)
        self.missing = [k.flag for k in full if self.spec is not None and self.spec.resolve(k.flag) is None]
        have = [k for k in full if k.flag not in self.missing]
        self.full_points = decide.size(have)
        self.knobs = decide.subset(have, a.grid_points)
        self.points = decide.points(self.knobs)
        self.names = [f"p{i:02d}" for i in range(len(self.points))]
        self.workload = Workload(
            a.input_len, a.output_len, a.range_ratio, a.num_prompts, a.concurrency, a.seed
        )

    def grid_record(self) -> dict[str, Any]:
        return {
            "profile": self.a.grid,
            "knobs": {k.flag: k.levels for k in self.knobs},
            "sources": {k.flag: k.source for k in self.knobs},
            "points": len(self.points),
            "full_points": self.full_points,
            "not_in_this_version": self.missing,
            "why": "the whole grid"
            if len(self.points) == self.full_points
            else f"a sub-grid of {len(self.points)} of {self.full_points} points (--grid-points {self.a.grid_points}): "
            "what fits the session's device time (tuners_decide.subset says which levels go first)",
        }


# -- 1. the peer --------------------------------------------------------------------------------
def run_peer(s: Setup) -> dict[str, Any]:
    a = s.a
    peer = PEERS[a.engine](s.engine, s.base, a.port, a.peer_runs, a.ready_timeout, a.peer_pythonpath)
    t0 = time.monotonic()
    runs = peer.run([decide.flags_of(p) for p in s.points], s.names, s.workload, a.out / "peer")
    return {"tool": peer.tool, "wall_s": time.monotonic() - t0, "points": [_raw(r) for r in runs]}


def _raw(r: PointRun) -> dict[str, Any]:
    """A point's runs, kept with their per-request lists (the goodput needs them once the SLO is set)."""
    keep = (
        "duration",
        "completed",
        "failed",
        "request_throughput",
        "output_throughput",
        "ttfts",
        "itls",
        "errors",
    )
    return {
        "name": r.name,
        "seconds": r.seconds,
        "failed": r.failed,
        "results": [{k: x.get(k) for k in keep} for x in r.results],
    }


def peer_points(s: Setup, raw: dict[str, Any], choice: decide.SloChoice) -> list[decide.PeerPoint]:
    out = []
    for point, r in zip(s.points, raw["points"], strict=True):
        p = decide.PeerPoint(
            r["name"], point, "failed" if r["failed"] else "ok", r["failed"], seconds=r["seconds"]
        )
        for res in r["results"]:
            recs = decide.records_from_lists(res)
            p.runs.append(
                {
                    "goodput": decide.goodput(recs, float(res.get("duration") or 0.0), choice.slos()),
                    "throughput": res.get("request_throughput"),
                    "failed": sum(1 for x in recs if not x.ok),
                }
            )
        out.append(p)
    return out


# -- 3. bringup tune ------------------------------------------------------------------------------
def tune_argv(s: Setup, choice: decide.SloChoice, trials: int, rounds: int, runs_dir: Path) -> list[str]:
    a, w = s.a, s.workload
    argv = [
        sys.executable,
        "-m",
        "bringup",
        "tune",
        "--engine",
        a.engine,
        "--model",
        a.model,
        "--config",
        a.config,
    ]
    argv += ["--knobs", ",".join(k.flag for k in s.knobs)]
    for k in s.knobs:
        argv += ["--knob", f"{k.flag}={','.join(k.levels)}"]
    argv += ["--trials", str(trials), "--repeats", str(rounds), "--finalists", "1", "--slo", choice.text()]
    argv += [
        "--concurrency",
        str(w.concurrency),
        "--num-prompts",
        str(w.num_prompts),
        "--input-len",
        str(w.input_len),
    ]
    argv += ["--output-len", str(w.output_len), "--range-ratio", str(w.range_ratio), "--seed", str(w.seed)]
    argv += [
        "--sweep",
        "",
        "--timeout",
        str(a.ready_timeout),
        "--reference",
        a.reference,
        "--runs-dir",
        str(runs_dir),
        "--json",
    ]
    return argv


def run_bringup(s: Setup, choice: decide.SloChoice) -> dict[str, Any]:
    a = s.a
    trials, rounds = decide.bringup_share(len(s.points), a.bringup_share)
    trials = a.bringup_trials if a.bringup_trials is not None else trials
    rounds = a.bringup_repeats if a.bringup_repeats is not None else rounds
    runs_dir = a.out / "bringup-runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    if a.references and not (runs_dir / "references").exists():
        (runs_dir / "references").symlink_to(a.references.resolve())
    argv = tune_argv(s, choice, trials, rounds, runs_dir)
    t0 = time.monotonic()
    with (a.out / "bringup-tune.err").open("w") as err:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=err, text=True, check=False)
    wall = time.monotonic() - t0
    (a.out / "bringup-tune.json").write_text(p.stdout)
    try:
        tune = json.loads(p.stdout)
    except json.JSONDecodeError:
        raise SystemExit(
            f"bringup tune exited with {p.returncode} and no result: see {a.out / 'bringup-tune.err'}"
        ) from None
    return {
        "argv": shlex.join(argv),
        "rc": p.returncode,
        "wall_s": wall,
        "trials": trials,
        "rounds": rounds,
        "tune": tune,
    }


def bringup_summary(raw: dict[str, Any]) -> dict[str, Any]:
    """What the table needs of a tune.json: launches (search + repeats), the winner, the curve."""
    t = raw["tune"]
    reps = t.get("repeats") or {}
    curve: list[tuple[int, float]] = []
    for p in t["points"]:
        if p.get("failure_class") != "predicted":  # ruled out without a launch
            curve.append((len(curve) + 1, float(p.get("objective") or 0.0)))
    for r in reps.get("runs") or []:
        curve.append((len(curve) + 1, float(r.get("value") or 0.0)))
    best = t.get("best") or {}
    return {
        "launches": int(t.get("launches") or 0) + int(reps.get("launches") or 0),
        "search_launches": int(t.get("launches") or 0),
        "repeat_launches": int(reps.get("launches") or 0),
        "device_s": raw["wall_s"],
        "verdict": reps.get("verdict"),
        "winner_knobs": best.get("knobs") or {},
        "curve": curve,
        "command": raw["argv"],
    }


# -- 4. the final round -----------------------------------------------------------------------------
def final_round(s: Setup, roles: dict[str, dict[str, str]], choice: decide.SloChoice) -> dict[str, Any]:
    a, w = s.a, s.workload
    keys = {role: decide.describe(k) for role, k in roles.items()}
    configs = {keys[role]: decide.flags_of(k) for role, k in roles.items()}
    order = decide.final_order(list(dict.fromkeys(keys.values())), a.final_rounds)
    samples: dict[str, list[decide.Sample]] = {k: [] for k in configs}
    cfg = BenchConfig(
        url="http://127.0.0.1:1", model=a.model, input_len=w.input_len, output_len=w.output_len,
        range_ratio=w.range_ratio, num_prompts=w.num_prompts, concurrency=w.concurrency, seed=w.seed,
        slos=choice.slos(), warmup=1,
    )  # fmt: skip
    logs = a.out / "final"
    logs.mkdir(parents=True, exist_ok=True)
    for i, (rnd, key) in enumerate(order):
        samples[key] += _samples(s, configs[key], cfg, rnd, logs / f"{i:02d}-server.log")
        print(
            f"final {i + 1}/{len(order)} round {rnd + 1} {key}: {[x.goodput for x in samples[key][-a.final_benches :]]}",
            flush=True,
        )
    return {
        "roles": keys,
        "describe": {k: k for k in configs},
        "order": [f"{r + 1}:{k}" for r, k in order],
        "samples": {k: [x.__dict__ for x in v] for k, v in samples.items()},
        "verdict": decide.judge_final(samples, keys, a.alpha),
    }


def _samples(s: Setup, flags: dict[str, Any], cfg: BenchConfig, rnd: int, log: Path) -> list[decide.Sample]:
    """One launch of a configuration, ``--final-benches`` benchmarks on it: samples numbered
    round x benches + bench, so that the ratio pairs the same launch round and bench. A sample
    with failed requests is rejected (None), as bringup's repeat phase rejects it."""
    k, t0, out = s.a.final_benches, time.monotonic(), []
    try:
        with server(s.engine, s.base.with_changes(flags), s.a.port, log, s.a.ready_timeout) as url:
            for b in range(k):
                f = bench(cfg.model_copy(update={"url": url})).summary
                figures = {
                    "throughput": f.request_throughput, "output_throughput": f.output_throughput, "failed": f.failed,
                    "ttft_p99_ms": f.ttft_ms.p99, "itl_p99_ms": f.itl_ms.p99, "seconds": time.monotonic() - t0,
                }  # fmt: skip
                out.append(decide.Sample(rnd * k + b, f.request_goodput if not f.failed else None, figures))
    except ServerDied as e:
        out += [decide.Sample(rnd * k + b, None, {"error": str(e)}) for b in range(len(out), k)]
    return out


# -- the whole -------------------------------------------------------------------------------------
def phase(path: Path, reuse: bool, run: Any) -> dict[str, Any]:
    """A phase's result, kept as soon as it is known (``reuse``: the one already kept)."""
    if reuse and path.exists():
        return dict(json.loads(path.read_text()))
    out = run()
    path.write_text(json.dumps(out))
    return dict(out)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    s = Setup(a)
    print(
        f"{a.engine} {s.version}: grid of {len(s.points)} points ({s.full_points} in the whole grid)",
        flush=True,
    )
    raw_peer = phase(a.out / "peer.json", a.reuse, lambda: run_peer(s))
    defaults = [r for res in raw_peer["points"][0]["results"] for r in decide.records_from_lists(res)]
    choice = decide.slo_from_defaults(defaults, a.slo_quantile, f"{raw_peer['tool']} on the defaults point")
    pts = peer_points(s, raw_peer, choice)
    pick = decide.peer_pick(pts)
    print(f"SLO {choice.text()}; peer's pick {pick and decide.describe(pick.knobs)}", flush=True)
    raw_bu = phase(a.out / "bringup.json", a.reuse, lambda: run_bringup(s, choice))
    bu = bringup_summary(raw_bu)
    roles = {
        "defaults": s.points[0],
        "bringup": bu["winner_knobs"] or s.points[0],
        "peer": pick.knobs if pick else s.points[0],
    }
    final = final_round(s, roles, choice)
    report = {
        "engine": a.engine, "version": s.version, "model": a.model, "base": a.config, "workload": s.workload.as_dict(),
        "grid": s.grid_record(), "slo": choice.__dict__, "final": final, "bringup": bu, "wall_s": time.time() - t0,
        "peer": {
            "tool": raw_peer["tool"], "launches": len(pts), "device_s": sum(p.seconds for p in pts),
            "points": [{**p.__dict__, "value": p.value, "describe": decide.describe(p.knobs)} for p in pts],
            "pick": pick and pick.name,
            "curve": [(i + 1, p.value or 0.0) for i, p in enumerate(pts)],
        },
    }  # fmt: skip
    (a.out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    (a.out / "table.md").write_text(decide.table(report) + "\n")
    (a.svg or a.out / "goodput-vs-launches.svg").write_text(decide.svg(report))
    print(decide.table(report))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
