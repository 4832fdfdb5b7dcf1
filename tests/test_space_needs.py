"""Factors that only matter for some models: a MoE kernel backend does nothing for a dense model
(the engine ignores the flag), so the search does not spend launches on it there."""

from __future__ import annotations

from bringup.candidate import Candidate, parse_flags
from bringup.helptext import bundled_help
from bringup.knowledge import Knowledge
from bringup.outcome import Outcome
from bringup.space import build_space, drop_inapplicable
from bringup.strategy import Strategy

VL = bundled_help("vllm", "0.32.0")
SG = bundled_help("sglang", "0.5.10.post1")


def test_moe_backends_are_not_searched_for_a_dense_model() -> None:
    base = Candidate.make("vllm", "m", parse_flags("--max-model-len 32768", VL))
    space = build_space("vllm", VL, base)
    assert space.get("--moe-backend") is not None
    gone = drop_inapplicable(space, {"model.moe": False, "device": "cuda"})
    assert space.get("--moe-backend") is None
    assert any(g.startswith("--moe-backend (needs model.moe") for g in gone)
    # the rest of the space is untouched
    assert space.get("--attention-backend") is not None and space.get("--enforce-eager") is not None


def test_moe_backends_stay_for_a_moe_model_and_when_the_model_is_unknown() -> None:
    for facts in ({"model.moe": True}, {}, {"model.moe": None}):
        base = Candidate.make("vllm", "m", parse_flags("--max-model-len 32768", VL))
        space = build_space("vllm", VL, base)
        assert drop_inapplicable(space, facts) == []
        assert space.get("--moe-backend") is not None


def test_sglang_moe_runner_backend_follows_the_same_rule() -> None:
    base = Candidate.make("sglang", "m", parse_flags("--tp 8", SG))
    space = build_space("sglang", SG, base)
    assert space.get("--moe-runner-backend") is not None
    drop_inapplicable(space, {"model.moe": False})
    assert space.get("--moe-runner-backend") is None and space.get("--attention-backend") is not None


def test_a_baseline_value_of_a_dropped_flag_stays_on_the_command_line() -> None:
    """Only the search leaves it alone: every candidate keeps what the user gave."""
    base = Candidate.make("vllm", "m", parse_flags("--moe-backend triton", VL))
    space = build_space("vllm", VL, base)
    drop_inapplicable(space, {"model.moe": False})
    assert space.get("--moe-backend") is None
    kn = Knowledge({"device": "cuda", "model.moe": False}, "vllm", "0.32.0", enabled=False)
    s = Strategy(space, base, kn, VL)
    seen = 0
    for _ in range(3):
        p = s.propose()
        assert p is not None and p.candidate.flag_dict.get("--moe-backend") == "triton"
        s.observe(p.candidate, Outcome(status="fails", failure_class="unknown", phase="load-weights"))
        seen += 1
    assert seen == 3
