"""What a failed launch says: which distinct failure it is, and which settings it names.

Two launches show the same failure when their class, phase and root line agree once the numbers,
paths and addresses in the line are taken out ("Tried to allocate 5.89 GiB" and "... 2.10 GiB"
are one out-of-memory). The settings a failure names are weighed by how directly it names them,
strongest first: the engine's printed remedy (a flag and its value beneath the traceback), the
root line itself (a flag's name, its dest, or a distinctive value of it), the package the
failing frames live in (rootcause.yaml's modules), the signature's own suspects, a change this
launch made when nothing else is named. Every factor keeps a small weight: a failure can lie in
what it does not name.
"""

from __future__ import annotations

import re
from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from bringup.core.datafiles import hang_implicates, phase_index, probe_implicates
from bringup.env.registry import class_draws_on_every_setting
from bringup.observe import links as lk
from bringup.observe.effective import config_dump, normalise
from bringup.observe.guards import guard_names
from bringup.observe.outcome import Outcome
from bringup.observe.remedies import advice_for_memory, prose, under_condition, usage_line
from bringup.observe.rootcause import RAISED_AT
from bringup.observe.tracebacks import logged_progress
from bringup.search.space import Factor

W_REMEDY = 3.0  # the engine printed this flag as the way out
W_CHECKLIST = 0.3  # one of several settings a line asks to check, with no value for any
W_LINE = 1.0  # the root line names the flag or its value
W_FRAMES = 0.8  # the failing code belongs to this level (its package, its module)
W_SIGNATURE = 0.6  # the signature's first suspect (the k-th gets 1/k)
W_CHANGED = 0.25  # changed by this launch, for a failure nothing else explains
W_ENV_NAMED = 1.0  # a variable the failure's lines name
W_ENV_RANKED = 0.08  # a variable whose name merely shares the failure's words
W_BASE_FLAG = 0.01
# A setting the user's baseline chose away from the engine's default, among the failure's suspects,
# ranks with the first of them: an engine's defaults run on every machine it supports, a choice
# brought from another box has run on none here (the mistakes of a bring-up are in its baseline).
W_USER_SET = 0.6
# The user's own variable for a component the failure's class implicates (NCCL_SOCKET_IFNAME=eth0
# for an NCCL failure), though no line names it: a variable is silent in logs, unlike a flag the
# engine prints with its configuration, and what the user set by hand for that component is the
# first thing an engineer undoes (NCCL's troubleshooting guide: a wrong NCCL_SOCKET_IFNAME fails
# the bootstrap; docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html). Every
# setting of the user's, flag or variable, for a class whose resource all settings draw on (an
# out-of-memory: relevance.yaml `shared`): an adapter pool, a draft model or a graph batch list eats
# the memory the engine's advice only says how to enlarge.
W_USER_COMPONENT = 0.3
W_BASE_ENV = 0.002
# What links a failure to a setting when no line spells its flag (bringup/observe/links.py): the
# value the launch gave, quoted back; the config object that holds it; the module its value
# selects, or the component it configures, in the failing frames. Likelihoods a person weighs the
# same way: a quoted value of theirs is near proof, a component word is a lead.
# The code that reads a setting's field (bringup/observe/fieldreaders.py): the failing function itself
# weighs less than the module a value selects (a function reads several fields); another function
# of the failing file, for the user's own setting, is a lead beside their other settings.
# A field the engine tested on its way to the raising line (bringup/observe/guards.py: the ``if``
# around an argument check) weighs more than the function's other reads, less than a quoted value.
W_LINK = {
    "value": 0.9,
    "field": W_LINE,
    "module": 0.8,
    "guard": 0.6,
    "reader": 0.5,
    "config": 0.35,
    "component": 0.35,
    "subject": 0.35,
    "reader-file": 0.2,
}
# A setting the engine chose by itself (not the launch's own) linked by its component: a lead for
# another level, weaker than the launch's own choice.
W_LINK_DEFAULT = 0.5
# When nothing names any setting, what the user changed from the engine's defaults is likelier
# than what they never touched: a person undoes their own settings first.
W_USER_PRIOR = 0.12
# A setting of the phase a crash that names nothing struck in (classes.yaml hang_implicates), the
# first of the list; the k-th gets 1/k. Below the user's own prior: on a real SGLang bring-up the
# phase's attention backend (the engine's own choice) at half a signature's weight turned the
# user's prior off and outweighed the user's --max-queued-requests 0 that refused the warmup.
W_PHASE = 0.1
OUTSIDE_PRIOR = 0.03
OUTSIDE_MACHINE = 0.6  # the failure implicates only the model or the machine
UNSET_DEFAULT = "<engine default>"  # the level of a factor left to the engine (Strategy.eff)
SERVING_RANK = 100  # wrong output ranks after every start-up phase
WORKS_RANK = 1000

_NUM = re.compile(r"0x[0-9a-f]+|\d+(\.\d+)?")
_PATH = re.compile(r"\S*/\S*")
# A log line's prefix: "(EngineCore_DP0 pid=1) ERROR 12-01 20:22:38 [core.py:946] ", "[2026-12-01 20:22:38 TP0] "
_PREFIX = re.compile(
    r"^(?:\([^)]*pid=\d+\)\s*|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\s+|\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+|"
    r"\[[^\]]*\] ?)+"
)
# Values too common in any failure's words to name a setting: "cuda" is in every CUDA error ("This
# may lead to incorrect model outputs or CUDA errors" named a user's --device cuda), the platforms' too.
_GENERIC = {
    "auto", "true", "false", "none", "default", "<engine default>", "1", "0", "disabled", "enabled",
    "cuda", "cpu", "gpu",
}  # fmt: skip
_ADVICE = re.compile(
    r"\b(try|please|use|set|change|choose|leave|disable|enable|consider|increase|decrease|reduce|lower|raise|pass|add)\b",
    re.I,
)
_SWITCH_VERB = re.compile(r"^(disable|enable|no|use|skip)_")
_QUOTED = re.compile(r"'([^'\s]{6,200})'|\"([^\"\s]{6,200})\"")
_NAMES_IN_LINE = re.compile(r"`[A-Za-z_][\w.-]*`|(?<![\w-])--[a-z][\w-]+")
_REMEDY_FLAG = re.compile(r"(--[a-z][\w-]*)(?:[= ]+)([\w.:/-]+)?")


def reach_of(outcome: Outcome) -> int:
    """How far a launch got: its failure's phase rank; serving failures later; works furthest."""
    if outcome.status == "works":
        return WORKS_RANK
    if outcome.status == "wrong-output":
        return SERVING_RANK + max(0, phase_index(outcome.phase or "decode"))
    return max(0, phase_index(outcome.phase or "spawn"))


def survived(reach: int) -> float:
    """The share of a bring-up's hazards a launch that got this far went through."""
    if reach >= WORKS_RANK:
        return 1.0
    if reach >= SERVING_RANK:
        return 0.9
    return 0.8 * max(0, reach) / _phase_count()


@lru_cache(maxsize=1)
def _phase_count() -> int:
    from bringup.core.datafiles import phases

    return max(1, len(phases()))


def root_line(outcome: Outcome) -> str:
    if outcome.root_exception:
        return outcome.root_exception
    return outcome.evidence[0] if outcome.evidence else ""


def normalised_line(line: str) -> str:
    text = _PREFIX.sub("", line.strip())
    text = _PATH.sub("<path>", text)
    text = _NUM.sub("#", text.lower())
    return re.sub(r"\s+", " ", text)[:160]


def blocker_key(outcome: Outcome) -> str:
    """The identity of a failure across launches (and of a lesson's failure across runs)."""
    if outcome.status == "wrong-output":
        failed = sorted(p.name for p in outcome.probes if not p.passed)
        return f"wrong-output|{','.join(failed)}"
    cls = outcome.failure_class or outcome.status
    if outcome.status == "timeout":
        return f"{cls}|{outcome.phase}|hang"
    return f"{cls}|{outcome.phase}|{normalised_line(root_line(outcome))}"


def raised_identity(outcome: Outcome) -> str | None:
    """A root exception is one failure whatever else its launch's log held: its type and message in
    the phase it struck, without where it was raised or the class read from it. Both depend on how
    much of the traceback reached the log before the server was stopped (real SGLang 0.5.16,
    tests/data/gpu/h100-2026-12-07c: one rmsnorm error read once from its line alone, `unknown`, and
    once with its frames, `bad-flag`; as two failures, the second launch's change took the blame
    for the first's). None for a failure with no root exception (its key is its identity)."""
    if outcome.status in ("wrong-output", "timeout") or not outcome.root_exception:
        return None
    return f"{outcome.phase}|{normalised_line(RAISED_AT.sub('', outcome.root_exception.strip()))}"


def raised_at(outcome: Outcome) -> str | None:
    """The root exception with where it was raised (type, message, function, file and line), or
    None where its traceback had not reached the log."""
    if raised_identity(outcome) is None:
        return None
    exc = (outcome.root_exception or "").strip()
    return f"{outcome.phase}|{normalised_line(exc)}" if RAISED_AT.search(exc) else None


@dataclass
class Named:
    """The settings a failure names, each with its weight, and the values its remedies advise."""

    weights: dict[str, float] = field(default_factory=dict)  # factor name -> weight
    advised: dict[str, list[str]] = field(default_factory=dict)  # flag -> values the log advises
    why: dict[str, str] = field(default_factory=dict)
    checklists: set[str] = field(default_factory=set)  # lines that list settings to check (no way out)
    # Named by nothing but a word of what they are about (a subject link): a lead to try, never
    # enough to overrule a signature that puts the cause in the model or the machine (vLLM CPU's
    # "Unsupported CPU attention configuration: head_dim=16 ... kv_cache_idx=0" has "cache", the
    # subject of the user's --gpu-memory-utilization; no flag serves that model)
    leads: set[str] = field(default_factory=set)

    def add(self, factor: str, w: float, why: str, lead: bool = False) -> None:
        if lead and factor not in self.weights:
            self.leads.add(factor)
        elif not lead:
            self.leads.discard(factor)
        if w > self.weights.get(factor, 0.0):
            self.why[factor] = why
        self.weights[factor] = self.weights.get(factor, 0.0) + w

    def strong(self, threshold: float, skip: Container[str] = ()) -> bool:
        """A setting other than ``skip`` named at ``threshold`` or more by more than a lead."""
        return any(w >= threshold for n, w in self.weights.items() if n not in skip and n not in self.leads)


def _words(line: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z][\w.-]{2,}", line)}


def remedies(lines: list[str]) -> list[tuple[str, str | None, str]]:
    """(flag, value or None, line) for each flag a line advises ("change to tc_piecewise by
    --cuda-graph-backend-prefill=tc_piecewise"; "Try increasing `gpu_memory_utilization`")."""
    out: list[tuple[str, str | None, str]] = []
    for line, conditional in zip(lines, under_condition(lines), strict=True):
        if conditional or not _ADVICE.search(prose(line)) or line.count("--") > 4 or usage_line(line):
            continue  # advice for another situation ("If this is intentional and you are using: ...")
        for m in _REMEDY_FLAG.finditer(line):
            value = m.group(2)
            out.append((m.group(1), value.rstrip(".,;") if value else None, line.strip()))
        for m in re.finditer(r"`([a-z][a-z0-9_]{3,})`", line):
            out.append(("--" + m.group(1).replace("_", "-"), None, line.strip()))
    return out


_FRAME = re.compile(r'^\s*File "|^\s{2,}\S|^Traceback|^\s*\^+\s*$')
_IN_FUNC = re.compile(r" in \w+ \([^)]*\)$")


def message_lines(outcome: Outcome) -> list[str]:
    """The lines that say what went wrong in words: the root exception's message (without the
    function and file it was raised in) and the evidence lines that are not traceback frames or
    the code they quote (frames name packages: rootcause.yaml's modules weigh those)."""
    out = []
    if outcome.root_exception:
        out.append(_IN_FUNC.sub("", outcome.root_exception))
    for ln in outcome.evidence:
        body = _PREFIX.sub("", ln.rstrip())
        # Without an exception (a hang, a stall, an exit with no traceback) the evidence is the
        # log's last lines: an INFO record there is progress ("Using max model len 32768"), which
        # echoes the launch's own values; read as the failure's words it named every setting it
        # echoed (a vLLM hang in NCCL start-up sent the search after --max-model-len).
        if not _FRAME.search(body) and (outcome.root_exception or not logged_progress(ln)):
            out.append(ln)
    return out


_NOT_VALUES = {"or", "and", "to", "the", "a", "an", "by", "if", "it", "with", "for", "instead", "before"}


def _as_level(f: Factor, value: str | None) -> str | None:
    """A value a remedy names, if it can be a level of the factor: one of its levels, a number for a
    number, a word for a free string; None for prose ("--attention-backend or ...")."""
    if value is None or value.lower() in _NOT_VALUES:
        return None
    if f.kind == "switch":
        return None
    if any(normalise(lv) == normalise(value) for lv in f.levels):
        return value
    if f.kind == "number":
        return value if re.fullmatch(r"-?\d+(\.\d+)?", value) else None
    return value if f.origin in ("baseline", "log") and not f.levels[1:] else None


def _outcome_remedies(outcome: Outcome) -> list[dict]:
    """The remedies the classifier read beneath a traceback (Outcome.remedies), when it has them:
    dicts or (flag, value[, line]) tuples."""
    out = []
    for r in getattr(outcome, "remedies", None) or []:
        if isinstance(r, dict):
            out.append(r)
        elif isinstance(r, (list, tuple)) and r:
            out.append(
                {"flag": r[0], "value": r[1] if len(r) > 1 else None, "line": r[2] if len(r) > 2 else ""}
            )
        elif hasattr(r, "flag"):
            out.append(
                {
                    "flag": r.flag,
                    "value": getattr(r, "value", None),
                    "line": getattr(r, "line", ""),
                    "conditional": getattr(r, "conditional", False),
                }
            )
    return [r for r in out if str(r.get("flag", "")).startswith("--")]


def named_in_line(line: str, f: Factor, level: str, aliases: tuple[str, ...] = ()) -> bool:
    """A line names a factor: its flag, its dest (with underscores or spaces), one of its short
    aliases in capitals ("decrease DP/TP/PP" names -tp), or a distinctive value of the level it had."""
    for a in aliases:
        word = a.lstrip("-")
        if len(word) >= 2 and (
            re.search(rf"(?<![\w-]){re.escape(a)}(?![\w-])", line)
            or re.search(rf"\b{re.escape(word.upper())}\b", line)
        ):
            return True
    low = line.lower()
    if f.is_env:
        return f.dest.lower() in low
    dest = f.dest.lower()
    if (
        f.name.lower() in low
        or dest + "=" in low
        or dest + ":" in low
        # a word of its own, not part of a compound ("device-side assert" names no --device), nor a
        # file or folder of a path: gloo's own "/gloo/transport/tcp/device.cc:84" named SGLang's
        # --device at full weight (real 0.5.16, tests/data/gpu/h100-2026-12-07f)
        or re.search(rf"(?<![\w/-]){re.escape(dest)}(?![\w-])", low)
    ):
        return True
    if len(dest) > 6 and dest.replace("_", " ") in low:
        return True
    # a switch is named by what it switches: --disable-custom-all-reduce by a line about
    # custom_all_reduce ("Cuda error /workspace/csrc/custom_all_reduce.cuh:164 'an illegal memory
    # access'", vllm #52457), --enable-symm-mem by one about symm_mem
    subject = _SWITCH_VERB.sub("", dest) if f.kind == "switch" else ""
    if len(subject) >= 8 and subject != dest and re.search(rf"(?<![a-z]){re.escape(subject)}(?![a-z])", low):
        return True
    lv = level.lower()
    # a value of three letters ("ray", "fp8") counts as a whole word; shorter ones and numbers never
    if lv in _GENERIC or len(lv) < 3 or re.fullmatch(r"[\d.e+-]+", lv):
        return False
    # a folder in a path is a source tree, not the failure naming the level: torch's own
    # "/pytorch/aten/src/ATen/native/cuda/MultinomialKernel.cu" names no `pytorch` sampler (which
    # package failed is the root-cause modules' frames, rootcause.yaml); a file named for the
    # level (".../token_dispatcher/deepep.py") is its code, and does name it
    if re.search(rf"(?<![\w-]){re.escape(lv)}(?![\w/-])", low):
        return True
    # a value the line quotes that is part of the level ("Invalid repository ID or local directory
    # specified: '/tmp/no-such-draft'" inside --speculative-config's JSON)
    return any((a or b) in lv for a, b in _QUOTED.findall(low))


def relevance(
    outcome: Outcome,
    factors: list[Factor],
    levels: Mapping[str, str],
    changed: set[str],
    resolve,
    aliases: Mapping[str, tuple[str, ...]] | None = None,
    settings: list[lk.Setting] | None = None,
    package: str | None = None,
    widths: Mapping[str, int] | None = None,
) -> Named:
    """Weigh the factors this failure names. ``levels``: each factor's effective level in the launch;
    ``changed``: factors it changed from the baseline; ``resolve``: flag name -> Factor or None;
    ``settings``: the launch's settings as the links read them (bringup/observe/links.py), with the
    engine's own ``package`` for its frames; ``widths``: the model's (links.model_widths)."""
    named = Named()
    plain = [
        ln
        for ln in message_lines(outcome)
        if sum(1 for f in factors if not f.is_env and f.dest + "=" in ln) <= 2 and not _own_note(ln)
    ]
    _remedy_weights(named, outcome, plain, resolve)
    lines = [ln for ln in plain[:6] if not any(c in ln for c in named.checklists)]
    for f in factors:
        lv = levels.get(f.name, "")
        if any(named_in_line(ln, f, lv, (aliases or {}).get(f.name, ())) for ln in lines):
            named.add(
                f.name, W_LINE if not f.is_env else W_ENV_NAMED, f"named by the failure: {plain[0][:160]}"
            )
    if outcome.failure_class == "missing-dependency":
        # memory and batch numbers are not the answer to a package that does not import
        for f in factors:
            if f.kind == "number":
                named.weights[f.name] = min(named.weights.get(f.name, 0.0), 0.0)
    _code_weights(named, outcome, levels, resolve)
    if settings:
        link_weights(named, outcome, settings, package, widths)
    if not named.weights:
        for n in changed:
            named.add(n, W_CHANGED, "changed by this launch, and nothing else is named")
    return named


def _own_note(line: str) -> bool:
    """bringup's own notes beside the evidence ("this launch asked for: ...", "torch-compile (raised
    inside it) is used by: --enable-torch-compile true"): what the classifier inferred, weighed where
    it was inferred (the failing code's levels, W_FRAMES), not the engine's words. Read as a line it
    named its settings again (W_LINE), and a flag spelled with "enable" read as advice (W_REMEDY)."""
    return line.startswith(("this launch asked for:", "notes:")) or " is used by: " in line


def failure_words(outcome: Outcome) -> list[str]:
    """The lines in which a failure says what went wrong: its message lines without the engine's
    dump of its whole configuration (which quotes every value, so it links none) and without
    bringup's own notes beside the evidence ("this launch asked for: ...")."""
    return [ln for ln in message_lines(outcome) if not config_dump(ln) and not _own_note(ln)]


def link_weights(
    named: Named,
    outcome: Outcome,
    settings: list[lk.Setting],
    package: str | None,
    widths: Mapping[str, int] | None = None,
) -> None:
    """What links the failure to a setting beyond its flag's name (bringup/observe/links.py)."""
    own = {s.name: s for s in settings}
    words = failure_words(outcome)
    # no traceback (a hang, a stall): where its last records were logged stands in for the frames
    places = lk.logged_places(outcome.evidence, package) if not outcome.frames else []
    # an out-of-memory is raised where memory is sized, and that code reads every setting that eats
    # memory: its readers name no more than the class does (each user setting is already a suspect,
    # W_USER_COMPONENT); read as links, the LoRA rank and target modules that sizing reads outranked
    # the switch that turned LoRA on, read in too many files to be linked (dev5)
    shared = class_draws_on_every_setting(outcome.failure_class or "")
    tested = guard_names(outcome.root_exception, package)
    for link in lk.links(words, list(outcome.frames or []), settings, package, places, tested, widths):
        if shared and link.kind in ("reader", "reader-file"):
            continue
        w = W_LINK.get(link.kind, 0.0)
        s = own.get(link.name)
        if s is not None and not s.user and not s.value and link.kind in ("component", "config", "guard"):
            w *= W_LINK_DEFAULT
        named.add(link.name, w, link.why, lead=link.kind in ("subject", "reader-file"))


def _remedy_weights(named: Named, outcome: Outcome, plain: list[str], resolve) -> None:
    """The engine's printed remedies (the classifier's, then any advising line's): strongest."""
    printed = [
        (r.get("flag", ""), r.get("value"), r.get("line", ""), bool(r.get("conditional")))
        for r in _outcome_remedies(outcome)
    ]
    own = [(*r, False) for r in remedies([*plain, *([outcome.hint] if outcome.hint else [])])]
    # a line that names several settings with no value for any ("Please ensure your
    # `model_name_or_path`, `repo_type`, `token` and `revision` arguments are correctly set") is a
    # checklist of what to look at, not the way out: each is named, none prescribed
    for flag, value, line, conditional in printed + own:
        f = resolve(flag)
        if f is None:
            continue
        if value is None and len(_NAMES_IN_LINE.findall(line)) >= 3:
            named.checklists.add(line)
            named.add(f.name, W_CHECKLIST, f"the log lists it among settings to check: {line[:160]}")
            continue
        if conditional and advice_for_memory(line) and not (outcome.failure_class or "").startswith("oom"):
            # advice for an out-of-memory under a failure that is not one ("3. if it is an OOM
            # problem, set --mem-fraction-static to a smaller value": SGLang's list under any CUDA
            # graph capture error, real 0.5.16 under a kernel's "failed to dispatch data type Float",
            # tests/data/gpu/h100-2026-12-07c): its condition does not hold, the flag is only listed
            named.add(
                f.name,
                W_CHECKLIST,
                f"the log advises it for an out-of-memory, which this is not: {line[:160]}",
            )
            continue
        if conditional:  # advice for another setup, or a checklist: the flag is named, not prescribed
            named.add(f.name, W_LINE, f"the log names it, not as the way out: {line[:160]}")
            continue
        named.add(f.name, W_REMEDY, f"the log advises it: {line[:160]}")
        value = _as_level(f, value)
        if value is not None:
            named.advised.setdefault(f.name, []).append(value)


def _code_weights(named: Named, outcome: Outcome, levels: Mapping[str, str], resolve) -> None:
    """The levels whose code failed (rootcause.yaml modules), then the signature's suspects."""
    for n, lvs in (outcome.implicated_levels or {}).items():
        f = resolve(n)
        if f is None:
            continue
        want, have = {normalise(x) for x in lvs}, levels.get(f.name)
        # a switch left off is its "false" level (--enforce-eager not given: the compiled path)
        if have in want or (f.kind == "switch" and have == UNSET_DEFAULT and "false" in want):
            named.add(f.name, W_FRAMES, "the failing code belongs to this level")
    generic = generic_suspects(outcome)
    for k, n in enumerate(outcome.implicates or []):
        f = resolve(n)
        if f is None:
            continue
        # the trial's list for every failure of this kind (the settings of the phase a hang stopped
        # in, of the path a wrong answer came from) names nothing of this one: weighed as before,
        # but as leads, beside which the user's own settings stay suspects (W_USER_PRIOR); read as
        # named, they had turned that prior off, and the user's --nnodes 2 or rotary-base override
        # waited behind every kernel and variable of the list (the composed-fault benchmark's dev6)
        why = (
            f"a setting of what {generic}"
            if generic
            else f"implicated by {outcome.signature or 'the failure class'}"
        )
        named.add(f.name, W_SIGNATURE / (k + 1), why, lead=generic is not None)


def generic_suspects(outcome: Outcome) -> str | None:
    """Where the failure's suspects came from when no signature read it: the settings of the phase
    it hung in (classes.yaml hang_implicates) or of the answers it got wrong (probe_implicates), the
    trial's list for every failure of that kind; None when they are the failure's own (a signature's,
    a probe only users' requests run)."""
    if outcome.signature or not outcome.implicates:
        return None
    have = list(outcome.implicates)
    if have == list(hang_implicates().get(outcome.phase or "", [])):
        return f"hangs in {outcome.phase}"
    if have == list(probe_implicates().get(outcome.failure_class or "", [])):
        return f"answers wrongly ({outcome.failure_class})"
    return None


# Classes whose cause is not a setting of the phase they struck in (a package, the model folder,
# the port, the machine), or whose suspects the trial already gave by phase (a hang, a stall).
_NOT_BY_PHASE = frozenset(
    {"missing-dependency", "model-load", "port-in-use", "gpu-memory-held", "bad-flag", "hang", "stall"}
)


def phase_weights(named: Named, outcome: Outcome, resolve) -> None:
    """A crash that names no setting (an assertion, a CUDA error, an unknown exception) and whose
    classifier implicates none: the settings of the phase it struck in are its suspects, as for a
    hang in that phase (classes.yaml hang_implicates: the graph settings in graph capture, the
    collectives in distributed start-up), as leads (W_PHASE): a person suspects their own settings
    first (W_USER_PRIOR), and a setting of theirs in the phase's list most (W_USER_SET)."""
    if (
        outcome.implicates
        or outcome.status == "timeout"
        or (outcome.failure_class or "") in _NOT_BY_PHASE
        or any(w >= W_LINK["module"] for w in named.weights.values())
    ):
        return
    for k, n in enumerate(hang_implicates().get(outcome.phase or "", [])):
        f = resolve(n)
        if f is not None:
            named.add(
                f.name, W_PHASE / (k + 1), f"a setting of the phase it failed in ({outcome.phase})", lead=True
            )


def machine_only(outcome: Outcome, named: Named) -> bool:
    """The failure implicates only properties of the model or the machine, no setting."""
    return (
        bool(outcome.implicates)
        and all(i.split(".")[0] in ("model", "gpu", "host") for i in outcome.implicates)
        and not named.strong(W_SIGNATURE / 3)
    )


def phase_words(outcome: Outcome) -> set[str]:
    return _words(root_line(outcome))
