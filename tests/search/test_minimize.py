"""Minimizing (delta debugging) in-process: the exact minimal set and a bound on launches."""

from __future__ import annotations

from bringup.core.candidate import Candidate, Change
from bringup.observe.outcome import Outcome
from bringup.search.minimize import apply, ddmin, minimal_fix


def _changes(n: int) -> list[Change]:
    return [Change(f"--f{i}", None, str(i)) for i in range(n)]


def test_ddmin_finds_the_two_changes_that_matter_with_few_tests():
    changes = _changes(8)
    calls: list[list[str]] = []

    def works(subset: list[Change]) -> bool:
        calls.append([c.flag for c in subset])
        flags = {c.flag for c in subset}
        return {"--f2", "--f5"} <= flags

    assert [c.flag for c in ddmin(changes, works)] == ["--f2", "--f5"]
    # ddmin's worst case is quadratic in the changes (Zeller 2002); here it took 28 tests, not
    # the 2^8 subsets; minimal_fix below keeps real launches lower still by reusing outcomes.
    assert len(calls) <= len(changes) ** 2 // 2, calls


def test_ddmin_of_one_needed_change():
    calls = []

    def works(subset: list[Change]) -> bool:
        calls.append(subset)
        return any(c.flag == "--f6" for c in subset)

    assert [c.flag for c in ddmin(_changes(8), works)] == ["--f6"]
    assert len(calls) <= 8


def _outcome(ok: bool) -> Outcome:
    return Outcome(status="works" if ok else "fails")


def test_minimal_fix_reuses_known_outcomes_ignores_frozen_and_respects_the_budget():
    base = Candidate.make("vllm", "m", {"--a": "1"})
    working = base.with_changes({"--a": "2", "--b": "x", "--c": "y"})
    launched: list[Candidate] = []

    def key_of(c: Candidate) -> str:
        return c.key()

    def launch(c: Candidate) -> Outcome:
        launched.append(c)
        return _outcome(c.flag_dict.get("--a") == "2")  # only --a 2 matters

    outcomes = {key_of(working): _outcome(True)}
    fix = minimal_fix(base, working, key_of, outcomes, launch, budget=8, ignored={"--c"})
    assert [c.describe() for c in fix.changes] == ["--a 2"]
    assert fix.verified and fix.final == apply(base, fix.changes)
    # --c is ignored by the engine: never part of the fix, never launched.
    assert all("--c" not in c.flag_dict for c in launched)
    assert 1 <= len(launched) <= 2

    # With no budget, nothing is launched and the fix is every (effective) change, unverified.
    launched.clear()
    fix = minimal_fix(
        base, working, key_of, {key_of(working): _outcome(True)}, launch, budget=0, ignored={"--c"}
    )
    assert not launched and not fix.verified
    assert [c.flag for c in fix.changes] == ["--a", "--b"]
    assert fix.final == working  # the smaller set was never seen working
