"""Read an engine's environment-variable registry from its source file, without importing it.

Importing vLLM or SGLang is slow and may fail on a machine without a GPU; their registries are
plain Python literals, so the AST has all we need: each variable's name, its default (the
expression as text, and the literal value where it can be worked out with the variable unset),
its choices, its type and the ``#`` comments above it (the AST drops comments, so they come from
the ``tokenize`` module by line number).

Two layouts are known (``bringup/data/env/registries.yaml`` says which file of which engine has
which layout):

- ``dict-of-getters`` (vLLM ``vllm/envs.py``): ``environment_variables = {"NAME": lambda: ...}``
  with types in the ``if TYPE_CHECKING:`` block (``VLLM_X: bool = False``) and choices given
  through ``env_with_choices("NAME", default, [choices])``.
- ``class-fields`` (SGLang ``sglang/srt/environ.py``): ``class Envs`` with typed fields
  (``NAME = EnvBool(False)``), deprecated aliases in a dict and in ``*WithAlias`` fields.

The result is plain data (dicts and lists) so that it can be written as a bundled snapshot
(``python -m bringup.env.extract``) and read back without the engine.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import io
import operator
import re
import sys
import tokenize
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from bringup.core.datafiles import DATA, KnowledgeFileError, load_yaml
from bringup.guard import files

_UNKNOWN = object()  # a default that cannot be worked out statically
_SEPARATOR = re.compile(r"^\s*(?:[=\-#*~]{3,})(?:\s*(?P<title>.*?)\s*[=\-#*~]{3,})?\s*$")
_PRAGMA = re.compile(r"^\s*(?:fmt:|noqa|type:|pylint:|isort:|--8<--|pragma)", re.I)

ENV_DATA = DATA / "env"


# -- comments --------------------------------------------------------------------------------------


def _comment_lines(source: str) -> dict[int, str]:
    """Line number -> comment text, for lines that hold nothing but a comment."""
    out: dict[int, str] = {}
    code_lines: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                out[tok.start[0]] = tok.string[1:].strip()
            elif tok.type not in (
                tokenize.NL,
                tokenize.NEWLINE,
                tokenize.INDENT,
                tokenize.DEDENT,
                tokenize.ENDMARKER,
            ):
                for ln in range(tok.start[0], tok.end[0] + 1):
                    code_lines.add(ln)
    except (tokenize.TokenError, IndentationError):
        return out
    return {ln: text for ln, text in out.items() if ln not in code_lines}


def _block_above(comments: dict[int, str], line: int) -> tuple[int, list[str]]:
    """(first line, texts) of the comment block right above ``line``, stopping at a blank line
    or a section rule; pragmas (``fmt: off``) are left out."""
    block: list[str] = []
    ln = line - 1
    while ln in comments:
        text = comments[ln]
        if _SEPARATOR.match(text):
            break
        if not _PRAGMA.match(text):
            block.append(text)
        ln -= 1
    return ln + 1, [t for t in reversed(block) if t]


def _is_heading(texts: list[str], first: int, lines: list[str]) -> bool:
    """A one-line block after a blank line, of a few words without a full stop: a group title
    (``# Logging Options``, ``# DeepGemm``), not a description of the field below it."""
    if len(texts) != 1 or first < 2 or first - 2 >= len(lines) or lines[first - 2].strip():
        return False
    words = texts[0].split()
    return len(words) <= 4 and not texts[0].rstrip().endswith((".", ":", ")"))


def _description_above(comments: dict[int, str], line: int, lines: list[str] | None = None) -> str:
    """The comment block right above ``line``, unless it is a group heading."""
    first, texts = _block_above(comments, line)
    if lines is not None and _is_heading(texts, first, lines):
        return ""
    return " ".join(texts).strip()


def _sections(comments: dict[int, str], lines: list[str] | None = None) -> list[tuple[int, str]]:
    """(line, title) of each section header: ``# === Title ===``, a title between two rules, or a
    one-line group heading after a blank line."""
    out: list[tuple[int, str]] = []
    for ln in sorted(comments):
        m = _SEPARATOR.match(comments[ln])
        if m and m.group("title"):
            out.append((ln, m.group("title")))
        elif (
            m
            and (ln + 2) in comments
            and (ln + 1) in comments
            and _SEPARATOR.match(comments[ln + 2])
            and not _SEPARATOR.match(comments[ln + 1])
        ):
            out.append((ln + 1, comments[ln + 1]))
        elif (
            lines is not None
            and (ln - 1) not in comments
            and (ln + 1) not in comments
            and ln < len(lines)
            and lines[ln].strip()
            and _is_heading([comments[ln]], ln, lines)
        ):
            out.append((ln, comments[ln]))
    return out


def _section_at(sections: list[tuple[int, str]], line: int) -> str:
    title = ""
    for ln, t in sections:
        if ln < line:
            title = t
        else:
            break
    return title


# -- static evaluation of a default -------------------------------------------------------------------

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}
_CMPOPS = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_STR_METHODS = {
    "lower",
    "upper",
    "strip",
    "lstrip",
    "rstrip",
    "split",
    "casefold",
    "startswith",
    "endswith",
    "replace",
    "get",
    "title",
}


def _bool_of(value: Any) -> bool:
    """vLLM's ``maybe_convert_bool``: None stays None, else ``bool(int(value))``."""
    return None if value is None else bool(int(value))  # type: ignore[return-value]


def _int_of(value: Any) -> Any:
    return None if value is None else int(value)


# Calls the evaluator may run: type conversions, and the environment read with nothing set.
_CALLS: dict[str, Any] = {
    "bool": bool,
    "int": int,
    "float": float,
    "str": str,
    "tuple": tuple,
    "list": list,
    "set": set,
    "dict": dict,
    "frozenset": frozenset,
    "len": len,
    "maybe_convert_bool": _bool_of,
    "maybe_convert_int": _int_of,
}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


class _Evaluator:
    """Evaluates a default expression with the environment empty; unknown constructs give up.

    Only literals, arithmetic, comparisons, conditionals, type conversions and the reads
    ``os.getenv(name, default)`` / ``os.environ.get`` / ``name in os.environ`` are understood:
    nothing from the engine is imported or run.
    """

    def __init__(self, names: dict[str, Any] | None = None):
        self.names: dict[str, Any] = dict(names or {})

    def __call__(self, node: ast.AST) -> Any:
        try:
            return self.ev(node)
        except Exception:  # any construct or value it cannot handle: the default is not static
            return _UNKNOWN

    def ev(self, node: ast.AST) -> Any:  # one branch per node type
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            vals = [self.ev(e) for e in node.elts]
            return (
                tuple(vals)
                if isinstance(node, ast.Tuple)
                else (set(vals) if isinstance(node, ast.Set) else vals)
            )
        if isinstance(node, ast.Dict):
            return {
                self.ev(k): self.ev(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None
            }
        if isinstance(node, ast.Name):
            if node.id in self.names:
                return self.names[node.id]
            raise ValueError(node.id)
        if isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if dotted == "os.environ":
                return {}
            if dotted in self.names:
                return self.names[dotted]
            raise ValueError(dotted)
        if isinstance(node, ast.NamedExpr):
            value = self.ev(node.value)
            self.names[node.target.id] = value
            return value
        if isinstance(node, ast.UnaryOp):
            v = self.ev(node.operand)
            if isinstance(node.op, ast.Not):
                return not v
            if isinstance(node.op, ast.USub):
                return -v
            if isinstance(node.op, ast.UAdd):
                return +v
            raise ValueError("unary")
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](self.ev(node.left), self.ev(node.right))
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                v = True  # Any, as every value ev returns
                for e in node.values:
                    v = self.ev(e)
                    if not v:
                        return v
                return v
            v = False
            for e in node.values:
                v = self.ev(e)
                if v:
                    return v
            return v
        if isinstance(node, ast.Compare):
            left = self.ev(node.left)
            for op, comp in zip(node.ops, node.comparators, strict=True):
                right = self.ev(comp)
                if not _CMPOPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self.ev(node.body) if self.ev(node.test) else self.ev(node.orelse)
        if isinstance(node, ast.Subscript):
            return self.ev(node.value)[self.ev(node.slice)]
        if isinstance(node, ast.Call):
            return self.call(node)
        raise ValueError(type(node).__name__)

    def call(self, node: ast.Call) -> Any:
        name = _dotted(node.func)
        args = [self.ev(a) for a in node.args if not isinstance(a, ast.Starred)]
        kwargs = {k.arg: self.ev(k.value) for k in node.keywords if k.arg}
        if name in ("os.getenv", "os.environ.get"):
            return args[1] if len(args) > 1 else kwargs.get("default")
        if name in _CALLS:
            return _CALLS[name](*args, **kwargs)
        if isinstance(node.func, ast.Attribute) and node.func.attr in _STR_METHODS:
            target = self.ev(node.func.value)
            if isinstance(target, (str, dict)):
                return getattr(target, node.func.attr)(*args, **kwargs)
        raise ValueError(name)


def _plain(value: Any) -> Any:
    """A value as YAML-friendly data (tuples and sets become lists)."""
    if isinstance(value, (tuple, list, set, frozenset)):
        items = [_plain(v) for v in value]
        return sorted(items, key=str) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


# -- types ----------------------------------------------------------------------------------------------


def type_of_annotation(text: str) -> tuple[str, list[str]]:
    """A TYPE_CHECKING annotation as (type, choices): ``Literal["a", "b"]`` gives choice."""
    if "Literal[" in text:
        return "choice", re.findall(r"""["']([^"']*)["']""", text.split("Literal[", 1)[1])
    for word, kind in (
        ("bool", "bool"),
        ("float", "float"),
        ("int", "int"),
        ("list", "list"),
        ("set", "list"),
        ("tuple", "list"),
        ("dict", "json"),
        ("str", "str"),
        ("Path", "str"),
    ):
        if re.search(rf"\b{word}\b", text):
            return kind, []
    return "unknown", []


def _type_of_value(value: Any) -> str:
    if value is _UNKNOWN or value is None:
        return "unknown"
    for t, kind in (
        (bool, "bool"),
        (int, "int"),
        (float, "float"),
        (str, "str"),
        ((list, tuple, set), "list"),
        (dict, "json"),
    ):
        if isinstance(value, t):
            return kind
    return "unknown"


def _entry(
    name: str,
    type_: str,
    default: Any,
    default_text: str,
    choices: list[str],
    description: str,
    section: str,
    **extra: Any,
) -> dict[str, Any]:
    e: dict[str, Any] = {"name": name, "type": type_}
    if default is not _UNKNOWN:
        e["default"] = _plain(default)
    e["default_text"] = default_text
    if choices:
        e["choices"] = [str(c) for c in choices]
    e["description"] = description
    if section:
        e["section"] = section
    e.update({k: v for k, v in extra.items() if v not in (None, "", [], {})})
    return e


# -- layout: dict of getters (vLLM) ------------------------------------------------------------------------

_CHOICE_HELPERS = {
    "env_with_choices": "choice",
    "env_list_with_choices": "list",
    "env_set_with_choices": "list",
}


def _type_checking_annotations(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and _dotted(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    out[stmt.target.id] = ast.unparse(stmt.annotation)
    return out


def extract_dict_of_getters(source: str, dict_name: str = "environment_variables") -> dict[str, Any]:
    """Variables of a ``NAME -> getter`` dict (vLLM ``envs.py``)."""
    tree = ast.parse(source)
    comments = _comment_lines(source)
    lines = source.splitlines()
    sections = _sections(comments, lines)
    annotations = _type_checking_annotations(tree)
    table: ast.Dict | None = None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.AnnAssign, ast.Assign)):
            continue
        target = (
            node.target
            if isinstance(node, ast.AnnAssign)
            else (node.targets[0] if len(node.targets) == 1 else None)
        )
        if isinstance(target, ast.Name) and target.id == dict_name and isinstance(node.value, ast.Dict):
            table = node.value
            break
    if table is None:
        raise ValueError(f"no `{dict_name} = {{...}}` dict in the file")
    variables = []
    for key, value in zip(table.keys, table.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        name = key.value
        choices: list[str] = []
        kind = ""
        if isinstance(value, ast.Call) and _dotted(value.func) in _CHOICE_HELPERS:
            kind = _CHOICE_HELPERS[_dotted(value.func)]
            args = list(value.args) + [k.value for k in value.keywords if k.arg in ("default", "choices")]
            default_node = args[1] if len(args) > 1 else None
            default = _Evaluator()(default_node) if default_node is not None else _UNKNOWN
            default_text = ast.unparse(default_node) if default_node is not None else ""
            ch = _Evaluator()(args[2]) if len(args) > 2 else _UNKNOWN
            if isinstance(ch, (list, tuple)):
                choices = [str(c) for c in ch]
        elif isinstance(value, ast.Lambda):
            default = _Evaluator()(value.body)
            default_text = ast.unparse(value.body)
        else:
            default, default_text = _UNKNOWN, ast.unparse(value)
        annotation = annotations.get(name, "")
        ann_kind, ann_choices = type_of_annotation(annotation) if annotation else ("unknown", [])
        if kind == "choice" and choices:
            type_ = "choice"
        elif kind == "list":
            type_ = "list"
        elif ann_kind != "unknown":
            type_, choices = ann_kind, (choices or ann_choices)
        else:
            type_ = _type_of_value(default)
        variables.append(
            _entry(
                name,
                type_,
                default,
                default_text,
                choices,
                _description_above(comments, key.lineno, lines),
                _section_at(sections, key.lineno),
                annotation=annotation,
            )
        )
    return {"variables": variables, "deprecated": []}


# -- layout: class fields (SGLang) -----------------------------------------------------------------------

_FIELD_TYPES = {
    "EnvBool": "bool",
    "EnvInt": "int",
    "EnvFloat": "float",
    "EnvStr": "str",
    "EnvTuple": "list",
    "EnvJSON": "json",
}


def _int_enums(tree: ast.Module) -> dict[str, dict[str, int]]:
    """``class X(IntEnum)`` members, so that ``EnvInt(X.OFF)`` has a value and choices."""
    out: dict[str, dict[str, int]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and any(_dotted(b).endswith("IntEnum") for b in node.bases):
            members = {}
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.Assign)
                    and isinstance(stmt.targets[0], ast.Name)
                    and isinstance(stmt.value, ast.Constant)
                    and isinstance(stmt.value.value, int)
                ):
                    members[stmt.targets[0].id] = stmt.value.value
            out[node.name] = members
    return out


def _field_type(call: ast.Call) -> tuple[str, bool]:
    """(type, is an alias field) of ``EnvBool(...)``, ``EnvIntWithAlias(...)``, ..."""
    fname = _dotted(call.func)
    alias = fname.endswith("WithAlias")
    base = fname[: -len("WithAlias")] if alias else fname
    return _FIELD_TYPES.get(base, "unknown"), alias


def extract_class_fields(
    source: str, class_name: str = "Envs", deprecations: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Typed fields of a registry class (SGLang ``environ.py``) and its deprecated aliases."""
    tree = ast.parse(source)
    comments = _comment_lines(source)
    lines = source.splitlines()
    sections = _sections(comments, lines)
    enums = _int_enums(tree)
    names = {f"{cls}.{m}": v for cls, members in enums.items() for m, v in members.items()}
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if cls is None:
        raise ValueError(f"no `class {class_name}` in the file")
    variables: list[dict[str, Any]] = []
    deprecated: list[dict[str, Any]] = []
    for stmt in cls.body:
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Call)
        ):
            continue
        type_, alias = _field_type(stmt.value)
        if type_ == "unknown" and not _dotted(stmt.value.func).startswith("Env"):
            continue
        name = stmt.targets[0].id
        default_node = (
            stmt.value.args[0]
            if stmt.value.args
            else next((k.value for k in stmt.value.keywords if k.arg == "default"), None)
        )
        default = _Evaluator(names)(default_node) if default_node is not None else _UNKNOWN
        choices: list[str] = []
        if default_node is not None and isinstance(default_node, ast.Attribute):
            enum = enums.get(_dotted(default_node.value))
            if enum:
                choices = [str(v) for v in enum.values()]
        kw = {k.arg: k.value for k in stmt.value.keywords if k.arg}
        secret_node, old_node = kw.get("secret"), kw.get("deprecated_name")
        secret = isinstance(secret_node, ast.Constant) and secret_node.value is True
        if alias and isinstance(old_node, ast.Constant):
            old = old_node.value
            deprecated.append(
                {"name": old, "replacement": name, "note": "alias read when the new name is unset"}
            )
        variables.append(
            _entry(
                name,
                type_,
                default,
                ast.unparse(default_node) if default_node is not None else "",
                choices,
                _description_above(comments, stmt.lineno, lines),
                _section_at(sections, stmt.lineno),
                secret=secret or None,
            )
        )
    deprecated += _deprecations(tree, deprecations or [])
    seen: dict[str, dict] = {}
    for d in deprecated:
        seen.setdefault(d["name"], d)
    return {"variables": variables, "deprecated": list(seen.values())}


def _const(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) or node is None:
        return None
    v = _Evaluator()(node)  # implicit string concatenation in parentheses is one Constant already
    return v if isinstance(v, str) else None


def _deprecations(tree: ast.Module, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Deprecated names, from the places the registry file lists them (``registries.yaml``).

    Spec kinds: ``{dict: NAME}`` (old name -> a call with ``replacement=``/``note=`` keywords),
    ``{dict_map: NAME}`` (old name -> new name), ``{call: FUNC, old: i, new: j, note: k}``
    (positional arguments of a helper called once per deprecated name).
    """
    out: list[dict[str, Any]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            if not isinstance(target, ast.Name) or not isinstance(node.value, ast.Dict):
                continue
            for spec in specs:
                if spec.get("dict") == target.id:
                    for k, v in zip(node.value.keys, node.value.values, strict=True):
                        old = _const(k)
                        if old is None:
                            continue
                        kws = {kw.arg: kw.value for kw in v.keywords} if isinstance(v, ast.Call) else {}
                        pos = v.args if isinstance(v, ast.Call) else []
                        out.append(
                            {
                                "name": old,
                                "replacement": _const(kws.get("replacement") or (pos[0] if pos else None)),
                                "note": _const(kws.get("note")) or "",
                            }
                        )
                elif spec.get("dict_map") == target.id:
                    for k, v in zip(node.value.keys, node.value.values, strict=True):
                        if _const(k):
                            out.append(
                                {"name": _const(k), "replacement": _const(v), "note": spec.get("note", "")}
                            )
        elif isinstance(node, ast.Call):
            for spec in specs:
                if spec.get("call") and _dotted(node.func) == spec["call"]:
                    args = node.args

                    def arg(i: int | None, args: list[ast.expr] = args) -> str | None:
                        return _const(args[i]) if i is not None and i < len(args) else None

                    old = arg(spec.get("old"))
                    if old:
                        out.append(
                            {
                                "name": old,
                                "replacement": arg(spec.get("new")),
                                "note": arg(spec.get("note")) or spec.get("note_text", ""),
                            }
                        )
    return [{k: v for k, v in d.items() if v is not None} for d in out]


# -- names read directly, outside the registry ---------------------------------------------------------------


def direct_reads(package_dir: Path, prefixes: list[str], exclude: set[str] | None = None) -> list[str]:
    """Names with one of ``prefixes`` that the package reads with ``os.getenv``/``os.environ`` itself.

    SGLang reads many ``SGLANG_*`` variables outside ``class Envs``; without them, a name absent
    from the class would be wrongly called ignored.
    """
    alt = "|".join(re.escape(p) for p in prefixes)
    reads = r"os\.(?:getenv|environ\.get|environ\.setdefault|environ\s*\[)\(?\s*"
    pattern = re.compile(reads + r"""["']((?:""" + alt + r""")[A-Z0-9_]+)["']""")
    found: set[str] = set()
    for path in sorted(Path(package_dir).rglob("*.py")):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        found.update(pattern.findall(text))
    return sorted(found - (exclude or set()))


# -- one entry point ------------------------------------------------------------------------------------------


def extract(source: str, options: dict[str, Any]) -> dict[str, Any]:
    """The registry in ``source`` (text of the file), read as ``options`` (an entry of
    ``registries.yaml``: ``layout`` and its names) say."""
    layout = options.get("layout")
    if layout == "dict-of-getters":
        return extract_dict_of_getters(source, options.get("dict", "environment_variables"))
    if layout == "class-fields":
        return extract_class_fields(source, options.get("class", "Envs"), options.get("deprecations"))
    raise ValueError(f"unknown registry layout {layout!r}")


def snapshot(
    engine: str, version: str, path: Path, spec: dict[str, Any], origin: str, package_dir: Path | None = None
) -> dict[str, Any]:
    """A bundled snapshot document: the extracted registry and where it came from."""
    text = Path(path).read_text()
    doc = extract(text, spec)
    if spec.get("scan_direct_reads") and package_dir is not None:
        known = {v["name"] for v in doc["variables"]}
        doc["direct_reads"] = direct_reads(package_dir, spec.get("prefixes", []), known)
    return {
        "engine": engine,
        "version": version,
        "source": {
            "file": spec["file"],
            "origin": origin,
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
        },
        "generated_by": "python -m bringup.env.extract",
        "counts": {
            "variables": len(doc["variables"]),
            "deprecated": len(doc["deprecated"]),
            "direct_reads": len(doc.get("direct_reads", [])),
        },
        **doc,
    }


@lru_cache(maxsize=1)
def registries() -> dict[str, dict[str, Any]]:
    doc = load_yaml(ENV_DATA / "registries.yaml") or {}
    if not isinstance(doc, dict):
        raise KnowledgeFileError(f"{ENV_DATA / 'registries.yaml'}: expected a mapping of engines")
    for engine, spec in doc.items():
        for key in ("package", "file", "layout"):
            if key not in spec:
                raise KnowledgeFileError(f"{ENV_DATA / 'registries.yaml'}: {engine}: missing `{key}`")
    return doc


def registry_spec(engine: str) -> dict[str, Any]:
    """Where ``engine`` keeps its registry and how to read it (``registries.yaml``)."""
    specs = registries()
    if engine not in specs:
        raise KnowledgeFileError(
            f"no environment-variable registry is described for {engine!r}; known: {', '.join(specs)}"
        )
    return specs[engine]


def snapshot_path(engine: str, version: str) -> Path:
    """The bundled snapshot file of ``engine`` ``version`` (it may not exist)."""
    return ENV_DATA / f"{engine}-{version}.yaml"


def main(argv: list[str] | None = None) -> int:
    """Write a snapshot: ``python -m bringup.env.extract ENGINE VERSION PACKAGE_DIR --origin TEXT``."""
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("engine")
    ap.add_argument("version")
    ap.add_argument(
        "package_dir", type=Path, help="the engine's package directory (e.g. .../site-packages/vllm)"
    )
    ap.add_argument(
        "--origin", required=True, help="where the package came from (wheel name and sha256, commit)"
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    spec = registry_spec(args.engine)
    doc = snapshot(
        args.engine, args.version, args.package_dir / spec["file"], spec, args.origin, args.package_dir
    )
    out = args.out or snapshot_path(args.engine, args.version)
    header = (
        f"# {args.engine} {args.version}: environment-variable registry, generated from the engine's own\n"
        f"# {spec['file']} by `python -m bringup.env.extract` (do not edit; regenerate). Schema: docs/knowledge.md.\n"
    )
    files.write_text(out, header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120))
    print(f"{out}: {doc['counts']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
