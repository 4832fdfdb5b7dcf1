"""Real SGLang 0.5.23 under bringup, as far as this CPU machine lets it run.

SGLang from PyPI brings a CUDA build of PyTorch (about 11 GB), so it lives in its own venv,
``.venv-sglang`` (``scripts/setup-sglang.sh``), and these tests run only under ``make test-sglang``
(marked ``sglang``: neither tier of ``make test`` selects them; tests/test_tiers.py checks that).
On a machine without a GPU SGLang parses its arguments, prints its effective configuration
(``server_args={...}``) and fails in model construction: enough to drive bringup's help parser,
its pre-launch validation, the parse-args classification, the effective-configuration reader and
the failure classification against the real engine. ``BRINGUP_SGLANG_PYTHON`` names the
interpreter (default: ``.venv-sglang/bin/python`` of this checkout).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bringup.engines.targets import resolve_target
from bringup.help.text import bundled_help
from tests.conftest import assert_nothing_left, bringup
from tests.paths import ROOT

pytestmark = [pytest.mark.sglang, pytest.mark.engine]
VERSION = "0.5.23"
BASELINE = ["--device", "cpu", "--attention-backend", "torch_native"]


@pytest.fixture(scope="module")
def sglang_python() -> str:
    py = os.environ.get("BRINGUP_SGLANG_PYTHON") or str(ROOT / ".venv-sglang" / "bin" / "python")
    if not Path(py).exists():
        pytest.fail(f"no SGLang interpreter at {py}: run scripts/setup-sglang.sh (make test-sglang does)")
    return py


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch) -> Path:
    """A help cache of this test's own, so the help is captured from the installed engine, not reused."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("BRINGUP_CACHE", str(cache))
    return cache


def _trial(py: str, model: Path, runs: Path, *flags: str, validate: bool = True):
    return bringup(
        "trial",
        "--engine",
        "sglang",
        "--python",
        py,
        "--model",
        str(model),
        "--runs-dir",
        str(runs),
        "--json",
        "--timeout",
        "300",
        "--hang-timeout",
        "120",
        *([] if validate else ["--no-validate"]),
        "--",
        *flags,
    )


def test_help_is_parsed_from_the_installed_version(sglang_python, tiny_model, fresh_cache):
    target = resolve_target(engine="sglang", model=str(tiny_model), python=sglang_python)
    assert target.version == VERSION
    captured = fresh_cache / "help" / f"sglang-{VERSION}.txt"
    assert captured.is_file() and captured.read_text().startswith(
        "usage: "
    )  # run, not copied from the bundle
    spec = target.spec
    assert spec is not None and len(spec.options) > 500
    assert "torch_native" in spec.get("--attention-backend").choices
    assert spec.get("--cuda-graph-backend-decode").choices == ["full", "breakable", "disabled"]
    assert (
        spec.get("--nsa-decode-backend") is None and spec.get("--dsa-decode-backend") is not None
    )  # version drift
    # The bundled capture of the same version agrees, option by option (the installed one may add a
    # few from optional packages: the Rust gRPC servicer's --servicer-impl, --metrics-port).
    bundled = bundled_help("sglang", VERSION)
    missing = [o.name for o in bundled.options if spec.get(o.name) is None]
    assert missing == []
    differ = [o.name for o in bundled.options if set(o.choices or []) != set(spec.get(o.name).choices or [])]
    assert differ == []
    assert len(spec.options) - len(bundled.options) < 10


def test_bad_choice_is_caught_before_launch_with_the_real_choices(
    sglang_python, tiny_model, tmp_path, fresh_cache
):
    rc, o, _, _ = _trial(
        sglang_python, tiny_model, tmp_path, *BASELINE[:2], "--attention-backend", "nonsense"
    )
    assert rc == 1 and o["launched"] is False and o["signature"] == "prelaunch-validation"
    assert (o["failure_class"], o["phase"]) == ("bad-flag", "parse-args")
    assert "invalid choice: 'nonsense'" in o["evidence"][0] and "'intel_amx'" in o["evidence"][0]


def test_bad_value_launched_fails_in_parse_args_for_real(sglang_python, tiny_model, tmp_path, fresh_cache):
    rc, o, _, _ = _trial(
        sglang_python, tiny_model, tmp_path, *BASELINE[:2], "--attention-backend", "nonsense", validate=False
    )
    # argparse exits 2, unless bringup's fail-fast teardown on the fatal line gets there first (-15)
    assert rc == 1 and o["launched"] is True and o["exit_code"] in (2, -15)
    assert (o["status"], o["failure_class"], o["phase"]) == ("fails", "bad-flag", "parse-args")
    assert "error: argument --attention-backend: invalid choice: 'nonsense'" in o["evidence"][0]
    assert o["effective"] == {}  # it never got as far as server_args=
    assert_nothing_left(Path(o["log_path"]).parent)


def test_unknown_flag_launched_fails_in_parse_args_for_real(sglang_python, tiny_model, tmp_path, fresh_cache):
    rc, o, _, _ = _trial(
        sglang_python, tiny_model, tmp_path, *BASELINE, "--no-such-flag", "1", validate=False
    )
    assert rc == 1 and o["launched"] is True
    assert (o["failure_class"], o["phase"]) == ("bad-flag", "parse-args")
    assert "--no-such-flag" in o["evidence"][0]
    assert_nothing_left(Path(o["log_path"]).parent)


def test_cpu_launch_effective_configuration_and_missing_vllm(
    sglang_python, tiny_model, tmp_path, fresh_cache
):
    """The real failure: arguments parsed, server_args={...} printed, then model construction imports
    vLLM's rotary-embedding op. Asked for CUDA graphs on decode, torch_native turned them off: the
    effective configuration says so."""
    rc, o, _, _ = _trial(
        sglang_python, tiny_model, tmp_path, *BASELINE, "--cuda-graph-backend-decode", "full"
    )
    assert rc == 1 and o["launched"] is True
    assert (o["status"], o["failure_class"], o["phase"]) == ("fails", "missing-dependency", "load-weights")
    assert o["signature"] == "sglang-vllm-rope-off-cuda" and o["implicates"] == ["env:SGLANG_USE_CPU_ENGINE"]
    assert o["evidence"][0] == "ModuleNotFoundError: No module named 'vllm'"
    assert o["root_exception"].endswith("(sglang/srt/layers/rotary_embedding/base.py:138)")
    eff = o["effective"]
    assert eff["device"] == "cpu" and eff["attention_backend"] == "torch_native"
    assert eff["model_path"] == str(tiny_model) and eff["tensor_parallel_size"] == 1
    assert eff["cuda_graph_backend_decode"] == "disabled"
    assert [(x["flag"], x["requested"], x["effective"]) for x in o["overrides"]] == [
        ("--cuda-graph-backend-decode", "full", "disabled")
    ]
    assert o["timings"]["to_ready"] is None and o["timings"]["fatal_to_teardown"] < 5
    assert_nothing_left(Path(o["log_path"]).parent)


def test_run_stops_not_validated_naming_the_missing_packages(
    sglang_python, tiny_model, tmp_path, fresh_cache
):
    """`bringup run` from the CPU baseline: the first failure (no vllm) advises SGLANG_USE_CPU_ENGINE=1
    (SGLang's CPU path), which fails for want of sgl-kernel built for CPU, which no launch flag
    changes: the run stops not validated after those two launches, naming both packages."""
    rc, r, _, err = bringup(
        "run",
        "--engine",
        "sglang",
        "--python",
        sglang_python,
        "--model",
        str(tiny_model),
        "--runs-dir",
        str(tmp_path),
        "--baseline",
        " ".join(BASELINE),
        "--json",
        "--timeout",
        "300",
        "--hang-timeout",
        "120",
        "--no-minimize",
        timeout=1200,
    )
    assert rc == 1, err[-2000:]
    assert r["status"] != "validated" and not r["validated"]
    attempts = r["attempts"]
    assert [(a["changes"], a["failure_class"], a["phase"]) for a in attempts] == [
        ("(baseline)", "missing-dependency", "load-weights"),
        ("env:SGLANG_USE_CPU_ENGINE 1", "missing-dependency", "parse-args"),
    ]
    assert "No module named 'vllm'" in attempts[0]["evidence"]
    assert "Could not load any common_ops library" in attempts[1]["evidence"]
    # the search does not give up on two launches: it says what still fails and what it would try next
    assert r["status"] in ("impossible", "not-found", "budget") and "missing-dependency" in r["stop_reason"]
    findings = (Path(r["run_dir"]) / "FINDINGS.md").read_text()
    assert "No module named 'vllm'" in findings and "**Result:" in findings
