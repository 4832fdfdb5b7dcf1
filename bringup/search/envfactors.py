"""Environment variables in the search: which become factors, when, and with which levels.

An engine has hundreds of variables (vLLM 0.32.0: 316; SGLang 0.5.23: 770); searching them all
is hopeless, searching none misses every bring-up whose fix is a variable. So variables join
the space as the evidence calls for them:

- before any launch: the variables of the starting command (the user's own, `--env`, the
  baseline's `NAME=VALUE`), so that changing or dropping them can be searched and credited;
- after a failure: a variable that the failure's lines name (the value they advise first),
  then the few that `envvars.rank` finds most implicated by the failure (its class, the
  components its lines and implicated flags name: sampler, NCCL, custom all-reduce...).

A variable this engine version does not read is an override: setting it changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bringup.env.registry import (
    W_EVIDENCE,
    W_IN_NAME,
    EnvVar,
    Registry,
    check_value,
    common_vars,
    is_test_hook,
    levels,
    mentions_in_lines,
    not_a_fix,
    of_absent_family,
    rank,
    suggested_values,
)
from bringup.observe.effective import normalise
from bringup.observe.outcome import Outcome
from bringup.search.space import Factor


def as_factor(
    var: EnvVar, suggested: Iterable[str] = (), origin: str = "envvars", group: str | None = None
) -> Factor | None:
    """A search-space factor (``bringup.search.space.Factor``, name ``env:NAME``) for ``var``, with
    :func:`levels` that pass :func:`check_value`; None when there is no level worth trying."""
    lv = [x for x in levels(var, suggested) if check_value(var, x) is None]
    if not lv:
        return None
    return Factor(var.factor, "env", list(lv), var.name, {}, group, origin)


RANKED_PER_FAILURE = 3  # variables added per failure beyond those its lines name
MIN_RANK_SCORE = 10.0  # below this a variable is implicated by the class alone: too weak to try


@dataclass
class EnvProposal:
    """A variable to add to the space after a failure."""

    factor: Factor
    advised: str | None  # the value a log line advises, if any
    why: str
    named: bool  # named by the failure's own lines (a first suspect)
    # already in the space (it joined for an earlier failure): it does not join again, but this
    # failure implicates it as much as a newcomer, so its weight is this failure's too
    known: bool = False


@dataclass
class EnvFactors:
    registry: Registry
    device: str | None = None
    absent: frozenset[str] = frozenset()  # components the target lacks (envvars.absent_components)

    def var(self, name: str) -> EnvVar:
        return self.registry.get(name) or EnvVar(name, owner="log")

    def read_in(self) -> Mapping[str, tuple[str, ...]]:
        """Where this engine version reads each variable (bringup/env/readers.py): the bundled
        scan of its source, else the installed package's own."""
        from pathlib import Path

        from bringup.core.datafiles import KnowledgeFileError
        from bringup.env.extract import registry_spec
        from bringup.env.readers import readers

        reg = self.registry
        pkg = None
        if reg.origin == "installed" and reg.location:
            try:
                pkg = Path(reg.location).parents[len(Path(registry_spec(reg.engine)["file"]).parts) - 1]
            except (KeyError, IndexError, KnowledgeFileError):
                pkg = None
        return readers(reg.engine, reg.version, reg.variables, pkg)

    def default(self, name: str) -> str | None:
        v = self.registry.get(name)
        d = v.default_level() if v is not None else None
        return normalise(d) if d is not None else None

    def ignored(self, name: str) -> bool:
        return self.registry.is_ignored(name)

    def initial(self, env: Mapping[str, str]) -> list[Factor]:
        """Factors for the variables of the starting command (their own value is a level)."""
        out = []
        for name, value in env.items():
            f = as_factor(self.var(name), [value], origin="baseline")
            if f is None:
                f = Factor("env:" + name, "env", [value], name, {}, None, "baseline")
            out.append(f)
        return out

    def after_failure(self, outcome: Outcome, have: Iterable[str]) -> list[EnvProposal]:
        """Variables this failure calls for: those not in the space yet join it, those already in it
        (`have`: factor names; `known`) are implicated again, for this failure's beliefs."""
        have = set(have)
        out: list[EnvProposal] = []
        # A signature's or rule's hint is knowledge written from the engine's own text; a hint without
        # one is bringup's own reading of this failure (where it was raised, which settings touch it),
        # and a variable it lists is not the log naming it again.
        hint = outcome.hint if outcome.signature else None
        lines = [*outcome.evidence, *([hint] if hint else [])]
        found = mentions_in_lines(lines, list(self.registry.variables))
        for m in found:
            if m.action == "unset" or not_a_fix(m.name) or any(p.factor.name == "env:" + m.name for p in out):
                continue
            advised = suggested_values(found, m.name)
            f = as_factor(self.var(m.name), advised, origin="log")
            if f is None and advised:
                f = Factor("env:" + m.name, "env", list(advised), m.name, {}, None, "log")
            if f is not None:
                out.append(
                    EnvProposal(
                        f,
                        advised[0] if advised and m.action == "set" else None,
                        f"named by the log: {m.text.strip()[:160]}",
                        True,
                        known="env:" + m.name in have,
                    )
                )
        pool = {**common_vars(), **self.registry.variables}  # NCCL_P2P_DISABLE is NCCL's, not the engine's
        # The root exception's frames name components its line does not ("in flashinfer_sample
        # (vllm/v1/sample/ops/topk_topp_sampler.py)"): they count as the failure's own words.
        failure = {
            "failure_class": outcome.failure_class,
            "implicates": outcome.implicates,
            "hint": hint,
            "evidence": [
                *outcome.evidence,
                *([outcome.root_exception] if outcome.root_exception else []),
                # the code the root exception passed through, innermost last: the sampler that
                # called the kernel library whose JIT failed (topk_topp_sampler.py -> flashinfer)
                *(f.replace("/", " ").replace("_", " ") for f in (outcome.frames or [])[-6:]),
            ],
        }
        failure["frames"] = list(outcome.frames or [])
        ranked = rank(
            pool.values(),
            failure,
            device=self.device,
            absent=self.absent,
            read_in=self.read_in(),
            package=self.registry.engine,
        )
        added = 0
        for r in ranked:
            if added >= RANKED_PER_FAILURE or r.score < MIN_RANK_SCORE:
                break
            name = "env:" + r.var.name
            if (
                any(p.factor.name == name for p in out)
                or not_a_fix(r.var.name)
                or is_test_hook(r.var.name)
                or of_absent_family(r.var.name, self.absent)
            ):
                continue
            f = as_factor(r.var, origin="ranked")
            if f is None:
                continue
            # A component the failure's own lines name (sampler, nccl, p2p) in the variable's name
            # makes it a first suspect, as a named flag is.
            strong = r.score >= 2 * W_EVIDENCE * W_IN_NAME  # two such components, or one and the class's own
            why = f"implicated by the failure ({'; '.join(r.reasons[:2])})"
            out.append(EnvProposal(f, None, why, strong, known=name in have))
            added += 1
        return out
