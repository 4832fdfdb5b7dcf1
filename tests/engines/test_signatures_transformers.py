"""Real `transformers serve` logs (tests/data/logs/transformers-*.log) classified offline."""

from __future__ import annotations

import pytest

from bringup.engines.base import get_engine
from bringup.engines.explain import detect_engine, explain_file
from tests.paths import DATA

LOGS = DATA / "logs"

CASES = [
    # log, class, phase, signature, implicated flag, text of the root-cause line
    (
        "flash-attn2",
        "missing-dependency",
        "load-weights",
        "transformers-flash-attn-missing",
        "--attn-implementation",
        "FlashAttention2 has been toggled on",
    ),
    (
        "kernels-hub-attn",
        "missing-dependency",
        "load-weights",
        "transformers-kernels-missing",
        "--attn-implementation",
        "`kernels` is either not installed",
    ),
    (
        "bnb-4bit",
        "missing-dependency",
        "load-weights",
        "transformers-bitsandbytes-missing",
        "--quantization",
        "requires bitsandbytes",
    ),
    (
        "accelerate-missing",
        "missing-dependency",
        "load-weights",
        "transformers-accelerate-missing",
        "--device",
        "requires `accelerate`",
    ),
    (
        "unknown-attn",
        "bad-flag",
        "load-weights",
        "transformers-unknown-attn-implementation",
        "--attn-implementation",
        "Unsupported attention implementation: 'nonsense_attention'",
    ),
    (
        "unknown-quantization",
        "bad-flag",
        "load-weights",
        "transformers-unknown-quantization",
        "--quantization",
        "Unsupported quantization method: 'awq-4bit'",
    ),
    (
        "unknown-dtype",
        "bad-flag",
        "load-weights",
        "transformers-unknown-dtype",
        "--dtype",
        "Unsupported dtype: 'float8'",
    ),
    (
        "cuda-device-on-cpu",
        "unsupported-hardware",
        "load-weights",
        "transformers-no-cuda-in-torch",
        "--device",
        "AssertionError: Torch not compiled with CUDA enabled",
    ),
    (
        "cb-cache-too-big",
        "oom-kv-cache",
        "first-request",
        "transformers-cb-cache-too-big",
        "--cb-num-blocks",
        "Memory footprint 3723264301858816 is more than available memory",
    ),
]


@pytest.mark.parametrize("name,cls,phase,sig,flag,text", CASES, ids=[c[0] for c in CASES])
def test_real_failure_logs(name, cls, phase, sig, flag, text):
    out = explain_file(LOGS / f"transformers-{name}.log")
    assert out.engine == "transformers"
    assert out.status == "fails"
    assert (out.failure_class, out.signature) == (cls, sig)
    assert out.phase == phase
    assert flag in out.implicates
    assert text in out.evidence[0]
    assert not out.evidence[0].lstrip().startswith("File ")  # the exception, not a traceback frame


def test_working_log_reads_effective_config_and_is_not_a_failure():
    out = explain_file(LOGS / "transformers-works.log")
    assert out.engine == "transformers" and out.status == "works" and out.failure_class is None
    # --dtype auto resolved from the checkpoint; continuous batching off (the request log says CB: False)
    assert out.effective == {"dtype": "float32", "continuous_batching": "False"}


def test_phase_markers_of_a_real_start():
    eng = get_engine("transformers")
    lines = (LOGS / "transformers-works.log").read_text().splitlines()
    phases = [p for p in (eng.phase_of(ln) for ln in lines) if p]
    assert phases[0] == "load-weights" and "warmup" in phases
    assert phases.index("warmup") > max(i for i, p in enumerate(phases) if p == "load-weights")
    # the first uvicorn shutdown line starts the teardown noise
    kept = eng.before_teardown(lines)
    assert len(kept) < len(lines) and "Shutting down" in lines[len(kept)]


def test_other_engines_logs_are_not_taken_for_transformers():
    sglang = (LOGS / "sglang-graph-oom.log").read_text().splitlines()
    assert detect_engine(sglang) == "sglang"
    assert detect_engine(["INFO 11-29 12:00:00 [api_server.py:1] vLLM API server version 0.32.0"]) == "vllm"
