"""Issue 28, row 3: the flags bringup sets (port, host, model) are refused in every spelling the
engine's argparse reads, before any launch, with the bringup option to use instead.

`-- --port=N` passed the old check (a token compared with "--port"): the server listened on the
user's port and a working server was reported as a hang; `-- --model=X` validated another model.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bringup.cli import app
from tests.paths import ROOT

SEED = ROOT / "bringup" / "data" / "scenarios" / "glm5-nvfp4-sm120.yaml"
SCENARIO = ["--scenario", str(SEED), "--time-scale", "0.002"]


def _invoke(args: list[str]) -> tuple[int, str]:
    r = CliRunner().invoke(app, args)
    return r.exit_code, r.output + (r.stderr if r.stderr_bytes is not None else "")


@pytest.mark.slow
@pytest.mark.parametrize(
    "tokens, says",
    [
        (["--port", "8123"], "bringup's own --port"),
        (["--port=8123"], "bringup's own --port"),
        (["--po=8123"], "bringup's own --port"),  # a unique prefix: argparse's allow_abbrev
        (["--host=0.0.0.0"], "--host"),
        (["--model=other/model"], "bringup's own --model"),
        (["--model-path", "other/model"], "bringup's own --model"),
        (["--model-p=other/model"], "bringup's own --model"),
    ],
)
def test_trial_refuses_a_reserved_flag_in_any_spelling(tmp_path: Path, tokens: list[str], says: str) -> None:
    rc, out = _invoke(["trial", *SCENARIO, "--runs-dir", str(tmp_path), "--", "--tp", "8", *tokens])
    assert rc == 2, out
    assert says in " ".join(out.split())
    assert not (tmp_path / "trials").exists()  # refused before anything was launched or written


@pytest.mark.slow
@pytest.mark.parametrize("baseline", ["--tp 8 --port=9000", "--tp 8 --por 9000", "--tp 8 --model=x/y"])
def test_run_refuses_a_reserved_flag_in_its_baseline(tmp_path: Path, baseline: str) -> None:
    rc, out = _invoke(["run", *SCENARIO, "--runs-dir", str(tmp_path), "--baseline", baseline])
    assert rc == 2, out
    assert "--baseline" in out and "bringup's own" in " ".join(out.split())
    assert not (tmp_path / "journal.sqlite").exists() or not list(tmp_path.rglob("server.log"))


def test_ordinary_flags_that_start_alike_pass() -> None:
    from bringup.core.reserved import reserved_flag
    from bringup.engines.targets import resolve_target

    t = resolve_target(engine=None, model=None, scenario=SEED, python=None, time_scale=0.002, gpus=None)
    for tokens in (["--model-impl", "auto"], ["--tp", "8"], ["--model-loader-extra-config={}"]):
        assert reserved_flag(tokens, t.spec, t.engine.info.model_flag) is None, tokens


# ---- round three (issue 40, item 1): every origin, every spelling, from data ---------------------
import yaml  # noqa: E402

from bringup.core.candidate import Candidate  # noqa: E402
from bringup.core.reserved import ReservedFlag, refuse, role_of  # noqa: E402
from bringup.help.text import DATA_HELP, option_name_groups, parse_help  # noqa: E402

ENGINES = yaml.safe_load((ROOT / "bringup" / "data" / "engines.yaml").read_text())


@pytest.mark.parametrize(
    "engine, name, role",
    [
        ("vllm", "--port", "port"),
        ("vllm", "--po", "port"),  # a prefix argparse expands
        ("vllm", "--host", "host"),
        ("vllm", "--uds", "socket"),  # vLLM: "If set, host and port arguments are ignored"
        # the served name is the user's own setting (the probes ask /v1/models for it): no role
        ("vllm", "--served-model-name", None),
        ("vllm", "--served_model_name", None),
        ("sglang", "--served-model-name", None),
        ("vllm", "--model", "model"),
        ("sglang", "--model", "model"),  # SGLang's alias of --model-path, from its help capture
        ("sglang", "--model-path", "model"),
        ("sglang", "--model_path", "model"),
        ("transformers", "--port", "port"),
    ],
)
def test_every_spelling_of_a_reserved_flag_is_known_by_its_role(engine, name, role):
    assert role_of(name, engine) == role


def test_every_flag_the_data_reserves_is_in_the_engines_own_help():
    """engines.yaml's `reserved:` names real flags (a typo would guard nothing), each with a source."""
    for engine, info in ENGINES.items():
        res = info["reserved"]
        assert res["source"], engine
        names = {
            n for p in DATA_HELP.glob(f"{engine}-*.txt") for g in option_name_groups(p.read_text()) for n in g
        }
        assert set(res["flags"]) <= names, (engine, set(res["flags"]) - names)


@pytest.mark.parametrize("capture", sorted(p.name for p in DATA_HELP.glob("*.txt")))
def test_no_other_flag_of_an_engine_is_refused(capture):
    """Every option of every help capture that the data does not reserve passes the candidate check
    (the guard is no wider than the data: `--model-impl`, `--port-range`-like names, `--host-ip`)."""
    engine = capture.split("-")[0]
    reserved = set(ENGINES[engine]["reserved"]["flags"])
    spec = parse_help((DATA_HELP / capture).read_text())
    for opt in spec.options:
        if reserved & set(opt.all_names):
            continue
        assert role_of(opt.name, engine) is None, opt.name
        assert role_of(opt.name, engine, spec) is None, opt.name


@pytest.mark.parametrize("flag", ["--port", "--host", "--uds", "--model", "--po"])
def test_no_candidate_can_hold_a_reserved_flag_whatever_made_it(flag):
    """The one place every candidate passes: made, changed (a fix, a knob, a lesson's cure), or read
    back from a journal, a candidate with a reserved flag is refused, naming what made it."""
    base = Candidate.make("vllm", "m", {"--max-num-seqs": "4"}, label="baseline")
    with pytest.raises(ReservedFlag, match="lesson L-1"):
        base.with_changes({flag: "1"}, label="lesson L-1")
    with pytest.raises(ReservedFlag, match="journal"):
        Candidate.from_json({"engine": "vllm", "model": "m", "flags": {flag: "1"}, "label": "journal run r1"})
    with pytest.raises(ReservedFlag):
        Candidate("vllm", "m", ((flag, "1"),))


def test_a_served_name_is_the_user_s_own_setting():
    """A launch script's --served-model-name is kept and searched like any other setting (the probes
    ask /v1/models for the name the server answers to); refused until 2026-12-06, when a sealed real
    bring-up on an H100 was refused before its first launch."""
    base = Candidate.make("vllm", "m", {"--served-model-name": "chat"}, label="baseline")
    assert base.flag_dict["--served-model-name"] == "chat"
    assert "--served-model-name" not in base.with_changes({"--served-model-name": None}).flag_dict


def test_the_function_for_other_origins_names_its_origin():
    """What a lessons file (or any new origin) calls: ReservedFlag naming the origin and the flag."""
    with pytest.raises(ReservedFlag, match=r"^lessons\.yaml lessons\[3\]: .*--host") as e:
        refuse(["--host"], "lessons.yaml lessons[3]", None)
    assert e.value.flag == "--host" and e.value.origin == "lessons.yaml lessons[3]"
    refuse(["--max-num-seqs", "env:VLLM_X", "--tp"], "x", None)  # ordinary flags and variables pass


def _target():
    from bringup.engines.targets import resolve_target

    return resolve_target(engine=None, model=None, scenario=SEED, python=None, time_scale=0.002, gpus=None)


@pytest.mark.parametrize(
    "fix, vary, says",
    [
        ({"--port": "8123"}, None, "--fix: give the port"),
        ({"--host": "0.0.0.0"}, None, "--fix: bringup sets the host"),
        ({"--model": "other/model"}, None, "--fix: give the model"),
        ({"--model-path": "other/model"}, None, "--fix: give the model"),
        (None, ["--port"], "--vary: give the port"),
    ],
)
def test_a_fix_or_a_varied_flag_that_is_reserved_is_refused(fix, vary, says):
    from bringup.search.space import SpaceError, build_space, parse_fix

    t = _target()
    base = Candidate.make(t.engine.log_dialect, t.model, {})
    if fix:  # as `--fix port=8123` is read
        fix = parse_fix([f"{k.removeprefix('--')}={v}" for k, v in fix.items()])
    with pytest.raises(SpaceError, match=re.escape(says)):
        build_space(t.engine.log_dialect, t.spec, base, vary=vary, fix=fix)


@pytest.mark.parametrize(
    "text, says",
    [
        (
            "factors:\n  - {flag: --host, kind: choice, levels: ['0.0.0.0']}\n",
            "factors[0]: bringup sets the host",
        ),
        ("factors: []\nfix: {--port: 9000}\n", ": fix: give the port"),
        ("factors: []\nfix: {--model-path: x}\n", ": fix: give the model"),
    ],
)
def test_a_space_file_that_sets_a_reserved_flag_is_refused(tmp_path, text, says):
    from bringup.search.space import SpaceError, build_space

    t = _target()
    f = tmp_path / "space.yaml"
    f.write_text(text)
    base = Candidate.make(t.engine.log_dialect, t.model, {})
    with pytest.raises(SpaceError, match=f"space file {re.escape(str(f))}.*{re.escape(says)}"):
        build_space(t.engine.log_dialect, t.spec, base, space_file=f)


def test_a_knob_override_that_is_reserved_is_refused():
    from bringup.tuning.knobs import KnobError, load_knobs

    t = _target()
    with pytest.raises(KnobError, match="--knob: give the port"):
        load_knobs(t.engine.log_dialect, t.spec, {}, overrides={"--port": ["1", "2"]})


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, says",
    [
        (["run", "--fix", "port=8123"], "--fix: give the port"),
        (["run", "--fix", "host=0.0.0.0"], "--fix: bringup sets the host"),
        (["run", "--fix", "model-path=other/model"], "--fix: give the model"),
        (["tune", "--config", "--tp 8 --host 0.0.0.0"], "tune --config: bringup sets the host"),
        (["run", "--baseline", "--tp 8 --port 9000"], "--baseline: give the port"),
    ],
)
def test_the_cli_refuses_a_reserved_flag_from_every_origin(
    tmp_path: Path, args: list[str], says: str
) -> None:
    rc, out = _invoke([*args, *SCENARIO, "--runs-dir", str(tmp_path)])
    assert rc == 2, out
    assert says in " ".join(out.split())
    assert not list(tmp_path.rglob("server.log"))  # refused before any launch


@pytest.mark.slow
def test_the_cli_refuses_a_space_file_with_a_reserved_flag(tmp_path: Path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("factors:\n  - {flag: --tp, kind: choice, levels: ['8']}\nfix: {--port: 9000}\n")
    rc, out = _invoke(["run", *SCENARIO, "--runs-dir", str(tmp_path / "runs"), "--space", str(space)])
    assert rc == 2, out
    assert "fix: give the port" in " ".join(out.split())
    assert not list(tmp_path.rglob("server.log"))
