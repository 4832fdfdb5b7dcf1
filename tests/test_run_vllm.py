"""The bring-up search and the tuner on the real vLLM CPU build."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import bringup

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


def test_memory_fraction_099_validates_in_two_launches(tiny_model, tmp_path):
    rc, d, _, err = bringup(
        "run",
        "--engine",
        "vllm",
        "--model",
        str(tiny_model),
        "--baseline",
        "--gpu-memory-utilization 0.99",
        "--runs-dir",
        str(tmp_path),
        "--json",
        "--timeout",
        "300",
    )
    assert rc == 0 and d["validated"], err[-2000:]
    assert d["launches"] == 2 and d["screening_launches"] == 0
    first, second = d["attempts"][0], d["attempts"][1]
    assert first["changes"] == "(baseline)" and first["failure_class"] == "oom-kv-cache"
    assert second["status"] == "works" and second["changes"].startswith("--gpu-memory-utilization ")
    assert d["minimal_fix"] == [second["changes"]]
    assert "--gpu-memory-utilization" in d["final_command"]
    # the memory plan was compared with what the engine reported, and the error kept ...
    with sqlite3.connect(tmp_path / "journal.sqlite") as c:
        errors = [r[0] for r in c.execute("SELECT rel_error FROM plan_errors WHERE rel_error IS NOT NULL")]
    assert errors
    # ... so a later plan on this machine is corrected by it
    rc, _, out, err = bringup(
        "plan",
        str(tiny_model),
        "--engine",
        "vllm",
        "--mem-fraction",
        "0.3",
        "--runs-dir",
        str(tmp_path),
        "--json",
        check_json=False,
    )
    assert rc == 0, err
    plan = json.loads(out)
    assert plan["correction"]["samples"] == len(errors)


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
    assert Path(d["report_html"]).is_file()
