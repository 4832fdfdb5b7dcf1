"""A real multi-fault bring-up on the vLLM CPU build (issue 22 item 5).

The baseline carries four mistakes a user brings from a bigger GPU box, each of which really
fails here (docs/multifault.md: how, with the real error lines). They form an onion: the
max-model-len check refuses the arguments before anything starts, the tensor-parallel check
stops EngineCore before any worker, the memory fraction stops the worker before the weights, and
the block size only fails once the KV cache is laid out. A person reads each error and fixes that
one mistake: five launches. bringup must do no worse, and classify each failure as what it is.
"""

from __future__ import annotations

import pytest
from multifault_util import Mistake, baseline_of, problems, run_bringup, table

pytestmark = [pytest.mark.engine, pytest.mark.timeout(3000)]

# In onion order: the first one still in a command is the one whose failure shows.
MISTAKES = [
    Mistake(
        "--max-model-len",
        "999999",
        "User-specified max_model_len (999999) is greater than the derived max_model_len",
        frozenset({"bad-flag"}),
        "pydantic ValidationError while the arguments become a config; the message names the model's 2048",
        waived_by=(("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1"),),
    ),
    Mistake(
        "--tensor-parallel-size",
        "2",
        "Not enough allowed NUMA nodes to bind threads of 2 local CPUWorkers",
        frozenset({"unsupported-hardware", "distributed-init", "incompatible-options"}),
        "EngineCore's AssertionError: this machine has one NUMA node; 'decrease DP/TP/PP'",
    ),
    Mistake(
        "--gpu-memory-utilization",
        "0.99",
        "is less than desired CPU memory utilization",
        frozenset({"oom-kv-cache"}),
        "the worker's ValueError: host memory free is less than the fraction asked",
    ),
    Mistake(
        "--block-size",
        "17",
        "No common block size for 17",
        frozenset({"incompatible-options", "bad-flag"}),
        "ValueError from select_common_block_size: CPU_ATTN needs MultipleOf(32)",
    ),
]


def test_four_mistakes_from_a_gpu_box_validate_in_five_launches(tiny_model, tmp_path):
    d = run_bringup("vllm", tiny_model, baseline_of(MISTAKES), tmp_path, max_launches=len(MISTAKES) + 1)
    found = problems(d, MISTAKES)
    assert not found, "\n".join(found) + "\n" + table(d)
    assert d["_rc"] == 0 and d["status"] == "validated"
