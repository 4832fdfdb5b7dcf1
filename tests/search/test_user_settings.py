"""Issue 36: when a failure names no flag, the search suspects what the user changed.

Each test is one kind of evidence that links a failure to a setting beyond its flag's name
(bringup/observe/links.py, weighed in bringup/search/evidence.py): the value the user gave quoted
back, the config object that holds the setting, the module its value selects, the component it
configures, the kernel family a frame or a load line names, a component the model does not have,
and a person's prior (their own settings first). Each log below goes through the real classifier
(``explain_lines``), then the strategy, as a launch's would; each test fails with its kind undone.
"""

from __future__ import annotations

import bringup.observe.links as lk
from bringup.core.candidate import Candidate, parse_command
from bringup.engines.base import Engine
from bringup.engines.explain import explain_lines
from bringup.engines.targets import Target
from bringup.help.text import bundled_help
from bringup.knowledge.rules import Knowledge
from bringup.search.space import Factor, add_baseline_flags, build_space, drop_inapplicable
from bringup.search.strategy import Strategy
from bringup.session.prepare import search_space
from bringup.session.settings import RunSettings

SPEC = bundled_help("vllm", "0.32.0")
H200 = {
    "device": "cuda",
    "gpu.name": "NVIDIA H200",
    "gpu.compute_capability": 9.0,
    "gpu.count": 1,
    "gpu.memory_gib": 139.8,
    "model.moe": True,
    "model.attention": "gqa",
    "model.model_type": "qwen3_moe",
    "model.architecture": "Qwen3MoeForCausalLM",
    "model.quantization": "fp8",
}
P = "(EngineCore_DP0 pid=7) ERROR 12-04 10:00:00 [core.py:946] "


def strategy(
    baseline: str,
    facts: dict | None = None,
    engine: str = "vllm",
    spec=SPEC,
    version="0.32.0",
    knowledge: bool = False,
):
    facts = facts or H200
    flags, env = parse_command(baseline, spec)
    base = Candidate.make(engine, "m", flags, env)
    space = build_space(engine, spec, base)
    drop_inapplicable(space, facts)
    add_baseline_flags(space, base, spec)
    space.factors += [Factor("env:" + k, "env", [v], k, origin="baseline") for k, v in env.items()]
    s = Strategy(space, base, Knowledge(facts, engine, version, enabled=knowledge), spec)
    s.limit_gpus(["--tensor-parallel-size"], int(facts.get("gpu.count") or 1))
    return s


def traceback(*frames: tuple[str, str], exc: str, prefix: str = P) -> list[str]:
    lines = [prefix + "Traceback (most recent call last):"]
    for path, func in frames:
        lines += [
            f'{prefix}  File "/usr/local/lib/python3.12/dist-packages/{path}", line 10, in {func}',
            prefix + "    x()",
        ]
    return [*lines, prefix + exc]


def first_blocker(s: Strategy, lines: list[str]):
    o = explain_lines(lines, "vllm")
    s.observe(s.baseline, o)
    return o, s.blockers[-1]


def mass(b, factor: str) -> float:
    return b.mass_of(factor)


def avoid(s: Strategy, b, flag: str, level: str) -> float:
    """The chance a launch of the baseline with ``flag`` at ``level`` does not show blocker ``b``."""
    return b.p_avoid(s.levels_of(s.baseline.with_changes({flag: level})))


def top_factors(b, n: int = 1) -> list[str]:
    return [c.conds[0].factor for c, _ in b.top(n) if c.conds]


CORE = ("vllm/v1/engine/core.py", "__init__")


def test_a_value_the_user_gave_quoted_back_implicates_that_setting():
    # a number with its unit, of a variable: nothing names the variable, the value is the user's
    s = strategy("VLLM_CPU_KVCACHE_SPACE=400 --max-model-len 4096")
    lines = traceback(
        CORE,
        ("vllm/v1/worker/cpu_worker.py", "determine_available_memory"),
        exc="RuntimeError: Requested 400 GiB for the KV cache, but the host has only 23.4 GiB free.",
    )
    _, b = first_blocker(s, lines)
    assert top_factors(b) == ["env:VLLM_CPU_KVCACHE_SPACE"], b.top(3)
    assert s.propose().candidate.env_dict.get("VLLM_CPU_KVCACHE_SPACE") != "400"


def test_a_number_format_is_quoted_in_any_of_its_spellings_and_never_by_a_word_of_prose():
    """PyTorch's kernels name a dtype by c10's ScalarType name ("failed to dispatch data type Float",
    real SGLang 0.5.16 on an H100, tests/data/gpu/h100-2026-12-07c); a user writes float32 or fp32.
    The capitalised name is matched whole and case-sensitive: "float" in Python's own errors is prose."""
    fp32 = lk.Setting("--dtype", "float32", "dtype", None, True)
    half = lk.Setting("--dtype", "fp16", "dtype", None, True)
    dispatch = "RuntimeError: rmsnorm(...)::<lambda()> failed to dispatch data type Float"
    assert lk.value_link(fp32, [dispatch]) is not None
    assert lk.value_link(half, ["RuntimeError: expected scalar type Float but found Half"]) is not None
    assert lk.value_link(half, ["weights cast to torch.float16"]) is not None
    assert lk.value_link(fp32, ["ValueError: could not convert string to float: 'x'"]) is None
    assert lk.value_link(fp32, ["FloatingPointError: overflow", "a Floaty name", "Float8 GEMM"]) is None
    assert lk.value_link(half, [dispatch]) is None
    assert (
        lk.value_link(lk.Setting("--kv-cache-dtype", "fp8", "kv_cache_dtype", None, True), [dispatch]) is None
    )


def test_the_config_object_an_error_names_implicates_the_setting_it_holds():
    # pydantic names the object (KVTransferConfig); the user's --kv-transfer-config is that object,
    # their --max-num-seqs is not
    s = strategy(
        """--kv-transfer-config '{"kv_connector": "SharedStorageConnector", "kv_role": "kv_both"}' --max-num-seqs 7"""
    )
    lines = [
        "(APIServer pid=1) pydantic_core._pydantic_core.ValidationError: 1 validation error for KVTransferConfig",
        "(APIServer pid=1)   Value error, this connector needs a storage path [type=value_error, input_value=ArgsKwargs(()), input_type=ArgsKwargs]",
    ]
    _, b = first_blocker(s, lines)
    assert mass(b, "--kv-transfer-config") > 2 * mass(b, "--max-num-seqs"), b.top(3)
    assert "--kv-transfer-config" not in s.propose().candidate.flag_dict


def test_a_failure_in_the_module_the_users_value_selects_implicates_that_setting():
    s = strategy("--load-format gguf --max-model-len 4096")
    lines = [
        "(APIServer pid=1) INFO 12-04 10:00:00 [utils.py:1] non-default args: {'load_format': 'gguf', 'max_model_len': 4096}"
    ]
    lines += traceback(
        CORE,
        ("vllm/model_executor/model_loader/gguf_loader.py", "load_model"),
        exc="KeyError: 'general.architecture'",
    )
    o, b = first_blocker(s, lines)
    assert o.failure_class == "bad-flag"  # classed by where it raised: the module the user chose
    assert top_factors(b) == ["--load-format"], b.top(3)
    assert s.propose().candidate.flag_dict.get("--load-format") != "gguf"


def test_a_hang_logged_in_the_module_the_users_value_selects_implicates_that_setting():
    """No traceback: vLLM waits for a Ray placement group and logs from ray_utils.py until the
    trial's deadline. The place of the records is the module the user's ``ray`` selects; the
    logger's place of a hang in the process group's start-up (parallel_state.py) links nothing."""
    from bringup.observe.outcome import Outcome

    facts = {**H200, "gpu.count": 2}
    s = strategy("--distributed-executor-backend ray --tensor-parallel-size 2 --max-model-len 4096", facts)
    wait = "Waiting for creating a placement group of specs for 30 seconds. Check `ray status`."
    lines = [
        "(EngineCore_DP0 pid=7) WARNING 12-04 10:00:00 [ray_utils.py:315] The number of required GPUs "
        "exceeds the total number of available GPUs in the placement group.",
        f"(EngineCore_DP0 pid=7) INFO 12-04 10:00:30 [ray_utils.py:212] {wait}",
    ]
    assert lk.logged_places(lines, "vllm") == ["vllm/ray_utils.py"]
    hang = Outcome(status="timeout", failure_class="hang", phase="distributed-init", evidence=lines)
    s.observe(s.baseline, hang)
    b = s.blockers[-1]
    assert top_factors(b) == ["--distributed-executor-backend"], b.top(3)
    assert mass(b, "--distributed-executor-backend") > 2 * mass(b, "--max-model-len")
    # a hang whose records come from the collectives' start-up: nothing of the user's is named by place
    stuck = [
        "(Worker_TP0 pid=8) INFO 12-04 10:00:00 [parallel_state.py:1208] rank 0 in world size 2 is "
        "assigned as DP rank 0, PP rank 0, TP rank 0"
    ]
    setting = lk.Setting("--tensor-parallel-size", "2", "tensor_parallel_size", "ParallelConfig", True)
    assert not lk.links(stuck, [], [setting], "vllm", lk.logged_places(stuck, "vllm"))


def test_a_failure_in_the_component_a_setting_configures_implicates_it():
    # the tokenizer's own code failed: the user's tokenizer mode is the setting of that component,
    # their --max-num-seqs is not
    s = strategy("--tokenizer-mode slow --max-num-seqs 7")
    lines = traceback(
        CORE,
        ("vllm/tokenizers/registry.py", "get_tokenizer"),
        ("vllm/tokenizers/hf.py", "from_pretrained"),
        exc="TypeError: expected str, bytes or os.PathLike object, not NoneType",
    )
    _, b = first_blocker(s, lines)
    assert mass(b, "--tokenizer-mode") > 2 * mass(b, "--max-num-seqs"), b.top(3)


def test_the_function_a_failing_frame_is_in_names_the_component_where_its_file_does_not():
    # a CUDA out-of-memory raised in the model runner (a file every failure passes through) while
    # it allocates the KV cache: the user's block-count override is a cache setting, their
    # --max-num-seqs is not, and the allocator's advice names neither
    s = strategy("--num-gpu-blocks-override 120000 --max-num-seqs 7")
    lines = traceback(
        CORE,
        ("vllm/v1/worker/gpu_model_runner.py", "initialize_kv_cache"),
        ("vllm/v1/worker/gpu_model_runner.py", "_allocate_kv_cache_tensors"),
        exc="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.32 GiB. GPU 0 has a total "
        "capacity of 139.80 GiB of which 4.21 GiB is free. If reserved but unallocated memory is large try "
        "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
    )
    _, b = first_blocker(s, lines)
    # (both are suspects of an out-of-memory, which every setting draws on: relevance.yaml
    # `shared`; the frame's component puts the cache setting first. It was 2x before that rule.)
    assert mass(b, "--num-gpu-blocks-override") > 1.5 * mass(b, "--max-num-seqs"), b.top(3)
    assert "--num-gpu-blocks-override" not in s.propose().candidate.flag_dict


def test_the_failures_words_name_what_one_of_the_users_settings_is_about():
    # no line spells a flag, no frame is in the setting's component: the message's own word
    # ("expert") is what the user's --enable-expert-parallel is about, and theirs alone
    lines = [P + "RuntimeError: the expert weights cannot be split over 1 rank (all2all manager)"]
    s = strategy("--enable-expert-parallel --max-num-seqs 7")
    _, b = first_blocker(s, lines)
    assert mass(b, "--enable-expert-parallel") > 2 * mass(b, "--max-num-seqs"), b.top(3)
    # a word two of the user's settings share picks neither of them out
    s2 = strategy("--enable-expert-parallel --expert-placement-strategy round_robin --max-num-seqs 7")
    _, b2 = first_blocker(s2, lines)
    assert mass(b2, "--enable-expert-parallel") < 2 * mass(b2, "--max-num-seqs"), b2.top(3)
    # the logger's place in front of a message is not the message: "[expert_parallel.py:12]"
    # says where the line was logged, not what failed
    mine = [lk.Setting("--enable-expert-parallel", "true", "enable_expert_parallel", "ParallelConfig", True)]
    said = "12-04 10:00:00 [expert_parallel.py:12] rank 0 in world size 2 is assigned as EP rank 0"
    assert lk.subject_links(["(EngineCore_DP0 pid=7) INFO " + said], mine) == []
    assert [x.name for x in lk.subject_links([P + "the expert weights cannot be split"], mine)] == [
        "--enable-expert-parallel"
    ]


def test_a_piece_of_a_code_name_is_not_what_the_failure_is_about():
    # real SGLang 0.5.16 for the user's --device npu (tests/data/gpu/h100-2026-12-07f): "torch" of
    # the module's name is the code's word, which every torch error carries (torch.OutOfMemoryError,
    # torch._inductor); the user's TORCH_CUDA_ARCH_LIST is about torch only in its name's words
    arch = lk.Setting("env:TORCH_CUDA_ARCH_LIST", "9.0a", "TORCH_CUDA_ARCH_LIST", None, True)
    for line in [
        "ModuleNotFoundError: No module named 'torch_npu'",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.25 GiB.",
        "torch._inductor.exc.InductorError: RuntimeError: Failed to run autotuning code block",
        # real vLLM 0.24.0's OOM (h100-2026-12-07e): "PyTorch" is a name, not "py" and "torch"
        "GPU 0 has a total capacity of 79.18 GiB of which 7.35 GiB is free. Including non-PyTorch memory",
    ]:
        assert lk.subject_links([line], [arch]) == [], line
    # the same word in the failure's prose is what it is about
    assert [x.name for x in lk.subject_links(["RuntimeError: torch was built without NCCL."], [arch])] == [
        "env:TORCH_CUDA_ARCH_LIST"
    ]
    assert lk.prose_words("CUDA out of memory. Tried") == ["cuda", "out", "of", "memory", "tried"]


def test_a_word_in_another_form_still_names_what_the_users_setting_is_about():
    # "queue" / "queued", "sampled" / "sampling", "quantized" / "quantization": the forms of one
    # word meet; "process" / "processes" and "class" / "classes" too, and no word meets another
    # that only starts like it ("general" is not "generation")
    for a, b in [
        ("queue", "queued"),
        ("sampled", "sampling"),
        ("quantized", "quantization"),
        ("allocated", "allocator"),
        ("padding", "pad"),
        ("process", "processes"),
        ("class", "classes"),
        ("compiled", "compilation"),
    ]:
        assert lk.stem(a) == lk.stem(b), (a, b)
    assert lk.stem("general") != lk.stem("generation")
    assert lk.stem("fill") == "fill" and lk.stem("pass") == "pass"
    queue = lk.Setting("--max-queued-requests", "0", "max_queued_requests", None, True)
    seqs = lk.Setting("--max-num-seqs", "7", "max_num_seqs", None, True)
    said = ["[2026-12-06 18:01:02] The request queue is full."]
    assert [x.name for x in lk.subject_links(said, [queue, seqs])] == ["--max-queued-requests"]
    sharded = lk.Setting(
        "--enable-batch-sharded-sampling", "true", "enable_batch_sharded_sampling", None, True
    )
    assert [x.name for x in lk.subject_links(["probe sampled disagrees"], [sharded, seqs])] == [
        "--enable-batch-sharded-sampling"
    ]


def test_a_kernel_family_a_frame_and_a_load_line_name_is_left_as_a_whole():
    # the engine chose CUTLASS for the FP8 linear layers (its load line says so) and CUTLASS's code
    # failed: every linear backend of that family (cutlass, flashinfer_cutlass) is as suspect as the
    # engine's own choice, and the ones outside it (triton) are the way out
    s = strategy("--max-model-len 4096")
    lines = [P.replace("ERROR", "INFO") + "Selected CutlassFP8ScaledMMLinearKernel for Fp8LinearMethod"]
    lines += traceback(
        CORE,
        ("vllm/model_executor/layers/quantization/fp8.py", "apply"),
        ("vllm/model_executor/layers/quantization/kernels/scaled_mm/cutlass.py", "apply_weights"),
        exc="RuntimeError: Error Internal",
    )
    _, b = first_blocker(s, lines)
    triton, fi_cutlass, cutlass = (
        avoid(s, b, "--linear-backend", lv) for lv in ("triton", "flashinfer_cutlass", "cutlass")
    )
    assert triton > 2 * fi_cutlass and triton > 2 * cutlass
    # it names the linear layers' kernel: the MoE backend's cutlass level is no suspect for it
    assert triton > 0.5


def test_a_kernel_library_failure_suspects_the_backend_the_engine_chose_whatever_else_a_line_selects():
    # flashinfer's JIT fails inside the sampler while the engine sizes its memory; the attention
    # backend was left to the engine, which may have chosen flashinfer too. A selection line about
    # another component (the all-reduce backends) must not narrow the suspects to the settings its
    # words are about: it once left the attention backend out, and the search spent its launches on
    # the user's two settings and on variables (dev2, 12 launches; 10 with this)
    dense = {
        **H200,
        "model.moe": False,
        "model.quantization": None,
        "model.architecture": "LlamaForCausalLM",
        "model.model_type": "llama",
        "gpu.count": 2,
    }
    s = strategy("--tensor-parallel-size 2 --max-model-len 8192", dense)
    lines = [
        "(Worker_TP0 pid=8) INFO 12-05 18:20:37 [cuda_communicator.py:264] Using ['SYMM_MEM', 'PYNCCL'] all-reduce backends"
    ]
    lines += traceback(
        ("vllm/v1/worker/gpu_worker.py", "determine_available_memory"),
        ("vllm/v1/sample/ops/topk_topp_sampler.py", "flashinfer_sample"),
        ("flashinfer/jit/core.py", "build_and_load"),
        ("flashinfer/jit/cpp_ext.py", "get_cuda_path"),
        exc="RuntimeError: Could not find nvcc and default cuda_home='/usr/local/cuda' doesn't exist",
    )
    _, b = first_blocker(s, lines)
    assert mass(b, "--attention-backend") > 0.25, b.top(4)
    assert avoid(s, b, "--attention-backend", "TRITON_ATTN") > 10 * avoid(
        s, b, "--attention-backend", "FLASHINFER"
    )


def test_a_backend_for_a_component_the_model_lacks_is_undone_never_varied():
    # an FP8 GEMM backend on an unquantized (bf16) model: SGLang's selector never runs it
    spec = bundled_help("sglang", "0.5.23")
    bf16 = {**H200, "model.quantization": None, "model.moe": False, "model.architecture": "LlamaForCausalLM"}
    s = strategy("--fp8-gemm-backend cutlass --context-length 4096", bf16, "sglang", spec, "0.5.23")
    f = s.space.get("--fp8-gemm-backend")
    assert f is not None and f.levels == ["cutlass"]  # the user's value, and unset: nothing else


def test_when_nothing_is_named_the_users_own_settings_are_the_first_suspects():
    # a crash whose lines and frames name no setting: the user's two settings lead, ahead of
    # every setting the user never touched
    s = strategy("--max-num-seqs 7 --block-size 64")
    lines = traceback(
        CORE, ("vllm/v1/core/sched/utils.py", "check_stop"), exc="IndexError: list index out of range"
    )
    _, b = first_blocker(s, lines)
    assert set(top_factors(b, 2)) == {"--max-num-seqs", "--block-size"}, b.top(4)


def test_the_changes_of_a_launch_that_got_further_are_kept():
    """The real three-mistake bring-up (tests/session/test_multifault_user_settings.py): the second
    launch dropped two of the user's settings and got from parse-args to kv-alloc. Only one of
    the two was a suspect of the first failure; the next launch must not put the other back (it
    did, and met the failure it had hidden: the run ended unvalidated in 4)."""
    s = strategy(
        """--hf-overrides '{"architectures": ["NoSuchForCausalLM"]}' --worker-cls uc_nosuch.Worker """
        "--num-gpu-blocks-override 1 --gpu-memory-utilization 0.3"
    )
    first = [
        "(APIServer pid=1) pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
        "(APIServer pid=1)   Value error, Model architectures ['NoSuchForCausalLM'] are not supported for now. "
        "[type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]",
    ]
    s.observe(s.baseline, explain_lines(first, "vllm"))
    second = s.baseline.with_changes({"--hf-overrides": None, "--worker-cls": None})
    kv = traceback(
        CORE,
        ("vllm/v1/core/kv_cache_utils.py", "check_enough_kv_cache_memory"),
        exc="ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
        "when initializing the engine.",
    )
    s.observe(second, explain_lines(kv, "vllm"))
    nxt = s.propose().candidate.flag_dict
    assert "--hf-overrides" not in nxt and "--worker-cls" not in nxt, nxt


def test_every_variable_the_user_sets_is_a_factor_whoever_reads_it_and_no_secret_is():
    """Issue 36: a variable of the user's that neither the engine's registry nor the common list
    knows (NCCL_NET, read by NCCL) is a suspect the search can drop; before, it was left out of the
    space, and a run whose fault it was could not undo it. A secret is never a level."""
    t = Target(Engine(name="vllm"), "m", SPEC, "0.32.0")
    baseline = Candidate.make("vllm", "m", {"--max-num-seqs": "8"}, {"NCCL_NET": "IB", "HF_TOKEN": "hf_x"})
    reg = t.engine.env_registry("0.32.0")
    assert reg.status("NCCL_NET") == "foreign"
    space, _, _ = search_space(RunSettings(engine="vllm", model="m"), t, baseline, {"device": "cuda"}, reg)
    f = space.get("env:NCCL_NET")
    assert f is not None and f.levels == ["IB"]  # the user's own value; unset is every factor's level
    assert space.get("env:HF_TOKEN") is None


def test_a_word_lead_never_overrules_a_signature_that_blames_the_model():
    # vLLM CPU refuses head size 16 on the first request (signature vllm-cpu-unsupported-attention:
    # no flag changes the CPU kernel). The real line's "kv_cache_idx" is a code name, not the
    # failure's words: its "cache" is no lead (CI, stop 43: that lead alone turned "impossible" into
    # a spent budget)
    cpu = {"device": "cpu", "gpu.count": 0, "model.attention": "mha", "model.head_dim": 16}
    real = [
        "(Worker pid=7) ERROR 12-05 14:15:10 [multiproc_executor.py:1063] RuntimeError: Unsupported CPU "
        "attention configuration: head_dim=16 isa=2 kv_cache_idx=0"
    ]
    s = strategy("--gpu-memory-utilization 0.4", cpu, knowledge=True)
    assert lk.subject_links(real, s._settings(s.baseline, s.levels_of(s.baseline))) == []
    # the same refusal in words that say "cache" (the subject of the user's
    # --gpu-memory-utilization, CacheConfig): a lead, so that setting is a suspect, but the model
    # stays the likeliest cause
    s = strategy("--gpu-memory-utilization 0.4", cpu, knowledge=True)
    lines = [
        "(Worker pid=7) ERROR 12-05 14:15:10 [multiproc_executor.py:1063] RuntimeError: Unsupported CPU "
        "attention configuration: head_dim=16 isa=2 for this cache layout"
    ]
    o, b = first_blocker(s, lines)
    assert o.signature == "vllm-cpu-unsupported-attention"
    links = lk.subject_links(lines, s._settings(s.baseline, s.levels_of(s.baseline)))
    assert [x.name for x in links] == ["--gpu-memory-utilization"]  # the lead is there...
    assert b.outside_mass() > 0.3, b.top(3)  # ...and stays one: the model keeps its share
    # the lead followed (the next launch moves the fraction) and the same refusal: the model it is
    nxt = s.propose().candidate
    assert nxt.flag_dict.get("--gpu-memory-utilization") != "0.4"
    s.observe(nxt, explain_lines(lines, "vllm"))
    assert s.blockers[-1].outside_mass() > 0.7, s.blockers[-1].top(3)


def test_a_variable_the_user_set_to_the_registry_default_can_still_be_undone():
    """The user's VLLM_WORKER_MULTIPROC_METHOD=fork is the registry's default, yet as given and
    unset are two levels: the registry is a snapshot (the installed version's default may differ),
    and code that asks whether a variable is set reads them apart. Before, unset was the same
    configuration as the baseline, so a failure that was the variable's could never drop it. A
    variable the user did not set is still its default when the search sets that value."""
    t = Target(Engine(name="vllm"), "m", SPEC, "0.32.0")
    reg = t.engine.env_registry("0.32.0")
    baseline = Candidate.make("vllm", "m", {"--max-num-seqs": "8"}, {"VLLM_WORKER_MULTIPROC_METHOD": "fork"})
    space, env, _ = search_space(RunSettings(engine="vllm", model="m"), t, baseline, {"device": "cuda"}, reg)
    assert env is not None and env.default("VLLM_WORKER_MULTIPROC_METHOD") == "fork"
    s = Strategy(
        space, baseline, Knowledge({"device": "cuda"}, "vllm", "0.32.0", enabled=False), SPEC, env=env
    )
    dropped = Candidate.make("vllm", "m", {"--max-num-seqs": "8"}, {})
    assert s.predicted_key(dropped) != s.predicted_key(baseline)
    # a failure that names nothing: undoing the user's variable is a way out the search weighs
    lines = [P + "RuntimeError: Cannot re-initialize CUDA in forked subprocess."]
    s.observe(baseline, explain_lines(lines, "vllm"))
    assert s.blockers[-1].p_avoid(s.levels_of(dropped)) > 0.02, s.blockers[-1].top(5)
    # a variable the user never set: the registry's default is what unset means
    space2, _, _ = search_space(RunSettings(engine="vllm", model="m"), t, dropped, {"device": "cuda"}, reg)
    s2 = Strategy(
        space2, dropped, Knowledge({"device": "cuda"}, "vllm", "0.32.0", enabled=False), SPEC, env=env
    )
    s2.add_factor(
        Factor("env:VLLM_WORKER_MULTIPROC_METHOD", "env", ["fork", "spawn"], "VLLM_WORKER_MULTIPROC_METHOD")
    )
    assert s2.predicted_key(baseline) == s2.predicted_key(dropped)  # setting fork = leaving it


def test_a_port_a_setting_gives_taken_is_that_settings_failure_not_the_machines():
    # torch's TCPStore cannot bind the master port the user's --dist-init-addr gives: not the
    # server's own port (bringup's pick, a race it relaunches elsewhere), so the search learns from
    # it and suspects the setting whose value holds that port. Once, every such failure was ignored
    # as the machine's and the same launch was made again until the budget was spent.
    spec = bundled_help("sglang", "0.5.23")
    s = strategy(
        "--dist-init-addr 127.0.0.1:29500 --context-length 4096", engine="sglang", spec=spec, version="0.5.23"
    )
    lines = [
        "[2026-12-05 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/distributed/parallel_state.py", line 10, in init_distributed_environment',
        "    x()",
        "RuntimeError: The server socket has failed to listen on any local network address. "
        "port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use",
    ]
    o = explain_lines(lines, "sglang").model_copy(update={"argv": ["sglang", "--port", "30000"]})
    assert o.failure_class == "port-in-use"
    s.observe(s.baseline, o)
    assert len(s.blockers) == 1, "a setting's port taken is evidence, not the machine's race"
    assert top_factors(s.blockers[0], 1) == ["--dist-init-addr"], s.blockers[0].top(3)
    # the signature implicates --port, bringup's own pick for every launch: never a factor
    assert s.space.get("--port") is None
    # the server's own port taken: nothing learned (the executor launches it again elsewhere)
    own = o.model_copy(update={"argv": ["sglang", "--port", "29500"]})
    s2 = strategy(
        "--dist-init-addr 127.0.0.1:29500 --context-length 4096", engine="sglang", spec=spec, version="0.5.23"
    )
    s2.observe(s2.baseline, own)
    assert s2.blockers == []


def test_an_out_of_memory_suspects_the_users_own_settings_beside_the_fraction_it_advises():
    # SGLang's "Not enough memory" advises the static fraction and names nothing that ate the
    # memory; the user's adapter pool (512 adapters a batch) did. Memory is drawn on by every
    # setting (relevance.yaml `shared`), so the user's own stay suspects as if nothing were named
    # (the engine's advice says what to move, not what ate it), and once the advised fraction has
    # failed alike, a next launch undoes theirs. On the dev5 composed faults the search raised the
    # fraction, dropped the context and set variables for up to ten launches.
    spec = bundled_help("sglang", "0.5.23")
    s = strategy(
        "--enable-lora --max-lora-rank 64 --max-loras-per-batch 512",
        engine="sglang",
        spec=spec,
        version="0.5.23",
    )
    lines = [
        "[2026-12-05 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/model_runner.py", line 10, in init_memory_pool',
        "    raise RuntimeError(",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    ]
    o = explain_lines(lines, "sglang")
    assert o.failure_class == "oom-kv-cache"
    s.observe(s.baseline, o)
    b = s.blockers[-1]
    # ahead of the context length, which the signature lists but the user never set (it was the
    # other way round: 0.013 against 0.039)
    assert mass(b, "--max-loras-per-batch") > 1.5 * mass(b, "--context-length") > 0, b.top(6)
    mine = {"--enable-lora", "--max-lora-rank", "--max-loras-per-batch"}
    nxt = s.propose().candidate
    if mine <= set(nxt.flag_dict):  # the advised fraction first: it fails alike
        s.observe(nxt, o)
        nxt = s.propose().candidate
    assert not mine <= set(nxt.flag_dict), nxt.flag_dict


def test_a_selection_line_names_no_family_for_a_failure_in_another_component():
    # the real H100 run of 2026-12-06 (tests/data/gpu/h100-2026-12-06, vllm-usermistakes2, launch 3):
    # --enable-return-routed-experts on a dense model fails in the MoE routing capturer; vLLM had
    # printed "Using FLASH_ATTN attention backend" as every launch does, and that line made the
    # flash family of --attention-backend 36% of the blame: the working launch changed the attention
    # backend for nothing
    dense = {**H200, "model.moe": False, "model.quantization": None, "model.architecture": "LlamaForCausalLM"}
    s = strategy("--enable-return-routed-experts --max-num-seqs 7", dense)
    lines = [
        "(EngineCore pid=1601) INFO 12-06 04:57:08 [cuda.py:480] Using FLASH_ATTN attention backend out of "
        "potential backends: ['FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION']."
    ]
    lines += traceback(
        CORE,
        ("vllm/v1/worker/gpu_model_runner.py", "init_routed_experts_capturer"),
        ("vllm/model_executor/layers/fused_moe/routed_experts_capturer.py", "_get_num_experts_per_tok"),
        exc="ValueError: Cannot determine num_experts_per_tok: HF config has neither 'num_experts_per_tok' "
        "nor 'top_k'",
    )
    _, b = first_blocker(s, lines)
    assert mass(b, "--attention-backend") < 0.1, b.top(4)
    assert mass(b, "--enable-return-routed-experts") > 0.4, b.top(4)


def test_an_allocation_is_a_count_the_user_gave_times_a_width_of_the_model():
    # real vLLM 0.24.0's profile run (tests/data/gpu/h100-2026-12-07e): 2M tokens x hidden 4096 x bf16
    widths = lk.model_widths(
        {"model.hidden_size": 4096, "model.intermediate_size": 14336, "model.vocab_size": 128256,
         "model.heads": 32, "model.kv_heads": 8, "model.head_dim": 128, "model.moe": False}
    )  # fmt: skip
    assert widths["fused gate and up width"] == 28672 and widths["fused query, key and value width"] == 6144
    oom = "CUDA out of memory. Tried to allocate 16.00 GiB. GPU 0 has a total capacity of 79.18 GiB"
    why = lk.allocation_sized_by([oom], "2M", widths)
    assert why is not None and "2097152 x the model's hidden size 4096 x 2 bytes" in why
    assert lk.counts("2M") == [2000000, 2097152] and lk.counts("8192") == [8192] and lk.counts("0.9") == []
    # the logits of 8192 positions in float32: 8192 x 128256 x 4 bytes = 3.91 GiB
    assert lk.allocation_sized_by(["Tried to allocate 3.91 GiB"], "8192", widths)
    # a size off by more than its printed precision, the machine's capacity, a small allocation: none
    assert lk.allocation_sized_by(["Tried to allocate 16.02 GiB"], "2M", widths) is None
    assert lk.allocation_sized_by(["a total capacity of 16.00 GiB"], "2M", widths) is None
    assert lk.allocation_sized_by(["Tried to allocate 32.00 MiB"], "2048", widths) is None
    assert lk.allocation_sized_by([oom], "2M", {}) is None


def test_a_module_that_does_not_import_is_named_for_the_users_value():
    # real SGLang 0.5.16 with the user's --device npu (tests/data/gpu/h100-2026-12-07f)
    npu = "ModuleNotFoundError: No module named 'torch_npu'"
    assert lk.missing_module_named_for([npu], "npu") == npu
    assert lk.missing_module_named_for(["No module named 'bitsandbytes'"], "bitsandbytes")
    assert lk.missing_module_named_for(
        ["No module named 'vllm.model_executor.layers.quantization.gguf'"], "gguf"
    )
    # the host package, a plain value, a piece of a word, a value with a dot: none
    assert lk.missing_module_named_for([npu], "torch") is None
    assert lk.missing_module_named_for(["No module named 'torch_cuda'"], "cuda") is None
    assert lk.missing_module_named_for(["No module named 'torch_npux'"], "npu") is None
    assert lk.missing_module_named_for([npu], "9.0a") is None
    link = lk.value_link(lk.Setting("--device", "npu", "device", None, True), [npu])
    assert link is not None and link.kind == "value"


def test_a_size_the_user_gave_is_quoted_in_the_engines_own_unit():
    # a device limit of 24G (CUDA's MPS variable, read by the driver, named by no engine line);
    # torch's out-of-memory states the capacity the limit left, in its own unit and precision
    assert lk.quoted_size(["a total capacity of 24.00 GiB of which 312.00 MiB is free"], "0=24G")
    assert lk.quoted_size(["reserved 150.0 GiB memory for KV Cache"], "161061273600", "kv_cache_memory_bytes")
    assert lk.quoted_size(["Tried to allocate 20.00 MiB"], "0=24G") is None
    assert lk.sizes("8") == lk.sizes("true") == []  # a bare number is a size only by its destination
    s = strategy("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=24G --max-model-len 8192 --max-num-seqs 512")
    lines = traceback(
        CORE,
        ("vllm/model_executor/model_loader/default_loader.py", "load_weights"),
        exc="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. GPU 0 has a total "
        "capacity of 24.00 GiB of which 312.00 MiB is free.",
    )
    _, b = first_blocker(s, lines)
    assert mass(b, "env:CUDA_MPS_PINNED_DEVICE_MEM_LIMIT") > 1.5 * mass(b, "--max-num-seqs") > 0, b.top(6)
