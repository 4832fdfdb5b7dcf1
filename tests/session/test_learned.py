"""Lessons of other runs in a run (bringup/session/learned.py): exact scope makes the first
candidate, near scope a weighted belief, and a scope out of reach changes no candidate."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bringup.session.learned import use_lessons
from tests.knowledge.test_learned import OUT_OF_REACH
from tests.lessons_util import H200_SCOPE, lesson, lesson_file
from tests.search.test_search_beliefs import VL, make

TARGET: Any = SimpleNamespace(
    spec=VL,
    version="0.32.0",
    engine=SimpleNamespace(log_dialect="vllm", info=SimpleNamespace(model_flag=None)),
)
FACT_OF = {
    "engine": "engine.name",
    "engine_version": "engine.version",
    "device": "device",
    "gpu": "gpu.name",
    "compute_capability": "gpu.compute_capability",
    "gpu_count": "gpu.count",
    "link": "gpu.link",
    "driver": "gpu.driver",
    "cuda": "gpu.cuda",
    "architecture": "model.architecture",
    "attention": "model.attention",
    "quantization": "model.quantization",
    "dtype": "model.dtype",
    "weights_gib": "model.weights_gib",
}
BASELINE = "--tensor-parallel-size 8 --max-model-len 4096"


def facts(**scope: Any) -> dict[str, Any]:
    """A machine's facts (the keys doctor and the model fingerprint give) for a lesson scope."""
    return {FACT_OF[k]: v for k, v in {**H200_SCOPE, **scope}.items()}


def used(tmp_path: Path, fx: dict[str, Any], *lessons: Any, paths: list[str] | None = None):
    s = make(BASELINE)
    path = lesson_file(tmp_path / "l.yaml", *lessons) if lessons else None
    got = use_lessons(paths or [str(path)], TARGET, fx, s.baseline, s)
    return s, got


def test_in_exact_scope_the_fix_on_the_baseline_is_the_first_launch(tmp_path: Path) -> None:
    ls = lesson()
    s, got = used(tmp_path, facts(), ls)
    assert got.first is not None and "--tensor-parallel-size" not in got.first.flag_dict
    assert got.first.flag_dict["--max-model-len"] == "4096"  # the rest of the baseline kept
    d = got.explained(s.next_launch(got.after([]), [], set()))
    assert d.candidate == got.first and ls.id in d.reasons[0] and "journal" not in " ".join(d.reasons)
    assert [(u.id, u.how, u.first) for u in got.uses] == [(ls.id, "exact", True)]
    assert any(ls.id in n for n in s.notes)


def test_in_near_scope_it_is_a_belief_weighed_by_the_distance(tmp_path: Path) -> None:
    s, got = used(tmp_path, facts(engine_version="0.32.1", gpu="NVIDIA H100 80GB HBM3"), lesson())
    assert got.first is None
    (u,) = got.uses
    assert u.how == "near" and u.weight == pytest.approx(0.9 * 0.6 * 0.6) and len(u.why) == 2
    (b,) = s.blockers
    assert b.seen == 0 and b.key == lesson().failure.key  # foreseen, not seen


@pytest.mark.parametrize(("field", "value"), OUT_OF_REACH)
def test_a_lesson_out_of_reach_on_any_field_changes_no_candidate(tmp_path: Path, field, value) -> None:
    changes = {field: value}
    if field == "device":
        changes.update(gpu=None, compute_capability=None, gpu_count=0, link=None)
    plain = make(BASELINE)
    s, got = used(tmp_path, facts(**changes), lesson())
    assert got.uses == [] and got.first is None and s.blockers == []
    for a, b in zip(plain.leads(3), s.leads(3), strict=True):
        assert a.candidate == b.candidate and a.p_success == b.p_success


def test_a_baseline_without_the_level_the_fix_changes_is_not_taught(tmp_path: Path) -> None:
    ls = lesson(fix=[{"flag": "--max-model-len", "before": "999999"}])
    s, got = used(tmp_path, facts(), ls)
    assert got.uses == [] and s.blockers == [] and any("not for this baseline" in n for n in s.notes)


def test_a_fix_flag_this_engine_version_lacks_is_refused_and_the_run_goes_on(tmp_path: Path) -> None:
    bad = lesson(fix=[{"flag": "--no-such-flag-in-vllm", "after": "1"}])
    good = lesson()
    junk = tmp_path / "junk.yaml"
    junk.write_text("lessons: [{")
    s, got = used(tmp_path, facts(), bad, good)
    s2, got2 = used(tmp_path, facts(), paths=[str(tmp_path / "l.yaml"), str(junk)])
    for g in (got, got2):
        assert [u.id for u in g.uses] == [good.id] and g.first is not None
    assert any("does not accept" in r and bad.id in r for r in got.refused)
    assert any("junk.yaml" in r for r in got2.refused)


def test_copies_that_disagree_are_used_at_the_weaker_strength(tmp_path: Path) -> None:
    strong = lesson()
    weak = strong.model_copy(update={"strength": 0.3})
    s, got = used(tmp_path, facts(), strong, weak)
    (u,) = got.uses
    assert u.weight == pytest.approx(0.9 * 0.3) and not u.first and got.first is None
    assert any("copies disagree" in n for n in s.notes)
