"""Issue 40, item 4, as a user meets it: `run --resume` into a run folder with links planted in it
writes nothing outside the runs folder; a dangling link at the next run folder's name is stepped
over, not a traceback; a FIFO where a file is expected is refused at once, never a hang."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import bringup
from tests.paths import ROOT

SEED = ROOT / "bringup" / "data" / "scenarios" / "glm5-nvfp4-sm120.yaml"
SCENARIO = ["--scenario", str(SEED), "--time-scale", "0.002"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory) -> tuple[Path, str]:
    """A run stopped by its launch budget (it needs more than one launch): a run to resume."""
    runs = tmp_path_factory.mktemp("stopped")
    rc, d, _, err = bringup(
        "run", *SCENARIO, "--runs-dir", str(runs), "--max-launches", "1", "--no-knowledge", "--json"
    )
    assert d is not None and not d["validated"], err[-2000:]  # the baseline fails: more launches to go
    return runs, d["run_id"]


@pytest.mark.parametrize(
    "name", ["FINDINGS.md", "findings.json", "report.html", "run.json", ".writer.lock", "trials"]
)
def test_a_resume_never_writes_through_a_planted_link(stopped_run, tmp_path, name):
    runs = tmp_path / "runs"
    shutil.copytree(stopped_run[0], runs, symlinks=True)
    run_dir = runs / "runs" / stopped_run[1]
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "precious"
    target.write_text("precious")
    planted = run_dir / name
    if planted.is_dir():
        shutil.rmtree(planted)
        target = outside  # a folder outside: nothing may appear in it
    else:
        planted.unlink(missing_ok=True)
    planted.symlink_to(target)
    before = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    rc, _, out, err = bringup(
        "run",
        "--resume",
        "--run-id",
        stopped_run[1],
        "--runs-dir",
        str(runs),
        "--max-launches",
        "2",
        timeout=300,
    )
    assert {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()} == before  # nothing outside changed
    assert sorted(outside.rglob("*")) == sorted(before)
    assert "Traceback" not in err
    if rc == 2:  # refused: the link is named
        assert "link" in err and name in err, err
    else:  # a report file renamed over its link: the link is gone, a file is in its place
        assert rc in (0, 1) and not planted.is_symlink() and planted.is_file(), (rc, err[-1000:])


def test_a_dangling_link_at_the_next_run_folders_name_is_stepped_over(tmp_path):
    runs = tmp_path / "runs"
    (runs / "runs").mkdir(parents=True)
    now = time.time()
    names = []
    for dt in range(0, 120):  # every name a run started in the next two minutes could take
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + dt))
        link = runs / "runs" / f"{stamp}-sglang-GLM-5-NVFP4"
        link.symlink_to(tmp_path / "nowhere" / str(dt))
        names.append(link)
    rc, d, _, err = bringup("run", *SCENARIO, "--runs-dir", str(runs), "--max-launches", "1", "--json")
    assert d is not None and "Traceback" not in err, err[-2000:]
    assert (runs / "runs" / d["run_id"]).is_dir() and not (runs / "runs" / d["run_id"]).is_symlink()
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["trial", "--scenario", "{fifo}", "--runs-dir", "{runs}"],
        ["run", *SCENARIO, "--space", "{fifo}", "--runs-dir", "{runs}"],
        ["run", "--resume", "--runs-dir", "{fifo_runs}"],
        ["explain", "{fifo}"],
    ],
    ids=["scenario", "space-file", "journal", "log"],
)
def test_a_fifo_where_a_file_is_expected_is_refused_at_once(tmp_path, args):
    fifo = tmp_path / "x.yaml"
    os.mkfifo(fifo)
    fifo_runs = tmp_path / "fr"
    fifo_runs.mkdir()
    os.mkfifo(fifo_runs / "journal.sqlite")
    argv = [a.format(fifo=fifo, runs=tmp_path / "runs", fifo_runs=fifo_runs) for a in args]
    rc, _, _, err = bringup(*argv, timeout=120)  # a hang is a TimeoutExpired here
    assert rc == 2 and ("FIFO" in err or "not a file" in err) and "Traceback" not in err, err[-1500:]


def test_testmodel_on_an_impossible_path_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("x")
    for where in ("/proc/self/bringup-test-model", str(tmp_path / "file" / "model")):
        rc, _, _, err = bringup("testmodel", where)
        assert rc == 2 and "cannot make the folder" in err and "Traceback" not in err, err[-1500:]
