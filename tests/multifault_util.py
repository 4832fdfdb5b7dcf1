"""Real multi-fault bring-ups (issue 22 item 5): a baseline with several mistakes, and what a
person would need to fix them, one launch each.

A `Mistake` is one flag of the baseline that really fails on the engine here, with the root-cause
line its failure shows and the classes that are right for it (docs/multifault.md says how each was
found and how it fails). The mistakes of a baseline form an onion: the failure a launch shows is
the one of the earliest-failing mistake still in its command (`order`), the others hidden behind
it. `problems` reads a run's result (findings.json) and its trials' outcome.json files and lists
everything a person who fixes one mistake per launch would not have done.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import bringup


@dataclass(frozen=True)
class Mistake:
    flag: str
    value: str | None  # None: a switch
    root: str  # a fragment of the root-cause line (evidence[0]) the failure shows
    classes: frozenset[str]  # the failure classes that are right for it
    why: str = ""  # how it fails, for messages
    # Environment the engine itself offers to let the value through (vLLM's "To allow overriding
    # this maximum, set the env var ..."): with it the failure does not show, but the value is still
    # a mistake (the model was not trained past its own maximum), so it must not stay in the fix.
    waived_by: tuple[tuple[str, str], ...] = ()

    def tokens(self) -> list[str]:
        return [self.flag] if self.value is None else [self.flag, self.value]

    def present(self, flags: dict[str, Any]) -> bool:
        """Still in a candidate's flags: the flag with the mistaken value (a switch: set)."""
        if self.flag not in flags:
            return False
        v = flags[self.flag]
        if self.value is None:
            return v not in (False, None, "false")
        return str(v) == self.value

    def shows(self, flags: dict[str, Any], env: dict[str, str]) -> bool:
        """Present and not waived by the environment the engine names."""
        return self.present(flags) and not any(env.get(k) == v for k, v in self.waived_by)


def baseline_of(mistakes: list[Mistake], *good: str) -> str:
    """The baseline command: every mistake, then the flags that are right here."""
    words = [w for m in mistakes for w in m.tokens()] + list(good)
    return shlex.join(words)


def run_bringup(
    engine: str,
    model: Path,
    baseline: str,
    runs: Path,
    max_launches: int,
    minimize_launches: int = 0,
    deadlines: tuple[str, str] = ("300", "120"),
) -> dict:
    """`bringup run --json` from this baseline, as a user would, capped at `max_launches` search
    launches, without delta debugging (its launches are not what is measured here) unless
    `minimize_launches` allows it that many; `deadlines`: --timeout and --hang-timeout."""
    minimize = ["--max-minimize-launches", str(minimize_launches)] if minimize_launches else ["--no-minimize"]
    rc, d, out, err = bringup(
        "run",
        "--engine",
        engine,
        "--model",
        str(model),
        "--baseline",
        baseline,
        "--runs-dir",
        str(runs),
        "--max-launches",
        str(max_launches),
        *minimize,
        "--json",
        "--timeout",
        deadlines[0],
        "--hang-timeout",
        deadlines[1],
        timeout=3000,
    )
    assert d is not None, err[-3000:]
    d["_rc"], d["_stdout"], d["_stderr"], d["_runs"] = rc, out, err, str(runs)
    return d


def attempt_launched(attempt: dict) -> tuple[dict[str, Any], dict[str, str]] | None:
    """The flags and environment an attempt launched (its trial's outcome.json), or None."""
    path = Path(attempt.get("trial_dir") or "/nonexistent") / "outcome.json"
    if not path.is_file():
        return None
    cand = json.loads(path.read_text()).get("candidate", {})
    return cand.get("flags", {}), cand.get("env", {})


def table(d: dict) -> str:
    """The attempts as a person reads them: number, purpose, changes, class, phase, root line."""
    rows = [
        f"  {a['number']} {a['purpose']} [{a['changes']}] -> {a['status']} {a.get('failure_class')} "
        f"{a.get('phase')}: {(a.get('evidence') or '')[:160]}"
        for a in d.get("attempts", [])
    ]
    return "\n".join(rows) + f"\n  status {d.get('status')}: {d.get('stop_reason', '')[:400]}"


def problems(d: dict, mistakes: list[Mistake]) -> list[str]:
    """What this run did that a person fixing one mistake per launch would not have: not validated,
    more than mistakes + 1 search launches, a mistake left in the validated command, a failure
    classified otherwise than its mistake's class (the mistake that shows is the first one of
    `mistakes`, in onion order, still in the attempt's command and not waived)."""
    out: list[str] = []
    if not d.get("validated"):
        out.append(f"not validated: {d.get('status')}: {d.get('stop_reason', '')[:300]}")
    search = d.get("launches", 0)  # search and screening launches; minimize launches are apart
    if search > len(mistakes) + 1:
        out.append(f"{search} search launches for {len(mistakes)} mistakes (at most {len(mistakes) + 1})")
    final = (d.get("final_candidate") or {}).get("flags")
    if d.get("validated"):
        out += [
            f"validated with {m.flag} {m.value} still in it" for m in mistakes if final and m.present(final)
        ]
    for a in d.get("attempts", []):
        if a["purpose"] == "minimize" or a["status"] == "works":
            continue
        launched = attempt_launched(a)
        if launched is None:
            out.append(f"attempt {a['number']}: no outcome.json in {a.get('trial_dir')!r}")
            continue
        showing = next((m for m in mistakes if m.shows(*launched)), None)
        if showing is None:
            out.append(
                f"attempt {a['number']} [{a['changes']}] failed ({a.get('failure_class')}: "
                f"{(a.get('evidence') or '')[:160]}) with none of the baseline's mistakes left: "
                "a failure the search brought in"
            )
            continue
        if a.get("failure_class") not in showing.classes:
            out.append(
                f"attempt {a['number']} [{a['changes']}]: {showing.flag} {showing.value} shows "
                f"({showing.why}) but the class is {a.get('failure_class')!r}, not one of {sorted(showing.classes)}"
            )
        if showing.root not in (a.get("evidence") or ""):
            out.append(
                f"attempt {a['number']} [{a['changes']}]: root line {(a.get('evidence') or '')[:160]!r} "
                f"is not {showing.flag}'s ({showing.root!r})"
            )
    return out


# The vLLM CPU build's four (tests/session/test_multifault_vllm.py), in onion order: the first one still in a command is the one whose failure shows.
VLLM_MISTAKES = [
    Mistake(
        "--max-model-len",
        "999999",
        "User-specified max_model_len (999999) is greater than the derived max_model_len",
        frozenset({"bad-flag"}),
        "pydantic ValidationError while the arguments become a config; the message names the model's 2048",
        waived_by=(("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1"),),
    ),
    Mistake(
        "--tensor-parallel-size",
        "2",
        "Not enough allowed NUMA nodes to bind threads of 2 local CPUWorkers",
        frozenset({"unsupported-hardware", "distributed-init", "incompatible-options"}),
        "EngineCore's AssertionError: this machine has one NUMA node; 'decrease DP/TP/PP'",
    ),
    Mistake(
        "--gpu-memory-utilization",
        "0.99",
        "is less than desired CPU memory utilization",
        frozenset({"oom-kv-cache"}),
        "the worker's ValueError: host memory free is less than the fraction asked",
    ),
    Mistake(
        "--block-size",
        "17",
        "No common block size for 17",
        frozenset({"incompatible-options", "bad-flag"}),
        "ValueError from select_common_block_size: CPU_ATTN needs MultipleOf(32)",
    ),
]
