"""The --help parser on the three real captures (SGLang 0.5.10.post1, 0.5.23, vLLM 0.32.0 CPU)."""

from bringup.help.text import bundled_help, bundled_versions, parse_help


def test_sglang_0510_nsa_backends():
    spec = bundled_help("sglang", "0.5.10.post1")
    opt = spec.get("--nsa-decode-backend")
    assert opt is not None
    assert "trtllm" in opt.choices and "flashmla_kv" in opt.choices
    assert opt.choices == [
        "flashmla_sparse",
        "flashmla_kv",
        "flashmla_auto",
        "fa3",
        "tilelang",
        "aiter",
        "trtllm",
    ]
    assert spec.get("--dsa-decode-backend") is None


def test_sglang_0523_renamed_dsa_backends():
    spec = bundled_help("sglang", "0.5.23")
    assert spec.get("--nsa-decode-backend") is None
    dsa = spec.get("--dsa-decode-backend")
    assert dsa is not None and "flashinfer_sparse_mla" in dsa.choices and "trtllm" in dsa.choices
    assert spec.get("--cuda-graph-max-bs-decode").takes_value


def test_vllm_kv_cache_dtype_and_defaults():
    spec = bundled_help("vllm", "0.32.0")
    kv = spec.get("--kv-cache-dtype")
    assert "fp8_e4m3" in kv.choices and kv.default == "auto"
    gmu = spec.resolve("--device-memory-utilization")
    assert gmu.name == "--gpu-memory-utilization" and gmu.default == "0.92"
    assert spec.get("--attention-backend").choices is None  # a free string in vLLM
    assert spec.positionals == ["model_tag"]


def test_aliases_prefixes_and_dest():
    sg = bundled_help("sglang", "0.5.10.post1")
    tp = sg.resolve("--tp")  # argparse allow_abbrev: the model card writes --tp 8
    assert (
        tp.name == "--tensor-parallel-size"
        and "--tp-size" in tp.aliases
        and tp.dest == "tensor_parallel_size"
    )
    assert sg.resolve("--model").name == "--model-path"
    assert len(sg.ambiguous("--mod")) > 1 and sg.resolve("--mod") is None
    vl = bundled_help("vllm", "0.32.0")
    assert vl.resolve("-tp").name == "--tensor-parallel-size"


def test_switches_negatable_and_many():
    vl = bundled_help("vllm", "0.32.0")
    ee = vl.get("--enforce-eager")
    assert ee.negatable and not ee.takes_value and vl.resolve("--no-enforce-eager") is ee
    assert vl.get("--api-key").nargs_many
    tcp = vl.get("--tool-call-parser")
    assert tcp.open_choices and "hermes" in tcp.choices  # "{...} or name registered in ..."
    sg = bundled_help("sglang", "0.5.10.post1")
    dcg = sg.get("--disable-cuda-graph")
    assert not dcg.takes_value and dcg.help == "Disable cuda graph."


def test_counts_and_versions():
    assert len(bundled_help("sglang", "0.5.10.post1").options) > 300
    assert len(bundled_help("sglang", "0.5.23").options) > len(bundled_help("sglang", "0.5.10.post1").options)
    assert set(bundled_versions("sglang")) == {"0.5.10.post1", "0.5.23"}


def test_small_synthetic_help():
    text = """usage: x [-h] [--a {p,q}] [--b B] [--c]

options:
  -h, --help            show this help message and exit
  --a {p,q}             Pick one. (default: p)
  --b B, --bee B        A value
                        spanning lines.
  --c                   A switch.
"""
    spec = parse_help(text)
    assert [o.name for o in spec.options] == ["--a", "--b", "--c"]
    assert spec.get("--a").default == "p"
    assert spec.get("--bee").help == "A value spanning lines."
    assert not spec.get("--c").takes_value
