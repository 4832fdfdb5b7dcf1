"""The dry run's plumbing, with a stand-in child (no engine import): verdicts, graceful failures,
the refusal as an Outcome, and a scenario run that never launches a refused candidate."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from bringup.core.candidate import Candidate
from bringup.dryrun import DryRun, DryVerdict, refusal_outcome
from tests.paths import ROOT

SELECTOR = (
    "Selected backend AttentionBackendEnum.FLASHMLA is not valid for this configuration. "
    "Reason: ['compute capability not supported', 'FlashMLA Dense is only supported on Hopper devices.']"
)

CHILD = textwrap.dedent(
    f"""
    import json, sys
    print(json.dumps({{"ready": True, "version": "0.32.0", "seconds": 0.01}}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        argv = req["argv"]
        if "--die" in argv:
            sys.exit(3)
        if "FLASHMLA" in argv:
            ans = {{"status": "refused", "message": "ValueError: " + {SELECTOR!r}, "check": "attention",
                   "flag": "--attention-backend", "phase": "load-weights",
                   "traceback": ["Traceback (most recent call last):",
                                 '  File "/x/vllm/platforms/cuda.py", line 451, in get_attn_backend_cls',
                                 "ValueError: " + {SELECTOR!r}]}}
        else:
            ans = {{"status": "passes", "message": "passes (cc " + str(req["facts"]["gpu.compute_capability"]) + ")"}}
        ans["id"] = req["id"]
        print(json.dumps(ans), flush=True)
    """
)


class FakeAdapter:
    display = "vLLM"

    def __init__(self, script: Path):
        self.script = script

    def child_argv(self, python: str, device: str) -> list[str]:
        return [python, str(self.script)]

    def request(self, cand: Candidate, facts: dict[str, Any]) -> dict[str, Any]:
        return {"argv": cand.argv_flags(), "env": cand.env_dict, "model": cand.model, "facts": facts}

    def importable(self, python: str) -> str | None:
        return None


FACTS = {"device": "cuda", "gpu.compute_capability": 12.0, "model.attention": "mla"}


def cand(flags: dict) -> Candidate:
    return Candidate.make("vllm", "org/model", flags, {})


@pytest.fixture
def dry(tmp_path: Path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    d = DryRun("vllm", sys.executable, dict(FACTS), "0.32.0", "0.32.0", adapter=FakeAdapter(script))
    yield d
    d.close()


def test_verdicts_come_from_the_child_and_are_cached(dry: DryRun) -> None:
    v = dry.check(cand({"--attention-backend": "FLASHMLA"}))
    assert v.refused and v.flag == "--attention-backend" and "compute capability not supported" in v.message
    assert v.label == "refused by vLLM 0.32.0's own check, no launch"
    ok = dry.check(cand({"--attention-backend": "TRITON_MLA"}))
    assert ok.status == "passes" and "12.0" in ok.message  # the facts reached the child
    assert dry.check(cand({"--attention-backend": "FLASHMLA"})) is v  # asked once per candidate
    assert len(dry.costs) == 1  # the first answer is the cold one; one warm answer timed


def test_a_child_that_dies_is_cannot_check_said_once(dry: DryRun) -> None:
    assert dry.check(cand({"--attention-backend": "TRITON_MLA"})).status == "passes"
    v = dry.check(cand({"--die": True}))
    assert v.status == "cannot" and "exited" in v.message
    later = dry.check(cand({"--attention-backend": "FLASHMLA"}))
    assert later.status == "cannot" and not later.refused
    assert len(dry.notes) == 1 and dry.notes[0].startswith("dry run: cannot check")


def test_another_version_or_no_engine_is_cannot_check(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text("raise SystemExit('never started')")
    other = DryRun("vllm", sys.executable, FACTS, "0.24.0", "0.32.0", adapter=FakeAdapter(script))
    v = other.check(cand({}))
    assert v.status == "cannot" and "0.32.0 is installed, the target is 0.24.0" in v.message
    assert not other.available and len(other.notes) == 1
    none = DryRun("vllm", sys.executable, FACTS, "0.32.0", None, adapter=FakeAdapter(script))
    assert none.check(cand({})).status == "cannot"
    unknown = DryRun("no-such-engine", sys.executable, FACTS, "1.0", "1.0")
    assert "no dry-run adapter" in unknown.check(cand({})).message


def test_a_child_that_never_starts_is_cannot_check(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text("import sys; print('not json', flush=True)")
    d = DryRun("vllm", sys.executable, FACTS, "0.32.0", "0.32.0", adapter=FakeAdapter(script))
    v = d.check(cand({}))
    assert v.status == "cannot" and "unreadable hello" in v.message


def test_refusal_outcome_reads_like_the_launch_that_printed_it() -> None:
    c = cand({"--attention-backend": "FLASHMLA"})
    v = DryVerdict(
        "refused",
        "ValueError: " + SELECTOR,
        "0.32.0",
        "vLLM",
        check="attention",
        flag="--attention-backend",
        phase="load-weights",
        traceback=("Traceback (most recent call last):", "ValueError: " + SELECTOR),
        seconds=0.05,
    )
    out = refusal_outcome(v, c, "vllm")
    assert out.status == "fails" and out.launched is False
    assert out.evidence[0].startswith("refused by vLLM 0.32.0's own check, no launch")
    assert any("compute capability not supported" in e for e in out.evidence)
    assert out.failure_class == "unsupported-hardware" and out.phase == "load-weights"
    assert "--attention-backend" in out.implicates
    assert "FLASHMLA" in out.implicated_levels["--attention-backend"]
    assert out.timings.simulated == 0.0 and out.candidate_key == c.key()
    json.loads(out.model_dump_json())  # it is written as outcome.json


@pytest.mark.slow
def test_a_run_never_launches_what_the_engine_refuses(tmp_path: Path, monkeypatch, dry: DryRun) -> None:
    """The seeds' kind of trap on vLLM: a recipe pins FLASHMLA on SM120. With the dry run the
    refusal is an attempt with purpose dry-run, no launch, and the search goes on from it."""
    import bringup.dryrun as dryrun_pkg
    from bringup.session.run import Run, RunSettings

    monkeypatch.setattr(dryrun_pkg, "for_target", lambda target, facts: dry)
    scenario = ROOT / "bringup/data/scenarios/deepseek-v2-lite-sm120-vllm.yaml"
    s = RunSettings(
        scenario=str(scenario),
        dry_run="always",  # a scenario: asked only when told (auto asks real engines)
        knowledge=False,
        max_launches=6,
        time_scale=0.001,
        minimize=False,
    )
    res = Run(s, tmp_path).execute()
    dry_attempts = [a for a in res.attempts if a.purpose == "dry-run"]
    assert dry_attempts and dry_attempts[0].changes == "(baseline)"
    assert "refused by vLLM 0.32.0's own check, no launch" in dry_attempts[0].evidence
    launched = [a for a in res.attempts if a.purpose in ("search", "screen")]
    assert all("FLASHMLA" not in a.changes or "TRITON" in a.changes for a in launched)
    assert res.launches == len(launched)  # a dry run is not a launch
    assert (Path(dry_attempts[0].trial_dir) / "dryrun.json").is_file()


def test_sglang_not_installed_is_said_once_and_the_run_goes_on() -> None:
    """for_target on an SGLang target whose interpreter has no sglang (this venv): cannot check."""
    from types import SimpleNamespace

    from bringup.dryrun import for_target

    engine = SimpleNamespace(
        log_dialect="sglang", python=sys.executable, info=SimpleNamespace(distributions=["sglang"])
    )
    d = for_target(SimpleNamespace(engine=engine, version="0.5.23"), dict(FACTS))
    v = d.check(cand({"--attention-backend": "fa3"}))
    assert v.status == "cannot" and not d.available
    assert d.notes == [f"dry run: cannot check: sglang not installed for {sys.executable}"]
    assert d.check(cand({})).status == "cannot" and len(d.notes) == 1


@pytest.mark.slow
def test_space_shows_where_each_verdict_came_from(monkeypatch, dry: DryRun) -> None:
    """`bringup space --dry-run always --json`: each level's engine check beside the knowledge
    verdict, and every verdict says whether a rule or a fact gave it."""
    from typer.testing import CliRunner

    import bringup.dryrun as dryrun_pkg
    from bringup.cli import app

    monkeypatch.setattr(dryrun_pkg, "for_target", lambda target, facts: dry)
    scenario = ROOT / "bringup/data/scenarios/deepseek-v2-lite-sm120-vllm.yaml"
    res = CliRunner().invoke(app, ["space", "--scenario", str(scenario), "--dry-run", "always", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    rows = {(r["flag"], r["level"]): r for r in data["levels"]}
    flashmla = rows[("--attention-backend", "FLASHMLA")]
    assert flashmla["dry_run"]["status"] == "refused"
    assert flashmla["dry_run"]["label"] == "refused by vLLM 0.32.0's own check, no launch"
    assert any(v["from"] == "rule vllm-flashmla-cc" for v in flashmla["verdicts"])
    assert rows[("--attention-backend", "TRITON_MLA")]["dry_run"]["status"] == "passes"
    assert data["dry_run_notes"] == []


def test_auto_asks_a_real_engine_on_a_gpu_and_nothing_else() -> None:
    """--dry-run auto (the default): on a GPU target of a real engine, where a launch costs minutes;
    not on a CPU target (the child's cold start costs what a launch of a small model does) nor for
    a scenario's imitation (the installed engine is not what is launched). always and never as said."""
    from bringup.dryrun import wanted
    from bringup.session.settings import RunSettings

    gpu, cpu = {"device": "cuda"}, {"device": "cpu"}
    assert RunSettings().dry_run == "auto"
    assert wanted("auto", gpu, imitation=False)
    assert not wanted("auto", cpu, imitation=False)
    assert not wanted("auto", gpu, imitation=True)
    assert wanted("always", cpu, imitation=True) and wanted("always", gpu, imitation=True)
    assert not wanted("never", gpu, imitation=False)


def test_a_backend_refused_for_its_block_size_implicates_the_block_size_too() -> None:
    """vLLM's selector says why it refuses a backend ('block_size not supported'): the flag that
    sets that property is implicated beside the backend, with its level, since changing either
    cures it (composed faults: FLASH_ATTN, TRITON_ATTN and FLEX_ATTENTION all refused block 24)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("vllm_child", ROOT / "bringup" / "dryrun" / "vllm_child.py")
    assert spec and spec.loader
    child = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(child)  # no vLLM import at module level: the engine is imported in main()
    assert child._reason_flags([["block_size not supported"]]) == ["--block-size"]
    assert child._reason_flags([["compute capability not supported"], ["kv_cache_dtype not supported"]]) == [
        "--kv-cache-dtype"
    ]
    assert child._reason_flags([["head_size not supported"]]) == []

    cand = Candidate.make("vllm", "m", {"--attention-backend": "FLASH_ATTN", "--block-size": "24"})
    v = DryVerdict(
        "refused",
        "ValueError: Selected backend AttentionBackendEnum.FLASH_ATTN is not valid for this configuration. "
        "Reason: ['block_size not supported']",
        "0.32.0",
        "vLLM",
        check="attention",
        flag="--attention-backend",
        also=("--block-size",),
        phase="load-weights",
    )
    out = refusal_outcome(v, cand, "vllm")
    assert out.implicates[:2] == ["--attention-backend", "--block-size"]
    assert out.implicated_levels["--block-size"] == ["24"]
    assert out.implicated_levels["--attention-backend"] == ["FLASH_ATTN"]


def test_sglang_child_runs_the_checks_the_engine_runs_before_its_processes(tmp_path) -> None:
    """SGLang checks the served name's colon (and parallel sizes, LoRA, ...) in
    ServerArgs.check_server_args, which the engine calls before it starts a process
    (entrypoints/engine.py, SGLang 0.5.16), not in ServerArgs.__post_init__: a dry run that stopped
    at prepare_server_args let a launch fail on it (H100, 2026-12-06). A stand-in SGLang package
    with the real names (sglang/srt/server_args.py) answers through the child's own pipe protocol."""
    import subprocess

    pkg = tmp_path / "sglang" / "srt"
    pkg.mkdir(parents=True)
    (tmp_path / "sglang" / "__init__.py").write_text("__version__ = '0.0-standin'\n")
    (pkg / "__init__.py").write_text("")
    (pkg / "server_args.py").write_text(
        "class ServerArgs:\n"
        "    def __init__(self, argv):\n"
        "        self.model_path = argv[argv.index('--model-path') + 1]\n"
        "        self.served_model_name = dict(zip(argv, argv[1:])).get('--served-model-name', self.model_path)\n"
        "    def check_server_args(self):\n"
        "        assert ':' not in self.served_model_name, (\n"
        "            \"served_model_name cannot contain a colon (':') character. \"\n"
        "            f\"Invalid value: '{self.served_model_name}'\")\n"
        "def prepare_server_args(argv):\n"
        "    return ServerArgs(argv)\n"
    )
    child = ROOT / "bringup" / "dryrun" / "sglang_child.py"
    reqs = [
        {"id": 1, "model": str(tmp_path / "m"), "argv": ["--served-model-name", "llama3.1:8b"], "facts": {}},
        {"id": 2, "model": str(tmp_path / "m"), "argv": ["--served-model-name", "llama3.1-8b"], "facts": {}},
    ]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, str(child)],
        input="".join(json.dumps(r) + "\n" for r in reqs),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    hello, colon, plain = (json.loads(ln) for ln in out.stdout.splitlines())
    assert hello["ready"], hello
    assert colon["status"] == "refused" and colon["check"] == "server-args"
    assert "served_model_name cannot contain a colon" in colon["message"]
    assert plain["status"] == "passes"
