"""Trials at once: GPU slots, the local executor's clock and placement, batches of hypotheses.

In-process, with a fake trial function (the executor's only dependency on the engines), so the
placement and the order of answers are checked exactly; the scenario and real-engine runs that
use them are in tests/trial/test_parallel_runs.py.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from bringup.core.candidate import Candidate
from bringup.observe.outcome import Outcome, Timings
from bringup.trial.executor import Job, LocalExecutor, TrialRun
from bringup.trial.slots import GpuSlots, PortPool, SlotError, parallel_width, parse_gpus
from tests.search.test_strategy import make, outcome


def cand(label: str) -> Candidate:
    return Candidate.make("vllm", "m", {"--max-num-seqs": len(label)}, {}, label=label)


def job(seq: int, need: int, sim: float) -> Job:
    return Job(seq, "search", cand("x" * seq), False, {"sim": sim}, need=need)


class FakeTrials:
    """Records where each job ran and, at the same time, what else was running."""

    def __init__(
        self,
        real_s: float = 0.0,
        status: str = "fails",
        cls: str | None = None,
        meet: threading.Barrier | None = None,
    ):
        self.real_s, self.status, self.cls = real_s, status, cls
        # one-GPU jobs wait for each other at this barrier instead of sleeping: they can only end
        # if they run at once (no wall clock involved); `met` says whether each got through
        self.meet, self.met = meet, []
        self.running: dict[int, list[str]] = {}
        self.overlaps: list[tuple[list[str], list[str]]] = []
        self.lock = threading.Lock()
        self.ports: list[int | None] = []

    def __call__(self, j: Job) -> TrialRun:
        with self.lock:
            for other in self.running.values():
                self.overlaps.append((list(j.gpus), other))
            self.running[j.seq] = list(j.gpus)
            self.ports.append(j.port)
        if self.meet is not None and j.need == 1:
            try:
                self.meet.wait(timeout=60)
                self.met.append(True)
            except threading.BrokenBarrierError:
                self.met.append(False)
        else:
            time.sleep(self.real_s)
        with self.lock:
            del self.running[j.seq]
        out = Outcome(status=self.status, failure_class=self.cls, timings=Timings(simulated=j.extra["sim"]))
        return TrialRun(out, Path("."), 0.0, 0.0)


def test_parse_gpus_and_width():
    assert parse_gpus("0, 2,3", 8) == ["0", "2", "3"]
    assert parse_gpus(None, 4) == ["0", "1", "2", "3"]
    assert parse_gpus(None, 0) == []
    with pytest.raises(SlotError, match="twice"):
        parse_gpus("1,1", 8)
    assert parallel_width("auto", 8) == 8  # one per GPU; a tp-8 launch takes all eight slots' GPUs
    assert parallel_width("auto", 0) == 1  # no GPU: one at a time
    assert parallel_width("3", 0) == 3  # a CPU engine may still run several
    with pytest.raises(SlotError, match="number of trials"):
        parallel_width("many", 8)
    with pytest.raises(SlotError, match="0 must be at least 1"):
        parallel_width("0", 8)


def test_slots_are_disjoint_and_held_gpus_stay_out():
    s = GpuSlots(["0", "1", "2", "3"])
    a = s.acquire(2)
    b = s.acquire(1)
    assert a == ["0", "1"] and b == ["2"] and not s.fits(2) and s.fits(1)
    s.release(a, held=["1"])
    assert s.free() == ["0", "3"]
    s.unhold(["1"])
    assert s.free() == ["0", "1", "3"]
    with pytest.raises(SlotError):
        s.acquire(4)


def test_port_pool_never_hands_one_port_twice():
    pool = PortPool()
    ports = [pool.take() for _ in range(20)]
    assert len(set(ports)) == 20
    pool.give(ports[0])
    assert ports[0] not in pool.taken


def test_simulated_clock_answers_in_order_of_simulated_end():
    trials = FakeTrials()
    ex = LocalExecutor(trials, GpuSlots(["0", "1", "2"]), width=3, simulated=True)
    for j in (job(1, 1, 300.0), job(2, 1, 100.0), job(3, 1, 200.0)):
        assert ex.fits(j)
        ex.submit(j)
    assert not ex.fits(job(4, 1, 1.0))  # three slots, three in flight
    got = []
    j4 = job(4, 1, 50.0)
    while ex.in_flight():
        d = ex.wait()
        got.append((d.job.seq, d.clock))
        if d.job.seq == 2:  # a slot frees at t=100: the next starts there, ends at 150
            assert ex.fits(j4)
            ex.submit(j4)
    ex.close()
    assert got == [(2, 100.0), (4, 150.0), (3, 200.0), (1, 300.0)]
    assert len({p for p in trials.ports}) == 4


def test_one_slot_is_the_sequential_sum():
    ex = LocalExecutor(FakeTrials(), GpuSlots(["0"]), width=1, simulated=True)
    for i, sim in enumerate((30.0, 70.0, 5.0), start=1):
        ex.submit(job(i, 1, sim))
        assert ex.wait().clock == pytest.approx(sum((30.0, 70.0, 5.0)[:i]))
    ex.close()


def test_real_trials_overlap_on_disjoint_gpus_and_a_big_one_waits():
    # Three trials that can only end together (a barrier of three): one after another, the first
    # would wait alone and break it. No wall clock: it holds on a loaded machine too.
    trials = FakeTrials(meet=threading.Barrier(3))
    ex = LocalExecutor(trials, GpuSlots(["0", "1", "2", "3"]), width=4)
    small = [job(i, 1, 0.0) for i in range(1, 4)]
    for j in small:
        ex.submit(j)
    big = job(9, 4, 0.0)
    assert not ex.fits(big)  # three GPUs taken: the 4-GPU candidate waits for its GPUs
    while ex.in_flight():
        ex.wait()
    assert trials.met == [True, True, True]  # the three ran at once, not one after another
    assert ex.fits(big)
    ex.submit(big)
    assert ex.wait().job.gpus == ["0", "1", "2", "3"]
    ex.close()
    for mine, other in trials.overlaps:
        assert not set(mine) & set(other), "two trials at once shared a GPU"
    assert len(trials.overlaps) >= 3


def test_a_gpu_left_full_is_not_reused_until_a_reading_shows_it_back():
    readings = {"back": False}
    trials = FakeTrials(cls="gpu-memory-held")
    ex = LocalExecutor(trials, GpuSlots(["0", "1"]), width=2, gpu_free=lambda g: readings["back"])
    ex.submit(job(1, 1, 0.0))
    ex.wait()
    assert ex.slots.held == {"0"}
    assert ex.fits(job(2, 1, 0.0)) and not ex.fits(job(3, 2, 0.0))
    readings["back"] = True
    assert ex.fits(job(3, 2, 0.0)) and not ex.slots.held
    ex.close()


def test_with_nothing_in_flight_a_run_waits_for_a_held_gpu_then_names_it(monkeypatch):
    import bringup.trial.executor as executor

    monkeypatch.setattr(executor, "HELD_POLL_S", 0.01)
    reads = {"n": 0, "back_after": 3}

    def free(g: list[str]) -> bool:
        reads["n"] += 1
        return reads["n"] > reads["back_after"]

    ex = LocalExecutor(FakeTrials(cls="gpu-memory-held"), GpuSlots(["0"]), width=1, gpu_free=free)
    assert ex.wait_for_held(5.0) is None  # nothing held: nothing to wait for
    ex.submit(job(1, 1, 0.0))
    ex.wait()
    assert not ex.fits(job(2, 1, 0.0))  # one reading: still held
    assert ex.wait_for_held(5.0) == [] and ex.fits(job(2, 1, 0.0))  # back after a few readings
    reads["back_after"] = 10**9
    ex.submit(job(2, 1, 0.0))
    ex.wait()
    assert ex.wait_for_held(0.05) == ["0"]  # never back within the wait: named
    ex.close()


def test_a_failing_trial_function_frees_its_gpus_and_raises():
    def boom(j: Job) -> TrialRun:
        raise RuntimeError("engine adapter bug")

    ex = LocalExecutor(boom, GpuSlots(["0"]), width=1)
    ex.submit(job(1, 1, 0.0))
    with pytest.raises(RuntimeError, match="adapter bug"):
        ex.wait()
    assert ex.slots.free() == ["0"]
    ex.close()


def test_close_cancels_what_is_in_flight():
    seen: list[bool] = []

    def waits(j: Job) -> TrialRun:
        seen.append(j.cancel.wait(timeout=5))
        return TrialRun(Outcome(status="fails"), Path("."), 0.0, 0.0)

    ex = LocalExecutor(waits, GpuSlots([]), width=2)
    ex.submit(job(1, 0, 0.0))
    ex.submit(job(2, 0, 0.0))
    ex.close()
    assert seen == [True, True]  # both were cancelled (not left to their 5 s wait)


# -- batches of hypotheses ---------------------------------------------------------------------------
def _after_nan(s):
    base = s.propose().candidate
    s.observe(
        base,
        outcome(
            cls="nan-output",
            phase="decode",
            effective={"nsa_decode_backend": "flashmla_kv", "attention_backend": "nsa"},
            implicates=[
                "--nsa-decode-backend",
                "--attention-backend",
                "--kv-cache-dtype",
                "--sampling-backend",
            ],
            signature="nan-probability",
        ),
    )


def test_a_batch_tests_different_hypotheses_and_learns_nothing_from_the_assumption():
    s = make()
    _after_nan(s)
    first = s.next_launch([], [], set()).candidate
    p_before = [dict(b.post) for b in s.blockers]
    second = s.next_launch([], [], set(), pending=[first])
    assert second.candidate is not None
    assert s.predicted_key(second.candidate) != s.predicted_key(first)
    # another hypothesis: not a level the first one set again. Dropping the user's settings the NaN
    # implicates is common ground of both (the KV dtype's drop was spelt `None` by one and `auto` by
    # the other until 2026-12-05, when the user's overridden --attention-backend became droppable
    # too); what each tests is the level it sets
    changed1 = {c.flag: c.after for c in first.diff(s.baseline)}
    changed2 = {c.flag: c.after for c in second.candidate.diff(s.baseline)}
    assert changed1 != changed2
    set1 = {(k, v) for k, v in changed1.items() if v not in (None, "auto")}
    assert set1 and not any(changed2.get(k) == v for k, v in set1), (changed1, changed2)
    assert any("assuming they fail" in r for r in second.reasons)
    assert [dict(b.post) for b in s.blockers] == p_before  # only real answers move the beliefs
    # without anything in flight the strategy proposes the first again
    assert s.predicted_key(s.next_launch([], [], set()).candidate) == s.predicted_key(first)


def test_when_everything_left_is_in_flight_the_strategy_says_wait_not_stop():
    s = make(vary=["--disable-cuda-graph"])
    first = s.next_launch([], [], set()).candidate
    second = s.next_launch([], [], set(), pending=[first]).candidate
    assert second is not None and s.predicted_key(second) != s.predicted_key(first)
    third = s.next_launch([], [], set(), pending=[first, second])
    assert third.candidate is None  # both levels are in flight: nothing to add
    assert s.blocked is None and s.best_left is None  # and nothing about the search changed
    assert s.predicted_key(s.next_launch([], [], set()).candidate) == s.predicted_key(first)


# -- cancelling a trial in flight (preemption) ------------------------------------------------------
def test_a_cancelled_trial_ends_at_the_cancel_on_the_simulated_clock_and_frees_its_gpus_then():
    ex = LocalExecutor(FakeTrials(), GpuSlots(["0", "1"]), width=2, simulated=True)
    short, long_ = job(1, 1, 100.0), job(2, 1, 500.0)
    ex.submit(short)
    ex.submit(long_)
    d = ex.wait()
    assert (d.job.seq, d.clock, d.cancelled) == (1, 100.0, False)
    big = job(3, 2, 50.0)
    assert not ex.fits(big) and ex.fits(big, freeing=[long_])
    ex.cancel(long_)  # at t=100: it ran to its end in real time, but on the clock it ends now
    d = ex.wait()
    assert (d.job.seq, d.clock, d.cancelled) == (2, 100.0, True)
    assert ex.fits(big)  # its GPU is free at the cancel, not at t=500
    ex.submit(big)
    d = ex.wait()
    assert (d.job.seq, d.job.sim_start, d.clock, d.cancelled) == (3, 100.0, 150.0, False)
    ex.close()


def test_cancel_stops_a_real_trial_and_one_that_already_ended_is_not_cancelled():
    started = threading.Event()

    def waits(j: Job) -> TrialRun:
        started.set()
        j.cancel.wait(timeout=5)  # a trial tears its server down when its cancel event is set
        return TrialRun(Outcome(status="timeout"), Path("."), 0.0, 0.0)

    ex = LocalExecutor(waits, GpuSlots(["0"]), width=1)
    j = job(1, 1, 0.0)
    ex.submit(j)
    started.wait(5)
    ex.cancel(j)
    d = ex.wait()
    assert d.cancelled and j.cancelled_at is not None
    assert ex.slots.free() == ["0"]
    ex.close()

    ex = LocalExecutor(FakeTrials(), GpuSlots(["0", "1"]), width=2)
    a, b = job(1, 1, 0.0), job(2, 1, 0.0)
    ex.submit(a)
    ex.submit(b)
    first = ex.wait()  # the other has ended too by the time both are collected, or soon after
    other = b if first.job is a else a
    time.sleep(0.05)
    ex._collect(set(ex._running))  # noqa: SLF001 - make sure it has ended (in the finished queue)
    ex.cancel(other)  # it answered before the cancel: its answer stands
    d = ex.wait()
    assert d.job is other and not d.cancelled and other.cancelled_at is None
    ex.close()


def test_wait_until_wakes_at_its_time_when_nothing_ends_by_then():
    ex = LocalExecutor(FakeTrials(), GpuSlots(["0"]), width=1, simulated=True)
    ex.submit(job(1, 1, 300.0))
    assert ex.wait_until(120.0) is None and ex.now() == 120.0  # the simulated clock moves to it
    d = ex.wait_until(400.0)
    assert d is not None and (d.job.seq, d.clock) == (1, 300.0)
    ex.close()

    ex = LocalExecutor(FakeTrials(real_s=1.0), GpuSlots(["0"]), width=1)
    ex.submit(job(1, 1, 0.0))
    assert ex.wait_until(ex.now() + 0.1) is None  # back at its deadline, before the 1 s trial ends
    assert ex.wait_until(None) is not None
    ex.close()


class PortTaken(FakeTrials):
    """Every launch dies of "address already in use", naming ``port`` (None: the launch's own)."""

    def __init__(self, port: int | None):
        super().__init__(cls="port-in-use")
        self.port = port

    def __call__(self, j: Job) -> TrialRun:
        run = super().__call__(j)
        named = self.port if self.port is not None else j.port
        run.outcome.phase = "distributed-init"
        run.outcome.argv = ["vllm", "serve", "m", "--port", str(j.port)]
        run.outcome.evidence = [
            "RuntimeError: The server socket has failed to listen on any local network address. "
            f"port: {named}, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use"
        ]
        return run


def test_only_the_servers_own_port_taken_is_launched_again_elsewhere():
    # the server's own port taken between the pick and the bind: the machine's race, again on
    # another port (three times at most); a port a setting gives (a distributed-init master port)
    # taken: the configuration's failure, answered at once (a new server port changes nothing)
    for named, calls in ((None, 4), (29500, 1)):
        trials = PortTaken(named)
        ex = LocalExecutor(trials, GpuSlots(["0"]), width=1)
        ex.submit(job(1, 1, 0.0))
        d = ex.wait()
        assert len(trials.ports) == calls and len(set(trials.ports)) == calls, trials.ports
        assert d.run is not None and d.run.outcome.failure_class == "port-in-use"
        ex.close()
