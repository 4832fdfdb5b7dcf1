"""--keep: a setting of the starting command the user pins as given; every other is a suspect the
search may undo (issue 36, item 1)."""

from __future__ import annotations

import pytest

from bringup.session.run import Run
from bringup.session.settings import RunError, RunSettings
from tests.paths import ROOT

GLM5 = str(ROOT / "bringup" / "data" / "scenarios" / "glm5-nvfp4-sm120.yaml")
BASE = "--tp 8 --kv-cache-dtype fp8_e4m3 --mem-fraction-static 0.95"


def _prepared(tmp_path, **kw):
    run = Run(RunSettings(scenario=GLM5, baseline=BASE, **kw), tmp_path)
    run.prepare_offline()
    return run


def test_a_kept_flag_is_pinned_at_its_own_value_and_the_rest_stay_suspects(tmp_path):
    free = _prepared(tmp_path / "a")
    assert (
        free.space.get("--kv-cache-dtype") is not None and free.space.get("--mem-fraction-static") is not None
    )
    run = _prepared(tmp_path / "b", keep=["--kv-cache-dtype"])
    assert run.space.get("--kv-cache-dtype") is None
    assert run.space.fixed["--kv-cache-dtype"] == "fp8_e4m3"
    assert run.space.get("--mem-fraction-static") is not None  # not kept: still a suspect
    cand = run.strategy.propose().candidate
    assert cand.flag_dict["--kv-cache-dtype"] == "fp8_e4m3"


def test_keeping_a_setting_the_starting_command_lacks_is_a_clear_error(tmp_path):
    with pytest.raises(RunError, match=r"--keep --block-size: the starting command does not set"):
        _prepared(tmp_path, keep=["--block-size"])
