"""What to tell the user about a failure no signature or root-cause rule knows.

The hint used to tell the *user* to add a signature to bringup's own data folder: a step only
bringup's maintainers can take. A user needs what failed, where (which component of the engine),
and which of their own settings touch it; what bringup's maintainers should do goes to the debug log
(logger ``bringup.observe.unknown``), with the frames a new signature would start from (issue 39).

Where a failure happened is read from the root exception's frames. For now the component is the
module of the innermost frame in the engine's own code (`ModuleNames`); which settings touch it,
those whose name or value shares a word with the failing frames' modules. A better map of the
engine's components to the settings that configure them (issue 36) plugs in through one seam: the
`components` argument of `unknown_hint`, any object with the two methods of `ComponentMap`.
The settings are the launch's own (a trial's candidate, secrets out) or the log's dump of them
(`explain`), as `classify` is given them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Protocol

from bringup.observe.tracebacks import package_relative

log = logging.getLogger(__name__)


class ComponentMap(Protocol):
    """The seam for a map from an engine's components (module paths) to the settings that configure
    them: which component the failing frames are in, and which of the user's settings touch it."""

    def component(self, frames: Sequence[str]) -> str | None:
        """The component the failure happened in (frames innermost last, "pkg/mod.py:func")."""
        ...

    def settings_touching(self, frames: Sequence[str], settings: Mapping[str, str]) -> list[str]:
        """Of `settings` (flag or ``env:NAME`` to value), the names of those that touch it."""
        ...


# Frames below the engine's own code: the Python runtime, and the libraries every engine calls into.
# A failure inside them happened in the engine's component that called them.
_BELOW = re.compile(
    r"^(<[^>]+>|torch|triton|numpy|json|asyncio|concurrent|multiprocessing|threading|typing)\b"
)
_STDLIB = re.compile(r"(^|/)(usr/)?lib/python3\.\d+/(?!site-packages|dist-packages)")
# Words of module paths that name no component (the package layers every engine has).
_GENERIC = frozenset(
    "vllm sglang transformers srt v1 layers layer utils util model models executor init main core "
    "engine engines worker workers entrypoints openai python module modules base runner runners config "
    "configs server args serving manager managers common ops kernels kernel impl forward load loader "
    "cli api process the and for with none true false auto torch cuda gpu gpus distributed device "
    "memory max min num size".split()
)


# Top packages whose folder name starts a module path in a frame of an install folder no prefix
# names (`pip install --target /tmp/vsite`, as the GPU runs install): the engines, and the
# libraries _BELOW treats as machinery.
_TOPS = frozenset("vllm sglang transformers torch triton numpy".split())


def _module(frame: str) -> str:
    """'…/site/sglang/srt/layers/attention/fa.py:forward' -> 'sglang.srt.layers.attention.fa'.
    An absolute path starts at its first known top package ('/tmp/vsite/vllm/renderers/base.py'
    -> 'vllm.renderers.base', not 'vsite.vllm.renderers.base'), else keeps its last four parts."""
    # after the site folder, as a traceback's frames read it (a folder named like a package further
    # up, /opt/vllm/venv/..., is not it when a site folder follows)
    path = package_relative(frame.rsplit(":", 1)[0]).removesuffix(".py")
    parts = [p for p in path.split("/") if p]
    if path.startswith("/"):  # an install folder no site folder marks: at its first known top package
        top = next((i for i, p in enumerate(parts) if p in _TOPS), None)
        parts = parts[top:] if top is not None else parts[-4:]
    return ".".join(parts)


def _words(text: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9]+", text.lower()) if len(w) >= 3 and w not in _GENERIC}


class ModuleNames:
    """The component is the innermost frame's module in the engine's own code; a setting touches it
    when its name or value shares a word with a failing frame's module path or function."""

    def _own(self, frames: Sequence[str]) -> list[str]:
        return [f for f in frames if not _BELOW.match(_module(f)) and not _STDLIB.search(f)]

    def component(self, frames: Sequence[str]) -> str | None:
        own = self._own(frames)
        return _module(own[-1]) if own else (_module(frames[-1]) if frames else None)

    def settings_touching(self, frames: Sequence[str], settings: Mapping[str, str]) -> list[str]:
        where = set().union(*(_words(f) for f in self._own(frames)[-4:])) if frames else set()
        return [name for name, value in settings.items() if _words(f"{name} {value}") & where]


BY_MODULE = ModuleNames()


def _shown(name: str, value: str) -> str:
    """A setting as the user wrote it: `--flag value`, `--switch`, `NAME=value`."""
    if name.startswith("env:"):
        return f"{name[4:]}={value}"
    return name if value in ("", "True", "true") else f"{name} {value}"


def unknown_hint(
    root_exception: str | None,
    frames: Sequence[str],
    settings: Mapping[str, str],
    components: ComponentMap = BY_MODULE,
) -> str:
    """The hint for a failure no signature or rule knows: what failed, in which component, which of
    the user's own settings (non-default flags and variables, as given) touch it, what to try."""
    comp = components.component(frames)
    where = f" in {comp}" if comp else ""
    what = f" ({root_exception})" if root_exception else " without a Python exception"
    head = (
        f"The engine failed{where}{what}, a failure bringup does not recognise; the evidence starts "
        "with its first error line."
    )
    touching = components.settings_touching(frames, settings) if comp else []
    # No advice word ("try", "use", "set", ...) beside a setting: the search reads a hint's advice as
    # the engine's own (search/evidence.py remedies), and these settings are suspects, not remedies.
    if touching:
        listed = ", ".join(_shown(n, settings[n]) for n in touching)
        next_ = (
            f" Your settings that touch {comp}: {listed}. A launch without them, or with other values, "
            "tells whether they cause it."
        )
    elif settings:
        # only names and values are read here: a setting the failing code reads without naming it
        # (SGLang 0.5.16's loader reads SGLANG_EMBEDDINGS_SPARSE_HEAD) is the search's to weigh
        next_ = (
            f" No name or value of your settings names {comp or 'it'} (the search also weighs those its "
            "code reads): the engine's defaults for that component, and the engine's issues on the first "
            "evidence line, are where to look next."
        )
    else:
        next_ = " The engine's issues on the first evidence line, or another engine version, are where to look next."
    log.debug(
        "no signature or root-cause rule knows %s (component %s, frames %s): a signature in "
        "bringup/data/signatures/ or a rule in bringup/data/rootcause.yaml would name it",
        root_exception,
        comp,
        list(frames),
    )
    return head + next_
