"""Issue 40, item 2: the key a server wants is read where the engine reads it (engines.yaml
`api_key:`): its flag first, then its documented variable, which the user's shell passes to the
server without the candidate knowing it (a secret is never part of a candidate)."""

from __future__ import annotations

from bringup.core.candidate import Candidate
from bringup.engines.base import Engine


def test_the_flag_comes_before_the_variable_as_vllm_reads_them():
    vllm = Engine("vllm")
    with_flag = Candidate.make("vllm", "m", {"--api-key": ("sk-flag-1", "sk-flag-2")})
    assert vllm.api_key(with_flag, {"VLLM_API_KEY": "sk-env"}) == "sk-flag-1"
    assert vllm.api_key(Candidate.make("vllm", "m", {}), {"VLLM_API_KEY": "sk-env"}) == "sk-env"
    assert vllm.api_key(Candidate.make("vllm", "m", {}), {"VLLM_API_KEY": ""}) is None


def test_each_engine_reads_only_what_it_documents():
    """SGLang reads the flag only (no variable in srt/environ.py); transformers serve takes no key."""
    env = {"VLLM_API_KEY": "sk-env", "SGLANG_API_KEY": "sk-env"}
    assert Engine("sglang").api_key(Candidate.make("sglang", "m", {}), env) is None
    assert Engine("sglang").api_key(Candidate.make("sglang", "m", {"--api-key": "sk-s"}), env) == "sk-s"
    assert Engine("transformers").api_key(Candidate.make("transformers", "m", {}), env) is None


def test_the_launch_environment_carries_the_inherited_key_the_candidate_leaves_out(monkeypatch):
    from bringup.engines.scenario import snapshot_registry
    from bringup.env.registry import launch_environment

    monkeypatch.setenv("VLLM_API_KEY", "sk-inherited-Zq81")
    reg = snapshot_registry("vllm", "0.32.0")
    cand = Candidate.make("vllm", "m", {}, launch_environment(reg))
    assert "VLLM_API_KEY" not in cand.env_dict  # a secret: never in a candidate, so never on disk
    eng = Engine("vllm")
    assert eng.api_key(cand, eng.launch_env(cand)) == "sk-inherited-Zq81"
