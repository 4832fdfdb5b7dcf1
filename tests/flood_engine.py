"""A fake engine that floods its log: N short lines, then a fatal traceback, then it hangs.

    python tests/flood_engine.py N STAMP_FILE [--distinct] [--long-line BYTES]

Prints N lines shaped like vLLM's metrics line (a counter and a timestamp in each, so no two are
the same text; with --distinct each line also carries a word of its own, so none repeats even with
numbers ignored; with --long-line a line of BYTES bytes comes first), writes the wall time into STAMP_FILE just before the traceback's first line,
prints a CUDA illegal-memory-access traceback (a fatal signature), and sleeps: only bringup's
teardown ends it. Written in large blocks, as fast as the pipe takes them (bringup's reader sets
the pace: it holds at most a few reads in memory). For benchmarks/trial_flood.py and
tests/trial/test_flood.py.
"""

from __future__ import annotations

import sys
import time

TRACEBACK = [
    "ERROR 12-04 10:00:01 [core.py:700] EngineCore encountered a fatal error.",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/site-packages/vllm/v1/engine/core.py", line 690, in run_engine_core',
    "    engine_core.run_busy_loop()",
    '  File "/usr/lib/python3/site-packages/vllm/v1/worker/gpu_model_runner.py", line 1200, in execute_model',
    "    torch.cuda.synchronize()",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
]
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]


def line(i: int, distinct: bool) -> str:
    tag = "".join(WORDS[int(d)][:2] for d in str(i)) if distinct else "000"
    return (
        f"INFO 12-04 10:{i // 60 % 60:02d}:{i % 60:02d} [loggers.py:123] Engine {tag}: Avg prompt "
        f"throughput: {i % 977}.0 tokens/s, Running: {i % 7} reqs\n"
    )


def main() -> None:
    n, stamp = int(sys.argv[1]), sys.argv[2]
    distinct = "--distinct" in sys.argv
    out = sys.stdout.buffer
    if "--long-line" in sys.argv:
        left = int(sys.argv[sys.argv.index("--long-line") + 1])
        while left > 0:
            out.write(b"x" * min(left, 1 << 20))
            left -= 1 << 20
        out.write(b"\n")
    block: list[str] = []
    for i in range(n):
        block.append(line(i, distinct))
        if len(block) >= 2000:
            out.write("".join(block).encode())
            block = []
    out.write("".join(block).encode())
    out.flush()
    with open(stamp, "w") as f:
        f.write(repr(time.time()))
    out.write(("\n".join(TRACEBACK) + "\n").encode())
    out.flush()
    time.sleep(3600)


if __name__ == "__main__":
    main()
