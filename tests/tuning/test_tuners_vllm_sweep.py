"""vLLM's own tuner as benchmarks/tuners_side_by_side.py runs it, on the real vLLM CPU build: one
point of `vllm bench sweep serve` through benchmarks/vllm_cli.py (the `vllm` script cannot start
on this build), with bringup's argv for the server, the cache reset between runs, and `vllm bench
serve`'s own per-request records read into goodput by bringup's rule. It breaks when vLLM's sweep
or bench changes what they take or write. One launch."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from bringup.core.candidate import Candidate
from bringup.engines.base import get_engine
from bringup.loadgen.config import SLO
from bringup.trial.process import port_is_free
from tests.conftest import MEM
from tests.paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import tuners_decide as decide  # noqa: E402
import tuners_peer as peer  # noqa: E402

pytestmark = pytest.mark.engine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_vllms_own_sweep_measures_a_point_that_goodput_can_be_read_from(tmp_path: Path) -> None:
    from bringup.testmodel.tiny import TestModelSpec, write_test_model  # (a Test* name pytest would collect)

    model = write_test_model(tmp_path / "model", TestModelSpec())
    base = Candidate.make("vllm", str(model), {"--gpu-memory-utilization": MEM, "--enforce-eager": True})
    port = _free_port()
    sweep = peer.VllmSweep(get_engine("vllm"), base, port, runs=2)
    runs = sweep.run([{"--max-num-seqs": "4"}], ["p00"], peer.Workload(32, 8, 0.0, 8, 4), tmp_path / "peer")
    (r,) = runs
    assert r.failed == "" and len(r.results) == 2 and r.seconds > 0
    log = (tmp_path / "peer" / "sweep.log").read_text()
    assert "'--max-num-seqs', '4'" in log and "--enforce-eager" in log  # bringup's argv, the point's flag
    assert log.count("Resetting caches") == 0 and "[END SERVER]" in log  # our reset ran (no vllm script)
    for res in r.results:
        recs = decide.records_from_lists(res)
        assert len(recs) == 8 and all(x.ok and x.itl_s for x in recs)
    recs = decide.records_from_lists(r.results[0])
    dur = r.results[0]["duration"]
    # limits no request misses: every request is good, goodput is the sweep's own request rate
    loose = [
        SLO(metric="ttft", stat="p99", target_s=max(x.ttft_s or 0.0 for x in recs) + 1.0),
        SLO(metric="itl", stat="p99", target_s=60.0),
    ]
    assert decide.goodput(recs, dur, loose) == pytest.approx(len(recs) / dur)
    assert len(recs) / dur == pytest.approx(r.results[0]["request_throughput"], rel=0.05)
    # the SLO from the defaults' medians: some requests miss one limit (which ones, and whether
    # any meets both, is the machine's noise with 8 requests)
    choice = decide.slo_from_defaults(recs, 0.5)
    assert 0 < choice.ttft_s and 0 < choice.itl_s
    assert 0 <= decide.goodput(recs, dur, choice.slos()) <= len(recs) / dur
    assert port_is_free(port)
