"""Issue 40, item 5: every number a user gives is range-checked where it enters, and a server's
impossible numbers make a bench fail.

Before: `bench --sweep-rate -1` was a numpy traceback, `--sweep-concurrency 0` ran nothing without a
word, `tune --sweep -1` recorded a concurrency of -1, `trial --batch 100000000` ran for minutes and
grew, `--seed -1` was numpy's error; a `--long-tokens` beyond the model's context was launched and the
engine's HTTP 400 read as wrong output that blamed the kernels; `bench` printed negative throughput
from a server that reported negative token counts.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest
import typer
from pydantic import ValidationError
from typer.testing import CliRunner

from bringup.cli import app
from bringup.guard import ranges
from bringup.verify.probes import ProbeConfig, ProbeRunner
from tests.fake_openai_server import Server
from tests.paths import ROOT
from tests.verify.test_probes import by_name, serving

SEED = ROOT / "bringup" / "data" / "scenarios" / "glm5-nvfp4-sm120.yaml"
NUMBER_LISTS = {"sweep_concurrency", "sweep_rate", "request_rate", "sweep"}  # text that holds numbers


def numeric_options() -> list[tuple[str, str, ranges.Range, bool]]:
    """(command, --option, its range, takes a list) for every option of every command that takes a
    number, read from the commands' own signatures."""
    out = []
    for info in app.registered_commands:
        assert info.callback is not None
        for name, p in typer.utils.get_params_from_function(info.callback).items():
            opt = p.default
            if not isinstance(opt, typer.models.OptionInfo):
                continue
            base = [a for a in typing.get_args(p.annotation) if a is not type(None)] or [p.annotation]
            numeric = (
                base[0] in (int, float)
                or typing.get_origin(base[0]) is list
                and int in typing.get_args(base[0])
            )
            listed = name in NUMBER_LISTS
            if not (numeric or listed):
                continue
            owner = getattr(opt.callback, "__self__", None)
            flag = opt.param_decls[0] if opt.param_decls else "--" + name.replace("_", "-")
            out.append((info.name or "", flag, owner, listed))
    return out


def test_every_numeric_option_has_its_range() -> None:
    found = numeric_options()
    assert len(found) > 40  # the whole CLI, not a corner of it
    missing = [f"{cmd} {flag}" for cmd, flag, r, _ in found if not isinstance(r, ranges.Range)]
    assert missing == [], "a numeric option without a range (bringup/guard/ranges.py)"


def _outside(r: ranges.Range) -> list[str]:
    bad = ["nan"] if not r.integer else []
    if r.low is not None:
        bad.append(str(r.low if r.low_open else r.low - 1).removesuffix(".0"))
    if r.high is not None and not r.inf_ok:
        bad.append(str(int(r.high) + 1))
    return bad


@pytest.mark.slow  # every numeric option of every command, invoked: 60-odd CLI calls, about 12 s
@pytest.mark.parametrize("cmd, flag, r, listed", numeric_options(), ids=lambda v: str(v)[:30])
def test_a_number_outside_its_range_is_refused_before_anything_starts(
    tmp_path: Path, cmd: str, flag: str, r: ranges.Range, listed: bool
) -> None:
    for value in _outside(r):
        res = CliRunner().invoke(app, [cmd, flag, f"1,{value}" if listed else value])
        out = " ".join(res.output.split())
        assert res.exit_code == 2, (flag, value, out)
        assert f"Invalid value for '{flag}'" in out and "Traceback" not in out, (flag, value, out)


@pytest.mark.parametrize(
    "args, says",
    [
        (["bench", "--sweep-rate", "-1"], "-1 must be above 0"),
        (["bench", "--sweep-concurrency", "0"], "0 must be at least 1"),
        (["bench", "--request-rate", "nan"], "not a finite number"),
        (["bench", "--seed", "-1"], "-1 must be at least 0"),
        (["tune", "--sweep", "4,-1"], "-1 must be at least 1"),
        (["trial", "--batch", "100000000"], "must be at most 1024"),
    ],
)
def test_the_numbers_of_issue_40_are_refused_with_a_clear_error(
    tmp_path: Path, args: list[str], says: str
) -> None:
    with serving() as (url, srv):  # a live server: before, these ran against it (or crashed)
        target = (
            ["--url", url] if args[0] == "bench" else ["--scenario", str(SEED), "--runs-dir", str(tmp_path)]
        )
        res = CliRunner().invoke(app, [*args, *target])
        sent = list(srv.log)
    out = " ".join(res.output.split())
    assert res.exit_code == 2 and says in out and "Traceback" not in out, out
    assert sent == [] and not (tmp_path / "trials").exists()


def test_a_library_user_meets_the_same_ranges() -> None:
    from bringup.loadgen import BenchConfig
    from bringup.session.settings import RunSettings
    from bringup.session.tuning import TuneSettings
    from bringup.trial.slots import SlotError, parallel_width

    for bad in (
        lambda: TuneSettings(sweep="1,-1"),
        lambda: TuneSettings(seed=-1),
        lambda: RunSettings(batch=100_000_000),
        lambda: RunSettings(timeout=float("nan")),
        lambda: BenchConfig(url="x", sweep_rate=[-1.0]),
        lambda: BenchConfig(url="x", sweep_concurrency=[0]),
        lambda: BenchConfig(url="x", request_rate=float("nan")),
    ):
        with pytest.raises(ValidationError):
            bad()
    assert BenchConfig(url="x", sweep_rate=[1.0, float("inf")]).sweep_rate == [1.0, float("inf")]
    with pytest.raises(ValueError, match="batch_size: 100000000 must be at most 1024"):
        ProbeConfig(batch_size=100_000_000)
    with pytest.raises(SlotError, match="must be at most"):
        parallel_width("100000", 1)
    from bringup.trial.launch import TrialSettings

    with pytest.raises(ValueError, match="hang_timeout: nan is not a finite number"):
        TrialSettings(hang_timeout=float("nan"))
    with pytest.raises(ValueError, match="port: 70000 must be at most 65535"):
        TrialSettings(port=70000)


class NegativeCounts(Server):
    """A server that reports -5 completion tokens for every answer (its tokens are fine)."""

    async def generate(self, req: dict, chat: bool, w) -> bool:
        if chat:
            req["messages"][-1]["content"] += " [[fake count=-5]]"
        else:
            req["prompt"] += " [[fake count=-5]]"
        return await super().generate(req, chat, w)


def test_a_server_reporting_negative_token_counts_fails_the_bench_as_it_fails_the_trial() -> None:
    with serving(NegativeCounts) as (url, _):
        res = CliRunner().invoke(app, ["bench", "--url", url, "--num-prompts", "4", "--json"])
        probes = by_name(
            ProbeRunner(
                url, ProbeConfig(request_timeout=10, batch_size=2, long_tokens=8, user_probes=False)
            ).run()
        )
    assert res.exit_code == 1, res.output
    summary = json.loads(res.stdout)[0]["summary"]
    assert summary["completed"] == 0 and summary["output_throughput"] >= 0
    assert "usage.completion_tokens is -5, below 0" in " ".join(summary["errors"])
    assert not probes["completion"].passed and "below 0" in probes["completion"].detail


class ShortContext(Server):
    """A server whose maximum length is 100 tokens; a longer request gets vLLM's HTTP 400."""

    most = 100
    listed = True

    async def route(self, method: str, path: str, body: bytes, w) -> bool:
        if method == "GET" and path == "/v1/models" and self.listed:
            self.send_json(w, {"object": "list", "data": [{"id": "fake-model", "max_model_len": self.most}]})
            await w.drain()
            return True
        return await super().route(method, path, body, w)

    async def generate(self, req: dict, chat: bool, w) -> bool:
        if int(req.get("max_tokens") or 0) + 5 > self.most:
            self.log.append(req)
            msg = (
                f"This model's maximum context length is {self.most} tokens. However, you requested "
                f"{int(req['max_tokens']) + 5} tokens (5 in the messages, {req['max_tokens']} in the completion)."
            )
            self.send_json(
                w, {"object": "error", "message": msg, "type": "BadRequestError", "code": 400}, 400
            )
            await w.drain()
            return True
        return await super().generate(req, chat, w)


class ShortContextUnlisted(ShortContext):
    listed = False  # /v1/models says nothing of its maximum length


def test_a_long_decode_beyond_the_servers_maximum_length_is_not_wrong_output() -> None:
    with serving(ShortContext) as (url, srv):
        clipped = by_name(
            ProbeRunner(
                url, ProbeConfig(request_timeout=10, batch_size=2, long_tokens=200, user_probes=False)
            ).run()
        )
        asked = max(r.get("max_tokens", 0) for r in srv.log)
    with serving(ShortContextUnlisted) as (url, _):
        refused = by_name(
            ProbeRunner(
                url, ProbeConfig(request_timeout=10, batch_size=2, long_tokens=200, user_probes=False)
            ).run()
        )
    long = clipped["long-decode"]
    assert long.passed and long.detail.startswith("92 tokens") and "asked 200" in long.detail, long.detail
    assert asked == 92  # never more than the server serves
    long = refused["long-decode"]
    assert long.passed and long.kind == "skipped" and "longer than the server's maximum length" in long.detail
    assert all(r.passed for r in refused.values()), [
        (r.name, r.detail) for r in refused.values() if not r.passed
    ]


def test_long_tokens_beyond_the_models_context_are_refused_before_the_launch(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app, ["trial", "--scenario", str(SEED), "--long-tokens", "1000000", "--runs-dir", str(tmp_path)]
    )
    out = " ".join(res.output.split())
    assert res.exit_code == 2 and "beyond the model's context of 202752 tokens" in out, out
    assert not (tmp_path / "trials").exists()


@pytest.mark.parametrize(
    "value, says",
    [
        ("Infinity", "not a finite number"),
        ("1e30", "must be at most"),
        ("2.7", "not a whole number"),
        ("0", "must be at least 1"),
    ],
)
def test_a_prompts_files_max_tokens_is_in_range(tmp_path: Path, value: str, says: str) -> None:
    """`bench --prompts FILE`: a number in the file is one the user gives too (Infinity was an
    OverflowError traceback, 2.7 silently 2)."""
    from bringup.loadgen.config import BenchError
    from bringup.loadgen.workload import load_jsonl

    f = tmp_path / "p.jsonl"
    f.write_text('{"prompt": "hi", "max_tokens": 4}\n{"prompt": "x", "max_tokens": ' + value + "}\n")
    with pytest.raises(BenchError, match=f"p.jsonl:2: 'max_tokens' .*{says}"):
        load_jsonl(f, 16)
    f.write_text('{"prompt": "hi", "max_tokens": "8"}\n{"prompt": "x"}\n')
    assert load_jsonl(f, 16) == [("hi", 8), ("x", 16)]


@pytest.mark.slow
def test_a_long_decode_past_the_servers_maximum_length_is_no_wrong_output_on_the_scenario_engine(
    tmp_path: Path,
) -> None:
    """The whole trial on the scenario engine (which answers vLLM's HTTP 400 past its context): a
    launch with `--max-model-len 200` and `--long-tokens 300` works, its long decode as long as the
    server serves. Before: wrong-output, its hint suspecting the attention/GEMM kernels."""
    from tests.conftest import bringup

    rc, d, _, err = bringup(
        "trial",
        "--scenario",
        str(ROOT / "bringup" / "data" / "scenarios" / "qwen25-32b-graph-oom-sm120-vllm.yaml"),
        "--time-scale",
        "0.002",
        "--runs-dir",
        str(tmp_path),
        "--long-tokens",
        "300",
        "--json",
        "--",
        "--max-model-len",
        "200",
        "--gpu-memory-utilization",
        "0.9",
        "--enforce-eager",
    )
    assert d is not None and rc == 0 and d["status"] == "works", err[-2000:]
    long = next(p for p in d["probes"] if p["name"] == "long-decode")
    assert long["passed"] and long["detail"].startswith("192 tokens") and "asked 300" in long["detail"]
