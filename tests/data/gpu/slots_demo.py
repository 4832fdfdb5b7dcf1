"""Trials at once on a real 2-GPU machine (issue 15): run from the repo root on the GPU machine.

Four real `transformers serve` trials through bringup's LocalExecutor on GPUs 0 and 1: two that
need one GPU each (`--device cuda:0` under their own CUDA_VISIBLE_DEVICES) run at once, one that
spreads the model over both (`--device auto`) waits and runs alone, then one more single-GPU trial.
A sampler reads every GPU's memory (and its compute processes where the container shows them) every
0.25 s, so that a trial's memory seen on a GPU it was not given is caught. Writes slots.json.
Usage: python3 tests/data/gpu/slots_demo.py MODEL OUT_DIR
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from bringup.core.candidate import Candidate
from bringup.engines.base import get_engine
from bringup.trial.executor import Job, LocalExecutor, TrialRun
from bringup.trial.launch import Trial, TrialSettings
from bringup.trial.slots import GpuSlots
from bringup.verify.probes import ProbeConfig


def smi(query: str, kind: str = "gpu") -> list[list[str]]:
    flag = f"--query-{kind}={query}"
    out = subprocess.run(
        ["nvidia-smi", flag, "--format=csv,noheader,nounits"], capture_output=True, text=True
    ).stdout
    return [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]


def strays(samples: list[dict], trials: list[dict]) -> list[dict]:
    """Interference: memory on a GPU while no trial that was given that GPU runs, and a trial's
    process seen on a GPU it was not given."""
    stray = []
    base = samples[0]["mem"] if samples else {}
    for s in samples:
        running = [t for t in trials if t["start_s"] <= s["t"] <= t["end_s"]]
        for g, mib in s["mem"].items():
            owners = [t for t in running if str(g) in t["gpus"]]
            if running and not owners and mib > base.get(g, 0) + 512:
                stray.append({"t": s["t"], "gpu": g, "mib": mib, "running": [t["label"] for t in running]})
        for p in s["procs"]:
            mine = [t for t in trials if t["pid"] == p["pid"]]
            if mine and str(p["gpu"]) not in mine[0]["gpus"]:
                stray.append({"t": s["t"], "pid": p["pid"], "gpu": p["gpu"], "trial": mine[0]["label"]})
    return stray


def main() -> None:
    model, out_dir = sys.argv[1], Path(sys.argv[2])
    out_dir.mkdir(parents=True, exist_ok=True)
    engine = get_engine("transformers", sys.executable)
    spec = engine.help_spec()
    t0 = time.monotonic()
    samples: list[dict] = []
    stop = threading.Event()
    uuid_to_index = {u: int(i) for i, u in smi("index,uuid")}

    def sample() -> None:
        while not stop.is_set():
            mem = {int(i): int(m) for i, m in smi("index,memory.used")}
            procs = [
                {"pid": int(p), "gpu": uuid_to_index.get(u), "mib": int(m)}
                for p, u, m in smi("pid,gpu_uuid,used_memory", "compute-apps")
                if p.isdigit()
            ]
            samples.append({"t": round(time.monotonic() - t0, 2), "mem": mem, "procs": procs})
            time.sleep(0.25)

    def run_trial(job: Job) -> TrialRun:
        eng = dataclasses.replace(engine, gpus=",".join(job.gpus))
        tdir = out_dir / f"{job.seq:02d}-{job.cand.label}"
        s = TrialSettings(
            timeout=600,
            hang_timeout=300,
            port=job.port,
            cancel=job.cancel,
            probe=ProbeConfig(batch_size=4, long_tokens=64),
        )
        started = time.monotonic() - t0
        o = Trial(eng, job.cand, tdir, s, spec=spec).run()
        return TrialRun(o, tdir, started, time.monotonic() - t0)

    plan = [
        ("sdpa-a", {"--device": "cuda:0", "--attn-implementation": "sdpa"}),
        ("eager-b", {"--device": "cuda:0", "--attn-implementation": "eager"}),
        ("split-both", {"--device": "auto", "--attn-implementation": "sdpa"}),
        ("sdpa-c", {"--device": "cuda:0", "--attn-implementation": "sdpa", "--dtype": "bfloat16"}),
    ]
    jobs = []
    for i, (label, flags) in enumerate(plan, start=1):
        cand = Candidate.make("transformers", model, flags, {}, label=label)
        jobs.append(Job(i, "search", cand, False, {}, need=engine.gpus_needed(cand, spec, 2)))
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    ex = LocalExecutor(run_trial, GpuSlots(["0", "1"]), width=2)
    queue, done = list(jobs), []
    while queue or ex.in_flight():
        while queue and ex.fits(queue[0]):
            ex.submit(queue.pop(0))
        d = ex.wait()
        done.append(d)
    ex.close()
    time.sleep(1.0)
    stop.set()
    th.join()
    trials = []
    for d in done:
        r = d.run
        assert r is not None
        pid = int((r.tdir / "server.pid").read_text().split()[0])
        trials.append(
            {
                "seq": d.job.seq,
                "label": d.job.cand.label,
                "need": d.job.need,
                "gpus": d.job.gpus,
                "port": d.job.port,
                "pid": pid,
                "start_s": round(r.started, 2),
                "end_s": round(r.ended, 2),
                "status": r.outcome.status,
                "failure_class": r.outcome.failure_class,
                "gpu": r.outcome.gpu,
                "timings": r.outcome.timings.model_dump(),
                "evidence": r.outcome.evidence[:3],
            }
        )
    stray = strays(samples, trials)
    wall = max(t["end_s"] for t in trials)
    report = {
        "trials": trials,
        "wall_s": round(wall, 1),
        "stray": stray[:50],
        "stray_count": len(stray),
        "samples": samples,
    }
    (out_dir / "slots.json").write_text(json.dumps(report, indent=1, default=str))
    for t in trials:
        print(
            f"#{t['seq']} {t['label']:<11} gpus {','.join(t['gpus']):<4} {t['start_s']:7.1f}-{t['end_s']:7.1f} s "
            f"{t['status']} {t['failure_class'] or ''} mem back {t['gpu'] and t['gpu'].get('returned_s')}"
        )
    print(f"wall {wall:.1f} s; memory seen on a GPU no running trial was given: {len(stray)} samples")


if __name__ == "__main__":
    main()
