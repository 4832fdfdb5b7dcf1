"""An in-process scenario trial gives the Outcome a real `bringup trial --scenario` gives.

Each case is launched for real (the scenario server, the log watcher, the probes, the classifier)
and answered by `InProcessTrial` (the server's lines rendered into a list, read by the same
trial code). Class, phase, signature, root exception, first evidence line (timestamps and pids
aside), status, probe verdicts, the KV report in the log and the simulated seconds (within 1%)
must agree. Plus fast checks of the in-process path on its own, and one whole `Run` with it.
"""

from __future__ import annotations

import shlex
import socket
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest

from bringup.core.candidate import Candidate, parse_command
from bringup.engines.scenario import scenario_engine
from bringup.env.registry import launch_environment
from bringup.facts.memplan import parse_kv_report
from bringup.oracle.inprocess import InProcessTrial, render_startup
from bringup.scenario import load_scenario, scenario_path
from bringup.session.run import Run, RunSettings
from bringup.trial.launch import TrialSettings, progress_key
from bringup.verify.probes import KnownAnswer, ProbeConfig
from tests.conftest import bringup

SCALE = 0.01  # a hang deadline of 6 real seconds: a loaded machine starts a server in less
GLM = "glm5-nvfp4-sm120"
QWEN = "qwen3-30b-a3b-fp8-sm120-vllm"
NCCL = "llama31-70b-pcie-nccl-hang-vllm"
GLM_BASE = load_scenario(scenario_path(GLM)).baseline or ""
GLM_OK = (
    "--tp 8 --quantization modelopt_fp4 --mem-fraction-static 0.88 --nsa-decode-backend trtllm "
    "--nsa-prefill-backend trtllm"
)
NCCL_BASE = load_scenario(scenario_path(NCCL)).baseline or ""
# (scenario, NAME=VALUE tokens then flags): every phase from parse-args to decode, works, wrong
# output in two probes, a hang with a repeating watchdog line.
CASES = [
    (GLM, GLM_BASE),  # graph-capture OOM
    (GLM, GLM_BASE.replace("0.95", "0.88")),  # NaN on the first decode (a serving death)
    (GLM, GLM_OK),  # works
    (GLM, "--tp 8 --quantization modelopt_fp4 --attention-backend fa3"),  # kv-alloc
    (GLM, "--tp 4 --quantization modelopt_fp4"),  # load-weights
    (GLM, "--tp 8 --quantization fp8"),  # parse-args, the engine's own check
    (QWEN, "--max-model-len 32768"),  # wrong answers, no error
    (QWEN, "--max-model-len 32768 --moe-backend triton"),  # works
    (QWEN, "--moe-backend batched_triton"),  # batch-variant greedy output
    (QWEN, "--moe-backend deep_gemm"),  # load-weights
    (NCCL, NCCL_BASE),  # hangs in distributed-init, the watchdog repeating
    (NCCL, f"NCCL_P2P_DISABLE=1 {NCCL_BASE}"),  # works
]


def _ports(n: int) -> list[int]:
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _split(command: str) -> tuple[list[str], list[str]]:
    toks = shlex.split(command)
    env = [t for t in toks if "=" in t and not t.startswith("-") and t.split("=", 1)[0].isupper()]
    return env, [t for t in toks if t not in env]


def _real(name: str, command: str, port: int, runs: Path) -> dict:
    env, flags = _split(command)
    env_args = [a for e in env for a in ("--env", e)]
    rc, data, _, err = bringup(
        "trial", "--scenario", str(scenario_path(name)), "--time-scale", str(SCALE), "--port", str(port),
        "--runs-dir", str(runs), "--json", *env_args, "--", *flags, timeout=120,
    )  # fmt: skip
    assert data is not None, err
    return data


def _in_process(name: str, command: str, tdir: Path):
    engine = scenario_engine(scenario_path(name), SCALE)
    spec = engine.help_spec()
    flags, env = parse_command(command, spec)
    env = {**launch_environment(engine.env_registry(engine.version())), **env}
    cand = Candidate.make(engine.log_dialect, engine.world().default_model() or "", flags, env)
    answers = [KnownAnswer(p, e) for p, e in engine.world().known_answers()]
    settings = TrialSettings(probe=ProbeConfig(answers=answers))
    return InProcessTrial(engine, cand, tdir, settings, spec=spec, version=engine.version()).run()


@pytest.fixture(scope="module")
def launched(tmp_path_factory) -> list[dict]:
    runs = tmp_path_factory.mktemp("inprocess-real")
    ports = _ports(len(CASES))
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(_real, n, c, p, runs) for (n, c), p in zip(CASES, ports, strict=True)]
        return [f.result() for f in futures]


def _first(evidence: list[str]) -> str:
    return progress_key(evidence[0]) if evidence else ""


@pytest.mark.slow
@pytest.mark.parametrize("i", range(len(CASES)), ids=[f"{c[0].split('-')[0]}:{c[1][-36:]}" for c in CASES])
def test_in_process_outcome_agrees_with_a_real_trial(launched, tmp_path, i):
    name, command = CASES[i]
    real = launched[i]
    got = _in_process(name, command, tmp_path / "t").model_dump()
    for key in ("status", "failure_class", "phase", "signature", "root_exception", "implicated_levels"):
        assert got[key] == real[key], (key, got[key], real[key])
    assert _first(got["evidence"]) == _first(real["evidence"])
    assert [(p["name"], p["passed"]) for p in got["probes"]] == [
        (p["name"], p["passed"]) for p in real["probes"]
    ]
    port = ("port",)  # the real trial's free port; the in-process one names none
    assert {k: v for k, v in got["effective"].items() if k not in port} == {
        k: v for k, v in real["effective"].items() if k not in port
    }
    dialect = load_scenario(scenario_path(name)).engine
    kv = [parse_kv_report(Path(o["log_path"]).read_text().splitlines(), dialect) or {} for o in (got, real)]
    for rep in kv:  # the lines quoted as evidence carry their own timestamps and pids
        rep["evidence"] = [progress_key(t) for t in rep.get("evidence", [])]
    assert kv[0] == kv[1]
    sim, real_sim = got["timings"]["simulated"], real["timings"]["simulated"]
    # a served launch: the real client starts the concurrency probe's 32 requests a little apart
    # (the oracle's own slack for served launches, tests/oracle/test_oracle.py); a failure: 1%
    served = real["status"] in ("works", "wrong-output")
    assert sim == pytest.approx(real_sim, rel=0.03 if served else 0.01), (sim, real_sim)


# -- fast: the in-process path on its own ---------------------------------------------------------
def test_a_startup_failure_renders_the_rules_lines_and_stops_there():
    sc = load_scenario(scenario_path(QWEN))
    spec = sc.help_spec()
    argv = ["--model", sc.model.name, "--host", "127.0.0.1", "--port", "8000", "--moe-backend", "deep_gemm"]
    launch = render_startup(sc, argv, {})
    assert launch.ended == "died" and launch.code == 1
    assert any("[scenario-clock]" in ln and "event=died" in ln for ln in launch.lines)
    assert not any("Starting vLLM server" in ln for ln in launch.lines)  # never got to serving
    assert spec.get("--moe-backend") is not None


def test_a_flag_the_engine_argparse_rejects_exits_2_with_its_usage():
    sc = load_scenario(scenario_path(GLM))
    launch = render_startup(sc, ["--model-path", sc.model.name, "--nsa-decode-backend", "nope"], {})
    assert (launch.ended, launch.code) == ("died", 2)
    assert any("invalid choice" in ln for ln in launch.lines)


@pytest.mark.slow
def test_a_whole_run_in_process_validates_the_nccl_scenario(tmp_path):
    settings = RunSettings(scenario=str(scenario_path(NCCL)), screen="never", minimize=False, max_launches=6)
    res = Run(settings, tmp_path, trial_factory=InProcessTrial).execute()
    assert res.validated
    assert res.attempts[0].status == "timeout" and res.attempts[0].phase == "distributed-init"
    assert res.simulated_hours and res.simulated_hours > 600 / 3600  # the hang costs its deadline


class _HeldByAnother(InProcessTrial):
    """The first launch's teardown finds its GPUs' memory taken by a process the run did not
    start (seen on the H200: a server started beside the run took 128 GB during a launch)."""

    def run(self):
        out = super().run()
        out.gpu = {
            "held": [
                "GPU 0: 128715 MiB in use, 615 MiB before the last launch",
                "pid 10813 (python3) on GPU 0",
            ]
        }
        return self._write(out)  # as a real trial records its teardown's GPU reading


class _NeverBack:
    def is_back(self, indices):
        return False  # the other program keeps its server up


def test_a_run_whose_gpus_another_process_holds_stops_saying_which_and_what_holds_them(tmp_path, monkeypatch):
    import bringup.session.launching as launching

    monkeypatch.setattr(launching, "default_watch", _NeverBack)
    settings = RunSettings(
        scenario=str(scenario_path(NCCL)), screen="never", minimize=False, max_launches=6, gpus="0"
    )
    res = Run(settings, tmp_path, trial_factory=_HeldByAnother).execute()
    assert res.launches == 1 and not res.validated
    assert res.status == "not-found"
    assert "whose memory was still not back" in res.stop_reason and "pid 10813" in res.stop_reason
    assert "--resume" in res.stop_reason
