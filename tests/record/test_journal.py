"""The journal in-process: runs, trials, their purposes (old names too), priors across runs, plan errors.

The run tests exercise it through `bringup run`; these pin its own contract, so a change to the
schema or a query shows up here in milliseconds.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from bringup.core.candidate import Candidate
from bringup.observe.outcome import Outcome, ProbeResult, Timings
from bringup.record.journal import Journal, TrialRecord

HW, MODEL = "hw-1", "model-1"


def cand(**flags) -> Candidate:
    return Candidate.make("vllm", "/m", {f"--{k.replace('_', '-')}": v for k, v in flags.items()})


def outcome(
    status: str = "fails",
    cls: str | None = "oom-kv-cache",
    version: str | None = "0.32.0",
    simulated: float | None = None,
) -> Outcome:
    return Outcome(
        status=status,
        failure_class=cls if status != "works" else None,
        phase="kv-alloc",
        evidence=["No available memory for the cache blocks"],
        engine="vllm",
        engine_version=version,
        timings=Timings(total=12.5, simulated=simulated),
        probes=[ProbeResult(name="health", passed=status == "works")],
    )


@pytest.fixture
def journal(tmp_path) -> Journal:
    return Journal(tmp_path / "runs" / "journal.sqlite")


def new_run(j: Journal, run_id: str, tmp_path: Path, hw: str = HW, version: str | None = "0.32.0") -> None:
    j.create_run(
        run_id,
        "vllm",
        version,
        MODEL,
        hw,
        {"engine": "vllm", "max_launches": 12, "fix": {"--tp": 1}},
        tmp_path / "runs" / run_id,
    )


def add(
    j: Journal,
    run_id: str,
    seq: int,
    purpose: str,
    c: Candidate,
    o: Outcome,
    hw: str = HW,
    extra: dict | None = None,
) -> None:
    j.add_trial(
        TrialRecord(
            run_id=run_id,
            seq=seq,
            purpose=purpose,
            candidate=c,
            effective_key=c.key(),
            outcome=o,
            trial_dir=str(Path("/t") / f"{run_id}-{seq}"),
            extra=extra or {},
            started=100.0 + seq,
            ended=110.0 + seq,
            hardware_fp=hw,
            model_id=MODEL,
        )
    )


def test_creates_its_folder_and_a_run_reads_back(journal, tmp_path):
    assert journal.path.is_file()
    assert journal.latest_run() is None and journal.run("nope") is None
    new_run(journal, "r1", tmp_path)
    row = journal.run("r1")
    assert row.status == "running" and row.engine == "vllm" and row.engine_version == "0.32.0"
    assert row.settings == {"engine": "vllm", "max_launches": 12, "fix": {"--tp": 1}}  # JSON round trip
    assert row.result is None and row.run_dir == str(tmp_path / "runs" / "r1")


def test_finish_and_status_and_latest(journal, tmp_path):
    new_run(journal, "r1", tmp_path)
    new_run(journal, "r2", tmp_path)
    assert journal.latest_run().id == "r2"
    assert [r.id for r in journal.runs()] == ["r1", "r2"]
    journal.set_status("r1", "interrupted")
    assert journal.run("r1").status == "interrupted"
    journal.finish_run("r2", "validated", {"final_command": "vllm serve /m", "launches": 2})
    row = journal.run("r2")
    assert row.status == "validated" and row.result["launches"] == 2


def test_a_second_journal_object_resumes_what_the_first_wrote(journal, tmp_path):
    """Resume is a new process opening the same file: everything written is there, in order."""
    new_run(journal, "r1", tmp_path)
    add(journal, "r1", 2, "search", cand(enforce_eager=True), outcome("works"))
    add(journal, "r1", 1, "search", cand(), outcome())
    again = Journal(journal.path)
    assert again.run("r1").status == "running"
    trials = again.trials("r1")
    assert [t.seq for t in trials] == [1, 2]  # ordered by seq, not by insertion
    t1, t2 = trials
    assert t1.candidate == cand() and t1.candidate.key() == cand().key() and t1.effective_key == cand().key()
    assert t1.outcome.status == "fails" and t1.outcome.failure_class == "oom-kv-cache"
    assert t1.outcome.evidence == ["No available memory for the cache blocks"]
    assert t2.outcome.works and t2.outcome.probes[0].passed
    assert t2.candidate.flag_dict == {"--enforce-eager": True}
    assert t1.trial_dir == "/t/r1-1" and t1.run_id == "r1" and t1.extra == {}


def test_trials_filtered_by_purpose_with_extra(journal, tmp_path):
    new_run(journal, "r1", tmp_path)
    add(journal, "r1", 1, "screen", cand(), outcome(), extra={"screen_of": "abc"})
    add(journal, "r1", 2, "search", cand(max_num_seqs=8), outcome())
    add(journal, "r1", 3, "minimize", cand(enforce_eager=True), outcome("works"))
    add(journal, "r1", 4, "tune", cand(max_num_seqs=16), outcome("works"), extra={"metrics": {"rps": 3.5}})
    assert [t.seq for t in journal.trials("r1", "screen")] == [1]
    assert journal.trials("r1", "screen")[0].extra == {"screen_of": "abc"}
    assert [t.seq for t in journal.trials("r1", "minimize")] == [3]
    assert journal.trials("r1", "tune")[0].extra["metrics"]["rps"] == 3.5
    assert [t.purpose for t in journal.trials("r1")] == ["screen", "search", "minimize", "tune"]
    assert journal.trials("other-run") == []


def test_old_explain_rows_read_as_minimize(journal, tmp_path):
    """Delta debugging was journalled as purpose 'explain' before the rename: old journals resume."""
    new_run(journal, "r1", tmp_path)
    add(journal, "r1", 1, "explain", cand(enforce_eager=True), outcome("works"))
    add(journal, "r1", 2, "minimize", cand(), outcome())
    with closing(sqlite3.connect(journal.path)) as db:  # the row really is stored under the old name
        assert db.execute("SELECT purpose FROM trials WHERE seq=1").fetchone()[0] == "explain"
    mins = journal.trials("r1", "minimize")
    assert [(t.seq, t.purpose) for t in mins] == [(1, "minimize"), (2, "minimize")]
    assert journal.trials("r1")[0].purpose == "minimize"


def test_prior_trials_come_from_other_runs_on_the_same_target(journal, tmp_path):
    new_run(journal, "old", tmp_path)
    add(journal, "old", 1, "search", cand(), outcome())  # counted
    add(journal, "old", 2, "explain", cand(enforce_eager=True), outcome("works"))  # old name: counted
    add(journal, "old", 3, "tune", cand(max_num_seqs=4), outcome("works"))  # tuning points: not priors
    add(journal, "old", 4, "screen", cand(max_num_seqs=2), outcome(), hw="other-machine")  # elsewhere
    new_run(journal, "now", tmp_path)
    add(journal, "now", 1, "search", cand(max_num_seqs=8), outcome())  # this run: excluded
    prior = journal.prior_trials(HW, "vllm", "0.32.0", MODEL, exclude_run="now")
    assert [(t.run_id, t.seq, t.purpose) for t in prior] == [("old", 1, "search"), ("old", 2, "minimize")]
    # another engine version or model on the same machine knows nothing of these
    assert journal.prior_trials(HW, "vllm", "0.33.0", MODEL, exclude_run="now") == []
    assert journal.prior_trials(HW, "vllm", "0.32.0", "model-2", exclude_run="now") == []
    assert journal.prior_trials(HW, "sglang", "0.32.0", MODEL, exclude_run="now") == []


def test_prior_trials_match_an_unknown_engine_version(journal, tmp_path):
    """`engine_version IS ?`: a version nobody could read (None) matches None, not everything."""
    new_run(journal, "old", tmp_path, version=None)
    add(journal, "old", 1, "search", cand(), outcome(version=None))
    assert len(journal.prior_trials(HW, "vllm", None, MODEL, exclude_run="now")) == 1
    assert journal.prior_trials(HW, "vllm", "0.32.0", MODEL, exclude_run="now") == []


def test_plan_errors_per_machine_and_engine_in_order(journal):
    journal.add_plan_error(HW, "sglang", MODEL, "r1", 1, {"kv_gib": 23.36}, {"kv_gib": 24.37}, 0.043)
    journal.add_plan_error(
        HW, "sglang", MODEL, "r1", 2, {"kv_gib": 20.0}, {}, None
    )  # nothing reported: skipped
    journal.add_plan_error(HW, "sglang", MODEL, None, None, {"kv_gib": 10.0}, {"kv_gib": 9.0}, -0.1)
    journal.add_plan_error("other", "sglang", MODEL, "r2", 1, {"kv_gib": 1.0}, {"kv_gib": 2.0}, 1.0)
    journal.add_plan_error(HW, "vllm", MODEL, "r3", 1, {"kv_gib": 1.0}, {"kv_gib": 1.5}, 0.5)
    assert journal.plan_errors(HW, "sglang") == [0.043, -0.1]
    assert journal.plan_errors(HW, "vllm") == [0.5]
    assert journal.plan_errors("nowhere", "sglang") == []
