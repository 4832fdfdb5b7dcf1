"""scripts/uv_args.py: pip's configuration said as uv's options, so that uv installs the wheels pip
would (a machine's CPU torch in find-links, its mirrors, its caps), with the environment winning
over the files as in pip."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("uv_args", ROOT / "scripts" / "uv_args.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# What `pip config list` printed on the machine this was written on (and one user-file line).
LISTING = """:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.find-links='/opt/wheels'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/elsewhere'
user.index-url='https://mirror.example/simple'
"""


def test_pips_mirrors_caps_and_find_links_become_uvs_options_the_environment_winning():
    m = _script()
    opts = m.uv_options(m.parse(LISTING))
    assert opts[:2] == ["--index-strategy", "unsafe-best-match"]
    pairs = list(zip(opts[2::2], opts[3::2], strict=True))
    assert ("--find-links", "/opt/wheels") in pairs and ("--find-links", "/elsewhere") not in pairs
    assert ("--constraint", "/etc/xdg/pip/constraints.txt") in pairs
    assert [v for k, v in pairs if k == "--extra-index-url"] == [
        "file:///opt/pypi/simple",
        "file:///opt/pypi-more/simple",
    ]
    assert ("--index-url", "https://mirror.example/simple") in pairs
    assert not any("cert" in o for o in opts)  # what uv has no option for is left to its own defaults


def test_no_index_is_kept_and_an_empty_configuration_asks_only_for_pips_strategy():
    m = _script()
    assert m.uv_options(m.parse("")) == ["--index-strategy", "unsafe-best-match"]
    assert m.uv_options(m.parse("global.no-index='true'"))[-1] == "--no-index"
