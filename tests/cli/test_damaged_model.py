"""Issue 28, row 5: never destroy a user's files; a damaged model is refused first.

`bringup testmodel DIR` silently replaced an existing model's config.json and weights; `plan`
said "fits" for a model with one damaged shard of two (and "does-not-fit" when it was intact),
`model` printed a fingerprint, `reference` gave a traceback.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bringup.cli import app

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "intermediate_size": 128,
    "vocab_size": 512,
    "max_position_embeddings": 256,
    "torch_dtype": "bfloat16",
}


def _shard(path: Path, name: str, n: int, data: int | None = None, header: bytes | None = None) -> None:
    hb = header or json.dumps({name: {"dtype": "BF16", "shape": [n], "data_offsets": [0, 2 * n]}}).encode()
    path.write_bytes(struct.pack("<Q", len(hb)) + hb + b"\0" * (2 * n if data is None else data))


@pytest.fixture(params=["truncated", "bad-header"])
def damaged(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str, str]:
    """A two-shard model whose second shard is cut short or has a header that is not JSON."""
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(CONFIG))
    _shard(d / "model-00001-of-00002.safetensors", "a", 1000)
    second = d / "model-00002-of-00002.safetensors"
    if request.param == "truncated":
        _shard(second, "b", 5000, data=100)
        damage = "cut short"
    else:
        _shard(second, "b", 10, header=b"{not json" + b" " * 40)
        damage = "header"
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    return d, second.name, damage


def _invoke(args: list[str]) -> tuple[int, str]:
    r = CliRunner().invoke(app, args)
    return r.exit_code, " ".join((r.output + (r.stderr if r.stderr_bytes is not None else "")).split())


@pytest.mark.parametrize(
    "command",
    [
        ["plan", "{m}", "--mem-fraction", "0.9", "--gpu-mem-gib", "80", "--cc", "9.0", "--gpus", "1"],
        ["model", "{m}"],
        ["reference", "{m}", "--out", "{m}/../ref.json"],
        ["trial", "--engine", "vllm", "--model", "{m}"],
    ],
    ids=["plan", "model", "reference", "trial"],
)
def test_a_damaged_model_is_refused_first(damaged: tuple[Path, str, str], command: list[str]) -> None:
    d, shard, damage = damaged
    rc, out = _invoke([a.replace("{m}", str(d)) for a in command])
    assert rc == 2, out
    assert shard in out.replace(" ", "") and damage in out, out
    assert "Traceback" not in out and not (d.parent / "ref.json").exists()


def test_testmodel_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    d = tmp_path / "mine"
    d.mkdir()
    (d / "config.json").write_text('{"mine": true}')
    rc, out = _invoke(["testmodel", str(d)])
    assert rc == 2 and "not empty" in out and "--force" in out and "config.json" in out, out
    assert (d / "config.json").read_text() == '{"mine": true}'  # untouched
    f = tmp_path / "afile"
    f.write_text("x")
    rc, out = _invoke(["testmodel", str(f)])
    assert rc == 2 and "is a file" in out and f.read_text() == "x"


@pytest.mark.slow
def test_testmodel_force_replaces(tmp_path: Path) -> None:
    d = tmp_path / "mine"
    d.mkdir()
    (d / "config.json").write_text('{"mine": true}')
    rc, out = _invoke(["testmodel", str(d), "--force"])
    assert rc == 0, out
    assert json.loads((d / "config.json").read_text()).get("model_type") == "llama"
