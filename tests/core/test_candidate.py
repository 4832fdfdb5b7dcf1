import pytest

from bringup.core.candidate import Candidate, FlagError, parse_flags, render_flags
from bringup.help.text import bundled_help

SG = bundled_help("sglang", "0.5.10.post1")
VL = bundled_help("vllm", "0.32.0")
CARD = (
    "--tp 8 --quantization modelopt_fp4 --attention-backend flashinfer --moe-runner-backend "
    "flashinfer_cutlass --kv-cache-dtype fp8_e4m3 --mem-fraction-static 0.95"
)


def test_model_card_baseline_canonicalises():
    flags = parse_flags(CARD, SG)
    assert flags["--tensor-parallel-size"] == "8"
    assert flags["--mem-fraction-static"] == "0.95"
    # the same configuration spelled differently is the same candidate
    other = parse_flags(CARD.replace("--tp 8", "--tp-size=8"), SG)
    assert Candidate.make("sglang", "m", flags).key() == Candidate.make("sglang", "m", other).key()


def test_switches_and_negation_render_back():
    flags = parse_flags(["--no-enforce-eager", "--gpu-memory-utilization=0.5", "--api-key", "a", "b"], VL)
    assert flags == {"--enforce-eager": False, "--gpu-memory-utilization": "0.5", "--api-key": ("a", "b")}
    assert render_flags(flags) == [
        "--no-enforce-eager",
        "--gpu-memory-utilization",
        "0.5",
        "--api-key",
        "a",
        "b",
    ]
    sw = parse_flags(["--disable-cuda-graph", "--mem-fraction-static", "0.8"], SG)
    assert sw == {"--disable-cuda-graph": True, "--mem-fraction-static": "0.8"}


def test_argparse_shaped_errors():
    with pytest.raises(FlagError, match=r"invalid choice: 'nonsense' \(choose from 'auto', 'bfloat16'"):
        parse_flags("--kv-cache-dtype nonsense", VL)
    with pytest.raises(FlagError, match="unrecognized arguments: --nsa-decode-backend"):
        parse_flags("--nsa-decode-backend trtllm", bundled_help("sglang", "0.5.23"))
    with pytest.raises(FlagError, match="expected one argument"):
        parse_flags("--mem-fraction-static", SG)
    with pytest.raises(FlagError, match="ambiguous option"):
        parse_flags("--mod x", SG)


def test_negative_numbers_are_values_without_spec():
    assert parse_flags("--x -1 --y", None) == {"--x": "-1", "--y": True}


def test_diff_and_changes():
    base = Candidate.make("sglang", "m", parse_flags(CARD, SG))
    fix = base.with_changes(
        {
            "--mem-fraction-static": "0.88",
            "--nsa-decode-backend": "trtllm",
            "env:SGLANG_ENABLE_JIT_DEEPGEMM": "0",
        }
    )
    changes = fix.diff(base)
    assert [c.flag for c in changes] == [
        "--mem-fraction-static",
        "--nsa-decode-backend",
        "env:SGLANG_ENABLE_JIT_DEEPGEMM",
    ]
    assert fix.describe_diff(base) == (
        "--mem-fraction-static 0.88, --nsa-decode-backend trtllm, env:SGLANG_ENABLE_JIT_DEEPGEMM 0"
    )
    assert base.describe_diff(base) == "(baseline)"
    assert fix.with_changes({"--nsa-decode-backend": None}).flag_dict.get("--nsa-decode-backend") is None
    assert Candidate.from_json(fix.to_json()).key() == fix.key()
    assert "SGLANG_ENABLE_JIT_DEEPGEMM=0 python -m sglang.launch_server" in fix.shell_command(
        ["python", "-m", "sglang.launch_server"]
    )


def test_a_baseline_with_leading_env_tokens_splits_into_env_and_flags():
    from bringup.core.candidate import parse_command, split_env

    flags, env = parse_command("VLLM_USE_FLASHINFER_SAMPLER=0 NCCL_P2P_DISABLE=1 --max-model-len 16384", VL)
    assert env == {"VLLM_USE_FLASHINFER_SAMPLER": "0", "NCCL_P2P_DISABLE": "1"}
    assert flags == {"--max-model-len": "16384"}
    # only leading tokens are env: a NAME=VALUE after a flag is that flag's value, --x=y is a flag
    env2, rest = split_env(["A=1", "--served-model-name", "B=2", "--max-model-len=8"])
    assert env2 == {"A": "1"} and rest == ["--served-model-name", "B=2", "--max-model-len=8"]
    assert parse_command("--tp 8", SG) == ({"--tensor-parallel-size": "8"}, {})
    with pytest.raises(FlagError):
        parse_command("X=1 stray --tp 8", SG)  # a positional after the env tokens is still an error
