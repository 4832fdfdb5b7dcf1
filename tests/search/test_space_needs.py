"""Factors that only matter for some models: a MoE kernel backend does nothing for a dense model
(the engine ignores the flag), so the search does not spend launches on it there, nor on the
engine's MoE variables."""

from __future__ import annotations

from bringup.core.candidate import Candidate, parse_flags
from bringup.env.registry import absent_components, load_registry, rank
from bringup.help.text import bundled_help
from bringup.knowledge.rules import Knowledge
from bringup.observe.outcome import Outcome
from bringup.search.space import build_space, drop_inapplicable
from bringup.search.strategy import Strategy

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


def test_moe_variables_are_not_ranked_for_a_dense_model() -> None:
    """A DeepGEMM failure whose evidence also names the MoE backend (the levels that load
    DeepGEMM) ranks MoE variables for a MoE model, not for a dense one; a variable the failure's
    own lines name is kept either way."""
    reg = load_registry("vllm", version="0.32.0", installed=False)
    failure = {
        "failure_class": "unknown",
        "implicates": ["--moe-backend", "--linear-backend", "env:VLLM_USE_DEEP_GEMM"],
        "evidence": [
            "RuntimeError: DeepGEMM backend is unavailable in the current vLLM environment",
            "deep-gemm (named in the error) is used by: --moe-backend deep_gemm; env:VLLM_USE_DEEP_GEMM 1",
        ],
    }
    moe = [r.var.name for r in rank(reg.variables.values(), failure, device="cuda")[:6]]
    assert "VLLM_MOE_USE_DEEP_GEMM" in moe
    absent = absent_components({"model.moe": False})
    assert absent == {"moe"} and absent_components({"model.moe": True}) == set()
    assert absent_components({}) == set()
    dense = [r.var.name for r in rank(reg.variables.values(), failure, device="cuda", absent=absent)]
    assert dense[0] == "VLLM_USE_DEEP_GEMM"
    assert not any("MOE" in n for n in dense)
    assert "VLLM_DEEP_GEMM_WARMUP" in dense[:4]
    # a MoE variable the lines name stays, even on a dense model
    named = {**failure, "evidence": [*failure["evidence"], "set VLLM_MOE_USE_DEEP_GEMM=0 to avoid it"]}
    assert "VLLM_MOE_USE_DEEP_GEMM" in [
        r.var.name for r in rank(reg.variables.values(), named, device="cuda", absent=absent)
    ]
