"""What a launch of a scenario would do, answered in-process, without starting a server.

Benchmarks that compare search methods need thousands of launches (one-factor-at-a-time up to 60
per scenario, random order up to 200 per seed); real scenario servers take seconds each. The
oracle answers the same question from the same code the server runs, so it cannot drift from it:

- the flags go through bringup's own pre-launch check (`parse_flags`, as `Trial._validate` does)
  and then the imitated engine's argparse (`parse_engine_argv`), as the server parses them;
- `compute_config` and `decide` pick the effective configuration and the rule;
- start-up time walks the phases `lifecycle.Startup.run` walks, with the same durations (dummy
  weights, layer overrides, CUDA graphs on or off) and a failure striking `FAIL_AT` into its phase;
- serving replays the probe ladder (`bringup.verify.probes.ProbeRunner.ladder`, same prompts, token
  limits and order) through the server's own `Generator`, `perf` model and trigger rule
  (`runtime.Runtime`): a request that starts at t moves the clock to t + prefill + tokens x step,
  requests of the concurrent batch overlap, and a `fail` in `first-request`/`decode` strikes at
  the same token the server's would.

`tests/oracle/test_oracle.py` checks it against real `bringup trial --scenario` launches. Two things are
approximations, not replays: a hang costs `hang_s` simulated seconds of waiting (the trial's hang
deadline, in engine seconds: the trial scales it by the engine's clock and does not count repeated
lines as progress, so a hang that keeps printing a watchdog line costs the same), and with a `performance:` section (tuning
scenarios) serving is priced through the perf model's noise-free one-request view, not the step
scheduler: statuses, phases and start-up times stay exact there, probe time is an estimate.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from bringup.core.candidate import Candidate, FlagError, FlagValue, parse_flags, render_flags
from bringup.core.datafiles import phase_index
from bringup.scenario.config import ScenarioConfig, compute_config, decide
from bringup.scenario.engine_args import (
    NUMBER,
    Requested,
    build_parser,
    help_for,
    parse_engine_argv,
    vllm_dashes,
)
from bringup.scenario.generate import Generator, Sampling, TokenPlan, count_tokens
from bringup.scenario.http import chat_prompt
from bringup.scenario.lifecycle import FAIL_AT
from bringup.scenario.loader import load_scenario
from bringup.scenario.perf import Load, PerfModel, perf_model_for
from bringup.scenario.runtime import SERVING_PHASES
from bringup.scenario.schema import BATCH_MODES, Fail, Hang, Scenario, ScenarioRule
from bringup.scenario.sizing import compute_sizing
from bringup.verify import probes_user as u
from bringup.verify.probe_http import TIE_LOGPROBS, parting
from bringup.verify.probes import (
    BATCH_PROMPTS,
    REFERENCE_PROMPT,
    USER_STEPS,
    KnownAnswer,
    ProbeConfig,
    ladder_steps,
    long_decode_length,
)

# NUMBER, vllm_dashes and chat_prompt are the server's own helpers, shared on purpose:
# the oracle must parse flags and build prompts exactly as the server does, not as a copy would.
Status = Literal["works", "fails", "wrong-output", "timeout"]
HOST, PORT = "127.0.0.1", 30000  # what a trial passes; no rule reads them
# The prompts ProbeRunner writes inline (probe_chat, probe_long_decode); keep them in step.
CHAT_PROMPT = "Say hello in one sentence."
LONG_PROMPT = "Once upon a time"
KNOWN_ANSWER_TOKENS = 64
DEFAULT_HANG_S = 600.0  # TrialSettings.hang_timeout: how long a watcher waits on a silent server


@dataclass(frozen=True)
class OracleOutcome:
    """What one launch would do. `phase` is where it failed (None when it works)."""

    status: Status
    phase: str | None
    simulated_s: float  # launch to failure, or through the last probe
    rule: str | None = None  # the deciding rule's id (or action); None: no rule matched
    launched: bool = True  # False: rejected before launch (bad flag), costs nothing
    detail: str = ""

    @property
    def validated(self) -> bool:
        """Status works with every probe passing."""
        return self.status == "works"

    def later_than(self, other: OracleOutcome) -> bool:
        """Did this launch get further through the phases than `other`? (a working launch is furthest)"""
        return _reach(self) > _reach(other)


def _reach(o: OracleOutcome) -> int:
    if o.status == "works":
        return 1 << 20
    return phase_index(o.phase)


def screen_flags(scenario: Scenario, layers: int = 4) -> dict[str, FlagValue]:
    """The flags a screening launch adds (dummy weights, fewer layers): the run's own."""
    from bringup.search.screening import screen_flags as run_screen_flags

    return run_screen_flags(scenario.help_spec(), layers) or {}


@dataclass
class Clock:
    """The server's SimClock without sleeping: requests move it to max(t, start + duration)."""

    t: float = 0.0

    def finish(self, started: float, seconds: float) -> None:
        self.t = max(self.t, started + seconds)


class Death(Exception):
    """The rule's serving action struck: the server died (fail) or stopped making progress (hang)."""

    def __init__(self, at: float, hang: bool):
        super().__init__(at)
        self.at = at
        self.hang = hang


@dataclass
class Req:
    prompt: str
    sampling: Sampling
    default_max: int | None  # completions default to 16 tokens; chat has no default
    tokens: int | None = None  # a token-id prompt's length (the server counts ids, not words)

    @property
    def prompt_tokens(self) -> int:
        return self.tokens if self.tokens is not None else count_tokens(self.prompt)


class Serving:
    """The probe ladder against the server's Runtime, as simulated time."""

    def __init__(
        self, sc: Scenario, cfg: ScenarioConfig, rule: ScenarioRule | None, clock: Clock, context_len: int
    ):
        self.sc, self.cfg, self.clock = sc, cfg, clock
        mode = rule.serve.mode if rule is not None and rule.serve is not None else "ok"
        self.mode = mode
        self.generator = Generator(mode, sc.answers, rule.serve.over if rule and rule.serve else None)
        self.perf: PerfModel = perf_model_for(sc, cfg)
        action: Fail | Hang | None = (rule.fail or rule.hang) if rule is not None else None
        self.action = action if action is not None and action.phase in SERVING_PHASES else None
        self.context_len = context_len

    def _trigger(self) -> int | None:
        """Output tokens produced before the action strikes (Runtime._trigger_at)."""
        a = self.action
        if a is None:
            return None
        if a.phase == "first-request":
            return 0
        return a.after_tokens if a.after_tokens is not None else 1

    def plan(self, req: Req, batch: int = 1) -> TokenPlan:
        return self.generator.plan(req.prompt, req.sampling, batch_size=batch, default_max=req.default_max)

    def fits(self, req: Req) -> bool:
        """The server's context check: a request past the context length gets HTTP 400."""
        return req.prompt_tokens + (req.sampling.max_tokens or 0) <= self.context_len

    def run(self, reqs: list[Req]) -> list[TokenPlan]:
        """Requests sent together (one, or the concurrent batch): all start now and overlap."""
        started = self.clock.t
        n = len(reqs)
        plans = [self.plan(r, n if self.mode in BATCH_MODES else 1) for r in reqs]
        k = self._trigger()
        ends: list[float] = []
        strikes: list[float] = []
        for r, p in zip(reqs, plans, strict=True):
            prefill = self.perf.prefill_seconds(Load(n, r.prompt_tokens))
            step = self.perf.decode_step_seconds(Load(n))
            tokens = len(p.tokens)
            # Runtime.generate checks the trigger before prefill (0) and before tokens 1..n-1.
            if k is not None and (k == 0 or k < tokens):
                strikes.append(started if k == 0 else started + prefill + k * step)
            ends.append(prefill + step * tokens)
        if strikes:
            at = min(strikes)
            self.clock.finish(at, 0.0)
            raise Death(at, hang=isinstance(self.action, Hang))
        for e in ends:
            self.clock.finish(started, e)
        return plans


def _greedy(max_tokens: int | None, ignore_eos: bool = False, logprobs: int | None = None) -> Sampling:
    # The probes send temperature 0 and no top_p/seed (the server's defaults: 1.0, None).
    return Sampling(max_tokens=max_tokens, temperature=0.0, ignore_eos=ignore_eos, logprobs=logprobs)


def chat_req(prompt: str, max_tokens: int) -> Req:
    body = {"messages": [{"role": "user", "content": prompt}]}
    return Req(chat_prompt(body), _greedy(max_tokens), None)


def completion_req(prompt: str, max_tokens: int, ignore_eos: bool = False, tokens: int | None = None) -> Req:
    return Req(prompt, _greedy(max_tokens, ignore_eos, logprobs=TIE_LOGPROBS), 16, tokens)


def tops(plan: TokenPlan) -> list[dict[str, float]]:
    """A plan's top logprobs, a dict a step, as the server sends them."""
    return [dict(lp.top) for lp in plan.logprobs or []]


def parts_at_tie(alone: TokenPlan, got: TokenPlan, probe: ProbeConfig) -> bool:
    """probe_http.parting: whether the probes allow `got` to part from `alone`."""
    from bringup.verify.reference import tolerance

    gap = tolerance(probe.reference_precision).tie_gap
    return parting(alone.tokens, got.tokens, (tops(alone), tops(got)), gap) is not None


def _engine_probe(probe: ProbeConfig, sc: Scenario, flags: Mapping[str, FlagValue]) -> ProbeConfig:
    """What the trial's engine adapter makes of the probe settings (Engine.probe_config): what the
    imitated engine's API offers, and the launch's maximum batch."""
    from bringup.engines.base import batch_of, engine_info
    from bringup.verify.reference import precision_of

    sup = engine_info(sc.engine).probes
    return replace(
        probe,
        top_k=sup.top_k and probe.top_k,
        seeded=sup.seeded and probe.seeded,
        token_ids=sup.token_ids and probe.token_ids,
        ignore_eos=sup.ignore_eos and probe.ignore_eos,
        logprobs=sup.logprobs and probe.logprobs,
        max_batch=probe.max_batch or batch_of(dict(flags), sup.batch_flags),
        reference_precision=precision_of(dict(flags)),
    )


def _sampled(probe: ProbeConfig, seed: bool = False) -> Req:
    """probes_user._sampled_body as the server parses it (top_k is not modelled)."""
    s = Sampling(
        max_tokens=probe.sample_tokens,
        temperature=probe.sample_temperature,
        top_p=probe.sample_top_p,
        seed=probe.sample_seed if seed else None,
        ignore_eos=probe.ignore_eos,
        logprobs=probe.sample_top_k if probe.logprobs else None,
    )
    return Req(u.SAMPLED_PROMPT, s, 16)


def user_ladder(srv: Serving, probe: ProbeConfig, alone: TokenPlan | None, disagree) -> None:
    """probes_user's probes in ladder order: sampled, sampled-reference (no reference in a
    scenario: skipped, no request), long-prompt, concurrency."""
    if not probe.user_probes:
        return
    req = _sampled(probe)
    if not srv.fits(req):
        disagree("sampled", "decode")
    else:
        plan = srv.run([req])[0]
        if _sampler_violates(plan, probe):
            disagree("sampled", "decode")
        elif probe.seeded:  # the same-seed pair, unstreamed (the double's plan depends on the seed only)
            seeded = _sampled(probe, seed=True)
            if any(_sampler_violates(srv.run([seeded])[0], probe) for _ in range(2)):
                disagree("sampled", "decode")
    _long_prompt(srv, probe, disagree)
    _concurrency(srv, probe, alone, disagree)


def _sampler_violates(plan: TokenPlan, probe: ProbeConfig) -> bool:
    from bringup.verify.sampling_check import allowed

    top_k = probe.sample_top_k if probe.top_k else 0
    for tok, lp in zip(plan.tokens, plan.logprobs or [], strict=False):
        if allowed(tok, lp.logprob, dict(lp.top), top_k, probe.sample_top_p):
            return True
    return False


def _long_prompt(srv: Serving, probe: ProbeConfig, disagree) -> None:
    """probes_user.probe_long_prompt: /v1/models reports the context length, 1 token a word."""
    if not probe.logprobs:
        return  # skipped
    calibrate = completion_req(u.long_prompt(64), 1)  # _filler_tokens_per_word's request
    if not srv.fits(calibrate):
        disagree("long-prompt", "decode")
        return
    srv.run([calibrate])
    per_word = max(count_tokens(u.long_prompt(64)) / 64, 0.5)
    n = int(int(srv.context_len * probe.long_prompt_fraction) / per_word) - 8
    half = max(probe.short_tokens // 2, 1)
    prompt = u.long_prompt(n)
    req = completion_req(prompt, 2 * half, ignore_eos=probe.ignore_eos)
    if not srv.fits(req):
        disagree("long-prompt", "decode")
        return
    a = srv.run([req])[0].tokens
    # The double returns token ids (`return_token_ids`), so the probe sends the answer's first half
    # back as ids: the server reads the same text, counted as one token an id.
    n_ids = count_tokens(prompt) + half if probe.token_ids else None
    again = completion_req(prompt + "".join(a[:half]), half, ignore_eos=probe.ignore_eos, tokens=n_ids)
    if not srv.fits(again):
        disagree("long-prompt", "decode")
        return
    b = srv.run([again])[0].tokens
    # Fed back as text, the answer is compared only where it is read as `half` more tokens.
    verified = probe.token_ids or again.prompt_tokens == count_tokens(prompt) + half
    if verified and b != a[half:]:
        disagree("long-prompt", "decode")


def _concurrency(srv: Serving, probe: ProbeConfig, alone: TokenPlan | None, disagree) -> None:
    n = max(1, min(probe.max_batch or probe.concurrency_cap, probe.concurrency_cap))
    if alone is None:
        disagree("concurrency", "load")
        return
    if n <= probe.batch_size:
        return  # skipped: no larger than the batch probe
    copies = max(2, n // 8)
    prompts = [
        REFERENCE_PROMPT if i % (n // copies) == 0 else BATCH_PROMPTS[i % len(BATCH_PROMPTS)]
        for i in range(n)
    ]
    reqs = [completion_req(p, probe.short_tokens) for p in prompts]
    if not all(srv.fits(r) for r in reqs):
        disagree("concurrency", "load")
        return
    plans = srv.run(reqs)
    for p, plan in zip(prompts, plans, strict=True):
        if p == REFERENCE_PROMPT and plan.tokens != alone.tokens and not parts_at_tie(alone, plan, probe):
            disagree("concurrency", "load")
            return


def expected_in(expected: str, text: str) -> bool:
    return re.search(r"(?<![\w])" + re.escape(expected) + r"(?![\w])", text, re.I) is not None


def replay_plan(
    replay: Mapping[str, Callable[[], Any]], probe: ProbeConfig
) -> tuple[list[tuple[str, Callable[[], Any]]], bool]:
    """The ladder's steps for this probe configuration (bringup.verify.probes.ladder_steps), each
    with the oracle's replay of it, and whether the user's probes (replayed together, by
    user_ladder) follow them."""
    names = ladder_steps(probe)
    missing = [n for n in names if n not in USER_STEPS and n not in replay]
    if missing:
        raise NotImplementedError(
            f"the scenario oracle does not replay probe {missing[0]!r} of the ladder: add its replay to "
            "bringup/oracle/trials.py (Oracle.outcome) and bringup/oracle/inprocess.py (_ProbeWalk)"
        )
    steps = [(n, replay[n]) for n in names if n not in USER_STEPS]
    return steps, any(n in USER_STEPS for n in names)


class _Walk:
    """ProbeRunner's ladder (bringup.verify.probes.ladder_steps) against the serving model: the
    phase and name of the first probe that disagrees. A disagreeing probe does not stop the ladder
    (only health would), as in ProbeRunner.run."""

    def __init__(self, srv: Serving, probe: ProbeConfig):
        self.srv, self.probe = srv, probe
        self.phase = "ready"
        self.failed: tuple[str | None, str] = (None, "")
        self.first = completion_req(REFERENCE_PROMPT, probe.short_tokens)
        self.ref: TokenPlan | None = None
        self.batch_ref: TokenPlan | None = None  # the batch's first answer (None: it did not fit)

    def disagree(self, name: str, at: str | None = None) -> None:
        if self.failed[0] is None:
            self.failed = (at or self.phase, name)

    def run(self) -> tuple[str | None, str]:
        replay = {
            "health": lambda: None,
            "completion": self.completion,
            "chat": self.chat,
            "known-answers": self.known_answers,
            "long-decode": self.long_decode,
            "batch": self.batch,
            "batch-invariance": self.batch_invariance,
        }
        steps, user = replay_plan(replay, self.probe)
        for _, step in steps:
            step()
        if user:
            user_ladder(self.srv, self.probe, self.ref, self.disagree)
        return self.failed

    def completion(self) -> None:
        """Streamed: the first request; from its first token on, the phase is decode."""
        self.phase = "first-request"
        if self.srv.fits(self.first):
            self.ref = self.srv.run([self.first])[0]
        else:
            self.disagree("completion")
        self.phase = "decode"

    def chat(self) -> None:
        chat = chat_req(CHAT_PROMPT, self.probe.short_tokens)
        if self.srv.fits(chat):
            self.srv.run([chat])
        else:
            self.disagree("chat")

    def known_answers(self) -> None:
        wrong = False
        for qa in self.probe.answers:
            req = chat_req(qa.prompt, KNOWN_ANSWER_TOKENS)
            if not self.srv.fits(req):
                wrong = True
                break
            wrong |= not expected_in(qa.expected, self.srv.run([req])[0].text)
        if wrong:
            self.disagree("known-answers")

    def long_decode(self) -> None:
        n, _ = long_decode_length(self.probe.long_tokens, self.srv.context_len)
        if n is None:
            return  # skipped, as the probe does
        long = completion_req(LONG_PROMPT, n, ignore_eos=True)
        if self.srv.fits(long):
            self.srv.run([long])
        else:
            self.disagree("long-decode")

    def batch(self) -> None:
        self.phase = "load"
        probe = self.probe
        prompts = [REFERENCE_PROMPT] + [
            BATCH_PROMPTS[i % len(BATCH_PROMPTS)] for i in range(probe.batch_size - 1)
        ]
        batch = [completion_req(p, probe.short_tokens) for p in prompts]
        if all(self.srv.fits(r) for r in batch):
            self.batch_ref = self.srv.run(batch)[0]
        else:
            self.disagree("batch")

    def batch_invariance(self) -> None:
        """Compared before its own request (as probe_batch_invariance does); not at all when the
        batch did not fit (the batch's disagreement is the first already)."""
        probe, ref, batch_ref = self.probe, self.ref, self.batch_ref
        if batch_ref is None:
            return
        if ref is None or (batch_ref.tokens != ref.tokens and not parts_at_tie(ref, batch_ref, probe)):
            self.disagree("batch-invariance")
        elif self.srv.run([self.first])[0].tokens != ref.tokens:
            self.disagree("batch-invariance")


@lru_cache(maxsize=8)
def _parser_for(engine: str, version: str) -> argparse.ArgumentParser:
    """The imitated engine's argparse, built once per engine version and process (parse_args
    does not change a parser; composed-fault benchmarks ask for thousands of launches)."""
    spec, text = help_for(engine, version)
    return build_parser(spec, engine, text)


@dataclass
class Oracle:
    """Answers launches of one scenario. `probe` is what the trial probes with (default: the
    scenario's known answers, batch 8, 256-token long decode, as `bringup run` does)."""

    scenario: Scenario
    probe: ProbeConfig | None = None
    screen_layers: int = 4
    env: Mapping[str, str] | None = None  # the environment a launch inherits (default: os.environ)
    hang_s: float = DEFAULT_HANG_S
    _cache: dict[str, OracleOutcome] = field(default_factory=dict, repr=False)
    _parser: argparse.ArgumentParser | None = field(default=None, repr=False)

    @classmethod
    def load(cls, path: str | Path, **kw) -> Oracle:
        return cls(load_scenario(path), **kw)

    def __post_init__(self) -> None:
        self.spec, self.help_text = help_for(self.scenario.engine, self.scenario.engine_version)
        if self.probe is None:
            self.probe = ProbeConfig(
                answers=[KnownAnswer(a.prompt, a.expected) for a in self.scenario.answers]
            )

    @property
    def model_flag(self) -> str:
        return "--model-path" if self.scenario.engine == "sglang" else "--model"

    def screen_flags(self) -> dict[str, FlagValue]:
        return screen_flags(self.scenario, self.screen_layers)

    def parse(self, argv: list[str]) -> Requested:
        """`parse_engine_argv` with its parser built once: building the parser from the help
        capture is most of a launch's cost here (~12 ms) and benchmarks ask for thousands. The
        rest mirrors parse_engine_argv line for line; tests/oracle/test_oracle.py checks both agree."""
        if "-h" in argv or "--help" in argv:  # prints the help and exits: the engine's own way
            return parse_engine_argv(argv, self.spec, self.scenario.engine, self.help_text)
        if self.scenario.engine == "vllm":
            argv = vllm_dashes(argv)
        if self._parser is None:
            self._parser = _parser_for(self.scenario.engine, self.scenario.engine_version)
        given = vars(self._parser.parse_args(argv))
        by_name = {o.name: o for o in self.spec.options}
        order: dict[str, int] = {}
        for i, tok in enumerate(argv):  # keep the order the flags were written in
            opt = (
                self.spec.resolve(tok.split("=", 1)[0])
                if tok.startswith("-") and not NUMBER.match(tok)
                else None
            )
            if opt is not None and opt.name not in order:
                order[opt.name] = i
        flags: dict[str, object] = {}
        for name in sorted((k for k in given if k in by_name), key=lambda k: order.get(k, 1 << 30)):
            v = given[name]
            flags[name] = list(v) if isinstance(v, list) else v
        return Requested(flags, {k: v for k, v in given.items() if k not in by_name})

    def candidate(self, cand: Candidate, screen: bool = False) -> OracleOutcome:
        return self.outcome(cand.flag_dict, screen=screen, env=cand.env_dict)

    def outcome(
        self, flags: Mapping[str, FlagValue], screen: bool = False, env: Mapping[str, str] | None = None
    ) -> OracleOutcome:
        """What launching these flags (canonical `--flag` names, as `parse_flags` gives them) would do.
        A screening launch adds the screen flags and skips the known-answer probe, as `bringup run`."""
        launch = dict(flags)
        if screen:
            launch.update(self.screen_flags())
        key = json.dumps(
            [sorted((k, str(v)) for k, v in launch.items()), sorted((env or {}).items()), screen]
        )
        if key not in self._cache:
            self._cache[key] = self._outcome(launch, screen, dict(env or {}))
        return self._cache[key]

    # -- the launch ---------------------------------------------------------------------------------
    def _outcome(self, flags: dict[str, FlagValue], screen: bool, extra_env: dict[str, str]) -> OracleOutcome:
        sc = self.scenario
        argv_flags = render_flags(flags)
        try:  # the trial's own check, before anything is launched
            parse_flags(argv_flags, self.spec)
        except FlagError as e:
            return OracleOutcome("fails", "parse-args", 0.0, launched=False, detail=str(e))
        argv = [self.model_flag, sc.model.name, "--host", HOST, "--port", str(PORT), *argv_flags]
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                req = self.parse(argv)
        except SystemExit:  # the engine's argparse rejects it: exit 2 before any log line
            return OracleOutcome("fails", "parse-args", 0.0, detail=err.getvalue().strip()[-300:])
        env = {**(os.environ if self.env is None else self.env), **extra_env}
        cfg = compute_config(sc, self.spec, req.flags, req.positionals, env)
        try:
            cfg.layer_override()
        except ValueError as e:  # a model override that is not JSON: the engine exits at once
            return OracleOutcome("fails", "parse-args", 0.0, detail=str(e))
        rule = decide(sc, cfg)
        label = rule.label if rule is not None else None
        action: Fail | Hang | None = (rule.fail or rule.hang) if rule is not None else None
        startup_action = action if action is not None and action.phase not in SERVING_PHASES else None
        strike = startup_action.phase if startup_action is not None else None
        if strike == "graph-capture" and not cfg.cuda_graphs:
            strike = "warmup"  # Startup._phase_of: the kernel first runs in the warm-up pass
        size = compute_sizing(sc, cfg)
        clock = Clock()
        for name, seconds in self._phases(cfg, size.layer_fraction):
            if name == strike or (strike == "parse-args" and name == "start"):
                if strike != "parse-args":
                    clock.t += seconds * FAIL_AT
                return self._struck(startup_action, strike, clock.t, label)
            clock.t += seconds
        assert self.probe is not None  # __post_init__ sets it
        probe = _engine_probe(self.probe if not screen else replace(self.probe, answers=[]), sc, flags)
        srv = Serving(sc, cfg, rule, clock, size.context_len)
        try:
            phase, probe_name = _Walk(srv, probe).run()
        except Death as d:
            assert srv.action is not None
            if d.hang:
                return OracleOutcome("timeout", srv.action.phase, d.at + self.hang_s, label)
            return OracleOutcome("fails", srv.action.phase, d.at, label)
        if phase is not None:
            return OracleOutcome(
                "wrong-output", phase, clock.t, label, detail=f"probe {probe_name} disagrees"
            )
        return OracleOutcome("works", None, clock.t, label)

    def _phases(self, cfg: ScenarioConfig, frac: float) -> list[tuple[str, float]]:
        """Start-up phases and their simulated seconds, in Startup.run's order (SGLang's warm-up
        comes after its HTTP server starts, vLLM's before: the clock is the same)."""
        t = self.scenario.timing
        load_s = t.load_weights
        if cfg.dummy_weights:
            load_s = t.load_weights_dummy if t.load_weights_dummy is not None else t.load_weights * 0.05
        out = [
            ("start", t.start),
            ("distributed-init", t.distributed_init),
            ("load-weights", load_s * frac),
            ("kv-alloc", t.kv_alloc * frac),
            ("kernel-warmup", t.kernel_warmup),
        ]
        if cfg.cuda_graphs:
            out.append(("graph-capture", t.graph_capture * frac))
        out.append(("warmup", t.warmup))
        return out

    def _struck(self, action: Fail | Hang | None, phase: str, at: float, label: str | None) -> OracleOutcome:
        if isinstance(action, Hang):
            return OracleOutcome("timeout", phase, at + self.hang_s, label)
        return OracleOutcome("fails", phase, at, label)
