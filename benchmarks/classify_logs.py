"""What `bringup explain` says about every failure log the project holds (tests/data/logs/*.log).

For each log: the engine it was read as, the failure class, the phase, the signature or
root-cause rule that decided, and the root-cause line (evidence[0], process tags and log
prefixes stripped for the table; `bringup explain LOG` prints the line as the log has it).
Provenance of each log: tests/data/logs/README.md.

Run:  .venv/bin/python benchmarks/classify_logs.py [--no-doc]
It prints the table and rewrites the generated part of docs/explain.md.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bringup.explain import explain_file  # noqa: E402
from bringup.tracebacks import strip_prefix  # noqa: E402

LOGS = ROOT / "tests" / "data" / "logs"
DOC = ROOT / "docs" / "explain.md"
BEGIN = "<!-- classify_logs.py: begin -->"
END = "<!-- classify_logs.py: end -->"


def _cell(text: str, width: int = 150) -> str:
    text = text.strip()
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text.replace("|", "\\|").replace("`", "'")


def table() -> str:
    rows = [
        "| log | engine | class | phase | decided by | root-cause line (evidence[0]) |",
        "|---|---|---|---|---|---|",
    ]
    for path in sorted(LOGS.glob("*.log")):
        out = explain_file(path)
        line = strip_prefix(out.evidence[0])[0] if out.evidence else ""
        rows.append(
            f"| `{path.name}` | {out.engine} | {out.failure_class or out.status} | {out.phase or ''} "
            f"| {out.signature or '-'} | `{_cell(line)}` |"
        )
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-doc", action="store_true", help="print only; leave docs/explain.md alone")
    args = ap.parse_args()
    text = table()
    print(text)
    if not args.no_doc:
        doc = DOC.read_text()
        new = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), f"{BEGIN}\n{text}\n{END}", doc, flags=re.S)
        DOC.write_text(new)


if __name__ == "__main__":
    main()
