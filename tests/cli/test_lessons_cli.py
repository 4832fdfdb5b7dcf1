"""`bringup lessons` and `bringup run --lessons` as a user runs them (docs/lessons.md): a scenario
run, its lessons exported to a team folder, the next run from a fresh journal in one launch, a bad
file refused by name while the run goes on; list, show, and a merge that keeps a conflict."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import bringup
from tests.paths import ROOT

pytestmark = pytest.mark.slow
SCENARIO = ROOT / "bringup" / "data" / "scenarios" / "qwen25-32b-graph-oom-sm120-vllm.yaml"


def _run(runs: Path, *extra: str) -> dict:
    baseline = yaml.safe_load(SCENARIO.read_text())["baseline"]
    rc, d, _, err = bringup(
        "run", "--scenario", str(SCENARIO), "--baseline", baseline, "--no-knowledge", "--screen", "never",
        "--time-scale", "0.002", "--runs-dir", str(runs), "--json", *extra,
    )  # fmt: skip
    assert d is not None and d["validated"], err[-2000:]
    return d


def test_lessons_exported_by_one_run_bring_the_next_up_in_one_launch(tmp_path: Path) -> None:
    first = _run(tmp_path / "a", "--no-minimize")
    assert first["launches"] > 1
    team = tmp_path / "team"
    rc, _, out, err = bringup(
        "lessons", "export", first["run_id"], "--runs-dir", str(tmp_path / "a"), "-o", f"{team}/"
    )
    assert rc == 0, err
    (path,) = team.glob("*.yaml")
    junk = tmp_path / "junk.yaml"
    junk.write_text("lessons:\n  - {id: L-0, what: [\n")
    rc, d, _, err = bringup(
        "run", "--scenario", str(SCENARIO), "--baseline", yaml.safe_load(SCENARIO.read_text())["baseline"],
        "--no-knowledge", "--screen", "never", "--time-scale", "0.002", "--runs-dir", str(tmp_path / "b"),
        "--json", "--no-minimize", env={"BRINGUP_LESSONS": f"{team}:{junk}"},
    )  # fmt: skip
    assert rc == 0 and d["launches"] == 1, err[-2000:]
    assert d["lessons"] and d["lessons"][0]["first"]
    assert any("junk.yaml" in r and "not valid YAML" in r for r in d["lessons_refused"])  # named, skipped
    findings = (Path(d["run_dir"]) / "FINDINGS.md").read_text()
    assert "## Lessons of other runs" in findings and d["lessons"][0]["id"] in findings

    rc, _, out, err = bringup("lessons", "list", str(team), str(junk))
    assert rc == 2 and d["lessons"][0]["id"] in out and "junk.yaml" in err
    rc, _, out, _ = bringup("lessons", "show", d["lessons"][0]["id"][:6], str(team))
    assert rc == 0 and "proof   trials/" in out and "scope     vllm 0.32.0" in out

    # another machine saw the fix fail the same way: its copy is weakened; the merge keeps both
    other = yaml.safe_load(path.read_text())
    entry = other["lessons"][0]
    entry["strength"] = 0.3
    entry["against"] = [
        {"run": "run-on-b", "trial": "trials/01-search-0123abcd/server.log", "line": "same failure"}
    ]
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(other))
    rc, _, out, err = bringup(
        "lessons", "merge", str(path), str(tmp_path / "b.yaml"), "-o", str(tmp_path / "c.yaml")
    )
    assert rc == 0 and "conflict kept" in out, err
    merged = yaml.safe_load((tmp_path / "c.yaml").read_text())["lessons"]
    copies = [ls for ls in merged if ls["id"] == entry["id"]]
    assert sorted(ls["strength"] for ls in copies) == [0.3, 1.0] and all(
        "another copy disagrees" in ls["conflict"] for ls in copies
    )
    rc, _, out, _ = bringup("lessons", "show", entry["id"], str(tmp_path / "c.yaml"))
    assert out.count("CONFLICT") == 2 and "AGAINST   run run-on-b" in out
