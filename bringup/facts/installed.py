"""The installed version of a distribution in another Python environment (the engine's own).

Asked through that interpreter, not imported here: an engine's environment is often not
bringup's, and importing an engine to read its version is slow and may fail without a GPU.
"""

from __future__ import annotations

import subprocess


def distribution_version(python: str, distributions: list[str]) -> str | None:
    """The version of the first of `distributions` installed for `python`, or None."""
    code = (
        "import importlib.metadata as m\n"
        f"for d in {distributions!r}:\n"
        "    try:\n        print(m.version(d)); break\n"
        "    except m.PackageNotFoundError: pass\n"
    )
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    v = out.stdout.strip().splitlines()
    return v[0] if v else None
