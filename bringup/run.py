"""A bring-up run: search for the first validated configuration, explain it, report it.

The Run ties the pieces of DESIGN.md together: the target's --help and facts build the space
and the knowledge; the strategy proposes candidates; each is launched as a trial (screened with
dummy weights and fewer layers first where that is cheaper), recorded in the journal, and fed
back to the strategy. Once a configuration passes every probe, delta debugging finds the
smallest change from the baseline that fixes it, and the report says why everything else failed.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from bringup.candidate import Candidate, FlagError, parse_flags
from bringup.journal import Journal, TrialRecord
from bringup.knowledge import Knowledge, memory_model_for
from bringup.minimize import apply, ddmin
from bringup.outcome import Outcome
from bringup.probes import KnownAnswer, ProbeConfig
from bringup.space import Space, build_space
from bringup.strategy import Strategy
from bringup.targets import Target, resolve_target
from bringup.trial import Trial, TrialSettings

MIN_P_SUCCESS = 0.05  # below this, launching is a waste: say that nothing in the space works
KERNEL_CLASSES = {"unsupported-hardware", "device-assert", "nan-output", "incompatible-options",
                  "missing-dependency", "bad-flag", "wrong-output", "unknown"}


class RunError(ValueError):
    """Bad input for a run: what is wrong and what to do."""


class RunSettings(BaseModel):
    engine: str | None = None
    model: str | None = None
    scenario: str | None = None
    python: str | None = None
    time_scale: float = 0.01
    baseline: str = ""
    vary: list[str] = Field(default_factory=list)
    fix: dict[str, Any] = Field(default_factory=dict)
    space_file: str | None = None
    knowledge: bool = True
    screen: Literal["auto", "always", "never"] = "auto"
    screen_layers: int = 4
    max_launches: int = 12
    max_hours: float | None = None
    explain: bool = True
    max_explain_launches: int = 8
    retry_known: bool = False
    timeout: float = 1800.0
    hang_timeout: float = 600.0
    answers: list[tuple[str, str]] = Field(default_factory=list)
    batch: int = 8
    long_tokens: int = 256


class Attempt(BaseModel):
    number: int
    purpose: str  # search | screen | explain
    changes: str
    status: str
    failure_class: str | None = None
    phase: str | None = None
    evidence: str = ""
    wall_s: float = 0.0
    simulated_s: float | None = None
    p_success: float | None = None
    reasons: list[str] = Field(default_factory=list)
    trial_dir: str = ""
    overrides: list[dict] = Field(default_factory=list)
    hint: str | None = None
    signature: str | None = None


class RunResult(BaseModel):
    run_id: str
    run_dir: str
    status: str  # validated | no-working-config | budget | interrupted
    validated: bool
    launches: int
    screening_launches: int
    explain_launches: int
    simulated_hours: float | None
    wall_seconds: float
    final_command: str | None
    final_candidate: dict | None
    minimal_fix: list[str] = Field(default_factory=list)
    minimal_fix_str: str | None = None
    minimal_fix_verified: bool = False
    stop_reason: str = ""
    attempts: list[Attempt] = Field(default_factory=list)
    baseline: dict = Field(default_factory=dict)
    baseline_command: str = ""
    predictions: list[dict] = Field(default_factory=list)  # before any launch: plan and rule verdicts
    engine: str = ""
    engine_version: str | None = None
    model: str = ""
    facts: dict = Field(default_factory=dict)
    strategy_state: dict = Field(default_factory=dict)
    journal_priors: int = 0
    knowledge: bool = True
    final_probes: list[dict] = Field(default_factory=list)  # the probe ladder on the validated launch
    warnings: list[str] = Field(default_factory=list)  # non-fatal lines worth knowing, from that launch


def hardware_fingerprint(facts: dict, scenario: str | None) -> str:
    keys = ("device", "gpu.name", "gpu.count", "gpu.compute_capability", "gpu.memory_gib", "cpu.count")
    blob = json.dumps({k: facts.get(k) for k in keys}, sort_keys=True, default=str)
    h = hashlib.sha256(blob.encode()).hexdigest()[:10]
    return f"scenario:{scenario}:{h}" if scenario else f"hw:{h}"


def model_identity(target: Target) -> str:
    if target.is_scenario:
        return f"scenario-model:{target.model}"
    p = Path(target.model)
    cfg = p / "config.json"
    if cfg.is_file():
        h = hashlib.sha256(cfg.read_bytes()).hexdigest()[:10]
        size = sum(f.stat().st_size for f in p.glob("*.safetensors"))
        return f"{p.resolve()}#{h}:{size}"
    return target.model


def gather_facts(target: Target) -> tuple[dict, Any]:
    """Facts for knowledge rules: the scenario's, or doctor's and the model fingerprint's."""
    if target.is_scenario:
        facts = dict(target.scenario.facts())
        facts.setdefault("model.replicated_gib", getattr(target.scenario.model, "replicated_gib", None) or 0.0)
        return facts, None
    from bringup import hardware, modelinfo

    facts = dict(hardware.facts(hardware.snapshot()))
    fp = None
    if Path(target.model).is_dir():
        try:
            fp = modelinfo.fingerprint(target.model)
            facts.update(modelinfo.facts(fp))
        except (OSError, ValueError) as e:  # a model folder bringup cannot read is not fatal here
            facts["model.error"] = str(e)
    facts["engine.name"] = target.engine.log_dialect
    facts["engine.version"] = target.version
    return facts, fp


@dataclass
class Run:
    settings: RunSettings
    root: Path
    run_id: str | None = None  # given: resume this run
    on_event: Callable[[str, Any], None] | None = None
    target: Target = field(init=False)

    def _emit(self, kind: str, data: Any) -> None:
        if self.on_event:
            self.on_event(kind, data)

    # -- preparing ---------------------------------------------------------------------------------
    def prepare_offline(self) -> None:
        """Everything but the journal: for `bringup space`."""
        self._prepare(journal=False)

    def prepare(self) -> None:
        self._prepare(journal=True)

    def _prepare(self, journal: bool) -> None:
        s = self.settings
        self.target = resolve_target(engine=s.engine, model=s.model, scenario=Path(s.scenario) if s.scenario else None,
                                     python=s.python, time_scale=s.time_scale)
        t = self.target
        baseline = s.baseline
        if not baseline and t.is_scenario and getattr(t.scenario, "baseline", None):
            baseline = t.scenario.baseline  # the command a user of that scenario starts from
        try:
            flags = parse_flags(baseline, t.spec)
        except FlagError as e:
            raise RunError(f"--baseline: {e}; check the flag against the engine's --help "
                           f"({t.engine.log_dialect} {t.version})") from None
        for reserved in ("--port", "--host", t.engine.info.model_flag):
            if reserved in flags:
                raise RunError(f"--baseline must not set {reserved}: bringup sets the model and the port")
        self.baseline = Candidate.make(t.engine.log_dialect, t.model, flags, label="baseline")
        self.facts, self.fingerprint = gather_facts(t)
        self.hw_fp = hardware_fingerprint(self.facts, t.scenario.name if t.is_scenario else None)
        self.model_id = model_identity(t)
        self.journal = Journal(self.root / "journal.sqlite") if journal else None
        errors = self.journal.plan_errors(self.hw_fp, t.engine.log_dialect) if self.journal else []
        mem = memory_model_for(self.facts, t.engine.log_dialect, self.fingerprint, errors) if s.knowledge else None
        self.knowledge = Knowledge(self.facts, t.engine.log_dialect, t.version, enabled=s.knowledge, memory_model=mem)
        self.space: Space = build_space(t.engine.log_dialect, t.spec, self.baseline, vary=s.vary or None,
                                        fix=s.fix or None, space_file=Path(s.space_file) if s.space_file else None)
        self.strategy = Strategy(self.space, self.baseline, self.knowledge, t.spec)
        self.answers = [KnownAnswer(p, e) for p, e in s.answers] + list(t.answers)

    # -- launching -----------------------------------------------------------------------------
    def _screen_flags(self) -> dict[str, Any] | None:
        spec = self.target.spec
        if spec is None:
            return None
        lf = spec.get("--load-format")
        if lf is None or (lf.choices and "dummy" not in lf.choices):
            return None
        layers = json.dumps({"num_hidden_layers": self.settings.screen_layers})
        for flag in ("--json-model-override-args", "--hf-overrides"):
            if spec.get(flag) is not None:
                return {"--load-format": "dummy", flag: layers}
        return {"--load-format": "dummy"}

    def _weights_gib(self) -> float:
        w = self.facts.get("model.weights_gib")
        return float(w) if w else 0.0

    def _should_screen(self, p_success: float, cand: Candidate) -> bool:
        """Screening (dummy weights, fewer layers) finds kernel failures in a fraction of a full
        launch, but cannot judge memory: worth it for big models once a full launch has shown
        how memory behaves, and while the next candidate is a gamble."""
        mode = self.settings.screen
        if mode == "never" or self._screen_flags() is None:
            return False
        if mode == "always":
            return True
        full = [a for a in self.attempts if a.purpose == "search"]
        if any(a.failure_class == "wrong-output" for a in full):
            return False  # dummy weights cannot check known answers: a screen would pass blindly
        if self._only_numeric_changes(cand) and max((self._cost_s(a) for a in full), default=0.0) < 300:
            # Memory fractions and batch sizes: a screen (fewer layers, less memory) passes them
            # blindly and only catches a kernel failure the change did not cause; worth a launch
            # only where a full launch is long (the seeds' 400 GB model: 10 minutes and more).
            return False
        return self._weights_gib() >= 20 and bool(full) and p_success < 0.6

    def _cost_s(self, a: Attempt) -> float:
        """What a launch cost: the scenario's simulated seconds, or the real ones."""
        return (a.simulated_s or 0.0) if self.target.is_scenario else a.wall_s

    def _only_numeric_changes(self, cand: Candidate) -> bool:
        kinds = [f.kind if (f := self.space.get(c.flag)) is not None else "other" for c in cand.diff(self.baseline)]
        return bool(kinds) and all(k == "number" for k in kinds)

    def _trial(self, cand: Candidate, purpose: str, seq: int, screen: bool = False) -> tuple[Outcome, Path, float, float]:
        s = self.settings
        launch = cand.with_changes(self._screen_flags() or {}) if screen else cand
        probe = ProbeConfig(batch_size=s.batch, long_tokens=s.long_tokens,
                            answers=[] if screen else self.answers)
        tdir = self.run_dir / "trials" / f"{seq:02d}-{purpose}-{cand.key()[:8]}"
        n = 1
        while tdir.exists():  # a trial killed before it finished leaves its folder: keep it
            n += 1
            tdir = self.run_dir / "trials" / f"{seq:02d}-{purpose}-{cand.key()[:8]}-retry{n}"
        settings = TrialSettings(timeout=s.timeout, hang_timeout=s.hang_timeout, probe=probe)
        self._emit("launch", {"seq": seq, "purpose": purpose, "changes": cand.describe_diff(self.baseline),
                              "screen": screen})
        started = time.time()
        out = Trial(self.target.engine, launch, tdir, settings, spec=self.target.spec, version=self.target.version,
                    on_event=lambda k, t: self._emit("trial", (k, t))).run()
        ended = time.time()
        self._record_kv(out, tdir, seq)
        return out, tdir, started, ended

    def _record_kv(self, out: Outcome, tdir: Path, seq: int) -> None:
        """Compare the memory plan with what the engine reported; keep the error in the journal."""
        try:
            from bringup import memplan

            lines = (tdir / "server.log").read_text(errors="replace").splitlines()
            report = memplan.parse_kv_report(lines, self.target.engine.log_dialect)
            if not report:
                return
            out.kv_report = report
            (tdir / "outcome.json").write_text(out.model_dump_json(indent=2))
            plan = self._plan_for(out)
            if plan is None:
                return
            cmp = memplan.compare(plan, report)
            rel = cmp.get("kv_gib_rel_error") if isinstance(cmp, dict) else None
            self.journal.add_plan_error(self.hw_fp, self.target.engine.log_dialect, self.model_id, self.run_id, seq,
                                        plan.to_dict(), report, rel)
        except (OSError, ValueError, TypeError, KeyError):
            return

    def _plan_for(self, out: Outcome):
        from bringup import memplan

        f = self.facts
        frac = out.effective.get("mem_fraction_static") or out.effective.get("gpu_memory_utilization")
        if frac is None:
            return None
        if f.get("device") == "cpu" and self.target.engine.log_dialect == "vllm" and f.get("host.memory_gib"):
            try:  # the CPU build reserves a fraction of host memory
                return memplan.plan(gpu_mem_gib=float(f["host.memory_gib"]), mem_fraction=float(frac), engine="vllm",
                                    fp=self.fingerprint, device="cpu")
            except (ValueError, TypeError):
                return None
        if f.get("device") != "cuda" or not f.get("gpu.memory_gib"):
            return None
        tp = int(out.effective.get("tp_size") or out.effective.get("tensor_parallel_size") or 1)
        kw: dict[str, Any] = {"gpu_mem_gib": float(f["gpu.memory_gib"]), "tp": tp, "mem_fraction": float(frac),
                              "engine": self.target.engine.log_dialect, "gpus": f.get("gpu.count"),
                              "compute_capability": f.get("gpu.compute_capability")}
        if self.fingerprint is not None:
            kw["fp"] = self.fingerprint
        elif f.get("model.weights_gib"):
            rep = float(f.get("model.replicated_gib") or 0.0)
            kw["weights_gib"] = (float(f["model.weights_gib"]) - rep) / tp + rep
        else:
            return None
        try:
            return memplan.plan(**kw)
        except (ValueError, TypeError, ZeroDivisionError):
            return None

    # -- the run ---------------------------------------------------------------------------------
    def _new_run_id(self) -> str:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        name = Path(self.target.model).name or "model"
        base = f"{stamp}-{self.target.engine.log_dialect}-{name}"[:80]
        rid, n = base, 1
        while (self.root / "runs" / rid).exists():
            n += 1
            rid = f"{base}-{n}"
        return rid

    def execute(self) -> RunResult:
        self.prepare()
        t0 = time.time()
        if self.run_id is None:
            self.run_id = self._new_run_id()
            self.run_dir = self.root / "runs" / self.run_id
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.journal.create_run(self.run_id, self.target.engine.log_dialect, self.target.version, self.model_id,
                                    self.hw_fp, self.settings.model_dump(), self.run_dir)
            done: list[TrialRecord] = []
        else:
            row = self.journal.run(self.run_id)
            if row is None:
                raise RunError(f"no run {self.run_id} in {self.root / 'journal.sqlite'}")
            self.run_dir = Path(row["run_dir"])
            self.journal.set_status(self.run_id, "running")
            done = self.journal.trials(self.run_id)
        (self.run_dir / "run.json").write_text(json.dumps({"run_id": self.run_id, "settings": self.settings.model_dump()},
                                                          indent=2, default=str))
        self._emit("start", {"run_id": self.run_id, "run_dir": str(self.run_dir), "space": self.space,
                             "resumed": len(done)})
        # What other runs on this machine, engine version and model already know.
        priors = [] if self.settings.retry_known else self.journal.prior_trials(
            self.hw_fp, self.target.engine.log_dialect, self.target.version, self.model_id, self.run_id)
        known_good: list[Candidate] = []
        for rec in priors:
            if rec.purpose == "screen" and rec.outcome.status == "works":
                continue
            cand = rec.candidate
            if rec.outcome.status == "works":
                if all(c.key() != cand.key() for c in known_good):
                    known_good.append(cand)
                continue
            self.strategy.observe(cand, rec.outcome, source="journal")
        self.attempts: list[Attempt] = []
        screened_ok: set[str] = set()
        validated: Candidate | None = None
        seq = 0
        for rec in done:  # replay this run's own finished trials (resume)
            seq = max(seq, rec.seq)
            self.attempts.append(self._attempt(rec.seq, rec.purpose, rec.candidate, rec.outcome, Path(rec.trial_dir),
                                               rec.extra.get("wall_s", 0.0), rec.extra))
            if rec.purpose == "explain":
                continue
            if rec.purpose == "screen":
                if rec.outcome.status == "works":
                    screened_ok.add(self.strategy.predicted_key(rec.candidate))
                else:
                    self.strategy.observe(rec.candidate, rec.outcome, source="screen")
                continue
            self.strategy.observe(rec.candidate, rec.outcome)
            if rec.outcome.status == "works":
                validated = rec.candidate
        status, stop_reason = "budget", ""
        try:
            while validated is None:
                launches = sum(1 for a in self.attempts if a.purpose in ("search", "screen"))
                if launches >= self.settings.max_launches:
                    stop_reason = f"launch budget ({self.settings.max_launches}) spent"
                    break
                if self.settings.max_hours is not None and self._hours() >= self.settings.max_hours:
                    stop_reason = f"time budget ({self.settings.max_hours} h) spent"
                    break
                cand, p, reasons = self._next(known_good)
                if cand is None:
                    status = "no-working-config"
                    stop_reason = self.strategy.explain_stop()
                    break
                key = self.strategy.predicted_key(cand)
                if key not in screened_ok and self._should_screen(p, cand):
                    seq += 1
                    out, tdir, st, en = self._trial(cand, "screen", seq, screen=True)
                    self._log(seq, "screen", cand, out, tdir, st, en, {"p_success": p, "reasons": reasons})
                    if out.status != "works":
                        self.strategy.observe(cand, out, source="screen")
                        continue
                    screened_ok.add(key)
                    if launches + 1 >= self.settings.max_launches:
                        stop_reason = f"launch budget ({self.settings.max_launches}) spent"
                        break
                seq += 1
                out, tdir, st, en = self._trial(cand, "search", seq)
                self._log(seq, "search", cand, out, tdir, st, en, {"p_success": p, "reasons": reasons})
                self.strategy.observe(cand, out)
                if out.status == "works":
                    validated = cand
            minimal: list = []
            verified = False
            final = validated
            if validated is not None:
                status, stop_reason = "validated", "a configuration passed every probe"
                if self.settings.explain:
                    minimal, verified, seq, final = self._explain(validated, seq)
        except BaseException:
            self.journal.set_status(self.run_id, "interrupted")
            raise
        result = self._result(status, stop_reason, validated, final, minimal, verified, t0, len(priors))
        self.journal.finish_run(self.run_id, status, result.model_dump())
        from bringup.htmlreport import load_tunes, write_html
        from bringup.report import write_report

        write_report(result, self.run_dir)
        write_html(self.run_dir, result, load_tunes(self.run_dir))
        self._emit("done", result)
        return result

    def _next(self, known_good: list[Candidate]) -> tuple[Candidate | None, float, list[str]]:
        tried = {o.key for o in self.strategy.observations if o.source != "journal"}
        for cand in known_good:  # a configuration that worked here before: confirm it first
            if self.strategy.predicted_key(cand) not in tried:
                return cand, 0.95, ["validated before on this machine, engine version and model (journal)"]
        if self.strategy.outside >= 0.8:
            return None, 0.0, []  # the evidence points outside what the search can change
        prop = self.strategy.propose()
        if prop is None or prop.p_success < MIN_P_SUCCESS:
            return None, 0.0, []
        return prop.candidate, prop.p_success, prop.reasons

    def _hours(self) -> float:
        return sum(self._cost_s(a) for a in self.attempts) / 3600

    def _log(self, seq: int, purpose: str, cand: Candidate, out: Outcome, tdir: Path, started: float, ended: float,
             extra: dict) -> None:
        key = self.strategy.predicted_key(cand)
        self.journal.add_trial(self.run_id, seq, purpose, cand, key, out, tdir, started, ended, self.hw_fp,
                               self.model_id, {**extra, "wall_s": ended - started})
        a = self._attempt(seq, purpose, cand, out, tdir, ended - started, extra)
        self.attempts.append(a)
        self._emit("attempt", a)

    def _attempt(self, seq: int, purpose: str, cand: Candidate, out: Outcome, tdir: Path, wall: float,
                 extra: dict) -> Attempt:
        return Attempt(number=seq, purpose=purpose, changes=cand.describe_diff(self.baseline), status=out.status,
                       failure_class=out.failure_class, phase=out.phase, evidence=out.key_evidence()[:300],
                       wall_s=extra.get("wall_s", wall) or wall, simulated_s=out.timings.simulated,
                       p_success=extra.get("p_success"), reasons=extra.get("reasons", []), trial_dir=str(tdir),
                       overrides=[o.model_dump() for o in out.overrides], hint=out.hint, signature=out.signature)

    # -- explanation -------------------------------------------------------------------------------
    def _explain(self, working: Candidate, seq: int):
        """ddmin between the baseline and the working candidate; returns (minimal changes,
        verified, seq, final candidate)."""
        outcomes: dict[str, Outcome] = {o.key: o.outcome for o in self.strategy.observations}
        base_key = self.strategy.predicted_key(self.baseline)
        changes = working.diff(self.baseline)
        # A change the engine ignores (a frozen factor) cannot be part of the fix.
        effective = [c for c in changes if c.flag not in self.strategy.frozen]
        budget = self.settings.max_explain_launches
        launched = sum(1 for a in self.attempts if a.purpose == "explain")
        # On resume, earlier explain trials answer again from the journal.
        for rec in self.journal.trials(self.run_id, "explain"):
            outcomes.setdefault(self.strategy.predicted_key(rec.candidate), rec.outcome)
        state = {"seq": seq, "launched": launched}

        def works(subset) -> bool:
            cand = apply(self.baseline, subset)
            key = self.strategy.predicted_key(cand)
            if key == base_key and base_key not in outcomes:
                return False  # the baseline is what failed (or was predicted to)
            if key in outcomes:
                return outcomes[key].status == "works"
            if state["launched"] >= budget:
                raise _ExplainBudget
            state["seq"] += 1
            state["launched"] += 1
            out, tdir, st, en = self._trial(cand, "explain", state["seq"])
            self._log(state["seq"], "explain", cand, out, tdir, st, en, {})
            outcomes[key] = out
            return out.status == "works"

        if not effective:
            return [], False, seq, working
        try:
            minimal = ddmin(effective, works) if len(effective) > 1 else effective
            verified = True
        except _ExplainBudget:
            minimal, verified = effective, False
        final = apply(self.baseline, minimal)
        if outcomes.get(self.strategy.predicted_key(final), None) is None or \
                outcomes[self.strategy.predicted_key(final)].status != "works":
            final = working
        return minimal, verified, state["seq"], final

    def _result(self, status: str, stop_reason: str, validated: Candidate | None, final: Candidate | None,
                minimal: list, verified: bool, t0: float, priors: int) -> RunResult:
        eng = self.target.engine
        search = [a for a in self.attempts if a.purpose in ("search", "screen")]
        sim = [a.simulated_s for a in self.attempts if a.purpose in ("search", "screen")]
        sim_hours = (sum(x or 0.0 for x in sim) / 3600) if self.target.is_scenario else None
        probes, warnings = [], []
        ok = [a for a in self.attempts if a.purpose == "search" and a.status == "works"]
        if ok:
            try:
                o = Outcome.model_validate_json((Path(ok[-1].trial_dir) / "outcome.json").read_text())
                probes, warnings = [p.model_dump() for p in o.probes], o.warnings
            except (OSError, ValueError):
                pass
        return RunResult(
            final_probes=probes, warnings=warnings,
            run_id=self.run_id, run_dir=str(self.run_dir), status=status, validated=validated is not None,
            launches=len(search), screening_launches=sum(1 for a in search if a.purpose == "screen"),
            explain_launches=sum(1 for a in self.attempts if a.purpose == "explain"),
            simulated_hours=sim_hours, wall_seconds=time.time() - t0,
            final_command=final.shell_command(eng.command_prefix(final)) if final else None,
            final_candidate=final.to_json() if final else None,
            minimal_fix=[c.describe() for c in minimal],
            minimal_fix_str=" ".join(_fix_tokens(minimal)) if minimal else None,
            minimal_fix_verified=verified, stop_reason=stop_reason, attempts=self.attempts,
            baseline=self.baseline.to_json(), baseline_command=self.baseline.shell_command(eng.command_prefix(self.baseline)),
            predictions=self.predictions(), engine=eng.log_dialect, engine_version=self.target.version,
            model=self.target.model, facts={k: v for k, v in self.facts.items() if not isinstance(v, (dict, list))},
            strategy_state=self.strategy.state(), journal_priors=priors, knowledge=self.settings.knowledge,
        )

    def predictions(self) -> list[dict]:
        """What knowledge said about the baseline's own levels before any launch."""
        out = []
        for f in self.space.factors:
            level = f.level_in(self.baseline.flag_dict, self.baseline.env_dict)
            for v in self.strategy.verdicts(f, level):
                out.append({"flag": f.name, "level": f.describe_level(level), **v.to_json()})
        return out


class _ExplainBudget(Exception):
    pass


def _fix_tokens(changes: list) -> list[str]:
    toks: list[str] = []
    for c in changes:
        if c.flag.startswith("env:"):
            toks.append(f"{c.flag[4:]}={c.after}" if c.after is not None else f"(unset {c.flag[4:]})")
        elif c.after is None:
            toks.append(f"(drop {c.flag})")
        elif c.after is True:
            toks.append(c.flag)
        else:
            toks += [c.flag, str(c.after)]
    return toks
