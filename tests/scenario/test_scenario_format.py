"""The scenario file format, conditions and the effective configuration (in-process, fast)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bringup.knowledge.conditions import ConditionError, compile_condition, values_equal
from bringup.scenario import ScenarioError, bundled_scenarios, load_scenario, scenario_path
from bringup.scenario.config import compute_config, decide, non_default_args, server_args_repr
from bringup.scenario.engine_args import help_for, parse_engine_argv
from tests.paths import ROOT

GLM = scenario_path("glm5-nvfp4-sm120")
MODEL_CARD = [
    "--model-path",
    "zai-org/GLM-5-NVFP4",
    "--tp",
    "8",
    "--quantization",
    "modelopt_fp4",
    "--attention-backend",
    "flashinfer",
    "--moe-runner-backend",
    "flashinfer_cutlass",
    "--kv-cache-dtype",
    "fp8_e4m3",
]
FACT_KEYS = {
    "gpu.name",
    "gpu.count",
    "gpu.compute_capability",
    "gpu.memory_gib",
    "gpu.smem_per_block_kib",
    "gpu.link",
    "device",
    "model.architecture",
    "model.model_type",
    "model.attention",
    "model.moe",
    "model.quantization",
    "model.weights_gib",
    "model.layers",
    "model.max_context",  # the context a real model folder declares (config.json), as doctor reads it
    "engine.name",
    "engine.version",
}


def config_for(path: Path, argv: list[str], env: dict[str, str] | None = None):
    sc = load_scenario(path)
    spec, text = help_for(sc.engine, sc.engine_version)
    req = parse_engine_argv(argv, spec, sc.engine, text)
    cfg = compute_config(sc, spec, req.flags, req.positionals, env or {})
    return sc, cfg, decide(sc, cfg)


# -- shipped scenarios and facts ------------------------------------------------------------
def test_shipped_scenarios_load_with_exact_fact_keys():
    paths = bundled_scenarios()
    assert len(paths) >= 5
    engines = set()
    for p in paths:
        sc = load_scenario(p)
        facts = sc.facts()
        assert set(facts) == FACT_KEYS, p
        assert isinstance(facts["gpu.compute_capability"], float)
        assert facts["device"] == "cuda"
        assert sc.answers, f"{p.name} has no known-answer prompt"
        engines.add(sc.engine)
    assert engines == {"sglang", "vllm"}


def test_glm_facts_describe_the_seeds_machine_and_model():
    f = load_scenario(GLM).facts()
    assert f["gpu.compute_capability"] == 12.0 and f["gpu.count"] == 8 and f["gpu.memory_gib"] > 90
    assert f["gpu.smem_per_block_kib"] == 99
    assert f["model.architecture"] == "GlmMoeDsaForCausalLM" and f["model.attention"] == "dsa"
    assert f["model.moe"] is True and f["model.quantization"] == "nvfp4"
    assert f["engine.name"] == "sglang" and f["engine.version"] == "0.5.10.post1"


# -- conditions -------------------------------------------------------------------------------
def _cond(raw, where="when"):
    return compile_condition(raw, lambda k: k if k.startswith("env:") else "--" + k, where)


def test_condition_numbers_lists_and_operators():
    cfg = {
        "--mem-fraction-static": "0.95",
        "--tp-size": 8,
        "--disable-cuda-graph": True,
        "--kv-cache-dtype": "fp8_e4m3",
        "--quantization": None,
    }

    def holds(raw):
        return _cond(raw).holds(lambda t: cfg.get(t) if not t.startswith("env:") else {"X": "0"}.get(t[4:]))

    assert holds({"mem-fraction-static": 0.95})  # "0.95" from the command line equals the YAML number
    assert holds({"mem-fraction-static": {"gt": 0.9, "le": "0.95"}})
    assert not holds({"mem-fraction-static": {"gt": 0.95}})
    assert holds({"kv-cache-dtype": ["bf16", "fp8_e4m3"]})  # a list is any-of
    assert not holds({"kv-cache-dtype": {"not_in": ["fp8_e4m3"]}})
    assert holds({"disable-cuda-graph": True}) and not holds({"disable-cuda-graph": False})
    assert holds({"quantization": {"absent": True}}) and not holds({"quantization": {"present": True}})
    assert holds({"quantization": {"ne": "fp8"}})  # an unset value differs from any value
    assert not holds({"quantization": {"gt": 1}})  # and is never greater or smaller
    assert holds({"env:X": 0}) and not holds({"env:X": {"ne": 0}}) and holds({"env:MISSING": {"ne": 0}})
    assert holds([{"tp-size": 4}, {"tp-size": 8}]) and not holds([{"tp-size": 4}, {"tp-size": 2}])
    assert holds({"tp-size": 8, "kv-cache-dtype": "fp8_e4m3"}) and not holds(
        {"tp-size": 8, "kv-cache-dtype": "auto"}
    )
    assert _cond(None).holds(lambda t: None)  # no condition: always


def test_values_equal_is_what_a_command_line_reader_means():
    assert values_equal("8", 8) and values_equal(8.0, "8") and not values_equal("8", "08x")
    assert values_equal(None, False) and values_equal(False, None) and not values_equal(None, 0)
    assert values_equal(["a", "b"], ("a", "b")) and not values_equal(["a"], "b")


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"tp": {"between": [1, 2]}}, "unknown operator 'between'"),
        ({"tp": {"gt": "lots"}}, "gt needs a number"),
        ({"tp": {"present": "yes"}}, "present takes true or false"),
        ({"tp": {"in": 3}}, "in takes a list"),
        ([], "an empty list matches nothing"),
        ("tp=8", "expected a mapping"),
    ],
)
def test_bad_conditions_name_the_field(raw, message):
    with pytest.raises(ConditionError) as e:
        _cond(raw, "rules[2].when")
    assert message in str(e.value) and str(e.value).startswith("rules[2].when")


def test_condition_keys_resolve_aliases_and_prefixes(tmp_path):
    body = GLM.read_text().replace("when: {tp-size: {lt: 8}", "when: {tp: {lt: 8}")
    p = tmp_path / "alias.yaml"
    p.write_text(body)
    for path in (GLM, p):  # tp-size is an alias, tp a unique prefix of it: both are --tensor-parallel-size
        sc = load_scenario(path)
        rule = next(r for r in sc.rules if r.id == "tp-too-small")
        assert rule.condition.targets == {"--tensor-parallel-size", "--json-model-override-args"}


# -- invalid scenarios: every error names the file, the field and what is wrong ----------------------
MINIMAL = """\
name: t
description: d
engine: sglang
engine_version: 0.5.10.post1
hardware: {gpu: G, compute_capability: 12.0, count: 1, memory_gib: 96}
model: {name: m, architecture: A, model_type: a, attention: gqa, weights_gib: 10, layers: 4}
"""


@pytest.mark.parametrize(
    "extra, field, message",
    [
        ("colour: blue\n", "colour", "unknown key"),
        (
            "rules:\n  - when: {nsa-decode-backnd: trtllm}\n    serve: {mode: ok}\n",
            "rules[0].when.nsa-decode-backnd",
            "unknown flag --nsa-decode-backnd for sglang 0.5.10.post1 (did you mean --nsa-decode-backend",
        ),
        ("rules:\n  - fail: {phase: loading, lines: [x]}\n", "rules[0].fail.phase", "Input should be"),
        ("rules:\n  - when: {tp: 8}\n", "rules[0]", "exactly one of fail, hang, serve (has: none)"),
        (
            "rules:\n  - serve: {mode: ok}\n    hang: {phase: warmup}\n",
            "rules[0]",
            "exactly one of fail, hang, serve (has: hang, serve)",
        ),
        (
            "rules:\n  - when: {tp: {approx: 8}}\n    serve: {mode: ok}\n",
            "rules[0].when.tp.approx",
            "unknown operator",
        ),
        (
            "rules:\n  - fail: {phase: warmup, lines: [x], after_tokens: 3}\n",
            "rules[0].fail",
            "after_tokens applies to phase decode only",
        ),
        (
            "rules:\n  - {id: a, serve: {mode: ok}}\n  - {id: a, serve: {mode: garbage}}\n",
            "rules[1].id",
            "duplicate id 'a'",
        ),
        (
            "defaults:\n  - set: {kv-cache-dtype: fp9}\n",
            "defaults[0].set.kv-cache-dtype",
            "'fp9' is not a choice of --kv-cache-dtype",
        ),
        ("force:\n  - set: {disable-cuda-graph: 'yes'}\n", "force[0].set.disable-cuda-graph", "is a switch"),
        (
            "force:\n  - set: {mem-fraction-static: high}\n",
            "force[0].set.mem-fraction-static",
            "needs a float",
        ),
        ("warnings:\n  - log: [x]\n    at: lunchtime\n", "warnings[0].at", "Input should be"),
        ("serve_mode: ok\n", "serve_mode", "unknown key"),
    ],
)
def test_invalid_scenarios_name_file_and_field(tmp_path, extra, field, message):
    p = tmp_path / "bad.yaml"
    p.write_text(MINIMAL + extra)
    with pytest.raises(ScenarioError) as e:
        load_scenario(p)
    text = str(e.value)
    assert text.startswith(str(p)), text
    assert f"{field}:" in text and message in text, text


def test_unknown_engine_version_lists_the_bundled_captures(tmp_path):
    p = tmp_path / "v.yaml"
    p.write_text(MINIMAL.replace("0.5.10.post1", "0.5.99"))
    with pytest.raises(ScenarioError) as e:
        load_scenario(p)
    assert "engine_version: no help capture for sglang 0.5.99" in str(e.value)
    assert "sglang 0.5.10.post1" in str(e.value) and "sglang 0.5.23" in str(e.value)
    p.write_text(
        MINIMAL.replace("0.5.10.post1", "0.5.1")
    )  # a prefix of a bundled version is not that version
    with pytest.raises(ScenarioError, match="no help capture for sglang 0.5.1;"):
        load_scenario(p)


def test_not_yaml_and_missing_file(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(ScenarioError, match=r"broken.yaml: not valid YAML"):
        load_scenario(p)
    with pytest.raises(ScenarioError, match="file not found"):
        load_scenario(tmp_path / "nope.yaml")


# -- effective configuration ------------------------------------------------------------------------
def test_defaults_and_forced_values_make_the_effective_config():
    sc, cfg, rule = config_for(
        GLM, [*MODEL_CARD[:-2], "--kv-cache-dtype", "bf16", "--mem-fraction-static", "0.88"]
    )
    assert cfg.forced["--kv-cache-dtype"] == ("bf16", "fp8_e4m3")  # forced whatever was asked
    assert cfg.forced["--attention-backend"] == ("flashinfer", "nsa")
    assert cfg.get("--nsa-decode-backend") == "flashmla_kv" and "--nsa-decode-backend" in cfg.defaulted
    assert any("Setting KV cache dtype to fp8_e4m3" in t for t in cfg.log_templates)
    assert rule is not None and rule.id == "nan-in-flashmla-decode"
    text = server_args_repr(cfg)
    assert text.startswith("ServerArgs(model_path='zai-org/GLM-5-NVFP4', ")
    for piece in (
        "tp_size=8",
        "kv_cache_dtype='fp8_e4m3'",
        "nsa_decode_backend='flashmla_kv'",
        "attention_backend='nsa'",
        "mem_fraction_static=0.88",
        "page_size=64",
        "disable_cuda_graph=False",
        "host='127.0.0.1'",
        "served_model_name='zai-org/GLM-5-NVFP4'",
    ):
        assert piece in text, piece
    fields = re.findall(r"(?:\(|, )([a-z0-9_]+)=", text)
    assert len(fields) == len(set(fields)) >= len(sc.help_spec().options) - 5  # every option, once


def test_requested_wins_over_a_default_but_not_over_force():
    _, cfg, rule = config_for(
        GLM,
        [
            *MODEL_CARD,
            "--mem-fraction-static",
            "0.88",
            "--nsa-decode-backend",
            "trtllm",
            "--nsa-prefill-backend",
            "trtllm",
        ],
    )
    assert cfg.get("--nsa-decode-backend") == "trtllm" and "--nsa-decode-backend" not in cfg.defaulted
    assert rule is None  # the seeds' attempt 7 serves


@pytest.mark.parametrize(
    "extra, rule_id",
    [
        (["--mem-fraction-static", "0.95"], "oom-graph-capture"),  # seeds attempt 1
        (["--mem-fraction-static", "0.88"], "nan-in-flashmla-decode"),  # attempt 2
        (
            [
                "--mem-fraction-static",
                "0.88",
                "--attention-backend",
                "triton",
                "--sampling-backend",
                "pytorch",
            ],
            "plain-kv-write-with-fp8-nsa-store",
        ),  # attempt 3
        (
            ["--mem-fraction-static", "0.88", "--nsa-decode-backend", "flashmla_sparse"],
            "nan-in-flashmla-decode",
        ),
        (["--mem-fraction-static", "0.88", "--fp8-gemm-backend", "cutlass"], "nan-in-flashmla-decode"),
        (["--mem-fraction-static", "0.88", "--disable-cuda-graph"], "nan-in-flashmla-decode"),
        (
            [
                "--mem-fraction-static",
                "0.88",
                "--nsa-decode-backend",
                "trtllm",
                "--nsa-prefill-backend",
                "trtllm",
            ],
            None,
        ),
        (
            ["--mem-fraction-static", "0.95", "--disable-cuda-graph"],
            "nan-in-flashmla-decode",
        ),  # no graphs, no graph OOM
        (["--mem-fraction-static", "0.88", "--nsa-decode-backend", "fa3"], "fa3-needs-sm90"),
        (
            [
                "--mem-fraction-static",
                "0.95",
                "--load-format",
                "dummy",
                "--json-model-override-args",
                '{"num_hidden_layers": 2}',
            ],
            "nan-in-flashmla-decode",
        ),  # screening: same kernel failure, no OOM
        (["--mem-fraction-static", "0.5"], "not-enough-memory"),
        (["--mem-fraction-static", "0.88", "--quantization", "fp8"], "quantization-mismatch"),
    ],
)
def test_seed_attempts_decide_like_the_seeds(extra, rule_id):
    base = list(MODEL_CARD)
    if "--quantization" in extra:
        i = base.index("--quantization")
        base = base[:i] + base[i + 2 :]
    _, _, rule = config_for(GLM, [*base, *extra])
    assert (rule.id if rule else None) == rule_id


def test_env_conditions_read_the_server_environment():
    sc, cfg, _ = config_for(GLM, MODEL_CARD, env={"SGLANG_ENABLE_JIT_DEEPGEMM": "0"})
    warn = next(w for w in sc.warnings if w.at == "load-weights")
    assert not warn.condition.holds(cfg.lookup)
    _, cfg2, _ = config_for(GLM, MODEL_CARD, env={})
    assert warn.condition.holds(cfg2.lookup)


def test_vllm_non_default_args_are_typed_and_keyed_by_dest():
    path = scenario_path("deepseek-v2-lite-sm120-vllm")
    _, cfg, rule = config_for(
        path,
        [
            "--model",
            "deepseek-ai/DeepSeek-V2-Lite-Chat",
            "-tp",
            "1",
            "--max-model-len",
            "32k",
            "--served-model-name",
            "dsv2",
            "--trust-remote-code",
            "--kv-cache-dtype",
            "fp8",
            "--hf-overrides",
            '{"num_hidden_layers": 2}',
        ],
    )
    nd = non_default_args(cfg)
    assert nd["model"] == "deepseek-ai/DeepSeek-V2-Lite-Chat" and nd["max_model_len"] == 32000
    assert nd["served_model_name"] == ["dsv2"] and nd["trust_remote_code"] is True
    assert nd["hf_overrides"] == {"num_hidden_layers": 2}  # JSON options become dicts, as in vLLM
    assert "tensor_parallel_size" not in nd  # 1 is the default: not a non-default arg
    assert cfg.layer_override() == 2 and rule is not None and rule.id == "no-valid-backend"


def test_check_command_prints_summary_and_decision():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bringup.scenario",
            "check",
            str(GLM),
            "--",
            *MODEL_CARD,
            "--mem-fraction-static",
            "0.95",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert "engine   sglang 0.5.10.post1" in out.stdout
    assert "forced    --attention-backend flashinfer -> nsa" in out.stdout
    assert re.search(r"decision  fail in graph-capture: Exception: Capture cuda graph failed", out.stdout)


def test_check_command_rejects_a_bad_scenario(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(
        MINIMAL
        + textwrap.dedent("""\
        rules:
          - when: {nsa-decode-backnd: trtllm}
            serve: {mode: ok}
    """)
    )
    out = subprocess.run(
        [sys.executable, "-m", "bringup.scenario", "check", str(p)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 1
    assert f"invalid: {p}: rules[0].when.nsa-decode-backnd: unknown flag" in out.stderr
