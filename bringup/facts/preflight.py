"""Checks before any launch: a model folder that cannot load is a clear error, not a trial.

Launching an engine on an empty folder or a corrupt checkpoint costs a full start-up and ends in
class `unknown` with a ulimit warning as evidence (issue 14). What can be read cheaply is read
here: config.json (present, UTF-8, a JSON object), the shard index (valid, every listed shard
present), and every safetensors header (length, UTF-8 JSON, offsets within the file). Weights
themselves are not read; a folder of header-only files (for `--load-format dummy`) passes.
A runs folder bringup cannot write is refused here too, before anything starts.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bringup.guard import limits
from bringup.guard.limits import InputError


class PreflightError(ValueError):
    """What is wrong, where, and what to do: shown as a usage error (exit 2)."""


def read_json_object(path: Path, what: str) -> dict:
    """A JSON object from a file, or PreflightError naming the file and the fault."""
    try:
        return limits.read_json_object(path, what)
    except InputError as e:
        raise PreflightError(str(e)) from None


def model_problems(model_dir: Path) -> list[str]:
    """Every reason this folder cannot load (empty list: nothing found wrong)."""
    from bringup.facts.modelinfo import SafetensorsError, check_safetensors_file

    d = Path(model_dir)
    if not d.is_dir():
        return [] if d.suffix == ".gguf" else [f"{d}: not a folder (give the model folder, with config.json)"]
    problems = []
    if (d / "config.json").exists():
        try:
            read_json_object(d / "config.json", "model config")
        except PreflightError as e:
            problems.append(str(e))
    elif not (d / "params.json").exists():
        listing = sorted(p.name for p in d.iterdir())[:8]
        problems.append(
            f"{d}: no config.json (or params.json); the folder holds "
            f"{', '.join(listing) if listing else 'nothing'}. Is the download complete?"
        )
    index = d / "model.safetensors.index.json"
    shards: list[Path] = []
    if index.exists():
        try:
            wm = read_json_object(index, "shard index").get("weight_map", {})
            names = sorted({str(v) for v in wm.values()}) if isinstance(wm, dict) else []
            missing = [n for n in names if not (d / n).is_file()]
            if missing:
                problems.append(
                    f"{index}: {len(missing)} of {len(names)} shard(s) listed but missing: "
                    f"{', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}"
                )
            shards = [d / n for n in names if (d / n).is_file()]
        except PreflightError as e:
            problems.append(str(e))
    for f in sorted(set(shards) | set(d.glob("*.safetensors"))):
        try:
            check_safetensors_file(f)
        except (SafetensorsError, OSError) as e:
            problems.append(f"{e} (a corrupt or partial download?)")
    return problems


def check_model(model_dir: Path) -> None:
    problems = model_problems(model_dir)
    if problems:
        raise PreflightError("the model cannot load, so nothing was launched:\n  " + "\n  ".join(problems))


def check_writable(folder: Path) -> None:
    """The runs folder takes new files (a read-only one is refused before any launch)."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".bringup-write-check-", dir=folder)
        os.close(fd)
        os.unlink(name)
    except OSError as e:
        raise PreflightError(
            f"runs folder {folder} is not writable ({e.strerror or e}); nothing was launched. "
            "Give a writable --runs-dir (bringup report still reads a read-only one)."
        ) from None
