"""A tiny model whose answers are known: trained on CPU on a synthetic language (reversal).

The language is "rev x y z" -> "z y x" over a few letters, in the chat template's format, so a
served model's greedy chat answer is checkable. Training is seeded and small (about a minute on
two cores); the known answers go next to the model in bringup_answers.json, which bringup
run/trial read (bringup/engines/targets.py).
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

from bringup.guard import files
from bringup.verify.reference import ANSWERS_FILE

LETTERS = "abcdefgh"
KNOWN = [("rev a b c", "c b a"), ("rev h g d", "d g h"), ("rev b e f", "f e b"), ("rev c a h", "h a c")]


def synthetic_corpus() -> str:
    """Text the tokenizer learns the language's words from (every triple once)."""
    return "\n".join(f"rev {a} {b} {c} {c} {b} {a}" for a, b, c in itertools.product(LETTERS, repeat=3))


def chat(prompt: str) -> str:
    """The chat template's rendering of one user turn (testmodel.CHAT_TEMPLATE), ready for the answer."""
    return f"<|user|>\n{prompt}</s>\n<|assistant|>\n"


def train_known(model_dir: Path, steps: int = 200, seed: int = 0, lr: float = 5e-3) -> dict[str, str]:
    """Train the random model in model_dir in place; write and return its known answers.

    Loss is on the answer tokens only (the prompt is given), which makes a few hundred steps
    enough. Raises RuntimeError if the trained model does not answer every known prompt.

    On one torch thread, the process's own setting put back after: the model is tiny, so a second
    thread buys nothing on a quiet machine (9.7 s against 10.1 s here), and beside a CPU-heavy load
    two threads that wait on each other collapse (45 s against 17 s with two busy loops on 2 cores,
    over 600 s inside the loaded `.ci/run`, issue 28).
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train_known(model_dir, steps, seed, lr)
    finally:
        torch.set_num_threads(threads)


def _train_known(model_dir: Path, steps: int, seed: int, lr: float) -> dict[str, str]:
    import torch
    from safetensors.torch import save
    from transformers import AutoTokenizer, LlamaForCausalLM

    torch.manual_seed(seed)
    rng = random.Random(seed)
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = LlamaForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    model.train()
    triples = list(itertools.product(LETTERS, repeat=3))

    def example(t: tuple[str, ...]) -> tuple[list[int], int]:
        prompt = tok(chat("rev " + " ".join(t)), add_special_tokens=False).input_ids
        answer = tok(" ".join(reversed(t)) + "</s>", add_special_tokens=False).input_ids
        return prompt + answer, len(prompt)

    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    for _ in range(steps):
        batch = [example(rng.choice(triples)) for _ in range(32)]
        n = max(len(ids) for ids, _ in batch)
        pad = tok.pad_token_id or 0
        ids = torch.tensor([x + [pad] * (n - len(x)) for x, _ in batch])
        labels = ids.clone()
        for i, (x, p) in enumerate(batch):
            labels[i, :p] = -100
            labels[i, len(x) :] = -100
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    model.eval()
    answers = {p: e for p, e in KNOWN}
    wrong = {p: got for p, e in KNOWN if (got := greedy_chat(model, tok, p)) != e}
    if wrong:
        raise RuntimeError(f"the trained model answers {wrong} (final loss {loss.item():.3f}); train longer")
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    files.write_bytes(model_dir / "model.safetensors", save(state, metadata={"format": "pt"}), atomic=True)
    files.write_text(model_dir / ANSWERS_FILE, json.dumps(answers, indent=2))
    return answers


def greedy_chat(model, tok, prompt: str, max_tokens: int = 12) -> str:
    """The model's greedy answer to one chat turn, up to its end-of-sequence token."""
    import torch

    ids = tok(chat(prompt), add_special_tokens=False, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(
            ids,
            max_new_tokens=max_tokens,
            do_sample=False,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.eos_token_id,
        )
    return tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True).strip()


FP16_MAX = 65504.0


def scale_for_fp16_overflow(model_dir: Path) -> int:
    """Rescale the MLPs so float16 overflows while bfloat16 and float32 compute the same model.

    up_proj is multiplied by 2^k and down_proj by 2^-k: the product is unchanged and powers of two
    scale exactly in every float format, so float32 and bfloat16 outputs do not move. The MLP's
    intermediate activations grow 2^k-fold: past 65504 they are inf in float16 (then NaN after
    the next norm), with no error anywhere. k is the largest that keeps the up_proj weights
    themselves finite in float16, so only activations overflow. Returns k.
    """
    import torch
    from safetensors.torch import load_file, save

    path = model_dir / "model.safetensors"
    state = load_file(str(path))
    ups = [k for k in state if k.endswith("mlp.up_proj.weight")]
    wmax = max(float(state[k].abs().max()) for k in ups)
    k = 0
    while wmax * 2 ** (k + 1) < FP16_MAX / 4 and k < 24:
        k += 1
    for name in ups:
        state[name] = state[name] * 2.0**k
        down = name.replace("up_proj", "down_proj")
        state[down] = state[down] * 2.0**-k
    weights = {n: t.contiguous().to(torch.float32) for n, t in state.items()}
    files.write_bytes(path, save(weights, metadata={"format": "pt"}), atomic=True)
    return k
