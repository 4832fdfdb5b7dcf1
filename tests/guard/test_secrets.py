"""Secrets never reach a file, a log line or a report; probes and bench send the key the server wants."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.core.candidate import Candidate
from bringup.guard import secrets
from bringup.loadgen import BenchConfig, bench
from bringup.loadgen.config import BenchError
from bringup.verify.probes import ProbeConfig, ProbeRunner
from tests.conftest import bringup
from tests.paths import ROOT, TESTS

FAKE = TESTS / "fake_openai_server.py"
SEED = ROOT / "bringup" / "data" / "scenarios" / "glm5-nvfp4-sm120.yaml"
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


def all_bytes_under(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "flag",
    [
        "--api-key",
        "--admin-api-key",
        "--ssl-keyfile-password",
        "--hf-token",
        "--my-secret",
        "--db-password",
        "--access-token",
    ],
)
def test_secret_flags_by_name(flag):
    assert secrets.is_secret_flag(flag)


@pytest.mark.parametrize(
    "flag",
    [
        "--max-num-batched-tokens",
        "--tokenizer",
        "--tokenizer-mode",
        "--ssl-keyfile",
        "--max-tokens",
        "--kv-cache-dtype",
        "--disable-log-requests",
    ],
)
def test_ordinary_flags_are_not_secret(flag):
    assert not secrets.is_secret_flag(flag)


@pytest.mark.parametrize(
    "name, secret",
    [
        ("HF_TOKEN", True),
        ("VLLM_API_KEY", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("DB_PASSWORD", True),
        ("HUGGING_FACE_HUB_TOKEN", True),
        ("TOKENIZERS_PARALLELISM", False),
        ("VLLM_MAX_TOKENS", False),
        ("CUDA_VISIBLE_DEVICES", False),
    ],
)
def test_secret_env_names(name, secret):
    assert secrets.is_secret_name(name) is secret


def test_help_marks_flags_secret():
    class Opt:
        def __init__(self, name, help):
            self.name, self.help, self.all_names, self.takes_value = name, help, [name], True

    found = secrets.learn_from_help(
        [
            Opt(
                "--gateway-credential-x",
                "If provided, the server will require one of these keys to be presented in the header.",
            ),
            Opt("--block-size", "Token block size."),
        ]
    )
    assert found == {"--gateway-credential-x"} and secrets.is_secret_flag("--gateway-credential-x")


def test_scrub_text_catches_values_bearer_and_flag_patterns():
    secrets.register("--api-key", "sk-value-12345")
    text = (
        "args: api_key='sk-value-12345' Authorization: Bearer abcdefgh "
        "cmd --admin-api-key zzz-unseen --tp 2 HF_TOKEN=hf_unseen_value max_tokens=None"
    )
    out = secrets.scrub_text(text)
    for leaked in ("sk-value-12345", "abcdefgh", "zzz-unseen", "hf_unseen_value"):
        assert leaked not in out
    assert "--tp 2" in out and "max_tokens=None" in out  # ordinary text untouched


def test_candidate_key_and_json_hold_no_secret_but_launch_does():
    a = Candidate.make("vllm", "m", {"--api-key": "sk-aaaa-1111", "--tp": "2"}, {"HF_TOKEN": "hf_bbbb_2222"})
    b = Candidate.make("vllm", "m", {"--api-key": "sk-other-999", "--tp": "2"}, {"HF_TOKEN": "hf_other_999"})
    assert a.key() == b.key()  # the key does not depend on (or hash) the secret
    blob = json.dumps(a.to_json()) + a.shell_command(["vllm", "serve"])
    assert "sk-aaaa" not in blob and "hf_bbbb" not in blob
    assert "sk-aaaa-1111" in a.argv_flags()  # the server still gets it
    # Read back from disk (***): this process puts back the value it knows.
    back = Candidate.from_json(json.loads(json.dumps(b.to_json())))
    assert back.flag_dict["--api-key"] == "sk-other-999" and back.env_dict["HF_TOKEN"] == "hf_other_999"


def test_redact_argv_hides_every_value_of_a_many_valued_flag():
    assert secrets.redact_argv(["--api-key", "k1xx", "k2xx", "--tp", "2", "--hf-token=hf_x"]) == [
        "--api-key",
        "***",
        "***",
        "--tp",
        "2",
        "--hf-token=***",
    ]


@pytest.fixture
def keyed_server():
    p = subprocess.Popen(
        [sys.executable, str(FAKE), "--port", "0", "--api-key", "sk-fake-key-777"],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = p.stdout.readline() if p.stdout else ""
    assert line.startswith("PORT "), line
    yield f"http://127.0.0.1:{int(line.split()[1])}"
    p.kill()
    p.wait(timeout=5)
    if p.stdout:
        p.stdout.close()


def test_probes_send_the_key(keyed_server):
    without = ProbeRunner(keyed_server, ProbeConfig(batch_size=2, long_tokens=8)).run()
    assert any("401" in r.detail for r in without)
    with_key = ProbeRunner(
        keyed_server, ProbeConfig(batch_size=2, long_tokens=8, api_key="sk-fake-key-777")
    ).run()
    assert not any("401" in r.detail for r in with_key)
    assert with_key[0].passed and with_key[1].passed, with_key[:2]


def test_bench_sends_the_key_and_never_serialises_it(keyed_server):
    cfg = BenchConfig(
        url=keyed_server,
        api_key="sk-fake-key-777",
        num_prompts=4,
        concurrency=2,
        input_len=8,
        output_len=4,
        tokenizer="words",
        warmup=0,
    )
    res = bench(cfg)
    assert res.summary.completed == 4 and res.summary.failed == 0
    assert "sk-fake-key-777" not in cfg.model_dump_json()
    with pytest.raises(BenchError, match="401 Unauthorized.*--api-key"):
        bench(cfg.model_copy(update={"api_key": None}))


@pytest.mark.slow
@pytest.mark.parametrize("form", ["space", "equals"])
def test_trial_with_api_key_leaves_no_secret_on_disk(tmp_path, form):
    key, token = "sk-test-Zq81secretvalue", "hf_Zq81tokenvalue"
    flag = ["--api-key", key] if form == "space" else [f"--api-key={key}"]
    rc, d, out, err = bringup(
        "trial",
        "--scenario",
        str(SEED),
        "--time-scale",
        "0.002",
        "--runs-dir",
        str(tmp_path),
        "--json",
        "--env",
        f"HF_TOKEN={token}",
        "--",
        *WORKS,
        *flag,
    )
    assert rc == 0 and d["status"] == "works", err
    files = all_bytes_under(tmp_path)
    assert any(p.name == "server.log" for p in files)
    for p, data in files.items():
        assert key.encode() not in data and token.encode() not in data, p
    assert key.lower() not in out.lower() and key.lower() not in err.lower()
    cand = json.loads(next(p for p in files if p.name == "candidate.json").read_text())
    assert cand["flags"]["--api-key"] == "***" and cand["env"]["HF_TOKEN"] == "***"


@pytest.mark.slow
@pytest.mark.parametrize("form", ["space", "equals"])
def test_run_journal_and_reports_hold_no_secret(tmp_path, form):
    key = "sk-run-Zq81secretvalue"
    flag = ["--api-key", key] if form == "space" else [f"--api-key={key}"]
    rc, d, out, err = bringup(
        "run",
        "--scenario",
        str(SEED),
        "--time-scale",
        "0.002",
        "--runs-dir",
        str(tmp_path),
        "--json",
        "--max-launches",
        "2",
        "--baseline",
        " ".join([*WORKS, *flag]),
    )
    assert d is not None, err
    files = all_bytes_under(tmp_path)
    names = {p.name for p in files}
    assert {"journal.sqlite", "run.json", "FINDINGS.md", "findings.json"} <= names, names
    for p, data in files.items():
        assert key.lower().encode() not in data.lower(), p
    db = sqlite3.connect(tmp_path / "journal.sqlite")
    dump = "\n".join(db.iterdump())
    db.close()
    assert key not in dump and "--api-key" in dump


def test_a_forgotten_secret_is_no_longer_replaced_but_others_are():
    secrets.register("--api-key", "made-up-one")
    secrets.register("--api-key", "made-up-two")
    secrets.forget("--api-key", "made-up-one")
    out = secrets.scrub_text("x made-up-one y made-up-two")
    assert "made-up-one" in out and "made-up-two" not in out
    secrets.forget("--api-key", "made-up-two")
    assert "made-up-two" in secrets.scrub_text("made-up-two")
