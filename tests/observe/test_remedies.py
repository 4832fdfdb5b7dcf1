"""The engine's own remedies (bringup/observe/remedies.py): the flags and values its failure lines advise."""

from __future__ import annotations

from bringup.engines.explain import explain_file
from bringup.observe.outcome import Outcome
from bringup.observe.remedies import find_remedies
from bringup.observe.signatures import classify
from tests.paths import DATA

LOGS = DATA / "logs"


def pairs(lines: list[str], engine: str | None = "sglang") -> list[tuple[str, str | None, str]]:
    return [(r.flag, r.value, r.action) for r in find_remedies(lines, engine)]


def test_sglang_prefill_graph_suggestions_in_order():
    """SGLang's breakable-graph hint (BCG_FAILURE_HINT), as it prints it beneath the error."""
    lines = [
        "[2026-12-01 15:31:14 TP0] AcceleratorError: CUDA error: an illegal memory access was encountered",
        "Fail when using backend: breakable for prefill runner.",
        "Possible suggestions:",
        "1. change to tc_piecewise by --cuda-graph-backend-prefill=tc_piecewise",
        "2. disable the prefill CUDA graph by --cuda-graph-backend-prefill=disabled",
        "3. if it is an OOM problem, set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7) or set "
        "--cuda-graph-max-bs-prefill to a smaller value (e.g., 2048)",
        "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ",
    ]
    assert pairs(lines) == [
        ("--cuda-graph-backend-prefill", "tc_piecewise", "set"),
        ("--cuda-graph-backend-prefill", "disabled", "set"),
        ("--mem-fraction-static", "0.8", "lower"),
        ("--cuda-graph-max-bs-prefill", "2048", "lower"),
    ]
    assert find_remedies(lines, "sglang")[0].line.startswith("1. change to tc_piecewise")
    # the third is advice for another kind of failure ("if it is an OOM problem"): named, not prescribed
    assert [r.conditional for r in find_remedies(lines, "sglang")] == [False, False, True, True]


def test_a_switch_takes_no_value_and_not_using_means_remove():
    lines = [
        "Possible solutions:",
        "1. disable torch compile by not using --enable-torch-compile",
        "2. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)",
        "Try --enforce-eager to skip graph capture.",
    ]
    got = pairs(lines, "vllm") + pairs(lines[:3], "sglang")
    assert ("--enforce-eager", None, "set") in got
    assert ("--enable-torch-compile", None, "remove") in got and ("--disable-cuda-graph", None, "set") in got


def test_backticked_names_become_flags_of_that_dest_when_the_help_has_them():
    line = (
        "ValueError: To serve at least one request ... Try increasing `gpu_memory_utilization` or decreasing "
        "`max_model_len` when initializing the engine."
    )
    assert pairs([line], "vllm") == [
        ("--gpu-memory-utilization", None, "raise"),
        ("--max-model-len", None, "lower"),
    ]
    # no help known for the engine: the name is kept as the engine wrote it
    assert pairs([line], None) == [
        ("gpu_memory_utilization", None, "raise"),
        ("max_model_len", None, "lower"),
    ]
    # a backticked word that is no option of the engine is no remedy
    assert pairs(["Please use `torch.float16` instead."], "vllm") == []


def test_quoted_flag_with_value_words_and_env_settings():
    lines = [
        "  Value error, World size (8) is larger than the number of available GPUs (1) in this node. If this is",
        "- ray, set '--distributed-executor-backend ray'.",
        "- multiprocessing, set '--nnodes' appropriately. [type=value_error, input_value=ArgsKwargs((), {'x': 1})]",
        "To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
        "Decrease GPU memory utilization or reduce GPU memory used by other processes.",
    ]
    assert pairs(lines, "vllm") == [
        ("--distributed-executor-backend", "ray", "set"),
        ("--nnodes", None, "set"),
        ("env:VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1", "set"),
        ("--gpu-memory-utilization", None, "lower"),
    ]
    assert "input_value" not in find_remedies(lines, "vllm")[1].line


def test_debugging_advice_config_dumps_and_frame_sources_are_not_remedies():
    lines = [
        "(APIServer pid=1) INFO 12-01 14:02:11 [utils.py:233] non-default args: {'model': 'x', 'port': 1}",
        "[2026-12-01 15:20:01] server_args=ServerArgs(model_path='x', disable_cuda_graph=False)",
        "Traceback (most recent call last):",
        '  File "/x/sglang/srt/server_args.py", line 10, in check',
        '    raise ValueError("please use --page-size 16 with this backend")',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        "Try: `pip install transformers -U` or `pip install -e '.[dev]'` if you're working with git main",
    ]
    assert pairs(lines) == []


def test_a_line_that_reports_what_the_engine_is_using_advises_nothing():
    """SGLang's status line "Using KV cache dtype: torch.bfloat16" comes on every launch; read as advice
    it made a watchdog timeout that names nothing look like the engine prescribing --kv-cache-dtype.
    Advice that says "by using" still counts."""
    status = [
        "[2026-12-06 04:10:01 TP0] Using KV cache dtype: torch.bfloat16",
        "(EngineCore pid=7) INFO 12-06 04:10:02 [cuda.py:301] Using max model len 4096",
        "[2026-12-06 04:15:01 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
    ]
    assert pairs(status) == [] and pairs(status, "vllm") == []
    # what the engine chose by itself, and how to quieten or override the note (real lines,
    # tests/data/logs): printed by launches that serve as well
    chosen = [
        "[2026-12-01 15:20:01] Attention backend not specified. Use fa3 backend by default.",
        "(APIServer pid=1) INFO 12-05 01:02:03 [chat_utils.py:1] Detected the chat template content format to be"
        " 'string'. You can set `--chat-template-content-format` to override this.",
        "(APIServer pid=1) INFO 12-05 01:02:03 [config.py:1] Resolved `--runner auto` to `--runner pooling`. Pass"
        " the value explicitly to silence this message.",
        "(APIServer pid=1) WARNING 12-01 20:16:42 [vllm.py:725] Model Runner V2 does not yet support custom logits"
        " processors; using the V1 model runner instead.",
        "To silence this warning, specify disable_custom_all_reduce=True explicitly.",
    ]
    assert pairs(chosen) == [] and pairs(chosen, "vllm") == []
    advice = ["The graph runner ran out of memory: avoid it by using --cuda-graph-max-bs 16"]
    assert pairs(advice) == [("--cuda-graph-max-bs", "16", "set")]


def test_advice_before_the_failure_is_not_its_remedy():
    """A deprecation note at start-up names a flag and a value, but it is not about the failure."""
    lines = [
        "[2026-12-01 15:20:01] The flag --disable-cuda-graph is deprecated, use --cuda-graph-backend-decode=disabled",
        "[2026-12-01 15:20:09 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/x/sglang/srt/model_executor/model_runner.py", line 1802, in init_memory_pool',
        "    raise RuntimeError(",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    ]
    got = classify(lines, "sglang", "kv-alloc").remedies
    assert [(r.flag, r.value, r.action) for r in got] == [("--mem-fraction-static", None, "raise")]


def test_outcome_carries_the_remedies_of_a_real_shaped_log_and_round_trips():
    out = explain_file(LOGS / "sglang-h200-prefill-graph-illegal-memory-access.log")
    assert [(r.flag, r.value) for r in out.remedies][:2] == [
        ("--cuda-graph-backend-prefill", "tc_piecewise"),
        ("--cuda-graph-backend-prefill", "disabled"),
    ]
    again = Outcome.model_validate_json(out.model_dump_json())
    assert again.remedies == out.remedies
    # a log that served has no remedies
    assert explain_file(LOGS / "transformers-works.log").remedies == []


def test_an_advice_word_inside_an_option_s_name_is_no_advice():
    """ "--enable-lora requires --max-loras" names two options and advises neither; bringup's own
    note "torch-compile (raised inside it) is used by: --enable-torch-compile true" neither."""
    from bringup.search.evidence import remedies

    lines = [
        "ValueError: --enable-lora requires --max-loras > 0",
        "torch-compile (raised inside it) is used by: --enable-torch-compile true",
    ]
    assert pairs(lines[:1], "vllm") == [] and pairs(lines[:1]) == []
    assert remedies(lines) == []
    assert pairs(["Please enable LoRA by passing --enable-lora"], "vllm") == [("--enable-lora", None, "set")]
