"""When a screen (dummy weights, few layers) is worth a launch before a full one."""

from __future__ import annotations

from bringup.record.results import Attempt
from bringup.search.screening import SCREEN_COST_S, ScreeningPolicy


def _policy() -> ScreeningPolicy:
    return ScreeningPolicy("auto", {"--load-format": "dummy"}, weights_gib=140.0, simulated=True)


def _full(n: int, cost: float, status: str = "fails", phase: str = "graph-capture") -> Attempt:
    return Attempt(number=n, purpose="search", changes="", status=status, phase=phase, simulated_s=cost)


def test_a_long_failing_launch_makes_a_gamble_worth_screening():
    assert _policy().worth_it(0.3, False, [_full(1, 700.0)])


def test_a_failure_that_came_within_a_screens_time_is_not_screened_for():
    # A hang in distributed start-up after 25 s, a backend refused before the weights load after
    # 39 s: a full launch fails as cheaply as a screen, and a screen that passes is a launch more.
    p = _policy()
    assert not p.worth_it(0.3, False, [_full(1, 25.0, "timeout", "distributed-init")])
    assert not p.worth_it(0.3, False, [_full(1, 39.0, phase="load-weights")])


def test_a_long_failure_before_the_weights_is_not_screened_for():
    """A hang in distributed start-up costs its deadline (625 s on the double's clock, as on a real
    machine), but a screen skips only the weights and layers: it would hang as long."""
    p = _policy()
    assert not p.worth_it(0.3, False, [_full(1, 625.0, "timeout", "distributed-init")])
    assert p.worth_it(0.3, False, [_full(1, 625.0, "timeout", "kv-alloc")])  # after the weights: it pays


def test_the_cost_of_a_screen_run_here_replaces_the_assumed_one():
    p = _policy()
    failed = _full(1, 80.0)
    assert 0.7 * 80.0 < SCREEN_COST_S and not p.worth_it(0.3, False, [failed])
    screened = Attempt(number=2, purpose="screen", changes="", status="fails", simulated_s=10.0)
    assert p.worth_it(0.3, False, [failed, screened])


def test_small_models_and_likely_candidates_are_never_screened():
    small = ScreeningPolicy("auto", {"--load-format": "dummy"}, weights_gib=8.0, simulated=True)
    assert not small.worth_it(0.3, False, [_full(1, 700.0)])
    assert not _policy().worth_it(0.9, False, [_full(1, 700.0)])


def _screen(n: int, cost: float, status: str = "fails") -> Attempt:
    return Attempt(number=n, purpose="screen", changes="", status=status, simulated_s=cost)


def test_a_screens_time_left_comes_from_the_screens_that_ran_to_their_end():
    p = _policy()
    assert p.remaining_s(20.0, []) == SCREEN_COST_S - 20.0  # none ran yet: the assumed cost
    done = [_screen(1, 30.0), _screen(2, 70.0), _screen(3, 90.0)]
    assert p.remaining_s(40.0, done) == (30.0 + 50.0) / 2  # of those that ran longer than 40 s
    # Past every screen so far: expected to run on as long again as it is overdue.
    assert p.remaining_s(90.0, done) == 0.0 and p.remaining_s(150.0, done) == 60.0
    # A cancelled screen was cut short: it says nothing of how long screens take.
    assert p.remaining_s(150.0, [*done, _screen(4, 120.0, "cancelled")]) == 60.0
    assert not p.worth_it(0.3, False, [_full(1, 80.0), _screen(2, 1.0, "cancelled")])
