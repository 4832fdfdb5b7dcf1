"""evidence.named_in_line: what counts as a failure naming a factor's level."""

from __future__ import annotations

from bringup.search.evidence import named_in_line
from bringup.search.space import Factor

SAMPLER = Factor("--sampling-backend", "choice", ["flashinfer", "pytorch"], "sampling_backend")
QUANT = Factor("--quantization", "choice", ["awq", "fp8"], "quantization")


def test_a_level_in_the_message_names_it_but_a_path_component_does_not():
    torch_assert = (
        "/pytorch/aten/src/ATen/native/cuda/MultinomialKernel.cu:112: binarySearchForMultinomial: "
        "Assertion `probability tensor contains either `inf`, `nan` or element < 0` failed."
    )
    assert not named_in_line(torch_assert, SAMPLER, "pytorch")  # torch's own source tree
    assert not named_in_line('File "/usr/lib/python3/site-packages/pytorch/x.py", line 3', SAMPLER, "pytorch")
    a2a = Factor("--moe-a2a-backend", "choice", ["deepep", "none"], "moe_a2a_backend")
    frame = 'File "/usr/local/lib/python3.12/dist-packages/sglang/srt/layers/moe/token_dispatcher/deepep.py", line 9'
    assert named_in_line(frame, a2a, "deepep")  # a file named for the level is its code
    assert named_in_line("the pytorch sampler does not support top-k here", SAMPLER, "pytorch")
    assert named_in_line("ValueError: Cannot find the config file for awq", QUANT, "awq")
    assert named_in_line("sampling_backend='pytorch' is not supported", SAMPLER, "pytorch")


def test_a_switch_is_named_by_what_it_switches():
    custom_ar = Factor("--disable-custom-all-reduce", "switch", [], "disable_custom_all_reduce")
    crash = "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:164 'an illegal memory access was encountered'"
    assert named_in_line(crash, custom_ar, "false")  # vllm #52457: the kernel the switch turns off
    assert not named_in_line(
        "torch.AcceleratorError: CUDA error: an illegal memory access", custom_ar, "false"
    )
    # a choice is not a switch: its dest's words are not a subject (and a short subject names nothing)
    assert not named_in_line(
        crash, Factor("--use-custom-all-reduce", "choice", ["a", "b"], "use_custom_all_reduce"), "a"
    )
    assert not named_in_line("no such graph", Factor("--no-graph", "switch", [], "no_graph"), "false")


def test_a_hang_s_progress_lines_name_none_of_the_values_they_echo():
    """A vLLM hang in NCCL start-up ends its log with INFO progress records; "Using max model len
    32768" echoes the launch's own --max-model-len and said nothing about the hang (it sent the
    search after that flag). A warning or an unlevelled line of the same tail still speaks, and so
    does an INFO line beneath an exception."""
    from bringup.observe.outcome import Outcome
    from bringup.search.evidence import message_lines, relevance

    tail = [
        "(APIServer pid=4242) INFO 12-06 04:25:23 [model.py:1510] Using max model len 32768",
        "(Worker_TP0 pid=4373) INFO 12-06 04:25:43 [pynccl.py:113] vLLM is using nccl==2.28.9",
        "(EngineCore_DP0 pid=4339) WARNING 12-06 04:27:46 [x.py:1] max_model_len is large for this GPU",
    ]
    mml = Factor("--max-model-len", "number", ["4096", "32768"], "max_model_len")
    hang = Outcome(status="timeout", failure_class="hang", phase="distributed-init", evidence=tail[:2])
    assert message_lines(hang) == []
    named = relevance(
        hang, [mml], {"--max-model-len": "32768"}, set(), lambda n: mml if n == mml.name else None
    )
    assert "--max-model-len" not in named.weights
    warned = hang.model_copy(update={"evidence": tail})
    assert message_lines(warned) == [tail[2]]
    crash = hang.model_copy(update={"status": "fails", "root_exception": "RuntimeError: boom"})
    assert tail[0] in message_lines(crash)


def test_a_platform_word_or_a_compound_names_no_setting():
    """Every CUDA error says "CUDA" and "device": neither names a user's --device cuda (SGLang's
    context-length check "may lead to incorrect model outputs or CUDA errors"; "device-side assert
    triggered"). The dest as a word of its own still does."""
    device = Factor("--device", "choice", ["cuda", "cpu"], "device")
    assert not named_in_line("AcceleratorError: CUDA error: device-side assert triggered", device, "cuda")
    assert not named_in_line("This may lead to incorrect model outputs or CUDA errors.", device, "cuda")
    assert named_in_line(
        "RuntimeError: Expected one of cpu, cuda device type at start of device string", device, "x"
    )
    assert named_in_line("ValueError: unknown device: 'npu'", device, "npu")


def test_bringup_s_own_notes_are_not_the_failure_s_words():
    """The classifier's note "torch-compile (raised inside it) is used by: --enable-torch-compile
    true" is weighed where it was inferred (the failing code's level); read again as a line it named
    the flag (1.0) and, for a flag spelled with "enable", read as the engine's advice (3.0)."""
    from bringup.observe.outcome import Outcome
    from bringup.search.evidence import W_LINE, relevance

    tc = Factor("--enable-torch-compile", "switch", [], "enable_torch_compile")
    out = Outcome(
        status="fails",
        failure_class="unsupported-hardware",
        root_exception="OutOfResources: out of resource: shared memory, Required: 98304",
        evidence=["torch-compile (raised inside it) is used by: --enable-torch-compile true"],
    )
    named = relevance(out, [tc], {tc.name: "true"}, set(), lambda n: tc if n == tc.name else None)
    assert named.weights.get(tc.name, 0.0) < W_LINE and not named.advised
