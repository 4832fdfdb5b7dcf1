"""A real multi-fault bring-up on the vLLM CPU build (issue 22 item 5).

The baseline carries four mistakes a user brings from a bigger GPU box, each of which really
fails here (docs/multifault.md: how, with the real error lines). They form an onion: the
max-model-len check refuses the arguments before anything starts, the tensor-parallel check
stops EngineCore before any worker, the memory fraction stops the worker before the weights, and
the block size only fails once the KV cache is laid out. A person reads each error and fixes that
one mistake: five launches. bringup must do no worse, and classify each failure as what it is.

The run is the session's `vllm_multifault` (conftest.py), read by the tests here and by
tests/guard/test_hardening_vllm.py (its baseline also carries `--api-key=KEY`, which is no mistake).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import bringup
from tests.multifault_util import VLLM_MISTAKES, problems, table

pytestmark = [pytest.mark.engine, pytest.mark.timeout(3000)]


def test_four_mistakes_from_a_gpu_box_validate_in_five_launches(vllm_multifault):
    d = vllm_multifault
    found = problems(d, VLLM_MISTAKES)
    assert not found, "\n".join(found) + "\n" + table(d)
    assert d["_rc"] == 0 and d["status"] == "validated"
    assert d["screening_launches"] == 0  # a launch of the tiny model is short: nothing to screen


def test_the_memory_plan_learns_from_the_runs_launches(vllm_multifault, tiny_model):
    """The memory plan was compared with what the engine reported, and the error kept, so a later
    plan on this machine is corrected by it (this was test_run_vllm's 0.99 run, two launches of
    its own; the 0.99 fraction is mistake 3 here, classified and fixed as it was there)."""
    runs = Path(vllm_multifault["_runs"])
    with sqlite3.connect(runs / "journal.sqlite") as c:
        errors = [r[0] for r in c.execute("SELECT rel_error FROM plan_errors WHERE rel_error IS NOT NULL")]
    assert errors
    rc, _, out, err = bringup(
        "plan",
        str(tiny_model),
        "--engine",
        "vllm",
        "--mem-fraction",
        "0.3",
        "--runs-dir",
        str(runs),
        "--json",
        check_json=False,
    )
    assert rc == 0, err
    plan = json.loads(out)
    assert plan["correction"]["samples"] == len(errors)
