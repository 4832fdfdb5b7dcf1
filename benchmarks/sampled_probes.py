"""Issue 24 measures on the real vLLM CPU build: false alarms of the sampled probes, ladder time.

One vLLM CPU server (the embedded default's model and flags: the tiny generated model,
--gpu-memory-utilization 0.7) is started once. Then:

- the whole ladder once without and once with the users'-use probes (bringup/verify/probes_user.py),
  each probe's seconds (the ladder's time before and after, on the same server and load);
- the sampled probes only (`sampled`, `sampled-reference` with the model's float32 reference
  computed in-process), `--runs` times: every failure on this healthy server is a false alarm.

Run (wrap it in the engine lock: it launches a real engine):
    flock /tmp/bringup-engine.lock .venv/bin/python benchmarks/sampled_probes.py --runs 100
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bringup.engines.base import engine_info
from bringup.testmodel.tiny import TestModelSpec, write_test_model
from bringup.trial.process import ServerProcess, free_port
from bringup.verify import probes_user as u
from bringup.verify.probes import ProbeConfig, ProbeRunner
from bringup.verify.reference import compute_reference


def wait_ready(url: str, server: ServerProcess, limit: float = 900.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if server.exited():
            raise SystemExit(f"vLLM exited with {server.poll()}")
        try:
            if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                return time.monotonic() - t0
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise SystemExit(f"vLLM not ready after {limit:.0f} s")


def ladder(url: str, cfg: ProbeConfig) -> list:
    return ProbeRunner(url, cfg).run()


def sampled_only(url: str, cfg: ProbeConfig) -> list:
    """The ladder's first two probes (the model name, the greedy timing the stall deadline is
    derived from), then the sampled probes."""
    r = ProbeRunner(url, cfg)
    r.ladder = lambda: [  # type: ignore[method-assign]
        ("health", r.probe_health),
        ("completion", r.probe_completion),
        ("sampled", lambda c: u.probe_sampled(r, c)),
        ("sampled-reference", lambda c: u.probe_sampled_reference(r, c)),
    ]
    return r.run()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sampled-probes-"))
    model = write_test_model(tmp / "model", TestModelSpec())
    ref = compute_reference(str(model))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--gpu-memory-utilization",
        "0.7",
    ]
    server = ServerProcess(argv, tmp / "server.log")
    sup = engine_info("vllm").probes
    cfg = ProbeConfig(reference=ref, top_k=sup.top_k, seeded=sup.seeded, request_timeout=120)
    figures: dict = {}
    try:
        figures["ready_s"] = round(wait_ready(url, server), 1)
        for name, on in (("ladder_before", False), ("ladder_after", True)):
            res = ladder(url, ProbeConfig(**{**cfg.__dict__, "user_probes": on}))
            figures[name] = {
                "seconds": round(sum(r.seconds for r in res), 2),
                "probes": {r.name: [r.passed, r.kind, round(r.seconds, 2), r.detail[:160]] for r in res},
            }
            print(name, figures[name]["seconds"], file=sys.stderr)
        alarms: list[str] = []
        secs: list[float] = []
        for i in range(args.runs):
            res = sampled_only(url, cfg)
            secs.append(sum(r.seconds for r in res if r.name.startswith("sampled")))
            alarms += [f"run {i}: {r.name}: {r.kind}: {r.detail}" for r in res if not r.passed]
            if i % 10 == 0:
                print(f"run {i}: {len(alarms)} false alarms so far", file=sys.stderr)
        figures["sampled_runs"] = args.runs
        figures["false_alarms"] = len(alarms)
        figures["alarms"] = alarms[:20]
        figures["sampled_seconds_median"] = round(statistics.median(secs), 3)
        figures["last_sampled"] = [r.detail[:240] for r in res if r.name.startswith("sampled")]
    finally:
        server.terminate()
    text = json.dumps(figures, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
