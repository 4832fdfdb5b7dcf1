"""The laws of the machine: what a composed case refuses whatever its atoms say.

A base scenario serves everything no atom names (docs/composed-faults.md), which rewards a search
for moves no real machine allows. These laws put back what the engines' own checks and the GPU's
memory refuse, as scenario rules the composer adds to every case (each at its phase, after the
atoms of that phase, so an atom's own lines win where both apply):

- ``gpus_rules``: a tensor x pipeline parallel split wider than the machine's GPUs fails as the
  engine fails (vLLM's ParallelConfig check, SGLang's missing device; bases.yaml ``gpus_short``).
- ``weights_rule``: weights that do not fit on the GPUs they are split over fail to load
  (bases.yaml ``weights_oom``; sizes from scenario/sizing.py).
- ``kv_rules``: the KV cache. The budget the engine sets aside for it is the memory plan's own
  arithmetic (bringup/facts/memplan.py ``plan``: SGLang's ``total x fraction - weights``, vLLM's
  ``device x utilization - weights - activations - communication``); a budget of nothing fails with
  the engine's "no memory for the cache" lines, and on vLLM a budget that holds less than one
  request of the context length fails with its "to serve at least one request" lines (bases.yaml
  ``kv_oom``). One request's need is the double's own per-token size (scenario/sizing.py), so the
  message agrees with what the double prints.
- ``selector_rules``: an attention backend the engine's selector refuses on this machine and model
  (a compute capability, a KV-cache dtype, MLA or not): the conditions are the knowledge rules'
  ``incompatible`` verdicts (bringup/data/rules.yaml, each with its source), read, not copied; the
  lines are the engine's own refusal (bases.yaml ``backend_refusals``, one entry per rule id). A
  flag an atom of the case touches is left to that atom.

The rules are scenario conditions on flags (docs/scenarios.md). A threshold that depends on two
settings (the fraction and the context length) is written as one any-of entry per tensor-parallel
size, KV dtype and band of context lengths, each refusing only what fails at the band's lower end:
the law never refuses a launch that fits, and may let one through near a band's edge.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from bringup.core.datafiles import KnowledgeFileError, load_yaml
from bringup.oracle.faults.atoms import BASES_FILE, FAULTS, base_facts, weights_oom_lines

SPLITS = (1, 2, 4, 8, 16)  # tensor x pipeline parallel sizes a launch may ask for
CONTEXT_STEP = 2  # the ratio between the context-length bands of the KV law
CONTEXT_FLOOR = 1024  # the shortest context length the KV law looks at


# -- data ----------------------------------------------------------------------------------------
@lru_cache(maxsize=4)
def _section(key: str, root: Path = FAULTS) -> dict[str, Any]:
    path = root / BASES_FILE
    doc = load_yaml(path) or {}
    sec = doc.get(key) or {}
    if not isinstance(sec, dict):
        raise KnowledgeFileError(f"{path}: {key}: expected a mapping by engine")
    for engine, entry in sec.items():
        for name, item in (entry or {}).items():
            if isinstance(item, dict) and "lines" in item and not item.get("source"):
                raise KnowledgeFileError(f"{path}: {key}.{engine}.{name}: give its source")
    return sec


def _flag(spec, name: str) -> str | None:
    """A scenario condition key (no dashes) for a flag this engine version has, else None."""
    opt = spec.resolve(name if name.startswith("-") else f"--{name}")
    return opt.name.lstrip("-") if opt is not None else None


def _parallel(base: dict[str, Any]) -> tuple[str, str] | None:
    from bringup.engines.base import engine_info

    product = engine_info(base["engine"]).gpus.product  # tensor, pipeline, data parallel (engines.yaml)
    return (product[0].lstrip("-"), product[1].lstrip("-")) if len(product) >= 2 else None


# -- the GPUs ------------------------------------------------------------------------------------
def gpus_rules(base: dict[str, Any]) -> list[dict[str, Any]]:
    """A tensor x pipeline parallel split wider than the machine's GPUs fails as the engine fails
    (bases.yaml ``gpus_short``): one rule per world size, since the engine's message gives it."""
    law = _section("gpus_short").get(base["engine"])
    par = _parallel(base)
    if not law or par is None:
        return []
    tp, pp = par
    gpus = int(base["hardware"].get("count", 1))
    by_world: dict[int, list[dict[str, Any]]] = {}
    for t in SPLITS:
        for p in SPLITS:
            if t * p > gpus:
                entry = {tp: [1, None] if t == 1 else t, pp: [1, None] if p == 1 else p}
                by_world.setdefault(t * p, []).append(entry)
    return [
        {
            "id": f"gpus-short:{world}",
            "why": f"a world of {world} GPUs on a machine of {gpus} (bases.yaml gpus_short)",
            "when": when,
            "fail": {
                "phase": law["phase"],
                "lines": [
                    ln.replace("{world}", str(world)).replace("{gpus}", str(gpus)) for ln in law["lines"]
                ],
            },
        }
        for world, when in sorted(by_world.items())
    ]


# -- weights -------------------------------------------------------------------------------------
def weights_rule(base: dict[str, Any]) -> dict[str, Any] | None:
    """The base's weights fail to load where they do not fit on the GPUs they are split over: a
    CUDA OOM at load-weights for each tensor-parallel size below the one that fits (pipeline
    parallel 1; a pipeline split is taken to fit, a kindness the doc names). None: the weights fit
    on one GPU, or bases.yaml gives no lines for this engine."""
    from bringup.scenario.sizing import free_before_weights, weights_per_gpu

    lines = weights_oom_lines(base["engine"])
    m, hw = base["model"], base["hardware"]
    room = free_before_weights(float(hw["memory_gib"]))
    w, rep = float(m["weights_gib"]), float(m.get("replicated_gib") or 0.0)
    small = [n for n in SPLITS if weights_per_gpu(w, rep, n) > room]
    par = _parallel(base)
    if not small or not lines or par is None:
        return None
    tp, pp = par
    total = f"{float(hw['memory_gib']):.2f}"
    return {
        "id": "weights-do-not-fit",
        "why": f"{w:g} GiB of weights over {small[-1]} GPU(s) of {hw['memory_gib']} GiB (bases.yaml weights_oom)",
        "when": {tp: [*small, None], pp: [1, None]},
        "fail": {"phase": "load-weights", "lines": [ln.replace("{total_gib}", total) for ln in lines]},
    }


# -- the KV cache --------------------------------------------------------------------------------
def _fits_weights(base: dict[str, Any]) -> list[int]:
    """The tensor-parallel sizes this machine has GPUs for and whose weights fit (the others fail
    before the KV cache is sized, or ask for GPUs that are not there)."""
    from bringup.scenario.sizing import free_before_weights, weights_per_gpu

    m, hw = base["model"], base["hardware"]
    room = free_before_weights(float(hw["memory_gib"]))
    w, rep = float(m["weights_gib"]), float(m.get("replicated_gib") or 0.0)
    gpus = int(hw.get("count", 1))
    return [n for n in SPLITS if n <= gpus and weights_per_gpu(w, rep, n) <= room]


def kv_budget_line(base: dict[str, Any], tp: int) -> tuple[float, float]:
    """(GiB of KV budget at fraction 0, GiB more per unit of fraction) on one GPU at this
    tensor-parallel size: the memory plan's arithmetic (memplan.plan, weights as the double loads
    them, CUDA graphs left out: a kindness, graph memory is the graph-capture law's). The budget
    is linear in the fraction, so two plans give it."""
    from bringup.facts import memplan
    from bringup.scenario.sizing import weights_per_gpu

    m, hw = base["model"], base["hardware"]
    w = weights_per_gpu(float(m["weights_gib"]), float(m.get("replicated_gib") or 0.0), tp)

    def budget(frac: float) -> float:
        p = memplan.plan(
            gpu_mem_gib=float(hw["memory_gib"]),
            tp=tp,
            mem_fraction=frac,
            engine=base["engine"],
            weights_gib=w,
            disable_cuda_graph=True,
        )
        return p.kv_budget_gib

    hi, lo = budget(1.0), budget(0.5)
    slope = (hi - lo) / 0.5
    return hi - slope, slope


def _threshold(base: dict[str, Any], tp: int, need_gib: float) -> float | None:
    """The fraction under which the budget holds less than ``need_gib``; None: every fraction
    holds it (nothing to refuse)."""
    at0, slope = kv_budget_line(base, tp)
    f = (need_gib - at0) / slope
    return round(f, 4) if f > 0 else None


def _kv_classes(base: dict[str, Any], spec, key: str | None, tp: int) -> list[tuple[list[Any], int]]:
    """The KV-cache dtypes this engine version offers, grouped by the bytes a token takes at this
    tensor-parallel size (scenario/sizing.py), the unset value with the model's own dtype."""
    from bringup.scenario.sizing import kv_bytes_per_token

    opt = spec.resolve(f"--{key}") if key else None
    choices = [None, *(opt.choices or [])] if opt is not None else [None]
    groups: dict[int, list[Any]] = {}
    for c in choices:
        groups.setdefault(kv_bytes_per_token(base["model"], tp, c or "auto"), []).append(c)
    return [(levels, bpt) for bpt, levels in sorted(groups.items())]


def _bands(top: int) -> list[tuple[int, int | None]]:
    """Context-length bands (lower end, upper end) up to the model's own length: lengths in
    (lower, upper] are refused only where the lower end does not fit."""
    edges: list[int] = []
    x = float(CONTEXT_FLOOR)
    while x < top:
        edges.append(int(x))
        x *= CONTEXT_STEP
    return [(lo, hi) for lo, hi in zip(edges, [*edges[1:], None], strict=True)]


def _kv_when(base: dict[str, Any], spec, law: dict[str, Any], by_context: bool) -> list[dict[str, Any]]:
    """The any-of entries of one KV law: per tensor-parallel size whose weights fit, the fractions
    that leave no budget (``by_context`` False) or less than one request at the context length."""
    par = _parallel(base)
    frac = _flag(spec, law["fraction"])
    if par is None or frac is None:
        return []
    tp_key, pp_key = par
    ctx_key = _flag(spec, law["context"]) if law.get("context") else None
    kv_key = _flag(spec, law["kv_dtype"]) if law.get("kv_dtype") else None
    keep = {k: v for k, v in (law.get("unless_set") or {}).items() if _flag(spec, k)}
    out: list[dict[str, Any]] = []
    model_len = int(base["model"].get("context_length") or 131072)
    baseline_len = _baseline_context(base, spec, ctx_key)
    for tp in _fits_weights(base):
        common = {tp_key: [tp, None] if tp == 1 else tp, pp_key: [1, None], **{k: None for k in keep}}
        if not by_context:
            f = _threshold(base, tp, 0.0)
            if f is not None:
                out.append({**common, frac: {"le": f}})
            continue
        if ctx_key is None:
            continue
        for levels, bpt in _kv_classes(base, spec, kv_key, tp):
            dtype = {kv_key: levels} if kv_key else {}
            points: list[tuple[Any, int]] = [(None, model_len)]
            if baseline_len is not None:
                points.append((baseline_len, baseline_len))
            points += [({"gt": lo, **({"le": hi} if hi else {})}, lo) for lo, hi in _bands(model_len)]
            for test, length in points:
                f = _threshold(base, tp, length * bpt / (1 << 30))
                if f is not None:
                    out.append({**common, **dtype, ctx_key: test, frac: {"lt": f}})
    return out


def _baseline_context(base: dict[str, Any], spec, ctx_key: str | None) -> int | None:
    from bringup.core.candidate import parse_flags

    if ctx_key is None:
        return None
    v = parse_flags(base.get("baseline") or "", spec).get(f"--{ctx_key}")
    try:
        return int(str(v))
    except (TypeError, ValueError):
        return None


def kv_rules(base: dict[str, Any], spec) -> list[dict[str, Any]]:
    """The KV-cache laws of this base (bases.yaml ``kv_oom``): no budget at all, then (where the
    engine checks it at start) less than one request of the context length."""
    law = _section("kv_oom").get(base["engine"])
    if not law:
        return []
    out = []
    for name, by_context in (("no_blocks", False), ("one_request", True)):
        entry = law.get(name)
        if not entry:
            continue
        when = _kv_when(base, spec, law, by_context)
        if when:
            out.append(
                {
                    "id": f"kv-cache-{name.replace('_', '-')}",
                    "why": f"bases.yaml kv_oom.{base['engine']}.{name} (budget: bringup/facts/memplan.py)",
                    "when": when,
                    "fail": {"phase": "kv-alloc", "lines": list(entry["lines"])},
                }
            )
    return out


# -- the attention selector -----------------------------------------------------------------------
def selector_rules(base: dict[str, Any], spec, touched: set[str]) -> list[dict[str, Any]]:
    """A rule per knowledge rule that calls a backend incompatible with this base's facts and has
    the engine's refusal lines (bases.yaml ``backend_refusals``); flags in ``touched`` (what the
    case's atoms inject or fix) are the atoms' own."""
    from bringup.knowledge.rules import Knowledge

    refusals = _section("backend_refusals").get(base["engine"]) or {}
    if not refusals:
        return []
    know = Knowledge(base_facts(base), base["engine"], str(base["engine_version"]))
    out = []
    for r in know.rules:
        entry = refusals.get(r.rule.id)
        if entry is None or r.rule.verdict != "incompatible":
            continue
        when = _selector_when(r.rule, spec, touched)
        if when:
            lines = [ln.replace("{reason}", entry.get("reason", "")) for ln in entry["lines"]]
            out.append(
                {
                    "id": f"backend-refused:{r.rule.id}",
                    "why": f"bringup/data/rules.yaml {r.rule.id} ({r.rule.source})",
                    "when": when,
                    "fail": {"phase": entry["phase"], "lines": lines},
                }
            )
    return out


def _selector_when(rule, spec, touched: set[str]) -> list[dict[str, Any]]:
    alts = rule.with_ if isinstance(rule.with_, list) else [rule.with_ or {}]
    withs: list[dict[str, Any]] = []
    for alt in alts:
        keys = {k: _flag(spec, k) for k in alt}
        names = [n for n in keys.values() if n is not None]
        if len(names) < len(keys) or any(f"--{n}" in touched for n in names):
            continue  # a flag this version lacks, or one an atom of the case owns
        withs.append({str(keys[k]): v for k, v in alt.items()})
    out = []
    for name in rule.flags:
        key = _flag(spec, name)
        if key is None or f"--{key}" in touched:
            continue
        out += [
            {key: list(rule.levels) if rule.levels is not None else {"present": True}, **w} for w in withs
        ]
    return out
