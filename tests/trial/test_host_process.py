"""Issue 39, item 2: bringup's trial, run and tune APIs inside someone else's process.

A host (a fresh interpreter, as a library user's service or notebook is) calls the real entry
points against the scenario engine and checks that nothing of bringup's stays: its signal
handlers, the environment, the working directory, torch's threads, the logging configuration,
sys.stdout/stderr. Then it calls trials and runs in a loop and is interrupted mid-trial: its own
SIGINT handler runs, bringup's call stops, nothing of bringup's is installed, no server is left.

Before: the first trial's handlers stayed installed for good (the host's Ctrl-C became bringup's
exception in the host's own code, and its handler never ran again); the in-process reference left
TORCHINDUCTOR_CACHE_DIR in the environment (torch's import sets it); a tuning left Optuna's
verbosity at WARNING.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TUNE_SCENARIO, finish, group_alive, wait_until
from tests.paths import ROOT

SEED = ROOT / "bringup" / "data" / "scenarios" / "glm5-nvfp4-sm120.yaml"
OOM = "--tp 8 --quantization modelopt_fp4 --mem-fraction-static 0.95"

HOST = r"""
import json, logging, os, signal, sys
from pathlib import Path

mode, seed, tune_sc, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
got = []


def mine(signum, frame):
    got.append(signum)


signal.signal(signal.SIGINT, mine)
import optuna  # the host uses Optuna itself, at its own verbosity

optuna.logging.set_verbosity(optuna.logging.INFO)
logging.getLogger("host").setLevel(logging.DEBUG)

from bringup.core.candidate import Candidate, parse_flags
from bringup.engines.targets import resolve_target
from bringup.session.run import Run
from bringup.session.settings import RunSettings
from bringup.trial import process
from bringup.trial.launch import Trial, TrialSettings
from bringup.verify.probes import ProbeConfig

OOM = "--tp 8 --quantization modelopt_fp4 --mem-fraction-static 0.95"
target = resolve_target(engine=None, model=None, scenario=seed, python=None, time_scale=0.002, gpus=None)


def trial(d):
    cand = Candidate.make(target.engine.log_dialect, target.model, parse_flags(OOM, target.spec), {})
    settings = TrialSettings(probe=ProbeConfig(answers=[]))
    return Trial(target.engine, cand, d, settings, spec=target.spec, version=target.version).run()


def run(d):
    s = RunSettings(scenario=str(seed), time_scale=0.002, baseline=OOM, max_launches=1, minimize=False)
    return Run(s, d).execute()


SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def state():
    sig = {signal.Signals(n).name: repr(signal.getsignal(n)) for n in SIGNALS}
    loggers = {k: v.level for k, v in logging.Logger.manager.loggerDict.items() if isinstance(v, logging.Logger)}
    torch = sys.modules.get("torch")
    return {"env": dict(os.environ), "cwd": os.getcwd(), "out": id(sys.stdout), "err": id(sys.stderr),
            "signals": sig, "loggers": {**loggers, "": logging.getLogger().level},
            "optuna": optuna.logging.get_verbosity(),
            "torch": torch and [torch.get_num_threads(), torch.get_num_interop_threads()]}


def changed(a, b):
    diff = {}
    for k in a:
        if k in ("env", "loggers"):
            d = {n: (a[k].get(n), b[k].get(n)) for n in set(a[k]) | set(b[k]) if a[k].get(n) != b[k].get(n)}
            if k == "loggers":  # a logger a library created during the call is its own
                d = {n: v for n, v in d.items() if v[0] is not None}
            if d:
                diff[k] = d
        elif a[k] != b[k]:
            diff[k] = [a[k], b[k]]
    return diff


root = out.parent / "runs"
if mode == "state":
    import torch  # imported by the host: its thread counts are the host's

    torch.set_num_threads(1)
    report = {}
    before = state()
    trial(root / "trial")
    report["trial"] = changed(before, state())
    run(root / "run")
    report["run"] = changed(before, state())
    from bringup.session.tuning import TuneSettings, Tuning

    ts = TuneSettings(
        scenario=str(tune_sc), config="--mem-fraction-static 0.92 --cuda-graph-max-bs 256",
        knobs=["--mem-fraction-static", "--cuda-graph-max-bs"], trials=2, repeats=0, sweep="",
        num_prompts=8, concurrency=4, input_len=64, output_len=8, time_scale=0.002,
    )
    Tuning(ts, root).execute()
    report["tune"] = changed(before, state())
    from bringup.testmodel.tiny import write_test_model
    from bringup.verify.reference import compute_reference

    compute_reference(str(write_test_model(out.parent / "model")), tokens=2)
    report["reference"] = changed(before, state())
    out.write_text(json.dumps(report))
    sys.exit(0)

# mode == "loop": trials and runs until interrupted; the test sends SIGINT mid-trial
inside = None
i = 0
try:
    while not got and i < 50:
        print(f"trial {i}", flush=True)
        trial(root / f"loop-{i}" / "trial")
        run(root / f"loop-{i}" / "run")
        i += 1
except KeyboardInterrupt as e:
    inside = type(e).__name__
after_call = {n: signal.getsignal(n) for n in SIGNALS}
os.kill(os.getpid(), signal.SIGINT)  # between calls: the host's handler alone, no exception
out.write_text(json.dumps({
    "got": got, "inside": inside, "iterations": i,
    "sigint_is_mine": after_call[signal.SIGINT] is mine,
    "bringup_left": [signal.Signals(n).name for n, h in after_call.items() if h not in (mine, signal.SIG_DFL)],
    "live": list(process._LIVE),
}))
"""


def _host(tmp_path: Path, mode: str) -> subprocess.Popen:
    script = tmp_path / "host.py"
    script.write_text(HOST)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BRINGUP_STATE_DIR": str(tmp_path / "state")}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)  # the host's own environment has none
    return subprocess.Popen(
        [sys.executable, str(script), mode, str(SEED), str(TUNE_SCENARIO), str(tmp_path / "out.json")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
        start_new_session=True,
    )


@pytest.mark.slow
def test_trial_run_tune_and_reference_leave_the_host_as_they_found_it(tmp_path: Path) -> None:
    p = _host(tmp_path, "state")
    err = finish(p, 500)
    assert p.returncode == 0, err[-3000:]
    report = json.loads((tmp_path / "out.json").read_text())
    assert report == {"trial": {}, "run": {}, "tune": {}, "reference": {}}, report


@pytest.mark.slow
def test_a_host_calling_trials_and_runs_in_a_loop_is_interrupted_as_its_own(tmp_path: Path) -> None:
    p = _host(tmp_path, "loop")
    pid_file = tmp_path / "runs" / "loop-1" / "trial" / "server.pid"

    def mid_trial() -> None:  # of the second round: its server is up (a server.pid in its folder)
        assert wait_until(pid_file.exists, 180)
        os.kill(p.pid, signal.SIGINT)

    err = finish(p, 120, mid_trial)
    pgid = int(pid_file.read_text().split()[0])
    assert p.returncode == 0, err[-3000:]
    r = json.loads((tmp_path / "out.json").read_text())
    assert r["got"] == [signal.SIGINT, signal.SIGINT], r  # mid-trial, then between calls: the host's own
    assert r["inside"] == "Interrupted" and r["iterations"] == 1, r  # bringup's call stopped
    assert r["sigint_is_mine"] and r["bringup_left"] == [] and r["live"] == [], r
    assert not group_alive(pgid)
    pids = [int(f.read_text().split()[0]) for f in (tmp_path / "runs").rglob("server.pid")]
    assert pids and all(not group_alive(g) for g in pids)
