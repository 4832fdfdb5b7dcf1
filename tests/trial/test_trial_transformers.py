"""Real trials of Hugging Face `transformers serve` on CPU (each launch is about 5-10 s here).

Needs transformers >= 5 with its serving extra and accelerate (scripts/setup.sh installs them).
"""

from __future__ import annotations

import importlib.metadata as md
from pathlib import Path

import pytest

from tests.conftest import assert_nothing_left, bringup

pytestmark = pytest.mark.engine


def _trial(model: Path, runs: Path, *flags: str):
    rc, data, _, _ = bringup(
        "trial",
        "--engine",
        "transformers",
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


def test_defaults_work_and_every_probe_passes(tiny_model, tmp_path):
    rc, o = _trial(tiny_model, tmp_path)
    assert rc == 0, o
    assert o["status"] == "works" and o["failure_class"] is None
    assert o["engine"] == "transformers" and o["engine_version"] == md.version("transformers")
    assert [p["name"] for p in o["probes"]] == [
        "health",
        "completion",
        "chat",
        "reference",
        "long-decode",
        "batch",
        "batch-invariance",
        "sampled",
        "sampled-reference",
        "long-prompt",
        "concurrency",
    ]
    # what this engine's API lacks (no logprobs, top_k, seed, max_model_len) is said, not failed
    assert "membership not checked" in o["probes"][7]["detail"]
    assert o["probes"][8]["kind"] == "skipped" and o["probes"][9]["kind"] == "skipped"
    assert "compared greedy text (this engine returns no logprobs)" in o["probes"][3]["detail"]
    assert all(p["passed"] for p in o["probes"]), o["probes"]
    # What this engine's API lacks is said, not failed: /v1/models lists only the HF cache,
    # `ignore_eos` and `logprobs` are not supported (engines.yaml `probes:`).
    assert "does not list the served model" in o["probes"][0]["detail"]
    assert "no logprobs" in o["probes"][4]["detail"]
    # The model is positional, bringup's fixed flags come after --host/--port.
    argv = o["argv"]
    assert argv[1:5] == ["-m", "transformers.cli.transformers", "serve", str(tiny_model)]
    assert argv[argv.index("--log-level") + 1] == "info"
    assert o["effective"]["dtype"] == "float32" and o["effective"]["continuous_batching"] == "False"
    assert o["timings"]["to_ready"] > 0.5 and o["teardown"]["leftover_pids"] == []
    assert_nothing_left(Path(o["log_path"]).parent)


def test_flash_attention_2_fails_fast_as_missing_dependency(tiny_model, tmp_path):
    rc, o = _trial(tiny_model, tmp_path, "--attn-implementation", "flash_attention_2")
    assert rc == 1
    assert o["status"] == "fails" and o["failure_class"] == "missing-dependency"
    assert o["phase"] == "load-weights" and o["signature"] == "transformers-flash-attn-missing"
    assert o["implicates"] == ["--attn-implementation"]
    assert "FlashAttention2 has been toggled on" in o["evidence"][0]
    assert o["timings"]["to_ready"] is None and o["timings"]["fatal_to_teardown"] < 3
    assert_nothing_left(Path(o["log_path"]).parent)


def test_continuous_batching_cache_too_big_dies_on_first_request(tiny_model, tmp_path):
    rc, o = _trial(tiny_model, tmp_path, "--continuous-batching", "--cb-num-blocks", "400000000")
    assert rc == 1
    assert o["status"] == "fails" and o["failure_class"] == "oom-kv-cache"
    assert o["phase"] == "first-request" and o["timings"]["to_ready"] is not None  # it was ready first
    assert "--cb-num-blocks" in o["implicates"]
    assert "is more than available memory" in o["evidence"][0]
    assert_nothing_left(Path(o["log_path"]).parent)


def _run(model: Path, runs: Path, *extra: str) -> dict:
    rc, r, _, err = bringup(
        "run",
        "--engine",
        "transformers",
        "--model",
        str(model),
        "--runs-dir",
        str(runs),
        "--baseline",
        "--attn-implementation flash_attention_2",
        "--json",
        "--timeout",
        "300",
        "--hang-timeout",
        "120",
        *extra,
    )
    assert rc == 0, err[-2000:]
    assert r["status"] == "validated" and r["validated"]
    assert r["final_candidate"]["flags"].get("--attn-implementation") not in (
        "flash_attention_2",
        "flash_attention_3",
    )
    assert all(p["passed"] for p in r["final_probes"])
    assert r["final_command"].startswith("python -m transformers.cli.transformers serve ")
    return r


def test_run_from_a_flash_attention_baseline_on_signatures_alone(tiny_model, tmp_path):
    r = _run(tiny_model, tmp_path, "--no-knowledge")
    first = r["attempts"][0]
    assert (first["status"], first["failure_class"]) == ("fails", "missing-dependency")
    assert r["launches"] <= 3
    assert r["minimal_fix"] == ["drop --attn-implementation"] and r["minimal_fix_verified"]


def test_run_from_a_flash_attention_baseline_with_knowledge_skips_it(tiny_model, tmp_path):
    # rules.yaml: flash attention needs CUDA, so on this CPU machine the baseline is never launched.
    r = _run(tiny_model, tmp_path)
    assert r["launches"] == 1 and r["attempts"][0]["status"] == "works"
