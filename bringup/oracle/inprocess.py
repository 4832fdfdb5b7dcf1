"""A scenario launch answered in-process: the server's own log lines, read by the trial's own reader.

Benchmarks that run the whole search loop hundreds of times (benchmarks/composed_faults.py) cannot
start a scenario server per launch (seconds each). `InProcessTrial` is a `bringup.trial.launch.Trial`
whose launch renders, into a list, the lines the scenario server would print (its own `Startup`
walk and `Dialect` classes, with a clock that does not sleep), walks the probe ladder through the
oracle's serving model (`bringup.oracle.trials.Serving`: the server's generator, perf model and
trigger rule), and then hands those lines to the trial's own phase tracking, fatal-line check and
`Trial._finish`: the same classifier, root-cause finder, effective-config parser and simulated-time
accounting as a real `bringup trial --scenario`. Nothing is classified here.

Use it through `Run(settings, root, trial_factory=InProcessTrial)` (bringup/session/run.py): the run's
loop, journal, executor and strategy are the real ones. tests/oracle/test_inprocess.py checks that it
agrees with real launches (class, phase, signature, root exception, first evidence line, status,
simulated seconds).

What it does not replay: teardown timing, GPU watching and port checks (there is no process), and
lines a real server prints after the trial has already torn it down (vLLM's shutdown lines half a
second after a serving death).
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TextIO, cast

from bringup.guard import files
from bringup.observe.outcome import Outcome, ProbeResult
from bringup.oracle.trials import (
    CHAT_PROMPT,
    KNOWN_ANSWER_TOKENS,
    LONG_PROMPT,
    Clock,
    Death,
    Oracle,
    Req,
    Serving,
    chat_req,
    completion_req,
    expected_in,
    parts_at_tie,
    replay_plan,
    user_ladder,
)
from bringup.scenario.config import ScenarioConfig, compute_config, decide, template_values
from bringup.scenario.generate import TokenPlan
from bringup.scenario.lifecycle import Startup
from bringup.scenario.logfmt import LogWriter, SimClock
from bringup.scenario.schema import Fail, Hang, Scenario, ScenarioRule
from bringup.trial.launch import Trial
from bringup.trial.process import ServerProcess, TimedLine
from bringup.verify.probes import (
    BATCH_PROMPTS,
    REFERENCE_PROMPT,
    USER_STEPS,
    ProbeConfig,
    long_decode_length,
    show_tokens,
)

PID = 4242  # the double's pid in rendered lines (a real one prints its own)


class _Lines:
    """A stream that keeps each written line (LogWriter writes and flushes)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._part = ""

    def flush(self) -> None:
        return None

    def write(self, s: str) -> int:
        text = self._part + s
        *done, self._part = text.split("\n")
        self.lines.extend(done)
        return len(s)


class _InstantClock(SimClock):
    """The server's simulated clock without the real sleep (the coroutine never yields)."""

    async def advance(self, seconds: float) -> None:
        if seconds > 0:
            self.t += seconds

    async def sleep_for_request(self, seconds: float) -> None:
        return None


class _Ended(Exception):
    """The start-up walk stopped: the server died (exit code) or hung."""

    def __init__(self, how: str, code: int | None = None):
        super().__init__(how)
        self.how, self.code = how, code


class _Startup(Startup):
    """The server's start-up walk; a strike ends the walk instead of the process."""

    async def _strike(self, phase: str) -> None:
        assert self.action is not None
        self.log.clock_line("died" if isinstance(self.action, Fail) else "hung")  # first, as served
        self.log.lines(self.action.lines, self.values)
        if isinstance(self.action, Fail):
            self.d.startup_death(phase)
            code = self.action.exit_code if self.action.exit_code is not None else self.d.exit_code(phase)
            raise _Ended("died", code)
        _repeat(self.log, self.action, self.values)
        raise _Ended("hung")


def _repeat(log: LogWriter, action: Hang, values: dict[str, Any], times: int = 2) -> None:
    """A hung engine's watchdog lines, as a watcher sees them before its deadline (repeats are
    output, not progress; the trial's hang evidence keeps one of each)."""
    if action.repeat is None:
        return
    for _ in range(times):
        log.clock.t += action.repeat.every
        log.lines(action.repeat.lines, values)


def _drive(coro: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine that never really waits (the instant clock) to its end."""
    try:
        while True:
            coro.send(None)
    except StopIteration:
        return


@dataclass
class Launch:
    """What the server printed and how its start-up ended: ready, died (exit code) or hung."""

    lines: list[str]
    ended: str
    code: int | None
    cfg: ScenarioConfig | None = None
    rule: ScenarioRule | None = None
    startup: _Startup | None = None
    clock: _InstantClock | None = None
    log: LogWriter | None = None


_PARSERS: dict[int, tuple[Scenario, Oracle]] = {}


def _parse(sc: Scenario, argv: list[str]) -> tuple[Any, list[str]]:
    """The server's argparse (`parse_engine_argv`, through the oracle's parser built once per
    scenario); None and the lines it printed (stderr) when it exits."""
    hit = _PARSERS.get(id(sc))
    if hit is None or hit[0] is not sc:
        hit = _PARSERS[id(sc)] = (sc, Oracle(sc))
    err, out = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            return hit[1].parse(argv), []
    except SystemExit:
        return None, (out.getvalue() + err.getvalue()).splitlines()


def render_startup(sc: Scenario, argv: list[str], env: dict[str, str]) -> Launch:
    """The lines `python -m bringup.scenario serve` prints up to ready (or its death or hang)."""
    req, usage = _parse(sc, argv)
    if req is None:
        return Launch(usage, "died", 2)
    spec = sc.help_spec()
    cfg = compute_config(sc, spec, req.flags, req.positionals, env)
    clock = _InstantClock(1.0)
    stream = _Lines()
    log = LogWriter(sc.engine, clock, stream=cast(TextIO, stream), pid=PID)
    try:
        cfg.layer_override()
    except ValueError as e:  # __main__._bad_override: the engine's JSON error, exit 1
        log.write("Traceback (most recent call last):")
        log.write('  File "<frozen runpy>", line 198, in _run_module_as_main')
        log.write(f"json.decoder.JSONDecodeError: {e}")
        return Launch(stream.lines, "died", 1, cfg)
    rule = decide(sc, cfg)
    startup = _Startup(sc, cfg, rule, clock, log)
    launch = Launch(stream.lines, "ready", None, cfg, rule, startup, clock, log)
    try:
        _drive(startup.run())
        _drive(_serve_start(startup))
    except _Ended as e:
        launch.ended, launch.code = e.how, e.code
    return launch


async def _serve_start(st: _Startup) -> None:
    """lifecycle.Startup.serve_forever up to ready, without a socket."""
    d = st.d
    d.bound_port = st.cfg.port
    d.server_starting()
    d.server_up()
    if st.sc.engine == "sglang":
        await st.phase("warmup", st.sc.timing.warmup, d.warmup_begin, None, lambda s: d.ready())
    st.warnings_at("ready")
    st.log.clock_line("ready")


class _ProbeWalk:
    """bringup.verify.probes.ProbeRunner's ladder, its results and phases, against the oracle's serving
    model, printing what the server prints per request (access lines, clock lines, a death)."""

    def __init__(self, launch: Launch, probe: ProbeConfig, context_len: int):
        assert launch.cfg is not None and launch.clock is not None and launch.log is not None
        assert launch.startup is not None
        self.launch, self.probe, self.st = launch, probe, launch.startup
        self.clock = Clock(launch.clock.t)
        self.srv = Serving(self.st.sc, launch.cfg, launch.rule, self.clock, context_len)
        self.phase = "ready"
        self.results: list[ProbeResult] = []
        self.hung: str | None = None  # the serving action that stopped the ladder: "died" / "hung"
        self._ref: TokenPlan | None = None
        self._batch_ref: TokenPlan | None = None

    # -- the server's side --------------------------------------------------------------------
    def _requests(self, reqs: list[Req], path: str) -> list:
        log = self.launch.log
        assert log is not None
        too_long = [r for r in reqs if not self.srv.fits(r)]
        if too_long:
            self.st.d.access("127.0.0.1:41600", "POST", path, 400)
            raise _Disagree(f"POST {path}: HTTP 400: context length exceeded")
        try:
            plans = self.srv.run(reqs)
        except Death as d:
            self._death(d)
            raise
        for _ in reqs:
            self.st.d.access("127.0.0.1:41600", "POST", path, 200)
        log.clock.t = self.clock.t
        log.clock_line("request")
        return plans

    def _death(self, d: Death) -> None:
        log, st = self.launch.log, self.launch.startup
        assert log is not None and st is not None and self.srv.action is not None
        log.clock.t = self.clock.t
        values = template_values(st.cfg)
        if d.hang:
            assert isinstance(self.srv.action, Hang)
            log.lines(self.srv.action.lines, values)
            _repeat(log, self.srv.action, values)
            self.hung = "hung"
            return
        log.clock_line("died")
        log.lines(self.srv.action.lines, values)
        st.d.serving_death()
        self.hung = "died"

    # -- the ladder -----------------------------------------------------------------------------
    def run(self) -> list[ProbeResult]:
        replay = {
            "health": self._health,
            "completion": self.completion_req,
            "chat": self.chat_req,
            "known-answers": self._known,
            "long-decode": self._long,
            "batch": self._batch,
            "batch-invariance": self._invariance,
        }
        steps, user = replay_plan(replay, self.probe)
        for name, fn in steps:
            before = self.phase
            try:
                detail = fn()
                self.results.append(ProbeResult(name=name, passed=True, detail=detail, phase=before))
            except Death:
                detail = (
                    f"no answer within {self.probe.request_timeout} s"
                    if self.hung == "hung"
                    else "server error: EngineCore encountered an issue"
                )
                self.results.append(
                    ProbeResult(name=name, passed=False, detail=detail, phase=self.phase, kind="server-error")
                )
                break
            except _Disagree as e:
                self.results.append(ProbeResult(name=name, passed=False, detail=str(e), phase=self.phase))
        if self.hung is None and user:
            self._user_probes()
        return self.results

    def _user_probes(self) -> None:
        """probes_user's probes, through the oracle's own replay of them (user_ladder): sampled,
        sampled-reference (no reference in a scenario: skipped), long-prompt, concurrency."""
        failed: dict[str, str] = {}

        def disagree(name: str, at: str | None = None) -> None:
            failed.setdefault(name, at or self.phase)

        try:
            user_ladder(self.srv, self.probe, self._ref, disagree)
            log = self.launch.log
            assert log is not None
            log.clock.t = self.clock.t  # the server's clock line after those requests, as _requests prints
            log.clock_line("request")
        except Death as d:
            self._death(d)
            self.results.append(
                ProbeResult(name="sampled", passed=False, detail="server error", kind="server-error")
            )
            return
        for name in USER_STEPS:
            if name in failed:
                self.results.append(
                    ProbeResult(name=name, passed=False, detail=f"probe {name} disagrees", phase=failed[name])
                )
            else:
                kind = "skipped" if name == "sampled-reference" else "ok"
                self.results.append(
                    ProbeResult(name=name, passed=True, detail="", phase=self.phase, kind=kind)
                )

    def _health(self) -> str:
        assert self.launch.cfg is not None
        return f"health 200; models: {', '.join(self.launch.cfg.served_model_names)}"

    def completion_req(self) -> str:
        self.phase = "first-request"
        req = completion_req(REFERENCE_PROMPT, self.probe.short_tokens)
        k = self.srv._trigger()
        if k is not None and k > 0:
            self.phase = "decode"  # the stream delivered tokens before the strike
        else:
            self.phase = "first-request"
        try:
            plan = self._requests([req], "/v1/completions")[0]
        except Death:
            raise
        except _Disagree:
            self.phase = "first-request"
            raise
        self._ref = plan
        self.phase = "decode"
        return f"{len(plan.tokens)} tokens (streamed): {plan.text[:60]!r}"

    def chat_req(self) -> str:
        plan = self._requests([chat_req(CHAT_PROMPT, self.probe.short_tokens)], "/v1/chat/completions")[0]
        return f"{len(plan.tokens)} tokens: {plan.text[:60]!r}"

    def _known(self) -> str:
        wrong = []
        for qa in self.probe.answers:
            plan = self._requests([chat_req(qa.prompt, KNOWN_ANSWER_TOKENS)], "/v1/chat/completions")[0]
            if not expected_in(qa.expected, plan.text):
                wrong.append(f"{qa.prompt!r} -> {plan.text.strip()[:80]!r} (expected {qa.expected!r})")
        if wrong:
            raise _Disagree("wrong answer: " + "; ".join(wrong))
        return f"{len(self.probe.answers)} known answers correct"

    def _long(self) -> str:
        n, why = long_decode_length(self.probe.long_tokens, self.srv.context_len)
        if n is None:
            return f"skipped: {why}"
        plan = self._requests([completion_req(LONG_PROMPT, n, ignore_eos=True)], "/v1/completions")[0]
        return f"{len(plan.tokens)} tokens, {len(plan.tokens)} finite logprobs"

    def _batch(self) -> str:
        self.phase = "load"
        prompts = [REFERENCE_PROMPT] + [
            BATCH_PROMPTS[i % len(BATCH_PROMPTS)] for i in range(self.probe.batch_size - 1)
        ]
        plans = self._requests(
            [completion_req(p, self.probe.short_tokens) for p in prompts], "/v1/completions"
        )
        self._batch_ref = plans[0]
        return f"{len(plans)} concurrent requests answered"

    def _invariance(self) -> str:
        failed = next(
            (r.name for r in self.results if r.name in ("completion", "batch") and not r.passed), None
        )
        if failed is not None or self._batch_ref is None or self._ref is None:
            raise _Disagree(f"not compared: the {failed or 'batch'} probe gave no output to compare")
        ref, batch = self._ref.tokens, self._batch_ref.tokens
        if batch != ref and not parts_at_tie(self._ref, self._batch_ref, self.probe):
            raise _Disagree(
                f"greedy output differs alone vs in a batch: {show_tokens(ref)} vs {show_tokens(batch)}"
            )
        req = completion_req(REFERENCE_PROMPT, self.probe.short_tokens)
        again = list(self._requests([req], "/v1/completions")[0].tokens)
        if again != ref:
            raise _Disagree(
                f"greedy output differs between two identical requests: {show_tokens(ref)} vs {show_tokens(again)}"
            )
        return "same greedy tokens alone, in a batch, and repeated"


class _Disagree(Exception):
    pass


@dataclass
class _Proc:
    returncode: int | None


@dataclass
class _Exited:
    """What Trial._finish reads of a server process: its return code."""

    proc: _Proc


class InProcessTrial(Trial):
    """A Trial of a scenario engine with no process: see the module docstring. Same constructor."""

    def run(self) -> Outcome:
        t_start = time.monotonic()
        host, port = self.s.host, self.s.port or 30000
        argv = self.engine.launch_argv(self.cand, host, port)
        out = self._base_outcome(argv)
        bad = self._validate()
        if bad:
            return _rejected(self, out, bad, t_start)
        sc: Scenario = self.engine.scenario  # type: ignore[attr-defined]
        flags = [
            *self.engine.model_args(self.cand.model),
            "--host",
            host,
            "--port",
            str(port),
            *self.cand.argv_flags(),
        ]
        launch = render_startup(sc, flags, self.engine.launch_env(self.cand))
        self._set_phase("parse-args")
        status = self._read(launch.lines)
        probes: list[ProbeResult] = []
        if launch.ended == "hung" and status is None:
            status = "hang"
        elif launch.ended == "died":
            status = "fails"
        elif status is None:
            assert launch.startup is not None
            self._set_phase("ready")
            status, probes = self._serve(launch)
        code = launch.code if launch.ended == "died" else -15
        self.dir.mkdir(parents=True, exist_ok=True)
        files.write_text(self.dir / "server.log", "".join(f"{ln}\n" for ln in launch.lines))
        t_end = time.monotonic()
        server = cast(ServerProcess, _Exited(_Proc(code)))  # _finish reads its return code only
        return self._finish(
            out, server, status, None, probes, t_start, t_start, None, None, t_end, None, None
        )

    def _read(self, texts: list[str], start: int = 0) -> str | None:
        """The lines into the trial's own reader (phase, fatal check); "fails" when one is fatal."""
        now = time.monotonic()
        fatal = self._take([TimedLine(now, text) for text in texts[start:]])  # as Trial reads a real server
        return "fails" if fatal is not None else None

    def _serve(self, launch: Launch) -> tuple[str, list[ProbeResult]]:
        assert launch.startup is not None
        probe = self.engine.probe_config(self.s.probe, self.cand)
        walk = _ProbeWalk(launch, probe, launch.startup.size.context_len)
        start = len(launch.lines)
        results = walk.run()
        for r in results:
            self._set_phase(r.phase)
        fatal = self._read(launch.lines, start)
        if walk.hung == "hung" and fatal is None:
            self._hung_probe = f"no probe answered for {self.s.hang_timeout:.0f} s after ready"
            return "hang", results
        if walk.hung is not None or fatal is not None:
            return "fails", results
        if all(r.passed for r in results):
            return "works", results
        return "wrong-output", results


def _rejected(trial: Trial, out: Outcome, bad: str, t_start: float) -> Outcome:
    """Trial.run's pre-launch rejection, word for word."""
    from bringup.observe.outcome import Timings

    out.launched = False
    out.phase, out.failure_class = "parse-args", "bad-flag"
    out.evidence = [bad]
    out.hint = (
        "The engine's --help for this version rejects this flag list; bringup did not launch it. "
        "Fix the flag (bringup space lists the choices)."
    )
    out.signature = "prelaunch-validation"
    out.timings = Timings(total=time.monotonic() - t_start)
    trial.dir.mkdir(parents=True, exist_ok=True)
    files.write_text(trial.dir / "server.log", bad + "\n")
    return trial._write(out)
