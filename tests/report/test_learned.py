"""A finished run's lessons (bringup/report/learned.py): one per failure on the way from the baseline
to the fix, cured by the changes its launches single out; used lessons weakened or confirmed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup.core.candidate import Candidate
from bringup.knowledge.learned_files import dump
from bringup.observe.outcome import Outcome, ProbeResult
from bringup.record.results import Attempt, LessonUse, RunResult
from bringup.report.learned import ExportError, learned
from tests.lessons_util import H200_SCOPE

BASE = {"--tensor-parallel-size": "8", "--gpu-memory-utilization": "0.99"}
TP_ROOT = "ValueError: Tensor parallel size (8) is larger than the number of GPUs (1) in /opt/x/y.py"
OOM_ROOT = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.10 GiB at port 8011 pid 4242"
FACTS = {
    "engine.name": "vllm",
    "engine.version": "0.32.0",
    "device": "cuda",
    "gpu.name": "NVIDIA H200",
    "gpu.compute_capability": 9.0,
    "gpu.count": 1,
    "gpu.link": "none",
    "model.architecture": "LlamaForCausalLM",
    "model.attention": "gqa",
    "model.weights_gib": 15.0,
}


def cand(**changes) -> Candidate:
    return Candidate.make("vllm", "/models/llama", BASE).with_changes(changes)


def outcome(
    c: Candidate, status: str = "fails", cls: str | None = None, phase: str | None = None, root: str = ""
) -> Outcome:
    o = Outcome(
        status=status,
        failure_class=cls,
        phase=phase,
        root_exception=root or None,
        evidence=[root] if root else [],
    )
    o.candidate = c.to_json()
    if status == "works":
        o.probes = [ProbeResult(name="health", passed=True)]
    return o


TP = {"cls": "bad-flag", "phase": "parse-args", "root": TP_ROOT}
OOM = {"cls": "oom-graph-capture", "phase": "graph-capture", "root": OOM_ROOT}


def write_run(
    tmp: Path, launches: list[tuple[str, Candidate, Outcome]], final: Candidate | None, lessons=()
) -> Path:
    """A run folder as `bringup run` leaves it: findings.json, trials/NN-*/outcome.json."""
    run_dir = tmp / "runs" / "r1"
    attempts = []
    for n, (purpose, c, o) in enumerate(launches, 1):
        tdir = run_dir / "trials" / f"{n:02d}-{purpose}-{c.key()[:8]}"
        tdir.mkdir(parents=True)
        (tdir / "outcome.json").write_text(o.model_dump_json())
        (tdir / "server.log").write_text("log\n")
        attempts.append(Attempt(number=n, purpose=purpose, changes="", status=o.status, trial_dir=str(tdir)))  # type: ignore[arg-type]
    base = cand()
    r = RunResult(
        run_id="r1",
        run_dir=str(run_dir),
        status="validated" if final else "budget",
        validated=final is not None,
        launches=len(launches),
        screening_launches=0,
        minimize_launches=0,
        simulated_hours=None,
        wall_seconds=1.0,
        final_command=None,
        final_candidate=final.to_json() if final else None,
        minimal_fix_verified=True,
        attempts=attempts,
        baseline=base.to_json(),
        facts=FACTS,
        hardware_fp="hw:1234",
        lessons=list(lessons),
    )
    (run_dir / "findings.json").write_text(r.model_dump_json())
    return run_dir


def onion(tmp: Path) -> Path:
    """The baseline fails on tp; tp dropped, it runs out of memory in graph capture; both fixed, it
    works; delta debugging's subset with only the memory change fails on tp again."""
    fixed_tp, both = (
        cand(**{"--tensor-parallel-size": None}),
        cand(**{"--tensor-parallel-size": None, "--gpu-memory-utilization": "0.9"}),
    )
    mem_only = cand(**{"--gpu-memory-utilization": "0.9"})
    off_path = cand(**{"--tensor-parallel-size": None, "--enforce-eager": True})
    return write_run(
        tmp,
        [
            ("search", cand(), outcome(cand(), **TP)),
            ("search", fixed_tp, outcome(fixed_tp, **OOM)),
            (
                "search",
                off_path,
                outcome(off_path, "fails", "unknown", "load-weights", "RuntimeError: eager broke"),
            ),
            ("search", both, outcome(both, "works")),
            ("minimize", mem_only, outcome(mem_only, **TP)),
        ],
        both,
    )


def test_each_failure_on_the_way_is_a_lesson_cured_by_its_own_change(tmp_path: Path) -> None:
    ex = learned(onion(tmp_path))
    got = {ls.failure.failure_class: [c.describe() for c in ls.fix] for ls in ex.lessons}
    # the eager launch left the way from the baseline to the fix: its failure is no lesson
    assert got == {
        "bad-flag": ["drop --tensor-parallel-size"],
        "oom-graph-capture": ["--gpu-memory-utilization 0.9"],
    }
    tp = next(ls for ls in ex.lessons if ls.failure.failure_class == "bad-flag")
    assert tp.fix[0].before == "8" and tp.minimal and tp.strength == 1.0
    assert tp.scope.model_dump(exclude_none=True) == {
        **{
            k: v
            for k, v in H200_SCOPE.items()
            if k
            in (
                "engine",
                "engine_version",
                "device",
                "gpu",
                "compute_capability",
                "gpu_count",
                "link",
                "architecture",
                "attention",
                "weights_gib",
            )
        },
        "quantization": "none",
    }
    assert tp.source.machine == "hw:1234"
    assert tp.source.trials[0] == "trials/01-search-" + cand().key()[:8] + "/server.log"


def test_a_lesson_holds_no_path_number_or_secret_of_the_machine(tmp_path: Path) -> None:
    text = dump(learned(onion(tmp_path)).lessons)
    assert "/opt/" not in text and str(tmp_path) not in text and "/models/" not in text
    assert "8011" not in text and "4242" not in text and "2.10" not in text


def test_a_change_no_failure_singles_out_goes_with_the_last_failure(tmp_path: Path) -> None:
    both = cand(**{"--tensor-parallel-size": None, "--gpu-memory-utilization": "0.9"})
    run = write_run(
        tmp_path, [("search", cand(), outcome(cand(), **TP)), ("search", both, outcome(both, "works"))], both
    )
    (ls,) = learned(run).lessons  # one failure seen: both changes go with it, the whole fix kept
    assert sorted(c.flag for c in ls.fix) == ["--gpu-memory-utilization", "--tensor-parallel-size"]


def test_a_run_that_did_not_validate_or_is_not_a_run_teaches_nothing(tmp_path: Path) -> None:
    run = write_run(tmp_path, [("search", cand(), outcome(cand(), **TP))], None)
    ex = learned(run)
    assert ex.lessons == [] and "not validated" in ex.notes[0]
    with pytest.raises(ExportError, match="no finished run"):
        learned(tmp_path / "nothing")


def _used(tmp: Path, fix_outcome: dict) -> list:
    first = learned(onion(tmp / "a")).lessons
    tp = next(ls for ls in first if ls.failure.failure_class == "bad-flag")
    use = LessonUse(
        id=tp.id, how="exact", weight=0.9, first=True, lesson=tp.model_dump(mode="json", by_alias=True)
    )
    c = cand(**{"--tensor-parallel-size": None})
    run = write_run(tmp / "b", [("search", c, outcome(c, **fix_outcome))], None, [use])
    return [ls for ls in learned(run).lessons if ls.id == tp.id]


def test_a_used_lesson_whose_fix_failed_the_same_way_is_weakened_with_the_evidence(tmp_path: Path) -> None:
    (ls,) = _used(tmp_path, TP)
    assert ls.strength == pytest.approx(0.3)
    assert ls.against[0].run == "r1" and ls.against[0].trial.startswith("trials/01-search-")
    assert "tensor parallel size (#)" in ls.against[0].line


def test_a_used_lesson_whose_fix_got_past_its_failure_is_confirmed(tmp_path: Path) -> None:
    (ls,) = _used(tmp_path, OOM)
    assert ls.strength == 1.0 and ls.against == [] and [s.run for s in ls.confirmed] == ["r1"]
