"""Human-readable summaries for `python -m bringup.scenario check`."""

from __future__ import annotations

import re

from bringup.core.candidate import format_value
from bringup.scenario.config import ScenarioConfig
from bringup.scenario.schema import Scenario, ScenarioRule

_ERROR_LINES = (re.compile(r"\b\w*(Error|Exception)\b:"), re.compile(r"Assertion|assert|Unsupported"))


def _headline(lines: list[str]) -> str:
    """The line a reader wants: the error itself, not the traceback header."""
    for rx in _ERROR_LINES:
        for line in lines:
            m = rx.search(line)
            if m and "Traceback" not in line:
                return line[m.start() :].strip()[:110]
    return lines[0].strip()[:110]


def _action(rule: ScenarioRule | None) -> str:
    if rule is None:
        return "serve ok (no rule matched)"
    if rule.fail:
        extra = f" after {rule.fail.after_tokens} tokens" if rule.fail.after_tokens is not None else ""
        return f"fail in {rule.fail.phase}{extra}: {_headline(rule.fail.lines)}"
    if rule.hang:
        return f"hang in {rule.hang.phase}"
    assert rule.serve is not None
    return f"serve {rule.serve.mode}"


def describe(sc: Scenario) -> str:
    hw, m, t = sc.hardware, sc.model, sc.timing
    out = [
        f"scenario {sc.name}: {sc.description.strip().splitlines()[0] if sc.description.strip() else ''}",
        f"  engine   {sc.engine} {sc.engine_version}",
        f"  hardware {hw.count} x {hw.gpu} (sm {hw.compute_capability}, {hw.memory_gib} GiB"
        f"{', ' + hw.link if hw.link else ''})",
        f"  model    {m.name} ({m.architecture}, {m.attention}{', moe' if m.moe else ''}, "
        f"{m.quantization or 'unquantized'}, {m.weights_gib} GiB, {m.layers} layers)",
        f"  timing   start {t.start}s, load {t.load_weights}s (dummy "
        f"{t.load_weights_dummy if t.load_weights_dummy is not None else t.load_weights * 0.05}s), kv {t.kv_alloc}s, "
        f"graphs {t.graph_capture}s, warmup {t.warmup}s, {t.per_output_token}s/token"
        f"{f', distributed init {t.distributed_init}s' if t.distributed_init else ''}"
        f"{f', kernel warm-up {t.kernel_warmup}s' if t.kernel_warmup else ''}",
        f"  {len(sc.defaults)} defaults, {len(sc.force)} forced, {len(sc.warnings)} warnings, "
        f"{len(sc.rules)} rules, {len(sc.answers)} known answers",
    ]
    for i, r in enumerate(sc.rules):
        out.append(f"  rule {i} {r.label}: when {r.condition.describe()} -> {_action(r)}")
    other = sc.otherwise
    if other is None:
        out.append("  otherwise: serve ok (not stated)")
    else:
        for f in other.factors:
            act = _action(ScenarioRule(fail=f.fail, hang=f.hang, serve=f.serve))
            out.append(f"  otherwise {f.flag} not in {f.levels} -> {act}")
        default = other.default if isinstance(other.default, ScenarioRule) else None
        out.append(f"  otherwise -> {_action(default) if default is not None else 'serve ok'}")
    return "\n".join(out) + "\n"


def describe_launch(sc: Scenario, cfg: ScenarioConfig, rule: ScenarioRule | None) -> str:
    out = ["launch:"]
    for flag, v in cfg.requested.items():
        out.append(f"  requested {flag} {format_value(v)}")
    for flag, v in cfg.defaulted.items():
        out.append(f"  default   {flag} {format_value(v)}")
    for flag, (before, after) in cfg.forced.items():
        out.append(f"  forced    {flag} {format_value(before)} -> {format_value(after)}")
    out.append(f"  decision  {_action(rule)}{f' ({rule.label})' if rule is not None else ''}")
    return "\n".join(out) + "\n"
