"""The scenario server driven as the trial runner drives an engine: argv list, own process group,
log read line by line, OpenAI HTTP API on loopback, process group killed at the end.

Each GLM launch walks ~740 simulated seconds; at --time-scale 0.002 that is about 1.5 s.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from bringup.engines import get_engine
from bringup.observe.signatures import classify
from bringup.oracle.testing import ScenarioProcess, free_port
from bringup.scenario import parse_clock, scenario_path
from tests.paths import ROOT

GLM = scenario_path("glm5-nvfp4-sm120")
QWEN = scenario_path("qwen3-30b-a3b-fp8-sm120-vllm")
SCALE = 0.002
MODEL_CARD = [
    "--model-path",
    "zai-org/GLM-5-NVFP4",
    "--tp",
    "8",
    "--quantization",
    "modelopt_fp4",
    "--attention-backend",
    "flashinfer",
    "--moe-runner-backend",
    "flashinfer_cutlass",
    "--kv-cache-dtype",
    "fp8_e4m3",
]
WORKING = [
    *MODEL_CARD,
    "--mem-fraction-static",
    "0.88",
    "--nsa-decode-backend",
    "trtllm",
    "--nsa-prefill-backend",
    "trtllm",
]
QWEN_FLAGS = ["--model", "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", "--max-model-len", "32768"]
TWO_PLUS_TWO = "What is 2+2? Answer briefly."
PHASES = [
    "spawn",
    "parse-args",
    "distributed-init",
    "load-weights",
    "kv-alloc",
    "kernel-warmup",
    "graph-capture",
    "warmup",
    "ready",
]


def phase_reached(lines: list[str], engine: str) -> str:
    """The last start-up phase the log's markers reached, read by the engine adapter as the trial
    runner reads it (engines.yaml's markers, help lines passed over)."""
    adapter = get_engine(engine)
    phase = "spawn"
    for line in lines:
        if adapter.is_ready_line(line):
            return "ready"
        ph = adapter.phase_of(line)
        if ph and PHASES.index(ph) > PHASES.index(phase):
            phase = ph
    return phase


def chat(url: str, prompt: str, max_tokens: int = 64, **extra) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/chat/completions",
        timeout=20,
        json={
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0,
            **extra,
        },
    )


def completion(url: str, prompt: str, max_tokens: int = 16, **extra) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/completions",
        timeout=20,
        json={"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, **extra},
    )


def sse(url: str, path: str, body: dict) -> list[dict | str]:
    events: list[dict | str] = []
    with httpx.stream("POST", f"{url}{path}", json={**body, "stream": True}, timeout=20) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                data = line[len("data: ") :]
                events.append(data if data == "[DONE]" else json.loads(data))
    return events


def launch(
    scenario: Path, flags: list[str], scale: float = SCALE, env: dict | None = None
) -> ScenarioProcess:
    return ScenarioProcess(scenario, flags, scale, env=env)


def died_serving(p: ScenarioProcess, prompt: str = TWO_PLUS_TWO) -> Exception:
    """Send the first real request; the engine dies and drops it (SGLang)."""
    with pytest.raises(httpx.HTTPError) as e:
        chat(p.url, prompt)
    return e.value


# -- the seeds' launches -------------------------------------------------------------------------
@pytest.mark.slow
def test_seed_attempt_1_model_card_at_095_dies_in_graph_capture_oom():
    with launch(GLM, [*MODEL_CARD, "--mem-fraction-static", "0.95"]) as p:
        rc = p.wait_exit(30)
        lines = p.lines
    assert rc == -signal.SIGKILL  # launch_server kills its own process tree
    text = "\n".join(lines)
    assert "Capture cuda graph begin" in text and "Capture cuda graph end" not in text
    assert "Exception: Capture cuda graph failed: CUDA out of memory" in text
    assert "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)" in text
    assert "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)" in text
    assert "fired up" not in text
    phase = phase_reached(lines, "sglang")
    assert phase == "graph-capture"
    c = classify(lines, "sglang", phase)
    assert c.failure_class == "oom-graph-capture" and c.phase == "graph-capture"
    assert "Capture cuda graph failed" in c.evidence[0]
    assert p.clock() > 600  # the load it stood for
    # ...stamped before its last words: a trial stops the server at its first fatal line, so a
    # stamp after it may never be written (CI: a launch read as 45 s of a 255 s load)
    died = next(i for i, ln in enumerate(lines) if "event=died" in ln and parse_clock(ln) is not None)
    assert died < next(i for i, ln in enumerate(lines) if "Capture cuda graph failed" in ln)


@pytest.mark.slow
def test_seed_attempt_2_ready_then_nan_on_first_decode():
    with launch(GLM, [*MODEL_CARD, "--mem-fraction-static", "0.88", "--max-running-requests", "64"]) as p:
        p.wait_for("The server is fired up and ready to roll!", 30)
        assert httpx.get(f"{p.url}/health", timeout=5).status_code == 200
        one = chat(p.url, "Say hello in one sentence.", max_tokens=1)  # prefill works (seeds)
        assert one.status_code == 200 and one.json()["usage"]["completion_tokens"] == 1
        died_serving(p)  # the first decode step: the connection drops, no HTTP answer
        rc = p.wait_exit(10)
        lines = p.lines
    assert rc == -signal.SIGKILL
    text = "\n".join(lines)
    assert "Assertion `probability tensor contains either `inf`, `nan` or element < 0` failed." in text
    assert "torch.AcceleratorError: CUDA error: device-side assert triggered" in text
    assert "process_batch_result_decode" in text and "result.copy_done.synchronize()" in text
    assert text.index("fired up") < text.index("probability tensor")
    c = classify(lines, "sglang", "decode")
    assert c.failure_class == "nan-output" and c.phase == "decode"
    assert any("probability tensor" in e for e in c.evidence)


@pytest.mark.slow
def test_seed_attempt_3_triton_asserts_on_the_fp8_nsa_kv_store():
    flags = [
        *MODEL_CARD,
        "--mem-fraction-static",
        "0.88",
        "--attention-backend",
        "triton",
        "--sampling-backend",
        "pytorch",
    ]
    with launch(GLM, flags) as p:
        rc = p.wait_exit(30)
        lines = p.lines
    text = "\n".join(lines)
    assert rc == -signal.SIGKILL
    assert "attention_backend='triton'" in text  # not overridden (seeds)
    assert "assert not self.nsa_kv_cache_store_fp8" in text and "\nAssertionError" in text
    c = classify(lines, "sglang", phase_reached(lines, "sglang"))
    assert c.failure_class == "incompatible-options" and c.phase == "graph-capture"


@pytest.mark.parametrize(
    "extra, graphs",
    [
        (["--nsa-decode-backend", "flashmla_sparse"], True),  # seeds attempt 4
        (["--fp8-gemm-backend", "cutlass"], True),  # attempt 5
        (["--disable-cuda-graph"], False),  # attempt 6
    ],
)
@pytest.mark.slow
def test_seed_attempts_4_to_6_still_nan_in_decode(extra, graphs):
    with launch(GLM, [*MODEL_CARD, "--mem-fraction-static", "0.88", *extra]) as p:
        p.wait_for("fired up", 30)
        died_serving(p)
        assert p.wait_exit(10) == -signal.SIGKILL
        text = p.text
    assert ("Capture cuda graph begin" in text) is graphs
    assert "probability tensor contains either `inf`, `nan` or element < 0" in text
    assert classify(p.lines, "sglang", "decode").failure_class == "nan-output"


@pytest.mark.slow
def test_seed_attempt_7_trtllm_serves_and_answers():
    with launch(GLM, WORKING) as p:
        p.wait_for("fired up", 30)
        text = p.text
        # Effective config: the forced and defaulted values show, with their log lines.
        assert "Use nsa attention backend for DeepSeek with DSA." in text
        assert "Setting KV cache dtype to fp8_e4m3 for DeepSeek DSA on SM12 device." in text
        assert (
            "Force NSA prefill to use sparse MLA (i.e. disable MHA_ONE_SHOT) for GlmMoeDsaForCausalLM on Blackwell."
            in text
        )
        assert "DeepGemm is enabled but the scale_fmt of checkpoint is not ue8m0" in text
        assert "RoPE parameters" in text
        server_args = next(ln for ln in p.lines if "server_args=ServerArgs(" in ln)
        for piece in (
            "attention_backend='nsa'",
            "nsa_decode_backend='trtllm'",
            "kv_cache_dtype='fp8_e4m3'",
            "tp_size=8",
        ):
            assert piece in server_args
        # Chat, not streamed.
        r = chat(p.url, TWO_PLUS_TWO)
        assert r.status_code == 200
        body = r.json()
        assert re.search(r"\b4\b", body["choices"][0]["message"]["content"])
        assert body["usage"]["completion_tokens"] == len(body["choices"][0]["message"]["content"].split()) + 1
        # Chat, streamed, with usage.
        ev = sse(
            p.url,
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": TWO_PLUS_TWO}],
                "max_tokens": 64,
                "temperature": 0,
                "stream_options": {"include_usage": True},
            },
        )
        assert ev[-1] == "[DONE]" and ev[0]["choices"][0]["delta"]["role"] == "assistant"
        streamed = "".join(
            e["choices"][0]["delta"].get("content", "")
            for e in ev[:-1]
            if isinstance(e, dict) and e["choices"]
        )
        assert streamed == body["choices"][0]["message"]["content"]
        assert (
            ev[-2]["choices"] == []
            and ev[-2]["usage"]["completion_tokens"] == body["usage"]["completion_tokens"]
        )
        # Completions, streamed and not: the same greedy text, finite logprobs.
        r = completion(p.url, TWO_PLUS_TWO, max_tokens=32, logprobs=2)
        choice = r.json()["choices"][0]
        assert re.search(r"\b4\b", choice["text"])
        assert all(isinstance(v, float) and v < 0 for v in choice["logprobs"]["token_logprobs"])
        assert "".join(choice["logprobs"]["tokens"]) == choice["text"]
        assert all(len(t) == 2 for t in choice["logprobs"]["top_logprobs"])
        ev = sse(p.url, "/v1/completions", {"prompt": TWO_PLUS_TWO, "max_tokens": 32, "temperature": 0})
        assert "".join(e["choices"][0]["text"] for e in ev[:-1]) == choice["text"]
        # max_tokens is honoured; ignore_eos writes exactly max_tokens.
        r = completion(p.url, "Once upon a time", max_tokens=5).json()
        assert r["usage"]["completion_tokens"] == 5 and r["choices"][0]["finish_reason"] == "length"
        r = completion(p.url, "Once upon a time", max_tokens=200, ignore_eos=True).json()
        assert r["usage"]["completion_tokens"] == 200 and r["usage"]["prompt_tokens"] == 4
        assert httpx.get(f"{p.url}/v1/models", timeout=5).json()["data"][0]["id"] == "zai-org/GLM-5-NVFP4"


@pytest.mark.slow
def test_time_scale_compresses_a_600_second_load():
    t0 = time.monotonic()
    with launch(GLM, WORKING, scale=0.003) as p:
        ready_clock = parse_clock(p.wait_for(r"\[scenario-clock\] .*event=ready", 30))
        real = time.monotonic() - t0
        begin = next(ln for ln in p.lines if "Load weight begin" in ln)
        end = next(ln for ln in p.lines if "Load weight end" in ln)
        r = completion(p.url, "Once upon a time", max_tokens=100, ignore_eos=True)
        assert r.status_code == 200
        after = [parse_clock(p.wait_for(r"event=request", 5))]
    # start + 600 s of weights, and more, in a tenth of that real time however loaded the machine
    # (a comparison of the two clocks, not a wall-clock budget: issue 28); at 0.003, about 1/300
    assert ready_clock >= 600 + 45 and real < ready_clock / 10
    stamp = lambda ln: dt.datetime.strptime(ln[1:20], "%Y-%m-%d %H:%M:%S")  # noqa: E731
    assert (stamp(end) - stamp(begin)).total_seconds() == 600  # the log's own clock is simulated
    assert "Loading safetensors checkpoint shards:" in "\n".join(p.lines)  # progress while loading
    assert after and after[-1] == pytest.approx(ready_clock + 100 * 0.045 + 4 * 0.0004, abs=0.01)


@pytest.mark.slow
def test_dummy_weights_and_fewer_layers_screen_fast_with_the_same_kernel_failure():
    override = json.dumps({"num_hidden_layers": 2})
    flags = [
        *MODEL_CARD,
        "--mem-fraction-static",
        "0.95",
        "--load-format",
        "dummy",
        "--json-model-override-args",
        override,
    ]
    with launch(GLM, flags) as p:
        p.wait_for("fired up", 30)  # no graph-capture OOM with 2 layers
        ready = p.clock()
        died_serving(p)
        p.wait_exit(10)
        text = p.text
    assert ready < 120  # vs ~740 s for the full model
    assert "Loading safetensors checkpoint shards" not in text  # random weights: no shards read
    assert "probability tensor contains either" in text  # the kernel problem still shows
    assert "json_model_override_args='{\"num_hidden_layers\": 2}'" in text


# -- flag validation, as the engine's argparse ------------------------------------------------------
@pytest.mark.parametrize(
    "scenario, flags, tail",
    [
        (
            GLM,
            ["--model-path", "m", "--kv-cache-dtype", "nonsense"],
            "launch_server.py: error: argument --kv-cache-dtype: invalid choice: 'nonsense' (choose from 'auto', 'fp8_e5m2', "
            "'fp8_e4m3', 'bf16', 'bfloat16', 'fp4_e2m1')",
        ),
        (
            GLM,
            ["--model-path", "m", "--nsa-decode-backend", "trtllm", "--no-such-flag", "1"],
            "launch_server.py: error: unrecognized arguments: --no-such-flag 1",
        ),
        (
            scenario_path("glm51-nvfp4-sm120-sglang0523"),
            ["--model-path", "m", "--nsa-decode-backend", "trtllm"],
            "launch_server.py: error: unrecognized arguments: --nsa-decode-backend trtllm",
        ),  # renamed --dsa-* in 0.5.23
        (
            GLM,
            ["--tp", "8"],
            "launch_server.py: error: the following arguments are required: --model-path/--model",
        ),
        (
            GLM,
            ["--model-path", "m", "--port", "http"],
            "launch_server.py: error: argument --port: invalid int value: 'http'",
        ),
        (
            QWEN,
            [
                "--model",
                "m",
                "--enforce-eager",
                "--nsa-decode-backend",
                "trtllm",
            ],  # trtllm fills the model_tag positional
            "api_server.py: error: unrecognized arguments: --nsa-decode-backend",
        ),
    ],
)
def test_invalid_flags_exit_2_with_argparse_message_fast(scenario, flags, tail):
    out = subprocess.run(
        [sys.executable, "-m", "bringup.scenario", "serve", "--scenario", str(scenario), "--", *flags],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
    )
    assert out.returncode == 2
    prog = "api_server.py" if scenario == QWEN else "launch_server.py"
    assert out.stderr.startswith(f"usage: {prog} [-h]")
    assert out.stderr.rstrip().splitlines()[-1] == tail
    assert out.stdout == ""  # nothing loaded, nothing logged
    # (bringup's signatures have no pattern yet for argparse's "the following arguments are required")
    if "are required" not in tail:
        assert (
            classify(
                out.stderr.splitlines(), "sglang" if prog.startswith("launch") else "vllm", "parse-args"
            ).failure_class
            == "bad-flag"
        )


def test_bad_scenario_file_exits_3_naming_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(GLM.read_text().replace("phase: kv-alloc", "phase: kv-allocation", 1))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bringup.scenario",
            "serve",
            "--scenario",
            str(bad),
            "--",
            "--model-path",
            "m",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
    )
    assert out.returncode == 3
    assert f"{bad}: rules[" in out.stderr and "].fail.phase: Input should be" in out.stderr


# -- tear-down -----------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("stage", ["loading", "serving"])
def test_sigterm_ends_the_server_promptly(stage):
    scale = 0.05 if stage == "loading" else SCALE
    with launch(GLM, WORKING, scale=scale) as p:
        p.wait_for("Load weight begin" if stage == "loading" else "fired up", 30)
        if stage == "serving":  # a request in flight must not delay the exit
            pending = ThreadPoolExecutor(1).submit(
                completion, p.url, "Once upon a time", 20000, ignore_eos=True
            )
            time.sleep(0.3)
        os.killpg(p.proc.pid, signal.SIGTERM)
        rc = p.wait_exit(5)
        port = p.port
    assert rc == -signal.SIGTERM  # within wait_exit's 5 s, a request in flight or not
    if stage == "serving":
        with pytest.raises(httpx.HTTPError):
            pending.result(10)
    with socket.socket() as s:  # the port can be served again (as servers bind: SO_REUSEADDR)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(1)


def test_sigint_too():
    with launch(GLM, WORKING) as p:
        p.wait_for("Init torch distributed begin", 30)
        os.killpg(p.proc.pid, signal.SIGINT)
        assert p.wait_exit(5) == -signal.SIGINT


# -- serving modes ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_garbage_mode_answers_wrong_without_any_error():
    with launch(QWEN, QWEN_FLAGS, scale=0.005) as p:
        p.wait_for("Application startup complete", 30)
        answers = [
            chat(p.url, q)
            for q in (TWO_PLUS_TWO, "What is the capital of France?", "How many days are in a week?")
        ]
        assert all(a.status_code == 200 for a in answers)
        texts = [a.json()["choices"][0]["message"]["content"] for a in answers]
        r = completion(p.url, "The quick brown fox", logprobs=1).json()["choices"][0]
        assert all(v < 0 for v in r["logprobs"]["token_logprobs"])  # fluent, finite: nothing to see
        time.sleep(0.2)
        log = p.text
        assert p.proc.poll() is None
    assert (
        not re.search(r"\b4\b", texts[0])
        and "paris" not in texts[1].lower()
        and not re.search(r"\b7\b", texts[2])
    )
    assert all(t.startswith("The answer is") for t in texts)
    assert not re.search(r"Error|Traceback|Exception|ERROR|nan", log)
    assert "Using 'FLASHINFER_CUTLASS' Fp8 MoE backend" in log  # what the engine chose, in the log


@pytest.mark.slow
def test_the_working_moe_backend_answers_right():
    with launch(QWEN, [*QWEN_FLAGS, "--moe-backend", "triton"], scale=0.005) as p:
        p.wait_for("Application startup complete", 30)
        text = chat(p.url, "How many days are in a week?").json()["choices"][0]["message"]["content"]
    assert re.search(r"\b7\b", text)


@pytest.mark.slow
def test_inconsistent_mode_changes_greedy_output_with_the_batch():
    with launch(QWEN, [*QWEN_FLAGS, "--moe-backend", "batched_triton"], scale=0.005) as p:
        p.wait_for("Application startup complete", 30)

        def text(prompt: str) -> str:
            return completion(p.url, prompt, logprobs=1).json()["choices"][0]["text"]

        alone = text("The quick brown fox")
        with ThreadPoolExecutor(8) as pool:
            batch = list(pool.map(text, ["The quick brown fox", *[f"Prompt number {i}" for i in range(7)]]))
        again = text("The quick brown fox")
    assert alone == again  # deterministic alone
    assert batch[0] != alone  # but not batch invariant
    assert batch[0].split()[:2] == alone.split()[:2]  # it drifts after a couple of tokens


@pytest.mark.slow
def test_ok_mode_is_batch_invariant_and_handles_many_concurrent_requests():
    with launch(QWEN, [*QWEN_FLAGS, "--moe-backend", "triton"], scale=0.005) as p:
        p.wait_for("Application startup complete", 30)
        alone = completion(p.url, "The quick brown fox").json()["choices"][0]["text"]
        prompts = ["The quick brown fox"] + [f"Request {i} says" for i in range(31)]
        with ThreadPoolExecutor(32) as pool:
            outs = list(pool.map(lambda q: completion(p.url, q, max_tokens=24, ignore_eos=True), prompts))
    assert all(o.status_code == 200 for o in outs)
    assert all(o.json()["usage"]["completion_tokens"] == 24 for o in outs)
    assert outs[0].json()["choices"][0]["text"].startswith(alone)


# -- vLLM deaths, hangs, ports (small scenarios written here) -------------------------------------------
VLLM_DECODE_DEATH = """\
name: vllm-decode-death
description: vLLM dies on its first decode step (for tests).
engine: vllm
engine_version: 0.32.0
hardware: {gpu: NVIDIA RTX PRO 6000 Blackwell, compute_capability: 12.0, count: 1, memory_gib: 95.6}
model: {name: tiny/model, architecture: LlamaForCausalLM, model_type: llama, attention: gqa, weights_gib: 2, layers: 4}
timing: {start: 2, load_weights: 4, kv_alloc: 1, graph_capture: 2, warmup: 1, per_output_token: 0.01}
rules:
  - id: dies
    when: {enforce-eager: false}
    fail:
      phase: decode
      after_tokens: 3
      lines:
        - "(EngineCore pid={pid}) ERROR {ts} [core.py:1021] RuntimeError: CUDA error: an illegal memory access was encountered"
  - id: hangs
    when: {enforce-eager: true, max-num-seqs: 7}
    hang: {phase: kv-alloc, lines: ["(EngineCore pid={pid}) INFO {ts} [kv_cache_utils.py:900] waiting for peers"]}
  - id: hangs-on-first-request-with-a-watchdog
    when: {enforce-eager: true, max-num-seqs: 9}
    hang:
      phase: first-request
      repeat: {every: 60, lines: ["(EngineCore_DP0 pid={pid}) INFO {ts} [shm_broadcast.py:501] No available shared memory broadcast block found in 60 seconds."]}
"""


@pytest.fixture
def vllm_scenario(tmp_path) -> Path:
    p = tmp_path / "vllm-death.yaml"
    p.write_text(VLLM_DECODE_DEATH)
    return p


@pytest.mark.slow
def test_vllm_dies_while_serving_with_http_500_then_exits(vllm_scenario):
    with launch(vllm_scenario, ["--model", "tiny/model"], scale=0.01) as p:
        p.wait_for("Application startup complete", 30)
        short = completion(p.url, "hi", max_tokens=3)  # three tokens fit before the fault
        assert short.status_code == 200
        r = completion(p.url, "hello there", max_tokens=10)
        assert r.status_code == 500
        assert r.json()["error"]["message"].startswith("EngineCore encountered an issue")
        rc = p.wait_exit(10)
        lines = p.lines
    assert rc == 1
    text = "\n".join(lines)
    assert "an illegal memory access was encountered" in text and "EngineDeadError" in text
    assert "Shutting down" in text
    c = classify(lines, "vllm", "decode")
    assert c.failure_class == "device-assert" and "illegal memory access" in c.evidence[0]


@pytest.mark.slow
def test_vllm_streaming_death_sends_an_error_event(vllm_scenario):
    with launch(vllm_scenario, ["--model", "tiny/model"], scale=0.01) as p:
        p.wait_for("Application startup complete", 30)
        ev = sse(p.url, "/v1/completions", {"prompt": "hello", "max_tokens": 10, "temperature": 0})
        p.wait_exit(10)
    texts = [e for e in ev if isinstance(e, dict) and "choices" in e]
    assert len(texts) == 3  # the tokens made before the fault
    assert ev[-2]["error"]["code"] == 500 and ev[-1] == "[DONE]"


@pytest.mark.slow
def test_hang_stops_progress_and_never_gets_ready(vllm_scenario):
    with launch(
        vllm_scenario, ["--model", "tiny/model", "--enforce-eager", "--max-num-seqs", "7"], scale=0.01
    ) as p:
        p.wait_for("waiting for peers", 30)
        n = len(p.lines)
        time.sleep(1.0)  # far longer than the whole start-up at this scale
        assert len(p.lines) == n and p.proc.poll() is None
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{p.url}/health", timeout=2)
    assert "Capturing CUDA graphs" not in p.text


def test_port_in_use_is_reported_like_uvicorn():
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen(1)
        with ScenarioProcess(QWEN, [*QWEN_FLAGS, "--moe-backend", "triton"], 0.005, port=port) as p:
            rc = p.wait_exit(30)
            lines = p.lines
    assert rc == 1
    assert any(f"('127.0.0.1', {port}): address already in use" in ln for ln in lines)
    assert classify(lines, "vllm", "warmup").failure_class == "port-in-use"


@pytest.mark.slow
def test_a_serving_hang_repeats_its_watchdog_line_and_never_answers(vllm_scenario):
    with launch(
        vllm_scenario, ["--model", "tiny/model", "--enforce-eager", "--max-num-seqs", "9"], scale=0.005
    ) as p:
        p.wait_for("Application startup complete", 30)
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{p.url}/v1/completions", timeout=1.5, json={"prompt": "hello", "max_tokens": 4})
        repeats = [ln for ln in p.lines if "No available shared memory broadcast block" in ln]
    assert len(repeats) >= 2  # every 60 simulated s = 0.3 real s
