"""The reference-differential probe: comparison, tolerances, the reference file and its identity."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import httpx
import pytest

from bringup.engines.targets import TargetError, model_answers
from bringup.verify.probes import Disagree, ProbeConfig, ProbeRunner
from bringup.verify.reference import (
    ModelIdentity,
    PromptReference,
    Reference,
    ReferenceError,
    ServerOutput,
    Step,
    compare,
    compute_reference,
    fits_in_process,
    identity_of,
    load_reference,
    precision_of,
    reference_for,
    tolerance,
)
from tests.conftest import bringup


def _ref(gaps: list[float], eos_at: int | None = None) -> Reference:
    """A synthetic reference: token i is 't{i}' with logprob -0.1, its runner-up 'u{i}' gaps[i] behind."""
    steps = []
    for i, g in enumerate(gaps):
        tok = "</s>" if i == eos_at else f" t{i}"
        steps.append(Step(100 + i if i != eos_at else 2, tok, -0.1, {tok: -0.1, f" u{i}": -0.1 - g}))
    p = PromptReference("prompt", "".join(s.token for s in steps), steps)
    return Reference("m", ModelIdentity("c" * 64, "t" * 64), "float32", [p], eos_token_ids=[2])


def _same(ref: Reference, shift: float = 0.0) -> ServerOutput:
    p = ref.prompts[0]
    return ServerOutput(p.text, [s.token for s in p.steps], [s.logprob + shift for s in p.steps], "length")


def test_identical_output_agrees():
    ref = _ref([2.0] * 6)
    v = compare(ref, [_same(ref)], tolerance("bfloat16"))
    assert v.passed and "1 prompts agree" in v.detail and "tie-break" not in v.detail


def test_tie_break_flip_is_allowed_only_under_the_precisions_gap():
    ref = _ref([2.0, 2.0, 0.3, 2.0])
    out = _same(ref)
    out.tokens = out.tokens[:2] + [" u2", " x", " y"]
    assert compare(ref, [out], tolerance("bfloat16")).passed  # 0.3 < bf16's 0.5
    v = compare(ref, [out], tolerance("float32"))  # 0.3 > fp32's 0.02: a real divergence
    assert not v.passed and v.kind == "disagree" and "diverges at token 2" in v.detail


def test_real_divergence_is_caught():
    ref = _ref([3.0] * 5)
    out = _same(ref)
    out.tokens[1] = " u1"
    for prec in ("float32", "float16", "bfloat16", "quant8"):
        v = compare(ref, [out], tolerance(prec))
        assert not v.passed and "diverges at token 1" in v.detail and "ahead by 3.00" in v.detail


def test_logprob_drift_and_nan():
    ref = _ref([3.0] * 4)
    assert compare(ref, [_same(ref, 0.2)], tolerance("bfloat16")).passed
    v = compare(ref, [_same(ref, 0.2)], tolerance("float32"))
    assert not v.passed and "more than 0.05 apart" in v.detail
    out = _same(ref)
    out.logprobs[2] = math.nan
    v = compare(ref, [out], tolerance("bfloat16"))
    assert not v.passed and v.kind == "nan"


def test_text_only_and_stopping_at_eos():
    ref = _ref([3.0, 3.0, 3.0, 3.0], eos_at=2)
    assert compare(ref, [ServerOutput(" t0 t1", finish_reason="stop")], tolerance("float32")).passed
    v = compare(ref, [ServerOutput(" t0 zz t2", finish_reason="length")], tolerance("bfloat16"))
    assert not v.passed and "text departs at token 1" in v.detail
    ref2 = _ref([3.0, 0.01, 3.0])
    assert compare(ref2, [ServerOutput(" t0 other")], tolerance("float32")).passed  # a near tie
    # With tokens: stopping early where the reference is confident is a divergence.
    out = ServerOutput(" t0", [" t0"], [-0.1], "stop")
    assert not compare(_ref([3.0] * 3), [out], tolerance("bfloat16")).passed


def test_precision_from_flags():
    assert precision_of({}) == "auto"
    assert precision_of({"--dtype": "float16"}) == "float16"
    assert precision_of({"--dtype": "half"}) == "float16"
    assert precision_of({"--dtype": "bfloat16"}) == "bfloat16"
    assert precision_of({"--dtype": "float32", "--quantization": "fp8"}) == "quant8"
    assert precision_of({"--quantization": "bnb-4bit"}) == "quant4"
    t32, t16, tb, tq = (tolerance(p) for p in ("float32", "float16", "bfloat16", "quant4"))
    assert t32.tie_gap < t16.tie_gap < tb.tie_gap < tq.tie_gap
    assert tolerance("no-such").precision == "auto"


@pytest.fixture(scope="module")
def recorded(tiny_model, tmp_path_factory) -> tuple[Path, Reference]:
    ref = compute_reference(str(tiny_model), tokens=6)
    return ref.save(tmp_path_factory.mktemp("ref") / "tiny.json"), ref


@pytest.mark.slow
def test_round_trip_and_identity(tiny_model, recorded):
    path, ref = recorded
    back = load_reference(path, str(tiny_model))
    assert back == ref and len(back.prompts) == 4 and all(len(p.steps) == 6 for p in back.prompts)
    assert back.identity == identity_of(tiny_model)
    for p in back.prompts:  # greedy: every chosen token is its step's best
        assert all(s.logprob == max(s.top.values()) for s in p.steps)
    assert compare(back, [ServerOutput(p.text) for p in back.prompts], tolerance("float32")).passed


@pytest.mark.slow
def test_refuses_another_model_or_tokenizer(tiny_model, recorded, tmp_path):
    path, _ = recorded
    other = tmp_path / "other"
    shutil.copytree(tiny_model, other)
    cfg = json.loads((other / "config.json").read_text())
    cfg["num_hidden_layers"] = 3
    (other / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ReferenceError, match="recorded for another model"):
        load_reference(path, str(other))
    shutil.copy(tiny_model / "config.json", other / "config.json")
    tj = json.loads((other / "tokenizer.json").read_text())
    tj["added_tokens"][0]["content"] = "<unknown>"
    (other / "tokenizer.json").write_text(json.dumps(tj))
    with pytest.raises(ReferenceError, match="another tokenizer"):
        load_reference(path, str(other))
    (tmp_path / "junk.json").write_text("{}")
    with pytest.raises(ReferenceError, match="format"):
        load_reference(tmp_path / "junk.json")
    # The CLI says so and exits 2, before launching anything.
    rc, _, _, err = bringup(
        "trial",
        "--engine",
        "vllm",
        "--model",
        str(other),
        "--reference",
        str(path),
        "--runs-dir",
        str(tmp_path / "runs"),
    )
    assert rc == 2 and "another tokenizer" in err


@pytest.mark.slow  # `recorded` computes a reference: PyTorch and transformers, seconds to import
def test_reference_for_choices(tiny_model, recorded, tmp_path):
    path, ref = recorded
    assert reference_for(str(tiny_model), "none")[0] is None
    assert reference_for("org/not-here", "auto")[0] is None
    got, why = reference_for(str(tiny_model), str(path))
    assert got == ref and str(path) in why
    ok, _ = fits_in_process(tiny_model)
    assert ok and not fits_in_process(tiny_model, max_gib=1e-6)[0]
    assert reference_for(str(tiny_model), "auto", max_gib=1e-6)[0] is None


@pytest.mark.slow
def test_bringup_reference_cli(tiny_model, tmp_path):
    out = tmp_path / "r.json"
    rc, _, _, err = bringup("reference", str(tiny_model), "-o", str(out), "--tokens", "4")
    assert rc == 0, err
    ref = load_reference(out, str(tiny_model))
    assert all(len(p.steps) == 4 for p in ref.prompts) and "wrote" in err


@pytest.mark.slow  # `recorded`: see above
def test_probe_against_a_server(recorded):
    """The probe asks for the reference's prompts and fails on a server that answers otherwise."""
    _, ref = recorded
    by_prompt = {p.prompt: p for p in ref.prompts}
    asked: list[dict] = []

    def server(wrong: bool):
        def handler(request: httpx.Request) -> httpx.Response:
            body = json.loads(request.content)
            asked.append(body)
            p = by_prompt[body["prompt"]]
            toks = [s.token for s in p.steps][: body["max_tokens"]]
            if wrong:
                toks = [toks[0]] + ["WRONG"] * (len(toks) - 1)
            lps = [s.logprob for s in p.steps]
            return httpx.Response(
                200,
                json={
                    "choices": [
                        {
                            "text": "".join(toks),
                            "finish_reason": "length",
                            "logprobs": {"tokens": toks, "token_logprobs": lps},
                        }
                    ]
                },
            )

        return httpx.Client(transport=httpx.MockTransport(handler), base_url="http://x")

    runner = ProbeRunner("http://x", ProbeConfig(reference=ref, reference_precision="bfloat16"))
    assert "reference" in [n for n, _ in runner.ladder()]
    assert "4 prompts agree" in runner.probe_reference(server(False))
    assert [a["prompt"] for a in asked] == [p.prompt for p in ref.prompts] and asked[0]["logprobs"] == 1
    with pytest.raises(Disagree):
        # a random model's logits are near ties; WRONG is not in its top list, so the runner-up gap counts
        runner.cfg.reference_precision = "float32"
        runner.probe_reference(server(True))
    assert "reference" not in [n for n, _ in ProbeRunner("http://x", ProbeConfig()).ladder()]


def test_answers_file_next_to_the_model(tmp_path):
    (tmp_path / "bringup_answers.json").write_text(json.dumps({"rev a b c": "c b a"}))
    assert [(a.prompt, a.expected) for a in model_answers(tmp_path)] == [("rev a b c", "c b a")]
    (tmp_path / "bringup_answers.json").write_text("[1]")
    with pytest.raises(TargetError, match="prompt -> expected"):
        model_answers(tmp_path)
    assert model_answers(tmp_path / "nothing") == []


def test_tune_verdict_in_tune_json_and_the_report(tmp_path):
    """The winner's reference verdict travels in tune.json and shows in the HTML report."""
    from bringup.report.html import load_tunes, render_html
    from bringup.tuning.result import TunePoint, TuneResult

    best = TunePoint(
        number=1,
        knobs={"--max-num-seqs": 8},
        status="ok",
        metrics={"output_tps": 10.0},
        objective=1.0,
        launch_s=1.0,
        trial_dir="",
        command="vllm serve m --max-num-seqs 8",
    )
    t = TuneResult(
        tune_id="t1",
        run_dir=str(tmp_path),
        engine="vllm",
        model="m",
        base_command="vllm serve m",
        objective="throughput",
        points=[best],
        best=best,
        best_command=best.command,
        reference="in-process reference (0.01 GiB in float32)",
        reference_verdict="agrees: 4 prompts agree with the reference (auto tolerances)",
    )
    (tmp_path / "tune" / "t1").mkdir(parents=True)
    (tmp_path / "tune" / "t1" / "tune.json").write_text(t.model_dump_json())
    back = load_tunes(tmp_path)[0]
    assert back.reference_verdict == t.reference_verdict
    html = render_html(tmp_path, None, [back])
    assert "agrees: 4 prompts agree with the reference" in html and "in-process reference" in html


@pytest.mark.slow
def test_too_big_for_the_host_goes_to_a_free_gpu_in_a_child_process(tiny_model, tmp_path, monkeypatch):
    """Too big for the quick host copy but given a GPU: `bringup reference --device cuda` runs in a
    child process on that GPU alone. Here no GPU exists, so the child fails, and the run is told why;
    a GPU too small for it is not tried at all."""
    calls = []
    import subprocess as sp

    real_run = sp.run

    def spy(argv, **kw):
        calls.append((argv, kw.get("env", {}).get("CUDA_VISIBLE_DEVICES")))
        return real_run(argv, **kw)

    monkeypatch.setattr(sp, "run", spy)
    got, why = reference_for(
        str(tiny_model), "auto", cache_dir=tmp_path, max_gib=1e-6, gpu="1", gpu_memory_gib=80
    )
    assert got is None and "computing it on GPU 1 failed" in why
    ((argv, visible),) = calls
    assert (
        argv[1:4] == ["-m", "bringup", "reference"] and argv[-2:] == ["--device", "cuda"] and visible == "1"
    )
    calls.clear()
    got, why = reference_for(
        str(tiny_model), "auto", cache_dir=tmp_path, max_gib=1e-6, gpu="1", gpu_memory_gib=1e-9
    )
    assert got is None and "in-process cap" in why and not calls


def test_a_byte_fragment_matches_every_engines_spelling_of_it_and_nothing_else():
    # Real vLLM 0.24.0 on the H200 returned '' for a token the reference decoded to U+FFFD (half of
    # a UTF-8 character) and failed every launch as wrong-output (tests/data/gpu/h200-2026-12-01-vllm).
    steps = [
        Step(10, " a", -0.1, {" a": -0.1, " b": -3.0}),
        Step(11, "\ufffd", -3.084, {"\ufffd": -3.084, " c": -4.1}),
        Step(12, " d", -0.2, {" d": -0.2, " e": -3.0}),
    ]
    ref = Reference(
        "m", ModelIdentity("c" * 64, "t" * 64), "float32", [PromptReference("p", " a\ufffd d", steps)]
    )
    for spelling in ("", "\ufffd", "bytes:\\xe2"):
        out = ServerOutput(" a d", [" a", spelling, " d"], [-0.1, -3.0, -0.25], "length")
        assert compare(ref, [out], tolerance("bfloat16")).passed, spelling
    # another token in the fragment's place is still a divergence, and so is a fragment whose
    # logprob is far from the reference's
    out = ServerOutput(" a c d", [" a", " c", " d"], [-0.1, -4.1, -0.2], "length")
    assert not compare(ref, [out], tolerance("bfloat16")).passed
    out = ServerOutput(" a d", [" a", "", " d"], [-0.1, -0.5, -0.2], "length")
    v = compare(ref, [out], tolerance("bfloat16"))
    assert not v.passed and "more than 0.5 apart" in v.detail
    # a text token never matches the empty string
    assert not steps[0].same("")
