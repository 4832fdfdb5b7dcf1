"""The dry run against the real engines on the H200 (issue 25, item 4): recorded, then replayed here.

On the lent H200 (2026-12-03, tests/data/gpu/h200-2026-12-03c) the dry run ran in the real vLLM
0.24.0 and SGLang 0.5.16 environments (their CUDA wheels, the child with no GPU visible) on each
candidate of the corpus of real failing launches (tests/data/gpu/h200_corpus.sh; their logs are
tests/data/logs/*-h200-real-cli-*.log, launched on the same 2-layer model). These tests set each
recorded verdict beside the real launch's log:

- every refusal says what the real launch printed (its message is in the log), and none is a
  refusal of something the log shows failing otherwise;
- bringup turns each refusal into the outcome a launch would have had: the same failure class and
  phase as the classifier reads in the real log, and no implicated flag the real log does not
  implicate. That is what lets the search observe a refusal in place of a launch.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from bringup.core.candidate import Candidate, parse_flags
from bringup.dryrun import DryVerdict, refusal_outcome
from bringup.engines.explain import explain_file
from tests.paths import ROOT

H200 = ROOT / "tests" / "data" / "gpu" / "h200-2026-12-03c"
LOGS = ROOT / "tests" / "data" / "logs"


def _bench():
    spec = importlib.util.spec_from_file_location("dryrun_reality", ROOT / "benchmarks" / "dryrun_reality.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows() -> list[tuple[str, dict, str]]:
    out = []
    for engine in ("vllm", "sglang"):
        d = json.loads((H200 / f"{engine}-dryrun-verdicts.json").read_text())
        out += [(engine, r, d["model"]) for r in d["rows"]]
    return out


def test_every_refusal_on_the_h200_says_what_the_real_launch_printed() -> None:
    res = _bench().compare([H200 / "vllm-dryrun-verdicts.json", H200 / "sglang-dryrun-verdicts.json"])
    counts = res["counts"]
    assert counts.get("other message", 0) == 0
    # 15 of the 22 real failures were seen before launch; the rest fail later than the checks
    # reach (a device ordinal, a kernel package) or need CUDA in the child (FLASHINFER_MLA)
    assert counts["agrees"] == 15 and res["launches"] == 22
    for r in res["rows"]:  # the engines: the versions that ran the real launches
        assert r["engine"] in ("vllm 0.24.0", "sglang 0.5.16")


@pytest.mark.parametrize(
    "engine,row,model",
    [x for x in _rows() if x[1]["status"] == "refused"],
    ids=lambda x: x["name"] if isinstance(x, dict) else None,
)
def test_a_refusal_is_the_outcome_the_real_launch_had(engine: str, row: dict, model: str) -> None:
    v = DryVerdict(
        "refused",
        row["message"],
        row["engine_version"],
        row["engine"],
        check=row["check"],
        flag=row["flag"],
        source=row["source"],
        traceback=tuple(row["traceback"]),
        phase=row["phase"],
    )
    out = refusal_outcome(v, Candidate.make(engine, model, parse_flags(row["flags"])), engine)
    real = explain_file(LOGS / f"{engine}-h200-real-cli-{row['name']}.log", engine)
    assert out.launched is False and out.status == "fails"
    assert (out.failure_class, out.phase) == (real.failure_class, real.phase)
    assert set(out.implicates) <= set(real.implicates)
    assert out.evidence[0].startswith(f"refused by {v.engine} {v.engine_version}'s own check")
    assert "For further information visit" not in out.evidence[0]  # the message, not pydantic's link
