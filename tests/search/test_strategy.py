"""The strategy on synthetic outcomes: what it proposes after each kind of failure."""

from __future__ import annotations

from bringup.core.candidate import Candidate, parse_flags
from bringup.help.text import bundled_help
from bringup.knowledge.rules import Knowledge
from bringup.observe.outcome import Outcome
from bringup.search.space import build_space
from bringup.search.strategy import Strategy

SG = bundled_help("sglang", "0.5.10.post1")
VL = bundled_help("vllm", "0.32.0")
SM120 = {
    "device": "cuda",
    "gpu.compute_capability": 12.0,
    "gpu.count": 8,
    "gpu.memory_gib": 96,
    "model.attention": "dsa",
    "model.moe": True,
}
CARD = (
    "--tp 8 --quantization modelopt_fp4 --attention-backend flashinfer --moe-runner-backend flashinfer_cutlass "
    "--kv-cache-dtype fp8_e4m3 --mem-fraction-static 0.95"
)


def make(engine="sglang", spec=SG, baseline=CARD, facts=None, knowledge=False, **kw) -> Strategy:
    base = Candidate.make(engine, "m", parse_flags(baseline, spec))
    space = build_space(engine, spec, base, **kw)
    kn = Knowledge(
        facts or SM120, engine, "0.5.10.post1" if engine == "sglang" else "0.32.0", enabled=knowledge
    )
    return Strategy(space, base, kn, spec)


def outcome(status="fails", cls=None, phase=None, effective=None, implicates=(), signature=None, evidence=()):
    return Outcome(
        status=status,
        failure_class=cls,
        phase=phase,
        effective=effective or {},
        implicates=list(implicates),
        signature=signature,
        evidence=list(evidence),
    )


def test_first_proposal_is_the_baseline_without_knowledge():
    s = make()
    p = s.propose()
    assert p.candidate.key() == s.baseline.key()


def test_nan_in_decode_changes_the_decode_backend_and_never_repeats():
    s = make()
    base = s.propose().candidate
    s.observe(
        base,
        outcome(
            cls="nan-output",
            phase="decode",
            effective={
                "nsa_decode_backend": "flashmla_kv",
                "kv_cache_dtype": "fp8_e4m3",
                "attention_backend": "nsa",
            },
            implicates=[
                "--nsa-decode-backend",
                "--attention-backend",
                "--kv-cache-dtype",
                "--sampling-backend",
            ],
            signature="nan-probability",
        ),
    )
    p = s.propose()
    changed = {c.flag for c in p.candidate.diff(s.baseline)}
    assert "--nsa-decode-backend" in changed
    # the engine used nsa when flashinfer was asked: the user's flag is noted as overridden, not
    # frozen (it can still be dropped), and never varied to another level (any would be nsa too)
    assert s.overridden["--attention-backend"][0] == "nsa" and "--attention-backend" not in s.frozen
    assert p.candidate.flag_dict.get("--attention-backend") in (None, "flashinfer")
    assert p.key != s.observations[0].key


def test_oom_lowers_the_memory_fraction_past_the_failed_value():
    s = make()
    base = s.propose().candidate
    s.observe(
        base,
        outcome(
            cls="oom-graph-capture",
            phase="graph-capture",
            effective={"mem_fraction_static": 0.95},
            implicates=["--mem-fraction-static", "--cuda-graph-max-bs", "--disable-cuda-graph"],
            signature="sglang-graph-capture-failed",
        ),
    )
    p = s.propose()
    mem = p.candidate.flag_dict.get("--mem-fraction-static")
    assert mem is None or float(mem) <= 0.9  # the engine default (unset), or a step down past the near window
    assert "--disable-cuda-graph" not in p.candidate.flag_dict  # slow levels only when needed
    # the failed level and those at or above it are believed the cause (not ruled out by one launch)
    f = s.space.get("--mem-fraction-static")
    at = {
        v: s.success_probability(base.with_changes({"--mem-fraction-static": v}))
        for v in ("0.95", "0.92", "0.9")
    }
    assert at["0.95"] < 0.2 and at["0.95"] < at["0.92"] < at["0.9"]
    assert s.risk(f, "0.92") >= 0.45  # just below: probably still too much
    # a step of a few points comes before a big jump (0.95 failed: 0.90 before 0.85)
    assert s.risk(f, "0.9") < 0.45 and s.risk(f, "0.8") < 0.45


def test_limit_read_from_the_error_message():
    s = make("vllm", VL, "--gpu-memory-utilization 0.99", facts={"device": "cpu"})
    base = s.propose().candidate
    line = (
        "ValueError: Available memory on node 0 (7.13/8.46 GiB) on startup is less than desired CPU memory "
        "utilization (0.99, 8.38 GiB)."
    )
    s.observe(
        base,
        outcome(
            cls="oom-kv-cache",
            phase="kv-alloc",
            effective={"gpu_memory_utilization": 0.99},
            implicates=["--gpu-memory-utilization"],
            signature="vllm-cpu-memory-reservation",
            evidence=[line],
        ),
    )
    p = s.propose()
    v = float(p.candidate.flag_dict["--gpu-memory-utilization"])
    assert v <= 7.13 / 8.46 * 0.95 and v >= 0.7  # the highest level under the bound, with a margin
    # the engine default (0.92, from --help) is above the bound: not proposed as "unset"
    assert s.default_eff["--gpu-memory-utilization"][0] == "0.92"


def test_knowledge_excludes_incompatible_and_applies_preferred():
    s = make(knowledge=True)
    p = s.propose()
    flags = p.candidate.flag_dict
    assert flags.get("--nsa-decode-backend") == "trtllm"  # preferred on SM120 (the seeds)
    f = s.space.get("--nsa-decode-backend")
    assert s.risk(f, "fa3") >= 0.97 and s.risk(f, "flashmla_kv") >= 0.97
    assert s.frozen["--attention-backend"][0] == "nsa"  # forced rule, before any launch


def test_unexplained_failure_points_outside_the_space():
    s = make(
        "vllm",
        VL,
        "--gpu-memory-utilization 0.5",
        facts={"device": "cpu", "model.attention": "mha"},
        knowledge=True,
    )
    base = s.propose().candidate
    s.observe(
        base,
        outcome(
            cls="unsupported-hardware",
            phase="first-request",
            implicates=["--attention-backend", "model.head_dim"],
            signature="vllm-cpu-unsupported-attention",
            evidence=["RuntimeError: Unsupported CPU attention configuration: head_dim=16"],
        ),
    )
    # one launch proves nothing: the failure is believed to lie outside the space, not proved
    assert s.blockers[0].outside_mass() >= 0.5 and s.impossible() is None


def test_works_outcome_teaches_nothing_bad():
    s = make()
    c = s.propose().candidate
    s.observe(c, outcome(status="works"))
    assert s.blockers == [] and s.propose().key != s.observations[0].key


def test_vary_and_fix_shape_the_space():
    s = make(vary=["--nsa-decode-backend", "sampling-backend"], fix={"--mem-fraction-static": "0.88"})
    assert s.space.names == ["--nsa-decode-backend", "--sampling-backend"]
    assert s.propose().candidate.flag_dict["--mem-fraction-static"] == "0.88"


def _probes(failed: str) -> list:
    from bringup.observe.outcome import ProbeResult

    names = ["health", "completion", "chat", "known-answers", "long-decode", "batch", "batch-invariance"]
    return [ProbeResult(name=n, passed=n != failed) for n in names]


WRONG = ["--attention-backend", "--moe-backend", "--kv-cache-dtype"]
QWEN_FACTS = {
    "device": "cuda",
    "gpu.compute_capability": 12.0,
    "gpu.count": 1,
    "model.attention": "gqa",
    "model.moe": True,
}


def test_a_changed_symptom_pins_the_factor_that_changed():
    """Wrong answers, then batch-variant answers when only the MoE backend changed: each launch
    passed the check the other failed, so the MoE backend is what moves the output; the attention
    backend and KV dtype that both shared are cleared, and the next launch tries another MoE backend."""
    s = make("vllm", VL, "--max-model-len 32768", facts=QWEN_FACTS, vary=WRONG)
    base = s.propose().candidate
    eff = {"attention_backend": "FLASHINFER", "kv_cache_dtype": "auto"}
    o1 = outcome(
        "wrong-output", "wrong-output", "decode", {**eff, "moe_backend": "flashinfer_cutlass"}, WRONG
    )
    o1.probes = _probes("known-answers")
    s.observe(base, o1)
    second = base.with_changes({"--moe-backend": "batched_triton"})
    o2 = outcome("wrong-output", "wrong-output", "load", {**eff, "moe_backend": "batched_triton"}, WRONG)
    o2.probes = _probes("batch-invariance")
    s.observe(second, o2)
    nxt = s.propose().candidate
    assert [c.flag for c in nxt.diff(s.baseline)] == ["--moe-backend"]
    assert nxt.flag_dict["--moe-backend"] not in ("batched_triton", "flashinfer_cutlass", "auto")


def test_a_failure_revealed_by_a_fix_is_not_blamed_on_the_fix():
    """OOM in graph capture at 0.95, then NaN in decode once the fraction is dropped: the first
    launch never reached decode, so the NaN is not the memory fraction's doing."""
    s = make()
    base = s.propose().candidate
    s.observe(
        base,
        outcome(
            cls="oom-graph-capture",
            phase="graph-capture",
            effective={"mem_fraction_static": 0.95},
            implicates=["--mem-fraction-static"],
            signature="cuda-graph-oom",
        ),
    )
    dropped = Candidate.make(
        "sglang", "m", {k: v for k, v in base.flag_dict.items() if k != "--mem-fraction-static"}
    )
    s.observe(
        dropped,
        outcome(
            cls="nan-output",
            phase="decode",
            effective={"nsa_decode_backend": "flashmla_kv", "mem_fraction_static": 0.88},
            implicates=["--nsa-decode-backend", "--kv-cache-dtype"],
            signature="nan-probability",
        ),
    )
    nxt = s.propose().candidate
    assert "--mem-fraction-static" not in nxt.flag_dict and "--nsa-decode-backend" in nxt.flag_dict


# vLLM 0.32.0 vllm/platforms/cuda.py raises this when no backend validates (reasons from
# vllm/v1/attention/backend.py validate_configuration); the reasons here are an SM120-like machine's.
NONE_VALID = (
    "ValueError: No valid attention backend found for cuda with AttentionSelectorConfig(head_size=576, "
    "dtype=torch.bfloat16, kv_cache_dtype=auto, block_size=64, use_mla=True). Reasons: "
    "{FLASHMLA: [compute capability not supported], FLASH_ATTN_MLA: [compute capability not supported], "
    "CUTLASS_MLA: [compute capability not supported], FLASHINFER_MLA: [compute capability not supported], "
    "TRITON_MLA: [head_size not supported]}."
)


def test_an_error_that_refuses_every_level_stops_the_search_at_once():
    s = make("vllm", VL, "", facts={"device": "cuda", "gpu.compute_capability": 12.0})
    base = s.propose().candidate
    s.observe(base, outcome(cls="unsupported-hardware", phase="load-weights", evidence=[NONE_VALID]))
    d = s.next_launch([], [], set())
    assert d.candidate is None
    why = s.explain_stop()
    assert why.startswith("nothing in the space can work") and "--attention-backend" in why
    assert "FLASHMLA" in why and "TRITON_MLA" in why


def test_a_refusal_that_depends_on_another_setting_is_not_final():
    line = NONE_VALID.replace(
        "TRITON_MLA: [head_size not supported]", "TRITON_MLA: [kv_cache_dtype not supported]"
    )
    s = make(
        "vllm", VL, "--kv-cache-dtype fp8_e4m3", facts={"device": "cuda", "gpu.compute_capability": 12.0}
    )
    base = s.propose().candidate
    s.observe(
        base,
        outcome(
            cls="unsupported-hardware",
            phase="load-weights",
            evidence=[line],
            implicates=["--attention-backend", "--kv-cache-dtype"],
        ),
    )
    d = s.next_launch([], [], set())
    assert d.candidate is not None and s.blocked is None
    f = s.space.get("--attention-backend")
    # each named backend is ruled out, so the next launch does not name one of them
    assert all(s.risk(f, lv) > 0.99 for lv in ("FLASHMLA", "CUTLASS_MLA")) and s.risk(f, "TRITON_MLA") >= 0.8
    assert d.candidate.flag_dict.get("--attention-backend") not in ("FLASHMLA", "CUTLASS_MLA", "TRITON_MLA")


def test_a_low_chance_does_not_end_the_search_before_its_budget():
    s = make()
    base = s.propose().candidate
    s.observe(
        base,
        outcome(
            cls="nan-output", phase="decode", implicates=["--nsa-decode-backend"], signature="nan-probability"
        ),
    )
    for _ in range(4):  # the same failure whatever is changed: each try is less likely, none is refused
        d = s.next_launch([], [], set())
        assert d.candidate is not None
        s.observe(
            d.candidate,
            outcome(
                cls="nan-output",
                phase="decode",
                implicates=["--nsa-decode-backend"],
                signature="nan-probability",
            ),
        )
    assert s.impossible() is None and "Most likely untried" in s.summary()


def _with_env(engine="vllm", spec=VL, baseline="", facts=None):
    from bringup.env.registry import load_registry
    from bringup.search.envfactors import EnvFactors

    base = Candidate.make(engine, "m", parse_flags(baseline, spec))
    space = build_space(engine, spec, base)
    kn = Knowledge(
        facts or {"device": "cuda", "gpu.compute_capability": 12.0}, engine, "0.32.0", enabled=False
    )
    env = EnvFactors(load_registry(engine, version="0.32.0", installed=False), device="cuda")
    return Strategy(space, base, kn, spec, env=env)


def test_a_variable_the_log_advises_joins_the_space_and_is_tried_next():
    s = _with_env()
    base = s.propose().candidate
    line = (
        "RuntimeError: CUDA error: an illegal memory access was encountered in the sampler; "
        "set VLLM_USE_FLASHINFER_SAMPLER=0 to use the PyTorch sampler instead"
    )
    s.observe(base, outcome(cls="device-assert", phase="decode", evidence=[line]))
    assert s.space.get("env:VLLM_USE_FLASHINFER_SAMPLER") is not None
    p = s.propose()
    assert p.candidate.env_dict.get("VLLM_USE_FLASHINFER_SAMPLER") == "0"
    assert any("VLLM_USE_FLASHINFER_SAMPLER" in n and "named by the log" in n for n in s.notes)


def test_a_nan_brings_the_sampler_variables_that_no_line_names():
    s = _with_env()
    base = s.propose().candidate
    s.observe(
        base,
        outcome(
            status="wrong-output",
            cls="nan-output",
            phase="decode",
            evidence=["probe long-decode: NaN logprob at token 17"],
            implicates=["--attention-backend", "--kv-cache-dtype"],
        ),
    )
    added = [f.name for f in s.space.factors if f.origin == "ranked"]
    assert "env:VLLM_USE_FLASHINFER_SAMPLER" in added and len(added) <= 3
    # Launches made before a factor joined keep their identity (never proposed again).
    assert s.observations[0].key == s.predicted_key(base)
    assert s.propose().key != s.observations[0].key


def test_a_variable_this_version_ignores_is_frozen_not_searched():
    from bringup.env.registry import load_registry
    from bringup.search.envfactors import EnvFactors

    base = Candidate.make("vllm", "m", {}, {"VLLM_ATTENTION_BACKEND": "FLASHINFER"})
    env = EnvFactors(load_registry("vllm", version="0.32.0", installed=False), device="cuda")
    space = build_space("vllm", VL, base)
    for f in env.initial(base.env_dict):
        space.factors.append(f)
    s = Strategy(space, base, Knowledge({"device": "cuda"}, "vllm", "0.32.0", enabled=False), VL, env=env)
    assert "env:VLLM_ATTENTION_BACKEND" in s.frozen
    assert "not read by this engine version" in s.frozen["env:VLLM_ATTENTION_BACKEND"][1]
    # Setting it or not is the same launch: unsetting it is never proposed as a new candidate.
    assert s.predicted_key(base) == s.predicted_key(base.with_changes({"env:VLLM_ATTENTION_BACKEND": None}))


def test_a_missing_package_rules_out_every_level_that_loads_it():
    tr = bundled_help("transformers", "5.19.0")
    base = Candidate.make("transformers", "m", parse_flags("--quantization bnb-4bit", tr))
    s = Strategy(
        build_space("transformers", tr, base),
        base,
        Knowledge({"device": "cuda"}, "transformers", "5.19.0", enabled=False),
        tr,
    )
    s.observe(
        base,
        Outcome(
            status="fails",
            failure_class="missing-dependency",
            phase="load-weights",
            implicates=["--quantization"],
            evidence=["ImportError: ... requires bitsandbytes"],
            implicated_levels={"--quantization": ["bnb-4bit", "bnb-8bit"]},
        ),
    )
    nxt = s.propose().candidate
    assert nxt.flag_dict.get("--quantization") not in ("bnb-4bit", "bnb-8bit")


def test_the_first_launch_keeps_the_baselines_own_rarely_suspect_settings():
    """A flag or variable whose default rarely breaks has a low prior for "unset"; that must not make
    dropping the baseline's own value look free (seen: a run that dropped the user's variables)."""
    from bringup.env.registry import load_registry
    from bringup.search.envfactors import EnvFactors

    base = Candidate.make(
        "vllm", "m", parse_flags("--max-num-seqs 64", VL), {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
    )
    env = EnvFactors(load_registry("vllm", version="0.32.0", installed=False), device="cuda")
    space = build_space("vllm", VL, base)
    for f in env.initial(base.env_dict):
        space.factors.append(f)
    s = Strategy(space, base, Knowledge({"device": "cuda"}, "vllm", "0.32.0", enabled=False), VL, env=env)
    assert s.propose().candidate.key() == base.key()


def test_plumbing_variables_never_join_a_candidate():
    from bringup.env.registry import launch_environment, load_registry

    reg = load_registry("vllm", version="0.32.0", installed=False)
    env = {
        "LD_LIBRARY_PATH": "/usr/lib",
        "CUDA_HOME": "/usr/local/cuda",
        "VLLM_USE_FLASHINFER_SAMPLER": "0",
        "CUDA_VISIBLE_DEVICES": "0",
        "HF_TOKEN": "secret",
        "NCCL_P2P_DISABLE": "1",
    }
    assert launch_environment(reg, env) == {"VLLM_USE_FLASHINFER_SAMPLER": "0", "NCCL_P2P_DISABLE": "1"}


def test_a_failure_of_the_model_itself_brings_no_guessed_variables():
    """vLLM CPU's head_dim=16 (real, tests/data/logs): the signature implicates model.head_dim only;
    the search must stop saying so, not try variables whose names share a word with the log."""
    s = _with_env(facts={"device": "cpu"})
    base = s.propose().candidate
    s.observe(
        base,
        outcome(
            cls="unsupported-hardware",
            phase="first-request",
            implicates=["model.head_dim"],
            signature="vllm-cpu-unsupported-attention",
            evidence=["RuntimeError: Unsupported CPU attention configuration: head_dim=16"],
        ),
    )
    assert not [f for f in s.space.factors if f.origin == "ranked"]
    nxt = s.next_launch([], [], set()).candidate
    assert nxt is not None  # once is not proof
    s.observe(
        nxt,
        outcome(
            cls="unsupported-hardware",
            phase="first-request",
            implicates=["model.head_dim"],
            signature="vllm-cpu-unsupported-attention",
            evidence=["RuntimeError: Unsupported CPU attention configuration: head_dim=16"],
        ),
    )
    assert s.next_launch([], [], set()).candidate is None
    assert "model.head_dim" in s.explain_stop()


def test_a_memory_plan_that_rules_out_low_fractions_does_not_block_after_the_high_ones_failed():
    # 61 GiB of weights on a 95.6 GiB GPU: the plan rules out the low fractions (no room for the
    # weights), the launches rule out the high ones (0.95: graph-capture OOM; 0.9 and the 0.92
    # default: the KV cache cannot hold one request). Not every level is ruled out by knowledge,
    # so nothing says no fraction can work: keep the baseline's and move what the capture OOM
    # also implicates (the batch limit, the capture sizes).
    from bringup.knowledge.rules import memory_model_for

    facts = {
        "device": "cuda",
        "gpu.compute_capability": 12.0,
        "gpu.count": 1,
        "gpu.memory_gib": 95.6,
        "model.weights_gib": 61.0,
    }
    base = Candidate.make(
        "vllm", "m", parse_flags("--max-model-len 131072 --gpu-memory-utilization 0.95", VL)
    )
    kn = Knowledge(facts, "vllm", "0.32.0", memory_model=memory_model_for(facts, "vllm"))
    s = Strategy(build_space("vllm", VL, base), base, kn, VL)
    f = s.space.get("--gpu-memory-utilization")
    assert s.risk(f, "0.5") >= 0.97 and s.risk(f, "0.95") < 0.97  # the plan's verdicts
    s.observe(
        base,
        outcome(
            cls="oom-graph-capture",
            phase="graph-capture",
            signature="rootcause-oom-graph-capture",
            effective={"gpu_memory_utilization": 0.95},
            implicates=[
                "--max-num-seqs",
                "--max-cudagraph-capture-size",
                "--enforce-eager",
                "--gpu-memory-utilization",
            ],
        ),
    )
    kv = outcome(
        cls="oom-kv-cache",
        phase="kv-alloc",
        signature="vllm-kv-too-small-for-max-len",
        implicates=["--max-model-len", "--gpu-memory-utilization"],
    )
    for frac in ("0.9", None):  # 0.9, then the engine's default (0.92)
        p = s.propose()
        assert p is not None and p.candidate.flag_dict.get("--gpu-memory-utilization") == frac
        s.observe(p.candidate, kv)
    d = s.next_launch([], [], set())
    assert s.blocked is None and d.candidate is not None, s.explain_stop()
    flags = d.candidate.flag_dict
    # either the high fraction with a smaller batch (the capture OOM's other numbers), or a change of
    # the maximum length the KV failure names: never a fraction the launches or the plan ruled out
    assert (
        flags.get("--gpu-memory-utilization") == "0.95"
        and {"--max-num-seqs", "--max-cudagraph-capture-size", "--enforce-eager"} & set(flags)
    ) or flags.get("--max-model-len") != "131072"


SELECTED_NOT_VALID = (
    "ValueError: Selected backend AttentionBackendEnum.TRITON_MLA is not valid for this configuration. "
    "Reason: ['compute capability not supported', 'kv_cache_dtype not supported', 'MLA not supported']"
)


def test_one_level_refused_for_the_gpu_is_ruled_out_and_makes_a_later_refusal_final():
    # vLLM refuses the one backend it was asked for, with reasons; one of them (compute capability)
    # depends on nothing a launch changes: that level is out, whatever the KV dtype.
    s = make(
        "vllm",
        VL,
        "--kv-cache-dtype fp8 --attention-backend TRITON_MLA",
        facts={"device": "cuda", "gpu.compute_capability": 12.0},
    )
    base = s.propose().candidate
    s.observe(
        base,
        outcome(
            cls="incompatible-options",
            phase="load-weights",
            evidence=[SELECTED_NOT_VALID],
            implicates=["--kv-cache-dtype", "--attention-backend"],
        ),
    )
    f = s.space.get("--attention-backend")
    assert s.risk(f, "TRITON_MLA") > 0.99 and s.blocked is None
    nxt = s.next_launch([], [], set()).candidate
    assert nxt is not None and nxt.flag_dict.get("--attention-backend") != "TRITON_MLA"
    # The engine then refuses every backend; TRITON_MLA "only" for the KV dtype this time, but it was
    # refused for the GPU before: nothing in the space can work, and the search stops now.
    line = NONE_VALID.replace(
        "TRITON_MLA: [head_size not supported]", "TRITON_MLA: [kv_cache_dtype not supported]"
    )
    assert line != NONE_VALID
    s.observe(
        nxt,
        outcome(
            cls="unsupported-hardware",
            phase="load-weights",
            evidence=[line],
            implicates=["--attention-backend", "--kv-cache-dtype"],
        ),
    )
    assert s.next_launch([], [], set()).candidate is None
    assert s.explain_stop().startswith("nothing in the space can work")


def test_one_level_refused_for_another_setting_is_not_ruled_out():
    line = (
        "ValueError: Selected backend AttentionBackendEnum.TRITON_MLA is not valid for this configuration. "
        "Reason: ['kv_cache_dtype not supported']"
    )
    s = make(
        "vllm",
        VL,
        "--kv-cache-dtype fp8 --attention-backend TRITON_MLA",
        facts={"device": "cuda", "gpu.compute_capability": 12.0},
    )
    s.observe(
        s.propose().candidate,
        outcome(
            cls="incompatible-options",
            phase="load-weights",
            evidence=[line],
            implicates=["--kv-cache-dtype", "--attention-backend"],
        ),
    )
    assert s.risk(s.space.get("--attention-backend"), "TRITON_MLA") < 0.97


def test_asking_vllm_for_its_default_capture_size_is_not_a_new_configuration():
    facts = {"device": "cuda", "gpu.compute_capability": 12.0, "gpu.count": 1, "gpu.memory_gib": 95.6}
    s = make("vllm", VL, "--max-model-len 131072", facts=facts, knowledge=True)
    unset = s.baseline
    asked = unset.with_changes({"--max-cudagraph-capture-size": "512"})
    assert s.predicted_key(asked) == s.predicted_key(unset)
    assert s.predicted_key(unset.with_changes({"--max-cudagraph-capture-size": "256"})) != s.predicted_key(
        unset
    )


def test_a_flag_and_a_variable_the_evidence_cannot_tell_apart_change_the_flag_first():
    from bringup.search.space import Factor

    s = make("vllm", VL, "", facts={"device": "cuda", "gpu.compute_capability": 12.0})
    s.add_factor(Factor("env:VLLM_SOME_KERNEL_SWITCH", "env", ["1"], "VLLM_SOME_KERNEL_SWITCH"))
    s.observe(s.baseline, outcome(status="wrong-output", cls="wrong-output", phase="decode"))
    changed = {c.flag for c in s.propose().candidate.diff(s.baseline)}
    assert changed and not any(c.startswith("env:") for c in changed)


def _nan_in_sampling() -> Outcome:
    """SGLang's NaN crash in decode as the classifier reads it: torch's multinomial assert (its own
    source path names `pytorch`), the signature's suspects."""
    from bringup.observe.signatures import signature_by_id

    sig = signature_by_id("nan-probability")
    assert sig is not None
    lines = [
        "/pytorch/aten/src/ATen/native/cuda/MultinomialKernel.cu:112: binarySearchForMultinomial: block: "
        "[0,0,0], thread: [0,0,0] Assertion `probability tensor contains either `inf`, `nan` or element < 0` failed.",
        "torch.AcceleratorError: CUDA error: device-side assert triggered",
    ]
    out = outcome(
        cls="nan-output", phase="decode", implicates=sig.implicates, signature=sig.id, evidence=lines
    )
    out.root_exception = lines[1]
    return out


def test_a_nan_that_follows_a_sampler_change_is_not_pinned_on_the_new_sampler():
    """Wrong sampled answers, then the sampler changed and decode died of NaN: the NaN may have been
    the wrong answers in another dress (a sampler that does not check NaN samples garbage;
    classes.yaml disguises), so the sampler change is kept and the user's float16, which the NaN
    signature implicates, goes. Before: torch's source path named the `pytorch` sampler and the
    served launch counted as past the NaN's cause, so the new sampler held 96% of the NaN and the
    search went back to the broken sampler for the rest of its budget (dev2, 4 of its misses)."""
    from bringup.core.datafiles import probe_implicates_by_probe
    from bringup.observe.outcome import ProbeResult
    from bringup.search.space import Target, add_baseline_flags, drop_inapplicable, drop_levels

    facts = {**SM120, "gpu.count": 2, "model.attention": "gqa", "model.moe": False}
    base = Candidate.make("sglang", "m", parse_flags("--tp-size 2 --dtype float16", SG))
    space = build_space("sglang", SG, base)
    drop_levels(space, base, Target.of(facts).unwanted_level)  # as the run does (no NPU sampler)
    drop_inapplicable(space, facts)
    add_baseline_flags(space, base, SG)
    s = Strategy(space, base, Knowledge(facts, "sglang", "0.5.10.post1", enabled=False), SG)
    wrong = outcome(
        status="wrong-output",
        cls="wrong-output",
        phase="decode",
        implicates=probe_implicates_by_probe()["sampled"],
        effective={"sampling_backend": "flashinfer"},  # what SGLang's server_args line says it chose
    )
    wrong.probes = [ProbeResult(name="greedy", passed=True), ProbeResult(name="sampled", passed=False)]
    s.observe(s.baseline, wrong)
    second = s.baseline.with_changes({"--sampling-backend": "pytorch"})
    s.observe(second, _nan_in_sampling())
    nan = next(b for b in s.blockers if b.failure_class == "nan-output")
    top = nan.top(1)[0][0]
    assert top.describe() == "--dtype=float16", nan.top(3)
    nxt = s.propose().candidate
    assert nxt.flag_dict.get("--sampling-backend") == "pytorch"
    assert nxt.flag_dict.get("--dtype") != "float16"


def test_the_users_own_variable_for_the_failing_component_is_a_suspect_though_no_line_names_it():
    """NCCL's bootstrap fails ("ncclInternalError ... please report this issue"): no line names the
    NCCL_SOCKET_IFNAME=eth0 the user's launch script set, but it is the user's own setting of the
    component the failure's class implicates (relevance.yaml: distributed-init -> nccl), so it is a
    suspect beside the variables the signature implicates. The user's sampler variable, another
    component, stays a weak one."""
    from bringup.env.registry import load_registry
    from bringup.search.envfactors import EnvFactors

    env = {"NCCL_SOCKET_IFNAME": "eth0", "VLLM_USE_FLASHINFER_SAMPLER": "1"}
    base = Candidate.make("vllm", "m", parse_flags("--tensor-parallel-size 2", VL), env)
    kn = Knowledge({"device": "cuda", "gpu.count": 2}, "vllm", "0.32.0", enabled=False)
    reg = EnvFactors(load_registry("vllm", version="0.32.0", installed=False), device="cuda")
    space = build_space("vllm", VL, base)
    space.factors += reg.initial(env)  # the baseline's variables are factors (session/prepare.py)
    s = Strategy(space, base, kn, VL, env=reg)
    first = s.propose().candidate
    s.observe(
        first,
        Outcome(
            status="fails",
            failure_class="distributed-init",
            phase="distributed-init",
            signature="nccl-error",
            implicates=["--tensor-parallel-size", "env:NCCL_P2P_DISABLE", "env:NCCL_IB_DISABLE"],
            evidence=[
                "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
                "ProcessGroupNCCL.cpp:3356, internal error - please report this issue to the NCCL developers",
                "ncclInternalError: Internal check failed.",
            ],
        ),
    )
    b = s.blockers[-1]
    assert b.mass_of("env:NCCL_SOCKET_IFNAME") >= 0.1, b.top(6)
    # weak: a fifth of the component's variable (it is the user's own too, so not nothing: its "1"
    # is the registry's default, yet set and unset are two levels; below 0.02 while they were one)
    assert b.mass_of("env:VLLM_USE_FLASHINFER_SAMPLER") < b.mass_of("env:NCCL_SOCKET_IFNAME") / 5, b.top(6)


def test_a_users_setting_the_engine_overrides_can_still_be_dropped():
    """Issue 36, item 1: the engine said it ran triton where the user asked fa3 (SGLang does so
    beside an fp8_e5m2 KV cache), yet the failure is raised in fa3's own code: the override the
    engine reports is not the whole story. The user's flag is noted as overridden, its other
    levels are taken to be overridden alike, and dropping it stays a candidate (it was frozen,
    and the search could only vary everything else)."""
    s = make(baseline="--tp 8 --attention-backend fa3 --kv-cache-dtype fp8_e5m2")
    base = s.propose().candidate
    s.observe(
        base,
        outcome(
            cls="no-kernel-image",
            phase="load-weights",
            effective={"attention_backend": "triton", "kv_cache_dtype": "fp8_e5m2"},
            implicates=["--attention-backend"],
        ),
    )
    assert "--attention-backend" not in s.frozen
    assert s.overridden["--attention-backend"][0] == "triton"
    f = s.space.get("--attention-backend")
    # every level asked is what the engine ran; only dropping the flag is another configuration
    assert s.eff(f, "flashinfer") == s.eff(f, "fa3") == "triton" != s.eff(f, None)
    nxt = s.propose().candidate
    assert "--attention-backend" not in nxt.flag_dict


def test_an_override_a_later_launch_does_not_repeat_is_forgotten():
    """The engine ran triton for the user's fa3 beside an fp8_e5m2 KV cache; a launch with a bf16
    cache ran fa3 as asked: the override held only beside the other setting, and fa3's levels are
    their own configurations again."""
    s = make(baseline="--tp 8 --attention-backend fa3 --kv-cache-dtype fp8_e5m2")
    base = s.propose().candidate
    s.observe(
        base, outcome(cls="no-kernel-image", phase="load-weights", effective={"attention_backend": "triton"})
    )
    f = s.space.get("--attention-backend")
    assert s.eff(f, "flashinfer") == "triton"
    other = Candidate.make(
        "sglang", "m", parse_flags("--tp 8 --attention-backend fa3 --kv-cache-dtype auto", SG)
    )
    s.observe(
        other, outcome(cls="no-kernel-image", phase="load-weights", effective={"attention_backend": "fa3"})
    )
    assert "--attention-backend" not in s.overridden
    assert s.eff(f, "flashinfer") == "flashinfer" and s.eff(f, "fa3") == "fa3"


def test_bringups_own_reading_of_a_failure_is_not_the_log_naming_a_variable():
    """A hint no signature wrote is bringup's own reading of the failure ("Classed bad-flag by where it
    was raised (env:NAME: ...)", the settings that touch the failing component): a variable it lists
    was listed because of the evidence already weighed, and read back as the log naming it, it
    counted twice (dev7: 34 of 48 such hints named a variable no engine line did)."""
    from bringup.env.registry import load_registry
    from bringup.search.envfactors import EnvFactors

    env = EnvFactors(load_registry("vllm", version="0.32.0", installed=False), device="cuda")
    said = Outcome(
        status="fails",
        failure_class="bad-flag",
        phase="load-weights",
        evidence=["PermissionError: [Errno 13] Permission denied: '/opt/cache/x'"],
        hint="Classed bad-flag by where it was raised (env:VLLM_USE_FLASHINFER_SAMPLER: the failing code "
        "is in the component it configures).",
    )
    named = [p.factor.name for p in env.after_failure(said, []) if p.why.startswith("named by the log")]
    assert "env:VLLM_USE_FLASHINFER_SAMPLER" not in named
    # a signature's hint is knowledge written from the engine's words: its variable is named
    signed = said.model_copy(update={"signature": "some-signature"})
    named = [p.factor.name for p in env.after_failure(signed, []) if p.why.startswith("named by the log")]
    assert "env:VLLM_USE_FLASHINFER_SAMPLER" in named


def test_a_level_the_failure_itself_advises_is_not_its_culprit():
    """dev2: a distributed-init hang on PCIe, then NCCL_P2P_DISABLE=1 (the classic fix) got past it
    and met NCCL's "unhandled system error", whose signature hint says "try NCCL_P2P_DISABLE=1 on
    PCIe machines". The search blamed the new failure on NCCL_P2P_DISABLE=1, the very level the
    failure advises, and spent its launches putting the hang back. A failure does not name its own
    way out as its cause: that level is no suspect of it, and whatever else the launch set is."""
    from bringup.env.registry import load_registry, mentions_in_lines
    from bringup.search.envfactors import EnvFactors

    # "try NAME=VALUE" advises the value, as "set NAME=VALUE" does
    said = mentions_in_lines(["hang on PCIe: try NCCL_P2P_DISABLE=1 on PCIe machines"], ["NCCL_P2P_DISABLE"])
    assert [(m.name, m.action, m.value) for m in said] == [("NCCL_P2P_DISABLE", "set", "1")]

    def blocker(p2p: str):
        base = Candidate.make("vllm", "m", {"--tensor-parallel-size": "2"}, {"NCCL_P2P_DISABLE": p2p})
        env = EnvFactors(load_registry("vllm", version="0.32.0", installed=False), device="cuda")
        space = build_space("vllm", VL, base)
        space.factors += env.initial(base.env_dict)
        kn = Knowledge({"device": "cuda", "gpu.count": 2}, "vllm", "0.32.0", enabled=False)
        s = Strategy(space, base, kn, VL, env=env)
        s.observe(
            base,
            Outcome(
                status="fails",
                failure_class="distributed-init",
                phase="distributed-init",
                implicates=["--tensor-parallel-size", "env:NCCL_P2P_DISABLE", "env:NCCL_IB_DISABLE"],
                evidence=[
                    "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"
                ],
                hint="The GPUs could not form a process group. Try NCCL_P2P_DISABLE=1 on PCIe machines.",
                signature="nccl-error",  # a signature's hint: knowledge, read as the log's advice
            ),
        )
        return s.blockers[-1]

    at_advice, elsewhere = blocker("1"), blocker("0")
    assert at_advice.mass_of("env:NCCL_P2P_DISABLE") < 0.5 * elsewhere.mass_of("env:NCCL_P2P_DISABLE"), (
        at_advice.top(4),
        elsewhere.top(4),
    )
    assert at_advice.mass_of("env:NCCL_P2P_DISABLE") < at_advice.mass_of("env:NCCL_IB_DISABLE"), (
        at_advice.top(4)
    )
