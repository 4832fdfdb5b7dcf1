"""One trial: launch a candidate, watch its log, wait for readiness, probe, tear down, classify.

Fail fast: a line that a signature marks fatal, or the process exiting, ends the trial at once
(after a short settle so the root-cause lines that follow are captured), not at a timeout. A
server that prints nothing new and is not ready before the hang deadline is a hang.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import queue
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bringup.core.candidate import Candidate, FlagError, parse_flags
from bringup.core.datafiles import hang_implicates, phase_index, probe_implicates, probe_implicates_by_probe
from bringup.engines.base import Engine, later_phase
from bringup.facts.gpus import GpuWatch, default_watch, visible_indices
from bringup.guard import files, ranges, secrets
from bringup.guard.safetext import safe_line
from bringup.guard.secrets import Redactor, redact_argv, redact_flags
from bringup.help.text import HelpSpec
from bringup.observe.effective import config_dump
from bringup.observe.logread import LineKeeper, notable_line
from bringup.observe.outcome import Outcome, OverrideRecord, ProbeResult, Timings
from bringup.observe.ports import server_port_race, setting_port_hint
from bringup.observe.signatures import Classification, Matcher, classify, warm_up
from bringup.observe.tracebacks import bare_exception, logged_benign, traceback_start
from bringup.trial.jitwatch import JitWatch
from bringup.trial.process import ServerProcess, TimedLine, free_port, interrupted, library_call, port_is_free
from bringup.verify.probes import ProbeConfig, ProbeRunner

JIT_LOOK_S = 5.0  # how often a silent server is looked under for a busy compiler (bringup/trial/jitwatch.py)
HANG_FLOOR_S, TIMEOUT_FLOOR_S = 3.0, 30.0  # real seconds a scaled deadline keeps (see Trial._deadlines)
REPEAT_WINDOW = (
    50  # a line whose text (timestamps, pids and counters stripped) is among the last N is a repeat
)
_VOLATILE = re.compile(
    r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"  # 2026-11-29 13:22:01(,123)
    r"|\b\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?"  # vLLM's 11-29 13:22:01
    r"|\bpid=\d+|\[\d+\]|:\d+\]"  # pid=N, [N], [file.py:LINE]
)


def progress_key(text: str) -> str:
    """A log line as progress sees it: the same text with another timestamp or pid is a repeat."""
    return _VOLATILE.sub("#", text).strip()


def unless_interrupted(out: Outcome) -> Outcome:
    """A launch that did not work while a signal stopped bringup and tore its server down is
    cancelled: what it would have shown is not known, and a resumed run must not read the teardown
    as its failure (the H100 run of 2026-12-06 recorded a launch cut at the harness's deadline, its
    graphs captured and nothing wrong in its log, as a failure classed unknown)."""
    if not interrupted() or out.status == "works":
        return out
    out.status, out.failure_class, out.signature, out.root_exception = "cancelled", None, None, None
    out.implicates, out.implicated_levels, out.remedies = [], {}, []
    out.evidence = ["bringup was stopped by a signal while this launch ran: no verdict"]
    return out


@dataclass
class TrialSettings:
    timeout: float = 1800.0  # launch to ready, seconds
    hang_timeout: float = 600.0  # no new log line (repeats do not count) and not ready; engine seconds
    probe: ProbeConfig = field(default_factory=ProbeConfig)
    settle: float = 0.25  # after a fatal line, keep reading this long for the lines that follow
    # After a fatal exception line with no traceback before it, wait up to this long for the
    # traceback the engine prints after it (SGLang prints the error line, its advice, then the
    # scheduler's traceback: cut at the line, the launch's reading had no frames and no class).
    traceback_wait: float = 3.0
    grace: float = 5.0  # SIGTERM to SIGKILL for a healthy server (vLLM CPU exits in ~0.6 s)
    fail_grace: float = 0.3  # a failing vLLM ignores SIGTERM for 10 s or more: kill it sooner
    host: str = "127.0.0.1"
    port: int | None = None  # None: a free port
    validate: bool = True  # reject flags the engine's --help would reject, without launching
    poll: float = 0.05
    probes_deadline: float = 1800.0
    gpu_watch: GpuWatch | None = None  # None: the process-wide one (bringup/facts/gpus.py)
    # Set by whoever runs trials at once (bringup/trial/executor.py) to stop this one: the server is torn
    # down as on any other end, and the trial's outcome says it was cancelled.
    cancel: threading.Event | None = None

    def __post_init__(self) -> None:
        # A library user's numbers meet the CLI's ranges (bringup/guard/ranges.py): a nan deadline
        # never passes, a port of 0 or 70000 fails after the launch.
        ranges.check_fields(
            self, {"timeout": ranges.SECONDS, "hang_timeout": ranges.SECONDS, "port": ranges.PORT}
        )


Event = Callable[[str, str], None]  # (kind, text): kind in phase | line | status | gpu


def _noop(kind: str, text: str) -> None:
    pass


class Trial:
    def __init__(
        self,
        engine: Engine,
        candidate: Candidate,
        trial_dir: Path,
        settings: TrialSettings | None = None,
        spec: HelpSpec | None = None,
        version: str | None = None,
        on_event: Event | None = None,
        workload: Callable[[str], dict] | None = None,
    ):
        self.engine = engine
        self.world = engine.world()  # this machine, or the one a double replays (its clock, its lines)
        self.cand = candidate
        self.dir = Path(trial_dir)
        self.s = settings or TrialSettings()
        self.spec = spec
        self.version = version
        self.emit = on_event or _noop
        self.workload = workload  # run against the server once every probe passed (tuning)
        self.bench: dict | None = None
        self.matcher = Matcher(engine.log_dialect)
        self.phase = "spawn"
        # What the classifier reads of the log: head, distinct and notable lines, tail, in memory
        # flat in the number of lines (bringup/observe/logread.py, as `explain` keeps them).
        self.keeper = LineKeeper()
        self._last_t: float | None = None  # when the last line arrived
        self._prev_text = ""  # the last line read (an exact repeat needs no progress key)
        self._seen_ready_line = False
        self._warned: list[str] = []  # lines of non-fatal signatures, in log order (at most 20)
        self._tracebacks = 0  # lines that opened a traceback, so far
        self._stopped_at: int | None = None  # lines counted when bringup began to stop a live server
        self._progress_t: float | None = None  # when the last line that was not a repeat arrived
        self._recent: deque[str] = deque(maxlen=REPEAT_WINDOW)
        self._probe_thread: threading.Thread | None = None
        self._ready_lag: float | None = None
        self._gpu: dict = {}
        self._hung_probe: str | None = None
        self._jit: JitWatch | None = None
        self._jit_t = 0.0  # the last look under the server
        self._jit_silent = 0.0  # seconds of silence a busy compiler accounted for
        self._t_launch = 0.0
        self._env: dict[str, str] = {}  # the server's environment, as launched

    # -- helpers -------------------------------------------------------------------------------
    def _base_outcome(self, argv: list[str]) -> Outcome:
        return Outcome(
            status="fails",
            engine=self.engine.log_dialect,
            engine_version=self.version,
            candidate=self.cand.to_json(),
            candidate_key=self.cand.key(),
            requested=redact_flags({k: (list(v) if isinstance(v, tuple) else v) for k, v in self.cand.flags}),
            argv=redact_argv(argv),
            log_path=str(self.dir / "server.log"),
        )

    def _note_jit(self, now: float) -> None:
        """A compiler that works under a silent server is progress: a JIT build (FlashInfer's,
        DeepGEMM's, inductor's) is slow, not hung (bringup/trial/jitwatch.py)."""
        look = min(JIT_LOOK_S, self._deadlines()[0] / 3)  # several looks before a hang is called
        if self._jit is None or now - self._jit_t < look:
            return
        last = self._progress_t if self._progress_t is not None else self._t_launch
        prev, self._jit_t = self._jit_t, now
        if now - last < look:
            return
        busy = self._jit.busy()
        if busy:
            self._jit_silent += now - max(prev, last)
            self._progress_t = now
            self.emit("status", f"compiling ({', '.join(busy)}): no log line, but not hung")

    def _jit_timings(self) -> dict:
        if not self._jit_silent:
            return {"jit_tools": sorted(self._jit.seen) if self._jit else []}
        return {
            "jit_silent": round(self._jit_silent, 1),
            "jit_tools": sorted(self._jit.seen) if self._jit else [],
        }

    def _warm_classifier(self) -> None:
        """The classifier loads while a real engine starts (its first verdict is then not its cold
        start); not beside a double, whose scaled deadlines leave it no time to share."""
        if not self.world.clock().simulated:
            warm_up(self.engine.log_dialect)

    def _set_phase(self, new: str | None) -> None:
        p = later_phase(self.phase, new)
        if p != self.phase:
            self.phase = p
            self.emit("phase", p)

    def _validate(self) -> str | None:
        if not (self.s.validate and self.spec):
            return None
        try:
            parse_flags(self.cand.argv_flags(), self.spec)
        except FlagError as e:
            return f"{self.spec.usage_prog or self.engine.name}: error: {e}"
        return None

    def _write(self, out: Outcome) -> Outcome:
        out = unless_interrupted(out)
        self.dir.mkdir(parents=True, exist_ok=True)
        secrets.write_text(self.dir / "outcome.json", out.model_dump_json(indent=2))
        secrets.write_text(
            self.dir / "candidate.json", json.dumps(self.cand.to_json(), indent=2, default=str)
        )
        return out

    def _simulated_seconds(self, texts: list[str], status: str | None) -> float | None:
        """A double's launch cost on its own clock. A hang costs the wait until bringup gave up (the
        last line's time plus the no-progress deadline), and a launch that never got ready the launch
        deadline, as on a real machine: not the time of the last line the double printed."""
        sim = self.world.launch_seconds(texts)  # None on a real engine: its launch took wall time
        if sim is None or self._cancelled():
            return sim
        if status == "hang" and phase_index(self.phase) <= phase_index("ready"):
            return min(sim + self.s.hang_timeout, max(sim, self.s.timeout))
        if status == "timeout":
            return max(sim, self.s.timeout)
        return sim

    def _deadlines(self) -> tuple[float, float]:
        """(hang, launch) deadlines in real seconds: the settings are engine seconds, scaled by the
        engine's clock; a scaled deadline never drops below a real floor (or the setting, if less),
        because the interpreter start and imports before the first line are real time, not engine time."""
        scale = self.world.clock_scale()
        hang = max(self.s.hang_timeout * scale, min(self.s.hang_timeout, HANG_FLOOR_S))
        launch = max(self.s.timeout * scale, min(self.s.timeout, TIMEOUT_FLOOR_S))
        return hang, launch

    def _settle(self, server: ServerProcess, bare: bool) -> None:
        """Read on after the first fatal line: the lines right after it often hold the root cause.
        After a bare exception line (``bare``: no traceback yet), up to ``traceback_wait`` for the
        traceback, and half a second (or ``settle``, if longer) once it has begun: a reading with
        frames knows where the failure was raised, and which setting selected that code."""
        start = time.monotonic()
        end = start + (self.s.traceback_wait if bare else self.s.settle)
        waiting = bare
        while time.monotonic() < end and not server.exited():
            self._drain(server, block=0.02)
            if waiting and self._tracebacks:
                waiting = False
                end = min(end, time.monotonic() + max(self.s.settle, 0.5))

    def _drain(self, server: ServerProcess, block: float = 0.0, budget: float = 0.2) -> TimedLine | None:
        """Read the lines that arrived (waiting up to `block` for the first); the first fatal one,
        or None. Returns at a fatal line, or after `budget` seconds of reading: a server that prints
        without pause never keeps the loop from its deadlines, readiness and cancel checks."""
        now = time.monotonic()
        deadline, stop = now + block, now + max(block, budget)
        while True:
            timeout = max(0.0, deadline - time.monotonic())
            try:
                batch = server.lines.get(timeout=timeout) if timeout > 0 else server.lines.get_nowait()
            except queue.Empty:
                return None
            if batch is None:
                with contextlib.suppress(queue.Full):
                    server.lines.put_nowait(None)  # keep the end marker for later drains
                return None
            fatal = self._take(batch)
            if fatal is not None or time.monotonic() > stop:
                return fatal

    def _mark_stop(self, server: ServerProcess) -> None:
        """Count what a live server said before bringup stops it: the lines after are its teardown,
        which the engine may print out of order with its own shutdown marker (vLLM's "nanobind:
        leaked" at exit came before the marker in the pipe, after a refused request, and read as
        the failure)."""
        if not server.exited():
            self._drain(server)
            self._stopped_at = self.keeper.total

    def _take(self, batch: list[TimedLine]) -> TimedLine | None:
        """The trial's reading of lines that arrived together: progress, then for each line the
        keeper calls new (the first few of its kind) its phase, signatures and readiness; the first
        fatal line, or None. A line seen several times already is counted, not read again: a
        million repeats cost a million hash lookups, not a million signature scans."""
        if not batch:
            return None
        self._progress(batch)
        fatal = None
        for line in batch:
            text = line.text
            if not self.keeper.count(text):
                continue
            # (after the count: a repeated line is not read again; only whether one began matters)
            self._tracebacks += traceback_start(text) and not logged_benign(text)
            sigs = self.matcher.match(text)
            phase = self.engine.phase_of(text)
            self._set_phase(phase)
            # a line the engine logged at WARNING (a caught exception, a traceback it went on
            # after) is a warning whatever signature it matches: the server may still start
            caught = bool(sigs) and logged_benign(text)
            if fatal is None and not caught and any(sig.fatal for sig in sigs):
                fatal = line
            if (
                (caught or any(not sig.fatal for sig in sigs))
                and len(self._warned) < 20
                and text.strip()[:300] not in self._warned
            ):
                self._warned.append(text.strip()[:300])
            self._seen_ready_line = self._seen_ready_line or self.engine.is_ready_line(text)
            # the shutdown line is kept whatever else is dropped: it is where the classifier
            # stops reading (before_teardown), so teardown noise never reads as the failure
            self.keeper.keep(
                text, bool(sigs) or phase is not None or self.engine.teardown_line(text) or notable_line
            )
        self._last_t = batch[-1].t
        shown = next((ln.text for ln in reversed(batch) if ln.text.strip()), None)
        if shown is not None:
            self.emit("line", shown)  # the latest line (a status line), once per read
        return fatal

    def _progress(self, batch: list[TimedLine]) -> None:
        """Progress is a line that is not a repeat (timestamps, pids stripped) of one among the last
        REPEAT_WINDOW: lines of one read arrived at once, so the first such line is enough; the
        window then moves on to the read's last lines."""
        scanned = 0
        for line in batch:
            scanned += 1
            text = line.text
            if text == self._prev_text:
                continue
            self._prev_text = text
            key = progress_key(text)
            if key not in self._recent:  # a watchdog repeating itself is output, not progress
                self._progress_t = line.t
                self._recent.append(key)
                break
            self._recent.append(key)
        rest = batch[max(scanned, len(batch) - REPEAT_WINDOW) :]
        self._recent.extend(progress_key(ln.text) for ln in rest)
        if rest:
            self._prev_text = rest[-1].text

    def _ready(self, client: httpx.Client, seen_ready_line: bool) -> bool:
        if self.engine.info.ready_log and not seen_ready_line:
            return False
        try:
            # the status only: the body is not read (a /health that streams without end)
            with client.stream("GET", self.engine.info.ready_paths[0], timeout=2.0) as r:
                return r.status_code == 200
        except httpx.HTTPError:
            return False

    # -- the trial -------------------------------------------------------------------------------
    @library_call
    def run(self) -> Outcome:
        t_start = time.monotonic()
        host = self.s.host
        port = self.s.port or free_port(host)
        argv = self.engine.launch_argv(self.cand, host, port)
        out = self._base_outcome(argv)
        self.dir.mkdir(parents=True, exist_ok=True)
        files.write_text(self.dir / "server.log", "")

        bad = self._validate()
        if bad:
            out.launched = False
            out.phase, out.failure_class = "parse-args", "bad-flag"
            out.evidence = [bad]
            out.hint = (
                "The engine's --help for this version rejects this flag list; bringup did not launch it. "
                "Fix the flag (bringup space lists the choices)."
            )
            out.signature = "prelaunch-validation"
            out.timings = Timings(total=time.monotonic() - t_start)
            files.write_text(self.dir / "server.log", bad + "\n")
            return self._write(out)
        if not port_is_free(port, host):
            out.launched = False
            out.phase, out.failure_class = "spawn", "port-in-use"
            out.evidence = [f"port {port} on {host} is already in use (checked before launch)"]
            out.hint = "Another process holds this port; pick another --port or leave it to bringup."
            out.timings = Timings(total=time.monotonic() - t_start)
            return self._write(out)

        env = self._env = self.engine.launch_env(self.cand)
        gpus = visible_indices(env.get("CUDA_VISIBLE_DEVICES"))
        watch = self.s.gpu_watch or default_watch()
        msgs, held, self._gpu = watch.before_launch(gpus)
        for m in msgs:
            self.emit("gpu", m)
        if held is not None:  # the last server's memory is still held: do not launch into a full GPU
            out.launched, out.gpu = False, self._gpu
            out.phase, out.failure_class, out.evidence = "spawn", "gpu-memory-held", held.evidence()
            out.hint = (
                "GPU memory from an earlier launch was not given back; the processes above hold it. "
                "End them (or wait), then run again; this is the machine, not the configuration."
            )
            out.timings = Timings(total=time.monotonic() - t_start)
            return self._write(out)
        secrets.write_text(self.dir / "argv.json", json.dumps(redact_argv(argv)))
        t_launch = time.monotonic()
        server = ServerProcess(argv, self.dir / "server.log", env=env, redactor=Redactor(env), queued=True)
        files.write_text(self.dir / "server.pid", f"{server.pid}\n{port}\n")
        self.emit("status", f"launched pid {server.pid} on port {port}")
        self._warm_classifier()
        self._jit, self._t_launch = JitWatch(server.pid), t_launch
        self._set_phase("parse-args")
        base_url = f"http://{host}:{port}"
        status: str | None = None
        t_ready: float | None = None
        t_event: float | None = None  # the fatal line or the exit, for fail-fast timing
        bare = False  # the fatal line is an exception's, with no traceback yet (_settle)
        probe_results: list[ProbeResult] = []
        runner: ProbeRunner | None = None
        probe_t: tuple[float, float] | None = None
        teardown = None
        try:
            with httpx.Client(base_url=base_url) as client:
                last_check = 0.0
                while True:
                    fatal = self._drain(server, block=self.s.poll)
                    now = time.monotonic()
                    if fatal is not None:
                        t_event = fatal.t
                        status = "fails"
                        # its traceback is still to come: an exception line with none before it
                        bare = bare_exception(fatal.text) and not self._tracebacks
                        break
                    if server.exited() or self._cancelled():
                        t_event = now
                        status = "fails" if server.exited() else "timeout"
                        break
                    if now - last_check > 0.25:
                        last_check = now
                        if self._ready(client, self._seen_ready_line):
                            t_ready = time.monotonic()
                            self._ready_lag = t_ready - (self._last_t or t_launch)
                            self._set_phase("ready")
                            break
                    # Deadlines are in the engine's seconds (a double's clock runs faster than real time).
                    self._note_jit(now)
                    hang_s, timeout_s = self._deadlines()
                    last_line = self._progress_t if self._progress_t is not None else t_launch
                    if now - last_line > hang_s:
                        status = "hang"
                        break
                    if now - t_launch > timeout_s:
                        status = "timeout"
                        break
                if t_ready is not None:
                    status, t_event, runner, probe_results, probe_t = self._probe(server, base_url)
                if t_event is not None and status == "fails":
                    self._settle(server, bare)
        finally:
            healthy = status in (None, "works", "wrong-output")
            self._mark_stop(server)
            teardown = server.terminate(
                grace=self.s.grace if healthy else self.s.fail_grace, port=port, host=host
            )
        t_end = time.monotonic()
        gpu_msgs, after = watch.after_teardown(gpus, self._gpu.get("used_mib_before"))
        self._gpu.update(after)
        for m in gpu_msgs:
            self.emit("gpu", m)
        self._drain(server)
        if runner is not None and self._probe_thread is not None:
            # The server is gone, so an in-flight probe fails at once: collect its result.
            self._probe_thread.join(timeout=10)
            probe_results = list(runner.results)
        out.warnings = gpu_msgs
        return self._finish(
            out,
            server,
            status or "fails",
            runner,
            probe_results,
            t_start,
            t_launch,
            t_ready,
            t_event,
            t_end,
            probe_t,
            teardown,
        )

    def _cancelled(self) -> bool:
        return self.s.cancel is not None and self.s.cancel.is_set()

    def _probe_class(
        self, cls: Classification, status: str, bad_probe: ProbeResult | None, texts: list[str], reached: str
    ) -> tuple[Classification, str]:
        """The class of a failure the probes found and no signature explains (a stall, wrong or
        non-finite output); a fatal signature seen while probes disagreed makes it a failure."""
        if cls.failure_class == "unknown" and bad_probe is not None and bad_probe.kind == "stall":
            cls = self._stall(bad_probe, texts, reached)
        elif status == "wrong-output" and cls.failure_class == "unknown" and _not_served(bad_probe):
            # The server does not have the route (HTTP 404 / 405): nothing it computed is wrong, it was
            # started as a server of something else (vLLM's `--runner pooling` serves /pooling and no
            # /v1/completions). No kernel is a suspect; a setting that chose what it serves is.
            assert bad_probe is not None
            status = "fails"  # nothing the model computed was served: a failed launch, not a wrong answer
            cls = Classification(
                "bad-flag",
                reached,
                [f"probe {bad_probe.name}: {bad_probe.detail}"],
                "The server is up but does not serve the OpenAI route the probes use (HTTP 404/405): "
                "a setting started it as a server of something else (a pooling or embedding runner, an "
                "encoder-only or disaggregated role, a tokenizer-only server). Undo the settings that "
                "choose what the server does; the kernels are not in question.",
            )
        elif status == "wrong-output" and cls.failure_class == "unknown":
            bad = bad_probe
            kind = getattr(bad, "kind", "disagree")
            # What the engine said it picked (sampler, attention, GEMM) names the components on the
            # output path: evidence after the probe's own line.
            cls = Classification(
                "nan-output" if kind == "nan" else "wrong-output",
                reached,
                ([f"probe {bad.name}: {bad.detail}"] if bad else [])
                + self.engine.implementation_lines(texts),
                "The server answers but its output is not right: "
                + (
                    "NaN/inf logprobs point at the attention backend or KV dtype."
                    if kind == "nan"
                    else "greedy output must not depend on batch composition or repetition, and known answers must "
                    "match; suspect the attention/GEMM kernels or a quantized path."
                ),
                implicates=_probe_suspects(bad, "nan-output" if kind == "nan" else "wrong-output"),
            )
        elif status == "wrong-output":
            status = "fails"  # a fatal signature showed up while probes were disagreeing
        return cls, status

    def _stall(self, bad: ProbeResult, texts: list[str], reached: str) -> Classification:
        """A request that got no token in time: the scheduler's own lines are the evidence."""
        pattern = self.engine.info.probes.scheduler_log
        sched = [t.strip()[:300] for t in texts if pattern and re.search(pattern, t)][-3:]
        return Classification(
            "stall",
            reached,
            [f"probe {bad.name}: {bad.detail}", *sched, *self.engine.implementation_lines(texts)][:6],
            "Ready, but a request got no token within a deadline derived from the greedy request's "
            "timing"
            + (" while the scheduler kept logging running requests" if sched else "")
            + ": the path only this request runs (the sampler, for a sampled request) is stuck.",
            implicates=_probe_suspects(bad, None, hang_implicates().get(reached, [])),
        )

    def _probe(self, server: ServerProcess, base_url: str):
        stop = threading.Event()
        key = self.engine.api_key(
            self.cand, self._env
        )  # the server wants it (401 else), wherever it reads it
        # One hang deadline for every phase: a request waits a little longer than the deadline, so
        # a server stuck on its first request or in decode is called a hang here, not an HTTP timeout.
        probe_cfg = dataclasses.replace(
            self.engine.probe_config(self.s.probe, self.cand),
            api_key=key,
            request_timeout=max(self.s.probe.request_timeout, self.s.hang_timeout + 5),
        )
        runner = ProbeRunner(base_url, probe_cfg, stop)
        # a request that waits on a kernel build is not stalled (a watch of its own: the start-up
        # watch keeps its own count of the CPU each compiler has used)
        runner.compiling = JitWatch(server.pid).busy
        results: list[ProbeResult] = []
        box: dict[str, list[ProbeResult]] = {}

        def work() -> None:
            res = runner.run()
            box["r"] = res
            if self.workload is not None and res and all(r.passed for r in res) and not stop.is_set():
                runner.phase = "load"
                try:
                    self.bench = self.workload(base_url)
                except Exception as e:  # a workload error is the server's failure under load
                    self.bench = {"error": f"{type(e).__name__}: {e}"}

        th = threading.Thread(target=work, daemon=True)
        self._probe_thread = th
        t0 = time.monotonic()
        th.start()
        t_event = None
        status = None
        progress = (0, t0)  # (probes finished, when the last one finished)
        while th.is_alive():
            fatal = self._drain(server, block=self.s.poll)
            self._set_phase(runner.phase)
            if fatal is not None or server.exited():
                t_event = fatal.t if fatal is not None else time.monotonic()
                status = "fails"
                stop.set()
                break
            if time.monotonic() - t0 > self.s.probes_deadline or self._cancelled():
                status = "timeout" if self._cancelled() else "hang"
                stop.set()
                break
            if len(runner.results) != progress[0]:
                progress = (len(runner.results), time.monotonic())
            elif runner.phase != "load" and time.monotonic() - progress[1] > self.s.hang_timeout:
                status = "hang"  # the load phase (a workload) keeps its own per-request limit
                self._hung_probe = f"no probe answered for {self.s.hang_timeout:.0f} s after ready"
                stop.set()
                break
        if status is None:
            th.join()
            results = box.get("r") or list(runner.results)  # a probe thread that died still counts
            if all(r.passed for r in results) and self.bench is not None and "error" in self.bench:
                status = "fails"
                t_event = time.monotonic()
            elif all(r.passed for r in results):
                status = "works"
            elif any(r.kind in ("server-error", "stall") for r in results):
                status = "fails"
                t_event = time.monotonic()
            else:
                status = "wrong-output"
        else:
            results = list(runner.results)
        return status, t_event, runner, results, (t0, time.monotonic())

    def _finish(
        self,
        out: Outcome,
        server: ServerProcess,
        status: str,
        runner: ProbeRunner | None,
        probe_results: list[ProbeResult],
        t_start: float,
        t_launch: float,
        t_ready: float | None,
        t_event: float | None,
        t_end: float,
        probe_t: tuple[float, float] | None,
        teardown,
    ) -> Outcome:
        texts = self.keeper.lines()
        out.exit_code = server.proc.returncode
        out.bench = self.bench
        out.probes = list(probe_results)
        eff = self.engine.effective(texts, self.cand.flag_dict, self.spec)
        out.effective = {k: _jsonable(v) for k, v in eff.values.items()}
        out.overrides = [OverrideRecord(**o.to_json()) for o in eff.overrides]
        out.overrides = [
            OverrideRecord(
                flag=o.flag,
                requested=_jsonable(o.requested),
                effective=_jsonable(o.effective),
                evidence=o.evidence,
            )
            for o in out.overrides
        ]
        out.warnings = [*out.warnings, *self._warned]
        out.selected = self.engine.implementation_lines(texts)
        out.gpu = self._gpu or None
        out.timings = Timings(
            to_ready=(t_ready - t_launch) if t_ready else None,
            total=t_end - t_start,
            probes=(probe_t[1] - probe_t[0]) if probe_t else None,
            teardown=teardown.seconds if teardown else None,
            fatal_to_teardown=(t_end - t_event) if t_event is not None else None,
            simulated=self._simulated_seconds(texts, status),
            overhead=t_launch - t_start,
            ready_lag=self._ready_lag,
            **self._jit_timings(),
        )
        if teardown is not None:
            out.teardown = {
                "seconds": round(teardown.seconds, 3),
                "signal": teardown.signal_used,
                "leftover_pids": teardown.leftover_pids,
                "port_free": teardown.port_free,
            }
        reached = self.phase
        failed_probe = next((r for r in probe_results if not r.passed), None)
        if failed_probe is not None and phase_index(failed_probe.phase) > phase_index("ready"):
            reached = failed_probe.phase

        if status == "works":
            out.status = "works"
            return self._write(out)
        if status in ("hang", "timeout"):
            out.status = "timeout"
            out.phase = reached
            silent = (time.monotonic() - self._last_t) if self._last_t is not None else None
            if status == "hang":
                out.failure_class = "hang"
                said = [t for t in texts if not self.world.bookkeeping(t) and not config_dump(t)]
                out.evidence = hang_evidence(said) or ["(the server printed nothing)"]
                out.implicates = list(hang_implicates().get(reached, []))
                out.hint = (
                    f"No progress (no new log line; repeated lines do not count) and not ready for "
                    f"{self.s.hang_timeout:.0f} s in phase {reached}; "
                    "a kernel compile or a collective may be stuck. Raise --hang-timeout if this phase "
                    "is known to be slow, else change what this phase runs."
                )
                if phase_index(reached) > phase_index("ready"):  # hung while serving: a probe never answered
                    out.evidence = [f"{self._hung_probe or 'no answer'} (phase {reached})", *out.evidence][:6]
                    out.hint = (
                        f"Ready, then no answer for {self.s.hang_timeout:.0f} s in phase {reached}: the "
                        "engine is stuck on a request (a decode kernel or a collective); change what this "
                        "phase runs, or raise --hang-timeout if requests are known to be this slow."
                    )
            else:
                out.failure_class = None
                out.evidence = [ln for ln in texts if ln.strip()][-3:]
                out.hint = (
                    f"Still starting when the {self.s.timeout:.0f} s deadline passed (last line "
                    f"{silent or 0:.0f} s before); raise --timeout."
                )
            return self._write(out)

        cls = classify(
            self.engine.before_teardown(self.keeper.lines(self._stopped_at)),
            self.engine.log_dialect,
            reached,
            settings=self.cand.settings(),
            matcher=self.matcher,
        )
        cls, status = self._probe_class(cls, status, failed_probe, texts, reached)
        answer = _probe_answer(failed_probe, cls.failure_class)
        if answer is not None and answer not in cls.evidence:
            cls.evidence = [answer, *cls.evidence][:6]
        out.status = "wrong-output" if status == "wrong-output" else "fails"
        out.failure_class = cls.failure_class
        out.phase = cls.phase
        out.evidence = cls.evidence
        out.hint = cls.hint
        out.implicates = cls.implicates
        out.signature = cls.signature_id
        out.implicated_levels = cls.implicated_levels
        out.root_exception = cls.root_exception
        out.remedies = cls.remedies
        out.frames = cls.frames
        if out.failure_class == "port-in-use" and not server_port_race(out):
            out.hint = setting_port_hint(out)  # not bringup's port: a setting's address
        return self._write(out)


_REFUSED = re.compile(r"HTTP 4\d\d\b")
_NOT_SERVED = re.compile(r"HTTP 40[45]\b")


def _not_served(bad: ProbeResult | None) -> bool:
    """The failed probe's route is not served at all (HTTP 404 Not Found, 405 Method Not Allowed):
    what the server answers is not an answer of the model's."""
    return bad is not None and bad.kind == "disagree" and bool(_NOT_SERVED.search(bad.detail))


def _probe_answer(bad: ProbeResult | None, klass: str | None) -> str | None:
    """The failed probe's own line, when it is evidence: the engine's refusal of a request (an
    HTTP 4xx with its reason) is the first thing a user reads, whatever the log shows after it
    (the real vLLM CPU build answered "Tokenizer not available when `skip_tokenizer_init=True`",
    400, then a chat request died on a bare AssertionError: only the first names the setting);
    a server error when the log explains nothing."""
    if bad is None or bad.kind == "nan":
        return None
    if _REFUSED.search(bad.detail) or (bad.kind == "server-error" and klass == "unknown"):
        return f"probe {bad.name}: {bad.detail}"
    return None


def _probe_suspects(
    bad: ProbeResult | None, klass: str | None, generic: list[str] | None = None
) -> list[str]:
    """What a failed probe implicates. `bad` is the first probe that failed: when it is one of
    the users'-use probes, every greedy probe before it passed, so the components only it runs
    are the suspects (classes.yaml probe_implicates_by_probe: a sampled request runs the sampler);
    else the class's own list."""
    only = probe_implicates_by_probe().get(bad.name) if bad is not None else None
    if only:
        return list(only)
    return list(generic if generic is not None else probe_implicates().get(klass or "", []))


def _jsonable(v):
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return str(v)


_PROGRESS = re.compile(r"\d+%\||it/s\]|s/it\]|checkpoint shards|\[\s*\d+/\d+\]")
_STAMP = re.compile(r"^(\(\w+ pid=\d+\)\s*)?(\w+ \d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? )?(\[[^\]]*\]\s*)*")


def hang_evidence(texts: list[str], n: int = 4) -> list[str]:
    """The last lines before a hang that say what the server was doing: progress bars and lines
    that only repeat an earlier one (a periodic warning is not progress) do not count, though the
    repeated line itself is kept once."""
    out: list[str] = []
    seen: set[str] = set()
    for t in reversed(texts):
        if not t.strip() or _PROGRESS.search(t):
            continue
        body = _STAMP.sub("", t.strip())
        if body in seen:
            continue
        seen.add(body)
        out.append(safe_line(t.rstrip()))
        if len(out) >= n:
            break
    return out[::-1]
