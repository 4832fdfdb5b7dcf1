"""The tests an engine's source made on its way to the line it raised at (bringup/observe/guards.py),
read from a file laid out as SGLang 0.5.16's check_server_args is (server_args.py:7639-7646)."""

from __future__ import annotations

from pathlib import Path

from bringup.observe.guards import guard_names, names_tested_before, raise_site
from bringup.observe.links import Setting, links

_SOURCE = """\
class ServerArgs:
    def check_server_args(self):
        if self.page_size > 1:
            assert self.chunked_prefill_size % self.page_size == 0, "divisible by page_size"

        # Check pdmux
        if self.enable_pdmux:
            assert (
                self.pp_size == 1
            ), "PD-Multiplexing is only supported with pipeline parallelism disabled (pp_size=1)."
            assert (
                self.chunked_prefill_size == -1
            ), "PD-Multiplexing is not compatible with chunked prefill."
        if self.enable_lora:
            pass
        else:
            raise ValueError("LoRA paths need --enable-lora")
        while self.retries:
            raise RuntimeError(f"retry {self.retries}")
"""


def _engine(tmp_path: Path) -> Path:
    p = tmp_path / "site" / "sglang" / "srt" / "server_args.py"
    p.parent.mkdir(parents=True)
    p.write_text(_SOURCE)
    return p


def _line(text: str) -> int:
    return next(i for i, ln in enumerate(_SOURCE.splitlines(), 1) if text in ln)


def test_the_if_around_an_assert_names_the_switch_that_made_the_check_run(tmp_path) -> None:
    p = _engine(tmp_path)
    names = names_tested_before(str(p), _line("not compatible with chunked prefill"))
    assert {"enable_pdmux", "chunked_prefill_size"} <= names
    assert "page_size" not in names and "pp_size" not in names  # tests of other statements


def test_an_else_branch_did_not_pass_its_test_and_a_while_did(tmp_path) -> None:
    p = _engine(tmp_path)
    assert "enable_lora" not in names_tested_before(str(p), _line("LoRA paths need"))
    assert "retries" in names_tested_before(str(p), _line("retry {self.retries}"))


def test_the_root_exceptions_own_description_gives_the_site(tmp_path) -> None:
    p = _engine(tmp_path)
    line = _line("not compatible with chunked prefill")
    root = f"AssertionError: PD-Multiplexing is not compatible with chunked prefill. in check_server_args ({p}:{line})"
    assert raise_site(root) == (str(p), line)
    assert "enable_pdmux" in guard_names(root, "sglang")
    assert guard_names(root, "vllm") == set()  # not that engine's code


def test_a_librarys_own_tests_are_not_read(tmp_path) -> None:
    """torch's ``if dtype is None:`` reads its own variable, named like a setting by chance."""
    p = tmp_path / "site" / "torch" / "cuda" / "memory.py"
    p.parent.mkdir(parents=True)
    p.write_text(
        "def alloc(size, dtype):\n    if dtype is None:\n        raise RuntimeError('CUDA out of memory')\n"
    )
    root = f"OutOfMemoryError: CUDA out of memory in alloc ({p}:3)"
    assert "dtype" in names_tested_before(str(p), 3)
    assert guard_names(root, "sglang") == set()


def test_no_file_no_source_nothing_tested(tmp_path) -> None:
    """A log read on another machine, a replayed scenario: the path is not here."""
    assert guard_names(f"ValueError: x in f ({tmp_path}/sglang/gone.py:3)", "sglang") == set()
    assert guard_names("ValueError: no place", "sglang") == set()
    assert raise_site("ValueError: x in f (vllm/config.py:3)") is None  # relative: not this machine's
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    assert names_tested_before(str(broken), 1) == set()


def test_a_tested_field_links_its_setting(tmp_path) -> None:
    """SGLang's argument check refused PD-Multiplexing (real 0.5.16 on an H100,
    tests/data/gpu/h100-2026-12-07e): the user's switch under the test is linked as tested; the
    argument check links the user's other settings as before, by its place only."""
    p = _engine(tmp_path)
    root = (
        "AssertionError: PD-Multiplexing is not compatible with chunked prefill. in check_server_args "
        f"({p}:{_line('not compatible with chunked prefill')})"
    )
    settings = [
        Setting("--enable-pdmux", "true", "enable_pdmux", user=True),
        Setting("--warmups", "voice_chat", "warmups", user=True),
        Setting(
            "env:SGLANG_EMBEDDINGS_SPARSE_HEAD",
            "sparse_linear.pt",
            "SGLANG_EMBEDDINGS_SPARSE_HEAD",
            user=True,
        ),
    ]
    frames = [f"{p}:check_server_args"]
    said = ["AssertionError: PD-Multiplexing is not compatible with chunked prefill."]
    got = {
        (link.name, link.kind)
        for link in links(said, frames, settings, "sglang", (), guard_names(root, "sglang"))
    }
    assert ("--enable-pdmux", "guard") in got
    assert ("--warmups", "guard") not in got and ("--warmups", "config") in got
    assert ("env:SGLANG_EMBEDDINGS_SPARSE_HEAD", "guard") not in got
