"""Text the imitated model writes: deterministic, fluent-looking, right or wrong on purpose.

`ok`: the scenario's known-answer prompts get their expected answer; any other prompt gets text
that depends only on the prompt and the sampling parameters, never on what else is in the
batch. `garbage`: known answers come out wrong, fluently, with no error anywhere. `salad`: every
output is random tokens (broken numerics that raise nothing). `inconsistent`:
once the engine runs more than one request at a time, greedy output changes after a couple of
tokens (the batch-variance bug the batch-invariance probe exists to catch).
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

from bringup.scenario.schema import Answer

WORDS = (
    "the model reads each token and writes the next one while the engine keeps a cache of keys "
    "and values for every layer so that decoding stays fast even when many requests share the "
    "same batch on a machine with eight GPUs linked by a fast bus memory bandwidth decides how "
    "quickly weights stream through the cores and the scheduler fills each step with work from "
    "waiting prompts a careful operator checks logs numbers outputs and latency before trusting "
    "a new configuration because small kernels can fail in ways that look like success"
).split()
_TOKEN_RE = re.compile(r"\s*\w+|\s*[^\w\s]")
_WORD_RE = re.compile(r"\w+|[^\w\s]")
INCONSISTENT_AFTER = 2  # tokens that still agree before batch composition changes the output


def count_tokens(text: str) -> int:
    """A rough token count (words and punctuation), at least 1 for any prompt."""
    return max(1, len(_WORD_RE.findall(text)))


def split_tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


class Vocab:
    """The imitated tokenizer's ids (what `return_token_ids` returns and a token-id prompt sends):
    a token's id is a hash of its text, the same in every process (the server and the oracle), and
    the ids handed out are remembered so that an id prompt reads back as the text they spelled. An
    id never handed out reads as `<|N|>`."""

    def __init__(self) -> None:
        self._text: dict[int, str] = {}

    def id(self, token: str) -> int:
        i = int.from_bytes(hashlib.sha256(token.encode()).digest()[:4], "big") >> 1
        self._text.setdefault(i, token)
        return i

    def encode(self, text: str) -> list[int]:
        """A prompt's ids: one per `split_tokens` piece (so len = `count_tokens`)."""
        return [self.id(t) for t in split_tokens(text)]

    def ids(self, tokens: list[str]) -> list[int]:
        return [self.id(t) for t in tokens]

    def decode(self, ids: list[int]) -> str:
        return "".join(self._text.get(i, f"<|{i}|>") for i in ids)


VOCAB = Vocab()


@dataclass(frozen=True)
class Sampling:
    max_tokens: int | None
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    ignore_eos: bool = False
    logprobs: int | None = None  # top alternatives wanted per token; None: no logprobs
    stop: tuple[str, ...] = ()


@dataclass
class TokenLogprob:
    logprob: float
    top: list[tuple[str, float]]  # the chosen token first


@dataclass
class TokenPlan:
    """The tokens the double will answer with, planned before it paces them out."""

    tokens: list[str]
    finish_reason: str  # stop | length
    logprobs: list[TokenLogprob] | None

    @property
    def text(self) -> str:
        return "".join(self.tokens)


def _rng(*parts: object) -> random.Random:
    h = hashlib.sha256("\x00".join(str(p) for p in parts).encode()).digest()
    return random.Random(int.from_bytes(h[:8], "big"))


def _fluent(rng: random.Random, n: int, first: bool) -> list[str]:
    out: list[str] = []
    since = 0
    cap = first
    while len(out) < n:
        if since >= 6 and rng.random() < 0.18:
            out.append(rng.choice((".", ",", ".")))
            cap = out[-1] == "."
            since = 0
            continue
        w = rng.choice(WORDS)
        if cap:
            w = w.capitalize()
            cap = False
        out.append(w if not out and first else " " + w)
        since += 1
    return out


# Token salad: what a model with broken numerics (NaN-free but wrong scales, a kernel reading the
# wrong layout) writes: valid vocabulary ids in no order, subword pieces, scripts mixed.
SALAD = (
    "ĠKaw",
    "_REF",
    "ocode",
    " ĉ",
    "ニ",
    " pestic",
    "uggest",
    ")});",
    " DESC",
    "ylon",
    " Über",
    "јер",
    " 않",
    "_STAT",
    " glEnable",
    "ísimo",
    "\\\\",
    " Hier",
    "izzard",
    "ť",
    " ...)",
    "rimon",
    " Cf",
    "ڭ",
    " ligt",
    "abilece",
    " ////////",
    "ObjectId",
    "ILLISE",
    "<|reserved_17|>",
)


def _salad(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(SALAD) for _ in range(n)]


def wrong_answer(answer: Answer) -> str:
    """What `garbage` says: the scenario's `wrong`, or a plausible different answer."""
    if answer.wrong:
        return answer.wrong
    exp = answer.expected.strip()
    if re.fullmatch(r"-?\d+", exp):
        return str(int(exp) + 3)
    return "unknown" if exp.lower() != "unknown" else "none"


class Generator:
    def __init__(self, mode: str, answers: list[Answer], over: int | None = None):
        self.mode = mode
        self.answers = answers
        self.over = over  # the long-prompt and concurrency modes' threshold
        # A model's continuation of P + its own first tokens is the rest of its answer to P (the
        # long-prompt probe sends that): prompt hash -> the tokens still to come. A broken prefill
        # (long-prompt mode past `over`) has no such memory: its state for the prompt is wrong.
        self._continues: dict[str, list[str]] = {}

    def known(self, prompt: str) -> Answer | None:
        text = _norm(prompt)
        for a in self.answers:
            if _norm(a.prompt) in text:
                return a
        return None

    def _answer_tokens(self, a: Answer) -> list[str]:
        said = a.expected if self.mode != "garbage" else wrong_answer(a)
        return split_tokens(f"The answer is {said}.")

    def plan(self, prompt: str, s: Sampling, batch_size: int = 1, default_max: int | None = 16) -> TokenPlan:
        """The whole output for one request, decided up front (the server then paces it)."""
        key = (prompt, f"{s.temperature:.4f}", f"{s.top_p:.4f}", s.seed)
        limit = s.max_tokens if s.max_tokens is not None else default_max
        rng = _rng("text", *key)
        natural = 12 + rng.randrange(40)
        a = self.known(prompt)
        cont = self._continues.get(_digest(prompt, key[1:])) if not self._salad(prompt, s) else None
        if cont is not None:
            body = list(cont)
        elif a is not None:
            body = self._answer_tokens(a)
        else:
            body = _fluent(rng, natural, first=True)
        want = limit if (s.ignore_eos and limit is not None) else len(body)
        if limit is not None:
            want = min(want, limit)
        tokens = list(body[:want])
        if len(tokens) < want:  # ignore_eos past the natural end: keep writing
            tokens += _fluent(_rng("more", *key), want - len(tokens), first=False)
        if self._salad(prompt, s):  # random tokens from the first one on, known answers included
            tokens = _salad(_rng("salad", *key), len(tokens))
        if self._batch_variant(batch_size) and len(tokens) > INCONSISTENT_AFTER:
            alt = _fluent(_rng("batch", batch_size, *key), len(tokens) - INCONSISTENT_AFTER, first=False)
            tokens = tokens[:INCONSISTENT_AFTER] + alt
        finish = (
            "length"
            if limit is not None and len(tokens) >= limit and (s.ignore_eos or len(body) > limit)
            else "stop"
        )
        if s.stop:
            tokens, stopped = _apply_stop(tokens, s.stop)
            if stopped:
                finish = "stop"
        self._remember(prompt, key[1:], tokens)
        lps = _logprobs(tokens, key, s.logprobs) if s.logprobs is not None else None
        if lps is not None and self.mode == "sampler" and s.temperature > 0:
            lps = _ruled_out(tokens, key, s.logprobs or 1)
        return TokenPlan(tokens, finish, lps)

    def _remember(self, prompt: str, params: tuple, tokens: list[str]) -> None:
        if len(self._continues) > 4096:
            self._continues.clear()
        text = prompt
        for i, t in enumerate(tokens[:-1]):
            text += t
            self._continues[_digest(text, params)] = tokens[i + 1 :]

    def _salad(self, prompt: str, s: Sampling) -> bool:
        """Whether this request's output is random tokens (salad, a broken sampler, a long prompt)."""
        if self.mode == "salad" or (self.mode == "sampler" and s.temperature > 0):
            return True
        return self.mode == "long-prompt" and count_tokens(prompt) > (self.over or 0)

    def _batch_variant(self, batch_size: int) -> bool:
        if self.mode == "concurrency":
            return batch_size > (self.over or 0)
        return self.mode == "inconsistent" and batch_size > 1


def _digest(prompt: str, params: tuple) -> str:
    return hashlib.sha256("\x00".join([prompt, *map(str, params)]).encode()).hexdigest()


def _apply_stop(tokens: list[str], stops: tuple[str, ...]) -> tuple[list[str], bool]:
    text = ""
    for i, t in enumerate(tokens):
        text += t
        for st in stops:
            if st and st in text:
                return tokens[:i], True
    return tokens, False


def _ruled_out(tokens: list[str], key: tuple, k: int) -> list[TokenLogprob]:
    """A broken sampler's draws: each token far less likely than the k (at least 5) the server
    itself ranks above it, as its own logprobs show (what the sampled probe reads)."""
    out = []
    for i, tok in enumerate(tokens):
        rng = _rng("ruled-out", i, tok, *key)
        top = [(" " + rng.choice(WORDS), -0.2 - j * 0.4) for j in range(max(k, 5))]
        out.append(TokenLogprob(-9.0 - rng.random(), [(tok, -9.0), *top]))
    return out


def _logprobs(tokens: list[str], key: tuple, k: int) -> list[TokenLogprob]:
    out = []
    for i, tok in enumerate(tokens):
        rng = _rng("lp", i, tok, *key)
        chosen = -0.01 - rng.random() * 0.9  # finite, and the most likely token (greedy)
        top = [(tok, chosen)]
        for j in range(max(k, 1) - 1):
            top.append((" " + rng.choice(WORDS), chosen - 0.5 - j - rng.random()))
        out.append(TokenLogprob(chosen, top))
    return out
