"""A real multi-fault bring-up of `transformers serve` on CPU (issue 22 item 5).

The baseline carries mistakes a user brings from a CUDA box, each of which really fails here
(docs/multifault.md: how, with the real error lines): a device this machine does not have, a
quantization whose package is missing, an attention implementation whose package is missing, and
a continuous-batching cache sized for a big GPU, which only shows once the server is up and the
first request allocates it (every earlier mistake hides it). A person fixes one per launch.
"""

from __future__ import annotations

import pytest

from tests.multifault_util import Mistake, baseline_of, problems, run_bringup, table

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1800)]

# In onion order: the first one still in a command is the one whose failure shows.
MISTAKES = [
    Mistake(
        "--quantization",
        "bnb-4bit",
        "requires bitsandbytes",
        frozenset({"missing-dependency"}),
        "ImportError at model load: bitsandbytes is not installed",
    ),
    Mistake(
        "--device",
        "cuda",
        "Torch not compiled with CUDA enabled",
        frozenset({"unsupported-hardware"}),
        "AssertionError at model load: this torch has no CUDA",
    ),
    Mistake(
        "--attn-implementation",
        "flash_attention_2",
        "FlashAttention2 has been toggled on",
        frozenset({"missing-dependency"}),
        "ImportError at model load: flash-attn is not installed",
    ),
    Mistake(
        "--cb-num-blocks",
        "100000",
        "Memory footprint",
        frozenset({"oom-kv-cache"}),
        "ready, then the first request: MemoryError from the paged cache",
    ),
]


def test_four_mistakes_from_a_cuda_box_validate_in_five_launches(tiny_model, tmp_path):
    baseline = baseline_of(MISTAKES, "--continuous-batching")
    d = run_bringup("transformers", tiny_model, baseline, tmp_path, max_launches=len(MISTAKES) + 1)
    found = problems(d, MISTAKES)
    assert not found, "\n".join(found) + "\n" + table(d)
    assert d["_rc"] == 0 and d["status"] == "validated"
