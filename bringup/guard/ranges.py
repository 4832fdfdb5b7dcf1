"""Every number a user gives bringup, with the range it must lie in: one table, read where it enters.

A number enters bringup through a command-line option (bringup/cli/: Typer), a settings object a
library user builds (`RunSettings`, `TuneSettings`, `BenchConfig`: Pydantic) or the probes'
configuration (`ProbeConfig`). Each kind of number is one `Range` here, and each door asks it:
`Range.option()` for a Typer option (a callback: finite, in range, one line naming the option
and the bound, exit 2), `Range.field()` for a Pydantic field, `Range.problem()` for the rest.
Bounds are generous (what a real machine could want) and exist so that no number starts work
without end or a traceback: `trial --batch 100000000` ran for minutes and grew, `bench
--sweep-rate -1` was a numpy traceback, `--sweep-concurrency 0` ran nothing without a word,
`tune --sweep -1` recorded a concurrency of -1, `--seed -1` ended in numpy's error (issue 40).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def spelled(v: float) -> str:
    """A number as a person writes it back: 100000000, not 1e+08; 0.9, not 0.90000000000000002."""
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e16):
        return str(int(v))
    return repr(float(v))


@dataclass(frozen=True)
class Range:
    low: float | None = None
    high: float | None = None
    low_open: bool = False  # above `low`, not at it (a duration of 0 s is no duration)
    integer: bool = True
    inf_ok: bool = False  # a rate may be 'inf' (every request at once)
    why: str = ""  # what the bound protects, said when a number is refused

    def problem(self, value: Any) -> str | None:
        """Why `value` is not a number of this kind, or None."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{value!r} is not a number"
        if isinstance(value, float) and math.isnan(value):
            return f"{value} is not a finite number"
        if isinstance(value, float) and math.isinf(value) and not (self.inf_ok and value > 0):
            return f"{value} is not a finite number"
        v = spelled(value)
        if self.integer and isinstance(value, float) and not value.is_integer():
            return f"{v} is not a whole number"
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return f"{v} must be {'above' if self.low_open else 'at least'} {spelled(self.low)}"
        if self.high is not None and value > self.high and not (self.inf_ok and math.isinf(value)):
            return f"{v} must be at most {spelled(self.high)}" + (f" ({self.why})" if self.why else "")
        return None

    def check(self, value: Any, name: str) -> Any:
        """`value` unchanged, or a ValueError that names `name` and the bound."""
        if (bad := self.problem(value)) is not None:
            raise ValueError(f"{name}: {bad}")
        return value

    def _cli(self, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, list):  # a repeatable option
            return [self._cli(v) for v in value]
        if (bad := self.problem(value)) is not None:
            import typer

            raise typer.BadParameter(bad)
        return value

    def option(self) -> dict[str, Any]:
        """Keyword arguments for a `typer.Option` of this kind (a callback that refuses, exit 2)."""
        return {"callback": self._cli}

    def _cli_list(self, text: str | None) -> str | None:
        if text:  # '' is "none" where an option allows it (tune --sweep '')
            try:
                number_list(text, self, "")
            except ValueError as e:
                import typer

                raise typer.BadParameter(str(e).removeprefix(": ")) from None
        return text

    def list_option(self) -> dict[str, Any]:
        """Keyword arguments for a `typer.Option` that takes comma-separated numbers of this kind."""
        return {"callback": self._cli_list}

    def field(self, default: Any = ..., **kw: Any) -> Any:
        """A Pydantic `Field` of this kind (for settings a library user builds)."""
        from pydantic import Field

        bounds: dict[str, Any] = {}
        if self.low is not None:
            bounds["gt" if self.low_open else "ge"] = self.low
        if self.high is not None and not self.inf_ok:
            bounds["le"] = self.high
        if not self.integer:
            bounds["allow_inf_nan"] = self.inf_ok
        return Field(default, **bounds, **kw)


def number_list(text: str, kind: Range, name: str, integer: bool | None = None) -> list[Any]:
    """'1,2,4' (or '1,inf' for rates) as numbers of `kind`; a ValueError naming `name` and the item."""
    whole = kind.integer if integer is None else integer
    out: list[Any] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            v: Any = math.inf if part.lower() in ("inf", "infinity") and kind.inf_ok else float(part)
        except ValueError:
            raise ValueError(f"{name}: {part!r} is not a number") from None
        v = kind.check(v, name)
        out.append(int(v) if whole and not math.isinf(v) else v)
    if not out:
        raise ValueError(f"{name}: {text!r} holds no number")
    return out


_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")


def usage_problem(usage: Mapping[str, Any], max_tokens: int | None = None) -> str | None:
    """Token counts a server reported that cannot be (`usage` of an OpenAI answer): not a whole
    number, negative, or more completion tokens than `max_tokens` asked. The probes and the load
    generator both ask it: `trial` caught such a server, and `bench` printed negative throughput
    from the same one (issue 40)."""
    for key in _COUNTS:
        v = usage.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not float(v).is_integer():
            return f"usage.{key} is {v!r}, not a whole number"
        if v < 0:
            return f"usage.{key} is {spelled(v)}, below 0"
    done = usage.get("completion_tokens")
    if max_tokens is not None and isinstance(done, (int, float)) and done > max_tokens:
        return f"usage.completion_tokens is {spelled(done)}, more than the {max_tokens} asked"
    return None


def check_fields(obj: object, kinds: dict[str, Range]) -> None:
    """Each named attribute of `obj` in its kind's range (a dataclass's `__post_init__`; None is
    "not given"); a ValueError naming the first that is not."""
    for name, kind in kinds.items():
        if (value := getattr(obj, name)) is not None:
            kind.check(value, name)


DAY = 86_400.0

# -- time -------------------------------------------------------------------------------------------
SECONDS = Range(0, 30 * DAY, low_open=True, integer=False, why="30 days")
HOURS = Range(0, 24 * 365, low_open=True, integer=False, why="a year")
TIME_SCALE = Range(0, 1000, low_open=True, integer=False, why="real seconds per simulated second")

# -- the machine ------------------------------------------------------------------------------------
PORT = Range(1, 65535)
FRACTION = Range(0, 1, low_open=True, integer=False)
GPUS = Range(1, 4096, why="GPUs one machine or cluster could have")
GIB = Range(0, 1 << 20, low_open=True, integer=False, why="a PiB")
COMPUTE_CAPABILITY = Range(0, 100, low_open=True, integer=False)
SIZE = Range(1, 1 << 30, why="a size the engine takes in tokens or requests")

# -- budgets ----------------------------------------------------------------------------------------
LAUNCHES = Range(1, 10_000, why="launches one search can spend")
MORE_LAUNCHES = Range(0, 10_000, why="launches one search can spend")
REPEATS = Range(0, 100, why="interleaved rounds of repeats")
FINALISTS = Range(1, 32, why="finalists measured beside the baseline")
ALPHA = Range(0.0001, 0.5, integer=False)
PARALLEL = Range(1, 1024, why="trials at once")

# -- the probes -------------------------------------------------------------------------------------
BATCH = Range(2, 1024, why="each request of the batch probe is a thread and a connection")
LONG_TOKENS = Range(200, 1 << 20, why="tokens one request can decode")
SHORT_TOKENS = Range(1, 4096)
DECODE_TOKENS = Range(1, 1 << 20, why="tokens one request can decode")
REFERENCE_TOKENS = Range(1, 256)

# -- the load -------------------------------------------------------------------------------------
CONCURRENCY = Range(1, 100_000, why="one connection per request in flight")
REQUESTS = Range(1, 100_000_000, why="requests one benchmark point sends")
TUNE_REQUESTS = Range(4, 100_000_000, why="requests one benchmark point sends")
WARMUP = Range(0, 100_000)
TOKENS = Range(1, 1 << 24, why="16M tokens, beyond any model's context")
PREFIX_TOKENS = Range(0, 1 << 24, why="16M tokens, beyond any model's context")
RATE = Range(0, 1e9, low_open=True, integer=False, inf_ok=True, why="requests per second")
BURSTINESS = Range(0, 1000, low_open=True, integer=False)
SPREAD = Range(0, 0.99, integer=False)
ABORT_FACTOR = Range(1, 1e6, low_open=True, integer=False)
SEED = Range(0, 2**32 - 1, why="numpy's seeds are 32-bit")
TOP = Range(1, 100_000)

# -- tiny test models -------------------------------------------------------------------------------
LAYERS = Range(1, 1024)
HEADS = Range(1, 1024)
KV_HEADS = Range(0, 1024)
HEAD_DIM = Range(1, 4096)
VOCAB = Range(300, 1 << 20, why="a vocabulary of a million tokens")
SHARD_GIB = Range(0.001, 1024, integer=False)
