"""Turn a device run of a user-setting corpus into a corpus of tests/data/usercorpus/, off the device.

Given the corpus's manifest (usercorpus-h200.yaml, usercorpus2-h200.yaml: written before the run),
one engine and the run's results folder (the session's `res/`: usercorpus/<engine>-<name>.log,
usercorpus/<engine>-<name>.requests.txt, usercorpus/index.txt, help/<engine>-<version>.txt,
<engine>-doctor.json), it copies each case's log to tests/data/logs/usercorpus/NAME-<case>.log and
writes tests/data/usercorpus/NAME.yaml in the schema of tests/data/usercorpus/README.md (the
pydantic `Corpus` of benchmarks/user_setting_corpus.py): `facts` from the doctor's facts plus the
tiny model's (as in sglang-h100.yaml), the split from the manifest, `note` for dev cases only,
`expect_class` only where --expect-class names it, and `probes` for the cases that sent requests
(`late_req`), from their requests file, in the words bringup's probe runner gives them (as the
two probe cases of sglang-h100.yaml).

A case whose log is missing, or that the index calls skipped, is left out. It prints counts per
split only, never a sealed case's content.

Run:  PYTHONPATH=. python tests/data/gpu/usercorpus_yaml.py --manifest tests/data/gpu/usercorpus2-h200.yaml \
        --engine sglang --results tests/data/gpu/h200-YYYY-MM-DD/res --out sglang-h200b
      [--logs-dir DIR --corpus-dir DIR]  (defaults: tests/data/logs/usercorpus, tests/data/usercorpus)
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT / "tests" / "data" / "logs" / "usercorpus"
CORPORA = ROOT / "tests" / "data" / "usercorpus"
# The tiny model's facts (`bringup testmodel`'s default preset), as every corpus of it holds them.
MODEL_FACTS_FROM = CORPORA / "sglang-h100.yaml"
DROP_FACTS = {"host.memory_available_gib"}  # a reading of the moment, not kept in the corpora


def rel(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(ROOT))
    except ValueError:
        return str(p)


def index_lines(results: Path, engine: str) -> dict[str, str]:
    """case name -> its line in usercorpus/index.txt (the last one, if it ran twice)."""
    out: dict[str, str] = {}
    idx = results / "usercorpus" / "index.txt"
    if idx.exists():
        for line in idx.read_text(errors="replace").splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] == engine:
                out[parts[1]] = line
    return out


def facts(results: Path, engine: str, version: str) -> dict:
    doctor = results / f"{engine}-doctor.json"
    out: dict = {}
    if doctor.exists():
        out = {k: v for k, v in yaml.safe_load(doctor.read_text())["facts"].items() if k not in DROP_FACTS}
    model = yaml.safe_load(MODEL_FACTS_FROM.read_text())["facts"]
    out.update({k: v for k, v in model.items() if k.startswith("model.")})
    out["engine.name"] = engine
    out["engine.version"] = version
    return out


# ----------------------------------------------------------------------------------- probes ----
_HEAD = re.compile(r"^(GET|POST) (\S+)( \(stream\))?: (\S+)(?: (?:in|after) [0-9.]+ s)?(?: (.*))?$")


def parse_requests(text: str) -> list[dict]:
    """The harness's requests file: one entry per request (method, path, stream, code, body)."""
    entries: list[dict] = []
    for line in text.splitlines():
        m = _HEAD.match(line)
        if m:
            code = m.group(4)
            entries.append(
                {
                    "method": m.group(1),
                    "path": m.group(2),
                    "stream": bool(m.group(3)),
                    "code": int(code) if code.isdigit() else None,
                    "body": (m.group(5) or "").strip(),
                }
            )
        elif entries:
            entries[-1]["body"] = (entries[-1]["body"] + "\n" + line).strip()
    return entries


def _connection_words(body: str) -> str:
    """urllib's words for a dropped connection, as the probe runner's HTTP client says them."""
    if "RemoteDisconnected" in body or "closed connection without response" in body:
        return "RemoteProtocolError: Server disconnected without sending a response."
    if "Connection refused" in body:
        return "ConnectError: [Errno 111] Connection refused"
    if "timed out" in body.lower():
        return "ReadTimeout: timed out"
    return body.splitlines()[0] if body else "no answer"


def probes(text: str) -> list[dict]:
    """The first probes of bringup's ladder (health, completion, chat) from the harness's answers:
    health once /health answered 200; then each request until the server is gone."""
    entries = parse_requests(text)
    out: list[dict] = []
    health = next((e for e in entries if e["path"] == "/health"), None)
    if not health or health["code"] != 200:
        return out
    models = next((e for e in entries if e["path"] == "/v1/models"), None)
    model_id = None
    if models:
        m = re.search(r'"id":\s*"([^"]+)"', models["body"])
        model_id = m.group(1) if m else None
    out.append(
        {
            "name": "health",
            "passed": True,
            "detail": f"health 200; models: {model_id}",
            "phase": "ready",
            "kind": "ok",
        }
    )
    for e in entries:
        if e["method"] != "POST":
            continue
        name = "chat" if "chat" in e["path"] else "completion"
        where = f"POST {e['path']}{' (stream)' if e['stream'] else ''}"
        body = e["body"]
        if e["code"] is None:
            words = _connection_words(body)
            if words.startswith("ConnectError"):
                break  # the server is gone: the runner stops its ladder there
            out.append(
                {
                    "name": name,
                    "passed": False,
                    "detail": f"{where}: {words}",
                    "phase": "first-request",
                    "kind": "server-error",
                }
            )
            continue
        if e["code"] == 200:
            out.append(
                {
                    "name": name,
                    "passed": True,
                    "detail": f"{where}: HTTP 200",
                    "phase": "first-request",
                    "kind": "ok",
                }
            )
            continue
        shown = f"b{body!r}" if name == "completion" else body  # the runner's reading of each
        out.append(
            {
                "name": name,
                "passed": False,
                "detail": f"POST {e['path']}: HTTP {e['code']}: {shown}",
                "phase": "first-request",
                "kind": "server-error" if e["code"] >= 500 else "disagree",
            }
        )
    return out


# ----------------------------------------------------------------------------------- corpus ----
def convert(
    manifest: dict,
    engine: str,
    results: Path,
    name: str,
    logs_dir: Path,
    corpus_dir: Path,
    expect: dict[str, str],
    date: str,
) -> tuple[Path, Counter, Counter]:
    meta = manifest["engines"][engine]
    version = str(meta["version"])
    index = index_lines(results, engine)
    kept: list[dict] = []
    kept_n: Counter = Counter()
    left_n: Counter = Counter()
    logs_dir.mkdir(parents=True, exist_ok=True)
    for c in (c for c in manifest["cases"] if c["engine"] == engine):
        split = c.get("split", "sealed")
        log = results / "usercorpus" / f"{engine}-{c['name']}.log"
        line = index.get(c["name"], "")
        if not log.exists() or " skipped" in line or not line:
            left_n[split] += 1
            continue
        shutil.copyfile(log, logs_dir / f"{name}-{c['name']}.log")
        stage = "early" if c["stage"] == "early" else "late"
        case = {
            "name": c["name"],
            "baseline": " ".join(str(c["baseline"]).split()),
            "setting": c["setting"],
            "link": c["link"],
            "split": split,
        }
        if c["name"] in expect:
            case["expect_class"] = expect[c["name"]]
        case["command"] = f"h200_usercorpus.sh {engine} {stage}: {line}"
        if split == "dev" and c.get("note"):
            case["note"] = " ".join(str(c["note"]).split())
        req = results / "usercorpus" / f"{engine}-{c['name']}.requests.txt"
        if c.get("requests") and req.exists():
            p = probes(req.read_text(errors="replace"))
            if p:
                case["probes"] = p
        kept.append(case)
        kept_n[split] += 1
    help_file = results / "help" / f"{engine}-{version}.txt"
    corpus = {
        "engine": engine,
        "version": version,
        "model": manifest.get("model", "/tmp/tiny"),
        "help": rel(help_file) if help_file.exists() else None,
        "facts_source": (
            f"{engine} {version}'s `bringup doctor` on the lent GPU, {date} "
            f"({rel(results / f'{engine}-doctor.json')}), with the tiny model's facts "
            f"(the same `bringup testmodel` preset as {MODEL_FACTS_FROM.name})"
        ),
        "facts": facts(results, engine, version),
        "working": {
            "command": f"{meta['command'].replace(' --port PORT', '')} {meta['base']} (the corpus's base: "
            "served on the H200, 2026-12-03: docs/gpu-h200.md)",
            "log": None,
        },
        "cases": kept,
    }
    if corpus["help"] is None:
        del corpus["help"]
    header = (
        f"# The {engine} {version} user-setting corpus {name} (issue 36, item 6): real launches made by\n"
        f"# tests/data/gpu/h200_usercorpus.sh ({rel(results)}), each from the engine's working settings for the\n"
        f"# tiny test model plus ONE setting that is wrong; the cases, settings, link kinds and predictions were\n"
        f"# written before the run ({rel(Path(manifest['_path']))}). Made by tests/data/gpu/usercorpus_yaml.py.\n"
        f"# Cases whose log did not come back (or that the deadline skipped) are not here. The `sealed`\n"
        f"# cases are for measuring only. Schema: tests/data/usercorpus/README.md.\n"
    )
    corpus_dir.mkdir(parents=True, exist_ok=True)
    out = corpus_dir / f"{name}.yaml"
    out.write_text(header + yaml.safe_dump(corpus, sort_keys=False, allow_unicode=True, width=110))
    return out, kept_n, left_n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--manifest", type=Path, required=True, help="the corpus's manifest (usercorpus*-h200.yaml)"
    )
    ap.add_argument("--engine", required=True, choices=["vllm", "sglang"])
    ap.add_argument("--results", type=Path, required=True, help="the run's res/ folder")
    ap.add_argument("--out", required=True, help="the corpus's name, e.g. sglang-h200b")
    ap.add_argument("--logs-dir", type=Path, default=LOGS)
    ap.add_argument("--corpus-dir", type=Path, default=CORPORA)
    ap.add_argument("--date", default="(the run's date)", help="the run's date, for facts_source")
    ap.add_argument(
        "--expect-class",
        action="append",
        default=[],
        metavar="CASE=CLASS",
        help="a case whose class the engine's own words make certain (repeatable)",
    )
    args = ap.parse_args()
    manifest = yaml.safe_load(args.manifest.read_text())
    manifest["_path"] = str(args.manifest)
    expect = dict(x.split("=", 1) for x in args.expect_class)
    out, kept, left = convert(
        manifest, args.engine, args.results, args.out, args.logs_dir, args.corpus_dir, expect, args.date
    )
    print(f"wrote {rel(out)}")
    for split in sorted(set(kept) | set(left)):
        print(f"  {split}: {kept[split]} kept, {left[split]} left out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
