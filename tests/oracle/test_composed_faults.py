"""The composed-fault benchmark's parts: atom files, the composer's determinism and proofs,
masking and two-change atoms, and one-atom bring-ups through the real run loop in-process."""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from bringup.core.candidate import Candidate, parse_flags
from bringup.oracle.faults.atoms import fix_tokens, is_sealed, load_atoms, load_bases, splits
from bringup.oracle.faults.compose import (
    apply_fix,
    compose_atoms,
    compose_case,
    fits,
    in_space,
    merged_baseline,
)
from bringup.oracle.faults.measure import named, named_text, stop_kind
from bringup.oracle.inprocess import InProcessTrial
from bringup.oracle.trials import Oracle
from bringup.scenario.engine_args import help_for
from bringup.session.run import Run, RunSettings

ENV: dict[str, str] = {}


def _oracle(case):
    return Oracle(case.scenario, env=ENV)


def test_atom_files_hold_thirty_sourced_atoms_a_third_held_out():
    dev, held = load_atoms("dev"), load_atoms("heldout")
    assert len(dev) + len(held) >= 30
    assert len(held) >= (len(dev) + len(held)) // 4
    assert not {a.id for a in dev} & {a.id for a in held}
    for split in (dev, held):
        assert {a.engine for a in split} >= {"vllm", "sglang"}
        assert any(a.needs_two for a in split)  # a fix of two changes, both needed
        assert {a.named_by for a in split} >= {"log", "frame"}
        assert all(fix_tokens(f) for a in split for f in a.fixes)
        assert all(any(fits(a, b) for b in load_bases()) for a in split)  # every atom has a home


def test_every_atom_of_every_split_file_is_valid_and_ids_are_unique_across_files():
    """Any `<name>.yaml` of the faults folder but the bases is a split; every atom validates (the
    schema, its class, its fixes), has a home among the bases, and no id appears in two files. Only
    counts are asserted: a sealed split's atoms are named nowhere."""
    names = splits()
    readable = ("dev", "dev2", "dev3", "dev4", "dev5", "dev6")
    sealed = ("heldout", "sealed", "sealed2", "sealed3", "sealed4", "sealed5", "sealed6")
    assert {*readable, *sealed} <= set(names)
    assert "bases" not in names
    assert not any(is_sealed(s) for s in readable)  # the dev* splits are readable
    assert all(is_sealed(s) for s in sealed)
    seen: set[str] = set()
    for split in names:
        atoms = load_atoms(split)  # raises on a schema error, an unknown class or a duplicate id
        ids = {a.id for a in atoms}
        assert not ids & seen, f"{split}: an atom id is used by another split"
        seen |= ids
        assert all(fix_tokens(f) for a in atoms for f in a.fixes)
        homeless = sum(not any(fits(a, b) for b in load_bases()) for a in atoms)
        assert homeless == 0, f"{split}: {homeless} atom(s) fit no base"


def test_the_sealed_split_covers_both_engines_and_the_hard_patterns_in_proportion():
    atoms = load_atoms("sealed")
    assert len(atoms) >= 30
    assert {a.engine for a in atoms} >= {"vllm", "sglang"}
    assert all(a.id.startswith("sealed-") for a in atoms)
    assert sum(a.needs_two for a in atoms) >= 1
    assert {a.named_by for a in atoms} == {"log", "frame", "none"}
    hard = sum(a.named_by != "log" for a in atoms)  # the fix is named by a frame only, or by nothing
    assert 2 * hard <= len(atoms), "the hard patterns should not be the majority"


def test_the_dev2_split_is_readable_and_carries_the_hard_patterns():
    """dev2 (readable, like dev): at least 40 atoms on both engines, ids prefixed dev2-, the ways
    out named by the log, by frames only and by nothing, two-change atoms, and an engine that
    overrides what was asked (an atom's `force`)."""
    atoms = load_atoms("dev2")
    assert len(atoms) >= 40 and not is_sealed("dev2")
    assert all(a.id.startswith("dev2-") for a in atoms)
    assert {a.engine for a in atoms} >= {"vllm", "sglang"}
    assert {v for a in atoms for v in a.versions} >= {"0.32.0", "0.5.10.post1", "0.5.23"}
    assert sum(a.needs_two for a in atoms) >= 3
    assert {a.named_by for a in atoms} == {"log", "frame", "none"}
    assert any(a.force for a in atoms)
    assert sum(not a.inject for a in atoms) >= 5  # a default of the engine is what breaks


def _spelled(atom, spec) -> int:
    """How many of the flags and variables an atom injects its own lines spell: a flag with its
    dashes, a flag of several words without them (`gpu-memory-utilization`), a variable by its name.
    A destination with underscores, or a one-word flag's bare word inside a frame's path, is not
    spelling."""
    from bringup.oracle.faults.compose import _lines_text, _names

    text = _lines_text(atom)
    count = 0
    for name in _names(atom.inject, spec):
        bare = name[2:] if name.startswith("--") else None
        words = [name] + ([bare] if bare and "-" in bare else [])
        count += any(re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", text) for w in words)
    return count


def test_the_sealed2_split_is_one_user_setting_that_no_line_spells():
    """sealed2 (sealed: counts only): every atom injects the user's own setting, and none of its
    lines, warnings or repeats spell that flag or variable; both engines and every engine version
    the bases carry; the ways out named by the log (a quoted value), by frames and by nothing, the
    last two together at least a third; a two-change atom."""
    atoms = load_atoms("sealed2")
    assert 36 <= len(atoms) <= 44 and is_sealed("sealed2")
    assert all(a.id.startswith("sealed2-") for a in atoms)
    assert {v for a in atoms for v in a.versions} >= {"0.32.0", "0.5.10.post1", "0.5.23"}
    assert {a.engine for a in atoms} >= {"vllm", "sglang"}
    assert all(a.inject.strip() for a in atoms)
    assert {a.named_by for a in atoms} == {"log", "frame", "none"}
    assert 3 * sum(a.named_by != "log" for a in atoms) >= len(atoms)
    assert sum(a.needs_two for a in atoms) >= 1
    spelled = sum(_spelled(a, help_for(a.engine, a.versions[0])[0]) for a in atoms)
    assert spelled == 0, f"{spelled} atom setting(s) spelled by their own lines"


def test_a_composed_baseline_reads_back_as_the_same_flags():
    """The baseline the composer writes is a command line the run parses again: a JSON-valued
    flag keeps its quotes (unquoted, the shell-style split would strip them and the engine would
    get `{k:1}`), and a plain one is written as before."""
    from bringup.core.candidate import parse_command
    from bringup.oracle.faults.compose import command

    spec = help_for("vllm", "0.32.0")[0]
    flags = {"--override-generation-config": '{"temperature":0.5}', "--seed": "7", "--enforce-eager": True}
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "X_NOTE": "two words"}
    line = command(flags, env)
    assert parse_command(line, spec) == (flags, env)
    assert "--seed 7 --enforce-eager" in line and "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in line


LINKS = ("[value]", "[field]", "[component]", "[none]")  # what links the failure to the setting


def _one_setting_split(split: str, prefix: str, two_change: bool = True):
    """The checks dev3, sealed3, dev4 and sealed4 share (sealed2's kind, issue 36): every atom injects one setting
    the user gave and none of its lines, warnings or repeats spell it; its first fix drops it; its
    description starts with what links the failure to the setting; both engines and every engine
    version the bases carry; the ways out named by the log, by frames and by nothing; a two-change
    atom. Counts only (one of the two is sealed)."""
    atoms = load_atoms(split)
    assert all(a.id.startswith(prefix) for a in atoms)
    assert {a.engine for a in atoms} >= {"vllm", "sglang"}
    assert {v for a in atoms for v in a.versions} >= {"0.32.0", "0.5.10.post1", "0.5.23"}
    assert all(a.inject.strip() for a in atoms)
    assert all(fix_tokens(a.fixes[0])[0].startswith("drop:") for a in atoms)
    assert all(a.description.startswith(LINKS) for a in atoms)
    assert {a.named_by for a in atoms} == {"log", "frame", "none"}
    assert sum(a.needs_two for a in atoms) >= int(two_change)
    spelled = sum(_spelled(a, help_for(a.engine, v)[0]) for a in atoms for v in a.versions)
    assert spelled == 0, f"{spelled} atom setting(s) spelled by their own lines"
    return atoms


@pytest.mark.parametrize(("split", "size"), [("dev3", 30), ("dev4", 18)])
def test_a_readable_split_is_one_user_setting_that_no_line_spells(split, size):
    """dev3 (30 atoms, the readable part of one seeded split of 70) and dev4 (18, of 44): sealed2's
    kind, every link kind present."""
    atoms = _one_setting_split(split, split + "-")
    assert len(atoms) == size and not is_sealed(split)
    assert {a.description.split("]")[0] + "]" for a in atoms} == set(LINKS)


@pytest.mark.parametrize(("split", "size", "twin"), [("sealed3", 40, "dev3"), ("sealed4", 26, "dev4")])
def test_a_sealed_split_is_one_user_setting_that_no_line_spells(split, size, twin):
    """sealed3 (the other 40 atoms of the split of 70) and sealed4 (the other 26 of 44), counts
    only: the ways out named by frames or by nothing are at least a third, no atom in its twin."""
    atoms = _one_setting_split(split, split + "-")
    assert len(atoms) == size and is_sealed(split)
    assert 3 * sum(a.named_by != "log" for a in atoms) >= len(atoms)
    assert not {a.id for a in atoms} & {a.id for a in load_atoms(twin)}


@pytest.mark.parametrize(("split", "size"), [("dev5", 12), ("sealed5", 7)])
def test_a_memory_split_is_one_user_setting_that_no_line_spells(split, size):
    """dev5 (readable, 12 atoms) and sealed5 (sealed, 7), one seeded split of 19 atoms on one theme:
    a setting the user gave that eats GPU memory. sealed2's kind (one user setting that no line,
    warning or repeat spells; its first fix drops it; a link bracket first in the description), both
    engines and every engine version the bases carry, the ways out named by the log, by frames and by
    nothing, every atom an out-of-memory kind or the first collective's (counts only). The two-change
    atom of the pool fell to dev5, so only the pool as a whole is asked for one."""
    atoms = _one_setting_split(split, split + "-", two_change=False)
    assert len(atoms) == size and is_sealed(split) == (split == "sealed5")
    assert {a.kind for a in atoms} <= {"oom-kv", "oom-graph", "oom-weights", "distributed"}
    assert sum(a.needs_two for s in ("dev5", "sealed5") for a in load_atoms(s)) >= 1
    assert not {a.id.split("-", 1)[1] for a in load_atoms("dev5")} & {
        a.id.split("-", 1)[1] for a in load_atoms("sealed5")
    }


@pytest.mark.parametrize(
    ("split", "twin", "size"),
    [("dev6", "sealed6", 14), ("sealed6", "dev6", 14), ("dev7", "sealed7", 14), ("sealed7", "dev7", 14)],
)
def test_a_mixed_issue36_split_is_a_user_setting_that_no_line_spells(split, twin, size):
    """dev6 / sealed6 and dev7 / sealed7 (readable and sealed, 14 atoms each), each pair written
    together by a helper with different settings: issue 36's kind across components and phases.
    Every atom that injects a setting has no line, warning or repeat spelling it and a first fix
    that drops it; a few atoms are a default of the engine (inject nothing); both engines and every
    engine version the bases carry, every link kind but none in each, the three ways out, a
    two-change atom and a phase past start-up (counts only), a hang in the pair; no engine's setting
    is given in both of a pair."""
    atoms = load_atoms(split)
    assert len(atoms) == size and is_sealed(split) == split.startswith("sealed")
    assert all(a.id.startswith(split + "-") for a in atoms)
    assert {a.engine for a in atoms} >= {"vllm", "sglang"}
    assert {v for a in atoms for v in a.versions} >= {"0.32.0", "0.5.10.post1", "0.5.23"}
    given = [a for a in atoms if a.inject.strip()]
    assert len(given) >= size - 2
    assert all(fix_tokens(a.fixes[0])[0].startswith("drop:") for a in given)
    assert all(a.description.startswith(LINKS) for a in atoms)
    assert {a.named_by for a in atoms} == {"log", "frame", "none"}
    assert sum(a.needs_two for a in atoms) >= 1
    assert any(a.hang is not None for a in (*atoms, *load_atoms(twin)))
    assert any(a.phase in ("warmup", "first-request", "decode") for a in atoms)
    spelled = sum(_spelled(a, help_for(a.engine, v)[0]) for a in given for v in a.versions)
    assert spelled == 0, f"{spelled} atom setting(s) spelled by their own lines"
    if not is_sealed(split):
        assert sum(not a.inject.strip() for a in atoms) >= 1
        other = load_atoms(twin)
        spec = {e: help_for(e, v)[0] for e, v in (("vllm", "0.32.0"), ("sglang", "0.5.23"))}
        from bringup.oracle.faults.compose import _names

        mine = {(a.engine, n) for a in atoms for n in _names(a.inject, spec[a.engine])}
        theirs = {(a.engine, n) for a in other for n in _names(a.inject, spec[a.engine])}
        assert not mine & theirs


@pytest.mark.slow
@pytest.mark.parametrize(
    "split",
    [
        "sealed2",
        "dev3",
        "sealed3",
        "dev4",
        "sealed4",
        "dev5",
        "sealed5",
        "dev6",
        "sealed6",
        "dev7",
        "sealed7",
    ],
)
def test_every_atom_of_a_one_setting_split_is_drawn_in_the_first_sixty_cases(tmp_path, split):
    """The benchmark runs 60 cases of each: every atom appears in at least one (counts only)."""
    drawn: set[str] = set()
    for i in range(60):
        drawn |= {a.id for a in compose_case(split, 0, i, tmp_path, ENV).atoms}
    assert len(drawn) == len(load_atoms(split))


def test_an_atom_can_make_the_engine_override_what_was_asked(tmp_path):
    """An atom's `force` entries join the composed scenario: the engine imposes its value whatever
    was asked, and the forced flag counts as touched by that atom (no other atom may draw it)."""
    from bringup.oracle.faults.compose import touched

    atom = next(a for a in load_atoms("dev2") if a.force)
    base = next(b for b in load_bases() if fits(atom, b))
    case = compose_atoms("dev2", base["name"], [atom.id], tmp_path, ENV)
    assert len(case.scenario.force) == len(atom.force)
    spec = case.scenario.help_spec()
    for entry in atom.force:
        for flag in entry.set:
            assert spec.resolve(f"--{flag}").name in touched(atom, spec)


def test_a_split_name_that_is_no_file_is_refused():
    from bringup.core.datafiles import KnowledgeFileError

    with pytest.raises(KnowledgeFileError, match="no split"):
        load_atoms("no-such-split")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("split", "min_bases"),
    [
        ("sealed", 4),
        ("dev3", 4),
        ("sealed3", 4),
        ("dev4", 4),
        ("sealed4", 4),
        ("dev5", 3),
        ("sealed5", 3),
        ("dev6", 4),
        ("sealed6", 4),
    ],
)
def test_the_sealed_split_composes_solvable_cases(tmp_path, split, min_bases):
    """Aggregate only, as for any sealed split: 12 cases of seed 0 compose, each proven (every first
    fix together validates, the baseline fails), sizes vary, and a failed draw names no atom. Memory
    only runs out where it is scarce, so most atoms of the memory splits (dev5, sealed5) have one or
    two homes (T4s, the 70B FP8 H200, SM120 cards) and their first 12 cases meet three bases, not four."""
    sizes, bases = set(), set()
    for i in range(12):
        case = compose_case(split, 0, i, tmp_path, ENV)
        sizes.add(len(case.atoms))
        bases.add(case.base)
        oracle, spec = _oracle(case), case.scenario.help_spec()
        base = next(b for b in load_bases() if b["name"] == case.base)
        flags, env = merged_baseline(base, case.atoms, spec)
        assert oracle.outcome(flags, env=env).status != "works"
        for a in case.atoms:
            apply_fix(flags, env, a.fixes[0], spec)
        assert oracle.outcome(flags, env=env).validated
    assert len(sizes) >= 3 and len(bases) >= min_bases


@pytest.mark.slow
@pytest.mark.parametrize("split", splits())
def test_the_composer_is_deterministic_per_seed(tmp_path, split):
    def draw(seed: int, sub: str):
        d = tmp_path / sub
        d.mkdir(exist_ok=True)
        return [
            (c.base, [a.id for a in c.atoms], c.baseline, c.working)
            for c in (compose_case(split, seed, i, d, ENV) for i in range(3))
        ]

    assert draw(3, "a") == draw(3, "b")
    assert draw(3, "a") != draw(4, "c")


@pytest.mark.slow
@pytest.mark.parametrize("split", splits())
def test_every_composed_case_is_solvable_and_every_atom_live(tmp_path, split):
    sizes = set()
    for i in range(8):
        case = compose_case(split, 0, i, tmp_path, ENV)
        sizes.add(len(case.atoms))
        oracle, spec = _oracle(case), case.scenario.help_spec()
        base_flags, base_env = merged_baseline(
            next(b for b in load_bases() if b["name"] == case.base), case.atoms, spec
        )
        flags, env = dict(base_flags), dict(base_env)
        for a in case.atoms:
            apply_fix(flags, env, a.fixes[0], spec)
        assert oracle.outcome(flags, env=env).validated, f"{split} case {i}: the proven fix does not serve"
        assert oracle.outcome(base_flags, env=base_env).status != "works", (
            f"{split} case {i}: baseline serves"
        )
    assert sizes <= {1, 2, 3, 4} and len(sizes) >= 3


def test_an_earlier_phase_masks_a_later_one(tmp_path):
    case = compose_atoms(
        "dev", "vllm-h200x1-llama31-8b", ["vllm-graph-capture-oom", "vllm-tp-exceeds-gpus"], tmp_path, ENV
    )
    oracle, spec = _oracle(case), case.scenario.help_spec()
    flags, env = merged_baseline(next(b for b in load_bases() if b["name"] == case.base), case.atoms, spec)
    first = oracle.outcome(flags, env=env)
    assert (first.rule, first.phase) == ("vllm-tp-exceeds-gpus", "parse-args")
    apply_fix(flags, env, "drop:--tensor-parallel-size", spec)
    second = oracle.outcome(flags, env=env)
    assert (second.rule, second.phase) == ("vllm-graph-capture-oom", "graph-capture")


def test_a_two_change_atom_goes_only_when_both_halves_change(tmp_path):
    case = compose_atoms(
        "dev", "sglang-h200x1-qwen3-32b-fp8", ["sglang-deepgemm-missing-both-paths"], tmp_path, ENV
    )
    oracle, spec = _oracle(case), case.scenario.help_spec()
    base = next(b for b in load_bases() if b["name"] == case.base)
    for half in ("SGLANG_ENABLE_JIT_DEEPGEMM=0", "drop:--fp8-gemm-backend"):
        flags, env = merged_baseline(base, case.atoms, spec)
        apply_fix(flags, env, half, spec)
        assert oracle.outcome(flags, env=env).rule == "sglang-deepgemm-missing-both-paths", half
    flags, env = merged_baseline(base, case.atoms, spec)
    apply_fix(flags, env, "SGLANG_ENABLE_JIT_DEEPGEMM=0 drop:--fp8-gemm-backend", spec)
    assert oracle.outcome(flags, env=env).validated


@pytest.mark.parametrize("split", ["dev3", "sealed3", "dev4", "sealed4", "dev5"])
def test_the_two_change_atoms_of_a_one_setting_split_go_only_when_both_halves_change(tmp_path, split):
    """A setting given twice (two flags of one choice): either half alone still fails by the atom's
    rule, both together validate (counts only)."""
    two = [a for a in load_atoms(split) if a.needs_two]
    assert two
    for atom in two:
        base = next(b for b in load_bases() if fits(atom, b))
        case = compose_atoms(split, base["name"], [atom.id], tmp_path, ENV)
        oracle, spec = _oracle(case), case.scenario.help_spec()
        for half in fix_tokens(atom.fixes[0]):
            flags, env = merged_baseline(base, case.atoms, spec)
            apply_fix(flags, env, half, spec)
            assert oracle.outcome(flags, env=env).rule == atom.id
        flags, env = merged_baseline(base, case.atoms, spec)
        apply_fix(flags, env, atom.fixes[0], spec)
        assert oracle.outcome(flags, env=env).validated


def test_a_fix_the_search_cannot_reach_is_out_of_space():
    from bringup.engines.scenario import snapshot_registry

    atom = next(a for a in load_atoms("dev") if a.id == "vllm-tp-exceeds-gpus")
    spec = help_for("vllm", "0.32.0")[0]
    cand = Candidate.make("vllm", "m", {"--tensor-parallel-size": 8}, {})
    reg = snapshot_registry("vllm", "0.32.0")
    assert in_space(atom, "drop:--tensor-parallel-size", cand, spec, reg) is None  # the user's own flag
    assert in_space(atom, "--max-num-seqs 256", cand, spec, reg) is None  # a level of the space
    assert "not a level" in (in_space(atom, "--max-num-seqs 77", cand, spec, reg) or "")
    assert "variable" in (in_space(atom, "NOT_A_VARIABLE_X=1", cand, spec, reg) or "")


def test_stop_kinds_read_the_runs_words():
    def res(status: str, validated: bool = False, reason: str = ""):
        return SimpleNamespace(status=status, validated=validated, stop_reason=reason)

    assert stop_kind(res("validated", True)) == "validated"
    assert stop_kind(res("budget", reason="launch budget (12) spent")) == "budget"
    assert stop_kind(res("no-working-config")) == "false-verdict"
    assert stop_kind(res("impossible")) == "false-verdict"
    assert stop_kind(res("not-found")) == "gave-up"


def test_a_variable_the_failure_implicates_counts_as_named():
    """The outcome implicates a variable as its factor ("env:NCCL_P2P_DISABLE"), a candidate's
    changes name it bare: a launch that sets it changed what the failure named (the measure
    counted it unimplicated before)."""
    from bringup.observe.outcome import Outcome

    out = Outcome(
        status="fails",
        failure_class="hang",
        evidence=["no progress for 300 s"],
        implicates=["--tensor-parallel-size", "env:NCCL_P2P_DISABLE"],
    )
    text = named_text(out)
    assert named("NCCL_P2P_DISABLE", (None, "1"), out, text)
    assert named("--tensor-parallel-size", ("2", None), out, text)
    assert not named("NCCL_IB_DISABLE", (None, "1"), out, text)
    assert not named("--max-model-len", ("4096", None), out, text)


def test_a_quoted_piece_of_a_value_or_a_link_counts_as_named():
    """A failure that quotes a key or value of a JSON flag, a size in its own unit, or fails in
    the module a value selects names that setting though no line spells its flag or whole value
    (the measure counted the launch that reset it unimplicated before); a word of the prose does
    not, nor does the user having set it."""
    from bringup.help.text import bundled_help
    from bringup.observe.outcome import Outcome
    from bringup.oracle.faults.measure import linked

    out = Outcome(
        status="fails",
        failure_class="bad-flag",
        root_exception="ValueError: Unsupported KV connector: 'NixlConnector'. Is nixl installed?",
        evidence=["ValueError: Unsupported KV connector: 'NixlConnector'. Is nixl installed?"],
    )
    cfg = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    assert named("--kv-transfer-config", (cfg, None), out, named_text(out))
    assert not named("--max-model-len", ("8192", None), out, named_text(out))
    oom = Outcome(
        status="fails",
        failure_class="oom-weights",
        root_exception="OutOfMemoryError: CUDA out of memory. GPU 0 has a total capacity of 24.00 GiB",
    )
    assert named("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", ("0=24G", None), oom, named_text(oom))
    assert not named("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", ("0=40G", None), oom, named_text(oom))
    spec = bundled_help("vllm", "0.32.0")
    frames = [
        "/usr/lib/python3/dist-packages/vllm/v1/engine/core.py:__init__",
        "/usr/lib/python3/dist-packages/vllm/model_executor/layers/quantization/awq.py:get_quant_method",
    ]
    crash = Outcome(
        status="fails", failure_class="unknown", root_exception="KeyError: 'qweight'", frames=frames
    )
    prev = Candidate.make("vllm", "m", {"--quantization": "awq", "--max-model-len": "8192"}, {})
    base = {"flags": {"--quantization": "awq", "--max-model-len": "8192"}, "env": {}}
    changed = {"--quantization": ("awq", None), "--max-model-len": ("8192", None)}
    assert linked(crash, prev, changed, spec, base, "vllm") == {"--quantization"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "base,atom",
    [
        ("vllm-sm120x4-llama31-70b", "vllm-flashinfer-not-installed"),
        ("sglang-h200x1-llama31-8b", "sglang-graph-oom-fraction"),
    ],
)
def test_a_one_atom_bring_up_runs_in_process_and_fails_as_the_atom_says(tmp_path, base, atom):
    case = compose_atoms("dev", base, [atom], tmp_path / "sc", dict(os.environ))
    settings = RunSettings(
        scenario=str(case.path),
        baseline=case.baseline,
        knowledge=False,
        screen="never",
        minimize=False,
        max_launches=4,
    )
    res = Run(settings, Path(tmp_path / "run"), trial_factory=InProcessTrial).execute()
    first = res.attempts[0]
    assert first.changes == "(baseline)"
    a = case.atoms[0]
    assert (first.failure_class, first.phase) == (a.expect_class, a.phase)
    assert res.validated and res.launches <= 4


@pytest.mark.parametrize("base_name", ["vllm-sm120x4-llama31-70b", "sglang0523-sm120x4-llama31-70b"])
def test_weights_that_do_not_fit_the_gpus_they_are_split_over_fail_to_load(tmp_path, base_name):
    """The one law a composed case keeps besides its atoms: 131 GiB of bf16 weights do not load on
    one 95 GiB card (and do on two), read by the trial's own classifier as the OOM it is."""
    import yaml

    from bringup.engines.scenario import scenario_engine
    from bringup.oracle.faults.compose import scenario_doc, weights_rule
    from bringup.trial.launch import TrialSettings
    from bringup.verify.probes import ProbeConfig

    base = next(b for b in load_bases() if b["name"] == base_name)
    path = tmp_path / "physics.yaml"
    path.write_text(yaml.safe_dump(scenario_doc(base, [], "physics", base["baseline"]), sort_keys=False))
    engine = scenario_engine(path, 0.01)
    spec = engine.help_spec()
    tp = spec.resolve(engine.info.gpus.product[0]).name
    oracle = Oracle.load(path)
    flags = parse_flags(base["baseline"], spec)
    assert oracle.outcome(flags).validated  # the user's split fits
    assert oracle.outcome({**flags, tp: "2"}).validated  # 65.7 + 2 GiB on a 95 GiB card
    alone = {k: v for k, v in flags.items() if k != tp}
    out = oracle.outcome(alone)
    assert (out.rule, out.phase) == ("weights-do-not-fit", "load-weights")
    cand = Candidate.make(engine.log_dialect, engine.world().default_model() or "", alone, {})
    settings = TrialSettings(probe=ProbeConfig(answers=[]))
    read = InProcessTrial(engine, cand, tmp_path / "t", settings, spec=spec, version=engine.version()).run()
    assert (read.failure_class, read.phase) == ("oom-weights", "load-weights")
    # A model that fits on one card of its machine keeps no such rule: dropping the split is free there.
    roomy = next(b for b in load_bases() if b["name"] == "vllm-h200x8-llama33-70b")
    assert weights_rule(roomy) is None


def _physics(tmp_path, base_name: str, atoms=()):
    """A base with no fault but the laws of the machine: its oracle, help spec and baseline flags."""
    import yaml

    from bringup.oracle.faults.compose import scenario_doc

    base = next(b for b in load_bases() if b["name"] == base_name)
    path = tmp_path / f"{base_name}.yaml"
    path.write_text(
        yaml.safe_dump(scenario_doc(base, list(atoms), "physics", base["baseline"]), sort_keys=False)
    )
    spec = help_for(base["engine"], str(base["engine_version"]))[0]
    return Oracle.load(path), spec, parse_flags(base["baseline"], spec), path


def test_a_kv_cache_with_no_room_fails_as_the_engine_fails(tmp_path):
    """The KV-cache law: a 70 B model at tensor-parallel 1 on one H200 loads its 131 GiB of weights
    (they fit) and leaves the cache nothing, so vLLM stops at kv-alloc with its own "no available
    memory for the cache blocks" (read by the trial's classifier as the KV OOM it is); so does a
    70 B FP8 model under SGLang at half its memory fraction. The user's own settings serve."""
    from bringup.engines.scenario import scenario_engine
    from bringup.trial.launch import TrialSettings
    from bringup.verify.probes import ProbeConfig

    oracle, spec, flags, path = _physics(tmp_path, "vllm-h200x8-llama33-70b")
    assert oracle.outcome(flags).validated
    alone = {k: v for k, v in flags.items() if k != "--tensor-parallel-size"}
    out = oracle.outcome(alone)
    assert (out.rule, out.phase) == ("kv-cache-no-blocks", "kv-alloc")
    engine = scenario_engine(path, 0.01)
    cand = Candidate.make(engine.log_dialect, engine.world().default_model() or "", alone, {})
    settings = TrialSettings(probe=ProbeConfig(answers=[]))
    read = InProcessTrial(engine, cand, tmp_path / "t", settings, spec=spec, version=engine.version()).run()
    assert (read.failure_class, read.phase) == ("oom-kv-cache", "kv-alloc")

    oracle, spec, flags, _ = _physics(tmp_path, "sglang0523-h200x1-llama33-70b-fp8")
    assert oracle.outcome(flags).validated  # 0.88 of the card: 52 GiB beside 70.5 GiB of weights
    half = oracle.outcome({**flags, "--mem-fraction-static": "0.5"})
    assert (half.rule, half.phase) == ("kv-cache-no-blocks", "kv-alloc")


def test_a_kv_cache_shorter_than_one_request_fails_on_vllm_only(tmp_path):
    """vLLM checks at start that the cache holds one request of the context length: on one H200
    an 8 B model at a fifth of the card holds 16 k tokens but not the model's own 128 k (the user's
    context limit dropped), and the message quotes the double's own figures. SGLang starts with a
    pool shorter than the context (it caps the request length), so it has no such law."""
    oracle, spec, flags, path = _physics(tmp_path, "vllm-h200x1-llama31-8b")
    low = {**flags, "--gpu-memory-utilization": "0.2"}
    assert oracle.outcome(low).validated  # 16384 tokens fit
    unbounded = {k: v for k, v in low.items() if k != "--max-model-len"}
    out = oracle.outcome(unbounded)
    assert (out.rule, out.phase) == ("kv-cache-one-request", "kv-alloc")
    assert not any(
        r.id == "kv-cache-one-request"
        for r in _physics(tmp_path, "sglang-h200x1-llama31-8b")[0].scenario.rules
    )


def test_the_kv_law_refuses_only_what_the_memory_plan_refuses():
    """The law is the memory plan's budget (bringup/facts/memplan.py) against one request's need:
    over fractions, context lengths and tensor-parallel sizes it never refuses a launch whose budget
    holds the request, and refuses every one at the user's own or the model's full length that does not."""
    from bringup.facts import memplan
    from bringup.oracle.faults.laws import kv_rules
    from bringup.scenario.sizing import kv_bytes_per_token, weights_per_gpu

    base = next(b for b in load_bases() if b["name"] == "vllm-sm120x4-llama31-70b")
    spec = help_for("vllm", "0.32.0")[0]
    rules = {r["id"]: r for r in kv_rules(base, spec)}
    from bringup.knowledge.conditions import compile_condition

    conds = {k: compile_condition(r["when"], lambda x: x, k) for k, r in rules.items()}
    m = base["model"]
    checked = refused = 0
    for tp in (2, 4):
        w = weights_per_gpu(m["weights_gib"], m["replicated_gib"], tp)
        for frac in (0.3, 0.5, 0.7, 0.85, 0.95):
            budget = memplan.plan(
                gpu_mem_gib=95.0,
                tp=tp,
                mem_fraction=frac,
                engine="vllm",
                weights_gib=w,
                disable_cuda_graph=True,
            ).kv_budget_gib
            for ctx in (None, 16384, 50000, 131072):
                need = (ctx or m["context_length"]) * kv_bytes_per_token(m, tp, "auto") / (1 << 30)
                values = {
                    "tensor-parallel-size": tp,
                    "pipeline-parallel-size": None,
                    "gpu-memory-utilization": frac,
                    "max-model-len": ctx,
                    "kv-cache-dtype": None,
                    "kv-cache-memory-bytes": None,
                }
                fires = any(c.holds(values.get) for c in conds.values())
                checked += 1
                refused += fires
                assert not (fires and budget >= need), (tp, frac, ctx)
                if ctx in (None, 16384) and budget < need:
                    assert fires, (tp, frac, ctx)
    assert checked == 40 and refused >= 4


def test_an_attention_backend_the_selector_refuses_fails_as_the_engine_refuses(tmp_path):
    """The selector law reads the knowledge rules' `incompatible` verdicts (rules.yaml) and fails a
    launch with the engine's own refusal: FLASH_ATTN on a Tesla T4 (compute capability 7.5), FLASH_ATTN
    with an fp8 KV cache on SM120 (FA2 takes none), an MLA backend for a GQA model, SGLang's fa3 on
    SM120. What the selector takes serves, and a flag a case's atom touches stays the atom's."""
    from bringup.oracle.faults.compose import machine_rules

    oracle, _, flags, _ = _physics(tmp_path, "vllm-t4x1-qwen25-3b")
    out = oracle.outcome({**flags, "--attention-backend": "FLASH_ATTN"})
    assert (out.rule, out.phase) == ("backend-refused:vllm-fa-cc", "load-weights")
    assert oracle.outcome({**flags, "--attention-backend": "TRITON_ATTN"}).validated

    oracle, _, flags, _ = _physics(tmp_path, "vllm-sm120x1-qwen3-8b")
    assert oracle.outcome({**flags, "--attention-backend": "FLASH_ATTN"}).validated
    fp8 = oracle.outcome({**flags, "--attention-backend": "FLASH_ATTN", "--kv-cache-dtype": "fp8"})
    assert fp8.rule == "backend-refused:vllm-fa-quantized-kv"
    assert (
        oracle.outcome({**flags, "--attention-backend": "TRITON_MLA"}).rule
        == "backend-refused:vllm-mla-backends-need-mla"
    )

    oracle, _, flags, _ = _physics(tmp_path, "sglang0523-sm120x1-qwen3-8b")
    assert oracle.outcome({**flags, "--attention-backend": "fa3"}).rule == "backend-refused:fa3-sm80-90"
    assert oracle.outcome({**flags, "--attention-backend": "triton"}).validated

    atom = next(a for a in load_atoms("dev") if a.id == "sglang-fa3-on-sm120")
    base = next(b for b in load_bases() if b["name"] == "sglang0523-sm120x1-qwen3-8b")
    owned = [r for r in machine_rules(base, [atom]) if r["id"].startswith("backend-refused:")]
    assert not any("attention-backend" in w for r in owned for w in r["when"])


def test_the_selector_law_enforces_only_incompatible_rules_that_exist():
    """bases.yaml backend_refusals names rules of bringup/data/rules.yaml whose verdict is
    `incompatible` (the law reads their conditions, it does not copy them) and gives each its lines."""
    from bringup.knowledge.rules import default_rules
    from bringup.oracle.faults.laws import _section

    rules = {r.rule.id: r.rule for r in default_rules()}
    named = {rid for entries in _section("backend_refusals").values() for rid in entries}
    assert len(named) >= 8
    for rid in named:
        assert rid in rules and rules[rid].verdict == "incompatible" and rules[rid].source, rid


def test_a_split_wider_than_the_machine_fails_as_the_engine_fails(tmp_path):
    """The GPU-count law: tensor x pipeline parallel past the machine's GPUs fails with vLLM's own
    world-size refusal (quoting the product and the count) or SGLang's missing device; what the
    machine holds serves."""
    oracle, _, flags, _ = _physics(tmp_path, "vllm-h200x2-llama31-8b")
    assert oracle.outcome({**flags, "--tensor-parallel-size": "2"}).validated
    out = oracle.outcome({**flags, "--tensor-parallel-size": "2", "--pipeline-parallel-size": "2"})
    assert (out.rule, out.phase) == ("gpus-short:4", "parse-args")
    oracle, spec, flags, _ = _physics(tmp_path, "sglang-sm120x2-qwen3-8b")
    tp = spec.resolve("--tp").name
    assert oracle.outcome({**flags, tp: "4"}).rule == "gpus-short:4"


def test_a_graph_capture_oom_is_not_met_by_a_launch_without_cuda_graphs(tmp_path):
    """An out-of-memory in CUDA-graph capture is the graphs' memory: vLLM's --enforce-eager captures
    none, so the atom does not strike there (it struck before, in the warm-up pass, as a kernel
    failure of that phase does; the search's enforce-eager then looked like no escape)."""
    case = compose_atoms(
        "dev4", "vllm-t4x1-qwen25-3b", ["dev4-vllm-t4-graph-sizes-given-twice"], tmp_path, ENV
    )
    oracle, spec = _oracle(case), case.scenario.help_spec()
    assert case.atoms[0].rule()["fail"]["graphs"] is True
    base = next(b for b in load_bases() if b["name"] == case.base)
    flags, env = merged_baseline(base, case.atoms, spec)
    assert oracle.outcome(flags, env=env).rule == "dev4-vllm-t4-graph-sizes-given-twice"
    apply_fix(flags, env, "--enforce-eager", spec)
    assert oracle.outcome(flags, env=env).validated
    # an atom of another kind in the graph-capture phase is no graph memory: no such mark
    kinds = {
        a.kind for s in splits() if not is_sealed(s) for a in load_atoms(s) if a.phase == "graph-capture"
    }
    others = [
        a for s in splits() if not is_sealed(s) for a in load_atoms(s) if a.kind != "oom-graph" and a.fail
    ]
    assert "oom-graph" in kinds and all("graphs" not in a.rule()["fail"] for a in others)
