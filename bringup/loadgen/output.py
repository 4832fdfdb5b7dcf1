"""Results on disk: bench.json (configs and summaries), bench.csv (one row per point) and
requests.jsonl (one line per request, with its point)."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

from bringup.guard import files
from bringup.loadgen.runner import BenchResult


def write_results(results: Sequence[BenchResult], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "bench.json", out_dir / "bench.csv", out_dir / "requests.jsonl"]
    doc = [r.model_dump(mode="json", exclude={"requests"}) for r in results]
    files.write_text(paths[0], json.dumps(doc, indent=2) + "\n")
    rows = [r.row() for r in results]
    with files.open_write(paths[1], newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["point"])
        w.writeheader()
        w.writerows(rows)
    with files.open_write(paths[2]) as f:
        for r in results:
            for rec in r.requests:
                f.write(json.dumps({"point": r.summary.point, **rec.model_dump(mode="json")}) + "\n")
    return paths
