"""The in-process oracle agrees with real launches of the scenario server.

Each case is launched for real with `bringup trial --scenario ... --json` (the server, the log
watcher, the probes, the classifier) and asked of the oracle; status, failure phase and the
simulated seconds must agree. The launches run in parallel on distinct ports to keep this fast.
"""

from __future__ import annotations

import json
import re
import shlex
import socket
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest

from bringup.core.candidate import parse_flags
from bringup.oracle.trials import Oracle, OracleOutcome
from bringup.scenario import load_scenario, scenario_path
from bringup.scenario.engine_args import parse_engine_argv
from bringup.session.run import Run, RunSettings
from tests.conftest import bringup

SCALE = 0.002
GLM = "glm5-nvfp4-sm120"
QWEN = "qwen3-30b-a3b-fp8-sm120-vllm"
SAMPLER = "llama31-8b-sm120-sampler-wrong-sglang"
LONG = "llama31-8b-h200-long-prompt-fp8kv-vllm"
FULL = "qwen25-14b-h200-concurrency-graph-vllm"
GLM_BASE = load_scenario(scenario_path(GLM)).baseline or ""
GLM_OK = (
    "--tp 8 --quantization modelopt_fp4 --mem-fraction-static 0.88 --nsa-decode-backend trtllm "
    "--nsa-prefill-backend trtllm"
)
GLM_SCREEN = "--load-format dummy --json-model-override-args '{\"num_hidden_layers\": 4}'"
# (scenario, flags, what the scenario's rules say should happen: status, phase)
CASES = [
    (GLM, GLM_BASE, "fails", "graph-capture"),  # seeds attempt 1: OOM in graph capture
    (GLM, GLM_BASE.replace("0.95", "0.88"), "fails", "decode"),  # attempt 2: NaN after 1 token
    (GLM, GLM_OK, "works", None),  # attempt 7
    (GLM, f"{GLM_OK} {GLM_SCREEN}", "works", None),  # screened: dummy weights, 4 layers
    (GLM, f"{GLM_BASE} {GLM_SCREEN}", "fails", "decode"),  # screening cannot see the memory trap
    (
        GLM,
        "--tp 8 --quantization modelopt_fp4 --attention-backend trtllm_mla --disable-cuda-graph",
        "fails",
        "warmup",
    ),  # a graph-capture rule strikes at warm-up without CUDA graphs
    (GLM, "--tp 8 --quantization modelopt_fp4 --attention-backend fa3", "fails", "kv-alloc"),
    (GLM, "--tp 4 --quantization modelopt_fp4", "fails", "load-weights"),
    (GLM, "--tp 8 --quantization fp8", "fails", "parse-args"),
    (GLM, "--tp 8 --nsa-decode-backend nope", "fails", "parse-args"),  # rejected before launch
    (QWEN, "--max-model-len 32768", "wrong-output", "decode"),  # known answers wrong, no error
    (QWEN, "--max-model-len 32768 --moe-backend triton", "works", None),
    (QWEN, "--moe-backend triton --enforce-eager", "works", None),
    (QWEN, "--moe-backend batched_triton", "wrong-output", "load"),  # batch-variant greedy output
    (QWEN, "--moe-backend deep_gemm", "fails", "load-weights"),
    # faults only users' requests show (issue 24): sampling, a long prompt, the full batch
    (SAMPLER, "--context-length 16384", "wrong-output", "decode"),
    (SAMPLER, "--context-length 16384 --sampling-backend pytorch", "works", None),
    (LONG, "--max-model-len 32768 --kv-cache-dtype fp8", "wrong-output", "decode"),
    (LONG, "--max-model-len 32768", "works", None),
    (FULL, "--max-model-len 16384", "wrong-output", "load"),
    (FULL, "--max-model-len 16384 --enforce-eager", "works", None),
]


def _ports(n: int) -> list[int]:
    """n distinct free ports (held open together so that none repeats)."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _trial(name: str, flags: str, port: int, runs: Path) -> dict:
    rc, data, _, err = bringup(
        "trial",
        "--scenario",
        str(scenario_path(name)),
        "--time-scale",
        str(SCALE),
        "--port",
        str(port),
        "--runs-dir",
        str(runs),
        "--json",
        "--",
        *shlex.split(flags),
        timeout=120,
    )
    assert data is not None, err
    return data


def _tolerance(name: str, oracle: OracleOutcome) -> float:
    """The oracle lets the concurrent batch probe's requests overlap fully; a real client starts them
    a little apart, which at a small time scale can be a request's length each (the batch probe's
    8, and the concurrency probe's 32 from 32 threads: on a loaded host each can be a request late). Nothing
    else may differ."""
    sc = load_scenario(scenario_path(name))
    one_request = 16 * sc.timing.per_output_token + 20 * sc.timing.prefill_per_token
    served = oracle.status in ("works", "wrong-output")
    return 0.002 + ((7 + 32) * one_request if served else 0.0)


@pytest.fixture(scope="module")
def launched(tmp_path_factory) -> list[dict]:
    runs = tmp_path_factory.mktemp("oracle-runs")
    ports = _ports(len(CASES))
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [
            pool.submit(_trial, name, flags, port, runs)
            for (name, flags, _, _), port in zip(CASES, ports, strict=True)
        ]
        return [f.result() for f in futures]


@pytest.mark.slow
@pytest.mark.parametrize("i", range(len(CASES)), ids=[f"{c[0].split('-')[0]}:{c[1][-40:]}" for c in CASES])
def test_oracle_agrees_with_a_real_launch(launched, i):
    name, flags, status, phase = CASES[i]
    oracle = Oracle.load(scenario_path(name))
    predicted = oracle.outcome(
        parse_flags(flags, None) if "nope" in flags else parse_flags(flags, oracle.spec)
    )
    real = launched[i]
    # The case is what its rule says, and the oracle and the server both say it.
    assert (predicted.status, predicted.phase) == (status, phase)
    assert (real["status"], real["phase"]) == (status, phase), real.get("evidence")
    assert predicted.launched == real["launched"]
    sim = real["timings"]["simulated"] or 0.0
    assert abs(sim - predicted.simulated_s) <= _tolerance(name, predicted), (sim, predicted)
    # The oracle's overlap is the ideal: a real launch never takes less simulated time.
    assert sim >= predicted.simulated_s - 0.002


def test_screening_outcome_is_the_screen_flags_without_known_answers():
    oracle = Oracle.load(scenario_path(QWEN))
    base = parse_flags("--max-model-len 32768", oracle.spec)
    screened = oracle.outcome(base, screen=True)
    # Random weights cannot be judged by known answers, so a screen of the wrong-answer trap passes...
    assert screened.status == "works"
    no_answers = Oracle(oracle.scenario, probe=type(oracle.probe)(answers=[]))
    assert no_answers.outcome({**base, **oracle.screen_flags()}) == screened
    # ...and it loads dummy weights of 4 layers: far cheaper than the full launch.
    assert screened.simulated_s < oracle.outcome(base).simulated_s / 2


@pytest.mark.slow
def test_screen_flags_are_the_runs(tmp_path):
    for name in (GLM, QWEN):
        run = Run(RunSettings(scenario=str(scenario_path(name)), time_scale=SCALE), tmp_path / name)
        run.prepare()
        assert Oracle(run.target.engine.scenario).screen_flags() == run.screening.flags


@pytest.mark.parametrize(
    "name, flags",
    [
        (GLM, GLM_BASE),
        (GLM, GLM_OK + " --disable-cuda-graph --cuda-graph-max-bs 64"),
        (QWEN, "--max-model-len 32k --enforce-eager --kv-cache-dtype fp8 --moe-backend triton"),
        (QWEN, "--max_model_len 4096 --no-enable-prefix-caching"),
    ],
)
def test_cached_parser_parses_like_the_engine(name, flags):
    oracle = Oracle.load(scenario_path(name))
    argv = [oracle.model_flag, oracle.scenario.model.name, "--port", "1", *shlex.split(flags)]
    mine, engine = (
        oracle.parse(argv),
        parse_engine_argv(argv, oracle.spec, oracle.scenario.engine, oracle.help_text),
    )
    assert (mine.flags, mine.positionals) == (engine.flags, engine.positionals)
    assert list(mine.flags) == list(engine.flags)  # the order the flags were written in


def test_decode_death_counts_the_tokens_before_it():
    """A decode failure after N tokens costs ready + prefill + N steps of the first request that gets
    that far; fewer tokens asked for complete."""
    oracle = Oracle.load(scenario_path(GLM))
    out = oracle.outcome(parse_flags(GLM_BASE.replace("0.95", "0.88"), oracle.spec))
    t = oracle.scenario.timing
    ready = t.start + t.load_weights + t.kv_alloc + t.graph_capture + t.warmup
    assert out.simulated_s == pytest.approx(ready + 4 * t.prefill_per_token + t.per_output_token)


BRING_UP = [
    "glm5-nvfp4-sm120",
    "glm51-nvfp4-sm120-sglang0523",
    "deepseek-v2-lite-sm120-vllm",
    "llama3-70b-h200-sglang",
    "qwen3-30b-a3b-fp8-sm120-vllm",
]


@pytest.mark.parametrize("name", BRING_UP)
def test_each_bring_up_scenarios_baseline_falls_into_its_trap(name):
    oracle = Oracle.load(scenario_path(name))
    assert oracle.scenario.baseline, f"{name} has no baseline"
    out = oracle.outcome(parse_flags(oracle.scenario.baseline, oracle.spec))
    assert out.launched and out.status != "works" and out.rule is not None, out


@pytest.mark.parametrize(
    "baseline, problem",
    [
        ("--tp 8 --nsa-decode-backend nope", "invalid choice: 'nope'"),
        ("--tp 8 --model-path x", "leave out --model-path"),
        ("--tp 8 --port 1", "leave out --port"),
        ("--no-such-flag 1", "unrecognized arguments: --no-such-flag"),
    ],
)
def test_a_baseline_the_engine_would_reject_is_a_scenario_error(tmp_path, baseline, problem):
    from bringup.scenario import ScenarioError

    text = scenario_path(GLM).read_text()
    path = tmp_path / "bad.yaml"
    path.write_text(re.sub(r"^baseline: .*$", f"baseline: {json.dumps(baseline)}", text, count=1, flags=re.M))
    with pytest.raises(ScenarioError, match="baseline: .*" + re.escape(problem)):
        load_scenario(path)


def test_hang_costs_the_wait(tmp_path):
    """A hang is the one modelled cost: the time to the hang plus the watcher's deadline."""
    raw = (
        (scenario_path(QWEN))
        .read_text()
        .replace(
            "rules:\n",
            "rules:\n  - id: stuck\n    when: {enforce-eager: true}\n    hang: {phase: kv-alloc}\n",
            1,
        )
    )
    path = tmp_path / "hang.yaml"
    path.write_text(raw)
    oracle = Oracle.load(path, hang_s=100.0)
    out = oracle.outcome({"--enforce-eager": True})
    t = oracle.scenario.timing
    assert (out.status, out.phase, out.rule) == ("timeout", "kv-alloc", "stuck")
    assert out.simulated_s == pytest.approx(t.start + t.load_weights + 0.35 * t.kv_alloc + 100.0)
    assert json.dumps(out.__dict__)  # plain data, for benchmark output


def test_the_oracle_walks_the_probe_ladders_own_steps(monkeypatch):
    """One list of probes (bringup.verify.probes.ladder_steps): a probe added to the ladder and not
    replayed by the oracle stops the oracle with what to do, instead of drifting from the ladder."""
    import bringup.oracle.trials as trials
    from bringup.verify.probes import ProbeConfig, ProbeRunner, ladder_steps

    cfg = ProbeConfig(answers=[])
    assert [n for n, _ in ProbeRunner("http://x", cfg).ladder()] == ladder_steps(cfg)
    oracle = Oracle.load(scenario_path(QWEN))
    base = parse_flags("--max-model-len 32768 --moe-backend triton", oracle.spec)
    assert oracle.outcome(base).status == "works"
    monkeypatch.setattr(trials, "ladder_steps", lambda c: [*ladder_steps(c), "a-new-probe"])
    with pytest.raises(NotImplementedError, match="does not replay probe 'a-new-probe'"):
        Oracle.load(scenario_path(QWEN)).outcome(base)  # a fresh oracle: outcomes are cached


def test_the_in_process_trial_walks_the_probe_ladders_own_steps(monkeypatch, tmp_path):
    import bringup.oracle.trials as trials
    from bringup.core.candidate import Candidate
    from bringup.engines.scenario import scenario_engine
    from bringup.oracle.inprocess import InProcessTrial
    from bringup.trial.launch import TrialSettings
    from bringup.verify.probes import ProbeConfig, ladder_steps

    engine = scenario_engine(scenario_path(QWEN), 0.01)
    spec = engine.help_spec()
    flags = parse_flags("--max-model-len 32768 --moe-backend triton", spec)
    cand = Candidate.make(engine.log_dialect, engine.world().default_model() or "", flags, {})

    def trial(d: str) -> InProcessTrial:
        settings = TrialSettings(probe=ProbeConfig(answers=[]))
        return InProcessTrial(engine, cand, tmp_path / d, settings, spec=spec, version=engine.version())

    out = trial("a").run()
    assert out.status == "works"
    assert [p.name for p in out.probes] == ladder_steps(ProbeConfig(answers=[]))
    monkeypatch.setattr(trials, "ladder_steps", lambda c: [*ladder_steps(c), "a-new-probe"])
    with pytest.raises(NotImplementedError, match="does not replay probe 'a-new-probe'"):
        trial("b").run()
