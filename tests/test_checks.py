"""The complexity ceiling (scripts/complexity.py) on a synthetic package: it fails on a new
function above 10 and on a listed one that got more complex, passes on simple code, and says
when the ceiling can go down."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "complexity.py"

SIMPLE = """
def simple(x):
    if x:
        return 1
    return 2
"""


def _branchy(name: str, branches: int, indent: str = "") -> str:
    """A function of McCabe complexity 1 + branches (one `if` each)."""
    body = "".join(f"{indent}    if x == {i}:\n{indent}        return {i}\n" for i in range(branches))
    return f"{indent}def {name}(x):\n{body}{indent}    return -1\n"


def _check(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root), *args, "pkg"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _package(tmp_path: Path, source: str) -> Path:
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / "mod.py").write_text(source)
    return tmp_path


def test_simple_code_passes_with_an_empty_ceiling(tmp_path: Path) -> None:
    root = _package(tmp_path, SIMPLE + "\n\n" + _branchy("ten", 9))  # complexity 10: allowed
    (root / "complexity-ceiling.txt").write_text("# nothing is above 10\n")
    r = _check(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 functions above 10" in r.stdout


def test_a_new_function_above_ten_fails(tmp_path: Path) -> None:
    root = _package(tmp_path, SIMPLE + "\n\n" + _branchy("tangled", 12))  # complexity 13
    (root / "complexity-ceiling.txt").write_text("")
    r = _check(root)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "pkg/mod.py::tangled: complexity 13 > 10" in r.stdout
    assert "simple" not in r.stdout


def test_a_noqa_comment_does_not_hide_a_function(tmp_path: Path) -> None:
    src = _branchy("hidden", 12).replace("(x):", "(x):  # noqa: C901", 1)
    root = _package(tmp_path, src)
    (root / "complexity-ceiling.txt").write_text("")
    r = _check(root)
    assert r.returncode == 1 and "pkg/mod.py::hidden" in r.stdout, r.stdout + r.stderr


@pytest.mark.slow
def test_a_listed_function_may_not_grow_and_may_shrink(tmp_path: Path) -> None:
    ceiling = tmp_path / "complexity-ceiling.txt"
    ceiling.write_text("pkg/mod.py::Box.method 13\n")
    cls = "class Box:\n" + _branchy("method", 12, indent="    ")  # 13: at its ceiling
    r = _check(_package(tmp_path, cls))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "can go down" not in r.stdout

    r = _check(_package(tmp_path, "class Box:\n" + _branchy("method", 13, indent="    ")))  # 14
    assert r.returncode == 1
    assert "pkg/mod.py::Box.method: complexity 14, more than its ceiling 13" in r.stdout

    r = _check(_package(tmp_path, "class Box:\n" + _branchy("method", 11, indent="    ")))  # 12
    assert r.returncode == 0, r.stdout + r.stderr
    assert "can go down" in r.stdout and "pkg/mod.py::Box.method: 13 -> 12" in r.stdout
    assert "--update" in r.stdout


def test_update_lowers_the_ceiling_and_refuses_to_raise_it(tmp_path: Path) -> None:
    ceiling = tmp_path / "complexity-ceiling.txt"
    ceiling.write_text("pkg/mod.py::f 15\npkg/mod.py::gone 20\n")
    root = _package(tmp_path, _branchy("f", 11))  # 12; `gone` was deleted
    r = _check(root, "--update")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [ln for ln in ceiling.read_text().splitlines() if not ln.startswith("#")]
    assert lines == ["pkg/mod.py::f 12"]

    _package(tmp_path, _branchy("f", 11) + "\n\n" + _branchy("g", 11))  # a new one above 10
    r = _check(root, "--update")
    assert r.returncode == 1
    assert [ln for ln in ceiling.read_text().splitlines() if not ln.startswith("#")] == ["pkg/mod.py::f 12"]


def test_a_function_moved_to_another_file_keeps_its_ceiling(tmp_path: Path) -> None:
    (tmp_path / "complexity-ceiling.txt").write_text("pkg/old.py::f 12\n")
    root = _package(tmp_path, _branchy("f", 11))  # now in pkg/mod.py, still 12
    r = _check(root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "moved from pkg/old.py::f" in r.stdout
