"""Issue 36's measure: what the search makes of a real launch that fails because of one user setting.

The corpus (tests/data/usercorpus/<engine>-cpu.yaml, its logs under tests/data/logs/usercorpus/) is
real launches of an engine on this project's CPU machine, each from the engine's working defaults
for the tiny test model plus **one** setting the user got wrong, chosen so that the error does not
spell the flag: it quotes the value (a path, a module, a connector, a JSON key), names the
setting's destination (a config field), or is raised inside the component the setting selects.
For each case this does what a run does after its first launch:

1. classify the case's server.log as a trial does (``explain_file``, `bringup explain`'s path; a
   failure only the probes saw is classified from the recorded probe results, as the trial does);
2. build the search as `bringup run` builds it (the engine's bundled --help for the version, the
   space, what the CPU machine's facts rule out, the baseline's flags and variables as factors,
   knowledge on: bringup/session/prepare.py), let the strategy observe the failure on the
   baseline, and ask for the next launch.

Per case it reports the class and phase, whether the outcome's ``implicates`` or
``implicated_levels`` name the setting ("named"), whether the new blocker's three likeliest culprits
hold a condition on the setting's factor ("implicated"), and whether the next proposed launch
changes or drops the setting ("reset"); then the totals. Every split other than ``dev`` (``sealed``,
``sealed2``, ...) is for measuring only: ``--split sealed2`` prints and writes its totals, never a
row (the search must not be tuned to it).

Run:  .venv/bin/python benchmarks/user_setting_corpus.py [--engine vllm] [--split dev|sealed|sealed2|all]
                                                       [--json FILE]
(default: all, every split's totals and no row; ``both`` is the same; ``--split dev`` prints the dev
rows). Figures: docs/user-settings.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bringup.core.candidate import Candidate, parse_command  # noqa: E402
from bringup.core.datafiles import load_yaml  # noqa: E402
from bringup.core.reserved import ReservedFlag  # noqa: E402
from bringup.engines.base import get_engine, later_phase  # noqa: E402
from bringup.engines.explain import explain_file  # noqa: E402
from bringup.engines.targets import Target  # noqa: E402
from bringup.env.registry import Registry, load_registry  # noqa: E402
from bringup.help.text import HelpSpec, bundled_help, parse_help  # noqa: E402
from bringup.observe.effective import normalise  # noqa: E402
from bringup.observe.outcome import Outcome, ProbeResult  # noqa: E402
from bringup.search.strategy import Strategy  # noqa: E402
from bringup.session.prepare import run_knowledge, screening_policy, search_space  # noqa: E402
from bringup.session.settings import RunSettings  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "usercorpus"
LOGS = ROOT / "tests" / "data" / "logs" / "usercorpus"
TOP = 3  # culprits of the new blocker that count as "implicated"


class CaseSpec(BaseModel):
    """One real launch of the corpus (schema: tests/data/usercorpus/README.md)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    baseline: str  # the launch's command after the model: NAME=VALUE ... --flag value ...
    setting: str  # the flag (--name) or environment variable (NAME) at fault
    link: Literal["value", "field", "component", "none", "flag"]
    # a readable half (dev, dev2, ...) or a sealed one (sealed, sealed2, ...)
    split: str = Field(pattern=r"^(dev|sealed)[0-9]*$")
    expect_class: str | None = None
    command: str
    note: str = ""
    # files the command reads that were written for it: path -> content
    files: dict[str, str] = Field(default_factory=dict)
    # the trial's probe results, where a probe failed (a failure the log alone may not show)
    probes: list[ProbeResult] = Field(default_factory=list)


class Working(BaseModel):
    """The launch without any of the settings: it served and passed every probe."""

    model_config = ConfigDict(extra="forbid")
    command: str
    log: str | None = None  # under LOGS (None: served on another day, where `command` says)


class Corpus(BaseModel):
    model_config = ConfigDict(extra="forbid")
    engine: str
    version: str
    model: str
    facts: dict[str, Any]  # the machine's and model's facts as a run gathers them here
    facts_source: str
    working: Working
    cases: list[CaseSpec]
    # the engine's --help captured where the launches ran (path from the project's root), when
    # bringup bundles none for that version (vLLM 0.24.0 on the H200)
    help: str | None = None
    stem: str = ""  # the manifest's name (vllm-cpu): its logs are LOGS/<stem>-<case>.log

    def log(self, case: CaseSpec) -> Path:
        return LOGS / f"{self.stem}-{case.name}.log"

    def spec(self) -> HelpSpec | None:
        """The --help the launches' flags are read with: the corpus's own capture, else bundled."""
        return _help(self.engine, self.version, self.help)

    def splits(self) -> list[str]:
        """The corpus's splits, in the order their first case was added (dev, sealed, sealed2, ...)."""
        return list(dict.fromkeys(c.split for c in self.cases))


def sealed(split: str) -> bool:
    """Every split but the dev halves (``dev``, ``dev2``, ...) is for measuring only: its totals
    are printed, never a row."""
    return not split.startswith("dev")


def load_corpus(name: str = "vllm") -> Corpus:
    """A corpus by its file's name: ``vllm-cpu``, ``vllm-h200``; an engine's name alone is its CPU
    corpus (``vllm``)."""
    path = CORPUS / f"{name if '-' in name else name + '-cpu'}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in CORPUS.glob("*.yaml")))
        raise SystemExit(f"no corpus {name!r} (tests/data/usercorpus/: {known})")
    return Corpus.model_validate({**load_yaml(path), "stem": path.stem})


@dataclass
class Row:
    name: str
    split: str
    setting: str
    link: str
    status: str = ""
    failure_class: str | None = None
    phase: str | None = None
    expect_class: str | None = None
    named: bool = False  # the outcome's implicates / implicated_levels name the setting
    implicated: bool = False  # a top-3 culprit of the new blocker is a condition on the setting
    reset: bool = False  # the next proposed launch changes or drops the setting
    top: list[str] = field(default_factory=list)  # the new blocker's likeliest culprits
    next_changes: str = ""  # what the next launch changes from the baseline
    error: str = ""  # the measure could not run this case (a finding: the classifier crashed...)
    refused: bool = False  # bringup refuses the baseline before any launch (a flag it sets itself)


def outcome_of(log: Path, case: CaseSpec, engine: str) -> Outcome:
    """What a trial says of this launch: its log classified, in the phase the probes reached; where
    only the probes saw the failure (the log reads as a working server's), the probe's verdict as
    the trial gives it (bringup/trial/launch.py `_finish` and `_probe_class`)."""
    out = explain_file(log, engine)
    bad = next((p for p in case.probes if not p.passed), None)
    if bad is None:
        return out
    reached = later_phase(out.phase or "ready", bad.phase)
    if out.status != "works":
        return out if out.signature else out.model_copy(update={"phase": reached, "probes": case.probes})
    from bringup.trial.launch import _probe_suspects

    kind = "nan-output" if bad.kind == "nan" else "wrong-output"
    served = bad.kind not in ("server-error", "stall")
    texts = log.read_text(errors="replace").splitlines()
    return out.model_copy(
        update={
            "status": "wrong-output" if served else "fails",
            "failure_class": kind if served else "unknown",
            "phase": reached,
            "evidence": [f"probe {bad.name}: {bad.detail}", *get_engine(engine).implementation_lines(texts)],
            "implicates": _probe_suspects(bad, kind),
            "probes": list(case.probes),
        }
    )


@lru_cache(maxsize=4)
def _help(engine: str, version: str, captured: str | None = None) -> HelpSpec | None:
    """The corpus's own capture where it has one, else bringup's bundled help for the version."""
    if captured:
        return parse_help((ROOT / captured).read_text())
    return bundled_help(engine, version)


@lru_cache(maxsize=4)
def _registry(engine: str, version: str) -> Registry:
    """The variables the version reads, from its bundled snapshot (never the installed engine's: the
    measure reads the same wherever it runs)."""
    return load_registry(engine, version=version, installed=False)


def strategy_for(corpus: Corpus, baseline: Candidate) -> Strategy:
    """The search a run starts with from this baseline (bringup/session/prepare.py's own steps, with
    the corpus's facts in place of this machine's and the engine's bundled help and variable
    registry in place of the installed engine's)."""
    eng = get_engine(corpus.engine)
    spec = corpus.spec()
    t = Target(eng, corpus.model, spec, corpus.version)
    s = RunSettings(engine=corpus.engine, model=corpus.model)
    registry = _registry(corpus.engine, corpus.version)
    knowledge = run_knowledge(s, t, corpus.facts, None, None, "")
    space, env, _ = search_space(s, t, baseline, corpus.facts, registry)
    strategy = Strategy(
        space, baseline, knowledge, spec, screening=screening_policy(s, t, corpus.facts), env=env
    )
    strategy.limit_gpus(eng.parallel_flags(spec), int(corpus.facts.get("gpu.count") or 0))
    return strategy


def _factor_name(s: Strategy, setting: str) -> str:
    f = s.factor_for(setting if setting.startswith("--") else "env:" + setting)
    return f.name if f is not None else setting


def _names(s: Strategy, out: Outcome, factor: str) -> bool:
    said = [*out.implicates, *out.implicated_levels]
    return any(n == factor or ((f := s.factor_for(n)) is not None and f.name == factor) for n in said)


def measure_case(corpus: Corpus, case: CaseSpec) -> Row:
    row = Row(case.name, case.split, case.setting, case.link, expect_class=case.expect_class)
    try:
        flags, env = parse_command(case.baseline, corpus.spec())
        baseline = Candidate.make(corpus.engine, corpus.model, flags, env, label="baseline")
        out = outcome_of(corpus.log(case), case, corpus.engine)
        row.status, row.failure_class, row.phase = out.status, out.failure_class, out.phase
        s = strategy_for(corpus, baseline)
        factor = _factor_name(s, case.setting)
        row.named = _names(s, out, factor)
        s.observe(baseline, out)
        blocker = s.blockers[-1] if s.blockers else None
        if blocker is not None:
            top = blocker.top(TOP)
            row.top = [f"{c.describe()} ({p:.0%})" for c, p in top]
            row.implicated = any(x.factor == factor for c, _ in top for x in c.conds)
        nxt = s.next_launch([], [], set()).candidate
        if nxt is not None:
            row.next_changes = _changes(s, baseline, nxt)
            f = s.space.get(factor)
            row.reset = f is not None and normalise(f.level_in(nxt.flag_dict, nxt.env_dict)) != normalise(
                s.base_level(f)
            )
    except ReservedFlag as e:
        # a flag bringup sets itself (where the server listens, the model): `bringup run` refuses
        # the baseline before any launch, naming the flag and saying to leave it out
        # (bringup/core/reserved.py), so the user's next launch is without it; implicated and reset
        # when the refused flag is the setting at fault
        row.status, row.refused = "refused", True
        row.implicated = row.reset = row.named = _same_flag(corpus, e.flag, case.setting)
        row.next_changes = f"refused before any launch: {e}"[:200]
    except Exception as e:  # a crash of the classifier or the search is a finding, not a stop
        row.error = f"{type(e).__name__}: {e}"
    return row


def _same_flag(corpus: Corpus, flag: str, setting: str) -> bool:
    """Two spellings of one engine flag (an alias, a ``--x=value`` form)."""
    spec = corpus.spec()
    a, b = (spec.resolve(x.split("=", 1)[0]) if spec else None for x in (flag, setting))
    return flag.split("=", 1)[0] == setting.split("=", 1)[0] or (a is not None and a is b)


def _changes(s: Strategy, base: Candidate, cand: Candidate) -> str:
    moved = []
    for f in s.space.factors:
        a, b = f.level_in(base.flag_dict, base.env_dict), f.level_in(cand.flag_dict, cand.env_dict)
        if normalise(a) != normalise(b):
            moved.append(f"{f.name} {'unset' if b is None else b}")
    return ", ".join(moved) or "(nothing)"


def totals(rows: list[Row]) -> dict[str, Any]:
    n = len(rows)

    def share(k: str) -> float:
        return round(100.0 * sum(bool(getattr(r, k)) for r in rows) / n, 1) if n else 0.0

    return {
        "cases": n,
        "errors": sum(bool(r.error) for r in rows),
        "refused": sum(r.refused for r in rows),
        "named_pct": share("named"),
        "implicated_pct": share("implicated"),
        "reset_pct": share("reset"),
        "unknown_pct": round(100.0 * sum(r.failure_class == "unknown" for r in rows) / n, 1) if n else 0.0,
        "expect_class_right": sum(r.failure_class == r.expect_class for r in rows if r.expect_class),
        "expect_class_given": sum(1 for r in rows if r.expect_class),
    }


def measure(engine: str = "vllm", split: str | None = None) -> list[Row]:
    """``engine``: a corpus's name (load_corpus)."""
    corpus = load_corpus(engine)
    return [measure_case(corpus, c) for c in corpus.cases if split in (None, c.split)]


def report_lines(split: str, rows: list[Row], with_rows: bool) -> list[str]:
    """The table (``with_rows``: only ever for the dev half; a sealed split gets its totals only,
    whatever is asked) and the totals line."""
    out = []
    if with_rows and not sealed(split):
        yes = {True: "yes", False: "-"}
        out += [
            "| case | setting | link | class | phase | named | implicated | reset | next launch changes |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            out.append(
                f"| {r.name} | `{r.setting}` | {r.link} | {r.error or r.failure_class or r.status} "
                f"| {r.phase or ''} | {yes[r.named]} | {yes[r.implicated]} | {yes[r.reset]} "
                f"| {r.next_changes[:80]} |"
            )
    t = totals(rows)
    out.append(
        f"{split}: {t['cases']} cases, implicated {t['implicated_pct']}%, reset {t['reset_pct']}%, "
        f"unknown {t['unknown_pct']}%, named by the outcome {t['named_pct']}%, "
        f"expected class {t['expect_class_right']}/{t['expect_class_given']}, errors {t['errors']}, "
        f"refused before any launch {t['refused']}"
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--engine",
        "--corpus",
        dest="engine",
        default="vllm",
        help="the corpus: tests/data/usercorpus/NAME.yaml (vllm-cpu, vllm-h200; an engine alone: its -cpu corpus)",
    )
    ap.add_argument(
        "--split",
        default="all",
        help="a dev half (dev, dev2: its rows and totals), a sealed split (sealed, sealed2: totals only), "
        "or all (every split's totals; 'both' is the same)",
    )
    ap.add_argument("--json", type=Path, help="also write the result here")
    a = ap.parse_args()
    splits = load_corpus(a.engine).splits()
    if a.split not in (*splits, "all", "both"):
        ap.error(f"--split: one of {', '.join([*splits, 'all'])}")
    result: dict[str, Any] = {"engine": a.engine}
    for split in splits if a.split in ("all", "both") else [a.split]:
        rows = measure(a.engine, split)
        shown = a.split == split and not sealed(split)  # rows: a readable half, asked for alone
        print("\n".join(report_lines(split, rows, with_rows=shown)))
        result[split] = {"totals": totals(rows), **({"rows": [asdict(r) for r in rows]} if shown else {})}
    if a.json:
        a.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
