"""Check the H200 user-setting corpus before (and after) a device session, off the device.

1. Every case of tests/data/gpu/usercorpus-h200.yaml is the launch h200_usercorpus.sh makes (its
   environment, the engine's base flags less any the case sets itself, the case's flags; its stage;
   whether it sends requests), and every case of the script is in the manifest.
2. bringup reads each baseline, and the three-mistake baselines of h200_vllm.sh and h200_sglang.sh
   ($USERBAD, the same as the manifest's `usermistakes`), as a person writes it (`parse_command`: JSON values in shell quotes), against the
   engine's help: bringup's bundled capture (vLLM 0.32.0, SGLang 0.5.23) or, with --help-dir, the
   captures a device session brings back ($RES/help/ENGINE-VERSION.txt: vLLM 0.24.0, SGLang 0.5.16).
3. No predicted error spells the setting at fault (its flag, or its variable's name).

Run:  PYTHONPATH=. python tests/data/gpu/usercorpus_check.py [--help-dir DIR]
      [--manifest tests/data/gpu/usercorpus2-h200.yaml --script tests/data/gpu/usercorpus2-h200.sh]
(defaults: the first corpus, usercorpus-h200.yaml and h200_usercorpus.sh; a corpus whose manifest
has no `usermistakes` skips step 2's three-mistake baselines)
Exit status 1 on a mismatch; a flag that the help in use does not know is reported, not fatal
(the bundled helps are of other versions than the H200's).
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

import yaml

from bringup.core.candidate import FlagError, parse_command
from bringup.help.text import HelpSpec, bundled_help, parse_help

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "usercorpus-h200.yaml"
SCRIPT = HERE / "h200_usercorpus.sh"
BUNDLED = {"vllm": "0.32.0", "sglang": "0.5.23"}
ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def script_cases(script: Path = SCRIPT) -> dict[tuple[str, str], tuple[str, list[str]]]:
    """(engine, name) -> (early|late|late_req, the case's words after its name): the cases inside
    the script's `if [ "$E" = vllm ]` ... `else` (SGLang) ... `fi` block, h200_usercorpus.sh's own or
    a UC_CASES file's."""
    out: dict[tuple[str, str], tuple[str, list[str]]] = {}
    engine = None
    for line in script.read_text().splitlines():
        if line.startswith(('if [ "$E" = vllm ]', 'elif [ "$E" = vllm ]')):
            engine = "vllm"
        elif line.startswith("else") and engine == "vllm":
            engine = "sglang"
        elif line.startswith("fi"):
            engine = None
        m = re.match(r"\s+(early|late|late_req) (\S+)(?: (.*))?$", line)
        if m and engine:
            words = shlex.split((m.group(3) or "").replace('"$UC', '"/tmp/uc'))
            out[(engine, m.group(2))] = (m.group(1), words)
    return out


def expected_baseline(base: str, words: list[str]) -> list[str]:
    env = [w for w in words if ENV.match(w)]
    flags = [w for w in words if not ENV.match(w)]
    b = shlex.split(base)
    kept: list[str] = []
    for i in range(0, len(b), 2):
        if b[i] not in flags:
            kept += b[i : i + 2]
    return env + kept + flags


def helps(help_dir: Path | None, manifest: dict) -> dict[str, tuple[str, HelpSpec]]:
    out = {}
    for engine, meta in manifest["engines"].items():
        cap = help_dir / f"{engine}-{meta['version']}.txt" if help_dir else None
        if cap and cap.exists():
            out[engine] = (f"{engine} {meta['version']} (captured)", parse_help(cap.read_text()))
        else:
            v = BUNDLED[engine]
            out[engine] = (f"{engine} {v} (bundled)", bundled_help(engine, v))
    return out


def userbad(engine: str) -> str:
    text = (HERE / f"h200_{engine}.sh").read_text()
    m = re.search(r"^USERBAD=(.*)$", text, re.M)
    assert m, f"no USERBAD in h200_{engine}.sh"
    return shlex.split(m.group(1))[0]  # the shell's own reading of the assignment


def check_case(c: dict, manifest: dict, script: dict, spec: dict) -> bool:
    """One case against the script and the help; prints its line; True when it matches."""
    kind, words = script[(c["engine"], c["name"])]
    want = expected_baseline(manifest["engines"][c["engine"]]["base"], words)
    problems = []
    if shlex.split(c["baseline"]) != want:
        problems.append(f"baseline {c['baseline']!r} but the script launches {shlex.join(want)!r}")
    if (kind == "early") != (c["stage"] == "early"):
        problems.append(f"stage {c['stage']} but the script's {kind}")
    if bool(c.get("requests")) != (kind == "late_req"):
        problems.append("requests differ")
    if c["setting"] in c["predicted"]:
        problems.append(f"the prediction spells {c['setting']}")
    where, hs = spec[c["engine"]]
    try:
        parse_command(c["baseline"], hs)
        parsed = "parses"
    except FlagError as e:
        parsed = f"not with {where}: {e}"
    mark = "OK " if not problems else "BAD"
    print(f"{mark} {c['engine']:6} {c['name']:26} {c['link']:9} {parsed[:110]}")
    for p in problems:
        print(f"      {p}")
    return not problems


def check_userbad(spec: dict, manifest: dict) -> int:
    """The three-mistake baselines: the manifest's is the script's, and bringup reads it."""
    bad = 0
    listed = {u["engine"]: u["baseline"] for u in manifest.get("usermistakes") or []}
    for engine in ("vllm", "sglang"):
        where, hs = spec[engine]
        if shlex.split(listed.get(engine, "")) != shlex.split(userbad(engine)):
            print(f"BAD {engine} USERBAD differs from the manifest's usermistakes baseline")
            bad += 1
        try:
            flags, env = parse_command(userbad(engine), hs)
            print(f"OK  {engine} USERBAD with {where}: {flags} {env or ''}")
        except FlagError as e:
            print(f"BAD {engine} USERBAD with {where}: {e}")
            bad += 1
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--help-dir", type=Path, help="ENGINE-VERSION.txt help captures (a session's $RES/help)")
    ap.add_argument("--manifest", type=Path, default=MANIFEST, help="the corpus's manifest (YAML)")
    ap.add_argument("--script", type=Path, default=SCRIPT, help="the script holding its cases")
    args = ap.parse_args()
    manifest = yaml.safe_load(args.manifest.read_text())
    script = script_cases(args.script)
    spec = helps(args.help_dir, manifest)
    listed = {(c["engine"], c["name"]) for c in manifest["cases"]}
    bad = 0
    for key in sorted(listed - set(script)):
        print(f"MISSING in the script: {key}")
        bad += 1
    for key in sorted(set(script) - listed):
        print(f"MISSING in the manifest: {key}")
        bad += 1
    bad += sum(
        not check_case(c, manifest, script, spec)
        for c in manifest["cases"]
        if (c["engine"], c["name"]) in script
    )
    if manifest.get("usermistakes"):
        bad += check_userbad(spec, manifest)
    print(
        f"{len(script)} cases in {args.script.name}, {len(listed)} in {args.manifest.name}: "
        f"{'all match' if not bad else f'{bad} problem(s)'}"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
