"""vLLM's dry run: the child (vllm_child.py) run by the engine's interpreter, and what it is asked.

The child mocks vLLM's CUDA platform from the facts and runs vLLM's own parser, config
validation and attention selector (see its docstring). This adapter only names the script and
turns a candidate into its request: the flags as launched (without host, port and the model,
which the request carries), the candidate's environment, and the facts.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from bringup.core.candidate import Candidate

CHILD = Path(__file__).with_name("vllm_child.py")


class VllmDryRun:
    display = "vLLM"

    def child_argv(self, python: str, device: str) -> list[str]:
        return [python, "-u", str(CHILD), device]

    def request(self, cand: Candidate, facts: dict[str, Any]) -> dict[str, Any]:
        return {"argv": cand.argv_flags(), "env": dict(cand.env_dict), "model": cand.model, "facts": facts}

    def importable(self, python: str) -> str | None:
        try:
            r = subprocess.run([python, "-c", "import vllm"], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"cannot run {python}: {e}"
        if r.returncode == 0:
            return None
        last = (r.stderr.strip().splitlines() or ["import failed"])[-1]
        return f"vllm is not installed for {python} ({last[:200]})"
