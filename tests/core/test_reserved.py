"""Issue 28, row 3: the flags bringup sets (port, host, model) are refused in every spelling the
engine's argparse reads, before any launch, with the bringup option to use instead.

`-- --port=N` passed the old check (a token compared with "--port"): the server listened on the
user's port and a working server was reported as a hang; `-- --model=X` validated another model.
"""

from __future__ import annotations

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
