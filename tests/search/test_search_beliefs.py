"""The search's belief model on worlds of faults (tests/search/search_world.py): exact paths, bounded launches.

Each test builds an onion the issue describes (several mistakes, a fix that needs two changes, an
engine's printed remedy, a property no flag changes) and checks what the strategy launches.
"""

from __future__ import annotations

from dataclasses import replace

from bringup.core.candidate import Candidate, parse_flags
from bringup.help.text import bundled_help
from bringup.knowledge.rules import Knowledge
from bringup.search.beliefs import Condition, new_blocker
from bringup.search.space import Factor, add_baseline_flags, build_space, drop_inapplicable
from bringup.search.strategy import Strategy
from tests.search.search_world import Fault, World, solve

VL = bundled_help("vllm", "0.32.0")
H200 = {
    "device": "cuda",
    "gpu.compute_capability": 9.0,
    "gpu.count": 1,
    "gpu.memory_gib": 139.8,
    "model.moe": False,
}


def make(baseline: str, env: dict[str, str] | None = None) -> Strategy:
    base = Candidate.make("vllm", "m", parse_flags(baseline, VL), env or {})
    space = build_space("vllm", VL, base)
    drop_inapplicable(space, H200)
    add_baseline_flags(space, base, VL)
    for name, value in (env or {}).items():  # as Run adds the user's own variables (EnvFactors.initial)
        space.factors.append(Factor("env:" + name, "env", [value, "0" if value != "0" else "1"], name))
    kn = Knowledge(H200, "vllm", "0.32.0", enabled=False)
    s = Strategy(space, base, kn, VL)
    for name in env or {}:  # the registry's default, as EnvFactors gives it in a run
        s.default_eff["env:" + name] = ("1", "the engine's registry default")
    return s


TP = Fault(
    "tp",
    lambda f, e: f.get("--tensor-parallel-size") == "8",
    "bad-value",
    "parse-args",
    "pydantic_core._pydantic_core.ValidationError: Value error, Tensor parallel size (8) is larger than "
    "the number of available GPUs (1)",
)
LEN = Fault(
    "len",
    lambda f, e: f.get("--max-model-len") == "999999",
    "bad-value",
    "load-weights",
    "ValueError: User-specified max_model_len (999999) is greater than the derived max_model_len (2048)",
)
KV = Fault(
    "kv",
    lambda f, e: f.get("--kv-cache-dtype") == "fp8_e5m2",
    "unsupported-hardware",
    "kv-alloc",
    "ValueError: fp8_e5m2 KV cache is not supported by the FLASH_ATTN backend on this GPU",
)


def test_an_onion_of_three_mistakes_is_peeled_one_launch_each_and_keeps_every_fix() -> None:
    s = make("--tensor-parallel-size 8 --max-model-len 999999 --kv-cache-dtype fp8_e5m2")
    path = solve(s, World([TP, LEN, KV]))
    shown = [o.failure_class or o.status for _, o in path]
    assert shown == ["bad-value", "bad-value", "unsupported-hardware", "works"]
    # every launch after the first keeps what the launches before it fixed
    assert path[1][0].flag_dict.get("--tensor-parallel-size") != "8"
    assert path[2][0].flag_dict.get("--tensor-parallel-size") != "8"
    assert path[2][0].flag_dict.get("--max-model-len") != "999999"


SEQS = Fault(
    "seqs",
    lambda f, e: f.get("--max-num-seqs") == "99999",
    "bad-value",
    "parse-args",
    "ValueError: max_num_seqs (99999) must be less than or equal to max_num_batched_tokens",
)
BLOCK = Fault(
    "block",
    lambda f, e: f.get("--block-size") == "17",
    "bad-value",
    "parse-args",
    "ValueError: block_size (17) must be a power of two",
)


def test_a_refusal_by_the_engines_own_checks_keeps_progress_as_a_failed_launch_does() -> None:
    """A candidate the dry run refuses (source "dry-run", never launched) is a start for the next
    candidates, as a failed launch is: five mistakes need five changes, beyond the three that can
    be grown from the baseline. Before, the search went back to the baseline after each refusal
    (found by vLLM 0.24.0's dry run on the H200: the next candidates had p_success 0.01)."""
    bad = "--tensor-parallel-size 8 --max-model-len 999999 --kv-cache-dtype fp8_e5m2 --max-num-seqs 99999 --block-size 17"
    world = World([TP, LEN, KV, SEQS, BLOCK])
    paths = {}
    for source in ("launch", "dry-run"):
        s = make(bad)
        path = []
        for _ in range(8):
            cand = s.next_launch([], [], set()).candidate
            assert cand is not None
            o = world.answer(cand)
            s.observe(cand, o, source=source if o.status != "works" else "launch")
            path.append(cand.key())
            if o.status == "works":
                break
        paths[source] = path
    assert len(paths["launch"]) <= 6  # at most one launch per mistake, then the one that works
    assert paths["dry-run"] == paths["launch"]


def test_a_flag_the_space_lacks_is_a_factor_the_search_can_drop() -> None:
    s = make("--tensor-parallel-size 8")
    assert s.space.get("--tensor-parallel-size") is not None
    path = solve(s, World([TP]))
    assert len(path) == 2 and path[-1][1].status == "works"
    assert "--tensor-parallel-size" not in path[-1][0].flag_dict


PAIR = Fault(
    "pair",
    # the fault goes only when both halves are changed: the variable set to 0 AND graphs off
    lambda f, e: e.get("VLLM_USE_FLASHINFER_SAMPLER") != "0" or not f.get("--enforce-eager"),
    "device-assert",
    "graph-capture",
    "RuntimeError: CUDA error: an illegal memory access was encountered while capturing the CUDA graph of "
    "the sampler (VLLM_USE_FLASHINFER_SAMPLER, enforce_eager)",
)


def test_a_fix_that_needs_two_changes_is_found_though_each_half_fails_alike() -> None:
    s = make("--max-model-len 2048", env={"VLLM_USE_FLASHINFER_SAMPLER": "1"})
    path = solve(s, World([PAIR]))
    assert path[-1][1].status == "works" and len(path) <= 4
    final = path[-1][0]
    assert final.env_dict.get("VLLM_USE_FLASHINFER_SAMPLER") == "0" and final.flag_dict.get("--enforce-eager")
    # "failed alike" lowered each half but deleted neither: the pair kept its weight
    b = s.blockers[0]
    assert b.seen >= 2


def test_a_failure_that_stays_after_a_change_lowers_that_change_without_deleting_it() -> None:
    weights = {Condition("a", "1"): 1.0, Condition("b", "1"): 1.0}
    b = new_blocker("k", "x", 3, 1, "", weights, 0.03)
    single_a = b.p_avoid({"a": "0", "b": "1"})
    b.update({"a": "0", "b": "1"}, "fired")  # changed a: failed alike
    assert 0 < b.p_avoid({"a": "0", "b": "1"}) < single_a
    assert b.p_avoid({"a": "0", "b": "0"}) > 0.9  # changing both now most likely cures it


def test_another_failure_of_the_same_phase_witnesses_against_a_culprit_once() -> None:
    """Which of two failures of one phase strikes first is the engine's order: a second launch
    where the other failure struck first again, with the same culprit held, is no new witness.
    A different other failure is one."""
    weights = {Condition("a", "1"): 1.0, Condition("b", "1"): 1.0}
    b = new_blocker("k", "x", 3, 1, "", weights, 0.03)
    b.update({"a": "1", "b": "0"}, "same-phase", "hang")  # a held, b not: the hang struck first
    once = b.p_avoid({"a": "0", "b": "1"})  # the chance a is the culprit
    assert once < 0.5
    b.update({"a": "1", "b": "0"}, "same-phase", "hang")  # the same order again
    assert abs(b.p_avoid({"a": "0", "b": "1"}) - once) < 1e-9
    b.update({"a": "1", "b": "0"}, "same-phase", "refusal")  # another failure struck first: a witness
    assert b.p_avoid({"a": "0", "b": "1"}) < once - 0.05
    # with no key for the other failure (an old journal), every launch counts, as before
    c = new_blocker("k", "x", 3, 1, "", weights, 0.03)
    for _ in range(2):
        c.update({"a": "1", "b": "0"}, "same-phase")
    assert c.p_avoid({"a": "0", "b": "1"}) < once - 0.05


REMEDY = Fault(
    "remedy",
    lambda f, e: f.get("--compilation-config") is None and f.get("--max-num-seqs") != "16",
    "oom-graph-capture",
    "graph-capture",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 5.89 GiB",
    evidence=["Possible solutions: 1. set a lower batch limit by --max-num-seqs=16  2. disable CUDA graphs"],
)


def test_the_engines_printed_remedy_is_the_next_candidate() -> None:
    s = make("--max-model-len 2048")
    path = solve(s, World([REMEDY]))
    assert len(path) == 2 and path[1][0].flag_dict.get("--max-num-seqs") == "16"


HEAD = Fault(
    "head",
    lambda f, e: True,
    "unsupported-hardware",
    "first-request",
    "RuntimeError: Unsupported CPU attention configuration: head_dim=16",
    implicates=["model.head_dim"],
    signature="vllm-cpu-attention-unsupported",
)


def test_a_property_no_flag_changes_is_impossible_only_after_it_came_back_under_a_change() -> None:
    s = make("--max-model-len 2048")
    s.observe(s.baseline, HEAD.outcome())
    assert s.impossible() is None  # one observation proves nothing
    nxt = s.next_launch([], [], set()).candidate
    assert nxt is not None
    s.observe(nxt, HEAD.outcome())
    proof = s.impossible()
    assert proof is not None and "model.head_dim" in proof and "head_dim=16" in proof


def test_a_search_that_runs_out_says_not_found_with_its_leads_never_impossible() -> None:
    never = Fault("never", lambda f, e: True, "unknown", "load-weights", "RuntimeError: something broke")
    s = make("--max-model-len 2048")
    path = solve(s, World([never]), budget=3)
    assert len(path) == 3 and s.impossible() is None
    text = s.summary()
    assert "Most likely untried" in text and "%" in text


# Real vLLM 0.24.0 on a one-GPU H200 (tests/data/gpu/h200-2026-12-02-vllm): the error offers
# remedies for a multi-node setup, which the search once followed (Ray, not installed) before it
# dropped the parallel size the hardware facts already ruled out.
WORLD_SIZE = Fault(
    "world",
    lambda f, e: f.get("--tensor-parallel-size") not in (None, "1"),
    "unsupported-hardware",
    "parse-args",
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig",
    evidence=[
        "Value error, World size (8) is larger than the number of available GPUs (1) in this node. If this "
        "is intentional and you are using:",
        "- ray, set '--distributed-executor-backend ray'.",
        "- multiprocessing, set '--nnodes' appropriately.",
    ],
)


def test_a_parallel_size_over_the_machines_gpus_is_dropped_first_whatever_the_log_offers() -> None:
    s = make("--tensor-parallel-size 8")
    s.limit_gpus(["--tensor-parallel-size"], 1)
    tp = s.space.get("--tensor-parallel-size")
    assert tp is not None and s.risk(tp, "8") > 0.9 and s.risk(tp, None) < 0.1  # None: the engine default (1)
    # the baseline asks for 8 GPUs of 1: the first launch already leaves the parallel size out
    path = solve(s, World([WORLD_SIZE]))
    assert [o.status for _, o in path] == ["works"], [c.flag_dict for c, _ in path]
    assert path[0][0].flag_dict.get("--tensor-parallel-size") in (None, "1", 1)
    assert any("--tensor-parallel-size above 1 cannot be placed" in n for n in s.notes)


def test_without_the_hardware_fact_the_parallel_size_is_still_not_left_for_ray() -> None:
    # the same failure on a machine whose GPU count is unknown: the search must still get there
    s = make("--tensor-parallel-size 8")
    path = solve(s, World([WORLD_SIZE]))
    assert path[-1][1].status == "works" and len(path) <= 3, [c.flag_dict for c, _ in path]


def _plan_wrong_at_tp1(flag, level, others):
    """A memory plan that calls every one-GPU launch too big (as the plan once did for a T4's own
    default fraction, by a rounding): a prediction, wrong here."""
    from bringup.knowledge.rules import Verdict

    if flag == "--gpu-memory-utilization" and others.get("--tensor-parallel-size") in (None, "1"):
        return Verdict("incompatible", "memory plan: does not fit", "test", "memory-plan")
    return None


def test_a_rule_against_a_whole_candidate_lowers_it_and_never_bars_it() -> None:
    """The only way out (drop the parallel size) is one the plan calls incompatible with the rest:
    it is launched anyway once the likelier candidates are tried, and it works."""
    base = Candidate.make("vllm", "m", parse_flags("--tensor-parallel-size 8", VL), {})
    space = build_space("vllm", VL, base)
    drop_inapplicable(space, H200)
    add_baseline_flags(space, base, VL)
    s = Strategy(
        space, base, Knowledge(H200, "vllm", "0.32.0", rules=(), memory_model=_plan_wrong_at_tp1), VL
    )
    s.limit_gpus(["--tensor-parallel-size"], 1)
    drop = base.with_changes({"--tensor-parallel-size": None})
    assert 0.9 < s.combination_risk(drop) < 1.0 and s.combination_risk(base) == 0.0
    path = solve(s, World([TP]), budget=4)  # the failure names the parallel size
    assert path[-1][1].status == "works", [c.flag_dict for c, _ in path]
    assert path[-1][0].flag_dict.get("--tensor-parallel-size") in (None, "1")


SAMPLER = Fault(
    "sampler",
    lambda f, e: e.get("VLLM_USE_FLASHINFER_SAMPLER") != "0",
    "unsupported-hardware",
    "kv-alloc",
    "RuntimeError: TopKTopPSamplingFromProbs failed with error code no kernel image is available for execution "
    "on the device in flashinfer_sample (vllm/v1/sample/ops/topk_topp_sampler.py:301)",
)


def test_a_library_called_by_the_component_a_variable_switches_it_on_for_is_not_the_backends():
    """FlashInfer's JIT fails under vLLM's sampler (topk_topp_sampler.py): VLLM_USE_FLASHINFER_SAMPLER
    switches the library on in that component, so the flashinfer levels of the attention and GEMM
    backends, which no failing frame passes through, are not suspected together (they were, at a
    signature's first weight, and six launches went to them)."""
    jit = replace(NO_NVCC, failure_class="missing-dependency")  # as rootcause.yaml classes it
    s = make("--max-model-len 4096", env={"VLLM_USE_FLASHINFER_SAMPLER": "1"})
    kernels = [
        f.name
        for f in s.space.factors
        if f.kind == "choice" and any("flashinfer" in str(v).lower() for v in f.levels)
    ]
    assert "--attention-backend" in kernels, kernels
    s.observe(s.baseline, jit.outcome())
    blocker = s.blockers[-1]
    assert blocker.top(1)[0][0].conds[0].factor == "env:VLLM_USE_FLASHINFER_SAMPLER", blocker.top(4)
    assert all(blocker.mass_of(k) < 0.1 for k in kernels), [
        (k, round(blocker.mass_of(k), 3)) for k in kernels
    ]
    # the same library failing under the attention backend's own code is that backend's
    attn = replace(jit, frames=["vllm/v1/attention/backends/flashinfer.py:build", *jit.frames[2:]])
    t = make("--max-model-len 4096", env={"VLLM_USE_FLASHINFER_SAMPLER": "1"})
    t.observe(t.baseline, attn.outcome())
    assert t.blockers[-1].mass_of("--attention-backend") > 0.2, t.blockers[-1].top(4)


def test_a_variable_that_joined_for_an_earlier_failure_is_implicated_by_the_next_one() -> None:
    """Env factors join after each failure; one that joined early (for another failure) must carry
    the weight of a later failure that names it, or that failure's beliefs never look at it."""
    from bringup.env.registry import load_registry
    from bringup.search.envfactors import EnvFactors

    s = make("--max-model-len 999999")
    s.env = EnvFactors(load_registry("vllm", version="0.32.0", installed=False), device="cuda")
    s.observe(s.baseline, SAMPLER.outcome())
    assert "env:VLLM_USE_FLASHINFER_SAMPLER" in s.space.names
    weight = s.env_weight.get("env:VLLM_USE_FLASHINFER_SAMPLER")
    # a second, different failure, then the sampler failure again: the variable is in the space now
    s.observe(s.baseline.with_changes({"--max-model-len": "4096"}), LEN.outcome())
    s.observe(s.baseline.with_changes({"--max-model-len": None}), SAMPLER.outcome())
    assert s.env_weight.get("env:VLLM_USE_FLASHINFER_SAMPLER") == weight and weight
    blocker = next(b for b in s.blockers if "TopKTopP" in b.evidence)
    assert blocker.mass_of("env:VLLM_USE_FLASHINFER_SAMPLER") > 0.1, blocker.top(5)


HANG_AT_TP4 = Fault(
    "nccl-hang",
    lambda f, e: f.get("--tensor-parallel-size") == "4" and e.get("NCCL_P2P_DISABLE") != "1",
    "hang",
    "distributed-init",
    "RuntimeError: NCCL watchdog timeout in all_reduce (no progress for 600 s)",
)
WEIGHTS_ON_ONE_GPU = Fault(
    "weights",
    lambda f, e: f.get("--tensor-parallel-size") in (None, "1"),
    "oom-weights",
    "load-weights",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB",
    implicates=["--tensor-parallel-size", "--gpu-memory-utilization"],
)


def test_a_one_gpu_launch_says_nothing_about_what_only_acts_between_gpus() -> None:
    """A 70 B model hangs in NCCL at tp 4 and does not fit on one GPU. The tp 1 launch that runs out
    of memory did not hang, but it has no peer to talk to: NCCL_P2P_DISABLE stays a suspect of the
    hang, and the search finds tp 4 with P2P off instead of varying memory knobs at tp 1."""
    from bringup.search.beliefs import INERT

    s = make("--tensor-parallel-size 4", env={"NCCL_P2P_DISABLE": "0"})
    s.default_eff["env:NCCL_P2P_DISABLE"] = ("0", "NCCL's default: P2P on")
    s.limit_gpus(["--tensor-parallel-size"], 4)
    one = s.baseline.with_changes({"--tensor-parallel-size": None})
    assert s.levels_of(one)["env:NCCL_P2P_DISABLE"] == INERT
    assert s.levels_of(s.baseline)["env:NCCL_P2P_DISABLE"] != INERT
    path = solve(s, World([HANG_AT_TP4, WEIGHTS_ON_ONE_GPU]), budget=6)
    assert path[-1][1].status == "works" and len(path) <= 5, [(c.flag_dict, c.env_dict) for c, _ in path]
    assert path[-1][0].env_dict.get("NCCL_P2P_DISABLE") == "1"


def _wrong_answers(when, implicates: list[str]) -> Fault:
    """A wrong answer with no error line: what the probes saw, implicating what classes.yaml says."""
    return Fault(
        "wrong",
        when,
        "wrong-output",
        "decode",
        "probe known-answers: 'What is 2+2?' answered '!!!!!!!!'",
        implicates=implicates,
    )


def test_a_users_own_setting_among_the_suspects_of_a_wrong_answer_is_changed_first() -> None:
    """A failure that names nothing (wrong answers) implicates a long list of suspects (the class's,
    kernels first); among them the setting the user chose away from the engine's default (fp16 on a
    bf16 model) is the likeliest: the engine's defaults have run everywhere, the user's choice here
    nowhere. Without that prior the search swept the attention and KV-cache kernels first (5 more
    launches on the composed-fault benchmark's dev split)."""
    from bringup.core.datafiles import probe_implicates

    fp16 = _wrong_answers(lambda f, e: f.get("--dtype") == "float16", probe_implicates()["wrong-output"])
    s = make("--max-model-len 32768 --dtype float16")
    path = solve(s, World([fp16]))
    assert [o.status for _, o in path] == ["fails", "works"]
    assert path[-1][0].flag_dict.get("--dtype") != "float16"


def test_a_users_own_setting_outside_the_suspects_of_a_wrong_answer_is_undone_early() -> None:
    """The class's list of suspects for a wrong answer is what every wrong answer suspects (the
    answering path's kernels), not what this one names: leads, beside which the user's own settings
    stay the likelier culprits. The user's rotary-base override (a recipe for another model) is on
    no such list; read as a signature's suspects, the list had swept six kernels and variables
    before the override was undone (the composed-fault benchmark's dev6)."""
    from bringup.core.datafiles import probe_implicates

    rope = _wrong_answers(
        lambda f, e: f.get("--hf-overrides") is not None, probe_implicates()["wrong-output"]
    )
    s = make("""--max-model-len 4096 --hf-overrides '{"rope_theta": 10000}'""")
    path = solve(s, World([rope]))
    assert path[-1][1].status == "works" and len(path) <= 3, [c.flag_dict for c, _ in path]
    assert "--hf-overrides" not in path[-1][0].flag_dict


def test_a_hangs_phase_list_is_a_lead_and_a_signatures_suspects_are_not() -> None:
    """What the trial lists for every hang in a phase (classes.yaml hang_implicates) names nothing
    of this hang: leads; the same flags from a signature are named."""
    from bringup.core.datafiles import hang_implicates
    from bringup.observe.outcome import Outcome
    from bringup.search.evidence import generic_suspects, relevance

    s = make("--max-model-len 4096")
    listed = hang_implicates()["graph-capture"]
    hang = Outcome(status="timeout", failure_class="hang", phase="graph-capture", implicates=listed)
    assert generic_suspects(hang) == "hangs in graph-capture"
    levels = s.levels_of(s.baseline)
    named = relevance(hang, s.space.factors, levels, set(), s._flag_factor)
    assert named.weights and not named.strong(0.3)  # weighed, but none strong enough to name it
    sig = hang.model_copy(update={"signature": "cuda-graph-capture-hang"})
    assert generic_suspects(sig) is None
    assert relevance(sig, s.space.factors, levels, set(), s._flag_factor).strong(0.3)


def test_a_backend_a_failure_names_is_not_searched_for_a_component_the_model_lacks() -> None:
    """A wrong answer implicates the MoE backends among its suspects; on a dense model the engine
    ignores them (factors.yaml needs: model.moe), so the flag must not join the space from the log
    as it was left out of it at the start: each such launch fails as the one before."""
    from bringup.core.datafiles import probe_implicates

    suspects = probe_implicates()["wrong-output"]
    assert "--moe-backend" in suspects
    wrong = _wrong_answers(lambda f, e: f.get("--attention-backend") != "TRITON_ATTN", suspects)
    s = make("--max-model-len 32768")
    assert s.space.get("--moe-backend") is None  # left out at the start (dense model)
    path = solve(s, World([wrong]))
    assert path[-1][1].status == "works"
    assert s.space.get("--moe-backend") is None
    assert all("--moe-backend" not in c.flag_dict for c, _ in path)
    assert any("--moe-backend is named by the log but not searched" in n for n in s.notes)


def test_a_crash_that_names_nothing_is_attacked_through_the_settings_of_its_phase() -> None:
    """An assertion in graph capture whose words and frames name no setting, and that no signature
    or rule implicates anything for: the settings of the phase it struck in are its suspects
    (classes.yaml hang_implicates, the same list a hang there gets), not every factor alike."""
    capture = Fault(
        "capture",
        lambda f, e: not f.get("--enforce-eager"),
        "incompatible-options",
        "graph-capture",
        "AssertionError",
    )
    s = make("--max-model-len 4096")
    path = solve(s, World([capture]))
    assert path[-1][1].status == "works" and len(path) <= 3, [c.flag_dict for c, _ in path]
    assert path[-1][0].flag_dict.get("--enforce-eager") is True


def _plan_fraction_too_big_on_one_gpu(flag, level, others):
    """A memory plan that is right: 0.999 of one H200 cannot be had (the CUDA context and other
    processes hold more than 0.1 %), whatever fraction fits at tp 8 is moot there."""
    from bringup.knowledge.rules import Verdict

    if (
        flag == "--gpu-memory-utilization"
        and float(level) > 0.99
        and others.get("--tensor-parallel-size") in (None, "1")
    ):
        return Verdict(
            "incompatible", "memory plan: 0.999 of one GPU is more than is free", "test", "memory-plan"
        )
    return None


def test_the_factor_a_plan_ties_to_a_fix_is_changed_with_it() -> None:
    """Seen on the H200 with real vLLM 0.24.0: dropping tp 8 (the hardware facts say one GPU) made
    the memory plan call the baseline's 0.999 incompatible at tp 1, so the candidate that dropped tp
    scored below one that kept tp 8, and launch 1 failed on the world size the facts had predicted.
    The fraction the plan names must be changed together with the parallel size."""
    base = Candidate.make(
        "vllm", "m", parse_flags("--tensor-parallel-size 8 --gpu-memory-utilization 0.999", VL), {}
    )
    space = build_space("vllm", VL, base)
    drop_inapplicable(space, H200)
    add_baseline_flags(space, base, VL)
    kn = Knowledge(H200, "vllm", "0.32.0", rules=(), memory_model=_plan_fraction_too_big_on_one_gpu)
    s = Strategy(space, base, kn, VL)
    s.limit_gpus(["--tensor-parallel-size"], 1)
    first = s.next_launch([], [], set()).candidate
    assert first is not None
    assert first.flag_dict.get("--tensor-parallel-size") in (None, "1"), first.flag_dict
    assert float(first.flag_dict.get("--gpu-memory-utilization") or 0.9) < 0.99, first.flag_dict


NO_NVCC = Fault(
    "sampler-jit",
    lambda f, e: e.get("VLLM_USE_FLASHINFER_SAMPLER") != "0",
    "unknown",
    "kernel-warmup",
    "RuntimeError: Could not find nvcc and default cuda_home='/usr/local/cuda' doesn't exist in get_cuda_path "
    "(flashinfer/jit/cpp_ext.py:78)",
    frames=[
        "vllm/v1/worker/gpu_model_runner.py:_dummy_sampler_run",
        "vllm/v1/sample/ops/topk_topp_sampler.py:flashinfer_sample",
        "flashinfer/sampling.py:get_sampling_module",
        "flashinfer/jit/cpp_ext.py:get_cuda_path",
    ],
)


def test_the_code_a_failure_passed_through_names_the_setting_its_line_does_not() -> None:
    """A JIT build that cannot find nvcc, raised deep in FlashInfer: its line names only cuda_home,
    which no setting supplies; the frames it passed through (vLLM's top-k/top-p sampler calling
    FlashInfer's sampling module) name the variable that turns that path off."""
    from bringup.env.registry import load_registry
    from bringup.search.envfactors import EnvFactors

    s = make("--max-model-len 4096")
    s.env = EnvFactors(load_registry("vllm", version="0.32.0", installed=False), device="cuda")
    path = solve(s, World([NO_NVCC]), budget=6)
    assert path[-1][1].status == "works" and len(path) <= 3, [(c.flag_dict, c.env_dict) for c, _ in path]
    assert path[-1][0].env_dict.get("VLLM_USE_FLASHINFER_SAMPLER") == "0"


def test_a_number_the_engine_tells_to_decrease_is_not_raised() -> None:
    """No signature knows the words, but the engine says "Decrease GPU memory utilization": the
    fraction is a culprit at its value and above it (a larger one is no way around), so the next
    launch goes down, never up."""
    from bringup.observe.remedies import Remedy

    line = (
        "ValueError: Free memory on device cuda:0 (119.42/139.8 GiB) on startup is less than desired GPU "
        "memory utilization (0.92, 128.62 GiB). Decrease GPU memory utilization or reduce GPU memory used "
        "by other processes."
    )
    short = Fault(
        "free-memory",
        lambda f, e: float(f.get("--gpu-memory-utilization") or 0.92) > 0.86,
        "oom-kv-cache",
        "kv-alloc",
        line,
        remedies=[Remedy(flag="--gpu-memory-utilization", value=None, action="lower", line=line)],
    )
    s = make("--max-model-len 16384")
    s.default_eff["--gpu-memory-utilization"] = ("0.92", "the engine's --help default")
    path = solve(s, World([short]), budget=5)
    assert path[-1][1].status == "works", [c.flag_dict for c, _ in path]
    assert all(float(c.flag_dict.get("--gpu-memory-utilization") or 0.92) <= 0.92 for c, _ in path)


def test_a_free_share_read_once_below_every_level_leaves_the_search_something_to_launch() -> None:
    """The engine's message gives the free share of a device that others share (here 7 of 140
    GiB, read while another process held the rest): every fraction the space has is beyond it. That
    is one reading, not the engine refusing a level; before, the levels beyond it were certain
    failures and the search stopped with launches left. Here the memory is back by the next launch
    and a smaller fraction serves."""
    line = (
        "ValueError: Free memory on device cuda:0 (7.0/139.8 GiB) on startup is less than desired GPU "
        "memory utilization (0.92, 128.62 GiB). Decrease GPU memory utilization or reduce GPU memory used "
        "by other processes."
    )
    shared = Fault(
        "free-memory",
        lambda f, e: float(f.get("--gpu-memory-utilization") or 0.92) > 0.86,
        "oom-kv-cache",
        "kv-alloc",
        line,
        implicates=["--gpu-memory-utilization"],
        signature="vllm-cpu-memory-reservation",  # its bound: the free share, 7.0 / 139.8
    )
    s = make("--max-model-len 16384")
    s.default_eff["--gpu-memory-utilization"] = ("0.92", "the engine's --help default")
    path = solve(s, World([shared]), budget=6)
    assert any("must stay below 0.05" in n for n in s.notes)  # the reading is kept, as a strong belief
    assert path[-1][1].status == "works" and len(path) <= 3, [c.flag_dict for c, _ in path]


def test_a_switch_left_off_is_the_level_whose_code_failed() -> None:
    """The classifier says the failing code belongs to --enforce-eager's 'false' level (the compiled
    path); the baseline does not give the flag, so its level is the engine's default: that is the
    'false' level of a switch, and the next launch turns it on."""
    compile_fails = Fault(
        "inductor",
        lambda f, e: not f.get("--enforce-eager"),
        "missing-dependency",
        "kv-alloc",
        "InductorError: RuntimeError: Failed to find C compiler. Please specify via CC environment variable.",
    )
    world = World([compile_fails])
    s = make("--max-model-len 4096")
    first = world.answer(s.baseline)
    first.implicated_levels = {"--enforce-eager": ["false"]}
    s.observe(s.baseline, first)
    nxt = s.next_launch([], [], set()).candidate
    assert nxt is not None and nxt.flag_dict.get("--enforce-eager") is True, nxt.flag_dict


def test_the_machine_is_blamed_only_after_the_failure_came_back_without_the_users_settings() -> None:
    """However far the beliefs lean outside the space, "no launch flag changes it" is a proof only
    once the failure came back on a launch without any of the user's own settings: before that,
    the next launch is that one (the engine's defaults for every setting the user chose)."""
    s = make("--max-model-len 2048", env={"VLLM_CPU_KVCACHE_SPACE": "4"})
    base = s.baseline
    s.observe(base, HEAD.outcome())
    s.observe(base.with_changes({"--max-model-len": None}), HEAD.outcome())
    (b,) = s.blockers
    for c in b.post:  # beliefs that lean outside the space, as many same-failure launches make them
        b.post[c] = 0.95 if c.outside else 0.05 / (len(b.post) - 1)
    assert b.seen == 2 and b.outside_mass() >= 0.8
    assert s.impossible() is None  # the user's variable was never away
    d = s.next_launch([], [], set())
    assert (
        d.candidate is not None
        and d.candidate.env_dict == {}
        and "--max-model-len" not in d.candidate.flag_dict
    )
    assert "before blaming the model or the machine" in d.reasons[0]
    s.observe(d.candidate, HEAD.outcome())
    for c in b.post:
        b.post[c] = 0.95 if c.outside else 0.05 / (len(b.post) - 1)
    proof = s.impossible()
    assert proof is not None and "model.head_dim" in proof


def _plan_weights(flag, level, others):
    """A memory plan for a checkpoint that fits two GPUs only: at one GPU every fraction is refused
    (the weights), at two only fractions over 0.9 (start-up headroom), the engine's default among them."""
    from bringup.knowledge.rules import Verdict

    if flag != "--gpu-memory-utilization":
        return None
    if others.get("--tensor-parallel-size") in (None, "1"):
        return Verdict("incompatible", "memory plan: the weights do not fit", "test", "memory-plan")
    if float(level) > 0.9:
        return Verdict("incompatible", "memory plan: more than is free at start-up", "test", "memory-plan")
    return None


def test_a_parallel_size_no_memory_fraction_can_hold_is_a_risk_whatever_the_fraction() -> None:
    """The baseline's own (default) fraction is refused for start-up headroom, so dropping the
    parallel size does not change *that* level's verdict; but beside one GPU every fraction is
    refused, where beside two some fits: the drop is what the plan refuses (dev2's T4 pair, where
    the search dropped --tensor-parallel-size to escape a hang and ran out of memory loading the
    weights, launch after launch)."""
    base = Candidate.make("vllm", "m", parse_flags("--tensor-parallel-size 2", VL), {})
    space = build_space("vllm", VL, base)
    drop_inapplicable(space, H200)
    add_baseline_flags(space, base, VL)
    s = Strategy(space, base, Knowledge(H200, "vllm", "0.32.0", rules=(), memory_model=_plan_weights), VL)
    s.limit_gpus(["--tensor-parallel-size"], 2)
    frac = s.space.get("--gpu-memory-utilization")
    assert frac is not None and any(v.kind == "incompatible" for v in s.verdicts(frac, None))  # the default
    drop = base.with_changes({"--tensor-parallel-size": None})
    assert 0.9 < s.combination_risk(drop) < 1.0 and s.combination_risk(base) == 0.0
    # a fraction that fits beside two GPUs does not beside one: the old, per-level comparison
    lower = base.with_changes({"--gpu-memory-utilization": "0.8"})
    assert s.combination_risk(lower) == 0.0
    assert 0.9 < s.combination_risk(lower.with_changes({"--tensor-parallel-size": None})) < 1.0


def test_weights_larger_than_a_gpu_rule_out_the_splits_that_cannot_hold_them() -> None:
    """A machine-and-model fact, with no knowledge rule on: 200 GiB of weights (2 of them on every
    GPU) on 80 GiB GPUs need a tensor x pipeline split of 3 (2 holds 101 GiB a GPU, 3 holds 68).
    Dropping the parallel size (the engine's default, 1) is as good as incompatible; so is 2; 4 and
    8 are not. Another quantization is another size of weights: not ruled out."""
    s = make("--tensor-parallel-size 8")
    s.limit_gpus(["--tensor-parallel-size", "--pipeline-parallel-size"], 8)
    s.limit_weights(
        ["--tensor-parallel-size", "--pipeline-parallel-size"], ["--quantization"], 200.0, 2.0, 80.0
    )
    tp = s.space.get("--tensor-parallel-size")
    assert tp is not None and s.min_split == 3
    flags = s.baseline.flag_dict
    assert s.risk(tp, None, {}) > 0.9 and s.risk(tp, "2", {**flags, "--tensor-parallel-size": "2"}) > 0.9
    assert s.risk(tp, "4", {**flags, "--tensor-parallel-size": "4"}) < 0.5
    # a pipeline split of 2 beside tensor 2 holds them too
    assert s.risk(tp, "2", {"--tensor-parallel-size": "2", "--pipeline-parallel-size": "2"}) < 0.5
    assert s.risk(tp, None, {"--quantization": "fp8"}) < 0.5
    assert any("below 3 cannot load them" in n for n in s.notes)
    # weights that fit one GPU: nothing ruled out
    s2 = make("--tensor-parallel-size 8")
    s2.limit_weights(["--tensor-parallel-size"], ["--quantization"], 60.0, 1.0, 80.0)
    tp2 = s2.space.get("--tensor-parallel-size")
    assert tp2 is not None and s2.min_split == 0 and s2.risk(tp2, None, {}) < 0.5


NCCL_ON_ONE_GPU = Fault(
    "nccl-value",
    lambda f, e: e.get("NCCL_P2P_DISABLE") == "2",
    "distributed-init",
    "distributed-init",
    "RuntimeError: NCCL error: invalid argument (run with NCCL_DEBUG=INFO for details)",
    evidence=["NCCL WARN Invalid value 2 for NCCL_P2P_DISABLE, using default 0"],
)


def test_a_failure_that_names_an_nccl_variable_on_one_gpu_keeps_it_a_suspect() -> None:
    """The user's launch spans two GPUs on a one-GPU machine, so the search runs one GPU, where NCCL
    variables are inert by the prior (nothing talks to a peer); but the engine initialises its
    process group for one rank too, and this failure names the user's NCCL_P2P_DISABLE: the
    evidence overrules the prior, and the variable is what the next launch changes."""
    s = make("--tensor-parallel-size 2", env={"NCCL_P2P_DISABLE": "2"})
    s.limit_gpus(["--tensor-parallel-size"], 1)
    one = s.baseline.with_changes({"--tensor-parallel-size": None})
    assert s.levels_of(one).get("env:NCCL_P2P_DISABLE") == "<inert>"
    path = solve(s, World([NCCL_ON_ONE_GPU]), budget=4)
    assert path[-1][1].status == "works" and len(path) <= 2, [(c.flag_dict, c.env_dict) for c, _ in path]
    assert path[-1][0].env_dict.get("NCCL_P2P_DISABLE") != "2"
    assert "env:NCCL_P2P_DISABLE" in s.not_inert


def _no_kernel_in_kv_alloc(when) -> Fault:
    """A CUDA error with no flag in it, in the KV cache's allocation (the profiling pass that writes
    the cache), whose signature suspects the attention backends (as cuda-no-kernel-image does)."""
    return Fault(
        "no-kernel",
        when,
        "unsupported-hardware",
        "kv-alloc",
        "torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device",
        implicates=["--attention-backend"],
        signature="cuda-no-kernel-image",
    )


def test_a_users_setting_of_the_failing_phases_component_is_suspected_before_the_engines_variables() -> None:
    """The user's FP8 KV cache on a GPU without FP8 kernels: the CUDA error names no flag, its
    signature suspects the attention backends, and it struck while the KV cache was set up. A person
    asks which of their settings touch what failed; the user's --kv-cache-dtype names the KV cache,
    whose set-up the phase is (relevance.yaml `phases`), and their --max-model-len does not. Without
    that prior the search walked attention backends and the engine's variables first (the
    composed-fault benchmark's dev3: 5-6 launches for this one mistake)."""
    fp8 = _no_kernel_in_kv_alloc(lambda f, e: str(f.get("--kv-cache-dtype", "")).startswith("fp8"))
    s = make("--max-model-len 8192 --kv-cache-dtype fp8_e4m3")
    s.observe(s.baseline, fp8.outcome())
    top = {c.conds[0].factor for c, _ in s.blockers[-1].top(3) if len(c.conds) == 1}
    assert "--kv-cache-dtype" in top, s.blockers[-1].top(4)
    weights = {c.conds[0].factor: p for c, p in s.blockers[-1].post.items() if len(c.conds) == 1}
    assert weights["--kv-cache-dtype"] > 2 * weights.get("--max-model-len", 0.0)
    path = solve(make("--max-model-len 8192 --kv-cache-dtype fp8_e4m3"), World([fp8]))
    assert path[-1][1].status == "works" and len(path) <= 3, [c.flag_dict for c, _ in path]


def test_a_users_setting_of_the_hanging_phases_component_is_the_likelier_culprit() -> None:
    """A hang in the distributed start-up names nothing; the user's --nnodes 2 (brought from a
    two-node recipe) names the distributed start-up's component: likelier than their context
    length, and the first of the suspects, the phase's generic list (leads) included."""
    from bringup.core.datafiles import hang_implicates

    nodes = Fault(
        "nodes",
        lambda f, e: f.get("--nnodes") == "2",
        "hang",
        "distributed-init",
        "no output for 300 s after: Init torch distributed begin.",
        implicates=list(hang_implicates()["distributed-init"]),
    )
    s = make("--max-model-len 8192 --nnodes 2")
    s.observe(s.baseline, nodes.outcome())
    singles = {c.conds[0].factor: p for c, p in s.blockers[-1].post.items() if len(c.conds) == 1}
    assert max(singles, key=lambda k: singles[k]) == "--nnodes", sorted(
        singles.items(), key=lambda kv: -kv[1]
    )[:4]
    assert singles["--nnodes"] > 2 * singles["--max-model-len"]
    path = solve(make("--max-model-len 8192 --nnodes 2"), World([nodes]))
    assert [o.status for _, o in path] == ["fails", "works"], [c.flag_dict for c, _ in path]


def test_a_kernel_that_names_the_users_number_format_in_torchs_spelling_suspects_it() -> None:
    """Real SGLang 0.5.16 on a lent H100 (2026-12-07, tests/data/gpu/h100-2026-12-07c, the sixth
    three-mistake set): the user's `--dtype float32` on a model whose kernels are bf16/fp16 only. The
    CUDA-graph capture fails in sgl-kernel's rmsnorm with "failed to dispatch data type Float": the
    user's value in PyTorch's own spelling (c10's ScalarType name). Before, nothing linked it, and
    four launches went to the graph settings the engine's advice lists and to attention backends."""
    line = (
        "RuntimeError: rmsnorm(at::Tensor&, at::Tensor&, at::Tensor&, double, bool)::<lambda()> "
        "failed to dispatch data type Float"
    )
    fp32 = Fault("fp32", lambda f, e: f.get("--dtype") == "float32", "bad-value", "graph-capture", line)
    s = make("--max-model-len 4096 --dtype float32")
    s.observe(s.baseline, fp32.outcome())
    top = s.blockers[-1].top(1)[0][0]
    assert [c.factor for c in top.conds] == ["--dtype"], s.blockers[-1].top(3)
    path = solve(make("--max-model-len 4096 --dtype float32"), World([fp32]))
    assert path[-1][1].status == "works" and len(path) == 2, [c.flag_dict for c, _ in path]
    assert path[-1][0].flag_dict.get("--max-model-len") == "4096"  # the user's other setting kept
