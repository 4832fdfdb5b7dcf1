"""Issue 40, item 2: a server that requires the key the user's shell gives it (VLLM_API_KEY, as vLLM
documents it) is probed with that key, and the key is still written nowhere. Before, the probes sent
no key: a working server was reported failing in phase `ready` with HTTP 401 and unrelated remedies.
The server is the fake OpenAI server (tests/fake_openai_server.py), which reads VLLM_API_KEY as vLLM
does; the same on the real vLLM CPU build: tests/guard/test_hardening_vllm.py."""

from __future__ import annotations

import sys

import pytest

from bringup.core.candidate import Candidate
from bringup.engines.base import Engine
from bringup.trial.launch import Trial, TrialSettings
from tests.paths import TESTS

KEY = "sk-env-Zq81FromTheShell"


class _FakeVllm(Engine):
    """vLLM's adapter and data (its api_key: entry), launching the fake server."""

    def launch_argv(self, cand, host, port):
        fake = str(TESTS / "fake_openai_server.py")
        return [sys.executable, fake, "--model", cand.model, "--host", host, "--port", str(port)]


@pytest.mark.slow
def test_a_server_keyed_by_the_inherited_variable_is_probed_with_it(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    out = Trial(
        _FakeVllm("vllm"), Candidate.make("vllm", "fake-model", {}), tmp_path / "t", TrialSettings(timeout=60)
    ).run()
    assert out.status == "works", (out.phase, out.evidence)
    assert out.probes and not any("401" in p.detail for p in out.probes)
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f
