"""Results on disk: bench.json (configs and summaries), bench.csv (one row per point) and
requests.jsonl (one line per request, with its point)."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

from bringup.loadgen.runner import BenchResult


def write_results(results: Sequence[BenchResult], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "bench.json", out_dir / "bench.csv", out_dir / "requests.jsonl"]
    doc = [r.model_dump(mode="json", exclude={"requests"}) for r in results]
    paths[0].write_text(json.dumps(doc, indent=2) + "\n")
    rows = [r.row() for r in results]
    with paths[1].open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["point"])
        w.writeheader()
        w.writerows(rows)
    with paths[2].open("w") as f:
        for r in results:
            for rec in r.requests:
                f.write(json.dumps({"point": r.summary.point, **rec.model_dump(mode="json")}) + "\n")
    return paths
