"""Files of lessons: every bad one refused with the file and the entry named, the rest kept;
merging keeps disagreements (bringup/knowledge/learned_files.py)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from bringup.knowledge.learned import Evidence
from bringup.knowledge.learned_files import LESSONS_MAX, dump, merge, read_lessons
from tests.lessons_util import lesson, lesson_file


def _with_entry(path: Path, entry: dict) -> Path:
    """A file of one good lesson and ``entry`` after it."""
    doc = yaml.safe_load(dump([lesson()]))
    doc["lessons"].append(entry)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _entry(**changes) -> dict:
    d = lesson(fix=[{"flag": "--max-model-len", "before": "999999"}]).model_dump(mode="json", by_alias=True)
    d.update(changes)
    return d


def test_a_written_file_reads_back_the_same_lessons(tmp_path: Path) -> None:
    a, b = lesson(), lesson(fix=[{"flag": "--enforce-eager", "after": True}])
    got = read_lessons([lesson_file(tmp_path / "l.yaml", a, b)])
    assert got.refused == []
    assert [ls for ls, _ in got.lessons] == [a, b]
    assert got.lessons[1][1].endswith(f"l.yaml: lessons[1] ({b.id})")


def test_damaged_yaml_is_refused_with_the_file_named(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("lessons:\n  - id: [unclosed\n")
    got = read_lessons([p])
    assert got.lessons == [] and len(got.refused) == 1
    assert str(p) in got.refused[0] and "not valid YAML" in got.refused[0]


def test_an_entry_with_an_unknown_field_is_refused_alone(tmp_path: Path) -> None:
    bad = _entry(note="hand-written")
    got = read_lessons([_with_entry(tmp_path / "l.yaml", bad)])
    assert len(got.lessons) == 1  # the good entry is kept
    assert len(got.refused) == 1
    assert f"lessons[1] ({bad['id']})" in got.refused[0] and "note" in got.refused[0]


def test_an_unknown_top_level_field_refuses_the_file(tmp_path: Path) -> None:
    p = tmp_path / "l.yaml"
    p.write_text(dump([lesson()]) + "owner: me\n")
    got = read_lessons([p])
    assert got.lessons == [] and "owner" in got.refused[0]


def test_a_scope_no_machine_can_have_is_refused(tmp_path: Path) -> None:
    bad = _entry()
    bad["scope"]["compute_capability"] = 99.0
    got = read_lessons([_with_entry(tmp_path / "l.yaml", bad)])
    assert len(got.lessons) == 1 and "compute capability 99.0" in got.refused[0]


def _fixed(tmp_path: Path, fix: list[dict]) -> list[str]:
    return read_lessons([lesson_file(tmp_path / "l.yaml", lesson(fix=fix))]).refused


def test_a_fix_that_sets_a_flag_bringup_sets_itself_is_refused(tmp_path: Path) -> None:
    for flag in ("--port", "--host", "--model"):
        refused = _fixed(tmp_path, [{"flag": flag, "after": "x"}])
        assert len(refused) == 1 and "bringup sets itself" in refused[0], flag


def test_a_fix_that_holds_a_secret_or_a_path_of_its_machine_is_refused(tmp_path: Path) -> None:
    assert "secret" in _fixed(tmp_path, [{"flag": "env:HF_TOKEN", "after": "hf_abc"}])[0]
    assert "path of the machine" in _fixed(tmp_path, [{"flag": "--download-dir", "after": "/data/me"}])[0]


def test_a_symlink_a_fifo_and_a_huge_file_are_refused_without_reading_them(tmp_path: Path) -> None:
    good = lesson_file(tmp_path / "good.yaml", lesson())
    (tmp_path / "link.yaml").symlink_to(good)
    os.mkfifo(tmp_path / "fifo.yaml")  # a read of it would wait forever for a writer
    with open(tmp_path / "huge.yaml", "wb") as f:
        f.truncate(1 << 30)  # 1 GB, sparse: never read
    got = read_lessons([tmp_path / "link.yaml", tmp_path / "fifo.yaml", tmp_path / "huge.yaml"])
    assert got.lessons == []
    why = dict(line.split(": ", 1) for line in got.refused)
    assert "symbolic link" in why[str(tmp_path / "link.yaml")]
    assert "not a regular file" in why[str(tmp_path / "fifo.yaml")]
    assert f"over the {LESSONS_MAX >> 20} MB limit" in why[str(tmp_path / "huge.yaml")]


def test_a_folder_reads_its_lesson_files_and_skips_git_and_links(tmp_path: Path) -> None:
    team = tmp_path / "team"
    (team / "h200").mkdir(parents=True)
    (team / ".git").mkdir()
    lesson_file(team / "h200" / "a.yaml", lesson())
    lesson_file(team / ".git" / "old.yaml", lesson(run="old"))
    (team / "README.md").write_text("not a lesson")
    os.mkfifo(team / "pipe.yaml")
    got = read_lessons([team])
    assert [ls.source.run for ls, _ in got.lessons] == ["run-a"]
    assert len(got.refused) == 1 and "pipe.yaml" in got.refused[0]


def test_not_utf8_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "l.yaml"
    p.write_bytes(b"lessons: [\xff\xfe]\n")
    assert "not UTF-8" in read_lessons([p]).refused[0]


# -- merging ------------------------------------------------------------------------------------------
def test_the_same_lesson_from_two_machines_is_one_entry_confirmed_by_both() -> None:
    a, b = lesson(run="run-a", machine="hw:a"), lesson(run="run-b", machine="hw:b")
    merged, notes = merge([[a], [b]])
    assert notes == [] and len(merged) == 1
    assert merged[0].conflict is None and [s.run for s in merged[0].confirmed] == ["run-b"]
    assert merge([merged, [a, b]])[0] == merged  # merging again changes nothing


def test_a_copy_that_saw_the_fix_fail_is_kept_beside_the_other_and_both_say_so() -> None:
    a = lesson(run="run-a", machine="hw:a")
    b = a.model_copy(deep=True)
    b.strength = 0.3
    b.against.append(Evidence(run="run-b", trial="trials/02-search-1234abcd/server.log", line="same failure"))
    merged, notes = merge([[a], [b]])
    assert len(merged) == 2 and {m.strength for m in merged} == {1.0, 0.3}  # nothing overwritten
    assert all(m.conflict and "another copy disagrees" in m.conflict for m in merged)
    assert "run-b" in merged[0].conflict and len(notes) == 2


def test_two_fixes_for_one_failure_in_reach_of_each_other_are_both_kept_and_said_to_disagree() -> None:
    a = lesson(run="run-a")
    b = lesson(
        fix=[{"flag": "--tensor-parallel-size", "before": "8", "after": "1"}], run="run-b", gpu_count=2
    )
    far = lesson(
        fix=[{"flag": "--tensor-parallel-size", "before": "8", "after": "4"}],
        run="run-c",
        compute_capability=12.0,
    )
    merged, _ = merge([[a], [b, far]])
    assert len(merged) == 3
    assert merged[0].conflict and merged[1].id in merged[0].conflict and far.id not in merged[0].conflict
    assert merged[2].conflict is None  # another GPU architecture: out of reach, no disagreement
