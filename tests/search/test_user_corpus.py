"""The search on real launches that fail because of one user setting (issue 36, item 6).

Every case of tests/data/usercorpus/vllm-cpu.yaml (real vLLM CPU launches, each one setting wrong,
errors that do not spell the flag) is measured as benchmarks/user_setting_corpus.py measures it:
the log classified as a trial classifies it, the search built as a run builds it, the failure
observed, the next launch asked for. These tests hold what is true today as a floor:

- every log classifies and the search answers, with no exception;
- the class is the one the engine's own words make certain, where the manifest gives one;
- the shares of cases whose new blocker implicates the setting, and whose next launch resets it,
  do not fall below today's (IMPLICATED_FLOOR, RESET_FLOOR), and the share classed `unknown` does
  not rise (UNKNOWN_CEILING). Raise the floors when the search does better: they are the bar.

The sealed half is measured too, and a failure says only how many of its cases fell short: its
rows and logs are not for reading while the search changes (tests/data/usercorpus/README.md).
The fresh `sealed2` half (added after the search was built on dev) holds no floor here, so nothing
is tuned to it: only that it is there, whole, and that its logs do not spell their settings.
"""

from __future__ import annotations

import importlib.util
import shlex
import sys
from typing import Any

import pytest

from bringup.core.candidate import split_env
from tests.paths import ROOT

# Today's measure (2026-12-04, benchmarks/user_setting_corpus.py), per split, in per cent: the bar.
# 16 dev and 16 sealed cases. Raise these as the search gets better; never lower them.
# raised by issue 36's search change (the measure before it: dev 37.5 / 43.8 / 12.5 / 9, sealed
# 43.8 / 50.0 / 37.5 / 7, with the five imports of a user's qualified name labelled
# missing-dependency then; the issue calls them bad-flag)
# sealed raised 2026-12-07 (87.5 -> 100: a hang's or a wrong answer's generic suspects are leads);
# dev2 is the third half's readable part (13 cases, 2026-12-07: one `--tool-server` chain that was
# `unknown` is now read where the engine called the library)
IMPLICATED_FLOOR = {"dev": 100.0, "sealed": 100.0, "dev2": 100.0}
RESET_FLOOR = {"dev": 100.0, "sealed": 100.0, "dev2": 100.0}
UNKNOWN_CEILING = {"dev": 0.0, "sealed": 0.0, "dev2": 0.0}
# implicated, reset, unknown (sglang-h100: 13 of 14 reset; sglang-h100b: one of 10 `unknown`)
GPU_FLOOR = {
    "vllm-h200": (100.0, 100.0, 0.0),
    "sglang-h100": (100.0, 92.8, 0.0),
    "sglang-h100b": (100.0, 100.0, 10.0),
    "vllm-h100b": (100.0, 75.0, 0.0),
}
CLASS_RIGHT_FLOOR = {"dev": 13, "sealed": 9, "dev2": 4}  # cases classed as their expect_class says
WORKING = ["--gpu-memory-utilization", "0.3"]  # the corpus's working launch on this machine


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location(
        "user_setting_corpus", ROOT / "benchmarks" / "user_setting_corpus.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


BENCH = _bench()
CORPUS = BENCH.load_corpus("vllm")


class Measured(dict):
    """The rows by split, printed as counts only: pytest prints a failing test's arguments, and a
    sealed row must never reach a report."""

    def __repr__(self) -> str:
        return "<" + ", ".join(f"{len(v)} {k} rows" for k, v in self.items()) + ">"


@pytest.fixture(scope="module")
def rows() -> Measured:
    out = Measured({split: [] for split in CORPUS.splits()})
    for case in CORPUS.cases:
        out[case.split].append(BENCH.measure_case(CORPUS, case))
    return out


def _short(split: str, bad: list[Any], what: str) -> str:
    """A failure message: the dev cases by name, the sealed ones only counted."""
    if BENCH.sealed(split):
        return f"{len(bad)} {split} case(s) {what} (run the benchmark with --split {split} for totals)"
    return f"{what}: " + "; ".join(f"{r.name}: {r.error or r.failure_class}" for r in bad)


def test_the_corpus_is_what_its_readme_says() -> None:
    """At least 24 real launches, each a log on disk from the working launch plus its one setting,
    the first two halves alternating by launch order (the later sealed halves follow them), at most 4
    whose error spells the flag after all."""
    cases = CORPUS.cases
    first = [c for c in cases if c.split in ("dev", "sealed")]
    assert len(first) >= 24
    assert [c.split for c in first] == ["dev" if i % 2 == 0 else "sealed" for i in range(len(first))]
    assert cases[: len(first)] == first  # later halves are appended after the first two
    assert sum(c.link == "flag" for c in cases) <= 4
    logs = sorted(p.name for p in BENCH.LOGS.glob(f"{CORPUS.stem}-*.log"))
    assert logs == sorted([CORPUS.working.log, *(CORPUS.log(c).name for c in cases)])
    for c in cases:
        env, rest = split_env(c.baseline)
        assert rest[:2] == WORKING, c.name
        # the working launch and one setting: one flag and its value, or one variable
        assert (rest[2:3] == [c.setting] and len(rest) <= 4 and not env) or (
            list(env) == [c.setting] and rest == WORKING
        ), c.name
        command = shlex.split(c.command)
        assert command[-len(rest) :] == rest and all(f"{k}={v}" in command for k, v in env.items()), c.name


def test_the_launch_without_the_settings_served() -> None:
    """The working launch every case adds its one setting to: ready, answered, no failure."""
    from bringup.engines.explain import explain_file

    out = explain_file(BENCH.LOGS / CORPUS.working.log, CORPUS.engine)
    assert out.status == "works" and out.failure_class is None
    assert shlex.split(CORPUS.working.command)[-len(WORKING) :] == WORKING


@pytest.mark.parametrize("split", ["dev", "sealed", "dev2"])
def test_every_log_classifies_and_the_search_answers(rows, split) -> None:
    bad = [r for r in rows[split] if r.error]
    crashed = len(bad)
    assert crashed == 0, _short(split, bad, "crashed the classifier or the search")
    bad = [r for r in rows[split] if r.status not in ("fails", "wrong-output")]
    working = len(bad)
    assert working == 0, _short(split, bad, "read as working")


@pytest.mark.parametrize("split", ["dev", "sealed", "dev2"])
def test_the_class_the_engine_makes_certain(rows, split) -> None:
    """Today some are not (docs/user-settings.md): the count right must not fall."""
    right = BENCH.totals(rows[split])["expect_class_right"]
    bad = [r for r in rows[split] if r.expect_class and r.failure_class != r.expect_class]
    assert right >= CLASS_RIGHT_FLOOR[split], _short(split, bad, "classed otherwise than expect_class")


@pytest.mark.parametrize("split", ["dev", "sealed", "dev2"])
def test_the_search_does_no_worse_than_today(rows, split) -> None:
    t = BENCH.totals(rows[split])  # totals only: they may be printed for either half
    assert t["implicated_pct"] >= IMPLICATED_FLOOR[split], t
    assert t["reset_pct"] >= RESET_FLOOR[split], t
    assert t["unknown_pct"] <= UNKNOWN_CEILING[split], t


@pytest.mark.parametrize("split", ["sealed", "sealed2", "sealed3"])
def test_the_sealed_half_prints_its_totals_only(rows, split) -> None:
    """What the benchmark prints for a sealed half names no case and no setting, even when rows are
    asked for."""
    text = "\n".join(BENCH.report_lines(split, rows[split], with_rows=True))
    assert f"{split}:" in text
    bad = [r for r in rows[split] if r.name in text or r.setting in text]
    assert not bad, f"{len(bad)} {split} case(s) printed"


def _missing_and_spelt(corpus: Any, cases: list[Any]) -> tuple[int, int]:
    """How many of the cases have no log on disk, and how many spell their setting after all (a
    `flag` link, or the flag or variable in a line of the log); counts only, no case named."""
    missing = sum(not corpus.log(c).is_file() for c in cases)
    spelt = sum(
        c.link == "flag"
        or (
            corpus.log(c).is_file()
            and any(c.setting in line for line in corpus.log(c).read_text(errors="replace").splitlines())
        )
        for c in cases
    )
    return missing, spelt


@pytest.mark.parametrize(("split", "least"), [("sealed2", 16), ("sealed3", 10)])
def test_the_fresh_sealed_half_is_whole(split: str, least: int) -> None:
    """sealed2 and sealed3 (real launches made by helpers after the search was built, never read):
    each case a log on disk, none whose log spells its flag or variable (the search must find the
    setting from the value, the field or the component). Counts only: no case is named."""
    cases = [c for c in CORPUS.cases if c.split == split]
    assert len(cases) >= least, len(cases)
    missing, spelt = _missing_and_spelt(CORPUS, cases)
    assert missing == 0, f"{missing} {split} log(s) missing"
    assert spelt == 0, f"{spelt} {split} log(s) spell their setting"
    assert sum(not c.setting.startswith("--") for c in cases) <= 5  # environment variables


@pytest.mark.parametrize(
    ("corpus", "engine", "version", "least", "spelt_most"),
    [
        ("vllm-h200", "vllm", "0.24.0", 10, 0),
        ("sglang-h100", "sglang", "0.5.16", 10, 0),
        ("sglang-h100b", "sglang", "0.5.16", 10, 0),
        # one dev case's argparse error names the flag after all ("argument --kernel-config: 1
        # validation error for KernelConfig"): the manifest predicted only the field
        ("vllm-h100b", "vllm", "0.24.0", 9, 1),
    ],
)
def test_a_gpu_corpus_is_whole_and_measures(
    corpus: str, engine: str, version: str, least: int, spelt_most: int
) -> None:
    """tests/data/usercorpus/vllm-h200.yaml and sglang-h100.yaml: real launches of vLLM 0.24.0 and
    SGLang 0.5.16 on a lent Hopper GPU (2026-12-05), sealed (made from predictions written before the
    run; measured whole, never read): at least 10, each a log on disk that failed, none spelling its
    setting, each measured without an exception against the --help captured there. Counts only: no
    case is named."""
    gpu = BENCH.load_corpus(corpus)
    assert gpu.engine == engine and gpu.version == version and gpu.help
    # sglang-h100b and vllm-h100b (2026-12-07, tests/data/gpu/usercorpus2-h200.yaml) have a
    # readable dev half; vllm-h100b is the manifest's 9 vLLM cases, every one of which failed
    assert len(gpu.cases) >= least and {c.split for c in gpu.cases} <= {"dev", "sealed"}
    missing, spelt = _missing_and_spelt(gpu, gpu.cases)
    assert missing == 0, f"{missing} {corpus} log(s) missing"
    assert spelt <= spelt_most, f"{spelt} {corpus} log(s) spell their setting"
    measured = [BENCH.measure_case(gpu, c) for c in gpu.cases]
    crashed = sum(bool(r.error) for r in measured)
    assert crashed == 0, f"{crashed} {corpus} case(s) crashed the classifier or the search"
    # "refused": bringup refuses the baseline before any launch (a flag it sets itself, vllm-h100b)
    served = sum(r.status not in ("fails", "wrong-output", "refused") for r in measured)
    assert served == 0, f"{served} {corpus} case(s) read as working"
    # today's shares as a floor (totals only; measured 2026-12-06, sixth session)
    t = BENCH.totals(measured)
    implicated, reset, unknown = GPU_FLOOR[corpus]
    assert t["implicated_pct"] >= implicated and t["reset_pct"] >= reset, t
    assert t["unknown_pct"] <= unknown, t
