"""The reference probe against real engines on CPU: it passes a right server and catches float16
overflow that no engine reports (each launch is 30-70 s on 2 cores)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import MEM, assert_nothing_left, bringup

pytestmark = pytest.mark.engine

# overflow_model: the fp16-overflow preset, from the session's trained known model; vllm_served:
# the session's working vLLM trial of it (conftest.py). The tuner's winner's reference verdict is
# tests/session/test_run_vllm.py::test_tune_two_knobs's.


def _trial(engine: str, model: Path, runs: Path, *flags: str) -> tuple[int, dict]:
    rc, data, _, _ = bringup(
        "trial",
        "--engine",
        engine,
        "--model",
        str(model),
        "--runs-dir",
        str(runs),
        "--json",
        "--timeout",
        "300",
        "--hang-timeout",
        "120",
        "--",
        *flags,
    )
    return rc, data


def _probe(o: dict, name: str) -> dict:
    return next(p for p in o["probes"] if p["name"] == name)


def test_vllm_default_dtype_agrees_with_the_reference(vllm_served):
    """The session's served trial (conftest.py) is the overflow model in vLLM's default dtype."""
    rc, o = vllm_served["rc"], vllm_served["outcome"]
    assert rc == 0 and o["status"] == "works", o
    assert _probe(o, "known-answers")["passed"]  # picked up from bringup_answers.json
    ref = _probe(o, "reference")
    assert ref["passed"] and "6 prompts agree with the reference" in ref["detail"]  # 4 generic, 2 its own
    assert "(auto tolerances" in ref["detail"] and "tokens and logprobs" in ref["detail"]
    assert_nothing_left(Path(o["log_path"]).parent)


def test_vllm_float16_overflow_is_wrong_output_without_an_error_line(overflow_model, tmp_path):
    rc, o = _trial("vllm", overflow_model, tmp_path, "--gpu-memory-utilization", MEM, "--dtype", "float16")
    assert rc == 1 and o["status"] == "wrong-output", o
    assert o["effective"]["dtype"] == "torch.float16"
    assert _probe(o, "completion")["passed"] and _probe(o, "chat")["passed"]  # the server answers...
    ref = _probe(o, "reference")
    assert not ref["passed"] and ref["kind"] == "nan" and "non-finite" in ref["detail"]  # ...wrongly
    assert not _probe(o, "known-answers")["passed"]
    assert o["failure_class"] in ("wrong-output", "nan-output")
    assert_nothing_left(Path(o["log_path"]).parent)


def test_transformers_float16_overflow_fails_the_text_reference(overflow_model, tmp_path):
    rc, o = _trial("transformers", overflow_model, tmp_path, "--dtype", "float16")
    assert rc == 1 and o["status"] == "wrong-output", o
    ref = _probe(o, "reference")
    assert not ref["passed"] and "6 of 6 prompts differ" in ref["detail"], ref
    assert "text departs at token 0" in ref["detail"] and "float16 tolerances" in ref["detail"]
    assert not _probe(o, "known-answers")["passed"]
    assert_nothing_left(Path(o["log_path"]).parent)
