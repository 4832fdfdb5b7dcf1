"""The click/Typer help parser on real captures of `transformers serve --help` (transformers 5.19.0)."""

from __future__ import annotations

import pytest

from bringup.core.candidate import FlagError, parse_flags
from bringup.help.text import bundled_help, bundled_versions, is_click_help, parse_help
from tests.paths import DATA, ROOT

PLAIN = ROOT / "bringup" / "data" / "help" / "transformers-5.19.0.txt"
RICH = DATA / "help" / "transformers-5.19.0-typer-rich.txt"
ARGPARSE = ROOT / "bringup" / "data" / "help" / "vllm-0.32.0-cpu.txt"


@pytest.fixture(params=["plain", "rich"])
def spec(request):
    return parse_help((PLAIN if request.param == "plain" else RICH).read_text())


def test_family_is_detected():
    assert is_click_help(PLAIN.read_text()) and is_click_help(RICH.read_text())
    assert not is_click_help(ARGPARSE.read_text())
    assert parse_help(PLAIN.read_text()).style == "click"
    assert parse_help(RICH.read_text()).style == "rich"


def test_every_serve_option_is_read(spec):
    names = {o.name for o in spec.options}
    expected = {
        "--continuous-batching",
        "--attn-implementation",
        "--compile",
        "--quantization",
        "--reasoning",
        "--chat-template-kwargs",
        "--device",
        "--dtype",
        "--trust-remote-code",
        "--model-timeout",
        "--cb-block-size",
        "--cb-num-blocks",
        "--cb-max-batch-tokens",
        "--cb-max-memory-percent",
        "--cb-use-cuda-graph",
        "--host",
        "--port",
        "--enable-cors",
        "--log-level",
        "--default-seed",
    }
    assert expected <= names
    assert "--help" not in names and "-h" not in spec.by_name
    assert spec.positionals == ["force_model"]


def test_types_defaults_and_choices(spec):
    g = spec.get
    assert (g("--attn-implementation").value_type, g("--attn-implementation").takes_value) == ("str", True)
    assert g("--cb-num-blocks").value_type == "int" and g("--cb-max-memory-percent").value_type == "float"
    assert g("--reasoning").choices == ["on", "off", "auto"] and g("--reasoning").default == "auto"
    assert g("--port").default == "8000" and g("--host").default == "localhost"
    assert g("--log-level").default == "warning" and g("--dtype").default == "auto"
    assert g("--attn-implementation").default is None  # no [default: ...] printed
    # the help text is joined across wrapped lines (click breaks "no-" / "enable-cors")
    assert g("--reasoning").help.endswith("[default: auto]")
    assert "Configure with --cb-* flags." in g("--continuous-batching").help


def test_switches_and_negation(spec):
    cb = spec.get("--continuous-batching")
    assert cb.negatable and not cb.takes_value and cb.default == "False"
    assert spec.get("--no-continuous-batching") is cb
    assert spec.get("--enable-cors").default == "False"
    graph = spec.get("--cb-use-cuda-graph")
    assert graph.negatable and graph.default is None  # bool | None: no default printed
    flags = parse_flags(
        ["--continuous-batching", "--no-cb-use-cuda-graph", "--attn-implementation", "sdpa"], spec
    )
    assert flags == {
        "--continuous-batching": True,
        "--cb-use-cuda-graph": False,
        "--attn-implementation": "sdpa",
    }


def test_dest_is_the_option_name_not_the_type(spec):
    # A click metavar is a type (TEXT), unlike argparse's dest-like metavars.
    assert spec.get("--attn-implementation").dest == "attn_implementation"
    assert spec.get("--cb-max-memory-percent").dest == "cb_max_memory_percent"


def test_click_rejects_what_click_rejects(spec):
    with pytest.raises(FlagError, match="invalid choice"):
        parse_flags(["--reasoning", "maybe"], spec)
    with pytest.raises(FlagError, match="unrecognized"):  # click takes no abbreviations
        parse_flags(["--attn-impl", "sdpa"], spec)
    with pytest.raises(FlagError, match="expected one argument"):
        parse_flags(["--dtype"], spec)


def test_plain_capture_has_short_aliases_and_sections():
    spec = parse_help(PLAIN.read_text())
    assert spec.get("-q").name == "--quiet"
    assert spec.get("--format").section == "Formatting options"
    assert spec.usage_prog == "python -m transformers.cli.transformers serve"


def test_bundled_capture_is_found():
    assert "5.19.0" in bundled_versions("transformers")
    assert bundled_help("transformers", "5.19.0").get("--cb-use-cuda-graph") is not None
