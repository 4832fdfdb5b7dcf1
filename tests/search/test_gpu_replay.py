"""The real SGLang 0.5.16 bring-up of the sixth three-mistake set on a lent H100 (2026-12-07,
tests/data/gpu/h100-2026-12-07c, run once as a whole while sealed, read after), replayed launch by
launch through the search: its outcomes as the trials wrote them, the search's next launch after each.

The run: the engine's own checks refused `--encoder-only`; launch 1 dropped it and the user's
`SGLANG_EXTERNAL_MODEL_PACKAGE` (whose missing package the next phase would have met); then the
user's `--dtype float32` failed CUDA-graph capture in sgl-kernel's rmsnorm ("failed to dispatch data
type Float") under SGLang's printed list of graph remedies. bringup followed the list for four
launches and never undid the user's number format; the deadline ended it, not validated.
"""

from __future__ import annotations

import json

from bringup.core.candidate import Candidate
from bringup.observe.outcome import Outcome
from tests.paths import ROOT
from tests.search.test_user_corpus import BENCH

RUN = (
    ROOT / "tests/data/gpu/h100-2026-12-07c/runs/sglang-usermistakes6/runs/20261207-091058-sglang-m8b/trials"
)


def _outcomes(trials) -> list[Outcome]:
    return [Outcome.model_validate(json.loads((t / "outcome.json").read_text())) for t in trials]


def _observed(corpus: str, trials, outcomes: list[Outcome]):
    """The search of a run from its first trial's candidate, after observing each trial's outcome as
    the run did (a dry run's refusal as one), on a GPU corpus's facts."""
    s = BENCH.strategy_for(BENCH.load_corpus(corpus), Candidate.from_json(outcomes[0].candidate))
    for t, o in zip(trials, outcomes, strict=True):
        s.observe(Candidate.from_json(o.candidate), o, source="dry-run" if "dry-run" in t.name else "launch")
    return s


def _replay(n: int):
    """The search after the run's first ``n`` trials (the dry run's refusal first), on the facts
    of the SGLang GPU corpus (the same engine build, the same H100)."""
    trials = sorted(RUN.iterdir())[:n]
    outcomes = _outcomes(trials)
    return _observed("sglang-h100b", trials, outcomes), outcomes


def test_the_same_exception_is_one_failure_however_much_of_its_traceback_was_logged() -> None:
    """Launch 1's log ended at the rmsnorm line (no traceback: `unknown`); launch 2's, under the
    engine's first remedy, held its frames too (`bad-flag`). One failure: the remedy did not help,
    so it is not the culprit, and the user's float32 comes next."""
    s, outcomes = _replay(3)
    assert (outcomes[1].failure_class, outcomes[2].failure_class) == ("unknown", "bad-flag")
    assert len({o.blocker for o in s.observations[1:]}) == 1
    nxt = s.next_launch([], [], set()).candidate
    assert nxt is not None and "--dtype" not in nxt.flag_dict, nxt.flag_dict


def test_two_classes_read_from_whole_tracebacks_stay_two_failures() -> None:
    """Only a reading without a class (`unknown`: the traceback had not reached the log), or one
    raised at the same place, joins the failure read before. Two classes of one message with no
    place in common may differ for a reason (what the launch's own settings selected), and that
    difference is evidence: merged, a composed-fault split that was never read (sealed4) fell from
    96.7% to 91.7% validated."""
    trials = sorted(RUN.iterdir())[:3]
    outcomes = _outcomes(trials)
    outcomes[1] = outcomes[1].model_copy(update={"failure_class": "unsupported-hardware"})
    s = _observed("sglang-h100b", trials, outcomes)
    assert len({o.blocker for o in s.observations[1:]}) == 2


def test_memory_advice_under_a_failure_that_is_not_out_of_memory_is_only_a_listing() -> None:
    """SGLang's "3. if it is an OOM problem, set --mem-fraction-static to a smaller value" beneath a
    kernel's dtype error: the user's float32 (quoted as "Float") outranks the memory fraction."""
    s, _ = _replay(2)
    post = {c.conds[0].factor: p for c, p in s.blockers[-1].post.items() if len(c.conds) == 1}
    assert post["--dtype"] > post.get("--mem-fraction-static", 0.0), s.blockers[-1].top(4)


def test_a_route_the_server_does_not_serve_undoes_the_users_setting_first(tmp_path) -> None:
    """The vLLM half of the same set: `--runner pooling` served /pooling only, and the probes got
    HTTP 404. Read as wrong output, three launches went to the sampler and attention backends before
    the user's runner was dropped. Read as the trial now reads it (a route not served, no kernel a
    suspect), the next launch undoes the user's own setting."""
    from bringup.engines.base import get_engine
    from bringup.observe.signatures import Classification
    from bringup.trial.launch import Trial, TrialSettings

    trials = sorted(
        (ROOT / "tests/data/gpu/h100-2026-12-07c/runs/vllm-usermistakes6/runs").glob("*/trials/*")
    )
    refused, served = _outcomes(trials[:2])
    bad = next(p for p in served.probes if not p.passed)
    cand = Candidate.from_json(served.candidate)
    trial = Trial(get_engine("vllm"), cand, tmp_path / "t", TrialSettings())
    texts = (trials[1] / "server.log").read_text().splitlines()
    cls, status = trial._probe_class(
        Classification("unknown", served.phase, [], ""), "wrong-output", bad, texts, served.phase
    )
    assert served.failure_class == "wrong-output" and cls.failure_class == "bad-flag"
    now = served.model_copy(
        update={
            "status": status,
            "failure_class": cls.failure_class,
            "evidence": cls.evidence,
            "implicates": cls.implicates,
            "hint": cls.hint,
        }
    )
    s = _observed("vllm-h100b", trials[:2], [refused, now])
    nxt = s.next_launch([], [], set()).candidate
    assert nxt is not None and "--runner" not in nxt.flag_dict, nxt.flag_dict


def test_one_exception_raised_at_one_place_is_one_failure_whatever_class_each_launch_read() -> None:
    """The same exception, message and place (file and line) in two launches is one failure, though
    the classes differ: the class read from a whole traceback depends on which settings of *that*
    launch link to the frames (an NCCL variable bringup had just set, read by the failing module,
    made a symmetric-memory error `bad-flag` in the next launch), and as two failures the change
    just made took the blame for an error that was there before it."""
    trials = sorted(RUN.iterdir())[:3]
    outcomes = _outcomes(trials)
    whole = outcomes[2]
    assert whole.root_exception and whole.root_exception.endswith("(torch/_ops.py:865)")
    outcomes[1] = whole.model_copy(
        update={"failure_class": "unsupported-hardware", "candidate": outcomes[1].candidate}
    )
    s = _observed("sglang-h100b", trials, outcomes)
    assert len({o.blocker for o in s.observations[1:]}) == 1


def test_the_field_the_engine_tested_before_it_raised_outranks_the_users_other_flags(tmp_path) -> None:
    """The SGLang half of the seventh set (real 0.5.16 on an H100, tests/data/gpu/h100-2026-12-07e,
    run once as a whole while sealed, read after): the engine's own argument check refused the
    user's `--enable-pdmux` with "PD-Multiplexing is not compatible with chunked prefill.", and the
    run answered with a second refusal, the user's three variables unset. The check raised inside
    `if self.enable_pdmux:`; with the engine's source on this machine (as on the machine that ran
    it; here a file laid out as server_args.py is), the user's switch outranks their other settings,
    which only the argument check's place links."""
    from tests.observe.test_guards import _engine, _line

    trials = sorted(
        (ROOT / "tests/data/gpu/h100-2026-12-07e/runs/sglang-usermistakes7/runs").glob("*/trials/*")
    )
    (o,) = _outcomes(trials[:1])
    src = _engine(tmp_path)
    root = o.root_exception.rsplit(" (", 1)[0] + f" ({src}:{_line('not compatible with chunked prefill')})"
    o = o.model_copy(update={"root_exception": root})
    s = _observed("sglang-h100b", trials[:1], [o])
    post = {c.conds[0].factor: p for c, p in s.blockers[-1].post.items() if len(c.conds) == 1}
    rest = [p for f, p in post.items() if f != "--enable-pdmux"]
    assert post["--enable-pdmux"] > max(rest), s.blockers[-1].top(4)


def _observed_on(facts: dict, corpus: str, trials, outcomes: list[Outcome]):
    """As `_observed`, on a GPU corpus's facts with these in place (the model the run brought up)."""
    c = BENCH.load_corpus(corpus)
    c = c.model_copy(update={"facts": {**c.facts, **facts}})
    s = BENCH.strategy_for(c, Candidate.from_json(outcomes[0].candidate))
    for t, o in zip(trials, outcomes, strict=True):
        s.observe(Candidate.from_json(o.candidate), o, source="dry-run" if "dry-run" in t.name else "launch")
    return s


# The model of the GPU three-mistake sets (tests/data/gpu/make_random_llama.py): Llama-3-8B's layers.
M8B = {
    "model.hidden_size": 4096,
    "model.intermediate_size": 14336,
    "model.heads": 32,
    "model.kv_heads": 8,
    "model.head_dim": 128,
    "model.layers": 32,
    "model.dtype": "bfloat16",
}


def test_an_allocation_the_users_count_sized_outranks_the_memory_fraction() -> None:
    """The vLLM half of the seventh set: with the user's `--max-num-batched-tokens 2M`, the profile
    run failed "Tried to allocate 16.00 GiB", which is 2097152 tokens x hidden 4096 x 2 bytes. The
    run lowered the memory fraction twice before it undid the user's settings; read as a person
    reads it, the user's token budget is the first suspect, and the next launch drops it."""
    trials = sorted(
        (ROOT / "tests/data/gpu/h100-2026-12-07e/runs/vllm-usermistakes7/runs").glob("*/trials/*")
    )[:2]
    outcomes = _outcomes(trials)
    assert outcomes[1].failure_class == "oom-kv-cache"
    s = _observed_on(M8B, "vllm-h100b", trials, outcomes)
    post = {c.conds[0].factor: p for c, p in s.blockers[-1].post.items() if len(c.conds) == 1}
    rest = [p for f, p in post.items() if f != "--max-num-batched-tokens"]
    assert post["--max-num-batched-tokens"] > max(rest), s.blockers[-1].top(4)
    nxt = s.next_launch([], [], set()).candidate
    assert nxt is not None and "--max-num-batched-tokens" not in nxt.flag_dict, nxt.flag_dict
    # without the model's widths, nothing links the size to the count
    bare = _observed_on(
        {"model.hidden_size": None, "model.intermediate_size": None}, "vllm-h100b", trials, outcomes
    )
    post = {c.conds[0].factor: p for c, p in bare.blockers[-1].post.items() if len(c.conds) == 1}
    assert post["--max-num-batched-tokens"] < max(
        p for f, p in post.items() if f != "--max-num-batched-tokens"
    )


def test_a_module_named_for_the_users_value_that_does_not_import_undoes_it_first() -> None:
    """The SGLang half of the eighth set (real 0.5.16 on an H100, tests/data/gpu/h100-2026-12-07f,
    run once as a whole while sealed, read after): the user's `--device npu` failed "No module named
    'torch_npu'". The run blamed the user's TORCH_CUDA_ARCH_LIST first (33%, against 7% for the
    device), dropped the device only at its third launch, put it back at its fourth, and validated
    in 6 (a person needs 4). The module it could not import is named for the user's value."""
    trials = sorted(
        (ROOT / "tests/data/gpu/h100-2026-12-07f/runs/sglang-usermistakes8/runs").glob("*/trials/*")
    )[:1]
    outcomes = _outcomes(trials)
    assert "No module named 'torch_npu'" in (outcomes[0].root_exception or "")
    s = _observed("sglang-h100b", trials, outcomes)
    post = {c.conds[0].factor: p for c, p in s.blockers[-1].post.items() if len(c.conds) == 1}
    assert post["--device"] > max(p for f, p in post.items() if f != "--device"), s.blockers[-1].top(4)
    # "torch" of the module's name is the code's word, not the failure's: the user's right
    # TORCH_CUDA_ARCH_LIST is no lead (it had 30% by that word beside the device's link)
    assert s.blockers[-1].mass_of("env:TORCH_CUDA_ARCH_LIST") < 0.1, s.blockers[-1].top(4)
    nxt = s.next_launch([], [], set()).candidate
    assert nxt is not None and "--device" not in nxt.flag_dict, nxt.flag_dict


def test_a_librarys_file_named_like_a_flag_does_not_name_it() -> None:
    """The same run's third launch had dropped the device and met gloo's "[enforce fail at
    /pytorch/third_party/gloo/gloo/transport/tcp/device.cc:84] ... Unable to find address for:
    bond0". `device.cc` named the engine's `--device` at a flag's full weight (30% on the engine's
    default device), and the fourth launch put the user's `npu` back. A file of a path is the
    library's source tree, not the failure naming a flag; the user's quoted `bond0` is the suspect."""
    trials = sorted(
        (ROOT / "tests/data/gpu/h100-2026-12-07f/runs/sglang-usermistakes8/runs").glob("*/trials/*")
    )[:3]
    s = _observed("sglang-h100b", trials, _outcomes(trials))
    top = s.blockers[-1].top(2)
    assert top[0][0].conds[0].factor == "env:GLOO_SOCKET_IFNAME", top
    assert s.blockers[-1].mass_of("--device") < 0.1, s.blockers[-1].top(4)
    nxt = s.next_launch([], [], set()).candidate
    assert nxt is not None and nxt.flag_dict.get("--device") != "npu", nxt.flag_dict
