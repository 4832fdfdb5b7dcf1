"""SGLang's dry run: ServerArgs and its checks in a child (sglang_child.py), the device mocked."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from bringup.core.candidate import Candidate

CHILD = Path(__file__).with_name("sglang_child.py")


class SglangDryRun:
    display = "SGLang"

    def child_argv(self, python: str, device: str) -> list[str]:
        return [python, "-u", str(CHILD), device]

    def request(self, cand: Candidate, facts: dict[str, Any]) -> dict[str, Any]:
        return {"argv": cand.argv_flags(), "env": dict(cand.env_dict), "model": cand.model, "facts": facts}

    def importable(self, python: str) -> str | None:
        try:
            r = subprocess.run(
                [python, "-c", "import importlib.util as u, sys; sys.exit(u.find_spec('sglang') is None)"],
                capture_output=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"cannot run {python}: {e}"
        return None if r.returncode == 0 else f"sglang not installed for {python}"
