"""A failure foreseen by a lesson of another run (Strategy.expect): a prior the launches update,
never a certainty (bringup/session/learned.py puts lessons in; docs/lessons.md)."""

from __future__ import annotations

from bringup.search.evidence import blocker_key
from tests.search.search_world import World, solve
from tests.search.test_search_beliefs import LEN, TP, make

TP_KEY = blocker_key(TP.outcome())


def test_a_strongly_foreseen_failure_makes_its_cure_the_first_proposal() -> None:
    plain = make("--tensor-parallel-size 8")
    assert plain.propose().candidate.flag_dict == plain.baseline.flag_dict  # nothing known: the baseline
    s = make("--tensor-parallel-size 8")
    named = s.expect(TP_KEY, "bad-flag", "parse-args", {"--tensor-parallel-size": None}, 0.8, "a lesson")
    assert named == ["--tensor-parallel-size"]
    assert "--tensor-parallel-size" not in s.propose().candidate.flag_dict
    assert solve(s, World([TP]))[0][1].status == "works"  # one launch


def test_a_weakly_foreseen_failure_leaves_the_baseline_first() -> None:
    s = make("--tensor-parallel-size 8")
    s.expect(TP_KEY, "bad-flag", "parse-args", {"--tensor-parallel-size": None}, 0.1, "a far lesson")
    assert s.propose().candidate.flag_dict == s.baseline.flag_dict


def test_a_cure_outside_the_space_or_without_weight_changes_nothing() -> None:
    s = make("--tensor-parallel-size 8")
    assert s.expect(TP_KEY, "bad-flag", "parse-args", {"--no-such-flag": "1"}, 0.9, "x") == []
    assert s.expect(TP_KEY, "bad-flag", "parse-args", {"--tensor-parallel-size": None}, 0.0, "x") == []
    assert s.blockers == [] and s.expected == {}


def test_when_the_foreseen_failure_is_seen_its_own_evidence_is_read_beside_the_lesson() -> None:
    s = make("--tensor-parallel-size 8 --max-model-len 999999")
    s.expect(TP_KEY, "bad-flag", "parse-args", {"--max-model-len": None}, 0.2, "a lesson about another cure")
    first = s.next_launch([], [], set()).candidate
    s.observe(first, TP.outcome())
    b = next(b for b in s.blockers if b.key == TP_KEY)
    assert b.seen == 1 and s.expected == {}  # no longer a prediction: a failure seen here
    assert any(c.describe().startswith("--tensor-parallel-size") for c, _ in b.top(3))  # the evidence
    assert any(c.describe().startswith("--max-model-len") for c in b.post)  # and the lesson, kept


def test_a_lesson_whose_cure_fails_the_same_way_here_does_not_hold_the_search() -> None:
    """The lesson says dropping --max-model-len cures the tp failure; here it does not. Its cure is
    launched first (it is believed), fails the same way, and the search goes on from the evidence."""
    s = make("--tensor-parallel-size 8 --max-model-len 999999")
    s.expect(TP_KEY, "bad-flag", "parse-args", {"--max-model-len": None}, 0.8, "a wrong lesson")
    path = solve(s, World([TP, LEN]))
    assert "--max-model-len" not in path[0][0].flag_dict  # the lesson first
    assert path[0][1].failure_class == "bad-value"
    assert path[-1][1].status == "works" and len(path) <= 3
