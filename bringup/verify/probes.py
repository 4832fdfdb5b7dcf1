"""The probe ladder: cheap to expensive checks that a ready server answers, and answers right.

Self-consistency probes (determinism, batch invariance, finite logprobs) need no reference and
work on random weights; known-answer probes run when the model or scenario has answers. A probe
that gets HTTP 500 or a dropped connection means the server broke; probes that disagree while
the server stays up mean wrong output.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

from bringup.guard import ranges
from bringup.guard.bounded import CapHit, iter_lines
from bringup.observe.outcome import ProbeResult
from bringup.verify.probe_http import (
    BATCH_PROMPTS,
    REFERENCE_PROMPT,
    TIE_LOGPROBS,
    Disagree,
    ServerBroke,
    fetch,
    finite_logprobs,
    near_tie_divergence,
    parting,
    show_tokens,
    tokens_of,
    top_of,
)
from bringup.verify.probe_http import post_json as _post

__all__ = [
    "BATCH_PROMPTS",
    "REFERENCE_PROMPT",
    "Disagree",
    "KnownAnswer",
    "ProbeConfig",
    "ProbeRunner",
    "ServerBroke",
    "common_prefix",
    "near_tie_divergence",
]
from bringup.guard.secrets import auth_headers
from bringup.verify.reference import common_prefix


@dataclass
class KnownAnswer:
    prompt: str
    expected: str


LONG_DECODE_PROMPT = "Once upon a time"
LONG_DECODE_PROMPT_TOKENS = 8  # its tokens on any tokenizer, a BOS and a template's few included


def long_decode_length(asked: int, most: int | None) -> tuple[int | None, str]:
    """The long decode's length on a server whose maximum length is `most` (/v1/models
    max_model_len): as asked, or as long as that allows after the prompt, with a note for the
    probe's detail (None: no room at all, and why). Before, a length beyond it got the engine's
    HTTP 400, read as wrong output that blamed the kernels (issue 40). The oracle's replays ask
    the same function."""
    room = most - LONG_DECODE_PROMPT_TOKENS if most else None
    if room is None or asked <= room:
        return asked, ""
    if room < 1:
        return None, f"the server's maximum length ({most} tokens) leaves no room for a long decode"
    return room, (
        f" (asked {asked}: the server's maximum length is {most} tokens, so {room} after the prompt; "
        "give --long-tokens at most that, or raise the engine's maximum length)"
    )


@dataclass
class ProbeConfig:
    batch_size: int = 8
    short_tokens: int = 16
    long_tokens: int = 256
    request_timeout: float = 120.0
    answers: list[KnownAnswer] = field(default_factory=list)
    model_name: str | None = None  # None: the first id that /v1/models lists
    # What the engine's API offers (engines.yaml `probes:`): transformers serve lists only the HF
    # cache in /v1/models, rejects `ignore_eos` (HTTP 422) and ignores `logprobs`.
    list_models: bool = True
    ignore_eos: bool = True
    logprobs: bool = True
    # The model's own greedy output (bringup.verify.reference.Reference) and the precision the launch
    # serves in (tolerances.yaml); None: the reference-differential probe is not on the ladder.
    reference: Any = None
    reference_precision: str = "auto"
    api_key: str | None = field(default=None, repr=False)  # sent as a Bearer token; never stored
    # Probes as users use the server (bringup/verify/probes_user.py, docs/probes.md): sampling, a long
    # prompt, the full batch. `user_probes` False leaves them off the ladder.
    user_probes: bool = True
    top_k: bool = True  # the engine takes `top_k` (engines.yaml `probes:`)
    seeded: bool = True  # the engine promises the same tokens for the same `seed` (best effort)
    token_ids: bool = True  # the engine takes (or ignores) `return_token_ids` (engines.yaml `probes:`)
    sample_tokens: int = 24
    sample_temperature: float = 0.8
    sample_top_p: float = 0.9
    sample_top_k: int = 5
    sample_seed: int = 1234
    stall_factor: float = 20.0  # a gap this many times the greedy request's first-token time is a stall
    stall_floor_s: float = 10.0  # ... but never under this (a loaded machine's scheduling noise)
    long_prompt_fraction: float = 0.5  # of the effective maximum length
    max_batch: int | None = None  # the launch's maximum batch (engines.yaml `probes: batch_flags`)
    concurrency_cap: int = 32  # the concurrency probe sends min(max_batch, this) requests

    def __post_init__(self) -> None:
        # Every request of the batch probe is a thread and a connection: `--batch 100000000` ran
        # for minutes and grew (issue 40). The ranges are bringup/guard/ranges.py's.
        ranges.check_fields(
            self,
            {
                "batch_size": ranges.BATCH,
                "short_tokens": ranges.SHORT_TOKENS,
                "long_tokens": ranges.DECODE_TOKENS,
                "request_timeout": ranges.SECONDS,
                "concurrency_cap": ranges.BATCH,
            },
        )


def _sse_chunks(r: httpx.Response) -> Iterator[dict]:
    """The JSON objects of a streamed answer, up to [DONE], its lines read with caps."""
    for raw in iter_lines(r.iter_bytes(), "POST /v1/completions (stream)"):
        line = raw.decode("utf-8", errors="replace")
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        try:
            chunk = json.loads(payload)
        except ValueError as e:
            raise Disagree(f"stream chunk is not JSON: {payload[:120]}") from e
        if not isinstance(chunk, dict):
            raise Disagree(f"stream chunk is not a JSON object: {payload[:120]}")
        yield chunk


def _head(r: httpx.Response, n: int = 300) -> bytes:
    """The first bytes of an error answer (never the whole of an endless one)."""
    got = b""
    for c in r.iter_bytes():
        got += c
        if len(got) >= n:
            break
    return got[:n]


# The user's probes (bringup/verify/probes_user.py): sampling, the reference's draws, a long prompt,
# the full batch. Last, the costliest.
USER_STEPS = ("sampled", "sampled-reference", "long-prompt", "concurrency")


def ladder_steps(cfg: ProbeConfig) -> list[str]:
    """The ladder's probes, in order, for this configuration: the one list that `ProbeRunner`
    runs and the scenario oracle replays (bringup/oracle/), so that a probe added here and not
    replayed there fails the oracle loudly instead of drifting from it."""
    steps = ["health", "completion", "chat"]
    if cfg.answers:
        steps.append("known-answers")
    if cfg.reference is not None:
        steps.append("reference")
    steps += ["long-decode", "batch", "batch-invariance"]
    if cfg.user_probes:
        steps += USER_STEPS
    return steps


class ProbeRunner:
    """Runs the ladder against base_url; `phase` tells the trial where a death would strike."""

    def __init__(self, base_url: str, config: ProbeConfig, stop: threading.Event | None = None):
        self.base_url = base_url.rstrip("/")
        self.cfg = config
        self.stop = stop or threading.Event()
        self.phase = "ready"
        self.results: list[ProbeResult] = []
        self.model = config.model_name
        self._reference: Any = None  # greedy output of the reference prompt alone (the completion probe)
        self._batch_reference: Any = None  # the same prompt inside a batch (the batch probe)
        self.alone_top: list = []  # the greedy output alone's top logprobs, a dict a step
        self._batch_top: list = []
        self.greedy: Any = None  # the streamed greedy request's timing (probes_user.Streamed)
        self.max_model_len: int | None = None  # what /v1/models reports
        self.tokens_per_word: float | None = None  # the completion probe's prompt, from its usage
        # The kernel compilers working under the server since the last call (the trial's JitWatch):
        # a request that waits on a JIT build is slow, not stalled (probes_user.probe_sampled).
        self.compiling: Callable[[], list[str]] | None = None

    @property
    def tie_gap(self) -> float:
        """The precision's near-tie gap (tolerances.yaml): how far apart two tokens may be for greedy
        decoding to pick either under the launch's rounding."""
        from bringup.verify.reference import tolerance

        return tolerance(self.cfg.reference_precision).tie_gap

    @property
    def alone(self) -> Any:
        """The reference prompt's greedy output alone (after the batch-invariance probe)."""
        return self._reference

    def _completion(self, client: httpx.Client, prompt: str, max_tokens: int, **extra: Any) -> dict:
        body = {"model": self.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, **extra}
        if self.cfg.logprobs:
            body["logprobs"] = TIE_LOGPROBS  # the runner-up too: a parting at a near tie is allowed
        data = _post(client, "/v1/completions", body)
        if not data.get("choices"):
            raise Disagree(f"completion has no choices: {str(data)[:200]}")
        return data

    # -- the probes, in ladder order ----------------------------------------------------------
    def probe_health(self, client: httpx.Client) -> str:
        try:
            status, _ = fetch(client, "GET", "/health")
            m = fetch(client, "GET", "/v1/models") if self.cfg.list_models else None
        except CapHit as e:
            raise ServerBroke(str(e)) from e
        except httpx.HTTPError as e:
            raise ServerBroke(f"GET /health: {type(e).__name__}: {e}") from e
        if status != 200:
            raise ServerBroke(f"GET /health: HTTP {status}")
        if m is None:
            return f"health 200; model {self.model} (this engine's /v1/models does not list the served model)"
        if m[0] != 200:
            raise ServerBroke(f"GET /v1/models: HTTP {m[0]}")
        try:
            listed = json.loads(m[1])
            data = listed.get("data", [])
            ids = [d.get("id") for d in data]
        except (ValueError, AttributeError) as e:
            raise Disagree(f"/v1/models is not a model list: {m[1][:200]!r}") from e
        if not ids:
            raise Disagree("/v1/models lists no model")
        if self.model is None or self.model not in ids:
            self.model = ids[0]
        lens = [d.get("max_model_len") for d in data if d.get("id") == self.model]
        self.max_model_len = lens[0] if lens and isinstance(lens[0], int) else None
        return f"health 200; models: {', '.join(map(str, ids))}"

    def probe_completion(self, client: httpx.Client) -> str:
        """The first request, streamed: a death before the first token is the first request
        (prefill); after it, decode."""
        self.phase = "first-request"
        body = {
            "model": self.model,
            "prompt": REFERENCE_PROMPT,
            "max_tokens": self.cfg.short_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.cfg.logprobs:
            body["logprobs"] = TIE_LOGPROBS
        text: list[str] = []
        tokens: list[str] = []
        lps: list[float | None] = []
        usage: dict[str, Any] = {}
        from bringup.verify.probes_user import Streamed

        timing = Streamed()
        t0 = time.monotonic()
        try:
            with client.stream("POST", "/v1/completions", json=body) as r:
                if r.status_code >= 500:
                    raise ServerBroke(f"POST /v1/completions: HTTP {r.status_code}: {_head(r)!r}")
                if r.status_code >= 400:
                    raise Disagree(f"POST /v1/completions: HTTP {r.status_code}: {_head(r)!r}")
                for chunk in _sse_chunks(r):
                    if chunk.get("error"):
                        raise ServerBroke(f"error in stream: {str(chunk['error'])[:200]}")
                    usage = chunk.get("usage") or usage
                    for ch in chunk.get("choices") or []:
                        text.append(ch.get("text") or "")
                        lp = ch.get("logprobs") or {}
                        tokens += lp.get("tokens") or []
                        lps += lp.get("token_logprobs") or []
                        self.alone_top += lp.get("top_logprobs") or []
                    if tokens or any(text):
                        self.phase = "decode"
                        timing.mark(t0)
        except CapHit as e:
            raise ServerBroke(str(e)) from e
        except httpx.TimeoutException as e:
            raise ServerBroke(
                f"POST /v1/completions (stream): no answer within {client.timeout.read} s"
            ) from e
        except httpx.HTTPError as e:
            raise ServerBroke(f"POST /v1/completions (stream): {type(e).__name__}: {e}") from e
        finite_logprobs({"logprobs": {"token_logprobs": lps}})
        n = self._streamed_count(usage, tokens)
        # Without token logprobs the reference is text, and streamed text can differ from the
        # same tokens sent whole (transformers holds back a trailing partial UTF-8 character):
        # batch invariance then compares whole responses only.
        self._reference = tokens or ("".join(text) if self.cfg.logprobs else None)
        self._note_greedy(timing, usage, tokens)
        self.phase = "decode"
        return f"{n} tokens (streamed): {''.join(text)[:60]!r}"

    def _streamed_count(self, usage: dict[str, Any], tokens: list[str]) -> int:
        """The greedy request's completion tokens, 1..short_tokens; counts the server reports that
        cannot be are a disagreement (the same check as `bench`'s, bringup/guard/ranges.py)."""
        if bad := ranges.usage_problem(usage, self.cfg.short_tokens):
            raise Disagree(f"the server's token counts cannot be: {bad}")
        n = usage.get("completion_tokens") or len(tokens)
        if not n or n < 1 or n > self.cfg.short_tokens:
            raise Disagree(f"completion_tokens {n} outside 1..{self.cfg.short_tokens}")
        return int(n)

    def _note_greedy(self, timing: Any, usage: dict[str, Any], tokens: list[str]) -> None:
        """Keep the streamed greedy request's timing (the stall deadline, the rate to compare
        sampling with) and its tokens per prompt word (to size the long prompt)."""
        timing.usage, timing.tokens = usage, tokens
        self.greedy = timing
        if usage.get("prompt_tokens"):
            self.tokens_per_word = usage["prompt_tokens"] / len(REFERENCE_PROMPT.split())

    def probe_chat(self, client: httpx.Client) -> str:
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": "Say hello in one sentence."}],
            "max_tokens": self.cfg.short_tokens,
            "temperature": 0,
        }
        data = _post(client, "/v1/chat/completions", body)
        choices = data.get("choices") or []
        if not choices or "message" not in choices[0]:
            raise Disagree(f"chat completion has no message: {str(data)[:200]}")
        msg = choices[0]["message"]
        content = msg.get("content") or msg.get("reasoning_content") or ""
        if choices[0].get("finish_reason") not in ("stop", "length", None):
            raise Disagree(f"unexpected finish_reason {choices[0].get('finish_reason')!r}")
        return f"{(data.get('usage') or {}).get('completion_tokens')} tokens: {content[:60]!r}"

    def probe_known_answers(self, client: httpx.Client) -> str:
        wrong = []
        for qa in self.cfg.answers:
            body = {
                "model": self.model,
                "messages": [{"role": "user", "content": qa.prompt}],
                "max_tokens": 64,
                "temperature": 0,
            }
            data = _post(client, "/v1/chat/completions", body)
            msg = (data.get("choices") or [{}])[0].get("message") or {}
            text = (msg.get("content") or "") + " " + (msg.get("reasoning_content") or "")
            if not re.search(r"(?<![\w])" + re.escape(qa.expected) + r"(?![\w])", text, re.I):
                wrong.append(f"{qa.prompt!r} -> {text.strip()[:80]!r} (expected {qa.expected!r})")
        if wrong:
            raise Disagree("wrong answer: " + "; ".join(wrong))
        return f"{len(self.cfg.answers)} known answers correct"

    def probe_reference(self, client: httpx.Client) -> str:
        """Greedy output on the reference prompts against the model's own (bringup/verify/reference.py)."""
        from bringup.verify.reference import ServerOutput, compare, tolerance

        ref = self.cfg.reference
        outputs = []
        for p in ref.prompts:
            body = {"model": self.model, "prompt": p.prompt, "max_tokens": len(p.steps), "temperature": 0}
            if self.cfg.logprobs:
                body["logprobs"] = 1
            if self.cfg.ignore_eos:
                body["ignore_eos"] = True
            data = _post(client, "/v1/completions", body)
            choice = (data.get("choices") or [{}])[0]
            lp = choice.get("logprobs") or {}
            outputs.append(
                ServerOutput(
                    text=choice.get("text") or "",
                    tokens=lp.get("tokens") or None,
                    logprobs=lp.get("token_logprobs") or None,
                    finish_reason=choice.get("finish_reason"),
                )
            )
        verdict = compare(ref, outputs, tolerance(self.cfg.reference_precision))
        if not verdict.passed:
            raise Disagree(verdict.detail, kind=verdict.kind)
        how = "tokens and logprobs" if self.cfg.logprobs else "greedy text (this engine returns no logprobs)"
        return f"{verdict.detail}; compared {how}"

    def probe_long_decode(self, client: httpx.Client) -> str:
        n, note = self._long_decode_length()
        extra = {"ignore_eos": True} if self.cfg.ignore_eos else {}
        data = self._completion(client, LONG_DECODE_PROMPT, n, **extra)
        choice = data["choices"][0]
        vals = finite_logprobs(choice)
        got = (data.get("usage") or {}).get("completion_tokens")
        stopped = not self.cfg.ignore_eos and choice.get("finish_reason") == "stop" and got and 0 < got < n
        if got != n and not stopped:
            raise Disagree(f"asked for {n} tokens{' with ignore_eos' if extra else ''}, got {got}")
        lp = f"{len(vals)} finite logprobs" if self.cfg.logprobs else "no logprobs from this engine"
        return f"{got} tokens{' (stopped at EOS)' if stopped else ''}, {lp}{note}"

    def _long_decode_length(self) -> tuple[int, str]:
        n, note = long_decode_length(self.cfg.long_tokens, self.max_model_len)
        if n is None:
            from bringup.verify.probes_user import Skip

            raise Skip(note)
        return n, note

    def probe_batch(self, client: httpx.Client) -> str:
        self.phase = "load"
        prompts = [REFERENCE_PROMPT] + [
            BATCH_PROMPTS[i % len(BATCH_PROMPTS)] for i in range(self.cfg.batch_size - 1)
        ]
        with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
            futures = [pool.submit(self._completion, client, p, self.cfg.short_tokens) for p in prompts]
            outs = [f.result() for f in futures]  # re-raises ServerBroke/Disagree
        for o in outs:
            finite_logprobs(o["choices"][0])
        self._batch_reference = tokens_of(outs[0]["choices"][0])
        self._batch_top = top_of(outs[0]["choices"][0])
        return f"{len(outs)} concurrent requests answered"

    def probe_batch_invariance(self, client: httpx.Client) -> str:
        failed = next(
            (r.name for r in self.results if r.name in ("completion", "batch") and not r.passed), None
        )
        if failed is not None or self._batch_reference is None:
            # an earlier probe failed (NaN, a wrong answer) and left nothing to compare: say so, do not crash
            raise Disagree(f"not compared: the {failed or 'batch'} probe gave no output to compare")
        if self._reference is None:  # an engine whose streamed text is not the greedy reference
            choice = self._completion(client, REFERENCE_PROMPT, self.cfg.short_tokens)["choices"][0]
            self._reference, self.alone_top = tokens_of(choice), top_of(choice)
        note = ""
        if self._batch_reference != self._reference:
            why = parting(
                self._reference, self._batch_reference, (self.alone_top, self._batch_top), self.tie_gap
            )
            if why is None:
                raise Disagree(
                    f"greedy output differs alone vs in a batch: {show_tokens(self._reference)} vs "
                    f"{show_tokens(self._batch_reference)}"
                )
            note = f"; alone and in a batch {why} (batched kernels round differently)"
        again = tokens_of(self._completion(client, REFERENCE_PROMPT, self.cfg.short_tokens)["choices"][0])
        if again != self._reference:
            raise Disagree(
                f"greedy output differs between two identical requests: {show_tokens(self._reference)} "
                f"vs {show_tokens(again)}"
            )
        if note:
            return "same greedy tokens repeated" + note
        return "same greedy tokens alone, in a batch, and repeated"

    def ladder(self) -> list[tuple[str, Callable[[httpx.Client], str]]]:
        """The probes of `ladder_steps`, each with the method that runs it."""
        from bringup.verify import probes_user as u

        run: dict[str, Callable[[httpx.Client], str]] = {
            "health": self.probe_health,
            "completion": self.probe_completion,
            "chat": self.probe_chat,
            "known-answers": self.probe_known_answers,
            "reference": self.probe_reference,
            "long-decode": self.probe_long_decode,
            "batch": self.probe_batch,
            "batch-invariance": self.probe_batch_invariance,
            "sampled": lambda c: u.probe_sampled(self, c),
            "sampled-reference": lambda c: u.probe_sampled_reference(self, c),
            "long-prompt": lambda c: u.probe_long_prompt(self, c),
            "concurrency": lambda c: u.probe_concurrency(self, c),
        }
        return [(name, run[name]) for name in ladder_steps(self.cfg)]

    def run(self) -> list[ProbeResult]:
        timeout = httpx.Timeout(self.cfg.request_timeout, connect=10.0)
        limits = httpx.Limits(max_connections=self.cfg.batch_size + 4)
        with httpx.Client(
            base_url=self.base_url, timeout=timeout, limits=limits, headers=auth_headers(self.cfg.api_key)
        ) as client:
            for name, fn in self.ladder():
                if self.stop.is_set():
                    self.results.append(
                        ProbeResult(
                            name=name, passed=False, detail="not run: the server failed", phase=self.phase
                        )
                    )
                    break
                result = self._one(name, fn, client)
                self.results.append(result)
                # A broken server, a failed health check or a stalled request end the ladder (the
                # next probe would wait out its whole timeout on a server that makes no tokens).
                if result.kind in ("server-error", "stall") or (name == "health" and not result.passed):
                    break
        return self.results

    def _one(self, name: str, fn: Callable[[httpx.Client], str], client: httpx.Client) -> ProbeResult:
        """Run one probe; what it raised becomes its result."""
        from bringup.verify.probes_user import Skip

        t0 = time.monotonic()
        phase_before = self.phase

        def passed(detail: str, kind: str = "ok") -> ProbeResult:
            return ProbeResult(
                name=name,
                passed=True,
                detail=detail,
                seconds=time.monotonic() - t0,
                phase=phase_before,
                kind=kind,
            )

        try:
            return passed(fn(client))
        except Skip as e:  # cannot apply here: passed, and says why
            return passed(f"skipped: {e}", "skipped")
        except ServerBroke as e:
            kind, detail = "server-error", str(e)
        except Disagree as e:
            if e.kind == "too-long":  # the probe asked more than the server serves: not wrong output
                return passed(
                    f"skipped: {e}; shorten the probe or raise the engine's maximum length", "skipped"
                )
            kind, detail = e.kind, str(e)
        except Exception as e:  # a probe's own bug must not read as "all passed"
            kind, detail = "disagree", f"the probe itself failed: {type(e).__name__}: {e}"
        return ProbeResult(
            name=name, passed=False, detail=detail, seconds=time.monotonic() - t0, phase=self.phase, kind=kind
        )
