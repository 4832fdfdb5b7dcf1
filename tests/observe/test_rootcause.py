"""Root cause in logs no signature foresaw: the traceback parser, the generic rules, real logs."""

from __future__ import annotations

import pytest

from bringup.core.datafiles import cut_values
from bringup.engines.explain import explain_file
from bringup.observe.signatures import Matcher, classify, signature_by_id
from bringup.observe.tracebacks import parse_log, strip_prefix
from tests.paths import DATA, ROOT

LOGS = DATA / "logs"


def tb(*body: str, exc: str, prefix: str = "") -> list[str]:
    """A Python traceback as printed, each line behind an optional log prefix."""
    lines = ["Traceback (most recent call last):", *body, exc]
    return [prefix + ln for ln in lines]


FRAME = (
    '  File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", line 372, in load_model',
    "    self.model_runner.load_model()",
)


# -- the parser ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, text, tag",
    [
        ("(APIServer pid=123) ValueError: bad", "ValueError: bad", "APIServer pid=123"),
        (
            "(EngineCore_DP0 pid=45) ERROR 11-30 12:00:00 [core.py:123] Traceback (most recent call last):",
            "Traceback (most recent call last):",
            "EngineCore_DP0 pid=45",
        ),
        (
            "(RayWorkerWrapper pid=9, ip=10.0.0.1) INFO 03-27 10:29:01 [worker.py:267] x",
            "x",
            "RayWorkerWrapper pid=9, ip=10.0.0.1",
        ),
        ("[2026-11-30 12:00:00 TP3] Scheduler hit an exception", "Scheduler hit an exception", "TP3"),
        ("[2026-11-30 12:00:00 DP0 TP3 EP3] x", "x", "DP0 TP3 EP3"),
        ("[2026-11-30 12:00:00] Received sigquit", "Received sigquit", None),
        ("[TP0] AssertionError", "AssertionError", "TP0"),
        ("[rank1]: RuntimeError: boom", "RuntimeError: boom", "rank1"),
        ("INFO 11-30 12:00:00 [core.py:123] Using max model len 2048", "Using max model len 2048", None),
        (
            'ERROR 01-28 03:21:01 engine.py:387]   File "x.py", line 1, in f',
            '  File "x.py", line 1, in f',
            None,
        ),
        ("2026-11-30 12:00:00,123 - ERROR - torch.OutOfMemoryError: x", "torch.OutOfMemoryError: x", None),
        ("[W1130 19:31:48.363771280 utils.cpp:68] Warning: NUMA", "Warning: NUMA", None),
        ("ImportError: no prefix", "ImportError: no prefix", None),
    ],
)
def test_prefixes_are_stripped_and_the_process_named(raw, text, tag):
    got_text, got_tag, _, _ = strip_prefix(raw)
    assert got_text == text and got_tag == tag


def test_the_original_line_is_kept_as_evidence():
    lines = ["(Worker pid=7) ERROR 11-30 12:00:00 [x.py:1] ValueError: the flag --block-size is wrong"]
    c = classify(lines, "vllm", "kv-alloc")
    assert c.evidence[0] == lines[0]


def test_direct_cause_chain_root_is_the_original_exception():
    lines = [
        *tb(*FRAME, exc="KeyError: 'rope_scaling'"),
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        *tb(*FRAME, exc="RuntimeError: model construction failed"),
    ]
    a = parse_log(lines)
    assert len(a.chains) == 1 and [e.short_type for e in a.chains[0].exceptions] == [
        "KeyError",
        "RuntimeError",
    ]
    assert a.root.short_type == "KeyError" and a.root.message == "'rope_scaling'"


def test_during_handling_chain_root_is_the_first_exception():
    lines = [
        *tb(*FRAME, exc="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"),
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        *tb(*FRAME, exc="Exception: Capture cuda graph failed: CUDA out of memory."),
    ]
    assert parse_log(lines).root.type == "torch.OutOfMemoryError"


def test_root_is_in_the_first_process_that_failed_when_lines_interleave():
    a = "(Worker_TP0 pid=10) ERROR 11-30 12:00:00 [multiproc_executor.py:1063] "
    b = "(Worker_TP1 pid=11) ERROR 11-30 12:00:00 [multiproc_executor.py:1063] "
    lines = [
        a + "Traceback (most recent call last):",
        b + "Traceback (most recent call last):",
        a + FRAME[0],
        b + FRAME[0],
        a + FRAME[1],
        b + FRAME[1],
        b + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB",
        a + "RuntimeError: NCCL error: unhandled cuda error",
    ]
    root = parse_log(lines).root
    assert root.line.tag == "Worker_TP1 pid=11" and root.short_type == "OutOfMemoryError"
    assert len(root.frames) == 1 and root.frames[0].func == "load_model"


def test_wrappers_never_outrank_the_real_exception_even_when_printed_first():
    lines = [
        "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
        "(EngineCore pid=2) ERROR 11-30 12:00:00 [core.py:1] EngineCore failed to start.",
        *tb(
            *FRAME,
            exc="ValueError: No common block size for 1 (CPU_ATTN: [MultipleOf(32)]).",
            prefix="(Worker pid=3) ERROR 11-30 12:00:00 [multiproc_executor.py:1063] ",
        ),
        "(EngineCore pid=2) ERROR 11-30 12:00:00 [core.py:1] RuntimeError: Worker failed with error 'x', "
        "please check the stack trace above for the root cause",
    ]
    c = classify(lines, "vllm", "kv-alloc")
    assert c.evidence[0].endswith("No common block size for 1 (CPU_ATTN: [MultipleOf(32)]).")
    assert c.failure_class == "incompatible-options" and c.implicates[:2] == [
        "--block-size",
        "--attention-backend",
    ]


def test_a_traceback_logged_as_a_warning_is_not_the_root():
    warn = "(APIServer pid=1) WARNING 11-30 12:00:00 [utils.py:9] "
    lines = [
        *tb(*FRAME, exc="ModuleNotFoundError: No module named 'triton'", prefix=warn),
        *tb(
            *FRAME,
            exc="ValueError: No common block size for 1 (CPU_ATTN: [MultipleOf(32)]).",
            prefix="(Worker pid=3) ERROR 11-30 12:00:05 [multiproc_executor.py:1063] ",
        ),
    ]
    assert parse_log(lines).root.short_type == "ValueError"
    assert classify(lines, "vllm", "kv-alloc").failure_class == "incompatible-options"


def test_pydantic_message_on_the_next_line_is_the_root_cause_line():
    lines = [
        "(APIServer pid=5) WARNING 11-30 12:00:00 [system_utils.py:255] Found ulimit of 20000 ... "
        "`OSError: [Errno 24] Too many open files`",
        *tb(
            *FRAME, exc="pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig"
        ),
        "  Value error, max_num_batched_tokens (16) is smaller than max_model_len (2048). [type=value_error]",
        "    For further information visit https://errors.pydantic.dev/2.14/v/value_error",
    ]
    root = parse_log(lines).root
    assert [c.text.strip()[:11] for c in root.continuation] == ["Value error", "For further"]
    c = classify(lines, "vllm", "load-weights")
    assert c.evidence[0].startswith("  Value error, max_num_batched_tokens (16)")
    assert c.failure_class == "incompatible-options"  # it names two flags
    assert {"--max-num-batched-tokens", "--max-model-len"} <= set(c.implicates)
    assert c.root_exception.startswith("ValidationError: Value error, max_num_batched_tokens (16)")


def test_continuation_stops_at_the_next_log_record():
    lines = [
        "[2026-11-30 12:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        *FRAME,
        "torch.AcceleratorError: CUDA error: device-side assert triggered",
        "CUDA kernel errors might be asynchronously reported at some other API call.",
        "[2026-11-30 12:00:01] Received sigquit from a child process. It usually means the child failed.",
    ]
    root = parse_log(lines).root
    assert root.context == "Scheduler hit an exception:"
    assert [c.index for c in root.continuation] == [4]


def test_a_note_after_the_exception_is_part_of_its_message():
    lines = tb(*FRAME, exc="RuntimeError: CUDA error: an illegal memory access was encountered")
    lines += [
        "Note: rerun with CUDA_LAUNCH_BLOCKING=1",
        "Exception: Capture cuda graph failed: illegal memory access",
    ]
    a = parse_log(lines)
    assert [e.short_type for e in a.chains[0].exceptions] == ["RuntimeError", "Exception"]
    assert a.root.continuation[0].text.startswith("Note:")


def test_a_bare_assertion_points_at_its_assert_statement():
    lines = tb(
        '  File "/sglang/srt/mem_cache/memory_pool.py", line 1490, in set_kv_buffer',
        "    assert not self.nsa_kv_cache_store_fp8",
        exc="AssertionError",
        prefix="[2026-11-30 12:00:00 TP0] ",
    )
    root = parse_log(lines).root
    assert root.key_line.text.strip() == "assert not self.nsa_kv_cache_store_fp8"


def test_an_exception_line_without_traceback_is_found():
    lines = [
        "(APIServer pid=123) INFO 11-30 12:00:00 [x.py:1] starting",
        "(APIServer pid=123) ValueError: bad value",
    ]
    assert parse_log(lines).root.message == "bad value"


def test_signature_patterns_match_behind_process_tags():
    m = Matcher("vllm")
    ids = {s.id for s in m.match("(APIServer pid=123) ValueError: something")}
    assert "generic-traceback-runtime" in ids


# -- the generic rules -----------------------------------------------------------------------


def _one(exc: str, *frames: str, engine: str | None = "vllm", phase: str = "load-weights"):
    body = frames or FRAME
    return classify(tb(*body, exc=exc), engine, phase)


@pytest.mark.parametrize(
    "exc, engine, factor, level",
    [
        (
            "ImportError: FlashAttention2 has been toggled on, but it cannot be used due to the following error: "
            "the package for FlashAttention2 doesn't seem to be installed.",
            "transformers",
            "--attn-implementation",
            "flash_attention_2",
        ),
        (
            "ImportError: Using `bitsandbytes` 4-bit quantization requires bitsandbytes: `pip install -U bitsandbytes>=0.46.1`",
            "transformers",
            "--quantization",
            "bnb-4bit",
        ),
        (
            "ImportError: `kernels` is either not installed or uses an incompatible version.",
            "transformers",
            "--attn-implementation",
            "kernels-community/flash-attn3",
        ),
        ("ModuleNotFoundError: No module named 'flash_attn'", "vllm", "--attention-backend", "FLASH_ATTN"),
        ("ModuleNotFoundError: No module named 'flashinfer'", "vllm", "--attention-backend", "FLASHINFER"),
        ("NameError: name 'deep_gemm' is not defined", "vllm", "--moe-backend", "deep_gemm"),
        ("ModuleNotFoundError: No module named 'flashinfer'", "sglang", "--attention-backend", "flashinfer"),
    ],
)
def test_missing_package_implicates_the_level_that_loads_it(exc, engine, factor, level):
    c = _one(exc, engine=engine)
    assert c.failure_class == "missing-dependency"
    assert factor in c.implicates and level in c.implicated_levels[factor]


def test_a_value_error_that_asks_for_a_package_is_a_missing_dependency():
    # transformers 5.19 modeling_utils.py, verbatim
    c = _one(
        "ValueError: accelerate is required when loading a GGUF file `pip install accelerate`.",
        engine="transformers",
    )
    assert c.failure_class == "missing-dependency" and c.signature_id == "rootcause-requires-package"


def test_requires_without_an_install_hint_is_not_a_missing_dependency():
    assert (
        _one("ValueError: this model requires trust_remote_code: pass --trust-remote-code").failure_class
        == "bad-flag"
    )


def test_name_error_of_something_else_is_not_a_missing_dependency():
    # raised in the worker's load_model while loading: the phase's class, not a missing package
    assert _one("NameError: name 'foo' is not defined").failure_class == "model-load"


def test_engine_is_read_from_frames_when_not_given():
    c = _one(
        "ImportError: the package for FlashAttention2 doesn't seem to be installed.",
        '  File "/x/site-packages/transformers/cli/serve.py", line 137, in __init__',
        engine=None,
    )
    assert c.implicated_levels == {"--attn-implementation": ["flash_attention_2"]}


def test_triton_shared_memory_names_the_numbers_and_the_kernel_path():
    c = _one(
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 133120, "
        "Hardware limit: 101376. Reducing block sizes or `num_stages` may help.",
        '  File "/x/vllm/model_executor/layers/fused_moe/fused_moe.py", line 812, in invoke_fused_moe_kernel',
        '  File "/x/triton/compiler/compiler.py", line 374, in _init_handles',
    )
    assert c.failure_class == "unsupported-hardware"
    assert "Required: 133120, Hardware limit: 101376" in c.evidence[0]
    assert any("needs 133120 B" in e and "allows 101376 B" in e for e in c.evidence)
    assert c.implicates[0] == "--moe-backend" and "--attention-backend" in c.implicates
    assert c.implicated_levels == {}  # raised inside the MoE kernel: the factor, not a level


def test_triton_kernels_frames_are_the_moe_path_even_below_other_frames():
    # vLLM's MXFP4 MoE runs OpenAI's triton_kernels (fused_moe/gpt_oss_triton_kernels_moe.py imports
    # triton_kernels.matmul_ogs); the frame is not the first one, so a "(^|/)" pattern must match
    # at the start of any frame's path, not only of the whole text.
    c = _one(
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 131072, "
        "Hardware limit: 101376. Reducing block sizes or `num_stages` may help.",
        '  File "/x/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3120, in profile_run',
        '  File "/x/dist-packages/triton_kernels/matmul_ogs.py", line 477, in matmul_ogs',
        '  File "/x/dist-packages/triton/compiler/compiler.py", line 483, in _init_handles',
    )
    assert c.implicates[0] == "--moe-backend" and "--attention-backend" in c.implicates


def test_a_line_start_pattern_matches_a_frame_that_is_not_the_first():
    c = _one(
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        '  File "/x/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3120, in profile_run',
        '  File "/x/dist-packages/flashinfer/prefill.py", line 100, in run',
    )
    assert "--attention-backend" in c.implicates and "FLASHINFER" in c.implicated_levels.get(
        "--attention-backend", []
    )


def test_an_error_inside_the_custom_all_reduce_implicates_running_it():
    """slime #1998: the v2 kernel's runtime check fails in graph capture; the frames are SGLang's
    custom all-reduce, so the switch that turns it off (left at its default) is the suspect."""
    c = _one(
        "RuntimeError: Runtime check failed at /x/sglang/jit_kernel/include/sgl_kernel/distributed/"
        "custom_all_reduce.cuh:37: CUDA error: invalid argument",
        '  File "/x/sglang/srt/model_executor/cuda_graph_runner.py", line 489, in capture',
        '  File "/x/sglang/srt/distributed/device_communicators/custom_all_reduce_v2.py", line 236, in share_graph_inputs',
        engine="sglang",
        phase="graph-capture",
    )
    assert c.implicated_levels == {"--disable-custom-all-reduce": ["false"]}
    # NCCL's own all-reduce is not the custom one
    n = _one(
        "RuntimeError: NCCL error: unhandled cuda error",
        '  File "/x/sglang/srt/distributed/device_communicators/pynccl.py", line 138, in all_reduce',
        engine="sglang",
    )
    assert "--disable-custom-all-reduce" not in n.implicated_levels


@pytest.mark.parametrize(
    ("engine", "lines"),
    [
        # vllm #42609: the custom all-reduce's CUDACHECK prints the file and exits; the executor's
        # wrapper line is all the rest of the log says
        (
            "vllm",
            [
                "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:455 'invalid argument'",
                "(EngineCore_DP0 pid=2) ERROR 12-06 08:00:00 [multiproc_executor.py:262] Worker proc "
                "VllmWorker-0 died unexpectedly, shutting down executor.",
            ],
        ),
        (
            "sglang",
            [
                "Failed: Cuda error /sgl-kernel/csrc/allreduce/custom_all_reduce.cuh:455 'invalid argument'",
                "[2026-12-06 08:00:01] Received sigquit from a child process. It usually means the child failed.",
            ],
        ),
    ],
)
def test_a_native_error_line_classes_the_failure_by_the_file_it_names(engine, lines):
    """No Python exception, no signature: the source file the error line names is where it was
    raised (issue 36, a class from where it raised): the engine's collectives, and the switch that
    turns the custom all-reduce off is implicated as for a Python frame inside it."""
    c = classify(["INFO capture begins", *lines], engine, "graph-capture")
    assert c.failure_class == "distributed-init" and c.phase == "graph-capture"
    assert c.evidence[0].startswith("Failed: Cuda error") and c.frames[0].endswith("custom_all_reduce.cuh")
    assert c.implicated_levels == {"--disable-custom-all-reduce": ["false"]}


def test_a_native_file_outside_any_component_gives_the_phase_class_and_a_signature_wins():
    c = classify(
        ["Failed: Cuda error /src/csrc/some_kernel.cu:12 'invalid argument'"],
        "vllm",
        "load-weights",
    )
    assert c.failure_class == "model-load" and c.implicated_levels == {}  # by_phase: load-weights
    nccl = classify(
        ["misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-x to 9637892 bytes"],
        "vllm",
        "graph-capture",
    )
    assert nccl.failure_class == "distributed-init" and nccl.signature_id == "nccl-error"


@pytest.mark.parametrize(
    "msg",
    [
        "no kernel image is available for execution on the device",
        "FlashMLA requires SM 90 or SM 100",
        "TRTLLM MHA is only supported on Blackwell",
        "Unsupported architecture sm_120",
        "FlashInfer requires GPUs with sm75 or higher",  # flashinfer/jit/core.py check_cuda_arch (vllm #50705)
    ],
)
def test_architecture_messages_are_unsupported_hardware(msg):
    assert _one(f"RuntimeError: {msg}").failure_class == "unsupported-hardware"


def test_graph_capture_oom_from_frames_not_from_the_line():
    frames = (
        '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 5684, in capture_model',
        "    self._capture_cudagraphs(",
        '  File "/x/torch/cuda/graphs.py", line 130, in capture_end',
        "    super().capture_end()",
    )
    c = _one(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB.", *frames, phase="kv-alloc"
    )
    assert c.failure_class == "oom-graph-capture" and c.phase == "graph-capture"
    for flag in (
        "--max-num-seqs",
        "--max-cudagraph-capture-size",
        "--cudagraph-capture-sizes",
        "--enforce-eager",
        "--gpu-memory-utilization",
    ):
        assert flag in c.implicates
    assert "--mem-fraction-static" not in c.implicates  # an SGLang flag: not in vLLM's --help
    sig = signature_by_id(c.signature_id)
    assert sig is not None and sig.adjust["--gpu-memory-utilization"].direction == "lower"


def test_oom_outside_capture_stays_a_kv_cache_oom():
    c = _one(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB.",
        '  File "/x/vllm/v1/worker/gpu_worker.py", line 372, in determine_available_memory',
        phase="kv-alloc",
    )
    assert c.failure_class == "oom-kv-cache" and c.signature_id == "torch-cuda-oom"


def test_value_error_naming_one_flag_is_bad_flag():
    c = _one("ValueError: --max-num-seqs must be positive, got -1")
    assert c.failure_class == "bad-flag" and c.implicates[0] == "--max-num-seqs"


def test_value_error_naming_two_flags_is_incompatible_options():
    c = _one(
        "ValueError: tensor_parallel_size (3) must divide the number of attention heads; "
        "also check --pipeline-parallel-size"
    )
    assert c.failure_class == "incompatible-options"
    assert {"--tensor-parallel-size", "--pipeline-parallel-size"} <= set(c.implicates)


def test_an_exception_no_rule_knows_is_named_in_the_hint():
    c = _one("KeyError: 'model.layers.0.mlp.experts.w13_weight'")
    # raised in the engine while loading weights: classed by where it was raised, and the hint says so
    assert c.failure_class == "model-load" and c.evidence[0].startswith("KeyError:")
    assert c.hint.startswith("Classed model-load by where it was raised")
    assert "KeyError" in c.hint and "no Python exception" not in c.hint


def test_a_missing_file_checked_by_the_script_that_was_run_is_a_bad_value_not_an_import():
    """`python -m sglang.launch_server` runs the script's module-level code, which calls the argument
    checks: one <module> frame is the script, not an import (an import shows a module importing
    another). The path a flag names is not there: the value is wrong (issue 22 item 3)."""
    lines = [
        "Traceback (most recent call last):",
        '  File "<frozen runpy>", line 198, in _run_module_as_main',
        '  File "<frozen runpy>", line 88, in _run_code',
        '  File "/x/sglang/launch_server.py", line 10, in <module>',
        "    server_args = prepare_server_args(sys.argv[1:])",
        '  File "/x/sglang/srt/server_args.py", line 4000, in __post_init__',
        "    self._handle_lora()",
        '  File "/x/sglang/srt/server_args.py", line 3100, in _handle_lora',
        '    raise FileNotFoundError(f"LoRA adapter path {p} does not exist")',
        "FileNotFoundError: LoRA adapter path /data/adapters/sql does not exist",
    ]
    c = classify(lines, "sglang", "parse-args", ())
    assert c.failure_class == "bad-flag", c
    # while a module that imports another failing at import time is still the packages' fault
    imported = [
        "Traceback (most recent call last):",
        '  File "/x/bin/transformers", line 8, in <module>',
        "    from transformers.cli import main",
        '  File "/x/transformers/__init__.py", line 30, in <module>',
        "    from . import dependency_versions_check",
        '  File "/x/transformers/dependency_versions_check.py", line 57, in <module>',
        "    require_version_core(deps[pkg])",
        '  File "/x/transformers/utils/versions.py", line 117, in require_version_core',
        "    raise RuntimeError('the installed hub client refuses this transformers')",
        "RuntimeError: the installed hub client refuses this transformers",
    ]
    assert classify(imported, "transformers", "parse-args", ()).failure_class == "missing-dependency"


def test_any_other_cuda_runtime_error_is_a_device_error_placed_by_its_frames():
    """A CUDA error no rule names in words (cudaErrorStreamCaptureUnsupported) is the device's
    refusal of a kernel or a call, not `unknown`; its frames place it in graph capture."""
    lines = tb(
        '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 3600, in capture_model',
        "    self._capture_cudagraphs(",
        '  File "/x/torch/cuda/graphs.py", line 200, in capture_end',
        "    self.cuda_graph.capture_end()",
        exc="RuntimeError: CUDA error: operation not permitted when stream is capturing",
    )
    c = classify(lines, "vllm", "graph-capture", ())
    assert (c.failure_class, c.phase) == ("device-assert", "graph-capture"), c


def test_no_exception_at_all_is_unknown_and_says_so():
    c = classify(["INFO starting", "WARNING slow", "something went quiet"], "vllm", "load-weights")
    assert c.failure_class == "unknown" and "without a python exception" in c.hint.lower()
    assert (
        "does not recognise" in c.hint and "bringup/" not in c.hint
    )  # said to the user, not the maintainers


# -- real and excerpted logs (tests/data/logs/README.md) -----------------------------------

CASES = [
    # file, class, phase, root-cause line fragment, implicated factors, implicated levels
    (
        "vllm-cpu-gpu-memory-utilization-0.99.log",
        "oom-kv-cache",
        "kv-alloc",
        "(VllmWorker-0 pid=7406) ERROR 11-30 19:31:48 [multiproc_executor.py:953] ValueError: Available memory on node 0",
        ["--gpu-memory-utilization"],
        {},
    ),
    (
        "vllm-cpu-block-size-17.log",
        "incompatible-options",
        "kv-alloc",
        "(Worker pid=7709) ERROR 11-30 19:32:39 [multiproc_executor.py:1063] ValueError: No common block size for 17",
        ["--block-size", "--attention-backend"],
        {},
    ),
    (
        "vllm-cpu-max-model-len-999999.log",
        "bad-flag",
        "parse-args",
        "Value error, User-specified max_model_len (999999) is greater than the derived max_model_len",
        ["--max-model-len"],
        {},
    ),
    (
        "vllm-cpu-kv-cache-dtype-invalid.log",
        "bad-flag",
        "parse-args",
        "error: argument --kv-cache-dtype: invalid choice: 'fp9'",
        [],
        {},
    ),
    (
        # one NUMA node, two CPU workers (docs/multifault.md); the message says "decrease DP/TP/PP",
        # yet nothing is implicated today (issue 22: it should implicate --tensor-parallel-size)
        "vllm-cpu-tensor-parallel-2-numa.log",
        "incompatible-options",
        "distributed-init",
        "AssertionError: Not enough allowed NUMA nodes to bind threads of 2 local CPUWorkers",
        [],
        {},
    ),
    (
        "vllm-cpu-head-dim-16-first-request.log",
        "unsupported-hardware",
        "first-request",
        "RuntimeError: Unsupported CPU attention configuration: head_dim=16",
        ["--attention-backend", "model.head_dim"],
        {},
    ),
    (
        "transformers-cpu-flash-attention-2.log",
        "missing-dependency",
        "load-weights",
        "ImportError: FlashAttention2 has been toggled on, but it cannot be used due to the following error: the "
        "package for FlashAttention2 doesn't seem to be installed.",
        ["--attn-implementation"],
        {"--attn-implementation": ["flash_attention_2"]},
    ),
    (
        "transformers-cpu-bnb-4bit.log",
        "missing-dependency",
        "load-weights",
        "ImportError: Using `bitsandbytes` 4-bit quantization requires bitsandbytes",
        ["--quantization"],
        {"--quantization": ["bnb-4bit", "bnb-8bit"]},
    ),
    (
        "transformers-cpu-hub-kernels.log",
        "missing-dependency",
        "load-weights",
        "ImportError: `kernels` is either not installed or uses an incompatible version",
        ["--attn-implementation"],
        {"--attn-implementation": ["kernels-community/flash-attn3", "kernels-community/vllm-flash-attn3"]},
    ),
    (
        "vllm-h200-graph-capture-oom-tp2.log",
        "oom-graph-capture",
        "graph-capture",
        "(Worker_TP1 pid=2791) ERROR 11-30 12:01:07 [multiproc_executor.py:1063] torch.OutOfMemoryError: CUDA out of memory",
        ["--max-num-seqs", "--max-cudagraph-capture-size", "--enforce-eager", "--gpu-memory-utilization"],
        {},
    ),
    (
        "vllm-sm120-triton-smem-moe.log",
        "unsupported-hardware",
        "kv-alloc",
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 131072, Hardware limit: 101376",
        ["--moe-backend", "--attention-backend", "--linear-backend"],
        {},
    ),
    (
        "vllm-h200-flashinfer-missing-tp2.log",
        "missing-dependency",
        "load-weights",
        "(Worker_TP0 pid=3310) ERROR 11-30 12:20:12 [multiproc_executor.py:953] ModuleNotFoundError: No module named 'flashinfer'",
        ["--attention-backend"],
        {"--attention-backend": ["FLASHINFER"]},
    ),  # the level its args asked for
    (
        "sglang-h200-deepgemm-tp4.log",
        "missing-dependency",
        "graph-capture",
        "NameError: name 'deep_gemm' is not defined",  # TP2's; TP0's NCCL error is a consequence
        ["env:SGLANG_OPT_DEEPGEMM_HC_PRENORM"],
        {},
    ),
    (
        "sglang-graph-oom.log",
        "oom-graph-capture",
        "graph-capture",
        "torch.OutOfMemoryError: CUDA out of memory.",
        ["--mem-fraction-static", "--cuda-graph-max-bs"],
        {},
    ),
    (
        "sglang-nan-decode.log",
        "nan-output",
        "first-request",
        "probability tensor contains either `inf`, `nan`",
        ["--nsa-decode-backend"],
        {},
    ),
    (
        "sglang-nsa-fp8-assert.log",
        "incompatible-options",
        "graph-capture",
        "assert not self.nsa_kv_cache_store_fp8",
        ["--attention-backend", "--kv-cache-dtype"],
        {},
    ),
    (
        "sglang-fa3-sm120.log",
        "unsupported-hardware",
        "kv-alloc",
        "AssertionError: FlashAttention v3 Backend requires",
        ["--attention-backend"],
        {},
    ),
    # transformers serve, real logs of the engine adapter's own tests (tests/trial/test_trial_transformers.py)
    (
        "transformers-flash-attn2.log",
        "missing-dependency",
        "load-weights",
        "ImportError: FlashAttention2 has been toggled on",
        ["--attn-implementation"],
        {"--attn-implementation": ["flash_attention_2"]},
    ),
    (
        "transformers-kernels-hub-attn.log",
        "missing-dependency",
        "load-weights",
        "ImportError: `kernels` is either not",
        ["--attn-implementation"],
        {},
    ),
    (
        "transformers-bnb-4bit.log",
        "missing-dependency",
        "load-weights",
        "requires bitsandbytes",
        ["--quantization"],
        {"--quantization": ["bnb-4bit", "bnb-8bit"]},
    ),
    (
        "transformers-accelerate-missing.log",
        "missing-dependency",
        "load-weights",
        "ValueError: Using a `device_map`",
        [],
        {},
    ),
    (
        "transformers-unknown-attn.log",
        "bad-flag",
        "load-weights",
        "Unsupported attention implementation: 'nonsense_attention'",
        ["--attn-implementation"],
        {},
    ),
    (
        "transformers-unknown-quantization.log",
        "bad-flag",
        "load-weights",
        "Unsupported quantization method: 'awq-4bit'",
        ["--quantization"],
        {},
    ),
    (
        "transformers-unknown-dtype.log",
        "bad-flag",
        "load-weights",
        "Unsupported dtype: 'float8'",
        ["--dtype"],
        {},
    ),
    (
        "transformers-cuda-device-on-cpu.log",
        "unsupported-hardware",
        "load-weights",
        "AssertionError: Torch not compiled with CUDA enabled",
        ["--device"],
        {},
    ),
    (
        "transformers-cb-cache-too-big.log",
        "oom-kv-cache",
        "first-request",
        "MemoryError: Memory footprint",
        ["--cb-num-blocks"],
        {},
    ),
    (
        "transformers-cpu-cb-num-blocks-100000.log",  # docs/multifault.md: the onion's last layer
        "oom-kv-cache",
        "first-request",
        "MemoryError: Memory footprint 931117858816 is more than available memory",
        ["--cb-num-blocks"],
        {},
    ),
    # transformers serve 5.17.0 on the H200 (issue 11's real GPU bring-up, tests/data/gpu/h200_bringup.sh)
    (
        "transformers-h200-bnb-4bit.log",
        "missing-dependency",
        "load-weights",
        "requires bitsandbytes",
        ["--quantization"],
        {"--quantization": ["bnb-4bit", "bnb-8bit"]},
    ),
    (
        "transformers-h200-flash-attention-2.log",
        "missing-dependency",
        "load-weights",
        "ImportError: FlashAttention2 has been toggled on",
        ["--attn-implementation"],
        {"--attn-implementation": ["flash_attention_2"]},
    ),
    # real SGLang 0.5.23 (the PyPI wheel, CUDA torch) on this CPU machine (tests/engines/test_sglang_real.py)
    (
        "sglang-cpu-no-vllm.log",
        "missing-dependency",
        "load-weights",
        "ModuleNotFoundError: No module named 'vllm'",
        ["env:SGLANG_USE_CPU_ENGINE"],
        {},
    ),
    # "ImportError:" with its message on the next lines; raised while resolving the arguments
    (
        "sglang-cpu-engine-no-sgl-kernel.log",
        "missing-dependency",
        "parse-args",
        "[sgl_kernel] CRITICAL: Could not load any common_ops library!",
        ["host.sgl-kernel"],
        {},
    ),
    # an ExceptionGroup (PEP 654 box drawing) around the real error, raised on the first request
    (
        "transformers-h200-flex-attention-continuous-batching.log",
        "bad-flag",
        "first-request",
        'ValueError: Specified `attn_implementation="paged|flex_attention"` is not supported',
        ["--attn-implementation"],
        {},
    ),
    # -- vLLM 0.24.0, SGLang 0.5.16 and transformers serve on the H200, reconstructed from the strings
    # docs/facts.md and public reports quote (tests/data/logs/README.md): none has a signature of its
    # own; the generic rules decide (benchmarks/classify_logs.py --generic counts them).
    # a validation error whose header names only the config class: the root line is the message beneath
    (
        "vllm-h200-tp8-one-gpu.log",
        "unsupported-hardware",
        "parse-args",
        "Value error, World size (8) is larger than the number of available GPUs (1) in this node",
        ["--tensor-parallel-size"],
        {},
    ),
    (
        "vllm-h200-modelopt-fp4-unquantized.log",
        "bad-flag",
        "parse-args",
        "Value error, Cannot find the config file for modelopt_fp4",
        ["--quantization"],
        {},
    ),
    (
        "vllm-h200-visible-devices-none.log",
        "unsupported-hardware",
        "parse-args",
        "RuntimeError: Failed to infer device type",
        ["env:CUDA_VISIBLE_DEVICES"],
        {},
    ),
    (
        "vllm-h200-gpu-memory-utilization-0.999.log",
        "oom-kv-cache",
        "kv-alloc",
        "ValueError: Free memory on device cuda:0 (139.29/139.8 GiB) on startup is less than desired GPU memory",
        ["--gpu-memory-utilization"],
        {},
    ),
    (
        "vllm-h200-kv-cache-too-small-max-model-len.log",
        "oom-kv-cache",
        "kv-alloc",
        "ValueError: To serve at least one request with the models's max seq len (131072)",
        ["--max-model-len", "--gpu-memory-utilization"],
        {},
    ),
    (
        "sglang-h200-tokenizers-version.log",
        "missing-dependency",
        "parse-args",
        "ImportError: tokenizers>=0.22.0,<=0.23.0 is required for a normal functioning of this module, but found "
        "tokenizers==0.23.2.",
        [],
        {},
    ),
    (
        "sglang-h200-transformers-qwen3-asr.log",
        "missing-dependency",
        "parse-args",
        "ValueError: 'qwen3_asr' is already used by a Transformers config",
        [],
        {},
    ),
    (
        "sglang-h200-graph-capture-oom-default-mem.log",
        "oom-graph-capture",
        "graph-capture",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 5.89 GiB",
        ["--mem-fraction-static", "--cuda-graph-max-bs-decode"],
        {},
    ),
    (
        "sglang-h200-prefill-graph-illegal-memory-access.log",
        "device-assert",
        "graph-capture",
        "CUDA error: an illegal memory access was encountered",
        [],
        {},
    ),
    (
        "sglang-h200-base-gpu-id-3.log",
        "unsupported-hardware",
        "distributed-init",
        "torch.AcceleratorError: CUDA error: invalid device ordinal",
        ["--base-gpu-id"],
        {},
    ),
    (
        "sglang-h200-mem-fraction-too-small.log",
        "oom-kv-cache",
        "kv-alloc",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static",
        ["--mem-fraction-static"],
        {},
    ),
    (
        "transformers-h200-device-cuda-3.log",
        "unsupported-hardware",
        "load-weights",
        "torch.AcceleratorError: CUDA error: invalid device ordinal",
        ["--device"],
        {},
    ),
]
WORKING = {
    "transformers-works.log"
}  # a log of a server that served: explained as works (test_signatures_transformers)


@pytest.mark.parametrize("name, cls, phase, line, implicates, levels", CASES, ids=[c[0] for c in CASES])
def test_logs_give_class_phase_root_line_and_factors(name, cls, phase, line, implicates, levels):
    out = explain_file(LOGS / name)
    assert out.status == "fails"
    assert (out.failure_class, out.phase) == (cls, phase)
    assert line in out.evidence[0]
    assert [f for f in implicates if f in out.implicates] == implicates
    for factor, lv in levels.items():
        assert out.implicated_levels.get(factor) == lv


def test_every_log_is_covered_and_documented():
    # the real vLLM 0.24.0 / SGLang 0.5.16 logs of the H200 and H100 (*-real-*) are tests/engines/test_gpu_logs.py's
    names = sorted(p.name for p in LOGS.glob("*.log") if "-real-" not in p.name)
    assert sorted([c[0] for c in CASES] + list(WORKING)) == names
    readme = (LOGS / "README.md").read_text()
    assert all(n in readme for n in names)


def test_transformers_logs_are_recognised():
    out = explain_file(LOGS / "transformers-cpu-flash-attention-2.log")
    assert out.engine == "transformers"
    assert out.root_exception.endswith("in _flash_attn_import_error (transformers/modeling_utils.py:1559)")


# -- knowledge strings are not cut at " #" (YAML comments) --------------------------------


def test_cut_values_finds_a_source_cut_by_a_comment():
    text = (
        "signatures:\n  - id: x\n    source: sglang #18870 (docs/facts.md)\n    hint: 'quoted #1 is kept'\n"
    )
    assert cut_values(text) == [(3, "source", "sglang", "#18870 (docs/facts.md)")]


@pytest.mark.slow
def test_no_knowledge_string_is_cut_by_a_comment():
    files = sorted((ROOT / "bringup" / "data").rglob("*.yaml")) + sorted(
        (ROOT / "bringup" / "scenarios").glob("*.yaml")
    )
    assert len(files) > 10
    cut = [(str(f.relative_to(ROOT)), *c) for f in files for c in cut_values(f.read_text())]
    assert cut == []


def test_real_sglang_cpu_log_names_the_missing_package_and_its_way_out():
    """The real SGLang 0.5.23 CPU failure: the root is the vLLM import in the rotary embedding, not
    the scheduler's "Received sigquit" wrapper, and the hint names the variable SGLang's CPU path needs."""
    out = explain_file(LOGS / "sglang-cpu-no-vllm.log")
    assert out.engine == "sglang" and out.signature == "sglang-vllm-rope-off-cuda"
    assert out.root_exception.endswith("in __init__ (sglang/srt/layers/rotary_embedding/base.py:138)")
    assert "SGLANG_USE_CPU_ENGINE=1" in out.hint
    kernel = explain_file(LOGS / "sglang-cpu-engine-no-sgl-kernel.log")
    assert kernel.signature == "sglang-sgl-kernel-no-ops" and "sgl-kernel built for CPU" in kernel.hint


def test_a_failure_in_vllms_kernel_warmup_is_in_the_kernel_warmup_phase():
    """The warm-up is called from _initialize_kv_caches, a KV-allocation frame further out: the
    innermost recognised frame (the warm-up module) says where it failed (vllm #41849)."""
    c = _one(
        "RuntimeError: DeepGEMM backend is unavailable in the current vLLM environment, or the "
        "available DeepGEMM package does not provide the required APIs for these kernels.",
        '  File "/x/vllm/v1/engine/core.py", line 379, in _initialize_kv_caches',
        "    self.model_executor.compile_or_warm_up_model()",
        '  File "/x/vllm/model_executor/warmup/kernel_warmup.py", line 244, in kernel_warmup',
        "    deep_gemm_warmup(model, max_tokens)",
        '  File "/x/vllm/model_executor/warmup/deep_gemm_warmup.py", line 363, in deep_gemm_warmup',
        "    total = _count_warmup_iterations(model, max_tokens)",
        '  File "/x/vllm/utils/deep_gemm.py", line 146, in _missing',
        "    raise RuntimeError(",
        phase="kv-alloc",
    )
    assert c.phase == "kernel-warmup"
    # A failure in the profiling pass, under the same _initialize_kv_caches, stays in kv-alloc.
    c = _one(
        "RuntimeError: boom",
        '  File "/x/vllm/v1/engine/core.py", line 379, in _initialize_kv_caches',
        "    self.model_executor.determine_available_memory()",
        '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 3120, in profile_run',
        "    self._dummy_run(",
        phase="kv-alloc",
    )
    assert c.phase == "kv-alloc"


# -- issue 22 item 3: a class and a phase from what the exception is -------------------------


def test_a_tag_only_prefix_continues_the_message_beneath_a_validation_header():
    """vLLM's `serve` tags every stderr line with its process: the pydantic header names only the
    config class, the line beneath says what is wrong, and that line is the root."""
    p = "(APIServer pid=7) "
    lines = [
        p + "Traceback (most recent call last):",
        p + '  File "/x/vllm/engine/arg_utils.py", line 1452, in create_engine_config',
        p + "    parallel_config = ParallelConfig(",
        p + "pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig",
        p + "  Value error, Tensor parallel size (8) is larger than the number of available GPUs (1). "
        "[type=value_error, input_value=ArgsKwargs((), {'x': 1}), input_type=ArgsKwargs]",
        p + "    For further information visit https://errors.pydantic.dev/2.12/v/value_error",
        p + "INFO 12-01 14:02:11 [api_server.py:1] a new record",
    ]
    c = classify(lines, "vllm", "parse-args")
    assert "Value error, Tensor parallel size (8)" in c.evidence[0]
    assert (c.failure_class, c.phase) == ("unsupported-hardware", "parse-args")
    assert c.implicates[0] == "--tensor-parallel-size"  # spelled in words in the message
    root = parse_log(lines).root
    assert len(root.continuation) == 2  # the logger's record after it is not part of the message


@pytest.mark.parametrize(
    "exc, cls",
    [
        ("torch.AcceleratorError: CUDA error: invalid device ordinal", "unsupported-hardware"),
        ("RuntimeError: No CUDA GPUs are available", "unsupported-hardware"),
        (
            "ValueError: World size (4) is larger than the number of available GPUs (2) in this node.",
            "unsupported-hardware",
        ),
        (
            "ValueError: tensor parallel size 8 is greater than the number of available devices (1)",
            "unsupported-hardware",
        ),
        ("FileNotFoundError: [Errno 2] No such file or directory: '/tmp/chat.jinja'", "bad-flag"),
        ("ValueError: Cannot find the config file for awq", "bad-flag"),
        ("OSError: /models/x does not appear to have a file named config.json.", "model-load"),
        ("ModuleNotFoundError: No module named 'xformers'", "missing-dependency"),
        (
            "ImportError: numpy>=2.0 is required for a normal functioning of this module, but found numpy==1.26.4.",
            "missing-dependency",
        ),
        ("RuntimeError: CUDA error: an illegal memory access was encountered", "device-assert"),
        (
            "ValueError: Free memory on device cuda:0 (1.2/80 GiB) on startup is less than desired GPU memory utilization (0.9, 72 GiB).",
            "oom-kv-cache",
        ),
        ("ValueError: Unknown sampler: 'fast'. Must be one of 'greedy', 'random'", "bad-flag"),
    ],
)
def test_generic_classes_without_any_signature(exc, cls):
    frame = ('  File "/x/vllm/v1/worker/gpu_worker.py", line 239, in init_device', "    self.init()")
    c = classify(tb(*frame, exc=exc), "vllm", "distributed-init", signatures=())
    assert c.failure_class == cls, c.signature_id


def test_a_validation_error_while_parsing_is_a_refused_value_in_parse_args():
    frames = (
        '  File "/x/vllm/engine/arg_utils.py", line 1718, in create_engine_config',
        "    config = VllmConfig(",
        '  File "/x/vllm/config/scheduler.py", line 201, in __post_init__',
        "    raise ValueError(",
    )
    c = classify(
        tb(*frames, exc="ValueError: chunk budget is below the batch size"),
        "vllm",
        "parse-args",
        signatures=(),
    )
    assert (c.failure_class, c.phase, c.signature_id) == (
        "bad-flag",
        "parse-args",
        "rootcause-config-validation",
    )
    # the same exception type outside argument parsing is not a configuration check
    c = classify(
        tb(*FRAME, exc="ValueError: chunk budget is below the batch size"),
        "vllm",
        "load-weights",
        signatures=(),
    )
    assert c.signature_id != "rootcause-config-validation" and c.failure_class == "model-load"


def _import_chain(*inner: str) -> list[str]:
    return [
        '  File "<frozen runpy>", line 198, in _run_module_as_main',
        '  File "/x/sglang/launch_server.py", line 7, in <module>',
        "    from sglang.srt.server_args import prepare_server_args",
        '  File "/x/sglang/srt/configs/__init__.py", line 30, in <module>',
        "    from sglang.srt.configs.foo import FooConfig",
        *inner,
    ]


def test_anything_raised_while_importing_is_a_dependency_problem():
    frames = _import_chain(
        '  File "/x/transformers/models/auto/configuration_auto.py", line 1222, in register', "    raise X"
    )
    c = classify(tb(*frames, exc="KeyError: 'foo'"), "sglang", "parse-args", signatures=())
    assert (c.failure_class, c.signature_id) == ("missing-dependency", "rootcause-import-time")
    # an import inside running code (SGLang 0.5.23 resolving its arguments) is not "at import"
    running = [
        '  File "/x/sglang/srt/server_args.py", line 900, in resolve_once',
        "    run()",
        *_import_chain('  File "/x/sglang/srt/x.py", line 1, in f', "    raise X")[1:],
    ]
    assert (
        classify(tb(*running, exc="KeyError: 'foo'"), "sglang", "parse-args", signatures=()).failure_class
        != "missing-dependency"
    )


def test_cuda_debugging_advice_implicates_no_variable():
    exc = "torch.AcceleratorError: CUDA error: invalid device ordinal"
    lines = tb(*FRAME, exc=exc) + [
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    ]
    c = classify(lines, "vllm", "load-weights")
    assert not [f for f in c.implicates if "CUDA_LAUNCH_BLOCKING" in f or "TORCH_USE_CUDA_DSA" in f]


def test_a_value_the_launch_set_names_its_flag():
    lines = [
        "(APIServer pid=1) INFO 12-01 14:02:11 [utils.py:233] non-default args: {'model': '/m', 'quantization': 'modelopt_fp4'}",
        *tb(*FRAME, exc="ValueError: Cannot find the config file for modelopt_fp4"),
    ]
    assert classify(lines, "vllm", "parse-args", signatures=()).implicates[0] == "--quantization"


@pytest.mark.parametrize(
    "engine, line, phase",
    [
        (
            "sglang",
            "[2026-12-01 15:31:13 TP0] Capture target prefill CUDA graph begin. backend=breakable, num_tokens=[4]",
            "graph-capture",
        ),
        (
            "sglang",
            "[2026-12-01 15:31:13 TP0] Capture draft extend CUDA graph begin. backend=full",
            "graph-capture",
        ),
        (
            "sglang",
            "[2026-12-01 15:31:13 TP0] Capture cuda graph begin. This can take up to several minutes.",
            "graph-capture",
        ),
        (
            "sglang",
            "[2026-12-01 15:31:14 TP0] Capture target decode CUDA graph end. elapsed=2.58 s",
            "graph-capture",
        ),
        ("sglang", "Capturing batches (bs=1 avail_mem=72.47 GB): 100%|██████████| 2/2", "graph-capture"),
        (
            "sglang",
            "[2026-12-01 15:31:12 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 4194304",
            "kv-alloc",
        ),
        (
            "sglang",
            "[2026-12-01 15:31:19 TP0] max_total_num_tokens=4194304, chunked_prefill_size=8192",
            "warmup",
        ),
        (
            "vllm",
            "(EngineCore_DP0 pid=1) INFO 12-01 [gpu_model_runner.py:1] Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%",
            "graph-capture",
        ),
        (
            "vllm",
            "(EngineCore_DP0 pid=1) INFO 12-01 [x.py:1] cudagraph capture for batch sizes [1, 2, 4]",
            "graph-capture",
        ),
        (
            "vllm",
            "(EngineCore_DP0 pid=1) INFO 12-01 [gpu_model_runner.py:1] Graph capturing finished in 1 secs, took 0.30 GiB",
            "warmup",
        ),
        (
            "vllm",
            "(EngineCore_DP0 pid=1) INFO 12-01 [backends.py:164] Compiling a graph for dynamic shape takes 14.12 s",
            "kv-alloc",
        ),
        (
            "vllm",
            "(EngineCore_DP0 pid=1) INFO 12-01 [monitor.py:34] torch.compile takes 22.74 s in total",
            "kv-alloc",
        ),
        (
            "vllm",
            "(EngineCore_DP0 pid=1) INFO 12-01 [autotuner.py:1] flashinfer.jit: [Autotuner]: Autotuning process starts ...",
            "kernel-warmup",
        ),
        (
            "vllm",
            "(EngineCore_DP0 pid=1) Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:06<00:00]",
            "load-weights",
        ),
        (
            "vllm",
            "(EngineCore_DP0 pid=1) INFO 12-01 [gpu_worker.py:1] Memory profiling takes 3.10 seconds",
            "kv-alloc",
        ),
        # the engine's dump of its arguments and its argparse usage name words of progress, and are none
        (
            "vllm",
            "(APIServer pid=1) INFO 12-01 [utils.py:233] non-default args: {'model': 'x', 'load_format': 'dummy'}",
            None,
        ),
        ("vllm", "                     [--cudagraph-capture-sizes CUDAGRAPH_CAPTURE_SIZES]", None),
    ],
)
def test_phase_markers_follow_the_meaning_of_progress_lines(engine, line, phase):
    from bringup.engines.base import get_engine

    assert get_engine(engine).phase_of(line) == phase


def test_a_logged_copy_of_an_exception_gives_way_to_the_raised_one_with_frames():
    """SGLang logs "AcceleratorError: CUDA error: ..." with its remedy, then raises it: the raised
    one's frames say where it struck."""
    out = explain_file(LOGS / "sglang-h200-prefill-graph-illegal-memory-access.log")
    assert out.evidence[0].startswith("torch.AcceleratorError: CUDA error: an illegal memory access")
    assert (out.root_exception or "").endswith("in synchronize (/tmp/site/torch/cuda/__init__.py:1083)")


def test_a_failure_inside_torch_compile_implicates_the_switch_that_turns_it_off():
    """Triton cannot build its launcher (no C compiler) while Inductor compiles vLLM's graph: the
    frames are torch.compile's, and --enforce-eager (left off, its 'false' level) is what runs it
    (vllm docs/design/debug_vllm_compile.md)."""
    lines = tb(
        '  File "/x/vllm/v1/worker/gpu_worker.py", line 298, in determine_available_memory',
        "    self.model_runner.profile_run()",
        '  File "/x/torch/_inductor/compile_fx.py", line 878, in fx_codegen_and_compile',
        "    compiled_fn = graph.compile_to_fn()",
        '  File "/x/triton/runtime/build.py", line 32, in _build',
        '    raise RuntimeError("Failed to find C compiler. Please specify via CC environment variable.")',
        exc="torch._inductor.exc.InductorError: RuntimeError: Failed to find C compiler. Please specify via CC "
        "environment variable.",
    )
    c = classify(lines, "vllm", "kv-alloc", ())
    assert c.implicated_levels.get("--enforce-eager") == ["false"], c.implicated_levels


# -- a class from where it raised (issue 36, item 3) -------------------------------------------------


def test_an_exception_raised_outside_the_engine_and_its_libraries_stays_unknown():
    frame = ('  File "/home/u/my_script.py", line 3, in main', "    go()")
    c = classify(tb(*frame, exc="KeyError: 'x'"), "vllm", "load-weights", signatures=())
    assert c.failure_class == "unknown"


def test_tokenizer_loading_that_no_rule_knows_is_model_load():
    frames = (
        '  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 80, in __init__',
        "    x()",
        '  File "/usr/lib/python3.12/site-packages/vllm/tokenizers/registry.py", line 120, in get_tokenizer',
        "    y()",
    )
    c = classify(tb(*frames, exc="KeyError: 'added_tokens_decoder'"), "vllm", "kv-alloc", signatures=())
    assert c.failure_class == "model-load"


def _launch(flags: str) -> list[str]:
    return [f"(APIServer pid=1) INFO 12-04 10:00:00 [utils.py:1] non-default args: {flags}"]


def test_a_failure_in_the_module_a_user_value_selects_is_that_settings_bad_value():
    frames = (
        '  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 80, in __init__',
        "    x()",
        '  File "/usr/lib/python3.12/site-packages/vllm/model_executor/model_loader/gguf_loader.py", line 60, in load',
        "    y()",
    )
    lines = _launch("{'model': '/m', 'load_format': 'gguf'}") + tb(
        *frames, exc="KeyError: 'general.architecture'"
    )
    c = classify(lines, "vllm", "load-weights", signatures=())
    assert c.failure_class == "bad-flag", c.hint
    # without the user's setting, the loader's component classes it
    c2 = classify(tb(*frames, exc="KeyError: 'general.architecture'"), "vllm", "load-weights", signatures=())
    assert c2.failure_class == "model-load"


def test_a_module_that_a_users_dotted_value_names_and_does_not_import_is_bad_flag():
    frames = (
        '  File "/usr/lib/python3.12/site-packages/vllm/utils/import_utils.py", line 40, in resolve_obj_by_qualname',
        "    importlib.import_module(module_name)",
    )
    exc = "ModuleNotFoundError: No module named 'my_plugins'"
    lines = _launch("{'model': '/m', 'worker_cls': 'my_plugins.workers.MyWorker'}") + tb(*frames, exc=exc)
    c = classify(lines, "vllm", "parse-args", signatures=())
    assert c.failure_class == "bad-flag" and "--worker-cls" in c.implicates
    # the same import of a package no setting names is a missing dependency
    assert (
        classify(tb(*frames, exc=exc), "vllm", "parse-args", signatures=()).failure_class
        == "missing-dependency"
    )
