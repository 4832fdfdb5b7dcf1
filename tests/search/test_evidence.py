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
    assert named_in_line("the pytorch sampler does not support top-k here", SAMPLER, "pytorch")
    assert named_in_line("ValueError: Cannot find the config file for awq", QUANT, "awq")
    assert named_in_line("sampling_backend='pytorch' is not supported", SAMPLER, "pytorch")
