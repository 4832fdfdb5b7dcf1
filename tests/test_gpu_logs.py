"""Real vLLM 0.24.0 and SGLang 0.5.16 failures on the H200 (issue 23), classified as they should be.

Each `tests/data/logs/*-h200-real-*.log` is a trial's server.log from `tests/data/gpu/h200_vllm.sh` /
`h200_sglang.sh` on the lent H200 (2026-12-01), copied unchanged; tests/data/logs/README.md says
what each is. The class, phase and root-cause line asserted here are what the log shows (read by
hand), not what the classifier said that day.
"""

from __future__ import annotations

from pathlib import Path

LOGS = Path(__file__).parent / "data" / "logs"

# (file, class, phase, a substring of the root-cause line): none yet, the 2026-12-01 session
# brought back no failing launch (docs/gpu-h200.md)
CASES: list[tuple[str, str, str, str]] = []


def test_every_real_h200_log_is_a_case_and_documented():
    names = sorted(p.name for p in LOGS.glob("*-h200-real-*.log"))
    assert names == sorted(c[0] for c in CASES)
    readme = (LOGS / "README.md").read_text()
    assert all(n in readme for n in names)
