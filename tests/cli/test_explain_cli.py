"""`bringup explain` on SGLang log lines built from docs/facts.md and the seeds."""

import pytest

from tests.conftest import bringup
from tests.paths import DATA

LOGS = DATA / "logs"


@pytest.mark.parametrize(
    "log, cls, phase, needle",
    [
        ("sglang-nan-decode.log", "nan-output", "first-request", "probability tensor contains"),
        ("sglang-nsa-fp8-assert.log", "incompatible-options", "graph-capture", "nsa_kv_cache_store_fp8"),
        (
            "sglang-graph-oom.log",
            "oom-graph-capture",
            "graph-capture",
            "CUDA out of memory. Tried to allocate 1.50 GiB",
        ),
        ("sglang-fa3-sm120.log", "unsupported-hardware", "kv-alloc", "SM>=80 and SM<=90"),
    ],
)
@pytest.mark.slow
def test_explain_sglang_logs(log, cls, phase, needle):
    rc, data, _, _ = bringup("explain", str(LOGS / log), "--json")
    assert rc == 1
    assert data["engine"] == "sglang"
    assert data["failure_class"] == cls and data["phase"] == phase
    assert needle in data["evidence"][0]
    assert data["hint"]


@pytest.mark.slow
def test_explain_reads_effective_config():
    rc, data, _, _ = bringup("explain", str(LOGS / "sglang-nan-decode.log"), "--json")
    assert data["effective"]["nsa_decode_backend"] == "flashmla_kv"
    assert data["effective"]["kv_cache_dtype"] == "fp8_e4m3"


@pytest.mark.slow
def test_explain_bad_usage():
    rc, _, _, err = bringup("explain", "/nonexistent/log.txt")
    assert rc == 2 and "is not a file" in err
    rc, _, _, err = bringup("explain", str(LOGS / "sglang-nan-decode.log"), "--engine", "tgi")
    assert rc == 2 and "unknown engine" in err


@pytest.mark.slow
def test_explain_transformers_log_names_the_level_that_needs_the_package():
    rc, data, _, _ = bringup("explain", str(LOGS / "transformers-cpu-bnb-4bit.log"), "--json")
    assert rc == 1 and data["engine"] == "transformers"
    assert data["failure_class"] == "missing-dependency"
    assert data["implicated_levels"] == {"--quantization": ["bnb-4bit", "bnb-8bit"]}
    assert data["root_exception"].startswith(
        "ImportError: Using `bitsandbytes` 4-bit quantization requires bitsandbytes"
    )


@pytest.mark.slow
def test_explain_vllm_log_prints_the_root_exception_and_implicates():
    rc, _, out, _ = bringup("explain", str(LOGS / "vllm-cpu-block-size-17.log"))
    assert rc == 1
    assert "root exception ValueError: No common block size for 17" in out
    assert "implicates --block-size, --attention-backend" in out
