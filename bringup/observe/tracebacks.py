"""Python tracebacks in a server log, found without knowing the engine.

Engines print the same Python tracebacks behind different decorations: vLLM prefixes every
line with ``(EngineCore_DP0 pid=45) ERROR 11-30 12:00:00 [core.py:123]``, SGLang with
``[2026-11-30 12:00:00 TP3]``, plain stderr with nothing. Several processes write into one log
at once, each with its own traceback, and the last lines are wrappers ("EngineCore failed to
start", "See root cause above"). This module strips the decorations (keeping the original line
for the evidence), groups lines by process, parses each traceback and exception chain, and
names the root cause: the deepest (original) exception of the first process that failed.
Wrappers and re-raises never outrank it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_ERRORISH = re.compile(r"(Error|Exception|error:|FAILED|Traceback|Assertion|assert|fatal|Killed)", re.I)


def errorish(line: str) -> bool:
    """A line that reads as an error: what an unknown failure keeps as evidence, and where a native
    source location is looked for (rootcause.native_where)."""
    return bool(_ERRORISH.search(line))


# Log decorations at the start of a line, stripped one after another. A named group ``tag``
# names the process the line came from.
_PREFIXES: tuple[re.Pattern[str], ...] = (
    # vLLM / Ray process tags: "(APIServer pid=123) ", "(RayWorkerWrapper pid=9, ip=10.0.0.1) "
    re.compile(r"^\((?P<tag>[^()]*?\bpid=\d+[^()]*)\) ?"),
    # vLLM's logger: "INFO 11-30 12:00:00 [core.py:123] " (older: "ERROR 01-28 03:21:01 engine.py:387] ")
    re.compile(
        r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) +\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? +"
        r"(?P<where>\[?[\w./<>-]+:\d+\]) ?"
    ),
    # SGLang: "[2026-11-30 12:00:00 TP3] ", "[2026-11-30 12:00:00 DP0 TP3 EP3] ", "[2026-11-30 12:00:00] "
    re.compile(r"^\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?: (?P<tag>(?:[A-Z]+\d+ ?)+))?\] ?"),
    # torch.distributed's rank prefix: "[rank0]: "
    re.compile(r"^\[(?P<tag>rank\d+)\]: ?"),
    # A bare rank tag: "[TP0] ", "[DP1 TP3] "
    re.compile(r"^\[(?P<tag>(?:[A-Z]+\d+ ?)+)\] ?"),
    # PyTorch's C++ logger: "[W1130 19:31:48.363771280 utils.cpp:68] "
    re.compile(r"^\[[WEIF]\d{4} \d\d:\d\d:\d\d\.\d+ [\w.]+:\d+\] ?"),
    # ISO timestamps, with an optional level: "2026-11-30 12:00:00,123 - ERROR - ", "2026-11-30T12:00:00Z "
    re.compile(
        r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
        r"(?: *[-|]? *(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\b)?(?: *[-|:] *| +)"
    ),
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # vLLM colours its process tags on a terminal
_GROUP_BOX = re.compile(r"^(?:\s*\|(?= ))+ ?|^\s*\+[-+]*(?:-+ \d+ -+|-+)?\s*$|^  \+ (?=Exception Group)")
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):\s*$")
_CHAIN = re.compile(
    r"^(The above exception was the direct cause of the following exception:|"
    r"During handling of the above exception, another exception occurred:)\s*$"
)
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S.*?)\s*$')
_CARET = re.compile(r"^\s*[\^~]+\s*$")
# "torch.OutOfMemoryError: CUDA out of memory", "AssertionError", "pydantic_core._pydantic_core.ValidationError: 1 ..."
_EXC_LINE = re.compile(r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*)(?::(?: (?P<msg>.*))?)?\s*$")
# An exception line outside a traceback must look like an exception's name.
_EXC_NAME = re.compile(r"(Error|Exception|Exit|Interrupt|Resources|Failure|Fault)$")
_BENIGN_LEVELS = {"DEBUG", "INFO", "WARNING", "WARN"}
_NOT_ROOT = {"SystemExit", "KeyboardInterrupt", "GeneratorExit", "CancelledError"}
_PYDANTIC_HEADER = re.compile(r"^\d+ validation errors? for \w+")
_PYDANTIC_LOC = re.compile(r"^[\w.\[\], -]+$")  # a field's location line: "hf_overrides.dict[str,any]"
_MAX_CONTINUATION = 8

# Messages of wrapper exceptions and log lines: they report that something else failed.
WRAPPER = re.compile(
    r"(see (the )?root cause above|See stack trace for root cause|initialization failed due to an exception in a "
    r"background process|Engine core initialization failed|EngineCore failed to start|WorkerProc failed to start|"
    r"Worker failed with error|EngineDeadError|EngineCore encountered an issue|Scheduler hit an exception|"
    r"TpModelWorkerClient hit an exception|Received sigquit from a child process|child process.*(died|failed)|"
    r"Worker proc \S+ died unexpectedly|exited with code|Failed core proc|unhandled errors in a TaskGroup)",
    re.I,
)
# A message that is only an HTTP status's reason phrase: a client's view of a server that failed
# (SGLang's warmup asserts the response's text, "AssertionError: Internal Server Error"); the
# server's own traceback for that request is the cause (RFC 9110 section 15.6 phrases).
HTTP_STATUS_ONLY = re.compile(
    r"^\s*(?:\d{3}\s*)?(?:Internal Server Error|Bad Gateway|Service Unavailable|Gateway Timeout)\W*$", re.I
)


@dataclass
class LogLine:
    """One line of the log: the original text, the text without decorations, and its process."""

    index: int
    raw: str
    text: str
    tag: str | None  # the process ("EngineCore_DP0 pid=45", "TP3"); None: the main process or unknown
    prefixed: bool  # the line carried a decoration (a process tag or a log record's prefix)
    where: str | None = None  # the logger's source location ("[core.py:123]"), when it gives one
    level: str | None = None  # the logger's level (ERROR, WARNING, ...), when the prefix gives one
    # The decoration started a log record (a level, a timestamp, a logger's location), not only a
    # process tag: vLLM tags every stderr line of a process ("(APIServer pid=1) "), so the lines of
    # one traceback and of one exception message all carry the tag, and only a record starts anew.
    record: bool = False


@dataclass
class Frame:
    file: str
    line: int
    func: str
    source: LogLine | None = None  # the source line printed under it ("assert not self.x")

    @property
    def module_path(self) -> str:
        """The path from the package root ("vllm/v1/worker/gpu_model_runner.py") when it can tell."""
        return package_relative(self.file)


def package_relative(path: str) -> str:
    """A file's path after the site folder it was installed in ("vllm/v1/worker/gpu_model_runner.py"
    for ".../site-packages/vllm/v1/worker/gpu_model_runner.py"); the path as given when none shows."""
    m = re.search(r"(?:site-packages|dist-packages|python)/(.+)$", path)
    return m.group(1) if m else path


@dataclass
class PyException:
    """One exception as printed: type, message (with continuation lines) and the frames above it."""

    type: str
    message: str
    line: LogLine  # the "Type: message" line
    continuation: list[LogLine] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    context: str = ""  # the text before "Traceback" on its first line ("Scheduler hit an exception:")
    chain_pos: int = 0  # 0: the original exception of its chain; higher: raised while handling it

    @property
    def short_type(self) -> str:
        return self.type.rsplit(".", 1)[-1]

    @property
    def full_message(self) -> str:
        return "\n".join([self.message, *(c.text.strip() for c in self.continuation)]).strip()

    @property
    def key_line(self) -> LogLine:
        """The line that says what went wrong: pydantic puts its message on the next line."""
        if _PYDANTIC_HEADER.match(self.message) and self.continuation:
            lines = [c for c in self.continuation if c.text.strip()]
            for i, c in enumerate(lines):
                if c.text.strip().startswith("For further information"):
                    continue
                # a field's location alone ("hf_overrides.dict[str,any]"), with its message indented
                # beneath ("  Input should be a valid dictionary [type=dict_type, ...]"): the message
                nxt = lines[i + 1].text if i + 1 < len(lines) else ""
                if _PYDANTIC_LOC.match(c.text.strip()) and "[type=" in nxt and "[type=" not in c.text:
                    return lines[i + 1]
                return c
        if not self.message.strip() and self.continuation:
            # "ImportError:" with its message on the lines below (sgl_kernel's "[sgl_kernel] CRITICAL:
            # Could not load any common_ops library!", seen on this project's machines)
            for c in self.continuation:
                if c.text.strip():
                    return c
        if not self.message and not self.continuation and self.frames and self.frames[-1].source is not None:
            return self.frames[-1].source  # a bare AssertionError: the assert statement says what failed
        return self.line

    @property
    def span(self) -> range:
        """Log line indices from its first frame (or its line) to its last continuation line."""
        first = self.frames[0].source.index - 1 if self.frames and self.frames[0].source else self.line.index
        last = self.continuation[-1].index if self.continuation else self.line.index
        return range(min(first, self.line.index), last + 1)

    @property
    def lines(self) -> list[LogLine]:
        return [self.line, *self.continuation]

    @property
    def is_wrapper(self) -> bool:
        # Only the message counts: the context ("Scheduler hit an exception:") is the wrapper's
        # own log line, and the exception below it is the real one.
        msg = self.full_message
        return bool(WRAPPER.search(msg) or HTTP_STATUS_ONLY.match(msg))

    @property
    def is_root_candidate(self) -> bool:
        return self.short_type not in _NOT_ROOT and not self.is_wrapper and not self.benign

    @property
    def benign(self) -> bool:
        """Logged at INFO or WARNING: the engine caught it and went on (an optional import, a retry)."""
        return self.line.level in _BENIGN_LEVELS


@dataclass
class Chain:
    """Exceptions linked by "direct cause" / "during handling": the first is the original one."""

    tag: str | None
    exceptions: list[PyException] = field(default_factory=list)

    @property
    def root(self) -> PyException | None:
        return next((e for e in self.exceptions if e.is_root_candidate), None)

    @property
    def start(self) -> int:
        return min(e.line.index for e in self.exceptions)


@dataclass
class LogAnalysis:
    lines: list[LogLine]
    chains: list[Chain]
    root: PyException | None

    @property
    def exceptions(self) -> list[PyException]:
        return [e for c in self.chains for e in c.exceptions]


def strip_prefix(raw: str) -> tuple[str, str | None, bool, str | None]:
    """The line without log decorations, its process tag, whether it had any, the logger location."""
    text, tag, prefixed, where, _, _ = _strip(raw)
    return text, tag, prefixed, where


def logged_benign(raw: str) -> bool:
    """The line's log prefix gives a level below ERROR (DEBUG, INFO, WARNING): the engine logged
    what it caught and went on (vLLM's "WARNING ... [base.py:380] Chat template warmup failed" and
    its traceback, each line at WARNING, from a server that then starts). Never the end of a launch,
    whatever the line says; a line without a level says nothing either way."""
    return _strip(raw)[4] in _BENIGN_LEVELS


def traceback_start(raw: str) -> bool:
    """The line opens a traceback ("Traceback (most recent call last):", after any log prefix or
    context such as SGLang's "Scheduler hit an exception:")."""
    return _TRACEBACK.search(raw) is not None


def bare_exception(raw: str) -> bool:
    """The line is an exception's own "Type: message" line, after any log prefix: what ends a
    traceback, or what an engine logs before printing one (SGLang 0.5.16 logs "RuntimeError: rmsnorm
    ... failed to dispatch data type Float" and its CUDA-graph advice, then, up to a second later,
    "Scheduler hit an exception: Traceback ...", tests/data/gpu/h100-2026-12-07c)."""
    return _exception_line(strip_prefix(raw)[0], False) is not None


def logged_progress(raw: str) -> bool:
    """The line's log prefix gives DEBUG or INFO: the engine reporting its progress or what it
    chose ("INFO ... [model.py:1510] Using max model len 32768"), not a failure's words."""
    return _strip(raw)[4] in ("DEBUG", "INFO")


# Decorations that name only the process (vLLM's "(Worker pid=1) ", torch's "[rank0]: "): the line
# may continue the record above it.
_TAG_ONLY = (_PREFIXES[0], _PREFIXES[3])


def _strip(raw: str) -> tuple[str, str | None, bool, str | None, str | None, bool]:
    text = _ANSI.sub("", raw.rstrip("\n"))
    # An ExceptionGroup's sub-tracebacks are drawn inside a box ("  | ", "  +-+---- 1 ----"): the
    # lines inside are a traceback like any other (PEP 654 formatting).
    text = _GROUP_BOX.sub("", text)
    tag: str | None = None
    where: str | None = None
    level: str | None = None
    prefixed = False
    record = False
    for _ in range(6):
        for rx in _PREFIXES:
            m = rx.match(text)
            if m and m.end() > 0:
                record = record or rx not in _TAG_ONLY
                gd = m.groupdict()
                if gd.get("tag"):
                    tag = gd["tag"].strip() if tag is None else tag
                if gd.get("where"):
                    where = gd["where"].strip("[]")
                if gd.get("level"):
                    level = gd["level"]
                text = text[m.end() :]
                prefixed = True
                break
        else:
            break
    if prefixed:
        # the box behind a process's tag ("(APIServer pid=2021)   |   File ..."): vLLM's API
        # server prints an anyio TaskGroup's ExceptionGroup so (--tool-server, 0.24.0 on the H200)
        text = _GROUP_BOX.sub("", text)
    return text, tag, prefixed, where, level, record


def decorate(lines: list[str]) -> list[LogLine]:
    """Strip each line; a bare line continues the record (and process) of the line before it."""
    out: list[LogLine] = []
    last_tag: str | None = None
    for i, raw in enumerate(lines):
        text, tag, prefixed, where, level, record = _strip(raw)
        if tag is None and not prefixed:
            tag = last_tag  # stderr of the process that wrote the record above
        last_tag = tag
        out.append(LogLine(i, raw, text, tag, prefixed, where, level, record))
    return out


def _exception_line(text: str, in_traceback: bool) -> tuple[str, str] | None:
    if not text or text[0].isspace():
        return None
    m = _EXC_LINE.match(text)
    if not m:
        return None
    typ = m.group("type")
    if not in_traceback and not _EXC_NAME.search(typ.rsplit(".", 1)[-1]):
        return None
    return typ, (m.group("msg") or "").strip()


def _parse_stream(stream: list[LogLine], tag: str | None) -> list[Chain]:
    """Tracebacks and chains in the lines of one process, in order."""
    chains: list[Chain] = []
    chain: Chain | None = None
    frames: list[Frame] = []
    in_tb = False
    context = ""
    chained = False  # a chain line was seen: the next traceback continues the current chain
    current: PyException | None = None
    cont_where: str | None = None
    for ln in stream:
        text = ln.text
        if tb_match := _TRACEBACK.search(text):
            head = text[: tb_match.start()].strip()
            if not chained or chain is None:
                chain = Chain(tag)
                chains.append(chain)
            in_tb, frames, context, chained, current = True, [], head, False, None
            continue
        if _CHAIN.match(text.strip()):
            chained = True
            current = None
            continue
        if current is not None:
            # Lines after "Type: message" belong to the message until a new record or traceback.
            same_record = current.line.prefixed and ln.where is not None and ln.where == cont_where
            starts_record = ln.record and not same_record
            if (
                text.strip()
                and not starts_record
                and len(current.continuation) < _MAX_CONTINUATION
                and _exception_line(text, False) is None
                and not _FRAME.match(text)
            ):
                current.continuation.append(ln)
                continue
            current = None
        if in_tb:
            fm = _FRAME.match(text)
            if fm:
                frames.append(Frame(fm.group("file"), int(fm.group("line")), fm.group("func")))
                continue
            if (
                text.startswith((" ", "\t"))
                and frames
                and frames[-1].source is None
                and not _CARET.match(text)
            ):
                frames[-1].source = ln
                continue
            if text.startswith((" ", "\t")) or _CARET.match(text) or not text.strip():
                continue  # carets, "[Previous line repeated N more times]"
            # Right after frames any "Name: message" is the exception; a second one without frames
            # (raised while handling, no chain line printed) must look like an exception's name.
            exc = _exception_line(text, bool(frames))
            if exc is None:
                in_tb = False
                continue
            current = PyException(
                exc[0],
                exc[1],
                ln,
                frames=frames,
                context=context,
                chain_pos=len(chain.exceptions) if chain else 0,
            )
            assert chain is not None
            chain.exceptions.append(current)
            cont_where = ln.where
            frames = []  # a second exception line right after (no chain line) shares no frames
            continue
        exc = _exception_line(text, False)
        if exc is not None and not chained:
            # An exception line without its traceback (a logger printed only the message).
            current = PyException(exc[0], exc[1], ln)
            chains.append(Chain(tag, [current]))
            cont_where = ln.where
    return chains


def parse_log(lines: list[str]) -> LogAnalysis:
    """Every exception chain of the log, grouped by process, and the root cause among them."""
    decorated = decorate(lines)
    streams: dict[str | None, list[LogLine]] = {}
    for ln in decorated:
        streams.setdefault(ln.tag, []).append(ln)
    chains: list[Chain] = []
    for tag, stream in streams.items():
        chains.extend(c for c in _parse_stream(stream, tag) if c.exceptions)
    chains.sort(key=lambda c: c.start)
    return LogAnalysis(decorated, chains, pick_root(chains))


def pick_root(chains: list[Chain]) -> PyException | None:
    """The original exception of the first process that failed.

    A process failed at its first chain that holds a real (non-wrapper) exception; the process
    that did so first in the log is the one that failed first. Chains of wrappers alone (the
    API server's "Engine core initialization failed") never count.
    """
    first_by_tag: dict[str | None, Chain] = {}
    for c in chains:
        if c.root is not None and c.tag not in first_by_tag:
            first_by_tag[c.tag] = c
    if not first_by_tag:
        return None
    first = min(first_by_tag.values(), key=lambda c: c.start)
    return _in_group(_with_frames(first.root, chains), first, chains)


def _in_group(root: PyException | None, chain: Chain, chains: list[Chain]) -> PyException | None:
    """A sub-exception of an ExceptionGroup (PEP 654: an anyio TaskGroup's "unhandled errors in a
    TaskGroup (1 sub-exception)") is printed after the group, with the frames of the task that
    raised it only (a library's: httpx, httpcore). The group's own frames, printed just above it in
    the same process, say which of the engine's code ran that task (vLLM's
    ``entrypoints/mcp/tool_server.py:add_tool_server`` for --tool-server): they are the outer frames
    of the sub-exception, as a person reads the two."""
    if root is None:
        return None
    before = [c for c in chains if c.tag == chain.tag and c.start < chain.start]
    if not before:
        return root
    group = next(
        (e for e in reversed(before[-1].exceptions) if e.short_type.endswith("ExceptionGroup")), None
    )
    if group is None or not group.frames or root.frames[: len(group.frames)] == group.frames:
        return root
    # in place (classify finds the chain's own exception); the task's innermost frames only, so that
    # the engine's frames of the group stay among the frames an outcome keeps (MAX_FRAMES)
    root.frames = [*group.frames, *root.frames[-GROUP_TASK_FRAMES:]]
    return root


GROUP_TASK_FRAMES = 4


def _with_frames(root: PyException | None, chains: list[Chain]) -> PyException | None:
    """A logger's copy of an exception (SGLang logs "AcceleratorError: CUDA error: ..." and its
    remedy, then raises it with its traceback): the raised one, whose frames say where it struck."""
    if root is None or root.frames:
        return root
    for c in chains:
        e = c.root
        if (
            e is not None
            and e is not root
            and e.frames
            and e.line.index > root.line.index
            and e.short_type == root.short_type
            and e.message == root.message
        ):
            return e
    return root


def frame_text(exc: PyException) -> str:
    """The frames as "path:function" lines, for rules that match where an exception was raised."""
    return "\n".join(f"{f.module_path}:{f.func}" for f in exc.frames)
