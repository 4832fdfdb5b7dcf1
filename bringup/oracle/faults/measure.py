"""What one composed case's bring-up run did: its verdict, its launches, and which of them were wasted.

Definitions (docs/composed-faults.md says them in words):

- `verdict`: validated, budget (the run used its launches), or a give-up (it stopped before the
  budget, not validated); a give-up that says there is no working configuration ("impossible",
  "no-working-config") is a *false verdict*, since the composer proved one exists. The stop
  strings are read in `stop_kind` only, so a new search's wording is one edit away.
- A launch is *unimplicated* when it changed (from the launch before it) no factor that the
  previous failure's evidence named: its evidence lines (root-cause line and frames included),
  its root exception, its signature id, the factors its signature or class implicates and the
  factors of its implicated levels. A factor is named when its flag (with or without dashes,
  dashes or underscores) or its variable appears in that text, or a level it was set to or from
  does (a kernel library in a frame's path: `flashinfer/sampling.py` names `FLASHINFER`), or a
  piece of such a level is quoted as bringup/observe/links.py reads a quote (a path's file name, a
  JSON key or value, a size in any unit: `0=24G` as "a total capacity of 24.00 GiB"), or the
  failure links it as bringup/observe/links.py links a failure to a setting (its field or config
  object named, the failing module its value selects, the component it configures; never a common
  word of the failure's prose). Not evidence: that the user set it (the search's prior).
- A failed launch is *classified right* when its failure class is the class of the atom that
  decided it (`class:` in the atom file; a wrong-output atom also takes nan-output).
- A failed launch no atom decided was refused by a *law* of the machine (compose.machine_rules:
  weights that do not fit, a KV cache with no room, a backend the selector refuses).
- A launch is *off-target* when it changed none of the flags or variables of the atom that
  decided the launch before it (the scenario's own rule, asked of the oracle): ground truth the
  search cannot see, for comparison with the evidence-based measure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.core.candidate import Candidate, format_value, parse_command
from bringup.help.spec import dest_of
from bringup.observe import links as lk
from bringup.observe.links import quoted, quoted_size, value_tokens
from bringup.observe.outcome import Outcome
from bringup.oracle.faults.compose import Case, touched
from bringup.oracle.trials import Oracle
from bringup.search.evidence import failure_words

FALSE_VERDICTS = ("no-working-config", "impossible")
MIN_LEVEL_CHARS = 4  # shorter level names ("0", "16", "auto") are too common in any text to name anything


def stop_kind(result: Any) -> str:
    """validated | budget | false-verdict | gave-up, from a RunResult (or anything with its fields)."""
    if getattr(result, "validated", False):
        return "validated"
    status = str(getattr(result, "status", "") or "")
    reason = str(getattr(result, "stop_reason", "") or "")
    if status == "budget" or reason.startswith(("launch budget", "time budget")):
        return "budget"
    if status in FALSE_VERDICTS:
        return "false-verdict"
    return "gave-up"


@dataclass
class CaseResult:
    index: int
    atoms: int
    kind: str  # stop_kind
    launches: int
    unimplicated: int = 0
    off_target: int = 0
    judged: int = 0  # launches after a failure (the denominator of both shares)
    failed: int = 0  # failed launches decided by an atom (the denominator of classified)
    classified: int = 0  # of those, the failure class the atom says
    law: int = 0  # failed launches a law of the machine decided (weights, KV cache, selector), no atom
    stop_reason: str = ""
    wall_s: float = 0.0
    refused: int = 0  # candidates the installed engine's own checks refused (dry run), never launched
    detail: dict[str, Any] = field(default_factory=dict)  # dev only: atoms, attempts


def _changes(prev: Candidate, cur: Candidate) -> dict[str, tuple[Any, Any]]:
    out: dict[str, tuple[Any, Any]] = {}
    pf, cf = prev.flag_dict, cur.flag_dict
    for k in set(pf) | set(cf):
        if pf.get(k) != cf.get(k):
            out[k] = (pf.get(k), cf.get(k))
    pe, ce = prev.env_dict, cur.env_dict
    for k in set(pe) | set(ce):
        if pe.get(k) != ce.get(k):
            out[k] = (pe.get(k), ce.get(k))
    return out


def named_text(out: Outcome) -> str:
    """What a failure's evidence says, as one lower-case text."""
    parts = [*out.evidence, out.root_exception or "", out.signature or ""]
    return "\n".join(parts).lower()


def named(name: str, values: tuple[Any, Any], out: Outcome, text: str) -> bool:
    """Did this failure's evidence name this factor (see the module docstring)?"""
    # a variable is "env:NAME" among the outcome's implicates and implicated levels (the factor's
    # name), and NAME among a candidate's changes
    forms = {name} if name.startswith("-") else {name, "env:" + name}
    if forms & (set(out.implicated_levels) | set(out.implicates)):
        return True
    bare = name.lstrip("-").lower()
    if name.startswith("-"):
        forms = {bare, bare.replace("-", "_")}
        if any(re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", text) for f in forms):
            return True
    elif bare in text:
        return True
    lines = [*out.evidence, out.root_exception or ""]
    for v in values:
        s = str(v).lower() if v is not None and not isinstance(v, bool) else ""
        if len(s) >= MIN_LEVEL_CHARS and s in text:
            return True
        if s and _quotes_value(lines, str(v), bare.replace("-", "_")):
            return True
    return False


def _quotes_value(lines: list[str], value: str, dest: str) -> bool:
    """A piece of the value the evidence quotes, as bringup/observe/links.py reads a quote: a
    path's file name, a JSON key or value, a size in any unit ("24G" as "24.00 GiB")."""
    if any(quoted(lines, tok) for tok in value_tokens(value) if len(tok) >= MIN_LEVEL_CHARS):
        return True
    return quoted_size(lines, value, dest) is not None


def linked(
    out: Outcome,
    prev: Candidate,
    changed: dict[str, tuple[Any, Any]],
    spec: Any,
    base: dict[str, dict[str, Any]],
    package: str,
) -> set[str]:
    """The changed factors this failure links beyond their names (bringup/observe/links.py: its
    value quoted, its field or config object named, the failing module its value selects or the
    component it configures), read from the failure and the launch alone. A link by a word of the
    failure's prose (`subject`) is left out: a common word names nothing."""
    flags, env = prev.flag_dict, prev.env_dict
    settings = []
    for k in changed:
        is_env = not k.startswith("-")
        v = (env if is_env else flags).get(k)
        opt = None if is_env else spec.get(k)
        settings.append(
            lk.Setting(
                k,
                "" if v is None or v is False else format_value(v),
                k if is_env else dest_of(k, opt),
                opt.section if opt else None,
                v is not None and base["env" if is_env else "flags"].get(k) == v,
            )
        )
    words = failure_words(out)
    places = lk.logged_places(out.evidence, package) if not out.frames else []
    return {
        x.name
        for x in lk.links(words, list(out.frames or []), settings, package, places)
        if x.kind != "subject"
    }


def _load(trial_dir: str) -> Outcome | None:
    try:
        return Outcome.model_validate_json((Path(trial_dir) / "outcome.json").read_text())
    except (OSError, ValueError):
        return None


def _class_right(out: Outcome, expect: str) -> bool:
    if expect == "wrong-output":
        return out.failure_class in ("wrong-output", "nan-output")
    return out.failure_class == expect


def judge(case: Case, result: Any, oracle: Oracle) -> dict[str, Any]:
    """Counts (judged, unimplicated, off_target, failed, classified) and per-launch rows."""
    spec = case.scenario.help_spec()
    base_flags, base_env = parse_command(case.baseline, spec)
    base: dict[str, dict[str, Any]] = {"flags": dict(base_flags), "env": dict(base_env)}
    atoms = {a.id: a for a in case.atoms}
    runs = [a for a in result.attempts if a.purpose in ("search", "screen")]
    n = {"judged": 0, "unimplicated": 0, "off_target": 0, "failed": 0, "classified": 0, "law": 0}
    rows: list[dict[str, Any]] = []
    prev: tuple[Candidate, Outcome, str | None] | None = None
    for a in sorted(runs, key=lambda x: x.number):
        out = _load(a.trial_dir)
        if out is None:
            continue
        cand = Candidate.from_json(out.candidate)
        rule = oracle.candidate(cand).rule
        row: dict[str, Any] = {
            "n": a.number,
            "changes": a.changes,
            "status": out.status,
            "class": out.failure_class,
            "phase": out.phase,
            "rule": rule,
        }
        if out.status != "works" and rule in atoms:
            n["failed"] += 1
            n["classified"] += int(_class_right(out, atoms[rule].expect_class))
        elif out.status != "works" and rule is not None:
            n["law"] += 1  # a law of the machine (compose.machine_rules) refused it, no atom
        if prev is not None and prev[1].status != "works":
            pcand, pout, prule = prev
            changed = _changes(pcand, cand)
            text = named_text(pout)
            hit = any(named(k, v, pout, text) for k, v in changed.items()) or bool(
                linked(pout, pcand, changed, spec, base, case.scenario.engine)
            )
            atom = atoms.get(prule or "")
            on = atom is not None and bool(set(changed) & touched(atom, spec))
            n["judged"] += 1
            n["unimplicated"] += 0 if hit else 1
            n["off_target"] += 0 if on else 1
            row.update(implicated=hit, on_target=on)
        rows.append(row)
        prev = (cand, out, rule)
    return {**n, "rows": rows}


def measure(case: Case, result: Any, oracle: Oracle, wall_s: float, keep_detail: bool) -> CaseResult:
    j = judge(case, result, oracle)
    rows = j.pop("rows")
    r = CaseResult(
        index=case.index,
        atoms=len(case.atoms),
        kind=stop_kind(result),
        launches=int(result.launches),
        **j,
        stop_reason=str(result.stop_reason)[:300] if keep_detail else "",
        wall_s=wall_s,
        refused=sum(1 for a in result.attempts if a.purpose == "dry-run"),
    )
    if keep_detail:
        r.detail = {
            "base": case.base,
            "atoms": [a.id for a in case.atoms],
            "baseline": case.baseline,
            "working": case.working,
            "launches": rows,
        }
    return r


def dump(results: list[CaseResult]) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(r.__dict__, default=str)) for r in results]
