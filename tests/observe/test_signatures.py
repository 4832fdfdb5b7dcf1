"""Classification: root cause over generic last lines, and the knowledge file's validation."""

import pytest

from bringup.core.datafiles import KnowledgeFileError, classes
from bringup.observe.signatures import classify, default_signatures, load_signatures
from tests.paths import DATA

LOGS = DATA / "logs"


def _lines(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


def test_nan_probability_beats_device_assert_in_decode():
    c = classify(_lines("sglang-nan-decode.log"), "sglang", "decode")
    assert c.failure_class == "nan-output" and c.phase == "decode"
    assert "probability tensor contains either" in c.evidence[0]
    assert any("device-side assert triggered" in e for e in c.evidence)
    assert "--nsa-decode-backend" in c.implicates and "--kv-cache-dtype" in c.implicates
    assert not any("Received sigquit" in e for e in c.evidence)  # a generic line is not evidence


def test_nsa_fp8_store_assert_is_incompatible_options():
    c = classify(_lines("sglang-nsa-fp8-assert.log"), "sglang", "graph-capture")
    assert c.failure_class == "incompatible-options"
    assert "nsa_kv_cache_store_fp8" in c.evidence[0]


def test_graph_capture_oom_is_not_generic_oom():
    c = classify(_lines("sglang-graph-oom.log"), "sglang", "graph-capture")
    assert c.failure_class == "oom-graph-capture" and c.phase == "graph-capture"
    # The root is the original OOM; SGLang's re-raise ("Capture cuda graph failed") follows it.
    assert c.evidence[0].startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert any(e.startswith("Exception: Capture cuda graph failed") for e in c.evidence[1:])
    assert c.signature_id == "sglang-graph-capture-failed"
    assert "--mem-fraction-static" in c.hint


@pytest.mark.parametrize(
    "line",
    [
        # FlashInfer's JIT on a machine with the CUDA runtime but no toolkit (flashinfer/jit/cpp_ext.py)
        "RuntimeError: Could not find nvcc and default cuda_home='/usr/local/cuda' doesn't exist",
        # Triton building its launcher with no gcc or clang (triton/runtime/build.py)
        "RuntimeError: Failed to find C compiler. Please specify via CC environment variable.",
        "torch._inductor.exc.InductorError: RuntimeError: Failed to find C compiler. Please specify via CC "
        "environment variable or set triton.knobs.build.impl.",
    ],
)
def test_a_missing_compiler_toolchain_is_a_missing_dependency_not_a_bad_path(line):
    """ "doesn't exist" names a path no flag gave: the tool is missing, the flags are not wrong."""
    c = classify(
        ["Traceback (most recent call last):", '  File "x.py", line 1, in f', line], "vllm", "kv-alloc"
    )
    assert c.failure_class == "missing-dependency" and c.signature_id == "jit-toolchain-missing"


# SGLang's watchdog stops a scheduler that made no progress and SIGQUITs the parent: the server
# exits though nothing raised (shapes from sglang/srt/utils/watchdog.py and SGLang's hang guide).
_WATCHDOG = [
    "[2026-12-06 08:01:02 TP0] Decode batch, #running-req: 1, #token: 40, token usage: 0.00, gen throughput (token/s): 0.00",
    "[2026-12-06 08:06:02 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
    "[2026-12-06 08:06:02 TP1] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
    "[2026-12-06 08:06:02 TP0] Pyspy dump for PID 4187:",
    'Thread 4187 (active): "MainThread"',
    "    cuStreamSynchronize (libcuda.so.1)",
    "    synchronize (torch/cuda/streams.py:92)",
    "[2026-12-06 08:06:07] Received sigquit from a child process. It usually means the child failed.",
]


@pytest.mark.parametrize(
    "first", [_WATCHDOG[1], "[2025-04-03 20:06:34 DP1 TP0] Watchdog timeout (self.watchdog_timeout=300)"]
)
def test_an_sglang_watchdog_stop_is_a_hang_and_a_real_exception_beside_it_wins(first):
    c = classify([_WATCHDOG[0], first, *_WATCHDOG[2:]], "sglang", "decode")
    assert c.failure_class == "hang" and c.signature_id == "sglang-scheduler-watchdog", c
    raised = [
        "Traceback (most recent call last):",
        '  File "/x/sglang/srt/managers/scheduler.py", line 9, in f',
        "    g()",
        "RuntimeError: NCCL error: unhandled cuda error",
    ]
    assert classify([*raised, first, *_WATCHDOG[2:]], "sglang", "decode").failure_class == "distributed-init"
    assert classify([first], "vllm", "decode").failure_class != "hang"  # SGLang's words only


def test_fa3_requires_sm90():
    c = classify(_lines("sglang-fa3-sm120.log"), "sglang", "kv-alloc")
    assert c.failure_class == "unsupported-hardware"
    assert "requires SM>=80 and SM<=90" in c.evidence[0]


def test_generic_wrapper_is_evidence_only_when_alone():
    generic = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
    alone = classify(["INFO starting", generic], "vllm", "load-weights")
    assert alone.failure_class == "unknown" and alone.evidence == [generic]
    withroot = classify(
        [
            "ValueError: Available memory on node 0 (7.13/8.46 GiB) on startup is less than desired "
            "CPU memory utilization (0.99, 8.38 GiB).",
            generic,
        ],
        "vllm",
        "load-weights",
    )
    assert withroot.failure_class == "oom-kv-cache" and generic not in withroot.evidence


def test_unknown_keeps_error_lines_as_evidence():
    c = classify(
        ["INFO ok", "Traceback (most recent call last):", "  File x", "ZeroDivisionError: boom"],
        "vllm",
        "warmup",
    )
    assert c.failure_class == "unknown" and "ZeroDivisionError: boom" in c.evidence


def test_engine_scoping():
    line = "Capture cuda graph failed: CUDA out of memory."
    assert classify([line], "sglang", "graph-capture").failure_class == "oom-graph-capture"
    assert classify([line], "vllm", "graph-capture").failure_class != "oom-graph-capture"


def test_every_class_of_design_is_known_and_signatures_cover_failures():
    design = {
        "bad-flag",
        "missing-dependency",
        "unsupported-hardware",
        "incompatible-options",
        "oom-weights",
        "oom-kv-cache",
        "oom-graph-capture",
        "device-assert",
        "nan-output",
        "wrong-output",
        "hang",
        "port-in-use",
        "distributed-init",
        "unknown",
    }
    assert design <= set(classes())
    covered = {s.failure_class for s in default_signatures()}
    # wrong-output and hang come from probes and the clock, not from log lines
    assert design - {"wrong-output", "hang"} <= covered
    assert all(s.source and s.hint for s in default_signatures())


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            "{id: a, pattern: 'x', class: nonsense-class, hint: h, source: s}",
            "unknown class 'nonsense-class'",
        ),
        ("{id: a, pattern: '(', class: unknown, hint: h, source: s}", "pattern does not compile"),
        ("{id: a, pattern: 'x', class: unknown, phase: lunch, hint: h, source: s}", "unknown phase 'lunch'"),
        ("{id: a, pattern: 'x', class: unknown, hint: h}", "source"),
        ("{id: a, pattern: 'x', class: unknown, hint: h, source: s, colour: red}", "colour"),
    ],
)
def test_invalid_signature_files_name_file_and_field(tmp_path, entry, message):
    f = tmp_path / "bad.yaml"
    f.write_text(f"signatures:\n  - {entry}\n")
    with pytest.raises(KnowledgeFileError) as e:
        load_signatures([f])
    assert str(f) in str(e.value) and "signatures[0]" in str(e.value) and message in str(e.value)


def test_duplicate_ids_rejected(tmp_path):
    f = tmp_path / "dup.yaml"
    f.write_text(
        "signatures:\n  - {id: a, pattern: x, class: unknown, hint: h, source: s}\n"
        "  - {id: a, pattern: y, class: unknown, hint: h, source: s}\n"
    )
    with pytest.raises(KnowledgeFileError, match="duplicate id"):
        load_signatures([f])


def test_an_oom_while_loading_the_weights_is_the_split_or_the_size_not_the_memory_fraction():
    """Both engines load the weights before they apply their memory fraction (vLLM's
    gpu_worker.load_model, then determine_available_memory; SGLang's model_runner.initialize:
    load_model, then the memory pool): no fraction makes an allocator OOM while loading go away."""
    lines = [
        "Traceback (most recent call last):",
        '  File "/x/vllm/model_executor/model_loader/default_loader.py", line 300, in load_weights',
        "    param.copy_(w)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total "
        "capacity of 79.19 GiB of which 1.31 GiB is free.",
    ]
    c = classify(lines, "vllm", "load-weights")
    assert c.failure_class == "oom-weights"
    assert "--tensor-parallel-size" in c.implicates and "--quantization" in c.implicates
    assert "--gpu-memory-utilization" not in c.implicates


def test_a_record_before_the_failure_is_evidence_only_when_it_names_one_setting():
    """The record just above a traceback that names one setting of the launch by its field is
    evidence (vLLM's "Overriding num_gpu_blocks=52326 with num_gpu_blocks_override=1"); a status
    line that lists several of the launch's values (SGLang's pool summary) is not, nor a record
    that names a setting the launch does not have."""
    tb = [
        "[2026-12-06 10:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 1, in run',
        "    x()",
        "RuntimeError: something failed",
    ]
    one = "[2026-12-06 10:00:00 TP0] Overriding num_gpu_blocks=52326 with num_gpu_blocks_override=1"
    status = "[2026-12-06 10:00:00 TP0] max_total_num_tokens=314624, chunked_prefill_size=8192, max_running_requests=1229"
    given = {
        "--num-gpu-blocks-override": "1",
        "--chunked-prefill-size": "8192",
        "--max-running-requests": "1229",
    }
    assert any(
        "num_gpu_blocks_override=1" in e
        for e in classify([one, *tb], "sglang", None, settings=given).evidence
    )
    assert not any(
        "max_total_num_tokens" in e for e in classify([status, *tb], "sglang", None, settings=given).evidence
    )
    other = {"--max-model-len": "4096"}
    assert not any("Overriding" in e for e in classify([one, *tb], "sglang", None, settings=other).evidence)
