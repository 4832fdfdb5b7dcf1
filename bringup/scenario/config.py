"""The effective configuration: what the imitated engine really runs with, and how it prints it.

Requested flags come first; then the scenario's `defaults` fill flags that were not given, and
its `force` entries impose values whatever was asked (each printing its log line), in file
order, each entry's condition reading the configuration as built so far. Flags nobody set keep
the engine's own default (vLLM prints them in its help; SGLang's come from a table below).

The result is printed the way each engine prints it, so the trial runner reads it back with the
same parser as a real log: SGLang ``server_args=ServerArgs(...)`` with every option; vLLM
``non-default args: {...}`` (requested only) and ``Initializing a V1 LLM engine ... with config:``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bringup.help.text import HelpOption, HelpSpec
from bringup.scenario.engine_args import literal_default
from bringup.scenario.schema import Entry, Scenario, ScenarioRule

# SGLang's ServerArgs field names where the CLI dest differs (server_args.py from_cli_args maps
# --tensor-parallel-size to tp_size; --fp8-gemm-backend is stored as fp8_gemm_runner_backend).
SGLANG_FIELD = {
    "tensor_parallel_size": "tp_size",
    "pipeline_parallel_size": "pp_size",
    "data_parallel_size": "dp_size",
    "expert_parallel_size": "ep_size",
    "fp8_gemm_backend": "fp8_gemm_runner_backend",
    "fp4_gemm_backend": "fp4_gemm_runner_backend",
}

# SGLang ServerArgs defaults for options whose help prints none (a switch defaults to False, any
# other option to None). Values as a real 0.5.x ServerArgs repr shows them (python/sglang/srt/
# server_args.py dataclass defaults); engine-computed ones (mem_fraction_static, cuda_graph_max_bs,
# chunked_prefill_size) are placeholders a scenario's `defaults` should set for its hardware.
SGLANG_DEFAULTS: dict[str, Any] = {
    "host": "127.0.0.1",
    "port": 30000,
    "tokenizer_mode": "auto",
    "tokenizer_worker_num": 1,
    "load_format": "auto",
    "model_loader_extra_config": "{}",
    "model_impl": "auto",
    "dtype": "auto",
    "kv_cache_dtype": "auto",
    "mem_fraction_static": 0.85,
    "chunked_prefill_size": 8192,
    "max_prefill_tokens": 16384,
    "schedule_policy": "fcfs",
    "schedule_conservativeness": 1.0,
    "page_size": 1,
    "device": "cuda",
    "tensor_parallel_size": 1,
    "tp_size": 1,
    "pipeline_parallel_size": 1,
    "pp_size": 1,
    "data_parallel_size": 1,
    "dp_size": 1,
    "expert_parallel_size": 1,
    "ep_size": 1,
    "stream_interval": 1,
    "watchdog_timeout": 300,
    "log_level": "info",
    "decode_log_interval": 40,
    "json_model_override_args": "{}",
    "lora_backend": "csgmv",
    "max_loras_per_batch": 8,
    "grammar_backend": "xgrammar",
    "sampling_backend": "flashinfer",
    "fp8_gemm_backend": "auto",
    "fp4_gemm_backend": "auto",
    "moe_runner_backend": "auto",
    "moe_a2a_backend": "none",
    "sampling_defaults": "model",
    "weight_version": "default",
    "file_storage_path": "sglang_storage",
    "load_balance_method": "round_robin",
    "nnodes": 1,
    "node_rank": 0,
    "base_gpu_id": 0,
    "gpu_id_step": 1,
    "num_continuous_decode_steps": 1,
    "torch_compile_max_bs": 32,
    "cuda_graph_max_bs": 256,
    "cuda_graph_max_bs_decode": 256,
    "cuda_graph_backend_decode": "full",
    "radix_eviction_policy": "lru",
    "deepep_mode": "auto",
    "init_expert_location": "trivial",
    "eplb_algorithm": "auto",
    "hicache_ratio": 2.0,
    "hicache_size": 0,
    "triton_attention_num_kv_splits": 8,
    "disaggregation_mode": "null",
    "disaggregation_transfer_backend": "mooncake",
}


def _dest(opt: HelpOption) -> str:
    return opt.dest


_DEST_INDEX: dict[int, tuple[HelpSpec, dict[str, str]]] = {}


def _dest_index(spec: HelpSpec) -> dict[str, str]:
    """dest -> the first option with it, once per help spec (every start-up reads a dozen values
    and the vLLM help has hundreds of options; the spec is kept alive with its index)."""
    hit = _DEST_INDEX.get(id(spec))
    if hit is None or hit[0] is not spec:
        index: dict[str, str] = {}
        for opt in spec.options:
            index.setdefault(_dest(opt), opt.name)
        hit = _DEST_INDEX[id(spec)] = (spec, index)
    return hit[1]


def sglang_field(dest: str) -> str:
    return SGLANG_FIELD.get(dest, dest)


@dataclass
class ScenarioConfig:
    """The configuration a scenario launch runs with (requested, defaulted, forced), as the double
    computes it from its flags; the product's reading of a real log is observe.effective.EffectiveConfig."""

    engine: str
    spec: HelpSpec
    model_path: str
    requested: dict[str, Any]  # canonical flag -> value as parsed
    positionals: dict[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)  # canonical flag -> requested/default/forced value
    forced: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # flag -> (requested, effective)
    defaulted: dict[str, Any] = field(default_factory=dict)
    log_templates: list[str] = field(default_factory=list)  # lines of the entries that applied

    # -- reading --------------------------------------------------------------------------
    def baseline(self, flag: str) -> Any:
        """The engine's own default for a flag nobody set."""
        opt = self.spec.get(flag)
        if opt is None:
            return None
        if self.engine == "vllm":
            if flag == "--model":
                return self.model_path
            return literal_default(opt)
        dest = _dest(opt)
        if dest in ("tokenizer_path", "served_model_name"):
            return self.model_path  # SGLang fills both from --model-path
        if dest in SGLANG_DEFAULTS:
            return SGLANG_DEFAULTS[dest]
        if dest == "random_seed":
            return int(hashlib.sha256(self.model_path.encode()).hexdigest()[:7], 16)
        return False if not opt.takes_value else None

    def get(self, flag: str) -> Any:
        return self.values[flag] if flag in self.values else self.baseline(flag)

    def lookup(self, target: str) -> Any:
        """Condition targets: a canonical flag or env:NAME."""
        if target.startswith("env:"):
            return self.env.get(target[4:])
        return self.get(target)

    def by_dest(self) -> dict[str, Any]:
        """Every option by argparse dest (and SGLang field name) -> effective value."""
        out: dict[str, Any] = {}
        for opt in self.spec.options:
            v = self.get(opt.name)
            out[_dest(opt)] = v
            if self.engine == "sglang":
                out[sglang_field(_dest(opt))] = v
        return out

    # -- derived facts the lifecycle needs -----------------------------------------------------
    def _flag_for_dest(self, dest: str) -> str | None:
        return _dest_index(self.spec).get(dest)

    def value(self, *dests: str) -> Any:
        """The first of several dests this engine version has (e.g. tp_size or tensor_parallel_size)."""
        for d in dests:
            flag = self._flag_for_dest(d)
            if flag is not None:
                return self.get(flag)
        return None

    @property
    def tp(self) -> int:
        v = self.value("tp_size", "tensor_parallel_size")
        try:
            return max(1, int(v))
        except (TypeError, ValueError):
            return 1

    @property
    def dummy_weights(self) -> bool:
        return str(self.value("load_format") or "").lower() == "dummy"

    def layer_override(self) -> int | None:
        """num_hidden_layers from --json-model-override-args (SGLang) / --hf-overrides (vLLM)."""
        raw = self.value("json_model_override_args", "hf_overrides")
        if isinstance(raw, dict):
            data = raw
        elif isinstance(raw, str) and raw.strip():
            data = json.loads(raw)  # a JSONDecodeError here is what the engine would raise too
        else:
            return None
        n = data.get("num_hidden_layers") if isinstance(data, dict) else None
        return int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) and n > 0 else None

    @property
    def cuda_graphs(self) -> bool:
        if self.engine == "vllm":
            return not bool(self.value("enforce_eager"))
        if self.value("disable_cuda_graph") is True:
            return False
        return str(self.value("cuda_graph_backend_decode") or "full") != "disabled"

    @property
    def served_model_names(self) -> list[str]:
        v = self.value("served_model_name")
        if isinstance(v, (list, tuple)) and v:
            return [str(x) for x in v]
        if isinstance(v, str) and v:
            return [v]
        return [self.model_path]

    @property
    def host(self) -> str:
        return str(self.value("host") or "127.0.0.1")

    @property
    def port(self) -> int:
        v = self.value("port")
        return int(v) if v is not None else (30000 if self.engine == "sglang" else 8000)


def _condition_holds(entry: Entry | ScenarioRule, cfg: ScenarioConfig) -> bool:
    return entry.condition.holds(cfg.lookup)


def compute_config(
    scenario: Scenario,
    spec: HelpSpec,
    requested: dict[str, Any],
    positionals: dict[str, Any],
    env: Mapping[str, str],
) -> ScenarioConfig:
    model_flag = "--model-path" if scenario.engine == "sglang" else "--model"
    model_path = requested.get(model_flag) or positionals.get("model_tag") or scenario.model.name
    cfg = ScenarioConfig(scenario.engine, spec, str(model_path), dict(requested), dict(positionals), env)
    cfg.values.update(requested)
    if scenario.engine == "vllm" and "--model" not in cfg.values and positionals.get("model_tag"):
        cfg.values["--model"] = positionals["model_tag"]
    for entry in scenario.defaults:
        todo = {f: v for f, v in entry.flags.items() if f not in cfg.values}
        if todo and _condition_holds(entry, cfg):
            cfg.values.update(todo)
            cfg.defaulted.update(todo)
            cfg.log_templates.extend(entry.log)
    for entry in scenario.force:
        if _condition_holds(entry, cfg):
            for f, v in entry.flags.items():
                before = cfg.requested.get(f)
                cfg.values[f] = v
                if f in cfg.requested and not _same(before, v):
                    cfg.forced[f] = (before, v)
            cfg.log_templates.extend(entry.log)
    return cfg


def _same(a: Any, b: Any) -> bool:
    from bringup.knowledge.conditions import values_equal

    return values_equal(a, b)


def decide(scenario: Scenario, cfg: ScenarioConfig) -> ScenarioRule | None:
    """The first rule whose condition holds; else the scenario's `otherwise` (the first factor
    whose effective level it does not model, then its default); None means serve correctly."""
    for rule in scenario.rules:
        if rule.fail is not None and rule.fail.graphs and not cfg.cuda_graphs:
            continue  # the graphs' own failure: this launch captures none
        if _condition_holds(rule, cfg):
            return rule
    other = scenario.otherwise
    if other is None:
        return None
    for fac in other.factors:
        level = cfg.lookup(fac.target)
        if not any(_same(level, known) for known in fac.levels):
            return ScenarioRule(
                id=f"otherwise:{fac.flag}", fail=fac.fail, hang=fac.hang, serve=fac.serve, why=fac.why
            )
    return other.default if isinstance(other.default, ScenarioRule) else None


# -- printing ---------------------------------------------------------------------------------
def server_args_repr(cfg: ScenarioConfig) -> str:
    """SGLang: ServerArgs(model_path='...', tp_size=8, ...) with every option of the help."""
    parts: list[str] = []
    seen: set[str] = set()
    for opt in cfg.spec.options:
        name = sglang_field(_dest(opt))
        if name in seen:
            continue
        seen.add(name)
        parts.append(f"{name}={cfg.get(opt.name)!r}")
    return "ServerArgs(" + ", ".join(parts) + ")"


def _vllm_value(opt: HelpOption | None, v: Any) -> Any:
    if isinstance(v, str) and v.strip().startswith("{"):
        try:
            return json.loads(v)  # vLLM parses JSON-valued options (--hf-overrides, -cc) into dicts
        except ValueError:
            return v
    return v


def non_default_args(cfg: ScenarioConfig) -> dict[str, Any]:
    """vLLM: the requested options whose value differs from the parser default, by dest."""
    out: dict[str, Any] = {}
    if "model_tag" in cfg.positionals:
        out["model_tag"] = cfg.positionals["model_tag"]
    for flag, v in cfg.requested.items():
        opt = cfg.spec.get(flag)
        if opt is None:
            continue
        if v == literal_default(opt) and flag != "--model":
            continue
        out[_dest(opt)] = _vllm_value(opt, v)
    return out


_TORCH_DTYPE = {
    "auto": "torch.bfloat16",
    "bfloat16": "torch.bfloat16",
    "bf16": "torch.bfloat16",
    "half": "torch.float16",
    "float16": "torch.float16",
    "float": "torch.float32",
    "float32": "torch.float32",
}


def vllm_engine_config(cfg: ScenarioConfig, max_model_len: int) -> str:
    """vLLM: the `with config:` tail of `Initializing a V1 LLM engine`, effective values."""
    g = cfg.value
    model = cfg.model_path
    served = cfg.served_model_names[0]
    mode = "NONE" if not cfg.cuda_graphs else "FULL_AND_PIECEWISE"
    # vLLM merges the keys of a --compilation-config (-cc) into the config it prints (a user's
    # {"max_cudagraph_capture_size": 2048} prints 2048); it parses the JSON as _vllm_value does
    given = _vllm_value(None, g("compilation_config"))
    capture = g("max_cudagraph_capture_size") or (given if isinstance(given, dict) else {}).get(
        "max_cudagraph_capture_size", 512
    )
    items = [
        ("model", repr(model)),
        ("speculative_config", "None"),
        ("tokenizer", repr(g("tokenizer") or model)),
        ("skip_tokenizer_init", g("skip_tokenizer_init") or False),
        ("tokenizer_mode", g("tokenizer_mode") or "auto"),
        ("revision", g("revision")),
        ("tokenizer_revision", g("tokenizer_revision")),
        ("trust_remote_code", bool(g("trust_remote_code"))),
        ("dtype", _TORCH_DTYPE.get(str(g("dtype") or "auto"), "torch.bfloat16")),
        ("max_seq_len", max_model_len),
        ("download_dir", g("download_dir")),
        ("load_format", g("load_format") or "auto"),
        ("tensor_parallel_size", cfg.tp),
        ("pipeline_parallel_size", g("pipeline_parallel_size") or 1),
        ("data_parallel_size", g("data_parallel_size") or 1),
        ("disable_custom_all_reduce", bool(g("disable_custom_all_reduce"))),
        ("quantization", g("quantization")),
        ("enforce_eager", not cfg.cuda_graphs),
        ("kv_cache_dtype", g("kv_cache_dtype") or "auto"),
        ("device_config", "cuda"),
        ("seed", g("seed") if g("seed") is not None else 0),
        ("served_model_name", served),
        ("enable_prefix_caching", g("enable_prefix_caching") is not False),
        ("enable_chunked_prefill", g("enable_chunked_prefill") is not False),
        (
            "compilation_config",
            "{'mode': <CompilationMode.VLLM_COMPILE: 3>, "
            f"'cudagraph_mode': <CUDAGraphMode.{mode}>, "
            f"'max_cudagraph_capture_size': {capture}}}",
        ),
    ]
    return ", ".join(f"{k}={v}" for k, v in items)


def template_values(cfg: ScenarioConfig) -> dict[str, Any]:
    """Names a scenario's log lines may use as {name}: every dest, and a few conveniences."""
    vals: dict[str, Any] = dict(cfg.by_dest())
    vals["model"] = cfg.model_path
    vals["tp"] = cfg.tp
    vals["host"] = cfg.host
    vals["port"] = cfg.port
    return vals
