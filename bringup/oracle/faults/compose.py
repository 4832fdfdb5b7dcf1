"""The composer: seeded draws of 1-4 compatible fault atoms onto a base scenario, each proven solvable.

A draw picks a base, then atoms that fit it (engine and version, the `needs` facts test) and do not
touch the same flag or variable as each other. The composed scenario carries one rule per atom,
earliest phase first, so an atom that strikes earlier hides the later ones (the first matching
rule decides, docs/scenarios.md), and a baseline that is the base's command plus every atom's
`inject`. A draw is kept only when the oracle proves it (`prove`):

- each atom is live: with every other atom's first fix applied, the baseline fails by that atom's
  rule (an atom masked for good, or never triggered, would be a fault nobody can see);
- all atoms' first fixes together serve: the oracle says `works` (validated);
- each of those changes is inside the search space (`in_space`): a level of a factor
  `bringup.search.space.build_space` gives for this baseline, dropping a flag or variable the baseline
  has, a value the atom's own log lines name (a hint, a remedy), or a variable the engine
  version's registry knows.

Everything is deterministic per (split, seed, index): the same cases every run.
"""

from __future__ import annotations

import random
import shlex
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bringup.core.candidate import Candidate, FlagError, FlagValue, parse_command, parse_flags, render_flags
from bringup.core.datafiles import phase_index
from bringup.knowledge.conditions import compile_condition
from bringup.oracle.faults.atoms import (
    Atom,
    Split,
    base_facts,
    fix_tokens,
    is_sealed,
    load_atoms,
    load_bases,
)
from bringup.oracle.faults.laws import gpus_rules, kv_rules, selector_rules, weights_rule
from bringup.oracle.trials import Oracle
from bringup.scenario.loader import load_scenario
from bringup.scenario.schema import Scenario

MAX_ATOMS = 4
TRIES = 60  # draws per case before giving up on a size (compatible atoms may be few)


@dataclass
class Case:
    """One composed bring-up: the scenario file, the baseline to start from, and its proof."""

    split: str
    seed: int
    index: int
    base: str
    atoms: list[Atom]
    baseline: str
    path: Path
    scenario: Scenario
    working: str  # the proven working changes (every atom's first fix), for the record
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.stem


# -- compatibility -------------------------------------------------------------------------------
def fits(atom: Atom, base: dict[str, Any]) -> bool:
    """The atom's engine, version and facts test hold on this base."""
    if atom.engine != base["engine"] or str(base["engine_version"]) not in atom.versions:
        return False
    facts = base_facts(base)
    cond = compile_condition(atom.needs or None, lambda k: k, f"{atom.id}.needs")
    return cond.holds(facts.get)


def _names(text: str, spec) -> set[str]:
    """The flags (canonical) and variables a change list touches."""
    out: set[str] = set()
    for tok in fix_tokens(text) if text.strip() else []:
        if tok.startswith("drop:"):
            name = tok[5:]
            opt = spec.resolve(name) if name.startswith("-") else None
            out.add(opt.name if opt is not None else name)
        elif tok.startswith("-"):
            flags = parse_flags(tok, spec)
            out.update(flags)
        else:
            out.add(tok.split("=", 1)[0])
    return out


def touched(atom: Atom, spec) -> set[str]:
    names = _names(atom.inject, spec) | {n for f in atom.fixes for n in _names(f, spec)}
    for entry in atom.force:  # a flag the engine overrides belongs to the atom that overrides it
        for flag in entry.set:
            opt = spec.resolve(flag if flag.startswith("-") else f"--{flag}")
            names.add(opt.name if opt is not None else flag)
    return names


# -- building the scenario --------------------------------------------------------------------------
def merged_baseline(
    base: dict[str, Any], atoms: list[Atom], spec
) -> tuple[dict[str, FlagValue], dict[str, str]]:
    flags, env = parse_command(base.get("baseline") or "", spec)
    for a in atoms:
        f, e = parse_command(a.inject, spec)
        flags.update(f)
        env.update(e)
    return flags, env


def command(flags: dict[str, FlagValue], env: dict[str, str]) -> str:
    """The command line a user would type: shell-quoted where a value needs it (a flag
    whose value is JSON, a value with a space), so that reading it back gives the same flags."""
    return " ".join(
        [*(f"{k}={shlex.quote(v)}" for k, v in env.items()), *map(shlex.quote, render_flags(flags))]
    )


def apply_fix(flags: dict[str, FlagValue], env: dict[str, str], fix: str, spec) -> None:
    for tok in fix_tokens(fix):
        if tok.startswith("drop:"):
            name = tok[5:]
            if name.startswith("-"):
                opt = spec.resolve(name)
                flags.pop(opt.name if opt is not None else name, None)
            else:
                env.pop(name, None)
        elif tok.startswith("-"):
            flags.update(parse_flags(tok, spec))
        else:
            k, _, v = tok.partition("=")
            env[k] = v


def scenario_doc(base: dict[str, Any], atoms: list[Atom], name: str, baseline: str) -> dict[str, Any]:
    doc = {k: v for k, v in base.items() if k not in ("name", "description", "baseline")}
    doc["name"] = name
    doc["description"] = f"{base['description']}; composed faults: {len(atoms)}"
    doc["baseline"] = baseline
    order = sorted(range(len(atoms)), key=lambda i: (phase_index(atoms[i].phase), i))
    rules = [atoms[i].rule() for i in order]
    for law in machine_rules(base, atoms):  # in phase order, after the atoms (and laws) of its phase
        at = sum(phase_index(_rule_phase(r)) <= phase_index(_rule_phase(law)) for r in rules)
        rules.insert(at, law)
    doc["rules"] = rules
    doc["warnings"] = [
        *(base.get("warnings") or []),
        *(w.model_dump(exclude_none=True) for a in atoms for w in a.warnings),
    ]
    forced = [e.model_dump(exclude_none=True) for a in atoms for e in a.force]
    if forced:
        doc["force"] = [*(base.get("force") or []), *forced]
    return doc


def machine_rules(base: dict[str, Any], atoms: list[Atom]) -> list[dict[str, Any]]:
    """The laws of the machine this base keeps besides its atoms (laws.py), in the order they
    strike within a phase: the GPU count first, the attention selector before the weights load,
    the weights before the KV cache is sized. A flag an atom touches is the atom's, not the selector law's."""
    from bringup.scenario.engine_args import help_for

    spec = help_for(base["engine"], str(base["engine_version"]))[0]
    owned = {n for a in atoms for n in touched(a, spec)}
    oom = weights_rule(base)
    return [
        *gpus_rules(base),
        *selector_rules(base, spec, owned),
        *([oom] if oom else []),
        *kv_rules(base, spec),
    ]


def _rule_phase(rule: dict[str, Any]) -> str:
    action = rule.get("fail") or rule.get("hang")
    return action["phase"] if action else "decode"


# -- the proof ------------------------------------------------------------------------------------
def _lines_text(atom: Atom) -> str:
    action = atom.fail or atom.hang
    lines = list(action.lines) if action is not None else []
    if atom.hang is not None and atom.hang.repeat is not None:
        lines += atom.hang.repeat.lines
    for w in atom.warnings:
        lines += w.log
    return "\n".join(lines)


def in_space(atom: Atom, fix: str, baseline: Candidate, spec, registry) -> str | None:
    """Why a fix's change is out of the search's reach (None: every change is inside)."""
    from bringup.search.space import build_space

    space = build_space(baseline.engine, spec, baseline)
    text = _lines_text(atom)
    for tok in fix_tokens(fix):
        if tok.startswith("drop:"):
            name = tok[5:]
            have = baseline.flag_dict if name.startswith("-") else baseline.env_dict
            opt = spec.resolve(name) if name.startswith("-") else None
            if (opt.name if opt is not None else name) not in have:
                return f"{tok}: the baseline has no {name}"
            continue
        if not tok.startswith("-"):
            k, _, v = tok.partition("=")
            if k in text or registry.status(k) in ("known", "common", "deprecated"):
                continue
            return f"{tok}: a variable neither the log nor the registry names"
        flags = parse_flags(tok, spec)
        for flag, value in flags.items():
            f = space.get(flag)
            shown = "" if value is True else str(value)
            if f is not None and (value is True or shown in [str(x) for x in f.levels]):
                continue
            if shown and (f"{flag}={shown}" in text or f"{flag} {shown}" in text):
                continue
            return f"{tok}: not a level of the space, and the log does not name it"
    return None


def prove(sc: Scenario, atoms: list[Atom], base_flags, base_env, env: dict[str, str]) -> str | None:
    """Why this composition is unsolvable or has a dead atom (None: proven)."""
    from bringup.engines.scenario import snapshot_registry

    spec = sc.help_spec()
    oracle = Oracle(sc, env=env)
    for a in atoms:
        flags, venv = dict(base_flags), dict(base_env)
        for b in atoms:
            if b is not a:
                apply_fix(flags, venv, b.fixes[0], spec)
        o = oracle.outcome(flags, env=venv)
        if o.rule != a.id:
            return f"{a.id}: not live with the others fixed (rule {o.rule}, {o.status})"
    flags, venv = dict(base_flags), dict(base_env)
    for a in atoms:
        apply_fix(flags, venv, a.fixes[0], spec)
    o = oracle.outcome(flags, env=venv)
    if not o.validated:
        return f"every first fix applied: {o.status} in {o.phase} (rule {o.rule})"
    registry = snapshot_registry(sc.engine, sc.engine_version)
    cand = Candidate.make(sc.engine, sc.model.name, base_flags, base_env, label="baseline")
    for a in atoms:
        why = in_space(a, a.fixes[0], cand, spec, registry)
        if why is not None:
            return f"{a.id}: {why}"
    return None


# -- drawing --------------------------------------------------------------------------------------
def _draw(
    rng: random.Random, pool: list[Atom], base: dict[str, Any], first: Atom, k: int, spec
) -> list[Atom] | None:
    """`first`, then k-1 more atoms that fit the base and touch nothing the chosen ones touch."""
    fit = [a for a in pool if a is not first and fits(a, base)]
    rng.shuffle(fit)
    chosen = [first]
    used = touched(first, spec)
    for a in fit:
        if len(chosen) == k:
            break
        names = touched(a, spec)
        if names & used:
            continue
        chosen.append(a)
        used |= names
    return chosen if len(chosen) == k else None


def compose_case(split: Split, seed: int, index: int, out_dir: Path, env: dict[str, str]) -> Case:
    """Case `index` of a seeded run: the first draw that is proven. The size is drawn uniformly
    from 1-4, then an atom uniformly, a base it fits, and more atoms that fit that base; a size
    that keeps failing drops by one."""
    from bringup.scenario.engine_args import help_for

    rng = random.Random(f"{split}:{seed}:{index}")
    pool = list(load_atoms(split))
    bases = list(load_bases())
    k = rng.randint(1, MAX_ATOMS)
    notes: list[str] = []
    for attempt in range(TRIES * MAX_ATOMS):
        if attempt and attempt % TRIES == 0 and k > 1:
            k -= 1  # this size does not fit anywhere often enough: one atom fewer
        first = rng.choice(pool)  # every atom as likely to appear, whatever base it needs
        homes = [b for b in bases if fits(first, b)]
        if not homes:
            continue
        base = rng.choice(homes)
        spec = help_for(base["engine"], str(base["engine_version"]))[0]
        atoms = _draw(rng, pool, base, first, k, spec)
        if atoms is None:
            continue
        try:
            flags, venv = merged_baseline(base, atoms, spec)
        except FlagError as e:
            notes.append(f"{base['name']}: {e}")
            continue
        baseline = command(flags, venv)
        name = f"composed-{split}-s{seed}-{index:03d}"
        path = out_dir / f"{name}.yaml"
        path.write_text(yaml.safe_dump(scenario_doc(base, atoms, name, baseline), sort_keys=False))
        sc = load_scenario(path)
        why = prove(sc, atoms, flags, venv, env)
        if why is not None:
            notes.append(f"{base['name']} + {[a.id for a in atoms]}: {why}")
            continue
        working = command(*_fixed(flags, venv, atoms, sc))
        return Case(split, seed, index, base["name"], atoms, baseline, path, sc, working, notes)
    # a sealed split names no atom, not even in an error
    why = f"{len(notes)} draws refused" if is_sealed(split) else str(notes[-3:])
    raise RuntimeError(f"no solvable draw for {split} seed {seed} case {index}: {why}")


def _fixed(flags, venv, atoms: list[Atom], sc: Scenario):
    flags, venv = dict(flags), dict(venv)
    for a in atoms:
        apply_fix(flags, venv, a.fixes[0], sc.help_spec())
    return flags, venv


def compose(
    split: Split, n: int, seed: int, out_dir: Path | None = None, env: dict[str, str] | None = None
) -> list[Case]:
    """n proven cases of a split; scenario files go to out_dir (a temporary folder if None)."""
    import os

    folder = (
        Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix=f"bringup-faults-{split}-"))
    )
    folder.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ) if env is None else env
    return [compose_case(split, seed, i, folder, env) for i in range(n)]


def compose_atoms(
    split: Split, base_name: str, atom_ids: list[str], out_dir: Path, env: dict[str, str]
) -> Case:
    """A chosen composition (tests, and reading one case closely); raises ValueError when the
    oracle cannot prove it."""
    from bringup.scenario.engine_args import help_for

    base = next(b for b in load_bases() if b["name"] == base_name)
    by_id = {a.id: a for a in load_atoms(split)}
    atoms = [by_id[i] for i in atom_ids]
    spec = help_for(base["engine"], str(base["engine_version"]))[0]
    flags, venv = merged_baseline(base, atoms, spec)
    baseline = command(flags, venv)
    name = f"composed-{split}-{base_name}-{len(atoms)}"
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    path = Path(out_dir) / f"{name}.yaml"
    path.write_text(yaml.safe_dump(scenario_doc(base, atoms, name, baseline), sort_keys=False))
    sc = load_scenario(path)
    why = prove(sc, atoms, flags, venv, env)
    if why is not None:
        raise ValueError(why)
    return Case(split, -1, -1, base_name, atoms, baseline, path, sc, command(*_fixed(flags, venv, atoms, sc)))
