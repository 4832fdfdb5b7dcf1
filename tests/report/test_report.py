"""FINDINGS.md (bringup/report/findings.py) from a hand-built RunResult: what a reader sees first, and each section.

The run tests read the report of a real search; these pin the renderer itself on a result whose
every field is known, so a wording or grouping change shows up here without launching anything.
"""

from __future__ import annotations

import json

from bringup.core.datafiles import classes
from bringup.observe.outcome import OverrideRecord, ProbeResult
from bringup.record.results import Attempt, Pinned, Prediction, RunResult, StrategyState
from bringup.report.findings import load_result, render_markdown, write_report

GPU_FACTS = {
    "device": "cuda",
    "gpu.count": 8,
    "gpu.name": "RTX PRO 6000",
    "gpu.compute_capability": 12.0,
    "gpu.memory_gib": 95.6,
    "gpu.smem_per_block_kib": 99,
    "gpu.link": "PCIe",
    "model.architecture": "GlmMoeDsaForCausalLM",
    "model.attention": "mla",
    "model.moe": True,
    "model.quantization": "modelopt_fp4",
    "model.weights_gib": 401.2,
}


def attempt(
    n: int,
    changes: str,
    status: str,
    cls: str | None = None,
    phase: str | None = None,
    evidence: str = "",
    purpose: str = "search",
    **kw,
) -> Attempt:
    return Attempt(
        number=n,
        purpose=purpose,
        changes=changes,
        status=status,
        failure_class=cls,
        phase=phase,
        evidence=evidence,
        **{"wall_s": 12.0, "simulated_s": 600.0, **kw},
    )


def seed_like_result(tmp_path) -> RunResult:
    """The seeds' story in miniature: two NaN decodes, an fp8 assertion, then the fix."""
    return RunResult(
        run_id="run-42",
        run_dir=str(tmp_path),
        status="validated",
        validated=True,
        launches=4,
        screening_launches=1,
        minimize_launches=2,
        simulated_hours=0.67,
        wall_seconds=48.0,
        final_command="sglang serve --tp 8 --nsa-decode-backend trtllm",
        final_candidate=None,
        minimal_fix=["--nsa-decode-backend", "trtllm"],
        minimal_fix_str="--nsa-decode-backend trtllm",
        minimal_fix_verified=True,
        stop_reason="every probe passed",
        engine="sglang",
        engine_version="0.5.9",
        model="zai-org/GLM-5-NVFP4",
        facts=GPU_FACTS,
        baseline_command="sglang serve --tp 8",
        journal_priors=3,
        attempts=[
            attempt(
                1,
                "--attention-backend triton",
                "fails",
                "incompatible-options",
                "graph-capture",
                "AssertionError: nsa_kv_cache_store_fp8 | triton",
                purpose="screen",
                hint="fp8 KV with the triton NSA store is not implemented.",
                signature="sglang-nsa-fp8-store",
            ),
            attempt(
                2,
                "(baseline)",
                "wrong-output",
                "nan-output",
                "decode",
                "probe long-decode: non-finite logprobs",
                hint="NaN/inf logprobs point at the attention backend.",
                overrides=[
                    OverrideRecord(
                        flag="--kv-cache-dtype",
                        requested="auto",
                        effective="fp8_e4m3",
                        evidence="kv_cache_dtype=fp8_e4m3 (forced for NSA)",
                    )
                ],
            ),
            attempt(
                3,
                "--nsa-decode-backend flashmla_sparse",
                "wrong-output",
                "nan-output",
                "decode",
                "probe completion: non-finite logprobs",
            ),
            attempt(4, "--nsa-decode-backend trtllm", "works"),
            attempt(5, "(drop --nsa-prefill-backend)", "works", purpose="minimize"),
        ],
        predictions=[
            Prediction(
                flag="--mem-fraction-static",
                level="0.95",
                verdict="risky",
                reason="leaves 1.2 GiB for CUDA graphs, 2.9 GiB needed",
                source="issue #12",
                rule="graph-headroom",
                facts={"gpu.memory_gib": 95.6},
            )
        ],
        strategy_state=StrategyState(
            frozen={
                "--kv-cache-dtype": Pinned(value="fp8_e4m3", why="NSA forces it"),
                "--page-size": Pinned(value="64", why="the NSA backends need 64"),
            },
            defaults={"--attention-backend": Pinned(value="nsa", why="read from the log")},
            notes=["--mem-fraction-static below 0.93 (from 'not enough memory: needed 0.93')"],
        ),
        final_probes=[
            ProbeResult(name="health", passed=True, detail="200"),
            ProbeResult(name="long-decode", passed=True, detail="256 tokens, 256 finite logprobs"),
        ],
        warnings=["Using a | pipe in a warning\nover two lines"],
    )


def test_headline_says_result_command_and_fix_first(tmp_path):
    md = render_markdown(seed_like_result(tmp_path))
    lines = md.splitlines()
    assert lines[0] == (
        "# Bring-up: zai-org/GLM-5-NVFP4 on 8 × RTX PRO 6000, compute capability 12.0, 95.6 GiB, "
        "99 KiB shared memory per block, PCIe, SGLang 0.5.9"
    )
    assert lines[2] == (
        "**Result: validated** after 4 launches (1 screening with dummy weights, 3 full), "
        "0.67 simulated hours of launches; 3 earlier trials on this machine were used from the journal."
    )
    assert (
        "Minimal fix from the baseline: `--nsa-decode-backend trtllm` (verified by removing each change in turn, 2 extra launches)."
        in md
    )
    # the command to copy comes before the attempt table
    assert md.index("sglang serve --tp 8 --nsa-decode-backend trtllm") < md.index("## Attempts")
    assert (
        "Machine: 8 × RTX PRO 6000, compute capability 12.0, 95.6 GiB, 99 KiB shared memory per block, PCIe. "
        "Model: GlmMoeDsaForCausalLM, MLA attention, MoE, MODELOPT_FP4, 401 GiB of weights. "
        "Knowledge rules: on."
    ) in md


def test_attempt_rows_one_per_launch_with_kind_and_evidence(tmp_path):
    md = render_markdown(seed_like_result(tmp_path))
    rows = [ln for ln in md.splitlines() if ln.startswith("| ") and not ln.startswith("| #")]
    assert len(rows) == 5  # the baseline was launched: no "predicted fail" row 0
    assert rows[0] == (
        "| 1 | --attention-backend triton | screen (dummy weights, fewer layers) | fails | "
        "incompatible-options | graph-capture | `AssertionError: nsa_kv_cache_store_fp8 \\| triton` | "
        "10.0 min sim. (12 s real) |"
    )
    assert rows[3].startswith(
        "| 4 | --nsa-decode-backend trtllm | full | works |  |  | `all probes passed` |"
    )
    assert rows[4].startswith("| 5 | (drop --nsa-prefill-backend) | minimize (full) | works |")


def test_failure_meanings_are_grouped_by_class_phase_and_signature(tmp_path):
    md = render_markdown(seed_like_result(tmp_path))
    section = md.split("## What the failures mean")[1].split("\n## ")[0]
    items = [ln for ln in section.splitlines() if ln.startswith("- ")]
    assert len(items) == 2  # attempts 2 and 3 share class, phase and (no) signature: one item
    fp8, nan = items
    assert fp8.startswith(
        "- **incompatible-options in graph-capture (attempt 1):** " + classes()["incompatible-options"]
    )
    assert fp8.endswith("fp8 KV with the triton NSA store is not implemented.")
    assert nan.startswith("- **nan-output in decode (attempts 2, 3):** " + classes()["nan-output"])
    assert "Evidence: `probe long-decode: non-finite logprobs`" in section  # the group's first attempt
    assert "(signature `sglang-nsa-fp8-store`)" in section


def test_overrides_frozen_flags_defaults_and_bounds(tmp_path):
    md = render_markdown(seed_like_result(tmp_path))
    section = md.split("## Engine overrides seen")[1].split("\n## ")[0]
    assert (
        "- `--kv-cache-dtype`: asked `auto`, the engine used `fp8_e4m3`. Varying it further is pointless on "
        "this engine version. Evidence: `kv_cache_dtype=fp8_e4m3 (forced for NSA)`"
    ) in section
    # a frozen flag already shown as an override is not repeated; the other one is listed
    assert section.count("--kv-cache-dtype") == 1
    assert "- `--page-size`: the engine uses `64` whatever is asked (the NSA backends need 64)." in section
    assert "- `--attention-backend` (not given): `nsa` (read from the log)" in md
    assert "## Bounds read from error messages" in md and "below 0.93" in md


def test_predictions_probes_warnings_and_the_resume_line(tmp_path):
    md = render_markdown(seed_like_result(tmp_path))
    assert (
        "- `--mem-fraction-static 0.95`: **risky**: leaves 1.2 GiB for CUDA graphs, 2.9 GiB needed "
        "(facts: gpu.memory_gib=95.6; source: issue #12)"
    ) in md
    assert "health (passed), long-decode (passed): all passed." in md
    assert "- long-decode: 256 tokens, 256 finite logprobs" in md
    assert "- `Using a \\| pipe in a warning over two lines`" in md  # table-safe: no raw pipe, no newline
    assert md.rstrip().endswith("resume with `bringup run --resume --run-id run-42`.")


def test_a_run_without_a_working_configuration(tmp_path):
    """No validation, baseline never launched because knowledge predicted its failure: row 0 says so."""
    r = seed_like_result(tmp_path).model_copy(
        update={
            "status": "budget",
            "validated": False,
            "final_command": None,
            "minimal_fix_str": None,
            "stop_reason": "the launch budget (2) ran out",
            "simulated_hours": None,
            "knowledge": False,
            "facts": {"cpu.count": 2, "host.memory_gib": 24},
            "engine": "vllm",
            "engine_version": "0.32.0",
            "attempts": [
                attempt(
                    1,
                    "--enforce-eager",
                    "fails",
                    "oom-kv-cache",
                    "kv-alloc",
                    "No available memory",
                    simulated_s=None,
                ),
                attempt(2, "--max-num-seqs 8", "timeout", None, "load", "", simulated_s=None),
            ],
            "final_probes": [],
            "strategy_state": StrategyState(),
            "warnings": [],
        }
    )
    md = render_markdown(r)
    assert (
        md.splitlines()[0]
        == "# Bring-up: zai-org/GLM-5-NVFP4 on no GPU (CPU build): 2 CPUs, 24 GiB, vLLM 0.32.0"
    )
    assert "**Result: not found within the budget** (budget) after 4 launches, 0.4 min of launches." in md
    assert "Why the search stopped: the launch budget (2) ran out" in md
    assert "Knowledge rules: off (signatures only)." in md
    row0 = next(ln for ln in md.splitlines() if ln.startswith("| 0 |"))
    assert row0.startswith("| 0 | (baseline, not launched) | plan | predicted fail |")
    assert "--mem-fraction-static 0.95: leaves 1.2 GiB" in row0
    assert "- **timeout in load (attempt 2):**" in md  # no class: the status names the group
    for absent in (
        "Minimal fix",
        "## Engine overrides seen",
        "## Probes on the final configuration",
        "## Warnings worth knowing",
        "## Bounds read from error messages",
    ):
        assert absent not in md


def test_findings_json_round_trips_and_old_names_still_load(tmp_path):
    r = seed_like_result(tmp_path)
    path = write_report(r, tmp_path)
    assert path.read_text() == render_markdown(r)
    assert load_result(tmp_path) == r
    # findings written before delta debugging was renamed to minimize
    d = json.loads((tmp_path / "findings.json").read_text())
    d.pop("minimize_launches")
    d["explain_launches"] = 2
    d["attempts"][4]["purpose"] = "explain"
    (tmp_path / "findings.json").write_text(json.dumps(d))
    old = load_result(tmp_path)
    assert old.minimize_launches == 2 and old.attempts[4].purpose == "minimize"
    assert "| 5 | (drop --nsa-prefill-backend) | minimize (full) | works |" in render_markdown(old)


def test_findings_carry_each_tuning_verdict_and_spreads(tmp_path):
    from bringup.tuning.result import RepeatReport, Spread, TuneResult

    rep = RepeatReport(
        rule="one-sided exact Mann-Whitney U ...",
        test="one-sided exact Mann-Whitney U",
        alpha=0.05,
        level=0.0125,
        rounds=6,
        launches=18,
        settled=False,
        verdict="no configuration beats the baseline beyond noise here (best p = 0.09 for #3)",
        baseline=1,
        spreads=[
            Spread(
                number=1, knobs={"--max-num-seqs": "8"}, role="baseline", samples=[1.0, 1.1], n=2, median=1.05
            ),
            Spread(number=3, knobs={"--max-num-seqs": "16"}, role="finalist", n=2, median=1.1, p_value=0.09),
        ],
    )
    tune = TuneResult(
        tune_id="tune-1",
        run_dir=str(tmp_path),
        engine="vllm",
        model="m",
        base_command="serve",
        objective="goodput",
    )
    tune.repeats = rep
    md = render_markdown(seed_like_result(tmp_path), [tune])
    assert "## Tuning tune-1" in md
    assert "**Verdict: no configuration beats the baseline beyond noise here (best p = 0.09 for #3).**" in md
    assert "the repeat budget ran out before the order settled" in md
    assert "| 3 | finalist | `--max-num-seqs 16` | 2 | 1.1 |" in md
    assert md.index("## Tuning tune-1") < md.index("Run folder:")  # the run's footer stays last


def test_a_start_slowed_by_kernel_compiles_is_called_a_cold_cache(tmp_path):
    """Issue 23: a launch slow only because a JIT cache was cold says so (the outcome's compile
    silence, read by bringup/trial/jitwatch.py), and a launch whose compilers were brief does not."""
    from bringup.observe.outcome import Outcome, Timings

    cold = Outcome(
        status="works", timings=Timings(to_ready=255.1, jit_silent=121.6, jit_tools=["ninja", "nvcc"])
    )
    warm = Outcome(status="works", timings=Timings(to_ready=91.0, jit_silent=2.0, jit_tools=["ptxas"]))
    assert cold.cold_start().startswith("122 s of its 255 s to ready were kernels compiling (ninja, nvcc)")
    assert warm.cold_start() == ""
    r = seed_like_result(tmp_path)
    r.attempts[3].cold_start = cold.cold_start()
    md = render_markdown(r)
    assert "Slow start of attempt 4: 122 s of its 255 s to ready were kernels compiling" in md
    assert md.count("Slow start of attempt") == 1
