"""The journal: every trial of every run, in SQLite, so a run resumes and later runs learn.

One database per runs folder (``<runs>/journal.sqlite``). A trial is written once it has an
outcome, in one transaction, so a run killed at any moment loses at most the trial in flight
and never records half of one. Trials carry the hardware fingerprint, engine version and model
identity, so a later run on the same machine, engine and model starts from what is known there.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time
from contextlib import closing
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from bringup.core.candidate import Candidate
from bringup.guard import secrets
from bringup.guard.files import kind_of
from bringup.observe.outcome import Outcome

# Delta debugging was called "explain" before it became "minimize": old journals still resume.
_RENAMED = {"explain": "minimize"}
_PURPOSE_NAMES = {"minimize": ("minimize", "explain")}

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    status TEXT NOT NULL,              -- running | validated | no-working-config | budget | interrupted
    engine TEXT NOT NULL,
    engine_version TEXT,
    model_id TEXT NOT NULL,
    hardware_fp TEXT NOT NULL,
    settings TEXT NOT NULL,            -- JSON: everything needed to resume
    result TEXT,                       -- JSON: the run's result once it ends
    run_dir TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,              -- order within the run
    purpose TEXT NOT NULL,             -- search | screen | minimize | tune (journals before 0.2: explain = minimize)
    candidate_key TEXT NOT NULL,
    effective_key TEXT NOT NULL,       -- what the engine really ran (predicted/observed)
    candidate TEXT NOT NULL,           -- JSON
    outcome TEXT NOT NULL,             -- JSON (bringup.observe.outcome.Outcome)
    status TEXT NOT NULL,
    failure_class TEXT,
    phase TEXT,
    started REAL NOT NULL,
    ended REAL NOT NULL,
    simulated_s REAL,
    trial_dir TEXT NOT NULL,
    hardware_fp TEXT NOT NULL,
    engine TEXT NOT NULL,
    engine_version TEXT,
    model_id TEXT NOT NULL,
    extra TEXT                         -- JSON: purpose-specific (tuning metrics, screen of which key)
);
CREATE INDEX IF NOT EXISTS trials_by_run ON trials(run_id, seq);
CREATE INDEX IF NOT EXISTS trials_by_target ON trials(hardware_fp, engine, engine_version, model_id);
CREATE TABLE IF NOT EXISTS plan_errors (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created REAL NOT NULL,
    hardware_fp TEXT NOT NULL,
    engine TEXT NOT NULL,
    model_id TEXT NOT NULL,
    run_id TEXT,
    trial_seq INTEGER,
    predicted TEXT NOT NULL,           -- JSON: the plan's KV figures
    reported TEXT NOT NULL,            -- JSON: what the engine logged
    rel_error REAL                     -- (reported - predicted) / predicted, KV GiB
);
"""


@dataclass
class TrialRecord:
    """One finished trial, as the journal keeps it (written whole, in one transaction)."""

    run_id: str
    seq: int
    purpose: str  # search | screen | minimize | dry-run | tune
    candidate: Candidate
    effective_key: str  # what the engine really ran (the strategy's predicted key)
    outcome: Outcome
    trial_dir: str
    extra: dict[str, Any]
    started: float = 0.0  # wall time (time.time()) of its launch and of its end
    ended: float = 0.0
    hardware_fp: str = ""
    model_id: str = ""


@dataclass
class RunRecord:
    """One run, as the journal keeps it: enough to resume it, and its result once it ended."""

    id: str
    created: float
    updated: float
    status: str  # running | validated | impossible | not-found | budget | interrupted
    engine: str
    engine_version: str | None
    model_id: str
    hardware_fp: str
    settings: dict[str, Any]  # everything needed to resume (bringup.session.settings.RunSettings)
    result: dict[str, Any] | None  # the run's result once it ends (bringup.record.results.RunResult)
    run_dir: str


_SQLITE_MAGIC = b"SQLite format 3\x00"


class JournalDamaged(RuntimeError):
    """The journal is not a readable SQLite database. It was moved aside untouched (renamed,
    never edited) unless opened read-only; the message says where, and how to go on."""


class JournalForeign(JournalDamaged):
    """A file where the journal should be that is not one bringup can write: empty (emptied),
    another program's database, tables of another schema, or not a plain file (a link, a FIFO).
    Nothing is moved or changed; the message says what it is and how to go on."""


class JournalRowDamaged(JournalDamaged):
    """A readable journal with a row bringup cannot read (edited by hand, another schema, another
    program's database): the table, the row and the fault are named; nothing is moved or changed."""


def _row_problem(table: str, row: sqlite3.Row, e: Exception) -> JournalRowDamaged:
    keys = row.keys() if hasattr(row, "keys") else []
    where = f"id {row['id']}" if "id" in keys else "a row"
    msg = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
    return JournalRowDamaged(
        f"journal {table} {where} cannot be read ({type(e).__name__}: {msg}); the journal was not changed: "
        "restore a copy, or give another --runs-dir for a new journal"
    )


_SIDES = ("", "-wal", "-shm", "-journal")  # the database and the files SQLite keeps beside it


def _expected_columns() -> dict[str, list[str]]:
    with closing(sqlite3.connect(":memory:")) as db:
        db.executescript(SCHEMA)
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {
            t: [r[1] for r in db.execute(f"PRAGMA table_info({t})")] for t in tables if t != "sqlite_sequence"
        }


def foreign_problem(path: Path) -> str | None:
    """Why the file at `path` (or one SQLite keeps beside it) is no journal bringup may open,
    though SQLite could read it: a link or a special file (SQLite would write through or block on
    it), an empty file (a journal emptied: starting a new one over it would hide that), another
    program's tables, or ours with other columns (an INSERT would fail half way). None: it is."""
    return _file_problem(path) or (_schema_problem(path) if path.exists() else None)


def _file_problem(path: Path) -> str | None:
    for side in _SIDES:
        p = path.with_name(path.name + side)
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode):
            return f"{p.name} is a symbolic link (bringup never writes through a link)"
        if not stat.S_ISREG(st.st_mode):
            return f"{p.name} is {kind_of(st.st_mode)}, not a file"
        if not side and st.st_size == 0:
            return "it is empty (0 bytes): the runs it recorded are gone; bringup does not start a new journal over it"
    return None


def _schema_problem(path: Path) -> str | None:
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
            have = {
                t: [r[1] for r in db.execute(f"PRAGMA table_info({t})")]
                for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
                if t != "sqlite_sequence"
            }
    except sqlite3.DatabaseError:
        return None  # journal_problem says what SQLite cannot read
    want = _expected_columns()
    ours = [t for t in want if t in have]
    if have and not ours:
        return f"it is another program's database (tables {', '.join(sorted(have)[:6])}), not a journal"
    for t in ours:
        if t == "runs" and have[t] != want[t] or not set(want[t]) <= set(have[t]):
            missing = [c for c in want[t] if c not in have[t]]
            extra = [c for c in have[t] if c not in want[t]]
            return (
                f"its table {t} is not bringup's (missing columns: {', '.join(missing[:6]) or 'none'}"
                f"{' ...' if len(missing) > 6 else ''}; others: {', '.join(extra[:6]) or 'none'}): "
                "another program's database, or another schema"
            )
    return None


def journal_problem(path: Path) -> str | None:
    """Why the journal at `path` cannot be used (None: it can, or it does not exist yet)."""
    try:
        if not path.exists() or path.stat().st_size == 0:
            return None
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as e:
        return f"cannot read it: {e.strerror or e}"
    if head != _SQLITE_MAGIC:
        return f"it is not an SQLite database (its first bytes are {head[:16]!r})"
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
            rows = [r[0] for r in db.execute("PRAGMA quick_check(5)")]
    except sqlite3.DatabaseError as e:
        return f"SQLite cannot read it: {e}"
    if rows != ["ok"]:
        return "SQLite finds it damaged: " + "; ".join(str(r) for r in rows)
    return None


def move_aside(path: Path) -> Path:
    """Rename the damaged journal (and its -wal/-shm files) out of the way; contents untouched."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    dst = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while dst.exists():
        n += 1
        dst = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    path.rename(dst)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(dst.with_name(dst.name + suffix))
    return dst


class Journal:
    def __init__(self, path: Path, readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        if foreign := foreign_problem(self.path):
            raise JournalForeign(
                f"the journal {self.path} cannot be used: {foreign}. It was left as it is. Restore a copy "
                "of the journal, or move this file away to start a new journal (or give another --runs-dir)."
            )
        problem = journal_problem(self.path)
        if problem is not None:
            if readonly:
                raise JournalDamaged(f"the journal {self.path} is damaged: {problem}. It was left as it is.")
            where = move_aside(self.path)
            raise JournalDamaged(
                f"the journal {self.path} is damaged: {problem}. It was moved aside, untouched, to {where}. "
                f"Run the same command again to start a new journal (trial folders and reports under "
                f"{self.path.parent} are kept; runs recorded in the damaged journal cannot be resumed); "
                f"or restore a good copy to {self.path} and resume."
            )
        if readonly:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as db:
            db.executescript(SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        if self.readonly:
            try:
                db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30)
                db.execute("SELECT 1 FROM runs LIMIT 1").fetchall()
            except sqlite3.OperationalError:  # a read-only folder: no -shm can be made; read the file as is
                db = sqlite3.connect(f"file:{self.path}?mode=ro&immutable=1", uri=True, timeout=30)
            db.row_factory = sqlite3.Row
            return db
        db = sqlite3.connect(self.path, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        db.row_factory = sqlite3.Row
        return db

    # -- runs ------------------------------------------------------------------------------------
    def create_run(
        self,
        run_id: str,
        engine: str,
        engine_version: str | None,
        model_id: str,
        hardware_fp: str,
        settings: dict,
        run_dir: Path,
    ) -> None:
        now = time.time()
        with closing(self._connect()) as db, db:
            db.execute(
                "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    now,
                    now,
                    "running",
                    engine,
                    engine_version,
                    model_id,
                    hardware_fp,
                    secrets.scrub_text(json.dumps(secrets.scrub(settings), default=str)),
                    None,
                    str(run_dir),
                ),
            )

    def finish_run(self, run_id: str, status: str, result: dict) -> None:
        with closing(self._connect()) as db, db:
            db.execute(
                "UPDATE runs SET status=?, result=?, updated=? WHERE id=?",
                (status, secrets.scrub_text(json.dumps(result, default=str)), time.time(), run_id),
            )

    def set_status(self, run_id: str, status: str) -> None:
        with closing(self._connect()) as db, db:
            db.execute("UPDATE runs SET status=?, updated=? WHERE id=?", (status, time.time(), run_id))

    def run(self, run_id: str) -> RunRecord | None:
        with closing(self._connect()) as db:
            row = db.execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        return _run_row(row) if row else None

    def latest_run(self) -> RunRecord | None:
        with closing(self._connect()) as db:
            row = db.execute("SELECT * FROM runs ORDER BY created DESC LIMIT 1").fetchone()
        return _run_row(row) if row else None

    def runs(self) -> list[RunRecord]:
        with closing(self._connect()) as db:
            return [_run_row(r) for r in db.execute("SELECT * FROM runs ORDER BY created")]

    # -- trials ----------------------------------------------------------------------------------
    def add_trial(self, rec: TrialRecord) -> None:
        with closing(self._connect()) as db, db:
            db.execute(
                "INSERT INTO trials (run_id, seq, purpose, candidate_key, effective_key, candidate, outcome, "
                "status, failure_class, phase, started, ended, simulated_s, trial_dir, hardware_fp, engine, "
                "engine_version, model_id, extra) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    rec.run_id,
                    rec.seq,
                    rec.purpose,
                    rec.candidate.key(),
                    secrets.redact_key(rec.effective_key),
                    secrets.scrub_text(json.dumps(rec.candidate.to_json(), default=str)),
                    secrets.scrub_text(rec.outcome.model_dump_json()),
                    rec.outcome.status,
                    rec.outcome.failure_class,
                    rec.outcome.phase,
                    rec.started,
                    rec.ended,
                    rec.outcome.timings.simulated,
                    rec.trial_dir,
                    rec.hardware_fp,
                    rec.outcome.engine,
                    rec.outcome.engine_version,
                    rec.model_id,
                    secrets.scrub_text(json.dumps(rec.extra or {}, default=str)),
                ),
            )
            db.execute("UPDATE runs SET updated=? WHERE id=?", (time.time(), rec.run_id))

    def trials(self, run_id: str, purpose: str | None = None) -> list[TrialRecord]:
        names = _PURPOSE_NAMES.get(purpose, (purpose,)) if purpose else ()
        q = (
            "SELECT * FROM trials WHERE run_id=?"
            + (f" AND purpose IN ({','.join('?' * len(names))})" if names else "")
            + " ORDER BY seq"
        )
        args = (run_id, *names)
        with closing(self._connect()) as db:
            return [_trial_row(r) for r in db.execute(q, args)]

    def prior_trials(
        self, hardware_fp: str, engine: str, engine_version: str | None, model_id: str, exclude_run: str
    ) -> list[TrialRecord]:
        """Finished trials of other runs on the same machine, engine version and model."""
        with closing(self._connect()) as db:
            rows = db.execute(
                "SELECT t.* FROM trials t WHERE t.hardware_fp=? AND t.engine=? AND t.engine_version IS ? "
                "AND t.model_id=? AND t.run_id != ? AND t.purpose IN ('search', 'screen', 'minimize', 'explain') "
                "ORDER BY t.ended",
                (hardware_fp, engine, engine_version, model_id, exclude_run),
            ).fetchall()
        return [_trial_row(r) for r in rows]

    # -- memory plan errors (issue: plans corrected by what engines reported here) ----------------
    def add_plan_error(
        self,
        hardware_fp: str,
        engine: str,
        model_id: str,
        run_id: str | None,
        seq: int | None,
        predicted: dict,
        reported: dict,
        rel_error: float | None,
    ) -> None:
        with closing(self._connect()) as db, db:
            db.execute(
                "INSERT INTO plan_errors (created, hardware_fp, engine, model_id, run_id, trial_seq, "
                "predicted, reported, rel_error) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    time.time(),
                    hardware_fp,
                    engine,
                    model_id,
                    run_id,
                    seq,
                    json.dumps(predicted, default=str),
                    json.dumps(reported, default=str),
                    rel_error,
                ),
            )

    def plan_errors(self, hardware_fp: str, engine: str) -> list[float]:
        with closing(self._connect()) as db:
            rows = db.execute(
                "SELECT rel_error FROM plan_errors WHERE hardware_fp=? AND engine=? AND "
                "rel_error IS NOT NULL ORDER BY created",
                (hardware_fp, engine),
            ).fetchall()
        return [r[0] for r in rows]


def _run_row(row: sqlite3.Row) -> RunRecord:
    try:
        d = dict(row)
        d["settings"] = json.loads(d["settings"])
        d["result"] = json.loads(d["result"]) if d["result"] else None
        if not isinstance(d["settings"], dict) or not isinstance(d.get("run_dir"), str):
            raise ValueError("settings is not a JSON object or run_dir is not text")
        return RunRecord(**{f.name: d[f.name] for f in fields(RunRecord)})
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise _row_problem("runs", row, e) from None


def _trial_row(row: sqlite3.Row) -> TrialRecord:
    try:
        return _trial_record(row)
    except (
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
    ) as e:  # pydantic's errors are ValueErrors
        raise _row_problem("trials", row, e) from None


def _trial_record(row: sqlite3.Row) -> TrialRecord:
    return TrialRecord(
        run_id=row["run_id"],
        seq=row["seq"],
        purpose=_RENAMED.get(row["purpose"], row["purpose"]),
        candidate=Candidate.from_json(json.loads(row["candidate"])),
        effective_key=row["effective_key"],
        outcome=Outcome.model_validate_json(row["outcome"]),
        trial_dir=row["trial_dir"],
        extra=json.loads(row["extra"] or "{}"),
        started=row["started"],
        ended=row["ended"],
        hardware_fp=row["hardware_fp"],
        model_id=row["model_id"],
    )
