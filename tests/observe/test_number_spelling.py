"""Issue 39, item 3: every number in a stop reason, a suspect, a minimal fix, a command line or a
report is the user's own spelling (or the engine's canonical one for a value bringup made), so the
line can be pasted back into the engine's CLI.

Before: values were compared, and shown, as `repr(float(...))`: `--max-model-len=4096.0` in a stop
reason for a flag given as 4096, `--max-cudagraph-capture-size>=512.0` as the likeliest cause, an
engine default of `512.0` and `VLLM_ENABLE_CUDAGRAPH_GC` `0.0` in FINDINGS.md: an int flag refuses them.
"""

from __future__ import annotations

import argparse
import functools

import pytest
import yaml

from bringup.core.candidate import Candidate, Change, parse_flags
from bringup.help.text import bundled_help, bundled_versions
from bringup.observe.effective import canonical_number, normalise
from bringup.search.beliefs import Condition
from tests.paths import ROOT

DATA = ROOT / "bringup" / "data"


def _number_levels() -> list[tuple[str, str, str]]:
    """(engine, flag, level as the data spells it) for every number-valued factor and tuning knob."""
    out = []
    for f in yaml.safe_load((DATA / "factors.yaml").read_text())["factors"]:
        if f.get("kind") == "number" and f.get("flag") and isinstance(f.get("levels"), list):
            for engine in f.get("engines") or ["vllm", "sglang"]:
                out += [(engine, f["flag"], str(lv)) for lv in f["levels"]]
    for k in yaml.safe_load((DATA / "knobs.yaml").read_text())["knobs"]:
        if isinstance(k.get("levels"), list):
            for engine in k.get("engines") or ["vllm", "sglang"]:
                out += [(engine, k["flag"], str(lv)) for lv in k["levels"]]
    return out


LEVELS = _number_levels()


@functools.cache
def _spec(engine: str):
    return bundled_help(engine, bundled_versions(engine)[-1]) if bundled_versions(engine) else None


def _engine_takes(text: str, like: str) -> object:
    """The value as an argparse `type` of the level's kind takes it: int for whole levels."""
    kind = int if "." not in like else float
    parser = argparse.ArgumentParser(exit_on_error=False)
    parser.add_argument("--x", type=kind)
    return parser.parse_args(["--x", text]).x


def test_every_number_valued_factor_and_knob_is_covered() -> None:
    assert len(LEVELS) > 60 and {f for _, f, _ in LEVELS} >= {"--max-num-seqs", "--gpu-memory-utilization"}


def test_a_number_round_trips_through_every_line_that_shows_it() -> None:
    """Each level as the user or the data gives it comes back the same in a suspect or stop reason
    (Condition), a minimal fix (Change) and a command line (Candidate), and the engine takes it."""
    for engine, flag, level in LEVELS:
        _round_trip(engine, flag, level)


def _round_trip(engine: str, flag: str, level: str) -> None:
    spec = _spec(engine)
    opt = spec.resolve(flag) if spec is not None else None
    if spec is not None and opt is None:
        spec = None  # this version does not offer the flag (the space leaves it out): no spelling to check
    name = opt.name if opt is not None else flag
    assert normalise(level) == level == canonical_number(level)  # the data's spelling is canonical
    for op, sym in (("eq", "="), ("ge", ">="), ("le", "<=")):
        said = Condition(name, normalise(level), op).describe()
        assert said == f"{name}{sym}{level}"
        assert _engine_takes(said.split(sym, 1)[1], level) == _engine_takes(level, level)
    fix = Change(name, None, level).describe()
    assert fix == f"{name} {level}"
    cand = Candidate.make(engine, "m", {name: level}, {})
    assert cand.argv_flags() == [name, level]
    assert f"{name} {level}" in cand.shell_command(["serve"])
    assert parse_flags(fix, spec)[name] == level  # pasted back


@pytest.mark.parametrize(
    "given, shown",
    [("4096", "4096"), ("4096.0", "4096"), (4096, "4096"), (4096.0, "4096"), ("0.90", "0.9"), (0.95, "0.95")],
)
def test_numbers_compare_equal_and_show_in_the_engines_spelling(given: object, shown: str) -> None:
    assert normalise(given) == shown
    assert normalise("4096") == normalise(4096.0) and normalise("0.9") == normalise(0.90)
    assert normalise("12345678901234567891") == "12345678901234567891"  # no float rounding of integers
    assert normalise("fp8_e4m3") == "fp8_e4m3" and normalise("half") == "float16"


def test_an_engine_default_shown_in_a_report_pastes_back() -> None:
    """`What the engine chose by itself`: the default printed by the engine's own --help."""
    shown = {}
    for engine in ("vllm", "sglang"):
        spec = _spec(engine)
        assert spec is not None
        for opt in spec.options:
            if opt.default is not None and canonical_number(opt.default) is not None:
                shown[opt.name] = (opt.default, normalise(opt.default))
    whole = {k: v for k, v in shown.items() if v[0].isdigit()}
    assert len(whole) > 10 and all(v == d for d, v in whole.values()), whole
    assert all(float(v) == float(d) for d, v in shown.values())
