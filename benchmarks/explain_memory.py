"""Issue 14 measure: `bringup explain` on hostile logs, in bounded memory and with escaped output.

Cases (each run as its own `bringup explain --json` process; peak memory is that process's
maximum resident set size from wait4):
- the 17-line SGLang graph-capture OOM log (reference answer);
- the same log with `--size` (default 1 GiB) of repeated decode-progress lines between its load
  and its failure: the answer must not change;
- 50 MB of random bytes (no newline structure, no text);
- a log whose lines hold terminal escape sequences (retitle, clear screen): none may reach stdout.

Run:  .venv/bin/python benchmarks/explain_memory.py [--size-mb 1024] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED_LOG = ROOT / "tests" / "data" / "logs" / "sglang-graph-oom.log"


def explain(path: Path) -> tuple[dict | None, float, float, bytes]:
    """(JSON answer, seconds, peak RSS in MB, raw stdout) of one `bringup explain` process."""
    t0 = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-m", "bringup", "explain", str(path), "--json"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    out = p.stdout.read() if p.stdout else b""
    _, _, ru = os.wait4(p.pid, 0)
    p.returncode = 0
    secs = time.monotonic() - t0
    try:
        data = json.loads(out)
    except ValueError:
        data = None
    return data, secs, ru.ru_maxrss / 1024, out


def big_log(dst: Path, size_mb: int) -> None:
    lines = SEED_LOG.read_text().splitlines(keepends=True)
    head, rest = lines[:4], lines[4:]
    rng = random.Random(0)
    block = "".join(
        f"[2026-02-18 22:{rng.randrange(60):02d}:{rng.randrange(60):02d} TP0] Decode batch. #running-req: "
        f"{rng.randrange(64)}, #token: {rng.randrange(10**6)}, token usage: 0.{rng.randrange(100):02d}, "
        f"gen throughput (token/s): {rng.random() * 900:.2f}, #queue-req: {rng.randrange(9)}\n"
        for _ in range(8000)
    ).encode()
    with open(dst, "wb") as f:
        f.write("".join(head).encode())
        written = 0
        while written < size_mb << 20:
            f.write(block)
            written += len(block)
        f.write("".join(rest).encode())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument(
        "--keep", type=Path, default=None, help="write the generated logs here (default: a temp dir)"
    )
    a = ap.parse_args()
    tmp = a.keep or Path(tempfile.mkdtemp(prefix="bringup-explain-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    cases = []
    cases.append(("seed log (17 lines)", SEED_LOG))
    big = tmp / "big.log"
    big_log(big, a.size_mb)
    cases.append((f"seed log + {a.size_mb} MB of decode lines", big))
    rnd = tmp / "random.bin"
    rnd.write_bytes(random.Random(1).randbytes(50 << 20))
    cases.append(("50 MB of random bytes", rnd))
    esc = tmp / "escapes.log"
    esc.write_bytes(
        SEED_LOG.read_bytes().replace(b"Exception: Capture", b"\x1b]0;pwned\x07\x1b[2JException: Capture")
    )
    cases.append(("escape sequences in lines", esc))
    rows = []
    ref = None
    try:
        for name, path in cases:
            d, secs, mb, raw = explain(path)
            answer = (d or {}).get("failure_class"), (d or {}).get("phase")
            ref = ref or answer
            rows.append((name, path.stat().st_size / 2**20, secs, mb, answer, b"\x1b" not in raw))
    finally:
        if a.keep is None:
            for p in tmp.iterdir():
                p.unlink()
            tmp.rmdir()
    print(f"{'case':40} {'size MB':>9} {'seconds':>8} {'peak MB':>8}  {'class / phase':32} no ESC out")
    for name, size, secs, mb, answer, clean in rows:
        print(f"{name:40} {size:9.1f} {secs:8.1f} {mb:8.0f}  {answer[0]!s:>18} / {answer[1]!s:13} {clean}")
    print(f"reference answer: {ref}; same answer on the big log: {rows[1][4] == ref}")


if __name__ == "__main__":
    main()
