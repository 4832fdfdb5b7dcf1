"""Real vLLM 0.24.0 and SGLang 0.5.16 failures on the H200 (issue 23), classified as they should be.

Each `tests/data/logs/*-h200-real-*.log` is a trial's server.log from `tests/data/gpu/h200_vllm.sh` /
`h200_sglang.sh` on the lent H200 (2026-12-01), copied unchanged; tests/data/logs/README.md says
what each is. The class, phase and root-cause line asserted here are what the log shows (read by
hand), not what the classifier said that day.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup.engines.explain import explain_file

LOGS = Path(__file__).parent / "data" / "logs"

# (file, class, phase, a substring of the root-cause line, implicated flags that must be named):
# the 2026-12-02 session's run from a mistaken baseline (tests/data/gpu/h200-2026-12-02-vllm)
CASES: list[tuple[str, str, str, str, list[str]]] = [
    (
        "vllm-h200-real-world-size-8-of-1-gpu.log",
        "unsupported-hardware",
        "parse-args",
        "World size (8) is larger than the number of available GPUs (1)",
        ["--tensor-parallel-size"],
    ),
    (
        "vllm-h200-real-ray-not-installed.log",
        "missing-dependency",
        "parse-args",
        "Failed to import Ray: No module named 'ray'",
        ["--distributed-executor-backend"],
    ),
    (
        "vllm-h200-real-awq-on-an-unquantized-model.log",
        "bad-flag",
        "parse-args",
        "Cannot find the config file for awq",
        ["--quantization"],
    ),
]


@pytest.mark.parametrize("name, cls, phase, line, implicates", CASES, ids=[c[0] for c in CASES])
def test_real_h200_logs_give_class_phase_root_line_and_factors(name, cls, phase, line, implicates):
    out = explain_file(LOGS / name)
    assert (out.status, out.failure_class, out.phase) == ("fails", cls, phase)
    assert line in out.evidence[0]
    assert all(f in out.implicates for f in implicates), out.implicates


def test_a_remedy_for_another_setup_is_read_as_conditional():
    # "If this is intentional and you are using: - ray, set '--distributed-executor-backend ray'":
    # the machine had one GPU; Ray was advice for a multi-node cluster (and was not installed)
    out = explain_file(LOGS / "vllm-h200-real-world-size-8-of-1-gpu.log")
    ray = [r for r in out.remedies if r.flag == "--distributed-executor-backend"]
    assert ray and all(r.conditional for r in ray)


def test_every_real_h200_log_is_a_case_and_documented():
    names = sorted(p.name for p in LOGS.glob("*-h200-real-*.log"))
    assert names == sorted(c[0] for c in CASES)
    readme = (LOGS / "README.md").read_text()
    assert all(n in readme for n in names)
