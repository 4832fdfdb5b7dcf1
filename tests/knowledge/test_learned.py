"""A lesson's schema and how far its scope reaches (bringup/knowledge/learned.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bringup.knowledge.learned import FIRST_MIN, PRIOR_MAX, Lesson, Scope, first_worthy, reach, weight
from tests.lessons_util import H200_SCOPE, lesson


def here(**changes) -> Scope:
    return Scope.model_validate({**H200_SCOPE, **changes})


def test_the_same_scope_is_exact_and_weighs_the_most_a_prior_may() -> None:
    ls = lesson()
    r = weight(ls, here())
    assert r.kind == "exact" and r.why == []
    assert r.weight == PRIOR_MAX < 1  # a prior, never a certainty
    assert first_worthy(ls, r)


# Each field a lesson cannot cross: another value there and the lesson changes nothing.
OUT_OF_REACH = [
    ("engine", "sglang"),
    ("engine_version", "0.33.0"),  # another series of a 0.x engine
    ("engine_version", "1.32.0"),  # another major
    ("device", "cpu"),
    ("compute_capability", 12.0),  # another GPU architecture
    ("architecture", "Qwen3ForCausalLM"),
    ("attention", "mla"),
    ("quantization", "fp8"),
    ("dtype", "float16"),
    ("cuda", "12.8"),  # another CUDA major
]


@pytest.mark.parametrize(("field", "value"), OUT_OF_REACH)
def test_a_scope_field_another_machine_does_not_share_puts_the_lesson_out_of_reach(field, value) -> None:
    changes = {field: value}
    if field == "device":  # a CPU target has no GPU
        changes.update(gpu=None, compute_capability=None, gpu_count=0, link=None)
    r = weight(lesson(), here(**changes))
    assert r.kind == "none" and r.weight == 0.0
    assert field.split("_")[0] in r.why[0].lower()


# Each field a lesson reaches across, with less weight.
NEAR = [
    ("engine_version", "0.32.1"),
    ("gpu", "NVIDIA H100 80GB HBM3"),
    ("gpu_count", 8),
    ("link", "nvlink"),
    ("driver", "570.86.15"),
    ("cuda", "13.1"),
    ("weights_gib", 30.0),
    ("dtype", None),  # a fact this side does not know
]


@pytest.mark.parametrize(("field", "value"), NEAR)
def test_a_near_scope_field_lowers_the_weight_and_is_never_the_first_launch(field, value) -> None:
    ls = lesson()
    r = weight(ls, here(**{field: value}))
    assert r.kind == "near" and 0 < r.weight < PRIOR_MAX
    assert not first_worthy(ls, r)
    assert len(r.why) == 1


def test_the_weight_falls_with_the_distance() -> None:
    ls = lesson()
    one = weight(ls, here(gpu_count=8)).weight
    two = weight(ls, here(gpu_count=8, engine_version="0.32.1")).weight
    sizes = [weight(ls, here(weights_gib=w)).weight for w in (15.1, 30.0, 140.0)]
    assert two < one < PRIOR_MAX
    assert sizes[0] == PRIOR_MAX  # within 2%: one size
    assert sizes[2] < sizes[1] < PRIOR_MAX  # past a factor of 4: farther still


def test_reach_is_the_same_both_ways() -> None:
    a, b = here(), here(gpu="NVIDIA H100 80GB HBM3", engine_version="0.32.4")
    assert (reach(a, b).kind, reach(a, b).weight) == (reach(b, a).kind, reach(b, a).weight) == ("near", 0.36)


def test_a_weakened_lesson_is_a_belief_only() -> None:
    ls = lesson(strength=FIRST_MIN / 2)
    r = weight(ls, here())
    assert r.kind == "exact" and r.weight == pytest.approx(PRIOR_MAX * FIRST_MIN / 2)
    assert not first_worthy(ls, r)


IMPOSSIBLE = [
    {"gpu_count": 0},  # a cuda scope with no GPU
    {"compute_capability": 99.0},
    {"compute_capability": 9.05},
    {"gpu": None},
    {"device": "cpu"},  # a CPU scope that names a GPU
    {"engine": "tensorrt-llm"},  # no engine bringup launches
    {"engine_version": "not a version"},
    {"device": "tpu"},
]


@pytest.mark.parametrize("bad", IMPOSSIBLE)
def test_a_scope_no_machine_can_have_is_refused(bad) -> None:
    with pytest.raises(ValidationError):
        Scope.model_validate({**H200_SCOPE, **bad})


def test_a_root_line_with_numbers_or_paths_is_refused_a_lesson_reads_the_same_everywhere() -> None:
    data = lesson().model_dump(by_alias=True)
    data["failure"]["root"] = "oom at /usr/lib/python3/x.py port 8000"
    with pytest.raises(ValidationError, match="number or a path"):
        Lesson.model_validate(data)


def test_an_edited_lesson_must_carry_the_id_its_content_gives() -> None:
    data = lesson().model_dump(by_alias=True)
    data["fix"][0]["after"] = "2"
    with pytest.raises(ValidationError, match="does not match"):
        Lesson.model_validate(data)


def test_a_trial_named_by_an_absolute_path_is_refused() -> None:
    data = lesson().model_dump(by_alias=True)
    data["source"]["trials"] = ["/home/me/bringup-runs/runs/r/trials/01/server.log"]
    with pytest.raises(ValidationError, match="relative"):
        Lesson.model_validate(data)


def test_an_unknown_field_is_refused() -> None:
    data = lesson().model_dump(by_alias=True)
    data["fix"][0]["why"] = "because"
    with pytest.raises(ValidationError, match="Extra inputs"):
        Lesson.model_validate(data)


def test_a_tiny_model_and_a_cpu_machine_make_a_scope() -> None:
    facts = {"engine.name": "vllm", "engine.version": "0.32.0", "device": "cpu", "gpu.count": 0, "gpu.link": "none",
             "model.architecture": "LlamaForCausalLM", "model.weights_gib": 0.0034, "model.quantization": None}  # fmt: skip
    s = Scope.of(facts)
    assert s.weights_gib == 0.0034 and s.quantization == "none" and s.gpu is None and s.link is None
