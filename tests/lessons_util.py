"""Lessons for tests (bringup/knowledge/learned.py): one built from a scope, a failure and a fix,
with its id computed as an export would, and a file of them written as `lessons export` writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bringup.knowledge.learned import Failure, FixChange, Lesson, Scope, Source, lesson_id
from bringup.knowledge.learned_files import write_lessons

H200_SCOPE: dict[str, Any] = {
    "engine": "vllm",
    "engine_version": "0.32.0",
    "device": "cuda",
    "gpu": "NVIDIA H200",
    "compute_capability": 9.0,
    "gpu_count": 1,
    "link": "none",
    "driver": "580.159.04",
    "cuda": "13.0",
    "architecture": "LlamaForCausalLM",
    "attention": "gqa",
    "quantization": "none",
    "dtype": "bfloat16",
    "weights_gib": 15.0,
}
TP_FAILURE = {
    "key": "bad-flag|parse-args|pydantic_core._pydantic_core.validationerror: value error, tensor parallel "
    "size (#) is larger than the number of available gpus (#)",
    "class": "bad-flag",
    "phase": "parse-args",
    "root": "pydantic_core._pydantic_core.validationerror: value error, tensor parallel size (#) is larger "
    "than the number of available gpus (#)",
}


def lesson(
    fix: list[dict[str, Any]] | None = None,
    failure: dict[str, Any] | None = None,
    strength: float = 1.0,
    run: str = "run-a",
    machine: str = "hw:aaaa",
    **scope: Any,
) -> Lesson:
    sc = Scope.model_validate({**H200_SCOPE, **scope})
    fl = Failure.model_validate(failure or TP_FAILURE)
    fx = [FixChange.model_validate(c) for c in (fix or [{"flag": "--tensor-parallel-size", "before": "8"}])]
    return Lesson(
        id=lesson_id(fl, fx, sc),
        failure=fl,
        fix=fx,
        scope=sc,
        minimal=True,
        strength=strength,
        source=Source(run=run, machine=machine, trials=["trials/01-search-abcdef12/server.log"]),
    )


def lesson_file(path: Path, *lessons: Lesson) -> Path:
    write_lessons(path, list(lessons))
    return path
