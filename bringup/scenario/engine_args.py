"""The imitated engine's own argument parser, rebuilt from its real ``--help`` capture.

A real ``argparse.ArgumentParser`` with the same option strings, metavars, choices, switches,
``--x/--no-x`` pairs and ``nargs='+'`` lists as the engine, so a bad flag fails exactly where
and how the engine fails: exit code 2 and ``usage: ...`` then ``prog: error: ...`` on stderr,
before anything else happens.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from bringup.help.text import DATA_HELP, HelpOption, HelpSpec, bundled_help


@lru_cache(maxsize=8)
def help_for(engine: str, version: str) -> tuple[HelpSpec, str]:
    """The parsed help capture of an engine version and its raw text (parsed once per process)."""
    found = sorted(DATA_HELP.glob(f"{engine}-{version}*.txt"))
    return bundled_help(engine, version), (found[0].read_text() if found else "")


# The program name argparse prints. SGLang is run as `python -m sglang.launch_server`, and argparse
# names the program after sys.argv[0] (the module file): real errors read `launch_server.py: error:`
# (e.g. sglang issues #4116, #12818). vLLM's capture already says `api_server.py`.
PROG = {"sglang": "launch_server.py", "vllm": "api_server.py"}

# SGLang's help prints no defaults and no types. Options whose argparse type is int or float, so
# that `--port abc` fails as it does in SGLang (python/sglang/srt/server_args.py add_cli_args).
_SGLANG_INT = {
    "port",
    "nccl_port",
    "tensor_parallel_size",
    "tp_size",
    "pipeline_parallel_size",
    "pp_size",
    "data_parallel_size",
    "dp_size",
    "expert_parallel_size",
    "ep_size",
    "max_running_requests",
    "max_queued_requests",
    "max_total_tokens",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "context_length",
    "cuda_graph_max_bs",
    "cuda_graph_max_bs_decode",
    "cuda_graph_max_bs_prefill",
    "page_size",
    "random_seed",
    "cuda_graph_bs",
    "torch_compile_max_bs",
    "stream_interval",
    "num_continuous_decode_steps",
    "decode_log_interval",
    "base_gpu_id",
    "gpu_id_step",
    "nnodes",
    "node_rank",
    "warmups",
}
_SGLANG_FLOAT = {
    "mem_fraction_static",
    "schedule_conservativeness",
    "watchdog_timeout",
    "dist_timeout",
    "swa_full_tokens_ratio",
}
NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")
_HUMAN = re.compile(r"^(\d+(?:\.\d+)?)([kmgKMG]?)$")


def human_readable_int(value: str) -> int:
    """vLLM's type for --max-model-len and friends: 32k = 32000, 32K = 32768 (vllm/utils/argparse_utils.py)."""
    m = _HUMAN.match(value.strip())
    if not m:
        raise ValueError(value)
    num, unit = float(m.group(1)), m.group(2)
    mult = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}[unit]
    if not unit and num != int(num):
        raise ValueError(value)
    return int(num * mult)


# vLLM options that print no numeric default but are integers.
_VLLM_TYPED = {
    "max_model_len": human_readable_int,
    "max_num_batched_tokens": human_readable_int,
    "max_num_seqs": int,
    "seed": int,
    "max_cudagraph_capture_size": int,
}


def _vllm_type(opt: HelpOption):
    """vLLM prints its defaults; an int or float default means an int or float option."""
    if opt.dest in _VLLM_TYPED:
        return _VLLM_TYPED[opt.dest]
    d = opt.default
    if d is None or opt.choices:
        return None
    if re.fullmatch(r"-?\d+", d):
        return int
    if re.fullmatch(r"-?\d+\.\d*([eE][-+]?\d+)?", d):
        return float
    return None


def type_for(opt: HelpOption, engine: str):
    if engine == "vllm":
        return _vllm_type(opt)
    if opt.dest in _SGLANG_INT:
        return int
    if opt.dest in _SGLANG_FLOAT:
        return float
    return None


def _usage_block(text: str) -> str:
    out: list[str] = []
    for line in text.splitlines():
        if out and line and not line.startswith(" "):
            break
        out.append(line)
    return "\n".join(out)


def _required_names(usage: str, prog: str = "") -> set[str]:
    """Option strings the usage line shows outside brackets: required (SGLang's --model-path)."""
    body = (usage.split(":", 1)[1] if usage.startswith("usage:") else usage).strip()
    body = body[len(prog) :] if prog and body.startswith(prog) else body
    found: set[str] = set()
    depth = 0
    for tok in re.findall(r"\[|\]|[^\s\[\]]+", body):
        if tok == "[":
            depth += 1
        elif tok == "]":
            depth -= 1
        elif depth == 0 and tok.startswith("-"):
            found.add(tok)
    return found


def build_parser(spec: HelpSpec, engine: str, help_text: str = "") -> argparse.ArgumentParser:
    """An ArgumentParser that accepts what the engine version accepts, nothing more."""
    parser = argparse.ArgumentParser(
        prog=PROG.get(engine, spec.usage_prog or engine), add_help=True, argument_default=argparse.SUPPRESS
    )
    required = _required_names(_usage_block(help_text), spec.usage_prog) if help_text else set()
    for pos in spec.positionals:
        parser.add_argument(pos, nargs="?", default=argparse.SUPPRESS)
    for opt in spec.options:
        kwargs: dict[str, Any] = {"dest": opt.name}
        if opt.negatable:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif not opt.takes_value:
            kwargs["action"] = "store_true"
        else:
            if opt.choices and not opt.open_choices:
                kwargs["choices"] = opt.choices
            elif opt.metavar:
                kwargs["metavar"] = opt.metavar
            if opt.nargs_many:
                kwargs["nargs"] = "+"
            t = type_for(opt, engine)
            if t is not None:
                kwargs["type"] = t
            if required.intersection(opt.all_names):
                kwargs["required"] = True
        parser.add_argument(*opt.all_names, **kwargs)
    return parser


def vllm_dashes(argv: list[str]) -> list[str]:
    """vLLM's FlexibleArgumentParser accepts --max_model_len for --max-model-len."""
    out = []
    for tok in argv:
        if tok.startswith("--") and "_" in tok.split("=", 1)[0]:
            key, eq, val = tok.partition("=")
            tok = key.replace("_", "-") + eq + val
        out.append(tok)
    return out


@dataclass
class Requested:
    """What the command line asked for: canonical flag -> typed value, in command-line order."""

    flags: dict[str, Any]
    positionals: dict[str, Any]


def parse_engine_argv(argv: list[str], spec: HelpSpec, engine: str, help_text: str = "") -> Requested:
    """Parse like the engine; on error argparse prints usage + error and exits with code 2."""
    if "-h" in argv or "--help" in argv:
        # The engines print their full help and exit 0; the capture is exactly that text.
        sys.stdout.write(help_text if help_text.endswith("\n") else help_text + "\n")
        sys.stdout.flush()
        raise SystemExit(0)
    if engine == "vllm":
        argv = vllm_dashes(argv)
    parser = build_parser(spec, engine, help_text)
    ns = parser.parse_args(argv)
    given = vars(ns)
    by_name = {o.name: o for o in spec.options}
    flags: dict[str, Any] = {}
    order = {}
    for i, tok in enumerate(argv):  # keep the order the user wrote the flags in
        opt = spec.resolve(tok.split("=", 1)[0]) if tok.startswith("-") and not NUMBER.match(tok) else None
        if opt is not None and opt.name not in order:
            order[opt.name] = i
    for name in sorted((k for k in given if k in by_name), key=lambda k: order.get(k, 1 << 30)):
        v = given[name]
        flags[name] = list(v) if isinstance(v, list) else v
    positionals = {k: v for k, v in given.items() if k not in by_name}
    return Requested(flags, positionals)


def literal_default(opt: HelpOption) -> Any:
    """The default the help prints, as a Python value ('0.92' -> 0.92, 'None' -> None)."""
    if opt.default is None:
        return None
    try:
        return ast.literal_eval(opt.default)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return opt.default
