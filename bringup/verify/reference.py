"""A reference for "right": the model's own greedy tokens and top logprobs, and the comparison.

Self-consistency probes pass a kernel that is deterministically wrong. The reference is computed
by transformers in-process in float32 (or read from a file recorded where the model fits), and a
server's greedy output is compared with it within tolerances that depend on the serving dtype and
quantization (bringup/data/tolerances.yaml, docs/probes.md). The record carries the model's
identity (hashes of its config and tokenizer) so a reference for another model is refused.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from bringup.core.datafiles import DATA
from bringup.guard import files
from bringup.guard.hostproc import guest
from bringup.guard.limits import InputError, read_json_object

REFERENCE_PROMPTS = [
    "The quick brown fox",
    "Once upon a time there was",
    "Numbers: 1 2 3 4",
    "The capital of France is",
]
REFERENCE_TOKENS = 16
TOP_K = 5
FORMAT = 1
ANSWERS_FILE = "bringup_answers.json"  # known answers written next to a model (bringup testmodel)
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "merges.txt", "tiktoken.model")
_VOLATILE_CONFIG = ("transformers_version", "_name_or_path")


class ReferenceError(ValueError):
    """A reference that cannot be used here: what is wrong and what to do."""


# -- identity -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelIdentity:
    config_sha256: str
    tokenizer_sha256: str

    def short(self) -> str:
        return f"config {self.config_sha256[:12]}, tokenizer {self.tokenizer_sha256[:12]}"


def model_folder(model: str) -> Path | None:
    """The local folder of a model: the path itself, or a hub id's snapshot in the HF cache."""
    p = Path(model)
    if p.is_dir():
        return p
    try:
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(model, "config.json")
    except Exception:  # no hub library or a malformed id: no local folder
        return None
    return Path(hit).parent if isinstance(hit, str) else None


def identity_of(folder: Path) -> ModelIdentity:
    """Hashes of config.json (volatile keys dropped, keys sorted) and the tokenizer's files."""
    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        raise ReferenceError(f"{folder} has no config.json: not a model folder")
    try:
        raw = read_json_object(cfg_path, "model config")  # a regular file, bounded, nested at most 100 deep
    except InputError as e:
        raise ReferenceError(str(e)) from None
    cfg = {k: v for k, v in raw.items() if k not in _VOLATILE_CONFIG}
    ch = hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()
    th = hashlib.sha256()
    found = False
    for name in _TOKENIZER_FILES:
        f = folder / name
        if f.is_file():
            th.update(name.encode() + b"\0" + f.read_bytes())
            found = True
    if not found:
        raise ReferenceError(f"{folder} has no tokenizer file ({', '.join(_TOKENIZER_FILES)})")
    return ModelIdentity(ch, th.hexdigest())


# -- the record ---------------------------------------------------------------------------------------
@dataclass
class Step:
    token_id: int
    token: str  # the token's text, as an OpenAI completions API spells it in logprobs.tokens
    logprob: float
    top: dict[str, float]  # the reference's top-k: token text -> logprob
    raw: str = ""  # the vocabulary's spelling (e.g. 'Ġthe'): some engines return it instead of the text
    end: int = 0  # len(decode(tokens up to this one)): where its text ends in the whole answer's text

    def exact(self, t: str) -> bool:
        """Whether a server's token string is this token's own text or vocabulary spelling."""
        return t == self.token or bool(self.raw and t == self.raw)

    def same(self, t: str) -> bool:
        """Whether a server's token string names this token (text, vocabulary spelling, or a byte
        fragment). A token that is part of a UTF-8 character has no text of its own: transformers
        decodes it to U+FFFD, SGLang spells it `bytes:\\xe2`, and vLLM 0.24.0's chat logprobs give
        the empty string (seen on the H200 with a random-weight Llama 3 8 B, whose answers are
        full of byte tokens: tests/data/gpu/h200-2026-12-01-vllm). Any of those spellings names
        a fragment; which fragment the logprob check then says (a different byte at the same
        logprob slips through, a price of comparing by text)."""
        if t == self.token or (self.raw and t == self.raw):
            return True
        return "\ufffd" in self.token and (t == "" or "\ufffd" in t or t.startswith("bytes:"))


def common_prefix(a: list[str] | str, b: list[str] | str) -> int:
    """How many leading tokens (or characters) two greedy outputs share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class PromptReference:
    prompt: str
    text: str
    steps: list[Step]


@dataclass
class Reference:
    model: str
    identity: ModelIdentity
    dtype: str
    prompts: list[PromptReference]
    eos_token_ids: list[int] = field(default_factory=list)
    format: int = FORMAT

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> Reference:
        d = json.loads(text)
        if d.get("format") != FORMAT:
            raise ReferenceError(
                f"reference format {d.get('format')!r} is not {FORMAT}: record it again "
                "with `bringup reference MODEL -o FILE`"
            )
        prompts = [
            PromptReference(p["prompt"], p["text"], [Step(**s) for s in p["steps"]]) for p in d["prompts"]
        ]
        return cls(
            d["model"], ModelIdentity(**d["identity"]), d["dtype"], prompts, d.get("eos_token_ids", [])
        )

    def save(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        files.write_text(path, self.to_json(), atomic=True)
        return path


def load_reference(path: Path, model: str | None = None) -> Reference:
    """Read a reference file; with `model`, refuse it when the model's config or tokenizer differ."""
    path = Path(path)
    try:
        ref = Reference.from_json(path.read_text())
    except OSError as e:
        raise ReferenceError(f"cannot read the reference file {path}: {e.strerror or e}") from None
    except (ValueError, KeyError, TypeError) as e:
        raise ReferenceError(f"{path} is not a bringup reference file ({type(e).__name__}: {e})") from None
    if model is not None:
        check_identity(ref, model, path)
    return ref


def check_identity(ref: Reference, model: str, where: Path | str = "the reference") -> None:
    folder = model_folder(model)
    if folder is None:
        return  # a hub id not in the cache here: nothing to compare with; the engine downloads it
    ident = identity_of(folder)
    if ident.config_sha256 != ref.identity.config_sha256:
        raise ReferenceError(
            f"{where} was recorded for another model ({ref.model}: config "
            f"{ref.identity.config_sha256[:12]}), not {model} (config {ident.config_sha256[:12]}); "
            f"record one for this model with `bringup reference {model} -o FILE`"
        )
    if ident.tokenizer_sha256 != ref.identity.tokenizer_sha256:
        raise ReferenceError(
            f"{where} was recorded with another tokenizer (tokenizer "
            f"{ref.identity.tokenizer_sha256[:12]}) than {model}'s ({ident.tokenizer_sha256[:12]}); "
            f"record one for this model with `bringup reference {model} -o FILE`"
        )


# -- computing it in-process --------------------------------------------------------------------------
def weights_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for pat in ("*.safetensors", "*.bin", "*.pt") for f in folder.glob(pat))


def fits_in_process(folder: Path, fraction: float = 0.25, max_gib: float = 4.0) -> tuple[bool, str]:
    """Whether a float32 copy of the weights fits a fraction of host memory and a size cap (speed)."""
    size = weights_bytes(folder)
    if size == 0:
        return False, f"{folder} has no weight files"
    fp32 = size * 2  # checkpoints are 16-bit or 32-bit: at most twice the file size in float32
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 0
    if total and fp32 > fraction * total:
        return (
            False,
            f"{fp32 / 2**30:.1f} GiB in float32 is over {fraction:.0%} of host memory ({total / 2**30:.0f} GiB)",
        )
    if fp32 > max_gib * 2**30:
        return False, f"{fp32 / 2**30:.1f} GiB in float32 is over the in-process cap of {max_gib:g} GiB"
    return True, f"{fp32 / 2**30:.2f} GiB in float32"


@guest
def compute_reference(
    model: str,
    prompts: list[str] | None = None,
    tokens: int = REFERENCE_TOKENS,
    top_k: int = TOP_K,
    device: str = "cpu",
    dtype: str = "float32",
) -> Reference:
    """Greedy decode each prompt with transformers in float32, keeping the top-k logprobs per step.

    `dtype` other than float32 is for tests (what a server in that dtype would answer).
    Decoding does not stop at EOS (servers are asked to ignore it where they can); the EOS ids are
    recorded so a server that stops there is not counted as diverging.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = model_folder(model)
    ident = identity_of(folder) if folder else None
    # Any: transformers' annotations are wider than these calls (decode of an id list is a str,
    # not `str | list[str]`; a model's `.to` takes a device string).
    tok: Any = AutoTokenizer.from_pretrained(str(folder or model))
    m: Any = AutoModelForCausalLM.from_pretrained(str(folder or model), dtype=getattr(torch, dtype))
    m = m.to(device).eval()
    if ident is None:
        ident = (
            identity_of(Path(m.config.name_or_path))
            if Path(m.config.name_or_path).is_dir()
            else ModelIdentity(
                hashlib.sha256(m.config.to_json_string().encode()).hexdigest(),
                hashlib.sha256(tok.backend_tokenizer.to_str().encode()).hexdigest(),
            )
        )
    if prompts is None:
        prompts = REFERENCE_PROMPTS + domain_prompts(folder, tok)
    eos = m.generation_config.eos_token_id if m.generation_config else None
    eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
    out = []
    with torch.no_grad():
        for p in prompts:
            ids = tok(p, return_tensors="pt").input_ids.to(device)
            steps: list[Step] = []
            chosen: list[int] = []
            past = None
            cur = ids
            for _ in range(tokens):
                o = m(input_ids=cur, past_key_values=past, use_cache=True)
                past = o.past_key_values
                lp = torch.log_softmax(o.logits[0, -1].float(), dim=-1)
                vals, idx = torch.topk(lp, top_k)
                nxt = int(idx[0])
                top: dict[str, float] = {}
                for v, i in zip(vals.tolist(), idx.tolist(), strict=True):
                    top.setdefault(tok.decode([i]), v)
                chosen.append(nxt)
                steps.append(
                    Step(
                        nxt,
                        tok.decode([nxt]),
                        float(vals[0]),
                        top,
                        tok.convert_ids_to_tokens(nxt),
                        len(tok.decode(chosen)),
                    )
                )
                cur = torch.tensor([[nxt]], device=device)
            text = tok.decode([s.token_id for s in steps])
            out.append(PromptReference(p, text, steps))
    return Reference(model=str(model), identity=ident, dtype=dtype, prompts=out, eos_token_ids=eos_ids)


def domain_prompts(folder: Path | None, tok: Any, n: int = 2) -> list[str]:
    """Prompts in the model's own domain: its known answers' questions (bringup_answers.json),
    rendered with its chat template as a server would. Generic text can be out of a small model's
    domain (the trained test model just ends it: EOS), and an answer that ends at once compares
    little when the engine returns only text."""
    f = folder / ANSWERS_FILE if folder else None
    if f is None or not f.is_file() or not getattr(tok, "chat_template", None):
        return []
    try:
        questions = list(json.loads(f.read_text()))[:n]
    except ValueError:
        return []
    return [
        tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
        for q in questions
    ]


@guest
def reference_for(
    model: str,
    file: str | None,
    cache_dir: Path | None = None,
    fraction: float = 0.25,
    max_gib: float = 4.0,
    gpu: str | None = None,
    gpu_memory_gib: float | None = None,
) -> tuple[Reference | None, str]:
    """The reference a run or trial uses, and why: a file (`file`), none (`file` == "none"), or
    ("auto", the default) computed in-process when the model is a local folder that fits. Too big
    for the host's quick float32 copy but given a free GPU (``gpu``, a CUDA_VISIBLE_DEVICES entry,
    with ``gpu_memory_gib``): computed there, in a child process, so that bringup itself keeps no
    CUDA context on a GPU its trials use."""
    if file and file not in ("auto", "none"):
        return load_reference(Path(file), model), f"reference file {file}"
    if file == "none":
        return None, "no reference (--reference none)"
    folder = Path(model) if model and Path(model).is_dir() else None
    if folder is None:
        return None, "no reference: the model is not a local folder (record one with `bringup reference`)"
    ok, why = fits_in_process(folder, fraction, max_gib)
    ident = identity_of(folder)
    cached = (
        (cache_dir / f"{ident.config_sha256[:16]}-{ident.tokenizer_sha256[:16]}.json") if cache_dir else None
    )
    if cached is not None and cached.is_file():
        try:
            return load_reference(cached, model), f"in-process reference (cached {cached})"
        except ReferenceError:
            pass
    if not ok:
        fp32_gib = 2 * weights_bytes(folder) / 2**30
        if gpu is not None and gpu_memory_gib and fp32_gib <= 0.5 * gpu_memory_gib and cached is not None:
            return _on_gpu(folder, model, cached, gpu, why)
        return None, f"no in-process reference: {why} (record one elsewhere with `bringup reference`)"
    return _computed(folder, cached, why)


def _computed(folder: Path, cached: Path | None, why: str) -> tuple[Reference | None, str]:
    """The reference computed here (and cached); ReferenceError when transformers cannot read the model."""
    try:
        ref = compute_reference(str(folder))
    except ImportError as e:
        return (
            None,
            f"no in-process reference: {e} (install torch and transformers, or pass --reference FILE)",
        )
    except Exception as e:  # transformers could not read the model: say so before any launch
        raise ReferenceError(unreadable_model(folder, e)) from None
    if cached is not None:
        ref.save(cached)
    return ref, f"in-process reference ({why})"


def unreadable_model(folder: Path, e: BaseException) -> str:
    """What to say when transformers cannot load a model folder (an unknown `model_type`, a
    config it cannot parse): the engines read the folder through transformers too, so no launch
    would get further (round three: a traceback from the reference step, before any launch)."""
    msg = " ".join(str(e).split()) or type(e).__name__
    msg = msg[: msg.find(". ", 0, 300) + 1 or 300]  # its first sentence
    return (
        f"transformers cannot read the model in {folder} ({type(e).__name__}: {msg}); the engines load "
        "it through transformers too. Check its config.json (model_type, architectures), or give "
        "--reference none to launch without the reference probe"
    )


def _on_gpu(folder: Path, model: str, out: Path, gpu: str, why_not_cpu: str) -> tuple[Reference | None, str]:
    """`bringup reference` in a child process on one GPU (its CUDA context goes with it)."""
    import subprocess
    import sys

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu}
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "bringup",
                "reference",
                str(folder),
                "--out",
                str(out),
                "--device",
                "cuda",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"no reference: computing it on GPU {gpu} failed ({type(e).__name__})"
    if proc.returncode != 0 or not out.is_file():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return None, f"no reference: computing it on GPU {gpu} failed: {last}"
    return load_reference(
        out, model
    ), f"reference computed on GPU {gpu} in float32 ({why_not_cpu} on the host)"


# -- tolerances ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tolerance:
    precision: str
    logprob_abs: float
    tie_gap: float


@lru_cache(maxsize=1)
def _tolerance_data() -> dict[str, Any]:
    return yaml.safe_load((DATA / "tolerances.yaml").read_text())


def tolerance(precision: str) -> Tolerance:
    d = _tolerance_data()["precisions"]
    row = d.get(precision) or d["auto"]
    return Tolerance(
        precision if precision in d else "auto", float(row["logprob_abs"]), float(row["tie_gap"])
    )


def precision_of(flags: dict[str, Any]) -> str:
    """The precision a launch serves in, from its --dtype / --quantization flags (tolerances.yaml)."""
    d = _tolerance_data()
    for f in d["quant_flags"]:
        v = flags.get(f)
        if v not in (None, "", "none", "None"):
            return d["quant_precision"].get(str(v).lower(), "quant4")
    for f in d["dtype_flags"]:
        v = flags.get(f)
        if v is not None:
            return d["dtype_aliases"].get(str(v).lower(), "auto")
    return "auto"


# -- comparing ----------------------------------------------------------------------------------------
@dataclass
class ServerOutput:
    """One prompt's greedy answer from a server: tokens and logprobs where the engine returns them."""

    text: str
    tokens: list[str] | None = None
    logprobs: list[float | None] | None = None
    finish_reason: str | None = None


@dataclass
class ReferenceCheck:
    """The server's output compared with the reference on one prompt (or all): agrees or not, and why."""

    passed: bool
    detail: str
    kind: str = "ok"  # ok | disagree | nan


def _gap(step: Step, other: str | None) -> float:
    """How far the reference's choice is ahead of `other` (or of its runner-up) at this step."""
    if other is not None and other in step.top:
        return step.logprob - step.top[other]
    rest = sorted((v for k, v in step.top.items() if k != step.token), reverse=True)
    return step.logprob - rest[0] if rest else math.inf


def _step_verdict(
    prompt: str, i: int, step: Step, t: str, lp: float | None, tol: Tolerance
) -> ReferenceCheck | None:
    """One token of the server's answer against the reference's step: a verdict where this token
    decides (a divergence, a tie-break, a logprob out of tolerance, a byte fragment), None to go on."""
    if lp is not None and (math.isnan(lp) or math.isinf(lp)):
        return ReferenceCheck(False, f"{prompt!r}: non-finite logprob {lp} at token {i}", "nan")
    if not step.same(t):
        gap = _gap(step, t)
        if gap < tol.tie_gap:
            return ReferenceCheck(
                True,
                f"{prompt!r}: tie-break at token {i} ({step.token!r} vs {t!r}, "
                f"reference gap {gap:.3f} < {tol.tie_gap})",
            )
        return ReferenceCheck(
            False,
            f"{prompt!r}: diverges at token {i}: reference {step.token!r} "
            f"(logprob {step.logprob:.3f}, ahead by {gap:.2f}) but server {t!r}; "
            f"{tol.precision} allows a divergence only under {tol.tie_gap} nats",
        )
    if lp is not None and abs(lp - step.logprob) > tol.logprob_abs:
        return ReferenceCheck(
            False,
            f"{prompt!r}: token {i} {t!r} logprob {lp:.3f} vs reference "
            f"{step.logprob:.3f} (more than {tol.logprob_abs} apart for {tol.precision})",
        )
    if not step.exact(t):
        # A byte fragment the server spells without its bytes (vLLM 0.24 gives ''): which fragment
        # it was is unknown, so the two sequences may part here unseen (seen on the vLLM CPU build:
        # the next tokens differed by whole nats). Compared up to it, its logprob included.
        return ReferenceCheck(
            True,
            f"{prompt!r}: {i + 1} tokens match, up to a byte fragment the server spells "
            f"{t!r} (not compared past it)",
        )
    return None


def compare_prompt(
    ref: PromptReference, got: ServerOutput, tol: Tolerance, eos_tokens: set[str]
) -> ReferenceCheck:
    """The server's greedy answer against the reference: equal up to a tie-break, logprobs within tol."""
    if got.tokens:
        for i, (step, t) in enumerate(zip(ref.steps, got.tokens, strict=False)):
            lp = got.logprobs[i] if got.logprobs and i < len(got.logprobs) else None
            decided = _step_verdict(ref.prompt, i, step, t, lp, tol)
            if decided is not None:
                return decided
        n = len(got.tokens)
        if n < len(ref.steps) and ref.steps[n].token not in eos_tokens and got.finish_reason != "length":
            step = ref.steps[n]
            gap = _gap(step, None)
            if gap >= tol.tie_gap:
                return ReferenceCheck(
                    False,
                    f"{ref.prompt!r}: server stopped after {n} tokens; the reference "
                    f"continues with {step.token!r} (ahead by {gap:.2f})",
                )
        return ReferenceCheck(True, f"{ref.prompt!r}: {min(n, len(ref.steps))} tokens match")
    # Text only (the engine returns no logprobs): where the texts part, and the reference token there.
    # Token ends come from decoding the prefix (a token may be half a UTF-8 character on its own).
    text, want = got.text, ref.text
    if text == want:
        return ReferenceCheck(True, f"{ref.prompt!r}: text matches ({len(ref.steps)} tokens)")
    common = common_prefix(text, want)
    ends, acc = [], 0
    for st in ref.steps:
        acc = st.end or acc + len(st.token)
        ends.append(acc)
    i = next((k for k, e in enumerate(ends) if e > common), len(ref.steps) - 1)
    step = ref.steps[i]
    # A shorter text is fine only where the reference ends the answer (the server stopped at EOS);
    # all tokens generated ("length") but less text means special or empty tokens: a divergence.
    if common == len(text) and step.token in eos_tokens and got.finish_reason != "length":
        return ReferenceCheck(True, f"{ref.prompt!r}: text matches for {i} tokens, then the server stopped")
    gap = _gap(step, None)
    if gap < tol.tie_gap:
        return ReferenceCheck(
            True,
            f"{ref.prompt!r}: text departs at token {i} where the reference is a near tie "
            f"(gap {gap:.3f} < {tol.tie_gap})",
        )
    return ReferenceCheck(
        False,
        f"{ref.prompt!r}: text departs at token {i}: reference {step.token!r} (ahead by "
        f"{gap:.2f}), server {text[common : common + 12]!r}; greedy text {text[:40]!r} vs reference "
        f"{want[:40]!r}",
    )


def compare(ref: Reference, outputs: list[ServerOutput], tol: Tolerance) -> ReferenceCheck:
    """Every prompt's verdict; the first failure decides (a NaN is reported as such)."""
    eos_tokens: set[str] = set()
    for p in ref.prompts:
        eos_tokens |= {s.token for s in p.steps if s.token_id in ref.eos_token_ids}
    verdicts = [compare_prompt(p, o, tol, eos_tokens) for p, o in zip(ref.prompts, outputs, strict=True)]
    bad = [v for v in verdicts if not v.passed]
    if bad:
        kind = "nan" if any(v.kind == "nan" for v in bad) else "disagree"
        return ReferenceCheck(
            False,
            f"{len(bad)} of {len(verdicts)} prompts differ from the reference "
            f"({tol.precision} tolerances): " + "; ".join(v.detail for v in bad[:2]),
            kind,
        )
    ties = sum("tie-break" in v.detail or "near tie" in v.detail for v in verdicts)
    return ReferenceCheck(
        True,
        f"{len(verdicts)} prompts agree with the reference ({tol.precision} tolerances"
        + (f"; {ties} within a tie-break" if ties else "")
        + ")",
    )
