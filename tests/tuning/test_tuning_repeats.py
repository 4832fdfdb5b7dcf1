"""The repeat phase and its verdict on synthetic samples: exact statistics, the interleaved order,
the stopping rule, rejected runs, a failing baseline, interference, and the reports."""

from __future__ import annotations

import itertools
import math

import pytest

from bringup.tuning.findings import tune_markdown
from bringup.tuning.repeats import Repeats, apply_to, report
from bringup.tuning.result import TunePoint, TuneResult
from bringup.tuning.stats import (
    _midranks,
    mad,
    mann_whitney_greater,
    median,
    median_interval,
    min_p_value,
    robust_sigma,
)
from bringup.tuning.tuner import Evaluation, Point
from bringup.tuning.verdict import NO_WINNER, Arm, RepeatRule, compare, decide

B = {"--x": "1"}
F1 = {"--x": "2"}
F2 = {"--x": "3"}


# -- statistics ------------------------------------------------------------------------------------


def test_median_mad_and_sigma():
    assert median([3, 1, 2]) == 2 and median([4, 1, 3, 2]) == 2.5
    assert mad([1, 2, 3, 4, 100]) == 1  # deviations 2,1,0,1,97
    assert robust_sigma([1, 2, 3, 4, 100]) == pytest.approx(1.4826)
    assert robust_sigma([7.0]) == 0.0
    with pytest.raises(ValueError):
        median([])


def test_median_interval_is_order_statistics_with_exact_coverage():
    iv = median_interval(list(range(1, 11)))  # n=10: x(2)..x(9), 1 - 2 * 11/1024
    assert (iv.lo, iv.hi) == (2, 9) and iv.coverage == pytest.approx(1 - 22 / 1024)
    small = median_interval([3.0, 1.0, 2.0])  # too few for 95%: the range, and its coverage
    assert (small.lo, small.hi, small.coverage) == (1.0, 3.0, 0.75)


def _brute_force(x: list[float], y: list[float]) -> float:
    r = _midranks([*x, *y])
    obs = sum(r[: len(x)])
    combos = list(itertools.combinations(range(len(r)), len(x)))
    return sum(1 for c in combos if sum(r[i] for i in c) >= obs - 1e-9) / len(combos)


def test_mann_whitney_exact_p_values():
    assert mann_whitney_greater([5, 6, 7, 8], [1, 2, 3, 4]) == pytest.approx(1 / 70)
    assert mann_whitney_greater([1, 2, 3, 4], [5, 6, 7, 8]) == 1.0
    # ties as mid-ranks: counted over every split, as a brute force does
    x, y = [1.2, 1.5, 1.5, 2.0, 2.2], [1.0, 1.5, 1.1, 1.9]
    assert mann_whitney_greater(x, y) == pytest.approx(_brute_force(x, y)) == pytest.approx(18 / 126)
    assert mann_whitney_greater([], [1.0]) == 1.0
    assert min_p_value(5, 5) == 1 / math.comb(10, 5)


def test_looks_are_the_rounds_where_the_test_can_pass():
    two = RepeatRule(finalists=2, min_rounds=3, max_rounds=6)
    assert two.looks() == [5, 6] and two.level() == pytest.approx(0.05 / 4)
    one = RepeatRule(finalists=1, min_rounds=3, max_rounds=6)
    assert one.looks() == [4, 5, 6] and one.level() == pytest.approx(0.05 / 3)
    assert RepeatRule(max_rounds=3).looks() == []  # three runs each can never reach the level
    assert "Mann-Whitney" in two.describe() and "rounds 5, 6" in two.describe()


def test_gain_within_noise_does_not_pass_even_when_every_run_is_higher():
    base = Arm(1, B, "baseline", values=[0, 0, 0, 100, 100, 100])  # median 50, noise 1.4826 x 50
    fin = Arm(2, F1, "finalist", values=[101, 102, 103, 104, 105, 106])
    c = compare(fin, base, level=0.0125)
    assert c.p_value == pytest.approx(1 / 924) and c.gain == 53.5 and c.noise == pytest.approx(74.13)
    assert not c.passed


# -- the repeat phase ------------------------------------------------------------------------------


def points(values: dict[str, float], failed_base: bool = False) -> list[Point]:
    out = []
    for i, (x, v) in enumerate(values.items(), start=1):
        if i == 1 and failed_base:
            ev = Evaluation("infeasible", failure_class="oom-graph-capture")
            out.append(Point(i, {"--x": x}, ev, None))
        else:
            out.append(Point(i, {"--x": x}, Evaluation("ok", {"goodput_rps": v}), v))
    return out


class Measure:
    """Goodput per configuration from a fixed list of samples, one per call, in call order."""

    def __init__(self, seqs: dict[str, list[float]], failed: dict[tuple[str, int], int] | None = None):
        self.seqs = {k: list(v) for k, v in seqs.items()}
        self.failed = failed or {}
        self.calls: list[str] = []

    def __call__(self, knobs: dict[str, str]) -> Evaluation:
        x = knobs["--x"]
        self.calls.append(x)
        n = self.calls.count(x)
        return Evaluation(
            "ok",
            {"goodput_rps": self.seqs[x].pop(0), "failed": float(self.failed.get((x, n), 0))},
            trial_dir=f"t/{x}-{n}",
        )


RULE = RepeatRule(finalists=2, min_rounds=3, max_rounds=6)


def test_interleaved_until_a_winner_beats_the_baseline_beyond_noise():
    m = Measure(
        {
            "1": [5.0, 5.1, 4.9, 5.05, 4.95, 5.0],
            "2": [7.0, 7.1, 6.9, 7.05, 6.95, 7.0],  # 40% better, every run
            "3": [5.0, 4.9, 4.95, 9.0, 9.0, 9.0],  # at or under the baseline: dropped after 3 runs
        }
    )
    out = Repeats(RULE, m).run(points({"1": 5.0, "2": 6.0, "3": 6.5}), B)
    # A B C A B C A B C, then A B (C dropped), settled at round 5, the first look
    assert m.calls == ["1", "3", "2"] * 3 + ["1", "2"] * 2
    assert out.rounds == 5 and out.launches == 13
    assert out.winner is not None and out.winner.number == 2
    c = next(c for c in out.decision.comparisons if c.number == 2)
    assert c.p_value == pytest.approx(1 / 252) and c.passed
    assert (
        "beats the baseline beyond noise" in out.decision.verdict and "Mann-Whitney" in out.decision.verdict
    )
    dropped = next(a for a in out.arms if a.number == 3)
    assert "not above the baseline's 5 after 3 runs" in dropped.dropped


def test_noise_alone_keeps_the_baseline():
    same = [5.0, 5.2, 4.8, 5.1, 4.9, 5.0]
    m = Measure({"1": same, "2": [5.1, 4.9, 5.2, 4.8, 5.0, 5.1], "3": [4.9, 5.1, 5.0, 5.2, 4.8, 5.0]})
    pts = points({"1": 5.0, "2": 6.0, "3": 5.8})  # the search saw 20% from noise
    out = Repeats(RULE, m).run(pts, B)
    assert out.winner is None and out.decision.verdict.startswith(NO_WINNER)
    result = TuneResult(
        tune_id="t",
        run_dir="r",
        engine="sglang",
        model="m",
        base_command="serve",
        objective="goodput",
        knobs={"--x": ["1", "2", "3"]},
        points=[
            TunePoint(
                number=p.number,
                knobs=p.knobs,
                status="ok",
                objective=p.objective,
                command=f"serve --x {p.knobs['--x']}",
            )
            for p in pts
        ],
    )
    result.best = result.points[1]  # the search's pick, from one measurement
    apply_to(result, out, RULE)
    assert result.best.number == 1 and result.best_command == "serve --x 1" and result.search_best == 2
    assert result.repeats is not None and not result.repeats.beats_baseline
    md = "\n".join(tune_markdown(result))
    assert NO_WINNER in md and "would have named point 2" in md and "| 1 | baseline |" in md


def test_a_run_with_failed_requests_disqualifies_its_configuration():
    m = Measure(
        {"1": [5.0] * 6, "2": [9.0] * 6, "3": [7.0, 7.1, 7.2, 7.1, 7.3, 7.2]},
        failed={("2", 2): 3},  # the best one drops 3 requests on its second repeat
    )
    out = Repeats(RULE, m).run(points({"1": 5.0, "2": 9.0, "3": 7.0}), B)
    two = next(a for a in out.arms if a.number == 2)
    assert two.dropped == "round 2: 3 failed requests" and two.values == [9.0]
    assert out.winner is not None and out.winner.number == 3
    assert [r.status for r in out.runs if r.number == 2] == ["ok", "rejected"]
    # the search's point with failed requests is not a finalist at all
    pts = points({"1": 5.0, "2": 9.0, "3": 7.0})
    pts[1].evaluation.metrics["failed"] = 1.0
    m2 = Measure({"1": [5.0] * 6, "3": [7.0] * 6})
    assert [a.number for a in Repeats(RULE, m2).run(pts, B).arms] == [3]


def test_a_failing_baseline_is_beaten_by_the_best_median_after_min_rounds():
    m = Measure({"2": [3.0, 3.1, 2.9], "3": [4.0, 3.0, 4.1]})
    out = Repeats(RULE, m).run(points({"1": 0.0, "2": 6.0, "3": 5.0}, failed_base=True), B)
    assert m.calls == ["2", "3"] * 3  # the baseline is not launched again
    assert out.rounds == 3 and out.winner is not None and out.winner.number == 3
    assert "the baseline fails (oom-graph-capture at launch)" in out.decision.verdict


def test_shared_host_measures_interference_and_decides_on_alone_runs():
    m = Measure({"1": [5.0] * 6, "2": [5.0] * 6, "3": [5.0] * 6})
    seen: list[list[str]] = []

    def beside(group):
        seen.append([k["--x"] for k in group])
        return [Evaluation("ok", {"goodput_rps": 4.0}) for _ in group]  # 20% slower beside others

    out = Repeats(RULE, m, beside=beside).run(points({"1": 5.0, "2": 6.0, "3": 5.5}), B)
    assert seen == [["1", "2", "3"]] and out.shared_host
    assert all(v == 5.0 for a in [out.base, *out.arms] for v in a.values)  # beside runs are no samples
    rep = report(out, RULE)
    assert rep.interference == pytest.approx(0.2) and rep.shared_host
    assert [r.beside for r in rep.runs[:3]] == [True, True, True] and rep.runs[0].round == 0
    assert rep.winner is None and rep.spreads[0].beside_value == 4.0


def test_the_repeat_budget_ends_an_unsettled_order():
    # the finalist is ahead but overlaps the baseline: never passes, ends at max_rounds
    m = Measure({"1": [5.0, 5.6, 5.2, 5.8, 5.1, 5.5], "2": [5.7, 5.3, 5.9, 5.4, 6.0, 5.35]})
    rule = RepeatRule(finalists=1, min_rounds=3, max_rounds=6)
    out = Repeats(rule, m).run(points({"1": 5.0, "2": 6.0}), B)
    assert out.rounds == 6 and out.winner is None
    rep = report(out, rule)
    assert not rep.settled and rep.launches == 12
    fin = rep.spreads[1]
    assert (
        fin.n == 6
        and fin.median == pytest.approx(5.55)
        and fin.p_value is not None
        and fin.p_value > rep.level
    )


def test_decide_waits_between_looks():
    base = Arm(1, B, "baseline", values=[1.0, 1.0, 1.0, 1.0])
    fin = Arm(2, F1, "finalist", values=[2.0, 2.0, 2.0, 2.0])
    d = decide([fin], base, 4, RULE, 2)  # round 4 is no look with two finalists
    assert not d.settled and d.winner is None


def test_run_noise_is_mean_one_lognormal_at_the_stated_sigma():
    from bringup.oracle.tuning import ScenarioOracle

    o = ScenarioOracle(None, {}, {}, noise_seed=None, run_noise=0.05, run_seed=7)  # type: ignore[arg-type]
    m = {"goodput_rps": 2.0, "output_tps": 100.0, "ttft_p99_s": 1.0, "duration_s": 60.0, "feasible": True}
    runs = [o.noisy(m, call) for call in range(1, 4001)]
    logs = [math.log(r["goodput_rps"] / 2.0) for r in runs]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    assert sd == pytest.approx(0.05, rel=0.05)
    assert sum(r["goodput_rps"] for r in runs) / len(runs) == pytest.approx(2.0, rel=0.005)
    r = runs[0]
    assert r["output_tps"] / 100.0 == pytest.approx(r["goodput_rps"] / 2.0)  # one factor per run
    assert r["ttft_p99_s"] == pytest.approx(1.0 / (r["goodput_rps"] / 2.0)) and r["duration_s"] == 60.0
    assert o.noisy(m, 1) == runs[0] and r["feasible"] is True  # the same call, the same noise
    assert ScenarioOracle(None, {}, {}, run_noise=0.0).noisy(m, 1) is m  # type: ignore[arg-type]


def test_html_report_shows_spreads_and_the_baseline_band(tmp_path):
    from bringup.report.html import render_html
    from bringup.report.html.repeats import knobs_that_matter

    m = Measure({"1": [5.0, 5.1, 4.9, 5.05, 4.95], "2": [7.0, 7.1, 6.9, 7.05, 6.95], "3": [4.0, 4.1, 3.9]})
    pts = points({"1": 5.0, "2": 6.0, "3": 6.5})
    out = Repeats(RULE, m).run(pts, B)
    result = TuneResult(
        tune_id="t1",
        run_dir=str(tmp_path),
        engine="sglang",
        model="m",
        base_command="serve",
        objective="goodput",
        knobs={"--x": ["1", "2", "3"], "--y": ["a"]},
        points=[
            TunePoint(number=p.number, knobs=p.knobs, status="ok", objective=p.objective, command="serve")
            for p in pts
        ],
    )
    result.best = result.points[2]
    apply_to(result, out, RULE)
    assert result.best.number == 2 and knobs_that_matter(result) == ["--x"]
    html = render_html(tmp_path, None, [result])
    assert "Beyond noise? The repeats" in html and "#2 beats the baseline beyond noise" in html
    assert 'class="mark band"' in html and 'class="plot spread"' in html and "Chosen configuration" in html
    assert "7, 7.1, 6.9, 7.05, 6.95" in html  # the samples, in order
    md = "\n".join(tune_markdown(result))
    assert "**Verdict: #2 beats the baseline beyond noise" in md and "would have named point 3" in md
