"""The bring-up search and the tuner on the real vLLM CPU build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_nothing_left, bringup

pytestmark = pytest.mark.engine


def test_default_main_job(tmp_path):
    """`bringup run` with no arguments: the README's main job on the embedded default."""
    rc, d, _, err = bringup(
        "run",
        "--runs-dir",
        str(tmp_path),
        "--json",
        "--timeout",
        "300",
        env={"BRINGUP_CACHE": str(tmp_path / "cache")},
    )
    assert rc == 0 and d["validated"], err[-2000:]
    assert d["engine"] == "vllm" and d["launches"] <= 2
    assert (Path(d["run_dir"]) / "FINDINGS.md").is_file() and (Path(d["run_dir"]) / "report.html").is_file()


def test_head_dim_16_has_no_working_configuration(tiny_model_hd16, tmp_path):
    rc, d, _, err = bringup(
        "run",
        "--engine",
        "vllm",
        "--model",
        str(tiny_model_hd16),
        "--baseline",
        "--gpu-memory-utilization 0.4",
        "--runs-dir",
        str(tmp_path),
        "--json",
        "--timeout",
        "300",
        "--max-launches",
        "4",
    )
    assert rc == 1 and not d["validated"] and d["status"] == "impossible", err[-2000:]
    assert d["launches"] <= 4
    assert (
        "model.head_dim" in d["stop_reason"] and "Unsupported CPU attention configuration" in d["stop_reason"]
    )
    for a in d["attempts"]:  # every launch explained
        assert a["failure_class"] and a["evidence"] and a["phase"]
    text = (Path(d["run_dir"]) / "FINDINGS.md").read_text()
    assert "**Result: impossible here" in text and "head_dim" in text
    # The baseline's launch, as `bringup trial` records it (this was test_trial_vllm's own launch
    # of the same command): ready first, then the first request kills it.
    o = json.loads((Path(d["attempts"][0]["trial_dir"]) / "outcome.json").read_text())
    assert o["status"] == "fails" and o["phase"] == "first-request"
    assert o["failure_class"] == "unsupported-hardware"
    assert any("Unsupported CPU attention configuration" in e for e in o["evidence"])
    assert o["timings"]["to_ready"] is not None  # it was ready first
    failed = [p for p in o["probes"] if not p["passed"]]
    assert failed and failed[0]["name"] == "completion" and failed[0]["phase"] == "first-request"
    assert_nothing_left(Path(o["log_path"]).parent)
    rc, ex, _, _ = bringup("explain", o["log_path"], "--json")
    assert ex["failure_class"] == "unsupported-hardware" and ex["phase"] == "first-request"


def test_tune_two_knobs(tiny_model, tmp_path):
    rc, d, out, err = bringup(
        "tune",
        "--engine",
        "vllm",
        "--model",
        str(tiny_model),
        "--config",
        "--gpu-memory-utilization 0.3",
        "--knobs",
        "max-num-seqs,max-num-batched-tokens",
        "--trials",
        "2",
        "--sweep",
        "",
        "--num-prompts",
        "16",
        "--concurrency",
        "4",
        "--slo",
        "ttft_p99=5s",
        "--repeats",
        "0",  # the interleaved repeats (3-6 rounds, as the noise decides) took 370 s once: tested on scenarios
        "--timeout",
        "240",  # a launch that does not get ready says so within the test's own time
        "--runs-dir",
        str(tmp_path),
        "--json",
    )
    assert rc == 0, err[-2000:]
    assert set(d["knobs"]) == {"--max-num-seqs", "--max-num-batched-tokens"}
    assert d["launches"] == 2 and d["best"]["status"] == "ok"
    m = d["best"]["metrics"]
    assert m["output_tps"] > 0 and m["rps"] > 0 and m["ttft_p99_s"] > 0 and m["completed"] == 16
    assert d["best_command"].startswith("python -m vllm.entrypoints.openai.api_server --model ")
    tune = json.loads((Path(d["run_dir"]) / "tune" / d["tune_id"] / "tune.json").read_text())
    assert tune["best"]["number"] == d["best"]["number"]
    # The winner ran the reference probe; tune.json and the HTML report carry its verdict (this
    # was test_reference_engines' own tuning launch of the trained model: 6 prompts there).
    assert d["reference"].startswith("in-process reference")
    assert d["reference_verdict"].startswith("agrees: 4 prompts agree with the reference")
    assert tune["reference_verdict"] == d["reference_verdict"]
    html = Path(d["report_html"]).read_text()
    assert "agrees: 4 prompts agree" in html
