"""The deciding pieces of benchmarks/tuners_side_by_side.py (issue 38), without an engine: the
grid and its subset, the SLO set from the defaults, goodput from another tool's records, the
peer's pick, bringup's share, the final round's order and verdicts, the table and the plot, the
peers' commands, and vLLM's sweep resumed past a point whose server dies (a fake sweep)."""

from __future__ import annotations

import contextlib
import json
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from bringup.loadgen.client import RequestRecord
from bringup.loadgen.metrics import summarize
from tests.paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import tuners_decide as decide  # noqa: E402
import tuners_peer as peer  # noqa: E402


def rec(i: int, ttft: float, itl: list[float], ok: bool = True) -> RequestRecord:
    return RequestRecord(index=i, ok=ok, ttft_s=ttft if ok else None, itl_s=itl)


# -- the grid --------------------------------------------------------------------------------------
def test_every_shipped_grid_loads_with_the_defaults_first_and_a_source() -> None:
    for profile in ("vllm-gpu", "vllm-cpu", "sglang-gpu"):
        knobs = decide.load_grid(profile)
        assert knobs and all(k.levels[0] == "default" and k.source for k in knobs)
        assert decide.points(knobs)[0] == {k.flag: "default" for k in knobs}
    flags = {k.flag for k in decide.load_grid("vllm-gpu")}
    assert {
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--max-cudagraph-capture-size",
        "--enable-chunked-prefill",
        "--async-scheduling",
    } <= flags
    flags = {k.flag for k in decide.load_grid("sglang-gpu")}
    assert {
        "--max-running-requests",
        "--chunked-prefill-size",
        "--cuda-graph-max-bs-decode",
        "--schedule-policy",
        "--mem-fraction-static",
    } <= flags


def test_a_bad_grid_file_says_what_is_wrong(tmp_path: Path) -> None:
    f = tmp_path / "g.yaml"
    f.write_text("p:\n  - {flag: --x, levels: [1, 2]}\n")
    with pytest.raises(decide.GridError, match="levels starting with 'default'"):
        decide.load_grid("p", f)
    with pytest.raises(decide.GridError, match="no grid 'q'; the file has p"):
        decide.load_grid("q", f)
    f.write_text("p: [a: b: c]\n")
    with pytest.raises(decide.GridError, match="cannot read the grid file"):
        decide.load_grid("p", f)


def test_the_subset_takes_middle_levels_from_the_largest_later_knob_and_keeps_the_defaults() -> None:
    knobs = [
        decide.GridKnob("--a", ["default", "1", "2", "3", "4"]),
        decide.GridKnob("--b", ["default", "10", "20", "30", "40"]),
        decide.GridKnob("--c", ["default", "on"]),
    ]
    assert [k.levels for k in decide.subset(knobs, None)] == [k.levels for k in knobs]
    sub = decide.subset(knobs, 30)
    # 50 points: --b (the later of the two largest) loses its middle level (30), then --a (3), then
    # --b again (20, the upper middle of 10, 20, 40): 24 points
    assert [k.levels for k in sub] == [["default", "1", "2", "4"], ["default", "10", "40"], ["default", "on"]]
    small = decide.subset(knobs, 4)
    assert [(k.flag, k.levels) for k in small] == [("--a", ["default", "1"]), ("--b", ["default", "10"])]
    assert decide.points(small)[0] == {"--a": "default", "--b": "default"}
    assert decide.subset(knobs, 1) == []  # the defaults alone: no knob left to tune
    with pytest.raises(decide.GridError):
        decide.subset(knobs, 0)


def test_levels_chosen_by_hand_keep_the_files_order_and_refuse_a_bad_choice() -> None:
    knobs = decide.load_grid("vllm-gpu")
    got = decide.with_levels(
        knobs, ["--async-scheduling=default,off", "--max-num-batched-tokens=default,2048"]
    )
    assert [(k.flag, k.levels) for k in got] == [
        ("--max-num-batched-tokens", ["default", "2048"]),
        ("--async-scheduling", ["default", "off"]),
    ]
    assert decide.with_levels(knobs, []) == knobs
    with pytest.raises(decide.GridError, match="the defaults first"):
        decide.with_levels(knobs, ["--max-num-seqs=64,128"])
    with pytest.raises(decide.GridError, match="--nope not in this grid"):
        decide.with_levels(knobs, ["--nope=default,1"])


def test_a_point_as_flags_and_as_words() -> None:
    p = {
        "--max-num-seqs": "64",
        "--enable-chunked-prefill": "off",
        "--async-scheduling": "on",
        "--x": "default",
    }
    assert decide.flags_of(p) == {
        "--max-num-seqs": "64",
        "--enable-chunked-prefill": False,
        "--async-scheduling": True,
    }
    assert decide.describe(p) == "--max-num-seqs 64 --no-enable-chunked-prefill --async-scheduling"
    assert decide.describe({"--x": "default"}) == "(defaults)"


# -- the SLO and goodput ---------------------------------------------------------------------------
def test_the_slo_is_set_from_the_defaults_so_that_they_do_not_meet_it() -> None:
    # 100 requests: TTFT 10..109 ms, each with gaps of 1 ms and one gap of (i % 10 + 1) ms
    recs = [rec(i, (10 + i) / 1000, [0.001] * 50 + [(i % 10 + 1) / 1000]) for i in range(100)]
    c = decide.slo_from_defaults(recs, 0.75, "vllm bench serve")
    assert c.ttft_s == pytest.approx(0.0843)  # numpy's p75 of 10..109 ms is 84.25: rounded up to 0.1 ms
    assert 0.001 < c.itl_s < 0.01
    assert not c.defaults_meet and c.defaults_p99_ttft_s > c.ttft_s
    assert 0.5 <= c.defaults_attainment <= 0.75
    assert "p75" in c.rule and "100 requests measured by vllm bench serve" in c.rule
    assert c.text() == f"ttft_p99=84.3ms,itl_p99={c.itl_s * 1000:.2f}ms"
    with pytest.raises(decide.GridError, match="too few"):
        decide.slo_from_defaults(recs[:3])
    with pytest.raises(decide.GridError, match="between 0 and 1"):
        decide.slo_from_defaults(recs, 1.0)


def test_goodput_of_another_tools_records_is_bringups_own_rule() -> None:
    result = {
        "duration": 2.0,
        "ttfts": [0.01, 0.05, 0.02, 0.0, 0.01],
        "itls": [[0.001, 0.002], [0.001], [0.001, 0.009], [], []],
        "errors": ["", "", "", "connection reset", ""],
    }
    recs = decide.records_from_lists(result)
    assert [r.ok for r in recs] == [True, True, True, False, True]
    c = decide.SloChoice(0.03, 0.005, 0.75, "", 0, 0, 0, False)
    got = decide.goodput(recs, 2.0, c.slos())
    assert got == 1.0  # requests 0 and 4: 1 is late, 2 has a 9 ms gap, 3 failed
    assert got == summarize(recs, 2.0, c.slos(), "x").request_goodput


def test_the_peers_pick_is_its_best_median_and_skips_failures() -> None:
    def pt(name: str, goods: list[float], status: str = "ok", failed: int = 0) -> decide.PeerPoint:
        return decide.PeerPoint(name, {}, status, runs=[{"goodput": g, "failed": failed} for g in goods])

    pts = [
        pt("p00", [5, 6]),
        pt("p01", [9, 9], status="failed"),
        pt("p02", [7, 7, 1]),
        pt("p03", [8, 8], failed=2),
        pt("p04", [7]),
    ]
    assert (
        decide.peer_pick(pts).name == "p02"
    )  # median 7; p04 ties later; p01 failed; p03's runs failed requests
    assert decide.peer_pick([pt("p00", [], "failed")]) is None


def test_bringups_share_keeps_three_repeat_rounds_only_when_they_can_name_a_winner() -> None:
    assert decide.bringup_share(27, 0.3) == (2, 3)  # 8 launches: baseline + 1 point, then 3 rounds of 2
    assert decide.bringup_share(48, 0.3) == (8, 3)
    assert decide.bringup_share(20, 0.3) == (2, 2)  # 6: no verdict can pass; the report says so
    assert decide.bringup_share(8, 0.3) == (2, 0)
    assert decide.bringup_share(3, 0.3) == (1, 0)


# -- the final round ----------------------------------------------------------------------------------
def test_the_final_round_rotates_every_configuration_through_every_place() -> None:
    order = decide.final_order(["D", "B", "P"], 3)
    assert order == [(0, "D"), (0, "B"), (0, "P"), (1, "B"), (1, "P"), (1, "D"), (2, "P"), (2, "D"), (2, "B")]
    for name in "DBP":
        assert sorted(i % 3 for i, (_, n) in enumerate(order) if n == name) == [0, 1, 2]
    assert decide.final_order(["D"], 2) == [(0, "D"), (1, "D")]
    assert decide.final_order([], 3) == []


def S(r: int, g: float | None) -> decide.Sample:
    return decide.Sample(r, g)


def test_the_final_verdicts_pair_rounds_and_test_beyond_noise() -> None:
    samples = {
        "D": [S(0, 5.0), S(1, 5.2), S(2, 4.9)],
        "B": [S(0, 6.0), S(1, 6.3), S(2, 6.1)],
        "P": [S(0, 6.0), S(1, 6.0), S(2, None)],
    }
    v = decide.judge_final(samples, {"defaults": "D", "bringup": "B", "peer": "P"})
    assert v["ratio"] == {"median": pytest.approx(1.025), "min": 1.0, "max": pytest.approx(1.05), "rounds": 2}
    b = v["beats_defaults"]
    assert b["beats"] and b["p_value"] == pytest.approx(0.05) and b["gain"] == pytest.approx(1.1)
    assert v["configs"]["P"]["n"] == 2 and v["configs"]["D"]["median"] == 5.0
    # overlapping samples: no claim
    samples["B"] = [S(0, 5.1), S(1, 6.3), S(2, 4.8)]
    assert not decide.judge_final(samples, {"defaults": "D", "bringup": "B", "peer": "P"})["beats_defaults"][
        "beats"
    ]
    same = decide.judge_final(
        {"D": samples["D"], "P": samples["P"]}, {"defaults": "D", "bringup": "D", "peer": "P"}
    )
    assert same["beats_defaults"] == {"beats": False, "note": "bringup kept the defaults"}
    assert (
        decide.judge_final({"D": samples["D"]}, {"defaults": "D", "bringup": "D", "peer": "D"})["ratio"][
            "note"
        ]
        == "the same configuration"
    )


def report() -> dict[str, Any]:
    samples = {
        "(defaults)": [S(0, 5.0), S(1, 5.2), S(2, 4.9)],
        "--max-num-seqs 32": [S(0, 6.0), S(1, 6.3), S(2, 6.1)],
    }
    roles = {"defaults": "(defaults)", "bringup": "--max-num-seqs 32", "peer": "--max-num-seqs 32"}
    return {
        "engine": "vllm",
        "version": "0.24.0",
        "slo": {
            "ttft_s": 0.2,
            "itl_s": 0.04,
            "rule": "TTFT limit = ...",
            "defaults_p99_ttft_s": 0.3,
            "defaults_p99_itl_s": 0.03,
            "defaults_meet": False,
        },
        "peer": {
            "tool": "vllm bench sweep serve",
            "launches": 10,
            "device_s": 1200.0,
            "curve": [(1, 5.0), (2, 6.2), (3, 0.0)],
        },
        "bringup": {
            "launches": 3,
            "device_s": 420.0,
            "verdict": "no configuration beats ...",
            "curve": [(1, 5.1), (2, 6.0), (3, 6.1)],
        },
        "final": {
            "roles": roles,
            "describe": {k: k for k in samples},
            "verdict": decide.judge_final(samples, roles),
        },
    }


def test_the_table_says_the_ratio_the_shares_and_the_verdicts() -> None:
    t = decide.table(report())
    assert "| bringup tune | `--max-num-seqs 32` | 6.10 [6.00-6.30] | 3 | 7.0 |" in t
    assert "| defaults | `(defaults)` | 5.00 [4.90-5.20] | - | - |" in t
    assert "ratio bringup / peer (paired by round): **1.000** (the same configuration)" in t
    assert "0.30 and 0.35 (measure: <= 0.30 and <= 0.40)" in t
    assert "beats the defaults beyond noise: **yes** (p = 0.05 at 0.05" in t
    assert "TTFT p99 <= 200.0 ms, ITL p99 <= 40.00 ms" in t
    assert "TTFT 300.0 ms (over), ITL 30.00 ms (within): the defaults do not meet it" in t


def test_the_plot_is_an_svg_with_both_sides_and_the_final_medians() -> None:
    root = ET.fromstring(decide.svg(report()))
    ns = "{http://www.w3.org/2000/svg}"
    assert len(root.findall(f"{ns}polyline")) == 2  # best so far, each side
    assert len(root.findall(f"{ns}circle")) == 6
    texts = " ".join(t.text or "" for t in root.iter(f"{ns}text"))
    assert "final round, bringup: 6.1" in texts and "final round, defaults: 5" in texts


# -- the peers' commands ---------------------------------------------------------------------------
W = peer.Workload(128, 64, 0.5, 200, 64, 0)


def test_sglangs_random_lengths_are_asked_in_its_own_terms() -> None:
    argv = peer.sglang_bench_argv("py", 30000, "/m", W, Path("/o.jsonl"))
    val = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    # bringup and vLLM: [64, 192]; SGLang draws from [L x ratio, L]
    assert val["--random-input-len"] == "192" and val["--random-output-len"] == "96"
    assert float(val["--random-range-ratio"]) * 192 == pytest.approx(64, abs=1e-3)
    assert val["--dataset-name"] == "random-ids" and "--flush-cache" in argv and "--output-details" in argv
    fixed = peer.sglang_bench_argv("py", 1, "/m", peer.Workload(128, 64, 0.0, 8, 4), Path("/o"))
    assert (
        fixed[fixed.index("--random-input-len") + 1] == "128"
        and fixed[fixed.index("--random-range-ratio") + 1] == "1.0"
    )


def test_vllms_sweep_gets_named_points_and_switches() -> None:
    params = peer.sweep_params([{}, {"--max-num-seqs": "64", "--async-scheduling": False}], ["p00", "p01"])
    assert params == [
        {"_benchmark_name": "p00"},
        {"_benchmark_name": "p01", "max-num-seqs": "64", "async-scheduling": False},
    ]
    argv = peer.vllm_bench_argv("py", "http://h:1", "/m", W)
    assert argv[1].endswith("vllm_cli.py") and argv[2:4] == ["bench", "serve"]
    assert {"--save-detailed", "--ignore-eos"} <= set(argv) and argv[
        argv.index("--max-concurrency") + 1
    ] == "64"


FAKE_SWEEP = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    a = sys.argv
    params = json.loads(Path(a[a.index("--serve-params") + 1]).read_text())
    exp = Path(a[a.index("-o") + 1]) / a[a.index("-e") + 1]
    if "--resume" not in a and exp.exists():
        sys.exit("Cannot overwrite existing experiment_dir")
    for p in params:
        d = exp / ("SERVE--" + p["_benchmark_name"])
        if (d / "summary.json").exists():
            continue
        print("[BEGIN SERVER]")
        print("Server overrides: " + repr(p))
        if p.get("max-num-seqs") == "0":
            print("RuntimeError: Server process crashed with return code 1")
            sys.exit(1)
        d.mkdir(parents=True)
        (d / "run=0.json").write_text(json.dumps({"duration": 1.0, "ttfts": [0.1], "itls": [[0.01]], "errors": [""]}))
        (d / "summary.json").write_text("[]")
        print("[END SERVER]")
    """
)


def test_vllms_sweep_is_resumed_past_a_point_whose_server_dies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM 0.24.0's sweep has no --continue-on-error: the dead point is written down, the rest run."""
    fake = tmp_path / "sweep.py"
    fake.write_text(FAKE_SWEEP)

    class Eng:
        python = sys.executable

        def launch_env(self, cand: Any) -> dict[str, str]:
            return {"PYTHONUNBUFFERED": "1", "PATH": "/usr/bin:/bin"}

        def launch_argv(self, cand: Any, host: str, port: int) -> list[str]:
            return ["serve"]

    sweep = peer.VllmSweep(Eng(), None, 1, 1)  # type: ignore[arg-type]
    monkeypatch.setattr(
        sweep,
        "commands",
        lambda w, params, out, resume: [
            sys.executable,
            str(fake),
            "--serve-params",
            str(params),
            "-o",
            str(out),
            "-e",
            "sweep",
            *(["--resume"] if resume else []),
        ],
    )
    pts = [{}, {"--max-num-seqs": "0"}, {"--max-num-seqs": "8"}]
    runs = sweep.run(pts, ["p00", "p01", "p02"], W, tmp_path / "peer")
    assert [(r.name, len(r.results), bool(r.failed)) for r in runs] == [
        ("p00", 1, False),
        ("p01", 0, True),
        ("p02", 1, False),
    ]
    assert "Server process crashed" in runs[1].failed
    assert json.loads((tmp_path / "peer" / "serve-params.json").read_text()) == [
        {"_benchmark_name": "p02", "max-num-seqs": "8"}
    ]


def test_sglangs_grid_keeps_each_runs_result_and_says_why_a_point_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop written here for SGLang (it has no sweep command): each run's last JSON line is kept,
    a server that dies is the point's failure, in its own words."""
    fake = tmp_path / "bench.py"
    fake.write_text(
        "import json, sys\nopen(sys.argv[1], 'a').write(json.dumps({'duration': 1.0, 'ttfts': [0.1]}) + '\\n')\n"
    )
    monkeypatch.setattr(
        peer, "sglang_bench_argv", lambda py, port, model, w, out: [sys.executable, str(fake), str(out)]
    )
    dead = {"--max-running-requests": "1"}

    @contextlib.contextmanager
    def server(engine: Any, cand: Any, port: int, log: Path, timeout: float) -> Any:
        if cand.flag_dict == dead:
            raise peer.ServerDied("exited with 1: ValueError: max_running_requests too small")
        yield "http://x"

    class Eng:
        python = sys.executable

        def launch_env(self, cand: Any) -> dict[str, str]:
            return {"PATH": "/usr/bin:/bin"}

    monkeypatch.setattr(peer, "server", server)
    from bringup.core.candidate import Candidate

    grid = peer.SglangGrid(Eng(), Candidate.make("sglang", "/m", {}), 1, 2)  # type: ignore[arg-type]
    runs = grid.run([{}, dead], ["p00", "p01"], W, tmp_path / "peer")
    assert [len(r.results) for r in runs] == [2, 0] and runs[0].results[0]["ttfts"] == [0.1]
    assert runs[1].failed == "exited with 1: ValueError: max_running_requests too small"
