"""Issue 40, item 4: every file bringup writes is opened without following a link and stays inside
its runs folder; a special file where a file is expected is refused at once; every untrusted
structure has a depth limit; a foreign or emptied journal is a clear error that changes nothing."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from bringup.core.candidate import Candidate, FlagError
from bringup.guard import files
from bringup.guard.limits import InputError, nesting, read_json_object
from bringup.guard.runlock import RunLock
from bringup.record.journal import Journal, JournalForeign


def _outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside" / "precious.txt"
    target.parent.mkdir()
    target.write_text("precious")
    return target


def _planted(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A run folder whose `name` is a link to a precious file outside it: (the run, the file)."""
    target = _outside(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / name).symlink_to(target)
    return run, target


# ---- writing ---------------------------------------------------------------------------------------
def test_a_link_at_a_written_name_is_refused_or_replaced_never_followed(tmp_path):
    run, target = _planted(tmp_path, "FINDINGS.md")
    with pytest.raises(files.UnsafeFile, match="symbolic link"):
        files.write_text(run / "FINDINGS.md", "new")  # in place: refused
    files.write_text(run / "FINDINGS.md", "new", atomic=True)  # renamed over: the link is replaced
    assert target.read_text() == "precious"
    assert not (run / "FINDINGS.md").is_symlink() and (run / "FINDINGS.md").read_text() == "new"


def test_a_hard_link_a_fifo_or_a_folder_at_a_written_name_is_refused_at_once(tmp_path):
    target = _outside(tmp_path)
    os.link(target, tmp_path / "hard")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    for name, says in (("hard", "hard link"), ("fifo", "FIFO"), ("folder", "folder")):
        with pytest.raises(files.UnsafeFile, match=says):
            with files.open_write(tmp_path / name) as f:
                f.write("x")
    assert target.read_text() == "precious"  # not truncated through the hard link


def test_a_planted_lock_file_link_truncates_nothing(tmp_path):
    """Round three: `.writer.lock` linked to a file outside made `run --resume` truncate it."""
    run, target = _planted(tmp_path, ".writer.lock")
    with pytest.raises(files.UnsafeFile, match="symbolic link"):
        RunLock(run, "r1").acquire()
    assert target.read_text() == "precious"


def test_folders_below_the_runs_folder_are_real_ones(tmp_path):
    root = tmp_path / "runs"
    (root / "runs").mkdir(parents=True)
    out = tmp_path / "outside"
    out.mkdir()
    (root / "runs" / "r1").symlink_to(out)
    with pytest.raises(files.UnsafeFile, match="symbolic link"):
        files.make_dirs(root / "runs" / "r1" / "trials", inside=root)
    (root / "runs" / "r2").symlink_to(tmp_path / "nowhere")  # dangling
    with pytest.raises(files.UnsafeFile, match="dangling"):
        files.make_dirs(root / "runs" / "r2", inside=root)
    assert files.is_taken(root / "runs" / "r2") and not (root / "runs" / "r2").exists()
    assert list(out.iterdir()) == []
    with pytest.raises(files.UnsafeFile, match="inside"):
        files.make_dirs(tmp_path / "elsewhere", inside=root)


def test_a_resumed_run_folder_is_where_the_runs_folder_keeps_it(tmp_path):
    """The journal's recorded path is not followed (an edited journal could name any folder)."""
    from bringup.session.resume import reopen
    from bringup.session.settings import RunError

    j = Journal(tmp_path / "journal.sqlite")
    j.create_run("r1", "vllm", "0", "m", "hw", {}, Path("/etc"))
    assert reopen(j, tmp_path, "r1") == tmp_path / "runs" / "r1"
    assert (tmp_path / "runs" / "r1" / "trials").is_dir()
    j.create_run("../../x", "vllm", "0", "m", "hw", {}, tmp_path)
    with pytest.raises(RunError, match="not a folder name"):
        reopen(j, tmp_path, "../../x")


# ---- reading ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_a_special_file_where_a_file_is_read_is_refused_at_once(tmp_path, kind):
    path = {"fifo": tmp_path / "f", "folder": tmp_path, "device": Path("/dev/null")}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    done: list[BaseException] = []

    def read() -> None:
        try:
            files.read_bytes(path, 1 << 20, "scenario file")
        except BaseException as e:  # noqa: BLE001 (what the read raised is the result)
            done.append(e)

    th = threading.Thread(target=read, daemon=True)
    th.start()
    th.join(10)  # a FIFO opened for reading blocks for ever: the thread would still be alive
    assert done and isinstance(done[0], files.UnsafeFile), done
    assert {"fifo": "FIFO", "folder": "folder", "device": "device"}[kind] in str(done[0])


def test_every_input_reader_refuses_a_fifo(tmp_path):
    """The scenario, a knowledge or space file, config.json, the prompts file, the journal."""
    from bringup.core.datafiles import KnowledgeFileError, load_yaml
    from bringup.loadgen.config import BenchError
    from bringup.loadgen.workload import load_jsonl
    from bringup.scenario.loader import ScenarioError, load_scenario

    fifo = tmp_path / "x"
    os.mkfifo(fifo)
    for call, err in (
        (lambda: load_scenario(fifo), ScenarioError),
        (lambda: load_yaml(fifo), KnowledgeFileError),
        (lambda: read_json_object(fifo, "model config"), InputError),
        (lambda: load_jsonl(fifo, 16), BenchError),
    ):
        with pytest.raises(err, match="FIFO"):
            call()
    (tmp_path / "j").mkdir()
    os.mkfifo(tmp_path / "j" / "journal.sqlite")
    with pytest.raises(JournalForeign, match="FIFO"):
        Journal(tmp_path / "j" / "journal.sqlite")


# ---- depth -----------------------------------------------------------------------------------------
DEEP = "[" * 100_000 + "]" * 100_000


def test_a_value_100000_deep_is_refused_not_a_recursion_error(tmp_path):
    from bringup.core.datafiles import KnowledgeFileError, load_yaml
    from bringup.loadgen.config import BenchError
    from bringup.loadgen.workload import load_jsonl
    from bringup.report.findings import FindingsDamaged, load_result
    from bringup.scenario.loader import ScenarioError, load_scenario

    assert nesting(DEEP) == 100_000
    (tmp_path / "findings.json").write_text('{"a": ' + DEEP + "}")
    (tmp_path / "config.json").write_text('{"a": ' + DEEP + "}")
    (tmp_path / "s.yaml").write_text("name: " + DEEP + "\n")
    (tmp_path / "p.jsonl").write_text('{"prompt": ' + DEEP + "}\n")
    block = (
        "".join(f"{'  ' * i}k:\n" for i in range(150)) + "  " * 150 + "k: 1\n"
    )  # block style, by indentation
    (tmp_path / "b.yaml").write_text(block)
    for call, err in (
        (lambda: load_result(tmp_path), FindingsDamaged),
        (lambda: read_json_object(tmp_path / "config.json", "model config"), InputError),
        (lambda: load_scenario(tmp_path / "s.yaml"), ScenarioError),
        (lambda: load_yaml(tmp_path / "s.yaml"), KnowledgeFileError),
        (lambda: load_yaml(tmp_path / "b.yaml"), KnowledgeFileError),
        (lambda: load_jsonl(tmp_path / "p.jsonl", 16), BenchError),
    ):
        with pytest.raises(err, match="nested"):
            call()


def test_a_model_folder_whose_config_nests_too_deep_is_refused_before_a_launch(tmp_path):
    from bringup.facts.preflight import model_problems

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"})[:-1] + ', "x": ' + DEEP + "}")
    assert any("nested" in p for p in model_problems(tmp_path))


# ---- journals --------------------------------------------------------------------------------------
def test_an_emptied_journal_is_an_error_and_stays_as_it_is(tmp_path):
    j = tmp_path / "journal.sqlite"
    Journal(j).create_run("r1", "vllm", "0", "m", "hw", {}, tmp_path)
    j.write_bytes(b"")  # emptied (a truncation through a link, a careless `> journal.sqlite`)
    for readonly in (False, True):
        with pytest.raises(JournalForeign, match="empty"):
            Journal(j, readonly=readonly)
    assert j.read_bytes() == b"" and not list(tmp_path.glob("*.damaged-*"))


@pytest.mark.parametrize(
    "sql, says",
    [
        ("CREATE TABLE trials (id INTEGER PRIMARY KEY, what TEXT)", "table trials is not bringup's"),
        ("CREATE TABLE runs (id TEXT, created REAL)", "table runs is not bringup's"),
        ("CREATE TABLE moz_places (id INTEGER)", "another program's database"),
    ],
)
def test_a_journal_of_another_schema_is_an_error_that_changes_nothing(tmp_path, sql, says):
    j = tmp_path / "journal.sqlite"
    with sqlite3.connect(j) as db:
        db.execute(sql)
    before = j.read_bytes()
    with pytest.raises(JournalForeign, match=says):
        Journal(j)
    assert j.read_bytes() == before


def test_a_journal_whose_wal_is_a_link_is_refused(tmp_path):
    target = _outside(tmp_path)
    (tmp_path / "journal.sqlite-wal").symlink_to(target)
    with pytest.raises(JournalForeign, match="symbolic link"):
        Journal(tmp_path / "journal.sqlite")
    assert target.read_text() == "precious" and not (tmp_path / "journal.sqlite").exists()


# ---- bytes that are not what they seem -------------------------------------------------------------
@pytest.mark.parametrize(
    "flags, env, says",
    [
        ({"--chat-template": "a\x00b"}, {}, "--chat-template holds a NUL byte"),
        ({}, {"SGLANG_X": "a\udcffb"}, "SGLANG_X holds bytes that are not UTF-8"),
        ({"--tokenizer": ("a", "b\udc80")}, {}, "not UTF-8"),
    ],
)
def test_a_candidate_never_holds_what_no_process_or_record_can(flags, env, says):
    with pytest.raises(FlagError, match=f"^baseline: .*{says}"):
        Candidate.make("sglang", "m", flags, env, label="baseline")


def test_a_nul_byte_in_a_scenario_baseline_is_a_scenario_error(tmp_path):
    from bringup.scenario.loader import ScenarioError, load_scenario
    from tests.paths import ROOT

    seed = ROOT / "bringup" / "data" / "scenarios" / "glm5-nvfp4-sm120.yaml"
    text = seed.read_text()
    bad = tmp_path / "s.yaml"
    bad.write_text(text.replace("baseline: ", 'baseline: "--chat-template a\\0b" # ', 1))
    with pytest.raises(ScenarioError, match="NUL"):
        load_scenario(bad)
