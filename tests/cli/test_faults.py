"""Faults injected into bringup (issue 14's table): each gives a clear answer, loses nothing
recorded, and leaves nothing running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import bringup, group_alive, wait_until
from tests.paths import ROOT

SEED = ROOT / "bringup" / "data" / "scenarios" / "glm5-nvfp4-sm120.yaml"


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.slow
def test_signal_exit_codes_follow_convention(tmp_path, sig, code):
    runs = tmp_path / "runs"
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bringup",
            "trial",
            "--scenario",
            str(SEED),
            "--time-scale",
            "0.5",
            "--runs-dir",
            str(runs),
            "--",
            "--tp",
            "8",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "BRINGUP_STATE_DIR": str(tmp_path / "state")},
        start_new_session=True,
    )
    try:
        assert wait_until(lambda: bool(list(runs.rglob("server.pid"))), 30)
        pgid = int(next(runs.rglob("server.pid")).read_text().split()[0])
        time.sleep(0.5)
        os.kill(p.pid, sig)
        rc = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == code
    assert "interrupted" in (p.stderr.read() if p.stderr else "")
    assert group_alive(pgid) == []


# ---- bounded work on any input ---------------------------------------------------------------
LOG = ROOT / "tests" / "data" / "logs" / "sglang-graph-oom.log"


@pytest.mark.slow
def test_explain_on_random_bytes_is_quick_and_prints_no_raw_bytes(tmp_path):
    import random

    f = tmp_path / "random.bin"
    f.write_bytes(random.Random(3).randbytes(4 << 20))
    # A hang guard, not a measure (its time is benchmarks/explain_memory.py's): no crawl over 4 MB.
    rc, _, out, err = bringup("explain", str(f), timeout=300)
    assert rc == 1 and "Traceback" not in err
    assert "\x1b" not in out and "\x00" not in out


@pytest.mark.slow
def test_escape_sequences_never_reach_the_terminal_or_json(tmp_path):
    f = tmp_path / "esc.log"
    f.write_bytes(
        LOG.read_bytes().replace(b"Exception: Capture", b"\x1b]0;pwned\x07\x1b[2JException: Capture")
    )
    rc, _, out, _ = bringup("explain", str(f))
    assert rc == 1 and "\x1b" not in out and "\x07" not in out
    assert "\\x1b" in out  # shown, escaped
    rc, d, _, _ = bringup("explain", str(f), "--json")
    assert d["failure_class"] == "oom-graph-capture"
    assert not any("\x1b" in e for e in d["evidence"])


@pytest.mark.slow
def test_select_lines_keeps_memory_bounded_and_the_answer(tmp_path):
    import tracemalloc

    from bringup.engines.explain import explain_file, explain_lines
    from bringup.observe.logread import select_lines

    lines = LOG.read_text().splitlines(keepends=True)
    big = tmp_path / "big.log"
    filler = "".join(
        f"[2026-02-18 22:20:{i % 60:02d} TP0] Decode batch. #running-req: {i % 64}, #token: {i}\n"
        for i in range(20000)
    ).encode()
    with open(big, "wb") as f:
        f.write("".join(lines[:4]).encode())
        for _ in range(20):  # ~30 MB
            f.write(filler)
        f.write(b"x" * (5 << 20) + b"\n")  # one 5 MB line
        f.write("".join(lines[4:]).encode())
    tracemalloc.start()
    sel = select_lines(big)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 40 << 20, peak
    assert sel.total_lines > 400000 and sel.kept_lines < 5000 and sel.cut_lines == 1
    ref = explain_lines(LOG.read_text().splitlines())
    got = explain_file(big)
    assert (
        (got.failure_class, got.phase)
        == (ref.failure_class, ref.phase)
        == ("oom-graph-capture", "graph-capture")
    )


@pytest.mark.slow
def test_oversized_scenario_and_knowledge_files_are_refused_clearly(tmp_path):
    from bringup.core.datafiles import KnowledgeFileError, load_yaml

    big = tmp_path / "big.yaml"
    big.write_text("rules:\n" + "  - {id: x, source: y}\n" * 450000)  # ~9.5 MB
    with pytest.raises(KnowledgeFileError, match="over the 8 MB limit"):
        load_yaml(big)
    rc, _, out, err = bringup("trial", "--scenario", str(big), "--json", check_json=False)
    assert rc == 2 and "over the 2 MB limit" in err and "Traceback" not in err
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(KnowledgeFileError, match="not UTF-8"):
        load_yaml(bad)


# ---- preflight: a model folder that cannot load ------------------------------------------------
CFG = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "intermediate_size": 128,
    "vocab_size": 256,
}


def _folder(tmp_path: Path, kind: str) -> Path:
    import json
    import struct

    d = tmp_path / kind
    d.mkdir()
    if kind == "empty":
        return d
    (d / "config.json").write_text('{"model_type": "llama",' if kind == "bad-json" else json.dumps(CFG))
    if kind == "bad-utf8-header":
        hdr = b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "x": "\xff\xfe"}'
        (d / "model.safetensors").write_bytes(struct.pack("<Q", len(hdr)) + hdr + b"\0" * 8)
    elif kind == "cut-shard":
        hdr = b'{"a": {"dtype": "F32", "shape": [1024], "data_offsets": [0, 4096]}}'
        (d / "model.safetensors").write_bytes(struct.pack("<Q", len(hdr)) + hdr + b"\0" * 100)
    elif kind == "missing-shards":
        (d / "model.safetensors.index.json").write_text(
            json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors"}})
        )
    return d


FOLDERS = [
    ("empty", "no config.json"),
    ("bad-json", "not valid JSON"),
    ("bad-utf8-header", "header is not UTF-8"),
    ("cut-shard", "cut short"),
    ("missing-shards", "listed but missing"),
]


@pytest.mark.parametrize("kind, needle", FOLDERS, ids=[f[0] for f in FOLDERS])
@pytest.mark.slow
def test_a_model_folder_that_cannot_load_is_refused_before_launch(tmp_path, kind, needle):
    d = _folder(tmp_path, kind)
    rc, _, out, err = bringup(
        "trial", "--engine", "vllm", "--model", str(d), "--runs-dir", str(tmp_path / "runs")
    )
    assert rc == 2 and needle in " ".join(err.split()) and "nothing was launched" in err, err
    assert "Traceback" not in err
    assert not list((tmp_path / "runs").rglob("server.pid"))  # never launched


@pytest.mark.parametrize("kind", ["bad-json", "bad-utf8-header"])
@pytest.mark.slow
def test_plan_and_model_give_clear_errors_on_a_damaged_folder(tmp_path, kind):
    d = _folder(tmp_path, kind)
    rc, _, out, err = bringup(
        "plan", str(d), "--gpu-mem-gib", "80", "--cc", "9.0", "--gpus", "1", "--mem-fraction", "0.9"
    )
    # Both refuse a damaged model first, naming the damage (issue 28: `plan` said "fits" with a
    # damaged shard, `model` printed a fingerprint of a folder that cannot load).
    needle = "not valid JSON" if kind == "bad-json" else "header is not UTF-8"
    assert "Traceback" not in err
    assert rc == 2 and needle in " ".join(err.split()), err
    rc, _, out, err = bringup("model", str(d))
    assert "Traceback" not in err
    assert rc == 2 and needle in " ".join(err.split()), err


@pytest.mark.parametrize(
    "line, cls, sig",
    [
        (
            "ValueError: Invalid repository ID or local directory specified: '/models/x'.",
            "model-load",
            "model-invalid-repository",
        ),
        (
            "safetensors_rust.SafetensorError: Error while deserializing header: incomplete metadata, file not fully covered",
            "model-load",
            "model-safetensors-corrupt",
        ),
    ],
)
def test_engine_model_load_errors_have_their_own_class(line, cls, sig):
    from bringup.observe.signatures import classify

    c = classify(["INFO starting", line], "vllm", "parse-args")
    assert (c.failure_class, c.signature_id) == (cls, sig)


# ---- a damaged journal, a read-only runs folder ------------------------------------------------
WORKS = [
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
    "--mem-fraction-static",
    "0.88",
    "--nsa-decode-backend",
    "trtllm",
    "--nsa-prefill-backend",
    "trtllm",
]


def _one_run(runs: Path) -> tuple[int, str]:
    rc, d, out, err = bringup(
        "run",
        "--scenario",
        str(SEED),
        "--time-scale",
        "0.002",
        "--runs-dir",
        str(runs),
        "--json",
        "--max-launches",
        "1",
        "--no-minimize",
        "--baseline",
        " ".join(WORKS),
        check_json=False,
    )
    return rc, err


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    runs = tmp_path_factory.mktemp("finished") / "runs"
    rc, err = _one_run(runs)
    assert rc in (0, 1) and (runs / "journal.sqlite").is_file(), err
    assert list(runs.glob("runs/*/FINDINGS.md")), err
    return runs


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize("damage", ["junk-header", "cut-in-half"])
@pytest.mark.slow
def test_a_damaged_journal_is_moved_aside_untouched_and_the_user_told(tmp_path, finished_run, damage):
    runs = _copy(finished_run, tmp_path / "runs")
    j = runs / "journal.sqlite"
    data = j.read_bytes()
    bad = (b"this is not sqlite" + data[18:]) if damage == "junk-header" else data[: len(data) // 2]
    j.write_bytes(bad)
    rc, _, out, err = bringup("run", "--resume", "--runs-dir", str(runs), "--json", check_json=False)
    msg = " ".join(err.split())
    assert rc == 2 and "journal" in msg and "damaged" in msg and "moved aside" in msg, err
    assert "Traceback" not in err
    aside = [p for p in runs.glob("journal.sqlite.damaged-*") if not p.name.endswith(("-wal", "-shm"))]
    assert len(aside) == 1 and aside[0].read_bytes() == bad  # renamed, never edited
    assert not j.exists()
    rc, err = _one_run(runs)  # the same command again: a new journal
    assert rc in (0, 1) and j.is_file(), err
    assert aside[0].read_bytes() == bad


def _readonly(folder: Path, *args: str) -> tuple[int, str, str]:
    """Run bringup with `folder` read-only: a read-only bind mount as root (chmod does not stop
    root), else permissions."""
    cmd = [sys.executable, "-m", "bringup", *args]
    if os.geteuid() == 0:
        import shlex

        f = shlex.quote(str(folder))
        cmd = [
            "unshare",
            "-m",
            "sh",
            "-c",
            f"mount --bind {f} {f} && mount -o remount,bind,ro {f} && exec {shlex.join(cmd)}",
        ]
    else:
        for p in [folder, *folder.rglob("*")]:
            p.chmod(p.stat().st_mode & ~0o222)
    r = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "BRINGUP_STATE_DIR": str(folder.parent / "state")},
    )
    return r.returncode, r.stdout, r.stderr


@pytest.mark.slow
def test_a_read_only_runs_folder_is_refused_before_any_launch(tmp_path, finished_run):
    runs = _copy(finished_run, tmp_path / "runs")
    before = {p: p.read_bytes() for p in runs.rglob("*") if p.is_file()}
    for args in (
        ["trial", "--scenario", str(SEED), "--time-scale", "0.002", "--runs-dir", str(runs), "--", *WORKS],
        [
            "run",
            "--scenario",
            str(SEED),
            "--time-scale",
            "0.002",
            "--runs-dir",
            str(runs),
            "--max-launches",
            "1",
            "--baseline",
            " ".join(WORKS),
        ],
    ):
        rc, out, err = _readonly(runs, *args)
        assert rc == 2 and "not writable" in " ".join(err.split()) and "nothing was launched" in err, err
        assert "Traceback" not in err
    assert {p: p.read_bytes() for p in runs.rglob("*") if p.is_file()} == before


@pytest.mark.slow
def test_report_works_on_a_read_only_runs_folder(tmp_path, finished_run):
    runs = _copy(finished_run, tmp_path / "runs")
    run_id = next(runs.glob("runs/*")).name
    findings = next(runs.glob("runs/*/FINDINGS.md"))
    before = findings.read_bytes()
    rc, out, err = _readonly(runs, "report", run_id, "--runs-dir", str(runs))
    assert rc == 0, err
    assert "Traceback" not in err and run_id in out
    assert findings.read_bytes() == before


# ---- one hang deadline for every phase, after ready too ---------------------------------------
@pytest.mark.parametrize("seqs, phase", [("128", "first-request"), ("8", "decode")])
@pytest.mark.slow
def test_a_server_that_hangs_after_ready_is_a_hang_at_the_deadline(tmp_path, seqs, phase):
    rc, d, _, err = bringup(
        "trial",
        "--scenario",
        str(ROOT / "tests" / "data" / "scenarios" / "hang-after-ready-vllm.yaml"),
        "--time-scale",
        "0.01",
        "--hang-timeout",
        "3",
        "--runs-dir",
        str(tmp_path),
        "--json",
        "--",
        "--max-num-seqs",
        seqs,
    )
    assert rc == 1 and (d["status"], d["failure_class"], d["phase"]) == ("timeout", "hang", phase), d
    # the 3 s hang deadline called it, not the old 120 s probe timeout
    assert "no probe answered for 3 s" in d["evidence"][0] and "Ready, then no answer" in d["hint"]
    assert group_alive(int((Path(d["log_path"]).parent / "server.pid").read_text().split()[0])) == []


# ---- what held before: keep it -----------------------------------------------------------------
@pytest.mark.slow
def test_a_port_already_taken_is_refused_before_launch(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        rc, d, _, _ = bringup(
            "trial",
            "--scenario",
            str(SEED),
            "--time-scale",
            "0.002",
            "--runs-dir",
            str(tmp_path),
            "--port",
            str(port),
            "--json",
            "--",
            *WORKS,
        )
    assert rc == 1 and d["failure_class"] == "port-in-use" and d["launched"] is False


@pytest.mark.slow
def test_shell_metacharacters_in_flags_are_never_executed(tmp_path):
    canary = tmp_path / "canary"
    rc, d, _, _ = bringup(
        "trial",
        "--scenario",
        str(SEED),
        "--time-scale",
        "0.002",
        "--runs-dir",
        str(tmp_path),
        "--json",
        "--",
        *WORKS,
        "--chat-template",  # a value-taking flag
        f"$(touch {canary}); touch {canary}",
    )
    assert d is not None and not canary.exists()


def _alias_bomb(tmp_path: Path) -> Path:
    """9^9 (387 million) references to one short list, in 400 bytes of YAML."""
    bomb = tmp_path / "bomb.yaml"
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    bomb.write_text("\n".join(lines) + "\nname: *a8\n")
    return bomb


def test_a_yaml_alias_bomb_scenario_is_refused_without_expanding_it(tmp_path):
    """Refused, and in bounded memory (not wall time: issue 28): walking the 387 million
    references, or printing them in the error, would take gigabytes."""
    import tracemalloc

    from bringup.scenario.loader import ScenarioError, load_scenario

    bomb = _alias_bomb(tmp_path)
    tracemalloc.start()
    try:
        with pytest.raises(ScenarioError) as e:
            load_scenario(bomb)
        message = str(e.value)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "name" in message and len(message) < 10_000
    assert peak < 64 << 20, peak


@pytest.mark.slow
def test_a_yaml_alias_bomb_scenario_is_refused_by_the_cli(tmp_path):
    rc, _, _, err = bringup(
        "trial", "--scenario", str(_alias_bomb(tmp_path)), "--json", timeout=300, check_json=False
    )
    assert rc == 2 and "Traceback" not in err and "name" in err
