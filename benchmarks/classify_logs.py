"""What `bringup explain` says about every failure log the project holds (tests/data/logs/*.log).

For each log: the engine it was read as, the failure class, the phase, the signature or
root-cause rule that decided, and the root-cause line (evidence[0], process tags and log
prefixes stripped for the table; `bringup explain LOG` prints the line as the log has it).
Provenance of each log: tests/data/logs/README.md.

`--generic` matches no signature at all: only the generic layer (the traceback parser, the
root-cause rules of bringup/data/rootcause.yaml, the phase markers) decides, which is what a log
no signature foresaw gets. Either way the last line scores the table against the expected class,
phase and root-cause line of tests/observe/test_rootcause.py (CASES).

Run:  .venv/bin/python benchmarks/classify_logs.py [--no-doc] [--generic]
It prints the table and rewrites the generated part of docs/explain.md (not with --generic).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bringup.engines.explain import explain_file  # noqa: E402
from bringup.observe.outcome import Outcome  # noqa: E402
from bringup.observe.tracebacks import strip_prefix  # noqa: E402

LOGS = ROOT / "tests" / "data" / "logs"
DOC = ROOT / "docs" / "explain.md"
BEGIN = "<!-- classify_logs.py: begin -->"
END = "<!-- classify_logs.py: end -->"


def _cell(text: str, width: int = 150) -> str:
    text = text.strip()
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text.replace("|", "\\|").replace("`", "'")


def expected() -> dict[str, tuple[str, str, str]]:
    """log -> (class, phase, root-line fragment), from tests/observe/test_rootcause.py's CASES."""
    spec = importlib.util.spec_from_file_location(
        "test_rootcause", ROOT / "tests" / "observe" / "test_rootcause.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {c[0]: (c[1], c[2], c[3]) for c in mod.CASES}


def right(out: Outcome, want: tuple[str, str, str]) -> bool:
    line = out.evidence[0] if out.evidence else ""
    return (out.failure_class, out.phase) == want[:2] and want[2] in line


def table(generic: bool = False) -> tuple[str, str]:
    rows = [
        "| log | engine | class | phase | decided by | root-cause line (evidence[0]) |",
        "|---|---|---|---|---|---|",
    ]
    want = expected()
    scored = {"all": [0, 0], "h200": [0, 0]}
    for path in sorted(LOGS.glob("*.log")):
        out = explain_file(path, signatures=() if generic else None)
        line = strip_prefix(out.evidence[0])[0] if out.evidence else ""
        rows.append(
            f"| `{path.name}` | {out.engine} | {out.failure_class or out.status} | {out.phase or ''} "
            f"| {out.signature or '-'} | `{_cell(line)}` |"
        )
        if path.name in want:
            ok = right(out, want[path.name])
            for key in ("all", "h200") if "-h200-" in path.name else ("all",):
                scored[key][0] += ok
                scored[key][1] += 1
    (a, n), (ha, hn) = scored["all"], scored["h200"]
    score = (
        f"{'generic rules only' if generic else 'signatures and rules'}: class, phase and root-cause line right "
        f"in {a} of {n} failure logs ({ha} of {hn} H200 logs)"
    )
    return "\n".join(rows), score


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-doc", action="store_true", help="print only; leave docs/explain.md alone")
    ap.add_argument("--generic", action="store_true", help="match no signature: the generic rules alone")
    args = ap.parse_args()
    text, score = table(args.generic)
    print(text)
    print()
    print(score)
    if not args.no_doc and not args.generic:
        doc = DOC.read_text()
        new = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), f"{BEGIN}\n{text}\n{END}", doc, flags=re.S)
        DOC.write_text(new)


if __name__ == "__main__":
    main()
