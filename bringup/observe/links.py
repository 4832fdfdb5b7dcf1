"""What links a failure to a setting when no line spells the setting's flag.

A person whose launch fails in a way they do not recognise looks at their own settings and asks
which of them touches what failed. The failure gives four kinds of clue that name no flag:

- **the value**: the error quotes what the user gave ("Invalid repository ID or local directory
  specified: '/tmp/no-such-draft'" for a speculative config's draft path; a module, class or
  connector name; a key of a JSON-valued setting; a number with its unit);
- **the field**: the error names the setting's destination or the config field it fills
  (``enable_chunked_prefill=True``; ``hf_overrides.dict[str,any]`` in a pydantic error);
- **the config object**: a pydantic ``... validation error for SpeculativeConfig``, or frames in
  ``vllm/config/speculative.py``, name the group of settings that object holds (vLLM's ``--help``
  groups are its config classes), SGLang's ``ServerArgs`` checks all of its arguments;
- **the component**: the failing frames are in the code the setting selects or configures: a file
  named for the value (``quantization/awq.py`` for ``--quantization awq``, ``gguf_loader.py`` for
  ``--load-format gguf``, ``ray_executor.py`` for ``--distributed-executor-backend ray``), or a
  folder or file named for what the setting is about (``tokenizer`` for ``--tokenizer-mode``,
  ``kv_transfer`` for ``--kv-transfer-config``).

Everything here is generic: the engine's own ``--help`` (destinations, groups, values) meets the
engine's own module paths in the traceback, word for word; there is no list per flag. Each link is
a likelihood for the search (bringup/search/evidence.py weighs them), never a certainty: a quoted
path may be the model's, a component word may be shared by two settings.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bringup.observe.tracebacks import strip_prefix

# Words of a destination that say nothing about what a setting is about: "mode", "format" and
# "backend" are what every selector is called; the subject is the other word ("tokenizer",
# "load", "attention").
_GENERIC = frozenset(
    "enable enabled disable disabled use using allow skip force no not set get num max min size mode "
    "modes format formats backend backends config configs type types kind impl name names path paths "
    "dir file files level policy args arg kwargs extra override overrides custom default cls class "
    "module modules method methods value values len length limit the and for with per all auto none "
    "true false option options".split()
)
# Values that could be anything's: never evidence that the failure quotes the user.
_PLAIN_VALUES = frozenset(
    "true false none null auto default yes no on off 0 1 -1 [] {} '' \"\" cpu cuda gpu "
    # words every engine error uses in prose ("incorrect model outputs", "the model's config"): a
    # setting whose value is one of them is not quoted by a message that says it
    "model models config value values input output outputs data text request server engine token tokens".split()
)
# Packages whose frames are the machinery under every failure, not a component a setting selects.
_INFRASTRUCTURE = frozenset(
    "torch pydantic pydantic_core typing functools contextlib asyncio concurrent multiprocessing "
    "threading importlib runpy json abc enum dataclasses argparse uvloop fastapi starlette uvicorn "
    "anyio site-packages dist-packages lib python3 python3.11 python3.12 frozen <frozen collections "
    "inspect traceback logging signal subprocess os posixpath tempfile".split()
)
# Folders and file stems every traceback of an engine passes through: they name no component.
_ENGINE_PLUMBING = frozenset(
    "v1 v0 utils util entrypoints openai api_server cli main serve launch_server engine core "
    "engine_core core_client worker workers executor model_executor layers models srt managers "
    "scheduler_output base common init __init__ interface interfaces api server server_args "
    "arg_utils entrypoint entrypoints launcher process processes runner runners model_runner "
    "gpu_model_runner gpu_worker worker_base multiproc_executor tp_worker scheduler".split()
)
# Words of a function's name that say only that it runs, not what it is about.
_FUNCTION_PLUMBING = frozenset(
    "init initialize initialise setup start run main call wrapper inner outer forward execute create build "
    "make load launch handle process step loop async sync from_engine_args from_config from_args".split()
)
_CONFIG_NAME = re.compile(r"\bvalidation errors? for (?P<name>[A-Z]\w*)")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_HOST_PORT = re.compile(r"(?:[\w.-]+|\[[0-9a-fA-F:]*\]):(\d{2,5})")
_NUMBER_UNIT = r"\s*(?:[KMGT]i?B|bytes?|tokens?|GB|MB|s|ms|%|x)\b"


@dataclass(frozen=True)
class Setting:
    """One setting of the launch, as the links read it."""

    name: str  # the search's factor name: "--flag" or "env:NAME"
    value: str  # its value in this launch, as text
    dest: str  # the argparse destination, or the variable's name
    group: str | None = None  # the engine's --help group (vLLM: the config class), if any
    user: bool = False  # the user's own choice: the baseline sets it away from the engine's default
    # the engine's functions that read its field ("package/path.py:function", bringup/observe/fieldreaders.py)
    read_at: tuple[str, ...] = ()


@dataclass(frozen=True)
class Link:
    name: str  # the setting (factor name)
    kind: str  # value | field | guard | config | module | component | subject | reader | reader-file
    why: str


# Endings stem() takes off, longest first: one of them, then a final e, then a doubled last letter.
_SUFFIXES = (
    "ations", "ation", "ators", "ator", "ated", "ates", "ate", "ings", "ing",
    "ers", "er", "ors", "or", "ed", "es", "s",
)  # fmt: skip


def stem(word: str) -> str:
    """A crude stem, so that the forms of one word meet: "loader" and "load", "tokenizers" and
    "tokenizer", "queued" and "queue", "sampled" and "sampling", "quantization" and "quantized",
    "allocate", "allocated" and "allocation", "padding" and "pad". One ending comes off (leaving 4
    letters at least; "process" keeps its s), then a final e, then the second of a doubled last
    letter (not l, s or z: "fill", "pass")."""
    w = word.lower()
    for suffix in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 4 and not (suffix == "s" and w.endswith("ss")):
            w = w[: -len(suffix)]
            break
    if w.endswith("e") and len(w) >= 5:
        w = w[:-1]
    if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "lsz" and w[-1].isalpha():
        w = w[:-1]
    return w


# Stems of words an engine's failure prose uses whatever failed: never what one setting is about.
_PROSE = frozenset(
    stem(w)
    for w in "model models request requests server engine token tokens input output error errors "
    "memory device devices cuda tensor tensors process processes worker workers failed support "
    "supported available found number value".split()
)


def words(text: str) -> list[str]:
    """The lower-case words of an identifier, a path or CamelCase ("KVTransferConfig" -> kv,
    transfer, config; "kv_transfer/lmcache_connector.py" -> kv, transfer, lmcache, connector, py)."""
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", _CAMEL.sub(" ", text)) if w]


# A code name in a message: a dotted or underscored identifier (``torch.OutOfMemoryError``,
# ``torch_npu``, ``torch._inductor``), a path's pieces, a CamelCase name (``InductorError``, and
# ``PyTorch`` of every torch OOM's "non-PyTorch memory"). Its words are the code's, not the failure's.
_CODE_NAME = re.compile(r"[\w./-]*\w[._/]\w[\w./-]*|\b\w*[a-z][A-Z]\w*")


def prose_words(text: str) -> list[str]:
    """The words of a message outside its code names: "No module named 'torch_npu'" says "module"
    and "named"; "torch" there is a piece of the module's name, which every torch error carries."""
    return words(_CODE_NAME.sub(" ", text))


def subject_words(dest: str, shortest: int = 4) -> set[str]:
    """The stems of a destination's words, without the words every selector has."""
    return {stem(w) for w in words(dest) if len(w) >= shortest and w not in _GENERIC}


def subject(s: Setting) -> set[str]:
    """What a setting is about, as stems: its destination's words and its group's, without the
    words every selector has ("tokenizer_mode" -> tokenizer; "KVTransferConfig" -> kv, transfer)."""
    out = subject_words(s.dest)
    if s.group and s.group.endswith("Config"):
        out |= {stem(w) for w in words(s.group[: -len("Config")]) if len(w) >= 4 and w not in _GENERIC}
    return out


def value_tokens(value: str) -> list[str]:
    """The distinctive pieces of a value that an error could quote: the whole value, a path's file
    name, a dotted name's parts, and the keys and values of a JSON value (never plain numbers, yes
    or no, or words of two letters)."""
    v = value.strip().strip("'\"")
    if not v or v.lower() in _PLAIN_VALUES:
        return []
    out: list[str] = []
    parsed = structured(v)
    if parsed is not None:
        for piece in _json_pieces(parsed):
            out += value_tokens(piece)
        return _distinct(out)
    if _distinctive(v):
        out.append(v)
    if "/" in v:
        out.append(v.rstrip("/").rsplit("/", 1)[-1])
    if "." in v and not re.fullmatch(r"[\d.e+-]+", v):
        out += [p for p in v.split(".") if len(p) >= 4]
    if "," in v:
        out += [p.strip() for p in v.split(",")]
    # host:port (an address, a URL's last part): an error names the port alone ("port: 29500, ...
    # EADDRINUSE" for a distributed-init address 127.0.0.1:29500)
    out += [m.group(1) for t in list(out) if (m := _HOST_PORT.fullmatch(t))]
    return _distinct([t for t in out if _distinctive(t)])


def _distinct(items: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for x in items:
        if x not in seen:
            seen.append(x)
    return seen


def _distinctive(token: str) -> bool:
    t = token.strip()
    if t.lower() in _PLAIN_VALUES or len(t) < 3:
        return False
    if re.fullmatch(r"-?\d+(\.\d+)?", t):
        return len(t.replace(".", "").lstrip("-0")) >= 3  # 4096, 0.95, 999999: not 8 or 16
    return True


def structured(v: str) -> dict | list | tuple | None:
    """A JSON value, or the Python literal an engine prints it back as ("{'model': '/tmp/x'}")."""
    if not v.startswith(("{", "[")):
        return None
    try:
        return json.loads(v)
    except ValueError:
        pass
    try:
        out = ast.literal_eval(v)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return out if isinstance(out, (dict, list, tuple)) else None


def _json_pieces(node) -> Iterable[str]:
    if isinstance(node, dict):
        for k, x in node.items():
            yield str(k)
            yield from _json_pieces(x)
    elif isinstance(node, list):
        for x in node:
            yield from _json_pieces(x)
    elif node is not None and not isinstance(node, bool):
        yield str(node)


def quoted(lines: Iterable[str], token: str) -> str | None:
    """The first line that quotes ``token`` as a whole (a number only with a unit after it, or
    as a value beside a name), or None."""
    esc = re.escape(token)
    if re.fullmatch(r"-?\d+(\.\d+)?", token):
        close = r"(?=[)\]},;])"
        rx = re.compile(rf"(?<![\w.]){esc}(?:{_NUMBER_UNIT}|{close})|[=:(]\s*{esc}(?![\w.])")
    elif "/" in token:
        rx = re.compile(rf"(?<![\w-]){esc}(?![\w-])", re.I)
    else:  # a word of a path is the engine's source tree (torch's /pytorch/aten/...), not a quote
        rx = re.compile(rf"(?<![\w/-]){esc}(?![\w/-])", re.I)
    return next((ln for ln in lines if rx.search(ln)), None)


# Sizes: a value that carries its unit ("24G", "150GiB", "0=24G" for a device's limit,
# "max_split_size_mb:512"), or a number whose destination names the unit (cpu_offload_gb=40), is
# quoted by a failure that states the same size in any unit ("a total capacity of 24.00 GiB",
# "reserved 150.0 GiB"): engines print sizes in their own unit and precision, never the user's text.
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}
_VALUE_SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*([kmgt])(i?b)?(?![\w.])", re.I)
_KEYED_SIZE = re.compile(
    r"(?:^|[_\W])(kb|kib|mb|mib|gb|gib|tb|tib|bytes)[:=]\s*(\d+(?:\.\d+)?)(?![\w.])", re.I
)
_DEST_UNIT = re.compile(r"(?:^|_)(kb|kib|mb|mib|gb|gib|tb|tib|bytes)$", re.I)
_TEXT_SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(KiB|MiB|GiB|TiB|KB|MB|GB|TB|bytes)\b")
_SMALLEST_SIZE = 2**26  # 64 MiB: smaller sizes are too common in any log to name a setting
_SIZE_TOLERANCE = 0.01


def _bytes(number: str, unit: str) -> list[float]:
    """The sizes a number and a unit can mean: a bare K/M/G/T, KB or GB is read both ways (binary
    and decimal), since users and engines use them loosely; KiB..TiB are binary only."""
    u = unit.lower()
    if u == "bytes":
        return [float(number)]
    power = _POWERS[u[0]]
    binary = float(number) * 1024**power
    return [binary] if u.endswith("ib") else [binary, float(number) * 1000**power]


def sizes(value: str, dest: str = "") -> list[float]:
    """The sizes (bytes) a setting's value states, from its own unit or its destination's."""
    out = [b for m in _VALUE_SIZE.finditer(value) for b in _bytes(m.group(1), m.group(2))]
    out += [b for m in _KEYED_SIZE.finditer(value) for b in _bytes(m.group(2), m.group(1))]
    if (u := _DEST_UNIT.search(dest)) and re.fullmatch(r"\d+(?:\.\d+)?", value.strip()):
        out += _bytes(value.strip(), u.group(1))
    return [b for b in out if b >= _SMALLEST_SIZE]


def quoted_size(lines: Iterable[str], value: str, dest: str = "") -> str | None:
    """The first line that states a size the setting's value states (within 1%), or None."""
    want = sizes(value, dest)
    if not want:
        return None
    for ln in lines:
        for m in _TEXT_SIZE.finditer(ln):
            for got in _bytes(m.group(1), m.group(2)):
                if any(abs(got - w) <= _SIZE_TOLERANCE * w for w in want):
                    return ln
    return None


# An allocation that failed (torch's out-of-memory text: "Tried to allocate 16.00 GiB") is a
# tensor, and a tensor of activations is a count of tokens, sequences or positions times one of the
# model's widths times its element's bytes (vLLM's profile run is one forward of
# max_num_batched_tokens tokens: v1/worker/gpu_worker.py profile_run -> _dummy_run). Where the size
# is, to the precision printed, a count the user gave times a width of this model times 1, 2 or 4
# bytes, that count sized the tensor: real vLLM 0.24.0 on an H100 (tests/data/gpu/h100-2026-12-07e)
# failed to allocate 16.00 GiB = 2097152 tokens (the user's "2M") x hidden 4096 x 2 bytes (bf16).
_ALLOCATE = re.compile(r"[Tt]ried to allocate (\d+(?:\.\d+)?) ?(KiB|MiB|GiB|TiB)\b")
_COUNT = re.compile(r"(\d+)([kmgKMG]?)")
_ELEMENT_BYTES = (1, 2, 4)


def counts(value: str) -> list[int]:
    """The counts a value can state: "8192"; "2M" and "2k" both ways (vLLM's human-readable integers
    read upper case as binary and lower case as decimal, and users write either)."""
    m = _COUNT.fullmatch(value.strip())
    if m is None:
        return []
    if not m.group(2):
        return [int(m.group(1))]
    return sorted({int(b) for b in _bytes(m.group(1), m.group(2))})  # a bare K/M/G: both ways


def model_widths(facts: Mapping[str, Any]) -> dict[str, int]:
    """The model's widths a tensor of activations has (bringup/facts/modelinfo.py facts): the hidden
    size, the MLP's (and its fused gate and up projection), the vocabulary (the logits), the
    attention heads' and the fused query, key and value projection's."""

    def num(key: str) -> int:
        v = facts.get(key)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else 0

    hidden, inter, vocab = num("model.hidden_size"), num("model.intermediate_size"), num("model.vocab_size")
    heads, kv, head_dim = num("model.heads"), num("model.kv_heads"), num("model.head_dim")
    out = {
        "hidden size": hidden,
        "MLP width": inter,
        "fused gate and up width": 2 * inter,
        "vocabulary": vocab,
        "attention width": heads * head_dim,
        "fused query, key and value width": (heads + 2 * kv) * head_dim,
    }
    return {k: v for k, v in out.items() if v > 1}


def allocation_sized_by(lines: Iterable[str], value: str, widths: Mapping[str, int]) -> str | None:
    """Why the allocation a failure could not make is the value's count times a width of the model
    (to the precision the size is printed in), or None."""
    ns = [n for n in counts(value) if n >= 2]
    if not ns or not widths:
        return None
    for ln in lines:
        for m in _ALLOCATE.finditer(ln):
            unit = _bytes("1", m.group(2))[0]  # KiB..TiB: binary only
            got = float(m.group(1)) * unit
            if got < _SMALLEST_SIZE:
                continue
            tol = 0.5 * 10 ** -len((m.group(1).split(".") + [""])[1]) * unit  # half the last digit printed
            for n in ns:
                for name, w in widths.items():
                    for b in _ELEMENT_BYTES:
                        if abs(n * w * b - got) <= tol:
                            return f"{m.group(0)} is {n} x the model's {name} {w} x {b} bytes: {ln.strip()[:160]}"
    return None


_NO_MODULE = re.compile(
    r"No module named ['\"](?P<mod>[\w.]+)['\"]|cannot import name ['\"](?P<name>\w+)['\"]"
)


def missing_module_named_for(lines: Iterable[str], value: str) -> str | None:
    """The first line in which a module named for the value could not be imported: the missing
    module's name is the value, or one of its pieces after the first (between dots and underscores)
    is ("No module named 'torch_npu'" for ``--device npu``: real SGLang 0.5.16,
    tests/data/gpu/h100-2026-12-07f). The platform, backend or method the user named needs a
    package that is not there."""
    v = value.strip().strip("'\"").lower()
    if not re.fullmatch(r"[a-z][a-z0-9]*", v) or not _distinctive(v):
        return None
    for ln in lines:
        for m in _NO_MODULE.finditer(ln):
            pieces = re.split(r"[._]", (m.group("mod") or "").lower())
            # the whole name, or a piece after its first: torch_npu is torch's extension for the
            # NPU, and a value "torch" names the host package every engine imports, not this one
            if pieces == [v] or v in pieces[1:]:
                return ln
    return None


def imports_value(message: str, value: str) -> bool:
    """The message is an import of what the value names: "No module named 'my_plugins'" for
    ``my_plugins.workers.Worker``, "cannot import name 'Worker'" for the same."""
    for v in value.split():  # a list setting's items
        v = v.strip("'\",[]")
        # a qualified name the user wrote (a.b.C, a.b:f); a bare word is a method or backend whose
        # package is missing (bitsandbytes): a missing dependency, not a wrong value
        if not re.fullmatch(r"[A-Za-z_][\w.:]*", v) or not re.search(r"[.:]", v):
            continue
        parts = re.split(r"[.:]", v)
        for m in _NO_MODULE.finditer(message):
            mod, name = m.group("mod"), m.group("name")
            if mod and (v == mod or v.startswith(mod + ".") or v.startswith(mod + ":")):
                return True
            if name and name in parts:
                return True
    return False


def config_objects(lines: Iterable[str], frames: Iterable[str], package: str | None) -> set[str]:
    """The config objects a failure names: a pydantic validation error's class, and the config
    module its frames are in (``vllm/config/speculative.py`` -> ``speculative``, matched against a
    group name with its words run together)."""
    out = {m.group("name") for ln in lines for m in _CONFIG_NAME.finditer(ln)}
    for f in frames:
        path = package_path(f, package)
        if path is None:
            continue
        parts = path.split("/")
        if len(parts) >= 2 and parts[-2] in ("config", "configs", "arg_groups"):
            out.add("file:" + parts[-1].rsplit(".", 1)[0].replace("_", ""))
        if parts[-1] in ("server_args.py", "arg_utils.py"):
            out.add("args")
    return out


def _in_object(s: Setting, objects: set[str]) -> str | None:
    """The config object of ``objects`` that holds this setting: its --help group's
    (``SchedulerConfig`` for ``--max-num-batched-tokens``), or the object the setting is itself
    (``KVTransferConfig`` for ``--kv-transfer-config``); None when none of them does."""
    keys: set[str] = set()
    if s.group:
        keys |= {s.group.lower(), s.group.lower().removesuffix("config")}
    dest = s.dest.replace("_", "").lower()
    if dest.endswith("config") and len(dest) > len("config"):
        keys |= {dest, dest.removesuffix("config")}
    for o in objects:
        k = o.removeprefix("file:").lower()
        if k in keys or k.removesuffix("config") in keys:
            return o.removeprefix("file:")
    return None


def package_path(frame: str, package: str | None) -> str | None:
    """A frame's path from the engine's package root ("vllm/config/speculative.py"), wherever the
    package was installed (site-packages, a --target folder); None for a frame outside it."""
    path = frame.split(":", 1)[0]
    if not package:
        return None
    if path.startswith(package + "/"):
        return path
    i = path.find("/" + package + "/")
    return path[i + 1 :] if i >= 0 else None


def engine_frames(frames: list[str], package: str | None, innermost: int = 4) -> list[str]:
    """The paths of the innermost frames inside the engine's own package (innermost last)."""
    own = [p for f in frames if (p := package_path(f, package)) is not None]
    return own[-innermost:]


def _path_stems(path: str, package: str | None) -> tuple[set[str], set[str]]:
    """(stems of the file's name, stems of its folders), plumbing left out."""
    parts = path.split("/")
    if package and parts and parts[0] == package:
        parts = parts[1:]
    file_stem = parts[-1].rsplit(".", 1)[0] if parts else ""
    folders = [p for p in parts[:-1] if p not in _ENGINE_PLUMBING]
    f = set() if file_stem in _ENGINE_PLUMBING else {stem(w) for w in words(file_stem) if w != "py"}
    if file_stem and file_stem not in _ENGINE_PLUMBING:
        f.add(stem(file_stem.replace("_", "")))
    d = {stem(w) for p in folders for w in words(p)} | {stem(p.replace("_", "")) for p in folders}
    return f, d


def module_link(s: Setting, paths: list[str], package: str | None) -> str | None:
    """A failing frame's file is named for the setting's value (the code that value selects):
    ``quantization/awq_marlin.py`` for awq_marlin, ``model_loader/gguf_loader.py`` for gguf."""
    toks = [t for t in value_tokens(s.value) if not re.fullmatch(r"[\d.]+", t)]
    if not toks:
        return None
    wanted = {stem(t.lower().replace("-", "_").replace("_", "")) for t in toks}
    wanted |= {stem(w) for t in toks for w in words(t) if len(w) >= 4 and w not in _GENERIC}
    for p in reversed(paths):
        file_stems, _ = _path_stems(p, package)
        if wanted & file_stems:
            return p
    return None


def engine_functions(frames: list[str], package: str | None, innermost: int = 4) -> list[str]:
    """The functions of the innermost frames inside the engine's own package, as "path:function"
    (innermost last): where a file is plumbing (a model runner), its function still says what it
    was doing (``initialize_kv_cache``)."""
    own = [f for f in frames if package_path(f, package) is not None and ":" in f]
    return own[-innermost:]


def _function_stems(frame: str) -> set[str]:
    """The stems of a frame's function name, the words every function has left out."""
    name = frame.rsplit(":", 1)[1]
    return {stem(w) for w in words(name) if len(w) >= 4 and w not in _GENERIC and w not in _FUNCTION_PLUMBING}


def component_link(
    s: Setting, paths: list[str], package: str | None, functions: Sequence[str] = ()
) -> str | None:
    """A failing frame is in the component the setting is about: a word of its destination or
    group names the frame's file or one of its folders (``tokenizer`` for ``--tokenizer-mode``),
    or, for a setting the user chose, the function the frame is in (``initialize_kv_cache`` for
    their cache settings: a person asks which of *their* settings touch what failed; a function's
    words are too common to tie every variable of the registry to it)."""
    subj = subject(s)
    if not subj:
        return None
    for p in reversed(paths):
        file_stems, folder_stems = _path_stems(p, package)
        if subj & (file_stems | folder_stems):
            return p
    for f in reversed(functions if s.user else ()):
        if subj & _function_stems(f):
            return f
    return None


def logged_places(lines: Iterable[str], package: str | None) -> list[str]:
    """Where a failure with no traceback logged its last records ("[ray_utils.py:212]" of a vLLM
    hang waiting for a Ray placement group), as engine paths ("vllm/ray_utils.py"): the module a
    value selects, when its file is named for that value. Only that: the place of a hang's last
    line in start-up ("[parallel_state.py:1208]") says where it stopped, not which setting's
    component failed (subject_links)."""
    out: list[str] = []
    for ln in lines:
        where = strip_prefix(ln)[3]
        if where and package:
            path = f"{package}/{where.split(':', 1)[0]}"
            if path.endswith(".py") and path not in out:
                out.append(path)
    return out


# A number format has several spellings, and a kernel's error uses PyTorch's own: c10's ScalarType
# names (c10/core/ScalarType.h: Half, Float, Double, BFloat16), as in "rmsnorm ... failed to dispatch
# data type Float" (sgl-kernel's dispatch, real SGLang 0.5.16 with `--dtype float32` on an H100,
# tests/data/gpu/h100-2026-12-07c) or "expected scalar type Float but found Half". Each group: the
# spellings a user writes (matched as any other value) and the ScalarType name (matched as a
# capitalised whole word only: "float" is a word of prose and of Python's own errors).
_NUMBER_FORMATS: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"float32", "fp32", "float", "torch.float32"}), "Float"),
    (frozenset({"float16", "fp16", "half", "torch.float16"}), "Half"),
    (frozenset({"bfloat16", "bf16", "torch.bfloat16"}), "BFloat16"),
    (frozenset({"float64", "fp64", "double", "torch.float64"}), "Double"),
)


def format_spellings(value: str) -> tuple[list[str], str | None]:
    """The other spellings of a number format the value names (``float32``: fp32, torch.float32 and
    the ScalarType name Float), or nothing for any other value."""
    v = value.strip().strip("'\"").lower()
    for spellings, scalar in _NUMBER_FORMATS:
        if v in spellings:
            # a spelling with its width (fp32, torch.float32): "float" and "half" alone are prose
            return sorted(t for t in spellings - {v} if any(c.isdigit() for c in t)), scalar
    return [], None


def _import_link(s: Setting, lines: list[str]) -> Link | None:
    """The failure imports what the value names, or could not import a module named for it."""
    if (line := next((ln for ln in lines if imports_value(ln, s.value)), None)) is not None:
        return Link(s.name, "value", f"the failure imports what its value names: {line.strip()[:160]}")
    if (line := missing_module_named_for(lines, s.value)) is not None:
        return Link(
            s.name, "value", f"the module it could not import is named for its value: {line.strip()[:160]}"
        )
    return None


def value_link(s: Setting, lines: list[str], widths: Mapping[str, int] | None = None) -> Link | None:
    """The failure quotes the setting's value (a distinctive piece of it, or the number format it
    names in another spelling), imports what it names, states the size it gives in its own unit, or
    failed an allocation its count sized (``widths``: the model's, model_widths); None if none."""
    for tok in value_tokens(s.value):
        if (line := quoted(lines, tok)) is not None:
            return Link(s.name, "value", f"the failure quotes its value {tok!r}: {line.strip()[:160]}")
    others, scalar = format_spellings(s.value)
    for tok in others:
        if (line := quoted(lines, tok)) is not None:
            return Link(
                s.name, "value", f"the failure names its number format as {tok!r}: {line.strip()[:160]}"
            )
    if scalar is not None:
        rx = re.compile(rf"(?<![\w.]){scalar}(?![\w.])")
        if (line := next((ln for ln in lines if rx.search(ln)), None)) is not None:
            return Link(
                s.name, "value", f"the failure names its number format as {scalar!r}: {line.strip()[:160]}"
            )
    if (link := _import_link(s, lines)) is not None:
        return link
    if (line := quoted_size(lines, s.value, s.dest)) is not None:
        return Link(s.name, "value", f"the failure states the size it gives: {line.strip()[:160]}")
    if widths and (why := allocation_sized_by(lines, s.value, widths)) is not None:
        return Link(s.name, "value", f"the allocation that failed is its count: {why}")
    return None


def links(
    lines: list[str],
    frames: list[str],
    settings: Iterable[Setting],
    package: str | None,
    places: Sequence[str] = (),
    tested: Iterable[str] = (),
    widths: Mapping[str, int] | None = None,
) -> list[Link]:
    """Every link between this failure and a setting of the launch. ``lines``: the failure's
    words (root exception and evidence lines, frames left out); ``frames``: the root exception's
    frames, innermost last, as "path:function"; ``package``: the engine's own package;
    ``places``: for a failure with no traceback, where its last records were logged
    (logged_places), read for a module named for a value only; ``tested``: the names the engine's
    source tested on its way to the raising line (bringup/observe/guards.py); ``widths``: the
    model's widths (model_widths), for an allocation a count sized."""
    out: list[Link] = []
    objects = config_objects(lines, frames, package)
    paths = engine_frames(frames, package)
    functions = engine_functions(frames, package)
    tests = set(tested)
    for s in settings:
        if (link := value_link(s, lines, widths)) is not None:
            out.append(link)
        if s.dest in tests:
            out.append(Link(s.name, "guard", f"the engine raised under a test of its field {s.dest}"))
        if (obj := _in_object(s, objects)) is not None:
            out.append(Link(s.name, "config", f"the failure names its config object ({obj})"))
        elif "args" in objects and s.user:
            out.append(Link(s.name, "config", "the failure is raised where the engine checks its arguments"))
        if (p := module_link(s, paths, package)) is not None:
            out.append(Link(s.name, "module", f"the failing code is the module its value selects ({p})"))
        elif (p := module_link(s, list(places), package)) is not None:
            out.append(
                Link(s.name, "module", f"the failure was logged in the module its value selects ({p})")
            )
        elif (p := component_link(s, paths, package, functions)) is not None:
            out.append(Link(s.name, "component", f"the failing code is in the component it configures ({p})"))
        elif (link := reader_link(s, frames, package)) is not None:
            out.append(link)
    return out + subject_links(lines, settings)


def reader_link(s: Setting, frames: list[str], package: str | None) -> Link | None:
    """A failing frame is in the engine's code that reads the setting's field (its source's module
    tree, bringup/observe/fieldreaders.py): the very function the engine raised in (its innermost frame),
    or, for a setting the user chose, a function of a failing file (SGLang's
    ``pynccl_allocator.py``, which reads ``enable_symm_mem``, raised from ``get_nccl_mem_pool``): a
    person asks which of *their* settings the failing module reads. A caller that reads the field
    is not enough for the engine's own choices: ``ModelConfig.__init__`` reads the context length
    and calls the hub download that failed."""
    if not s.read_at:
        return None
    if (f := read_here(s.read_at, engine_functions(frames, package, innermost=1), package)) is not None:
        return Link(s.name, "reader", f"the failing function reads its field {s.dest} ({f})")
    if s.user and (p := read_in_module(s.read_at, frames, package)) is not None:
        return Link(s.name, "reader-file", f"the failing module reads its field {s.dest} ({p})")
    return None


def subject_links(lines: list[str], settings: Iterable[Setting]) -> list[Link]:
    """The failure's own words name what one of the user's settings is about, and no other of
    theirs: "mscclpp: failed to connect rank 0 to rank 1" for the ``--enable-mscclpp`` the user
    turned on, "Tokenizer not available" for their ``--skip-tokenizer-init``. A person reads the
    message against their own settings; a word two of them share, or one every failure uses
    ("model", "request"), picks none. Only the message is read, not the logger's place in front
    of it: "[parallel_state.py:1208] rank 0 in world size 2 ..." is where a hang's last line was
    logged, and "parallel" there named the user's tensor-parallel size for every hang in start-up
    (the place is the component links' to read, from the frames). Nor are the pieces of a code
    name (prose_words): "No module named 'torch_npu'" and "torch._inductor.exc.InductorError" are
    not about torch, the subject of the user's TORCH_CUDA_ARCH_LIST, nor is "non-PyTorch memory"
    of every torch OOM (real GPU runs suspected it by that word: h100-2026-12-07f first, at 33%;
    h100-2026-12-07e dropped it in its third launch)."""
    mine = [s for s in settings if s.user]
    said = {stem(w) for ln in lines for w in prose_words(strip_prefix(ln)[0]) if len(w) >= 4}
    owners: dict[str, list[Setting]] = {}
    for s in mine:
        for w in subject(s) - _PROSE:
            owners.setdefault(w, []).append(s)
    out: list[Link] = []
    for w, who in sorted(owners.items()):
        if len(who) == 1 and w in said and all(link.name != who[0].name for link in out):
            out.append(Link(who[0].name, "subject", f"the failure's words name what it is about ({w!r})"))
    return out


def library_tokens(frames: Iterable[str], package: str | None) -> set[str]:
    """Kernel libraries and components the failing frames pass through: the top package of frames
    outside the engine and its infrastructure (``flashinfer/``, ``deep_gemm/``, ``triton/``), and the
    words of the innermost engine files' names (``scaled_mm/cutlass.py`` -> cutlass)."""
    out: set[str] = set()
    for f in frames:
        if package_path(f, package) is not None:
            continue
        path = re.sub(r"^.*/(?:site|dist)-packages/", "", f.split(":", 1)[0])
        top = path.lstrip("/").split("/", 1)[0]
        if top and top not in _INFRASTRUCTURE and not top.startswith(("<", "python")) and "." not in top:
            out |= set(words(top)) | {top.lower()}
    for p in engine_frames(list(frames), package, innermost=3):
        file_stems, _ = _path_stems(p, package)
        out |= {w for w in file_stems if len(w) >= 4}
    return {w for w in out if len(w) >= 3 and w not in _GENERIC}


_SELECTED = re.compile(r"\b(?:Selected|Using|Chose|Choosing|selected)\s+(?P<what>[A-Za-z][\w.-]{2,})")


def selected_tokens(lines: Iterable[str]) -> set[str]:
    """Words of the kernels a log line says were selected ("Selected CutlassFP8ScaledMMLinearKernel
    for Fp8LinearMethod", "Using FLASH_ATTN attention backend")."""
    out: set[str] = set()
    for ln in lines:
        for m in _SELECTED.finditer(ln):
            out |= {w for w in words(m.group("what")) if len(w) >= 4 and w not in _GENERIC}
    return out


def read_here(sites: Iterable[str], frames: Iterable[str], package: str | None) -> str | None:
    """The failing frame ("path:function", innermost last) that is a site reading the name (a
    variable, a setting's field: bringup/observe/sourcescan.py)."""
    own = set(sites)
    for f in reversed(list(frames)):
        p = package_path(f, package) if package else f
        if p is not None and ":" in f and f"{p.split(':', 1)[0]}:{f.rsplit(':', 1)[1]}" in own:
            return f
    return None


def read_in_module(
    sites: Iterable[str], frames: Iterable[str], package: str | None, innermost: int = 4
) -> str | None:
    """The innermost failing frame of the engine's own (one of the ``innermost`` last) whose file
    reads the variable, in any of its functions: weaker than the very function (``read_here``),
    and a lead only for a variable the user set (a person asks which of their settings the failing
    code reads: VLLM_MQ_MAX_CHUNK_BYTES_MB is read by the multiprocessing executor's set-up, which
    builds the message queue whose enqueue failed, two frames below its collective_rpc)."""
    files = {s.split(":", 1)[0] for s in sites}
    for p in reversed(engine_frames(list(frames), package, innermost)):
        if p.split(":", 1)[0] in files:
            return p
    return None
