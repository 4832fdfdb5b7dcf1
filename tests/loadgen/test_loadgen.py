"""The load generator against a fake streaming server with known delays (tests/fake_openai_server.py)."""

from __future__ import annotations

import asyncio
import json
import math
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bringup.loadgen import (
    BenchConfig,
    BenchError,
    BenchSummary,
    RequestRecord,
    arrival_times,
    bench,
    parse_duration,
    parse_slos,
    summarize,
    sweep,
    write_results,
)
from bringup.loadgen.workload import LocalCodec, WordCodec, load_jsonl, synthetic_prompts
from tests.paths import ROOT, TESTS

FAKE = TESTS / "fake_openai_server.py"


@pytest.fixture
def fake_server() -> Iterator[Callable[..., str]]:
    """Start fake servers (argv list, own process) on free loopback ports; kill them after."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> str:
        p = subprocess.Popen(
            [sys.executable, str(FAKE), "--port", "0", *args], stdout=subprocess.PIPE, text=True
        )
        procs.append(p)
        line = p.stdout.readline() if p.stdout else ""
        assert line.startswith("PORT "), f"fake server did not start: {line!r}"
        return f"http://127.0.0.1:{int(line.split()[1])}"

    yield start
    for p in procs:
        p.kill()
        p.wait(timeout=5)
        if p.stdout:
            p.stdout.close()


def _jsonl(tmp_path: Path, rows: list[dict]) -> Path:
    f = tmp_path / "prompts.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


def _in_flight_max(recs: list[RequestRecord]) -> int:
    events = sorted(
        [(r.sent_at_s, 1) for r in recs] + [(r.sent_at_s + r.e2e_s, -1) for r in recs if r.e2e_s],
        key=lambda e: (e[0], e[1]),
    )
    cur = peak = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    return peak


# ---- parsing ---------------------------------------------------------------------------------


def test_parse_durations_and_slos() -> None:
    assert parse_duration("2s") == 2.0
    assert parse_duration("50ms") == pytest.approx(0.05)
    assert parse_duration("250us") == pytest.approx(0.00025)
    with pytest.raises(ValueError, match="unit"):
        parse_duration("50")
    slos = parse_slos("ttft_p99=2s, itl_p50=50ms,e2el=10s,tpot_mean=20ms")
    assert [(s.metric, s.stat, s.target_s) for s in slos] == [
        ("ttft", "p99", 2.0),
        ("itl", "p50", 0.05),
        ("e2e", "p99", 10.0),
        ("tpot", "mean", 0.02),
    ]
    for bad in ("ttft_p99", "foo_p99=1s", "ttft_q9=1s", "ttft_p99=1"):
        with pytest.raises(ValueError):
            parse_slos(bad)


def test_config_shapes_and_points() -> None:
    cfg = BenchConfig(url="127.0.0.1:8000/v1/", sweep_rate=[1, 2, math.inf], max_concurrency=4)
    assert cfg.url == "http://127.0.0.1:8000"
    assert [p.point_label() for p in cfg.points()] == [
        "rate=1,max_concurrency=4",
        "rate=2,max_concurrency=4",
        "rate=inf,max_concurrency=4",
    ]
    assert BenchConfig.model_validate_json(cfg.model_dump_json()).sweep_rate[-1] == math.inf
    with pytest.raises(ValueError):
        BenchConfig(url="x", concurrency=2, request_rate=3)
    with pytest.raises(ValueError):
        BenchConfig(url="x", concurrency=2, max_concurrency=3)


# ---- timing ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_timings_match_injected_delays(fake_server: Callable[..., str]) -> None:
    url = fake_server("--ttft", "0.1", "--itl", "0.02")
    res = bench(BenchConfig(url=url, input_len=16, output_len=10, num_prompts=6, concurrency=2))
    s = res.summary
    assert (s.completed, s.failed) == (6, 0)
    for r in res.requests:
        assert r.output_tokens == 10 and r.output_tokens_source == "usage" and r.input_tokens == 16
        assert len(r.itl_s) == 9 and r.chunks == 10
        # Lower bounds only: a timer may not read less than the injected delay, whatever the load;
        # how close it comes (the upper side) is a measure of a quiet machine, in
        # benchmarks/loadgen_overhead.py, not a test (issue 28: no wall-clock bound in tests).
        assert r.ttft_s is not None and r.e2e_s is not None and r.tpot_s is not None
        assert r.ttft_s >= 0.100
        assert r.e2e_s >= 0.280  # 0.1 + 9 x 0.02
        assert r.tpot_s == pytest.approx((r.e2e_s - r.ttft_s) / 9)
        assert sum(r.itl_s) == pytest.approx(r.e2e_s - r.ttft_s)
    assert s.output_tokens == 60 and s.mean_tokens_per_chunk == 1.0
    # two in flight, 0.28 s each, three rounds: the lower bound is exact whatever the load; that
    # the two ran side by side is read from the records, not from an upper time bound (issue 28)
    assert s.duration_s >= 0.84 and _in_flight_max(res.requests) == 2
    assert s.request_throughput == pytest.approx(6 / s.duration_s)
    assert s.output_throughput == pytest.approx(60 / s.duration_s)
    assert s.total_token_throughput == pytest.approx((60 + 96) / s.duration_s)


@pytest.mark.slow
def test_chunks_with_several_tokens(fake_server: Callable[..., str]) -> None:
    """One ITL per chunk (as vllm bench serve); TPOT spreads the time over every token."""
    url = fake_server("--ttft", "0.05", "--itl", "0.03", "--tokens-per-chunk", "3")
    res = bench(BenchConfig(url=url, input_len=8, output_len=10, num_prompts=3, concurrency=3, warmup=0))
    for r in res.requests:
        assert r.chunks == 4 and len(r.itl_s) == 3 and r.output_tokens == 10
        # 0.03 s a chunk: one gap per chunk, not per token (three tokens a chunk would give 0.01).
        # Summed, not one by one: on a loaded host two chunks can reach the client together.
        assert 0.075 < sum(r.itl_s) < 0.3, r.itl_s
        assert r.tpot_s == pytest.approx(sum(r.itl_s) / 9, rel=1e-6)
    assert res.summary.mean_tokens_per_chunk == 2.5


@pytest.mark.slow
def test_chat_role_chunk_is_not_the_first_token(fake_server: Callable[..., str]) -> None:
    url = fake_server("--ttft", "0.08", "--itl", "0.01")
    res = bench(
        BenchConfig(
            url=url, endpoint="chat", input_len=8, output_len=5, num_prompts=2, concurrency=1, keep_text=True
        )
    )
    for r in res.requests:
        assert r.ok and r.chunks == 5 and r.output_tokens == 5
        assert r.ttft_s >= 0.08  # the role chunk arrives at once; the first token only after 80 ms
        assert r.text == " t0 t1 t2 t3 t4"


@pytest.mark.slow
def test_no_usage_falls_back_to_chunk_count(fake_server: Callable[..., str], tmp_path: Path) -> None:
    url = fake_server()
    f = _jsonl(tmp_path, [{"prompt": "a b [[fake no_usage=1 tpc=2]]", "max_tokens": 6}])
    res = bench(BenchConfig(url=url, prompts_file=f, concurrency=1))
    r = res.requests[0]
    assert r.ok and r.output_tokens_source == "chunks" and r.output_tokens == 3
    assert res.summary.output_tokens_from_usage is False


# ---- workload --------------------------------------------------------------------------------


@pytest.mark.slow
def test_request_body_and_exact_lengths_via_server_tokenizer(fake_server: Callable[..., str]) -> None:
    import httpx

    url = fake_server("--bos", "1")
    res = bench(
        BenchConfig(
            url=url,
            input_len=40,
            output_len=7,
            range_ratio=0.25,
            num_prompts=30,
            concurrency=8,
            warmup=0,
            seed=3,
        )
    )
    assert res.tokenizer == "server"
    lens = [r.input_tokens for r in res.requests]
    outs = [r.output_tokens for r in res.requests]
    # the server's own count (usage, BOS included) is what was asked: 39 words + BOS around 40
    assert all(30 <= n <= 50 for n in lens) and len(set(lens)) > 5
    assert all(5 <= n <= 9 for n in outs) and len(set(outs)) > 1
    assert [r.output_tokens for r in res.requests] == [r.expected_output_tokens for r in res.requests]
    bodies = httpx.get(f"{url}/fake/requests").json()
    assert len(bodies) == 30
    b = bodies[0]
    assert b["stream"] is True and b["ignore_eos"] is True and b["stream_options"] == {"include_usage": True}
    assert b["model"] == "fake-model" and isinstance(b["max_tokens"], int)
    # same seed, same prompts
    again = bench(
        BenchConfig(
            url=url,
            input_len=40,
            output_len=7,
            range_ratio=0.25,
            num_prompts=30,
            concurrency=8,
            warmup=0,
            seed=3,
        )
    )
    assert [r.input_tokens for r in again.requests] == lens


def test_local_tokenizer_exact_lengths_and_shared_prefix(tmp_path: Path) -> None:
    from bringup.testmodel.tiny import TestModelSpec, write_test_model

    path = write_test_model(tmp_path / "m", TestModelSpec())
    codec = LocalCodec(path)
    cfg = BenchConfig(url="x", input_len=64, output_len=8, prefix_len=20, num_prompts=40)
    prompts = asyncio.run(synthetic_prompts(cfg, codec, 40))
    counts = [len(codec.tok.encode(p.text).ids) for p in prompts]
    assert counts == [p.input_tokens for p in prompts]
    assert counts == [84] * 40  # prefix + input, exactly
    first = codec.tok.encode(prompts[0].text).ids[:18]
    assert all(codec.tok.encode(p.text).ids[:18] == first for p in prompts)
    assert len({p.text for p in prompts}) >= 35  # offsets may coincide (as in vLLM's random dataset)


def test_length_distributions() -> None:
    cfg = BenchConfig(
        url="x", input_len=100, output_len=50, range_ratio=0.2, len_dist="normal", num_prompts=400
    )
    prompts = asyncio.run(synthetic_prompts(cfg, WordCodec(), 400))
    outs = np.array([p.output_len for p in prompts])
    assert abs(outs.mean() - 50) < 1.5 and 8 < outs.std() < 12  # sd = 0.2 x 50
    ins = np.array([p.input_tokens for p in prompts])
    assert abs(ins.mean() - 100) < 3 and 16 < ins.std() < 24
    uni = BenchConfig(url="x", input_len=100, output_len=50, range_ratio=0.2, num_prompts=400)
    outs = np.array([p.output_len for p in asyncio.run(synthetic_prompts(uni, WordCodec(), 400))])
    assert outs.min() == 40 and outs.max() == 60


@pytest.mark.slow
def test_words_fallback_when_server_cannot_tokenize(fake_server: Callable[..., str]) -> None:
    url = fake_server("--no-tokenize")
    res = bench(BenchConfig(url=url, input_len=12, output_len=3, num_prompts=4, concurrency=2))
    assert res.tokenizer == "words" and res.summary.completed == 4
    assert all(r.input_tokens == 12 for r in res.requests)  # fake server counts words too


@pytest.mark.slow
def test_jsonl_prompts(fake_server: Callable[..., str], tmp_path: Path) -> None:
    url = fake_server()
    f = _jsonl(tmp_path, [{"prompt": "one two three", "max_tokens": 4}, {"prompt": "four five"}])
    res = bench(BenchConfig(url=url, prompts_file=f, output_len=9, num_prompts=5, concurrency=2))
    assert [r.output_tokens for r in res.requests] == [4, 9, 4, 9, 4]
    assert [r.input_tokens for r in res.requests] == [3, 2, 3, 2, 3]
    assert bench(BenchConfig(url=url, prompts_file=f, concurrency=1)).summary.num_requests == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"text": "no prompt"}\n')
    with pytest.raises(BenchError, match="bad.jsonl:2"):
        load_jsonl(bad, 8)


# ---- load shapes -----------------------------------------------------------------------------


def test_poisson_arrivals_statistics() -> None:
    t = arrival_times(20000, rate=50.0, burstiness=1.0, seed=7)
    gaps = np.diff(t)
    assert t[0] == 0 and np.all(gaps >= 0)
    assert gaps.mean() == pytest.approx(1 / 50, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.04)  # exponential: CV 1
    # memorylessness: P(gap > 2/rate) = e^-2
    assert (gaps > 2 / 50).mean() == pytest.approx(math.exp(-2), abs=0.01)
    g4 = np.diff(arrival_times(20000, rate=50.0, burstiness=4.0, seed=7))
    assert g4.mean() == pytest.approx(1 / 50, rel=0.03) and g4.std() / g4.mean() == pytest.approx(
        0.5, abs=0.03
    )
    assert not arrival_times(10, math.inf, 1.0, 0).any()


@pytest.mark.slow
def test_request_rate_is_kept(fake_server: Callable[..., str]) -> None:
    url = fake_server()
    res = bench(BenchConfig(url=url, input_len=4, output_len=2, num_prompts=300, request_rate=200, warmup=0))
    recs = res.requests
    assert res.summary.completed == 300
    lag = np.array([r.sent_at_s - r.arrival_at_s for r in recs])
    assert np.all(lag >= 0) and np.median(lag) < 0.005
    sent = np.sort([r.sent_at_s for r in recs])
    assert 300 / sent[-1] == pytest.approx(200, rel=0.2)  # 300 arrivals: sd of the mean gap ~6%
    expected = arrival_times(300, 200, 1.0, 0)
    assert [r.arrival_at_s for r in recs] == pytest.approx(list(expected))


@pytest.mark.slow
def test_concurrency_and_cap(fake_server: Callable[..., str]) -> None:
    url = fake_server("--ttft", "0.05")
    res = bench(BenchConfig(url=url, input_len=4, output_len=2, num_prompts=20, concurrency=4, warmup=0))
    assert _in_flight_max(res.requests) == 4
    # 20 requests, 4 at a time, 0.05 s each: five rounds at least (a lower bound, exact under any
    # load; without the cap it would be one round)
    assert res.summary.duration_s >= 5 * 0.05 * 0.98
    capped = bench(
        BenchConfig(
            url=url,
            input_len=4,
            output_len=2,
            num_prompts=12,
            request_rate=math.inf,
            max_concurrency=3,
            warmup=0,
        )
    )
    assert _in_flight_max(capped.requests) == 3
    q = sorted(r.queue_s for r in capped.requests)
    assert q[0] < 0.01 and q[-1] > 0.12  # the last ones waited three rounds for a slot
    assert capped.summary.queue_ms.max > 120


# ---- goodput ---------------------------------------------------------------------------------


def _rec(i: int, ttft: float, itl: list[float], ok: bool = True) -> RequestRecord:
    n = len(itl) + 1
    e2e = ttft + sum(itl)
    return RequestRecord(
        index=i,
        ok=ok,
        ttft_s=ttft,
        e2e_s=e2e,
        itl_s=itl,
        chunks=n,
        output_tokens=n,
        tpot_s=(e2e - ttft) / (n - 1) if n > 1 else None,
        input_tokens=10,
        error=None if ok else "HTTP 500: x",
        output_tokens_source="usage",
    )


def test_goodput_definition() -> None:
    recs = [
        _rec(0, 0.1, [0.01] * 4),
        _rec(1, 0.3, [0.01] * 4),  # slow first token
        _rec(2, 0.1, [0.01, 0.01, 0.01, 0.2]),  # one long gap
        _rec(3, 0.1, []),
        _rec(4, 0.05, [0.01] * 4, ok=False),
    ]  # single token; failed
    s = summarize(recs, 2.0, parse_slos("ttft_p99=200ms,itl_p99=50ms"), "p")
    assert s.good_requests == 2  # 0 and 3: 1 misses TTFT, 2 misses its own ITL p99, 4 failed
    assert s.request_goodput == pytest.approx(1.0) and s.output_goodput == pytest.approx((5 + 1) / 2)
    assert s.slo_attainment == pytest.approx(2 / 5)
    checks = {c.slo: c for c in s.slo_checks}
    assert checks["ttft_p99"].met is False and checks["ttft_p99"].good_requests == 3
    assert checks["ttft_p99"].measured_ms == pytest.approx(np.percentile([100, 300, 100, 100], 99))
    assert checks["itl_p99"].measured_ms == pytest.approx(np.percentile([10] * 11 + [200], 99))
    assert s.slos_met is False and s.failed == 1 and s.completed == 4
    # with a p50 ITL target the long gap alone does not spoil request 2
    s2 = summarize(recs, 2.0, parse_slos("ttft_p99=200ms,itl_p50=50ms"), "p")
    assert s2.good_requests == 3 and s2.slo_checks[1].met
    # everything within and nothing failed: met
    s3 = summarize(recs[:1] + recs[2:4], 1.0, parse_slos("ttft=1s,e2e_p90=1s"), "p")
    assert s3.slos_met is True and s3.good_requests == 3
    assert summarize(recs, 1.0, [], "p").good_requests is None


def test_goodput_end_to_end(fake_server: Callable[..., str], tmp_path: Path) -> None:
    url = fake_server("--ttft", "0.01", "--itl", "0.005")
    rows = (
        [{"prompt": "fast a b", "max_tokens": 4}] * 6
        + [{"prompt": "[[fake ttft=0.2]]", "max_tokens": 4}] * 2
        + [{"prompt": "[[fake itl=0.06]]", "max_tokens": 4}] * 2
    )
    res = bench(
        BenchConfig(
            url=url,
            prompts_file=_jsonl(tmp_path, rows),
            concurrency=10,
            warmup=0,
            slos=parse_slos("ttft_p90=100ms,itl_p99=40ms"),
        )
    )
    s = res.summary
    assert s.good_requests == 6 and s.slo_attainment == pytest.approx(0.6)
    assert s.request_goodput == pytest.approx(6 / s.duration_s)
    assert s.output_goodput == pytest.approx(24 / s.duration_s)
    assert s.slos_met is False
    assert {c.slo: c.good_requests for c in s.slo_checks} == {"ttft_p90": 8, "itl_p99": 8}


# ---- sweeps, early stop, errors, output --------------------------------------------------------


@pytest.mark.slow
def test_sweep_rows_and_files(fake_server: Callable[..., str], tmp_path: Path) -> None:
    url = fake_server("--ttft", "0.02")
    results = sweep(BenchConfig(url=url, input_len=4, output_len=3, num_prompts=8, sweep_concurrency=[1, 4]))
    assert [r.summary.point for r in results] == ["concurrency=1", "concurrency=4"]
    assert [r.summary.concurrency for r in results] == [1, 4]
    assert results[1].summary.request_throughput > 2 * results[0].summary.request_throughput
    assert results[0]["completed"] == 8
    paths = write_results(results, tmp_path / "out")
    lines = paths[1].read_text().splitlines()
    assert len(lines) == 3 and lines[0].startswith("point,") and "ttft_p99_ms" in lines[0]
    assert len(paths[2].read_text().splitlines()) == 16
    doc = json.loads(paths[0].read_text())
    assert [d["summary"]["point"] for d in doc] == ["concurrency=1", "concurrency=4"]


@pytest.mark.slow
def test_early_stop_on_slo(fake_server: Callable[..., str]) -> None:
    url = fake_server("--ttft", "0.3")
    res = bench(
        BenchConfig(
            url=url,
            input_len=4,
            output_len=2,
            num_prompts=40,
            concurrency=2,
            warmup=0,
            slos=parse_slos("ttft_p99=50ms"),
            abort_factor=2,
            abort_min_requests=2,
        )
    )
    s = res.summary
    assert s.stopped_early and "ttft_p99" in (s.stop_reason or "")
    # the 2nd finished request triggers the stop; the 3rd, already sent, is cancelled
    # (the 3rd would have completed had the run waited for it: its state, not a time bound, says so)
    assert (s.completed, s.cancelled, s.failed, s.num_requests) == (2, 1, 0, 3)
    assert s.slos_met is False


def test_early_stop_callback_cancels_in_flight(fake_server: Callable[..., str], tmp_path: Path) -> None:
    url = fake_server("--ttft", "0.02")
    rows = [{"prompt": "quick"}] * 3 + [{"prompt": "[[fake ttft=5]]"}] * 3 + [{"prompt": "quick"}] * 10
    seen: list[BenchSummary] = []

    def stop(s: BenchSummary) -> str | None:
        seen.append(s)
        return "enough" if s.completed >= 3 else None

    res = bench(
        BenchConfig(
            url=url, prompts_file=_jsonl(tmp_path, rows), output_len=2, request_rate=math.inf, warmup=0
        ),
        stop_when=stop,
    )
    s = res.summary
    assert s.stopped_early and s.stop_reason == "enough"
    # did not wait for the 5 s requests: they are cancelled, not completed (no time bound: issue 28)
    assert s.completed >= 3 and s.cancelled >= 3 and s.failed == 0
    assert [x.completed for x in seen] == list(range(1, len(seen) + 1))


@pytest.mark.slow
def test_errors_are_counted_not_raised(fake_server: Callable[..., str], tmp_path: Path) -> None:
    url = fake_server("--itl", "0.001")
    rows = (
        [{"prompt": "ok"}] * 4
        + [{"prompt": "[[fake fail=500]]"}] * 2
        + [{"prompt": "[[fake drop_after=2]]"}] * 2
        + [{"prompt": "[[fake stall=3]]"}]
    )
    res = bench(
        BenchConfig(
            url=url,
            prompts_file=_jsonl(tmp_path, rows),
            output_len=5,
            concurrency=9,
            warmup=0,
            request_timeout_s=0.5,
        )
    )
    s = res.summary
    assert (s.completed, s.failed, s.num_requests) == (4, 5, 9)
    errs = " | ".join(f"{k} x{v}" for k, v in s.errors.items())
    assert "HTTP 500" in errs and "timed out after 0.5 s x1" in errs
    dropped = [r for r in res.requests if r.index in (6, 7)]
    assert all(not r.ok and r.ttft_s is not None and r.chunks == 2 for r in dropped)
    assert s.output_tokens == 20  # failures add no tokens


@pytest.mark.slow
def test_nothing_listening_is_one_clear_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # free once closed: nothing listens there
    with pytest.raises(BenchError, match="nothing is listening"):
        bench(BenchConfig(url=f"http://127.0.0.1:{port}", num_prompts=1, concurrency=1))
    p = subprocess.run(
        [sys.executable, "-m", "bringup", "bench", "--url", f"http://127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert p.returncode == 1 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and "nothing is listening" in p.stderr


@pytest.mark.slow
def test_cli(fake_server: Callable[..., str], tmp_path: Path) -> None:
    from bringup.cli import app

    url = fake_server("--ttft", "0.01")
    out = tmp_path / "o"
    r = CliRunner().invoke(
        app,
        [
            "bench",
            "--url",
            url,
            "--input-len",
            "8",
            "--output-len",
            "4",
            "--num-prompts",
            "6",
            "--sweep-concurrency",
            "1,3",
            "--slo",
            "ttft_p99=1s",
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "concurrency=3" in r.output and "SLOs met: yes" in r.output
    assert sorted(p.name for p in out.iterdir()) == ["bench.csv", "bench.json", "requests.jsonl"]
    r = CliRunner().invoke(
        app, ["bench", "--url", url, "--num-prompts", "2", "--request-rate", "inf", "--json"]
    )
    assert r.exit_code == 0
    assert json.loads(r.stdout)[0]["summary"]["completed"] == 2
    r = CliRunner().invoke(app, ["bench", "--url", url, "--slo", "ttft=5"])
    assert r.exit_code == 2 and "unit" in r.output
