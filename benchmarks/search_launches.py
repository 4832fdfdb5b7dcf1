"""Issue 4's measures: launches and simulated hours to the first validated configuration.

For every shipped scenario, from its `baseline:` (the command a user would start from, which falls
into the scenario's trap):

  (a) bringup with knowledge        -- the real pipeline, Run(...).execute(), against scenario servers
  (b) bringup with --no-knowledge   -- the same, on log signatures alone
      both with --screen auto (the default) and --screen never
  (c) one factor at a time in --help order ("keep what helped"): the seeds engineer's method
  (d) random order: uniform draws from the space without repeats; median over seeds

(c) and (d) ask the in-process oracle (bringup/oracle/trials.py), which answers from the same
compute_config/decide/timing code as the server (tests/oracle/test_oracle.py checks it against real
launches): they need up to 60 and 200 launches per scenario and seed, too many to launch for real.
The methods are defined precisely in docs/search.md, "Launches to the first validated configuration".

Run:  .venv/bin/python benchmarks/search_launches.py [--scenario NAME ...] [--seeds 20] [--jobs 1]
                                                      [--json out.json] [--no-doc]
It prints a table and rewrites the generated part of that docs/search.md section.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shlex
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bringup.core.candidate import Candidate, FlagValue, parse_command
from bringup.oracle.trials import Oracle, OracleOutcome
from bringup.scenario import bundled_scenarios, load_scenario, scenario_path
from bringup.search.space import Factor, build_space
from bringup.session.run import Run, RunSettings

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "search.md"
HEADING = "## Launches to the first validated configuration"
BEGIN, END = "<!-- search_launches:begin -->", "<!-- search_launches:end -->"
OFAT_CAP, RANDOM_CAP = 60, 200
TIME_SCALE = 0.002  # a 600 s simulated weight load takes 1.2 s
SEEDS_ENGINEER = 8  # launches the seeds' engineer needed on glm5-nvfp4-sm120
TARGET_KNOWLEDGE, TARGET_NO_KNOWLEDGE = 2, 5


@dataclass
class Measure:
    method: str
    validated: bool
    launches: int  # to the first validated configuration, or all made when none was
    hours: float  # simulated hours of those launches
    cap: int | None = None  # the launch budget when none validated within it
    screening: int = 0
    minimize: int = 0
    stop: str = ""
    attempts: list[dict] = field(default_factory=list)
    spread: str = ""  # random order: the range over seeds

    def cell(self) -> str:
        n = (
            str(self.launches)
            if self.validated
            else (f">{self.cap}" if self.cap else f"none in {self.launches}")
        )
        if self.screening:
            n += f" ({self.screening} scr)"
        return f"{n} · {self.hours:.2f} h"


# -- (a), (b): the real pipeline ----------------------------------------------------------------------
def real_run(
    path: Path, baseline: str, knowledge: bool, screen: str, minimize: bool, scale: float, budget: int
) -> Measure:
    """One bring-up run in a fresh journal (no priors from other runs)."""
    method = f"{'knowledge' if knowledge else 'no-knowledge'}, screen {screen}"
    with tempfile.TemporaryDirectory(prefix="bringup-bench-") as root:
        settings = RunSettings(
            scenario=str(path),
            baseline=baseline,
            knowledge=knowledge,
            screen=screen,
            minimize=minimize,
            time_scale=scale,
            max_launches=budget,
        )
        res = Run(settings, Path(root)).execute()
    attempts = [
        {
            "n": a.number,
            "purpose": a.purpose,
            "changes": a.changes,
            "status": a.status,
            "class": a.failure_class,
            "phase": a.phase,
            "sim_s": a.simulated_s,
            "p": a.p_success,
            "reasons": a.reasons,
        }
        for a in res.attempts
    ]
    # `>budget` only when the budget stopped it; a run that gave up says "none (N)".
    capped = not res.validated and res.stop_reason.startswith("launch budget")
    return Measure(
        method,
        res.validated,
        res.launches,
        res.simulated_hours or 0.0,
        budget if capped else None,
        res.screening_launches,
        res.minimize_launches,
        res.stop_reason,
        attempts,
    )


# -- (c): one factor at a time ------------------------------------------------------------------------
def help_ordered(factors: list[Factor], oracle: Oracle) -> list[Factor]:
    """Factors in the order their flags appear in the engine's --help (env factors last)."""
    index = {opt.name: i for i, opt in enumerate(oracle.spec.options)}
    return sorted(factors, key=lambda f: index.get(f.name, len(index)))


def ofat(oracle: Oracle, baseline: Candidate, factors: list[Factor], cap: int = OFAT_CAP) -> Measure:
    """Launch the baseline; then, factor by factor in --help order, try each other level (choices
    in argparse order, numbers in their listed order, then unset) on top of the current
    configuration. Stop at the first validated one. A change whose launch fails later in the
    phase order than the current configuration's keeps it ("keep what helped"), and the search
    moves to the next factor. Passes repeat while a pass kept something; cap: launches."""
    seen: set[str] = set()
    attempts: list[dict] = []
    hours = 0.0

    def launch(cand: Candidate, change: str) -> OracleOutcome:
        nonlocal hours
        seen.add(cand.key())
        out = oracle.candidate(cand)
        hours += out.simulated_s / 3600
        attempts.append(
            {
                "n": len(attempts) + 1,
                "changes": change,
                "status": out.status,
                "phase": out.phase,
                "rule": out.rule,
                "sim_s": round(out.simulated_s, 3),
            }
        )
        return out

    current, cur = baseline, launch(baseline, "(baseline)")
    if cur.validated:
        return Measure("one factor at a time", True, 1, hours, attempts=attempts)
    kept = True
    while kept:
        kept = False
        for f in factors:
            now = _level(current, f)
            for level in [*f.levels, None]:
                if _same(level, now):
                    continue
                cand = current.with_changes({f.name: level})
                if cand.key() in seen:
                    continue
                if len(attempts) >= cap:
                    return Measure(
                        "one factor at a time", False, len(attempts), hours, cap, attempts=attempts
                    )
                out = launch(cand, cand.describe_diff(baseline))
                if out.validated:
                    return Measure("one factor at a time", True, len(attempts), hours, attempts=attempts)
                if out.later_than(cur):
                    current, cur, kept = cand, out, True
                    break
    return Measure(
        "one factor at a time",
        False,
        len(attempts),
        hours,
        stop="every single change tried",
        attempts=attempts,
    )


def _level(cand: Candidate, f: Factor) -> FlagValue | None:
    return cand.env_dict.get(f.name[4:]) if f.is_env else cand.flag_dict.get(f.name)


def _same(a: FlagValue | None, b: FlagValue | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and str(a) == str(b))


# -- (d): random order ---------------------------------------------------------------------------------
def random_order(
    oracle: Oracle, baseline: Candidate, factors: list[Factor], seed: int, cap: int = RANDOM_CAP
) -> Measure:
    """Configurations drawn uniformly from the space (each factor: one of its levels or unset; flags
    outside the space as in the baseline), never the same one twice, until one is validated."""
    rng = random.Random(seed)
    size = 1
    for f in factors:
        size *= len(f.levels) + 1
    seen: set[str] = set()
    hours = 0.0
    while len(seen) < min(cap, size):
        cand = baseline.with_changes({f.name: rng.choice([None, *f.levels]) for f in factors})
        if cand.key() in seen:
            continue
        seen.add(cand.key())
        out = oracle.candidate(cand)
        hours += out.simulated_s / 3600
        if out.validated:
            return Measure("random order", True, len(seen), hours)
    return Measure(
        "random order",
        False,
        len(seen),
        hours,
        cap if size > cap else None,
        stop="space exhausted" if size <= cap else "",
    )


def random_median(oracle: Oracle, baseline: Candidate, factors: list[Factor], seeds: int) -> Measure:
    runs = [random_order(oracle, baseline, factors, seed) for seed in range(seeds)]
    # A seed that found nothing within the cap counts as cap + 1 launches.
    n = statistics.median(r.launches if r.validated else r.launches + 1 for r in runs)
    hours = statistics.median(r.hours for r in runs)
    found = sum(r.validated for r in runs)
    validated = n <= RANDOM_CAP
    lo, hi = min(r.launches for r in runs), max(r.launches for r in runs)
    m = Measure(
        f"random order (median of {seeds})",
        validated,
        int(round(n)) if validated else RANDOM_CAP,
        hours,
        None if validated else RANDOM_CAP,
        stop=f"{found}/{seeds} seeds found one",
    )
    m.spread = f"{lo}-{hi}" + ("" if found == seeds else f", {seeds - found} seeds >{RANDOM_CAP}")
    return m


# -- one scenario ----------------------------------------------------------------------------------------
REAL = [("a", True, "auto"), ("a", True, "never"), ("b", False, "auto"), ("b", False, "never")]


def scenario_measures(path: Path, args: argparse.Namespace, pool: ThreadPoolExecutor) -> dict:
    sc = load_scenario(path)
    assert sc.baseline
    oracle = Oracle(sc)
    flags, env = parse_command(sc.baseline, oracle.spec)  # leading NAME=VALUE tokens are the baseline's env
    baseline = Candidate.make(sc.engine, sc.model.name, flags, env, label="baseline")
    space = build_space(sc.engine, oracle.spec, baseline)
    factors = help_ordered(space.factors, oracle)
    futures = {}
    if not args.oracle_only:
        for label, knowledge, screen in REAL:
            # Default settings count minimize launches separately; the screen=never runs skip them.
            futures[(label, screen)] = pool.submit(
                real_run,
                path,
                sc.baseline,
                knowledge,
                screen,
                screen == "auto" and not args.no_minimize,
                args.time_scale,
                args.budget,
            )
    c = ofat(oracle, baseline, factors)
    d = random_median(oracle, baseline, factors, args.seeds)
    return {
        "scenario": sc.name,
        "baseline": sc.baseline,
        "space": {f.name: [str(x) for x in f.levels] for f in factors},
        "baseline_outcome": asdict(oracle.candidate(baseline)),
        "futures": futures,
        "c": c,
        "d": d,
    }


# -- output ------------------------------------------------------------------------------------------------
COLUMNS = [
    ("a", "auto", "(a) knowledge, screen auto"),
    ("a", "never", "(a) knowledge, screen never"),
    ("b", "auto", "(b) no knowledge, screen auto"),
    ("b", "never", "(b) no knowledge, screen never"),
]


def build_rows(results: list[dict], oracle_only: bool) -> tuple[list[str], list[list[str]]]:
    head = ["scenario"]
    if not oracle_only:
        head += [c[2] for c in COLUMNS]
    head += ["(c) one factor at a time", "(d) random, median"]
    rows = []
    for r in results:
        row = [r["scenario"]]
        if not oracle_only:
            for label, screen, _ in COLUMNS:
                m: Measure = r["real"][(label, screen)]
                cell = m.cell()
                if m.minimize:
                    cell += f" (+{m.minimize} minimize)"
                row.append(cell)
        row += [r["c"].cell(), f"{r['d'].cell()} [{r['d'].spread}]"]
        rows.append(row)
    return head, rows


def targets(results: list[dict]) -> list[str]:
    out = []
    for r in results:
        if "real" not in r:
            continue
        for (label, screen), m in r["real"].items():
            limit = TARGET_KNOWLEDGE if label == "a" else TARGET_NO_KNOWLEDGE
            if not m.validated or m.launches > limit:
                got = m.cell().split(" · ")[0]
                out.append(f"{r['scenario']}: ({label}) screen {screen}: {got} launches, target <= {limit}")
    return out


def markdown(
    head: list[str],
    rows: list[list[str]],
    command: str,
    results: list[dict],
    elapsed: float,
    skipped: list[str],
) -> str:
    lines = [
        BEGIN,
        "",
        f"Reproduce (about {round(elapsed)} s here):",
        "",
        "```",
        command,
        "```",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += [
        "",
        "Cells: launches to the first validated configuration (screening launches among them) · "
        "simulated hours of those launches; `+N minimize`: delta-debugging launches after it, not counted; "
        f"`>N`: none within N launches; `none in N`: gave up after N. Random: median over seeds [range]. Targets: (a) <= {TARGET_KNOWLEDGE}, "
        f"(b) <= {TARGET_NO_KNOWLEDGE}; the seeds' engineer needed {SEEDS_ENGINEER} on glm5-nvfp4-sm120.",
        "",
    ]
    if skipped:
        lines += [f"Not measured (no `baseline:` in the file): {', '.join(skipped)}.", ""]
    missed = targets(results)
    if missed:
        lines += ["Targets missed in this measurement:", ""] + [f"- {m}" for m in missed] + [""]
    lines.append(END)
    return "\n".join(lines)


def write_doc(block: str, doc: Path = DOC) -> None:
    """Replace the generated block of our section (create the section, or the file, if missing)."""
    text = doc.read_text() if doc.exists() else "# Search\n"
    if BEGIN in text and END in text:
        text = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _: block, text, flags=re.S)
    elif HEADING in text:
        text = text.replace(HEADING, f"{HEADING}\n\n{block}\n", 1)
    else:
        text = text.rstrip("\n") + f"\n\n{HEADING}\n\n{block}\n"
    doc.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--scenario", action="append", help="a shipped scenario name or a file (default: all shipped)"
    )
    ap.add_argument("--seeds", type=int, default=20, help="random-order seeds (median reported)")
    ap.add_argument("--time-scale", type=float, default=TIME_SCALE, help="real seconds per simulated second")
    ap.add_argument("--budget", type=int, default=OFAT_CAP, help="launch budget of the real runs")
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="real runs in parallel (trials pick free ports independently: >1 can race for one)",
    )
    ap.add_argument("--no-minimize", action="store_true", help="skip delta debugging in the screen=auto runs")
    ap.add_argument("--oracle-only", action="store_true", help="only (c) and (d): no real launches")
    ap.add_argument("--json", type=Path, help="also write every figure and attempt here")
    ap.add_argument("--no-doc", action="store_true", help=f"do not rewrite {DOC.relative_to(ROOT)}")
    args = ap.parse_args()
    paths = [scenario_path(s) for s in args.scenario] if args.scenario else bundled_scenarios()
    console = Console(stderr=True)
    # A scenario without a starting point (e.g. a tuning scenario, where everything serves) has no
    # launches-to-first-working figure: say so rather than invent a baseline for it.
    skipped = [p.stem for p in paths if not load_scenario(p).baseline]
    paths = [p for p in paths if p.stem not in skipped]
    for name in skipped:
        console.print(f"[yellow]skipped[/] {name}: no `baseline:` in the scenario file")
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = [scenario_measures(p, args, pool) for p in paths]
        for r in results:
            r["real"] = {k: f.result() for k, f in r.pop("futures").items()}
            if not r["real"]:
                del r["real"]
    elapsed = time.monotonic() - t0
    head, rows = build_rows(results, args.oracle_only)
    table = Table(title="Launches to the first validated configuration (launches · simulated hours)")
    for h in head:
        table.add_column(h)
    for row in rows:
        table.add_row(*row)
    Console(width=max(160, Console().width)).print(table)
    for m in targets(results):
        console.print(f"[yellow]target missed[/]: {m}")
    argv, skip = [], False  # the command to reproduce the table: without where this run wrote its JSON
    for a in sys.argv[1:]:
        if skip or a == "--json" or a.startswith("--json="):
            skip = a == "--json"
            continue
        argv.append(a)
    command = shlex.join([".venv/bin/python", "benchmarks/search_launches.py", *argv])
    if args.json:

        def enc(o):
            return asdict(o) if isinstance(o, Measure) else str(o)

        dump = [{**r, "real": {f"{k[0]}-{k[1]}": v for k, v in r.get("real", {}).items()}} for r in results]
        args.json.write_text(json.dumps(dump, indent=2, default=enc))
    if not args.no_doc:
        write_doc(markdown(head, rows, command, results, elapsed, skipped))
        console.print(f"wrote {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
