"""`otherwise:` (what unnamed levels do), phases, repeats, salad, pids and the trial's deadlines."""

from __future__ import annotations

import asyncio
import io

import pytest

from bringup.core.candidate import Candidate
from bringup.core.datafiles import phase_index
from bringup.engines.base import Engine
from bringup.engines.world import World
from bringup.oracle.trials import Oracle
from bringup.scenario import ScenarioError, bundled_scenarios, load_scenario
from bringup.scenario.config import compute_config, decide
from bringup.scenario.generate import Generator, Sampling
from bringup.scenario.logfmt import LogWriter, SimClock, hang_forever
from bringup.scenario.schema import Repeat
from bringup.trial.launch import Trial, TrialSettings, progress_key

MINIMAL = """\
name: t
description: d
engine: vllm
engine_version: 0.32.0
hardware: {gpu: G, compute_capability: 12.0, count: 1, memory_gib: 96}
model: {name: m, architecture: A, model_type: a, attention: gqa, weights_gib: 10, layers: 4}
answers: [{prompt: "What is 2+2?", expected: "4"}]
rules:
  - {id: triton-wrong, when: {attention-backend: TRITON_ATTN}, serve: {mode: garbage}}
"""
OTHERWISE = """\
otherwise:
  default: {fail: {phase: kv-alloc, lines: ["RuntimeError: nothing else works"]}}
  factors:
    - flag: attention-backend
      levels: [FLASHINFER, TRITON_ATTN, null]
      fail: {phase: load-weights, lines: ["ValueError: Selected backend {attention_backend} is not valid"]}
    - flag: "env:VLLM_USE_FLASHINFER_SAMPLER"
      levels: [null, "1", "0"]
      hang: {phase: distributed-init}
"""


def _load(tmp_path, body: str):
    p = tmp_path / "s.yaml"
    p.write_text(body)
    return load_scenario(p)


def _decide(sc, argv: list[str], env: dict[str, str] | None = None):
    from bringup.scenario.engine_args import parse_engine_argv

    req = parse_engine_argv(["--model", "m", *argv], sc.help_spec(), sc.engine)
    return decide(sc, compute_config(sc, sc.help_spec(), req.flags, req.positionals, env or {}))


def test_without_otherwise_an_unnamed_level_serves(tmp_path):
    sc = _load(tmp_path, MINIMAL)
    assert _decide(sc, ["--attention-backend", "FLASH_ATTN"]) is None  # the old, flattering behaviour


def test_otherwise_factors_then_default(tmp_path):
    sc = _load(tmp_path, MINIMAL + OTHERWISE)
    assert _decide(sc, ["--attention-backend", "TRITON_ATTN"]).id == "triton-wrong"  # a rule wins
    r = _decide(sc, ["--attention-backend", "CUTLASS_MLA"])
    assert r.id == "otherwise:attention-backend" and r.fail.phase == "load-weights"
    r = _decide(sc, [], {"VLLM_USE_FLASHINFER_SAMPLER": "7"})
    assert r.id == "otherwise:env:VLLM_USE_FLASHINFER_SAMPLER" and r.hang.phase == "distributed-init"
    r = _decide(sc, ["--attention-backend", "FLASHINFER"])
    assert r.id == "otherwise" and r.fail.phase == "kv-alloc"  # modelled levels, no rule: the default
    o = Oracle(sc, env={}).outcome({"--attention-backend": "CUTLASS_MLA"})
    assert (o.status, o.phase, o.rule) == ("fails", "load-weights", "otherwise:attention-backend")


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            "otherwise:\n  factors: [{flag: attention-backnd, levels: [A], serve: {mode: ok}}]\n",
            "otherwise.factors[0].flag: unknown flag --attention-backnd",
        ),
        (
            "otherwise:\n  factors: [{flag: attention-backend, levels: [A]}]\n",
            "exactly one of fail, hang, serve",
        ),
        ("otherwise:\n  default: {when: {tp: 2}, serve: {mode: ok}}\n", "takes no `when`"),
        ("rules:\n  - hang: {phase: kv-alloc, repeat: {every: 0, lines: [x]}}\n", "greater than 0"),
    ],
)
def test_bad_otherwise_and_repeat_name_the_field(tmp_path, extra, message):
    with pytest.raises(ScenarioError) as e:
        _load(
            tmp_path,
            MINIMAL.replace(
                "rules:\n  - {id: triton-wrong, when: {attention-backend: TRITON_ATTN}, "
                "serve: {mode: garbage}}\n",
                "",
            )
            + extra,
        )
    assert message in str(e.value)


def test_every_shipped_scenario_says_what_unnamed_levels_do():
    for p in bundled_scenarios():
        assert load_scenario(p).otherwise is not None, p.name
        before = p.read_text().split("\notherwise:")[0].rstrip().splitlines()
        assert before[-1].startswith("#"), f"{p.name}: give the reasons in comments right above otherwise:"


def test_phase_order_puts_distributed_init_and_kernel_warmup_where_engines_run_them():
    order = [
        "spawn",
        "parse-args",
        "distributed-init",
        "load-weights",
        "kv-alloc",
        "kernel-warmup",
        "graph-capture",
        "warmup",
        "ready",
        "first-request",
        "decode",
    ]
    assert [phase_index(p) for p in order] == sorted(phase_index(p) for p in order)
    assert phase_index("distributed-init") >= 0 and phase_index("kernel-warmup") >= 0


def test_engine_phase_markers_see_the_new_phases():
    vl, sg = Engine(name="vllm"), Engine(name="sglang")
    assert (
        vl.phase_of("(Worker_TP0 pid=9) INFO 11-30 10:00:00 [pynccl.py:113] vLLM is using nccl==2.28.9")
        == "distributed-init"
    )
    assert (
        vl.phase_of(
            "(EngineCore_DP0 pid=9) INFO 11-30 10:00:00 [gpu_model_runner.py:2602] Starting to load "
            "model m..."
        )
        == "load-weights"
    )
    assert (
        vl.phase_of(
            "2026-11-30 10:00:00,000 - INFO - autotuner.py:256 - flashinfer.jit: [Autotuner]: "
            "Autotuning process starts ..."
        )
        == "kernel-warmup"
    )
    assert sg.phase_of("[2026-11-30 10:00:00 TP0] Init torch distributed begin.") == "distributed-init"
    assert (
        sg.phase_of("[2026-11-30 10:00:00 TP0] Init torch distributed ends. mem usage=0.62 GB")
        == "load-weights"
    )


def test_salad_is_random_tokens_and_misses_known_answers():
    from bringup.scenario.schema import Answer

    answers = [Answer(prompt="What is 2+2?", expected="4")]
    ok = Generator("ok", answers).plan("What is 2+2?", Sampling(max_tokens=16, temperature=0.0))
    salad = Generator("salad", answers).plan("What is 2+2?", Sampling(max_tokens=16, temperature=0.0))
    assert "4" in ok.text and "4" not in salad.text and len(salad.tokens) == len(ok.tokens)
    again = Generator("salad", answers).plan("What is 2+2?", Sampling(max_tokens=16, temperature=0.0))
    assert again.tokens == salad.tokens  # deterministic, as greedy decoding is


def test_each_imitated_process_has_its_own_pid():
    out = io.StringIO()
    log = LogWriter("vllm", SimClock(0.0), stream=out, pid=1000)
    log.vl("a", "x.py:1", proc="APIServer")
    log.vl("b", "x.py:1")
    log.vl("c", "x.py:1", proc="Worker_TP1")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("(APIServer pid=1000)") and lines[1].startswith("(EngineCore_DP0 pid=1097)")
    assert lines[2].startswith("(Worker_TP1 pid=1132)")
    assert log.render("{pid} {api_pid} {worker_pid}", {}) == "1097 1000 1131"


def test_a_hang_repeats_its_watchdog_lines_on_the_simulated_clock():
    out = io.StringIO()
    clock = SimClock(0.0)
    log = LogWriter("vllm", clock, stream=out, pid=5)

    async def run():
        task = asyncio.ensure_future(hang_forever(log, Repeat(every=60, lines=["W {pid}"]), {}))
        for _ in range(50):
            await asyncio.sleep(0)
        task.cancel()

    asyncio.run(run())
    assert out.getvalue().splitlines()[:3] == ["W 102"] * 3 and clock.t >= 180


def test_repeated_lines_are_not_progress():
    a = (
        "(EngineCore_DP0 pid=18346) INFO 11-30 20:30:29 [shm_broadcast.py:501] No available shared memory "
        "broadcast block found in 60 seconds."
    )
    b = a.replace("pid=18346", "pid=1").replace("20:30:29", "20:31:29").replace(":501]", ":502]")
    assert progress_key(a) == progress_key(b)
    assert progress_key("[2026-11-30 10:00:01 TP0] Load weight begin") == progress_key(
        "[2026-11-30 10:09:01 TP0] Load weight begin"
    )
    assert progress_key("Capturing batches: 10%") != progress_key("Capturing batches: 20%")  # tqdm moves on


class _FastWorld(World):
    def clock_scale(self) -> float:
        return 0.01


class _Scaled(Engine):
    def world(self) -> World:
        return _FastWorld()


def test_deadlines_are_in_engine_seconds_with_a_real_floor(tmp_path):
    real = Engine(name="vllm")
    assert real.world().clock_scale() == 1.0
    cand = Candidate.make("vllm", "m", {})
    t = Trial(_Scaled(name="vllm"), cand, tmp_path, TrialSettings())
    assert t._deadlines() == (6.0, 30.0)  # 600 s and 1800 s at 0.01: 6 s, and the 30 s floor
    t = Trial(_Scaled(name="vllm"), cand, tmp_path, TrialSettings(hang_timeout=2, timeout=120))
    assert t._deadlines() == (2.0, 30.0)  # the floor never exceeds the setting
    t = Trial(real, cand, tmp_path, TrialSettings())
    assert t._deadlines() == (600.0, 1800.0)


KERNEL_WARMUP = MINIMAL.replace(
    "rules:\n",
    """timing: {start: 2, distributed_init: 3, load_weights: 4, kv_alloc: 1, kernel_warmup: 5, graph_capture: 2,
         warmup: 1, per_output_token: 0.01}
rules:
  - id: autotune-dies
    when: {max-num-seqs: 3}
    fail: {phase: kernel-warmup, lines: ["RuntimeError: autotuning failed"]}
""",
)


def test_kernel_warmup_and_distributed_init_take_their_time_in_order(tmp_path):
    sc = _load(tmp_path, KERNEL_WARMUP)
    oracle = Oracle(sc, env={})
    o = oracle.outcome({"--max-num-seqs": "3"})
    assert (o.status, o.phase) == ("fails", "kernel-warmup")
    assert o.simulated_s == pytest.approx(2 + 3 + 4 + 1 + 5 * 0.35)  # start, dist, load, kv, 35% into warm-up
    assert oracle.outcome({}).status == "works"


@pytest.mark.slow
def test_a_real_trial_reports_the_kernel_warmup_phase(tmp_path):
    from tests.conftest import bringup

    p = tmp_path / "kw.yaml"
    p.write_text(KERNEL_WARMUP)
    rc, d, _, err = bringup(
        "trial",
        "--scenario",
        str(p),
        "--time-scale",
        "0.01",
        "--json",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--",
        "--max-num-seqs",
        "3",
    )
    assert rc == 1 and d["status"] == "fails" and d["phase"] == "kernel-warmup", (d, err)
    log = open(d["log_path"]).read()
    assert "[Autotuner]: Autotuning process starts" in log and "autotuning failed" in log
