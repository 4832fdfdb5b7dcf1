"""Issue 39, item 3: every line a user reads speaks to the user. No user-facing line refers to
bringup's own source tree, notes or data folders (a user who installed bringup has none of them);
the hint for a failure nothing recognises says what failed, where, and which of the user's own
settings touch it, and what bringup's maintainers should do goes to the debug log.

Scanned: every template, the user-facing text of every knowledge file (hints, reasons, notes, and
sources as a report shows them), every string literal of the package that is not a docstring or a
debug-log line, every command's --help, and the reports of the real runs the project keeps.
Before: the unknown failure's hint told the user to "add a signature to bringup/data/signatures/",
option helps sent them to docs/dryrun.md, docs/parallel.md, docs/probes.md and engines.yaml, a rule's
reason and the memory plan's source named docs/ files and bringup/facts/memplan.py.
"""

from __future__ import annotations

import ast
import json
import logging
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from bringup.cli import app
from bringup.core.datafiles import OWN_FILE, USER_TEXT_KEYS, public_source
from bringup.engines.explain import explain_file
from bringup.observe.unknown import unknown_hint
from bringup.report.findings import load_result, render_markdown
from bringup.report.html import load_tunes, render_html
from tests.paths import DATA, ROOT

PKG = ROOT / "bringup"
# Literals that name a data file to load it, or that speak to bringup's maintainers only.
MAINTAINERS_ONLY = {
    "bringup/env/extract.py": "the header of a registry file the maintainers regenerate",
    "bringup/search/space.py": "a damaged bringup data file, named so that it can be repaired",
}


def _yaml_texts(node: object, key: str = "") -> list[tuple[str, str]]:
    if isinstance(node, dict):
        return [t for k, v in node.items() for t in _yaml_texts(v, str(k))]
    if isinstance(node, list):
        return [t for v in node for t in _yaml_texts(v, key)]
    return [(key, node)] if isinstance(node, str) else []


def test_templates_cite_no_file_of_bringup() -> None:
    found = [
        f"{p.name}: {m.group(0)}"
        for p in (PKG / "templates").glob("*.j2")
        for m in OWN_FILE.finditer(p.read_text())
    ]
    assert found == []


def test_knowledge_a_user_reads_cites_no_file_of_bringup() -> None:
    """Hints, reasons, notes as written; sources as a report shows them (`public_source`)."""
    found = []
    files = [*(PKG / "data").glob("*.yaml"), *(PKG / "data" / "signatures").glob("*.yaml")]
    assert len(files) > 8
    for f in files:
        for key, text in _yaml_texts(yaml.safe_load(f.read_text())):
            shown = text if key in USER_TEXT_KEYS else public_source(text) if key == "source" else ""
            found += [f"{f.name} {key}: {m.group(0)}" for m in OWN_FILE.finditer(shown)]
    assert found == []


def _literals(path: Path) -> list[tuple[int, str]]:
    """String literals that are neither docstrings nor arguments of a logging call."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            skip.add(id(body[0].value))  # a docstring
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("debug", "info")
        ):
            skip |= {id(n) for n in ast.walk(node)}  # the debug log: for bringup's maintainers
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
    ]


@pytest.mark.slow  # every module's syntax tree: about 4 s
def test_no_string_of_the_package_sends_a_user_to_bringups_files() -> None:
    found = []
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if (
            rel.startswith(("bringup/oracle/", "bringup/scenario/", "bringup/data/"))
            or rel in MAINTAINERS_ONLY
        ):
            continue  # the test-only oracle and scenario double; the maintainers' own tools
        for line, text in _literals(p):
            if OWN_FILE.fullmatch(text.strip()):
                continue  # a data file's name, to load it
            found += [f"{rel}:{line}: {m.group(0)}" for m in OWN_FILE.finditer(text)]
    assert found == []


@pytest.mark.slow  # every command's --help: about 3 s
def test_no_help_text_sends_a_user_to_bringups_files() -> None:
    names = [c.name or c.callback.__name__ for c in app.registered_commands if c.callback and not c.hidden]
    assert len(names) > 10
    for name in [None, *names]:
        out = CliRunner().invoke(app, [*([name] if name else []), "--help"], terminal_width=300).output
        assert [m.group(0) for m in OWN_FILE.finditer(out)] == [], name


LOG = """\
INFO 12-04 10:00:00 [utils.py:233] non-default args: {'model': '/models/m', 'quantization': 'awq', 'max_model_len': 4096}
ERROR 12-04 10:00:09 [core.py:700] EngineCore failed to start.
ERROR 12-04 10:00:09 [core.py:700] Traceback (most recent call last):
ERROR 12-04 10:00:09 [core.py:700]   File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 691, in run_engine_core
ERROR 12-04 10:00:09 [core.py:700]     engine_core = EngineCoreProc(*args, **kwargs)
ERROR 12-04 10:00:09 [core.py:700]   File "/usr/lib/python3.12/site-packages/vllm/model_executor/layers/quantization/awq.py", line 120, in apply
ERROR 12-04 10:00:09 [core.py:700]     out = awq_gemm(x, qweight)
ERROR 12-04 10:00:09 [core.py:700]   File "/usr/lib/python3.12/site-packages/torch/_ops.py", line 1116, in __call__
ERROR 12-04 10:00:09 [core.py:700]     return self._op(*args)
ERROR 12-04 10:00:09 [core.py:700] WeirdKernelError: awq_gemm got a stride of 3 where 4 was packed
"""


def test_a_failure_nothing_recognises_is_explained_to_the_user(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What failed (the root exception), where (the engine's module it failed in, not torch's),
    which of the user's own settings touch it, as given (--quantization awq, not --max-model-len),
    and what to try; the signature the maintainers could add goes to the debug log."""
    log = tmp_path / "server.log"
    log.write_text(LOG)
    with caplog.at_level(logging.DEBUG, logger="bringup.observe.unknown"):
        out = explain_file(log)
    hint = out.hint or ""
    assert (
        out.signature is None
    )  # no signature or rule knows it (its class may come from where it was raised)
    assert "WeirdKernelError: awq_gemm got a stride of 3" in hint
    assert "in vllm.model_executor.layers.quantization.awq" in hint
    assert "Your settings that touch" in hint and "--quantization awq" in hint and "max-model-len" not in hint
    assert "A launch without them, or with other values, tells whether they cause it" in hint
    assert not OWN_FILE.search(hint) and "signature" not in hint
    assert "bringup/data/signatures/" in caplog.text  # for the maintainers


def test_the_component_map_seam_takes_another_map() -> None:
    """The lead's component map (issue 36) plugs in through `components`: its names are used."""

    class Map:
        def component(self, frames):
            return "the AWQ GEMM kernel"

        def settings_touching(self, frames, settings):
            return [k for k in settings if k == "env:VLLM_USE_TRITON_AWQ"]

    hint = unknown_hint(
        "E: x", ["vllm/a.py:f"], {"env:VLLM_USE_TRITON_AWQ": "1", "--tp": "2"}, components=Map()
    )
    assert "failed in the AWQ GEMM kernel" in hint and "VLLM_USE_TRITON_AWQ=1" in hint and "--tp" not in hint
    assert "No name or value of your settings" in unknown_hint("E: x", ["vllm/a.py:f"], {"--tp": "2"})


def test_the_component_is_named_without_the_folder_the_engine_was_installed_in() -> None:
    """Real vLLM 0.24.0 on a lent H100 (tests/data/gpu/h100-2026-12-07f), installed with
    `pip install --target /tmp/vsite`: its hint said the engine "failed in vsite.vllm.renderers.base",
    the install folder's name in front of the module. The module starts at the engine's package;
    torch's own frames there are machinery, never the component."""
    trial = DATA / "gpu/h100-2026-12-07f/runs/vllm-usermistakes8/runs/20261207-220009-vllm-m8b/trials"
    o = json.loads((trial / "02-search-8fa00d59/outcome.json").read_text())
    hint = unknown_hint(o["root_exception"], o["frames"], {"--renderer-num-workers": "0"})
    assert "failed in vllm.renderers.base (" in hint and "vsite" not in hint, hint
    assert "touch vllm.renderers.base: --renderer-num-workers 0" in hint, hint
    frames = ["/tmp/ssite/sglang/srt/mem_cache/pool.py:alloc", "/tmp/ssite/torch/cuda/memory.py:empty"]
    assert "failed in sglang.srt.mem_cache.pool " in unknown_hint("E: x", frames, {})
    venv = ["/opt/vllm/venv/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py:init_device"]
    assert "failed in vllm.v1.worker.gpu_worker " in unknown_hint("E: x", venv, {})


REAL_RUNS = sorted(p.parent for p in (DATA / "gpu").rglob("findings.json"))


@pytest.mark.parametrize("run_dir", REAL_RUNS[::4], ids=lambda p: p.name)
def test_reports_of_real_runs_send_no_user_to_bringups_files(run_dir: Path) -> None:
    """Real H200 runs (vLLM, SGLang, transformers serve): FINDINGS.md and report.html as rendered now."""
    result = load_result(run_dir)
    md = render_markdown(result, load_tunes(run_dir))
    html = render_html(run_dir, result, load_tunes(run_dir))
    assert len(REAL_RUNS) >= 20
    assert [m.group(0) for m in OWN_FILE.finditer(md.replace(str(run_dir), ""))] == []
    assert [m.group(0) for m in OWN_FILE.finditer(html.replace(str(run_dir), ""))] == []
