"""Prompts to send: synthetic ones of exact token length, or lines of a JSONL file.

Exact lengths need the server's tokenizer. In order of preference: a `tokenizer.json` from the
model folder (fast, local), the server's own `/tokenize` + `/detokenize` (vLLM has both), and
last whitespace words (lengths then only approximate: the server's usage counts still report
the truth). The construction follows vllm bench serve's random dataset so that the two tools
send comparable prompts: a run of vocabulary ids from a per-request offset, decoded, re-encoded
and trimmed or padded until the count is right.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import httpx
import numpy as np

from bringup.guard import ranges
from bringup.guard.limits import InputError, loads_json, read_text_limited
from bringup.loadgen.config import BenchConfig, BenchError

PROMPTS_MAX = 256 << 20  # a prompts file (JSON lines) read whole

# Text whose tokens seed the id pool when only the server can tokenize (it has no vocab listing).
_CORPUS = (
    "The quick brown fox jumps over the lazy dog while a server answers requests. "
    "Engines load weights, allocate the cache, capture graphs and decode tokens one by one. "
    "Numbers 0 1 2 3 4 5 6 7 8 9 10 42 100 1000; colors red green blue yellow black white. "
    "Once upon a time a small model learned words, then sentences, then whole stories. "
    "Memory, bandwidth, latency and throughput decide how fast the answer arrives. "
    "Paris London Tokyo Berlin Madrid Rome Cairo Lima Oslo Seoul; rivers, mountains, seas."
)
_WORDS = sorted(set(_CORPUS.replace(";", " ").replace(",", " ").replace(".", " ").lower().split()))


@dataclass(frozen=True, slots=True)
class Prompt:
    text: str
    output_len: int
    input_tokens: int | None = None  # as counted locally; None when unknown (usage will tell)


class Codec(Protocol):
    """Just enough of a tokenizer to build prompts of a given length."""

    name: str
    n_special: int  # tokens the server adds to every prompt (e.g. BOS)
    pool: list[int]  # ids safe to sample: no special tokens

    async def encode(self, text: str) -> list[int]: ...  # without special tokens
    async def decode(self, ids: list[int]) -> str: ...


class LocalCodec:
    """A `tokenizers` tokenizer from the model folder: what the server itself loads."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        file = path / "tokenizer.json" if path.is_dir() else path
        if not file.is_file():
            raise BenchError(f"no tokenizer at {file}")
        self.tok = Tokenizer.from_file(str(file))
        self.name = f"local:{file}"
        self.n_special = len(self.tok.encode("a").ids) - len(
            self.tok.encode("a", add_special_tokens=False).ids
        )
        special = {i for i, t in self.tok.get_added_tokens_decoder().items() if t.special}
        # Byte-level vocabularies hold pieces of multi-byte characters: alone they decode to
        # U+FFFD, which re-encodes to other tokens and keeps the length from converging. Control
        # characters are left out too: prompts stay printable text, as real prompts are.
        self.pool = [
            i
            for i in range(self.tok.get_vocab_size())
            if i not in special
            and (piece := self.tok.decode([i]))
            and "\ufffd" not in piece
            and piece.replace(" ", "").isprintable()
        ]

    async def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    async def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=True)


class ServerCodec:
    """The server's `/tokenize` and `/detokenize` (vLLM; SGLang where it has them)."""

    name = "server"

    def __init__(self, client: httpx.AsyncClient, base_url: str, model: str) -> None:
        self.client, self.base, self.model = client, base_url, model
        self.n_special = 0
        self.pool: list[int] = []

    async def _tokenize(self, text: str, special: bool) -> list[int]:
        body = {"model": self.model, "prompt": text, "add_special_tokens": special}
        return list((await self._post("/tokenize", body))["tokens"])

    async def _post(self, path: str, body: dict) -> dict:
        """One setup call, its answer read with a cap (bringup/guard/bounded.py)."""
        from bringup.guard.bounded import aread_body

        async with self.client.stream("POST", f"{self.base}{path}", json=body) as r:
            raw = await aread_body(r.aiter_bytes(), f"POST {self.base}{path}")
            r.raise_for_status()
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError(f"POST {path}: the answer is not a JSON object")
        return data

    async def setup(self) -> ServerCodec:
        self.n_special = len(await self._tokenize("a", True)) - len(await self._tokenize("a", False))
        self.pool = sorted(set(await self._tokenize(_CORPUS, False)))
        await self.decode(self.pool[:4])  # raises if /detokenize is missing
        return self

    async def encode(self, text: str) -> list[int]:
        return await self._tokenize(text, False)

    async def decode(self, ids: list[int]) -> str:
        return str((await self._post("/detokenize", {"model": self.model, "tokens": ids}))["prompt"])


class WordCodec:
    """Whitespace words: the fallback when no tokenizer can be had. Lengths are approximate."""

    name = "words"
    n_special = 0

    def __init__(self) -> None:
        self.pool = list(range(len(_WORDS)))
        self._ids = {w: i for i, w in enumerate(_WORDS)}

    async def encode(self, text: str) -> list[int]:
        return [self._ids.get(w, len(_WORDS)) for w in text.split()]

    async def decode(self, ids: list[int]) -> str:
        return " ".join(_WORDS[i % len(_WORDS)] for i in ids)


async def resolve_codec(cfg: BenchConfig, client: httpx.AsyncClient, model: str) -> Codec:
    """Pick the most exact tokenizer available (see the module docstring)."""
    choice = cfg.tokenizer
    if choice == "words":
        return WordCodec()
    if choice == "server":
        try:
            return await ServerCodec(client, cfg.url, model).setup()
        except (httpx.HTTPError, KeyError, ValueError) as e:
            raise BenchError(f"the server cannot tokenize ({e}); use --tokenizer PATH or words") from e
    if choice != "auto":
        return LocalCodec(Path(choice).expanduser())
    folder = Path(model).expanduser()
    if (folder / "tokenizer.json").is_file():
        return LocalCodec(folder)
    try:
        return await ServerCodec(client, cfg.url, model).setup()
    except (httpx.HTTPError, KeyError, ValueError):
        return WordCodec()


def sample_lengths(rng: np.random.Generator, n: int, mean: int, ratio: float, dist: str) -> np.ndarray:
    """Lengths around `mean`. uniform: integers in [floor(mean(1-r)), ceil(mean(1+r))], as vLLM's
    random dataset; normal: mean, standard deviation r*mean, rounded and clipped to [1, 2*mean]."""
    if ratio == 0 or mean <= 1:
        return np.full(n, max(mean, 1), dtype=np.int64)
    if dist == "normal":
        vals = np.rint(rng.normal(mean, ratio * mean, size=n))
        return np.clip(vals, 1, 2 * mean).astype(np.int64)
    low = max(math.floor(mean * (1 - ratio)), 1)
    high = max(math.ceil(mean * (1 + ratio)), low)
    return rng.integers(low, high + 1, size=n)


async def _fit(codec: Codec, ids: list[int], target: int, rng: np.random.Generator) -> tuple[str, int]:
    """Decode `ids`, re-encode, trim or pad, until the text encodes to `target` tokens
    (vLLM's gen_prompt_decode_to_target_len). Returns the text and its final token count."""
    text, count = "", -1
    for _ in range(10):
        text = await codec.decode(ids)
        ids = await codec.encode(text)
        count = len(ids)
        if count == target:
            break
        if count > target:
            ids = ids[:target]
        else:
            pool = codec.pool
            ids = ids + [pool[int(k)] for k in rng.integers(0, len(pool), size=target - count)]
    return text, count


async def synthetic_prompts(cfg: BenchConfig, codec: Codec, n: int) -> list[Prompt]:
    """`n` prompts of prefix_len + input_len tokens as the server counts them (its special tokens
    included), each asking for output_len tokens. Seeded: the same config gives the same prompts."""
    rng = np.random.default_rng(cfg.seed)
    body_mean = max(cfg.input_len - codec.n_special, 1)
    in_lens = sample_lengths(rng, n, body_mean, cfg.in_range_ratio, cfg.len_dist)
    out_lens = sample_lengths(rng, n, cfg.output_len, cfg.out_range_ratio, cfg.len_dist)
    pool = codec.pool
    if not pool:
        raise BenchError(f"tokenizer {codec.name} has no usable vocabulary")
    offsets = rng.integers(0, len(pool), size=n)
    prefix: list[int] = []
    if cfg.prefix_len:
        raw = [pool[int(k)] for k in rng.integers(0, len(pool), size=cfg.prefix_len)]
        prefix_text, _ = await _fit(codec, raw, cfg.prefix_len, rng)
        prefix = await codec.encode(prefix_text)  # ids that survive a decode/encode round trip
    # Each request gets its own generator so that concurrent fitting stays deterministic.
    seeds = rng.integers(0, 2**63 - 1, size=n)
    sem = asyncio.Semaphore(16)  # bounds concurrent /tokenize calls when the server tokenizes

    async def one(i: int) -> Prompt:
        body = [pool[(int(offsets[i]) + i + j) % len(pool)] for j in range(int(in_lens[i]))]
        async with sem:
            text, count = await _fit(
                codec, prefix + body, len(prefix) + len(body), np.random.default_rng(int(seeds[i]))
            )
        return Prompt(text=text, output_len=int(out_lens[i]), input_tokens=count + codec.n_special)

    return list(await asyncio.gather(*(one(i) for i in range(n))))


def load_jsonl(path: Path, default_output_len: int) -> list[tuple[str, int]]:
    """(prompt, max_tokens) per line. Each line: {"prompt": str, "max_tokens": int (optional)}."""
    rows: list[tuple[str, int]] = []
    try:
        lines = read_text_limited(path, PROMPTS_MAX, "prompts file").splitlines()
    except InputError as e:  # missing, a FIFO or a device (refused at once, never a hang), too big, not UTF-8
        raise BenchError(f"cannot read prompts file: {e}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = loads_json(line, f"{path}:{n}", "prompts file")
            prompt = obj["prompt"]
            asked = obj.get("max_tokens")
            asked = float(asked) if isinstance(asked, str) else asked  # "64" was taken as 64
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:  # InputError: nested too deep
            raise BenchError(f"{path}:{n}: expected a JSON object with a 'prompt' string ({e})") from None
        if not isinstance(prompt, str):
            raise BenchError(f"{path}:{n}: 'prompt' must be a string")
        # the file's numbers meet the CLI's range: Infinity was an OverflowError, 1e30 a request
        # no server takes, 2.7 silently 2 (bringup/guard/ranges.py)
        if asked is not None and (bad := ranges.TOKENS.problem(asked)):
            raise BenchError(f"{path}:{n}: 'max_tokens' {bad}")
        rows.append((prompt, default_output_len if asked is None else int(asked)))
    if not rows:
        raise BenchError(f"{path}: no prompts")
    return rows


async def file_prompts(cfg: BenchConfig, codec: Codec | None, n: int | None) -> list[Prompt]:
    """The file's prompts in order, cycled or cut to `n` when `n` is given."""
    assert cfg.prompts_file is not None
    rows = load_jsonl(cfg.prompts_file, cfg.output_len)
    n = n or len(rows)
    out = []
    for i in range(n):
        text, max_tokens = rows[i % len(rows)]
        count = None
        if isinstance(codec, LocalCodec):  # cheap only when local; usage reports it anyway
            count = len(await codec.encode(text)) + codec.n_special
        out.append(Prompt(text=text, output_len=max_tokens, input_tokens=count))
    return out


async def build_prompts(cfg: BenchConfig, client: httpx.AsyncClient, model: str) -> tuple[list[Prompt], str]:
    """The prompts for this config and the name of the tokenizer used."""
    if cfg.prompts_file is not None:
        codec: Codec | None = None
        if cfg.tokenizer != "auto" or (Path(model).expanduser() / "tokenizer.json").is_file():
            codec = await resolve_codec(cfg, client, model)
        return await file_prompts(cfg, codec, cfg.num_prompts), codec.name if codec else "none"
    codec = await resolve_codec(cfg, client, model)
    return await synthetic_prompts(cfg, codec, cfg.num_prompts or 100), codec.name
