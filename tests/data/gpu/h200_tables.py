"""The tables of docs/gpu-h200.md (issue 23) from what an H200 session brought back.

    python3 tests/data/gpu/h200_tables.py RES_DIR [RUNS_DIR]

RES_DIR is the unpacked res/ folder of h200_collect.sh: `ENGINE-defaults.json` and
`ENGINE-mistakes.json` (`bringup run --json`), `ENGINE-bench/summary.json` (serve_bench.py),
`ENGINE-tune.json`. Prints Markdown: one attempts table per bring-up (launch by launch: the change,
class, phase, seconds), then the bench figures and their ratios to vLLM's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ENGINES = ("vllm", "sglang", "transformers")


def load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def trial_outcome(a: dict[str, Any], runs: Path | None) -> dict[str, Any]:
    """The trial's outcome.json, its device path (/tmp/runs/...) read under the local runs folder."""
    if runs is None or not a.get("trial_dir"):
        return {}
    rel = a["trial_dir"].split("/runs/", 1)[-1]
    return load(runs / rel / "outcome.json") or {}


def attempts_table(name: str, run: dict[str, Any], runs: Path | None) -> list[str]:
    out = [f"**{name}**: {run['status']} in {run['launches']} launches, {run['wall_seconds']:.0f} s"]
    out.append(f"(final: `{run.get('final_command')}`)")
    out += ["", "| # | change | result | class / phase | s | ready / probes / teardown s | evidence |"]
    out.append("|---|---|---|---|---|---|---|")
    for a in run["attempts"]:
        cls = f"{a.get('failure_class') or ''} / {a.get('phase') or ''}" if a["status"] != "works" else ""
        ev = (a.get("evidence") or "").replace("|", "\\|")[:110]
        o = trial_outcome(a, runs)
        t = o.get("timings") or {}
        split = "/".join(
            f"{t[k]:.1f}" if isinstance(t.get(k), (int, float)) else "-" for k in ("to_ready", "probes")
        )
        split += f"/{(o.get('teardown') or {}).get('seconds', '-')}"
        out.append(
            f"| {a['number']} | {a['changes']} | {a['status']} | {cls} | {a['wall_s']:.1f} | {split} | {ev} |"
        )
        if o.get("gpu"):
            out.append(f"|  | GPU: {json.dumps(o['gpu'])[:200]} | | | | | |")
    return [*out, ""]


def time_split(name: str, run: dict[str, Any], runs: Path | None) -> str:
    """One row: where a bring-up's wall time went. Engine: start-up to ready (to the failure, for a
    launch that failed), of which kernels compiling with no log line (a cold JIT cache); probes;
    teardown; bringup's own: the rest (planning, the search, launching, reading logs, records)."""
    eng = jit = probes = down = 0.0
    for a in run["attempts"]:
        t = trial_outcome(a, runs).get("timings") or {}
        tear = float(t.get("teardown") or 0.0)
        ready = t.get("to_ready")
        eng += float(ready) if ready is not None else max(0.0, float(a["wall_s"]) - tear)
        jit += float(t.get("jit_silent") or 0.0)
        probes += float(t.get("probes") or 0.0)
        down += tear
    wall = float(run["wall_seconds"])
    own = wall - eng - probes - down
    n = max(1, len(run["attempts"]))
    return (
        f"| {name} | {run['launches']} | {wall:.0f} | {eng:.0f} ({jit:.0f}) | {probes:.1f} | {down:.1f} | "
        f"{own:.1f} ({own / n:.1f}) |"
    )


def bench_rows(res: Path) -> dict[str, dict[int, dict[str, float]]]:
    """engine -> concurrency -> figures, from each bench's summary."""
    rows: dict[str, dict[int, dict[str, float]]] = {}
    for e in ENGINES:
        s = load(res / f"{e}-bench" / "summary.json")
        for b in (s or {}).get("bench", []):
            for r in b.get("result") or []:
                m = r["summary"]
                rows.setdefault(e, {})[b["concurrency"]] = {
                    "out_tok_s": m["output_throughput"],
                    "ttft_p50": m["ttft_ms"]["p50"],
                    "ttft_p99": m["ttft_ms"]["p99"],
                    "itl_p50": m["itl_ms"]["p50"],
                    "itl_p99": m["itl_ms"]["p99"],
                    "done": m["completed"],
                    "n": m["num_requests"],
                }
    return rows


def bench_table(rows: dict[str, dict[int, dict[str, float]]]) -> list[str]:
    out = [
        "| engine | conc. | output tok/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | done |",
        "|---|---|---|---|---|---|",
    ]
    for e, by_c in rows.items():
        for c, m in sorted(by_c.items()):
            out.append(
                f"| {e} | {c} | {m['out_tok_s']:.0f} | {m['ttft_p50']:.1f} / {m['ttft_p99']:.1f} | "
                f"{m['itl_p50']:.2f} / {m['itl_p99']:.2f} | {m['done']}/{m['n']} |"
            )
    base = rows.get("vllm", {})
    if base and len(rows) > 1:
        out += [
            "",
            "Ratios to vLLM (output tok/s; TTFT p50; ITL p50):",
            "",
            "| engine | conc. | tok/s | TTFT | ITL |",
        ]
        out.append("|---|---|---|---|---|")
        for e, by_c in rows.items():
            for c, m in sorted(by_c.items()):
                b = base.get(c)
                if b and e != "vllm":
                    out.append(
                        f"| {e} : vLLM | {c} | {m['out_tok_s'] / b['out_tok_s']:.2f} | "
                        f"{m['ttft_p50'] / b['ttft_p50']:.2f} | {m['itl_p50'] / max(b['itl_p50'], 1e-9):.2f} |"
                    )
    return out


def main() -> int:
    res = Path(sys.argv[1])
    runs = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    for e in ENGINES:
        for kind in ("defaults", "mistakes"):
            run = load(res / f"{e}-{kind}.json")
            if run:
                print("\n".join(attempts_table(f"{e} from {kind}", run, runs)))
        s = load(res / f"{e}-bench" / "summary.json")
        if s:
            print(
                f"{e} bench server: ready {s.get('ready_s')} s, teardown {s.get('teardown')}, "
                f"GPU idle {s.get('gpu_idle_mib')} MiB, serving {s.get('gpu_serving_mib')} MiB\n"
            )
        t = load(res / f"{e}-tune.json")
        if t:
            print(f"{e} tune: {json.dumps({k: t.get(k) for k in ('best', 'points') if k in t})[:1500]}\n")
    rows = [
        time_split(f"{e} from {kind}", run, runs)
        for e in ENGINES
        for kind in ("defaults", "mistakes")
        if (run := load(res / f"{e}-{kind}.json"))
    ]
    if rows:
        print(
            "| bring-up | launches | wall s | engine start-up s (silent JIT) | probes s | teardown s | bringup's own s (per launch) |"
        )
        print("|---|---|---|---|---|---|---|")
        print("\n".join(rows) + "\n")
    print("\n".join(bench_table(bench_rows(res))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
