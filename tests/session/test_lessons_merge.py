"""Two machines' lessons, merged (issue 37): machine B, of machine A's kind, runs with A's lesson, its
fix fails there the same way, B finds another; the merge of both machines' files keeps every copy
and says where they disagree. Both bring-ups are real runs of the loop, answered in-process by the
scenario oracle (bringup/oracle/inprocess.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bringup.knowledge.learned_files import merge, read_lessons, write_lessons
from bringup.oracle.inprocess import InProcessTrial
from bringup.report.learned import learned
from bringup.session.run import Run, RunSettings
from tests.paths import ROOT

pytestmark = pytest.mark.slow
A = ROOT / "bringup" / "data" / "scenarios" / "qwen3-30b-a3b-fp8-sm120-vllm.yaml"


def machine_b(tmp: Path) -> Path:
    """Machine A's scenario, where the MoE backend that served right on A (marlin) answers wrongly too."""
    doc = yaml.safe_load(A.read_text())
    rule = next(r for r in doc["rules"] if r["id"] == "cutlass-fp8-moe-wrong-on-sm120")
    rule["when"]["moe-backend"].append("marlin")
    doc["name"] = "qwen3-30b-a3b-fp8-sm120-vllm-b"
    path = tmp / "machine-b.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def bring_up(scenario: Path, root: Path, lessons: list[str]) -> object:
    s = RunSettings(
        scenario=str(scenario),
        baseline=yaml.safe_load(A.read_text())["baseline"],
        knowledge=False,
        screen="never",
        max_launches=12,
        lessons=lessons,
    )
    return Run(s, root, trial_factory=InProcessTrial).execute()


def test_a_fix_that_fails_on_another_machine_is_weakened_there_and_the_merge_keeps_both(
    tmp_path: Path,
) -> None:
    ra = bring_up(A, tmp_path / "a", [])
    (la,) = learned(Path(ra.run_dir)).lessons
    assert la.describe_fix() == "--moe-backend marlin"
    write_lessons(tmp_path / "a.yaml", [la])

    rb = bring_up(machine_b(tmp_path), tmp_path / "b", [str(tmp_path / "a.yaml")])
    assert rb.validated and rb.lessons[0].first  # A's lesson was B's first launch (same scope) ...
    assert rb.attempts[0].status == "wrong-output"  # ... and failed there the same way
    b = learned(Path(rb.run_dir)).lessons
    write_lessons(tmp_path / "b.yaml", b)
    weak = next(ls for ls in b if ls.id == la.id)
    assert weak.strength == pytest.approx(0.3) and weak.against[0].run == rb.run_id
    launched = [a.changes for a in rb.attempts if a.purpose == "search"]
    assert launched.count("--moe-backend marlin") == 1  # the lesson's candidate, offered once

    files = [[ls for ls, _ in read_lessons([tmp_path / f]).lessons] for f in ("a.yaml", "b.yaml")]
    merged, notes = merge(files)
    copies = [ls for ls in merged if ls.id == la.id]
    assert sorted(ls.strength for ls in copies) == [pytest.approx(0.3), 1.0]  # nothing overwritten
    assert all("another copy disagrees" in (ls.conflict or "") for ls in copies)
    assert any(f"run {rb.run_id}" in (ls.conflict or "") for ls in copies)  # says which run saw it fail
    assert len(notes) == 2

    # a third machine of that kind reads the merged file: the weaker copy, a belief, not a first launch
    write_lessons(tmp_path / "c.yaml", merged)
    rc = bring_up(A, tmp_path / "c", [str(tmp_path / "c.yaml")])
    used = {u.id: u for u in rc.lessons}
    assert used[la.id].weight == pytest.approx(0.9 * 0.3) and not used[la.id].first
