"""Issue 39, item 3: a whole run on the scenario engine whose minimal fix is a number says every
number as the user gave it (or as the engine spells a value it made), so each line pastes back.

Before: FINDINGS.md gave the engine's default as `512.0`, the likeliest cause as
`--max-cudagraph-capture-size>=512.0` (an int flag: the engine refuses 512.0) and
`VLLM_ENABLE_CUDAGRAPH_GC` as `0.0`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bringup.core.candidate import parse_flags
from bringup.help.text import bundled_help
from tests.conftest import bringup
from tests.paths import ROOT

SCENARIO = ROOT / "bringup" / "data" / "scenarios" / "qwen25-32b-graph-oom-sm120-vllm.yaml"
BASELINE = "--max-model-len 110000 --gpu-memory-utilization 0.95"
# A flag, or an env factor, followed by a number: the places a number is a setting's value.
SETTING = re.compile(
    r"(--[a-z0-9-]+|env:[A-Z0-9_]+|[A-Z][A-Z0-9_]{3,})(=|>=|<=| |`: `|` \(not given\): `)(-?\d+(?:\.\d+)?)\b"
)


@pytest.mark.slow
def test_a_run_whose_minimal_fix_is_a_number_says_every_number_as_given(tmp_path: Path) -> None:
    rc, d, _, err = bringup(
        "run",
        "--scenario",
        str(SCENARIO),
        "--time-scale",
        "0.002",
        "--runs-dir",
        str(tmp_path),
        "--json",
        "--baseline",
        BASELINE,
    )
    assert rc == 0 and d is not None, err[-3000:]
    fix = d["minimal_fix_str"]
    assert re.fullmatch(r"--max-cudagraph-capture-size \d+", fix), fix  # the fix is a number
    run_dir = Path(d["run_dir"])
    texts = {
        "FINDINGS.md": (run_dir / "FINDINGS.md").read_text(),
        "report.html": (run_dir / "report.html").read_text(),
        "suspects": " ; ".join(d["strategy_state"]["suspects"]),
        "command": d["final_command"],
        "stop reason": d["stop_reason"],
    }
    settings = [(where, m.group(0)) for where, t in texts.items() for m in SETTING.finditer(t)]
    assert len(settings) > 10
    assert [s for s in settings if s[1].endswith(".0")] == []  # 512, not 512.0; 0, not 0.0
    assert (
        "--max-model-len 110000" in texts["command"] and "--gpu-memory-utilization 0.95" in texts["command"]
    )
    assert any(">=512" in s for _, s in settings)  # the likeliest cause, as the engine takes it
    # pasted back: the fix parses with the engine's own flags, and its value is what an int flag takes
    spec = bundled_help("vllm", d["engine_version"])
    value = parse_flags(fix, spec)["--max-cudagraph-capture-size"]
    assert str(int(value)) == value
