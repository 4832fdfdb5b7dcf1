from bringup.core.candidate import parse_flags
from bringup.engines import get_engine
from bringup.help.text import bundled_help
from bringup.observe.effective import (
    normalise,
    parse_engine_config,
    parse_kv_repr,
    parse_non_default_args,
    parse_server_args,
)
from tests.paths import DATA

LOGS = DATA / "logs"


def test_server_args_repr():
    line = (
        "[2026-02-18 23:31:02] server_args=ServerArgs(model_path='zai-org/GLM-5-NVFP4', tp_size=8, "
        "kv_cache_dtype='fp8_e4m3', mem_fraction_static=0.88, json_model_override_args='{\"a\": 1}', "
        "cuda_graph_bs=[1, 2, 4], dtype=torch.bfloat16, lora_paths=None)"
    )
    v = parse_server_args(line)
    assert v["tp_size"] == 8 and v["mem_fraction_static"] == 0.88
    assert v["json_model_override_args"] == '{"a": 1}'
    assert v["cuda_graph_bs"] == [1, 2, 4] and v["dtype"] == "torch.bfloat16" and v["lora_paths"] is None


def test_vllm_lines():
    nd = parse_non_default_args(
        "(APIServer pid=1) INFO 11-29 13:30:31 [api_utils.py:286] non-default args: "
        "{'port': 18005, 'model': '/tmp/tm64', 'attention_backend': 'FLASH_ATTN'}"
    )
    assert nd == {"port": 18005, "model": "/tmp/tm64", "attention_backend": "FLASH_ATTN"}
    cfg = parse_engine_config(
        "(EngineCore pid=2) INFO [core.py:133] Initializing a V1 LLM engine (v0.32.0) with "
        "config: model='/tmp/tm64', dtype=torch.bfloat16, max_seq_len=2048, "
        "compilation_config={'mode': <CompilationMode.X: 2>, 'a': [1]}, enforce_eager=False"
    )
    assert cfg["max_seq_len"] == 2048 and cfg["enforce_eager"] is False and cfg["dtype"] == "torch.bfloat16"
    assert "compilation_config" in cfg


def test_kv_repr_handles_nesting_and_quotes():
    v = parse_kv_repr("a='x, y', b=Foo(c=1, d=[2, 3]), e={'k': (1, 2)}, f=3")
    assert v["a"] == "x, y" and v["f"] == 3 and v["e"] == {"k": (1, 2)} and v["b"].startswith("Foo(")


def test_normalise_compares_cli_strings_with_reprs():
    assert normalise("0.88") == normalise(0.88)
    assert normalise(True) == normalise("True")
    assert normalise("fp8_e4m3") != normalise("auto")


def test_sglang_override_detected_from_server_args():
    """The seeds' trap: asked for one thing, the engine printed another in server_args."""
    spec = bundled_help("sglang", "0.5.10.post1")
    lines = (LOGS / "sglang-nsa-fp8-assert.log").read_text().splitlines()
    requested = parse_flags(
        "--kv-cache-dtype auto --attention-backend triton --mem-fraction-static 0.88", spec
    )
    eff = get_engine("sglang").effective(lines, requested, spec)
    flags = {o.flag: (o.requested, o.effective) for o in eff.overrides}
    assert flags == {"--kv-cache-dtype": ("auto", "fp8_e4m3")}
    assert eff.values["nsa_decode_backend"] == "flashmla_kv"


def test_sglang_0_5_23_server_args_dict_from_a_real_log():
    """SGLang 0.5.23 prints ``server_args={...}`` (a dict literal of the resolved arguments), not
    ``ServerArgs(...)``: the real line of a CPU launch (tests/data/logs/sglang-cpu-no-vllm.log)."""
    spec = bundled_help("sglang", "0.5.23")
    lines = (LOGS / "sglang-cpu-no-vllm.log").read_text().splitlines()
    line = next(ln for ln in lines if "server_args={" in ln)
    v = parse_server_args(line)
    assert v is not None and len(v) > 500
    assert v["attention_backend"] == "torch_native" and v["device"] == "cpu" and v["tp_size"] == 1
    assert v["model_path"] == "/tmp/sgl-tiny" and v["mem_fraction_static"] == 0.716
    requested = parse_flags("--device cpu --attention-backend torch_native", spec)
    eff = get_engine("sglang").effective(lines, requested, spec)
    assert eff.source_lines == [line.rstrip()]
    assert eff.values["tensor_parallel_size"] == 1  # tp_size, under the CLI dest (config_aliases)
    # --cuda-graph-backend-decode folds into cuda_graph_config.decode.backend: torch_native turned
    # CUDA graphs off there while the flat field stayed None (engines.yaml config_paths).
    assert eff.values["cuda_graph_backend_decode"] == "disabled"
    assert eff.values["cuda_graph_backend_prefill"] == "disabled"
    assert eff.overrides == []  # what was asked is what it used
    asked_graphs = parse_flags(
        "--device cpu --attention-backend torch_native --cuda-graph-backend-decode full", spec
    )
    over = get_engine("sglang").effective(lines, asked_graphs, spec).overrides
    assert [(o.flag, o.requested, o.effective) for o in over] == [
        ("--cuda-graph-backend-decode", "full", "disabled")
    ]
    assert "cuda_graph_config.decode.backend='disabled'" in over[0].evidence


def test_sglang_dict_with_non_literal_values_falls_back_to_pairs():
    v = parse_server_args("server_args={'dtype': torch.bfloat16, 'tp_size': 2, 'x': [1, 2]}")
    assert v == {"dtype": "torch.bfloat16", "tp_size": 2, "x": [1, 2]}


def test_a_dtype_asked_by_its_other_name_is_no_override():
    """vLLM's --dtype takes half and float, and its config line prints torch.float16 and
    torch.float32: the same dtypes (PyTorch's aliases), not the engine overriding what was asked.
    Read as an override, one launch froze --dtype at float16 for the rest of a search, so a later
    bfloat16 counted as float16 (dev2 case 61)."""
    from bringup.observe.effective import find_overrides, normalise

    assert normalise("half") == normalise("torch.float16") == "float16"
    assert normalise("float") == normalise("torch.float32") == "float32"
    assert normalise("bfloat16") == "bfloat16" != normalise("half")
    assert find_overrides({"--dtype": "half"}, {"dtype": "torch.float16"}, None, {}) == []
    assert [
        o.flag for o in find_overrides({"--dtype": "bfloat16"}, {"dtype": "torch.float16"}, None, {})
    ] == ["--dtype"]


def test_a_json_flag_vllm_prints_back_with_enum_members_is_not_an_override() -> None:
    """vLLM prints its compilation config with enum members in it ("'mode': <CompilationMode.
    DYNAMO_TRACE_ONCE: 2>", a real CPU log's line), which no literal parser reads: a user's
    -cc '{"max_cudagraph_capture_size": 2048}' printed back whole, 2048 kept, was taken for an
    override of their flag; a printed 512 still is one."""
    from pathlib import Path

    from bringup.observe.effective import same_value

    log = (Path(__file__).parents[1] / "data" / "logs" / "vllm-cpu-block-size-17.log").read_text()
    start = log.index("compilation_config={") + len("compilation_config=")
    depth, end = 0, start
    for i, ch in enumerate(log[start:], start):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth == 0:
            end = i
            break
    printed = log[start : end + 1]
    assert "<CompilationMode." in printed and "<CUDAGraphMode.NONE: 0>" in printed
    assert same_value('{"cudagraph_mode": "NONE"}', printed)  # the member's name, as a user gives it
    assert not same_value('{"cudagraph_mode": "FULL"}', printed)
    asked = '{"max_cudagraph_capture_size": 2048}'
    used = "{'mode': <CompilationMode.VLLM_COMPILE: 3>, 'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, 'max_cudagraph_capture_size': 2048}"
    assert same_value(asked, used)
    assert not same_value(asked, used.replace("2048", "512"))
