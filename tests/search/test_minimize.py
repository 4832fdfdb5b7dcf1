"""Minimizing (greedy deletion, as a shrinker) in-process: the exact minimal set and a bound on launches."""

from __future__ import annotations

from bringup.core.candidate import Candidate, Change
from bringup.observe.outcome import Outcome
from bringup.search.minimize import apply, minimal_fix, shrink


def _changes(n: int) -> list[Change]:
    return [Change(f"--f{i}", None, str(i)) for i in range(n)]


def test_shrink_finds_the_two_changes_that_matter_with_few_tests():
    changes = _changes(8)
    calls: list[list[str]] = []

    def works(subset: list[Change]) -> bool:
        calls.append([c.flag for c in subset])
        flags = {c.flag for c in subset}
        return {"--f2", "--f5"} <= flags

    assert [c.flag for c in shrink(changes, works)] == ["--f2", "--f5"]
    # One pass of deletions (8 tests), then the two kept changes once more on the final set, whose
    # first test was on a larger one (ddmin, which this replaced, took 28 here).
    assert len(calls) == 10, calls


def test_shrink_of_one_needed_change_never_tests_the_baseline():
    calls = []

    def works(subset: list[Change]) -> bool:
        calls.append(subset)
        assert subset, "the empty set is the baseline: known to fail, never tested"
        return any(c.flag == "--f6" for c in subset)

    assert [c.flag for c in shrink(_changes(8), works)] == ["--f6"]
    assert len(calls) == 8


def test_shrink_when_most_changes_are_needed_costs_one_test_per_change():
    """The search's working candidate: three of four changes needed. The model's order tries the
    unneeded change first, and then each other deletion is tested once, on the final set."""
    changes = _changes(4)
    needed = {"--f0", "--f1", "--f2"}
    calls: list[set[str]] = []

    def works(subset: list[Change]) -> bool:
        calls.append({c.flag for c in subset})
        return needed <= {c.flag for c in subset}

    def likelihood(subset: list[Change]) -> float:
        return 0.9 if "--f3" not in {c.flag for c in subset} else 0.1

    assert [c.flag for c in shrink(changes, works, likelihood)] == ["--f0", "--f1", "--f2"]
    assert len(calls) == 4 and calls[0] == needed, calls
    # Without an order the unneeded change comes last, and the three are tested again on the
    # smaller set: 4 + 3.
    calls.clear()
    assert [c.flag for c in shrink(changes, works)] == ["--f0", "--f1", "--f2"]
    assert len(calls) == 7, calls


def test_shrink_is_one_minimal_when_a_deletion_only_works_on_the_smaller_set():
    """Not monotone, as configurations are not: --f1 is needed only while --f3 is there (a change
    that breaks unless another compensates). Deleting --f1 fails in the first pass and works once
    --f3 is gone; the second pass finds it."""

    def works(subset: list[Change]) -> bool:
        flags = {c.flag for c in subset}
        return "--f0" in flags and ("--f1" in flags or "--f3" not in flags)

    assert [c.flag for c in shrink(_changes(4), works)] == ["--f0"]


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


def test_minimal_fix_of_the_real_three_mistake_run_fits_six_launches():
    """tests/session/test_multifault_user_settings.py's run as it ended (docs/user-settings.md): the
    working launch dropped three user settings and raised a fourth (--g 0.3 -> 0.5) that the
    machine did not need; the search had seen the first two drops alone fail. ddmin spent its six
    launches on halves and single changes and reported all four; the shrinker reports the three,
    verified, within the six, and with the model's order in three."""
    base = Candidate.make("vllm", "m", {"--a": "1", "--b": "1", "--c": "1", "--g": "0.3"})
    working = base.with_changes({"--a": None, "--b": None, "--c": None, "--g": "0.5"})
    seen_failing = base.with_changes({"--a": None, "--b": None})  # the search's launch 2

    def launch(c: Candidate) -> Outcome:
        launched.append(c)
        return _outcome(not ({"--a", "--b", "--c"} & set(c.flag_dict)))

    for likelihood, most in ((None, 6), (lambda c: 0.9 if c.flag_dict.get("--g") == "0.3" else 0.2, 3)):
        launched: list[Candidate] = []
        outcomes = {working.key(): _outcome(True), seen_failing.key(): _outcome(False)}
        fix = minimal_fix(base, working, Candidate.key, outcomes, launch, 6, likelihood=likelihood)
        assert sorted(c.flag for c in fix.changes) == ["--a", "--b", "--c"] and fix.verified
        assert len(launched) == most, [c.flag_dict for c in launched]
