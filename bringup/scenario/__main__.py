"""python -m bringup.scenario serve|check: the scenario engine's command line.

  serve --scenario FILE [--time-scale X] [--] ENGINE FLAGS...
      Imitate the scenario's engine: validate ENGINE FLAGS against that engine version's real
      --help (argparse errors exit 2 as the engine's do), print its log, fail/hang/serve by the
      scenario's rules, answer the OpenAI API on --host/--port. Exit code 3: a bad scenario file.
  check FILE [--] [ENGINE FLAGS...]
      Validate a scenario and print a summary; with flags, also the effective configuration and
      the rule that decides the launch.

Imports stay light until the server starts, so a rejected flag exits in a fraction of a second.
"""

from __future__ import annotations

import os
import signal
import sys

# pydantic looks up plugins through every installed distribution's metadata on first use; with a
# large environment that alone costs about half a second, which a rejected flag must not pay.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

USAGE = (
    "usage: python -m bringup.scenario serve --scenario FILE [--time-scale X] [--] ENGINE FLAGS...\n"
    "       python -m bringup.scenario check FILE [--] [ENGINE FLAGS...]\n"
)
SCENARIO_ERROR = 3


def _die_by(signum: int, frame: object) -> None:
    """SIGTERM/SIGINT: stop at once (no children to wait for), dying by the signal as asked."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _split_own(args: list[str], own: dict[str, bool]) -> tuple[dict[str, str], list[str]]:
    """Leading options of ours (name -> takes value), then an optional `--`, then engine flags."""
    opts: dict[str, str] = {}
    i = 0
    while i < len(args):
        tok = args[i]
        if tok == "--":
            return opts, args[i + 1 :]
        name, eq, val = tok.partition("=")
        if name not in own:
            break
        if own[name]:
            if not eq:
                if i + 1 >= len(args):
                    raise SystemExit(f"{USAGE}error: {name} needs a value")
                val = args[i + 1]
                i += 1
            opts[name] = val
        else:
            opts[name] = "1"
        i += 1
    return opts, args[i:]


def _quick_engine(path: str) -> tuple[str, str] | None:
    """engine and engine_version straight from the YAML, before the full (slower) validation, so a
    rejected flag fails as fast as the real engine's argparse does."""
    import yaml

    from bringup.help.text import bundled_versions

    try:
        with open(path) as f:
            raw = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(raw, dict) or raw.get("engine") not in ("sglang", "vllm"):
        return None
    version = str(raw.get("engine_version"))
    return (raw["engine"], version) if version in bundled_versions(raw["engine"]) else None


def _prepare(path: str, engine_argv: list[str]):
    """Parse the engine flags like the engine, load the scenario, compute the effective config."""
    from bringup.scenario.engine_args import help_for, parse_engine_argv

    quick = _quick_engine(path)
    req = None
    if quick is not None:
        spec, text = help_for(*quick)
        req = parse_engine_argv(engine_argv, spec, quick[0], text)  # exits 2 on a bad flag
    from bringup.scenario.config import compute_config, decide
    from bringup.scenario.loader import ScenarioError, load_scenario

    try:
        sc = load_scenario(path)
    except ScenarioError as e:
        sys.stderr.write(f"bringup.scenario: bad scenario: {e}\n")
        raise SystemExit(SCENARIO_ERROR) from None
    spec, text = help_for(sc.engine, sc.engine_version)
    if req is None:
        req = parse_engine_argv(engine_argv, spec, sc.engine, text)
    cfg = compute_config(sc, spec, req.flags, req.positionals, dict(os.environ))
    return sc, cfg, decide(sc, cfg)


def _bad_override(sc, cfg, err: Exception) -> int:
    """A model override that is not JSON fails in the engine's argument handling, as here."""
    from bringup.scenario.logfmt import LogWriter, SimClock

    log = LogWriter(sc.engine, SimClock(1.0))
    log.write("Traceback (most recent call last):")
    log.write('  File "<frozen runpy>", line 198, in _run_module_as_main')
    log.write(f"json.decoder.JSONDecodeError: {err}")
    return 1


def serve(args: list[str]) -> int:
    opts, engine_argv = _split_own(args, {"--scenario": True, "--time-scale": True})
    if "--scenario" not in opts:
        sys.stderr.write(f"{USAGE}error: serve needs --scenario FILE\n")
        return 2
    raw_scale = opts.get("--time-scale") or os.environ.get("BRINGUP_TIME_SCALE") or "1"
    try:
        scale = float(raw_scale)
        if not scale > 0:
            raise ValueError
    except ValueError:
        sys.stderr.write(f"{USAGE}error: --time-scale must be a positive number, not {raw_scale!r}\n")
        return 2
    signal.signal(signal.SIGTERM, _die_by)
    signal.signal(signal.SIGINT, _die_by)
    sc, cfg, rule = _prepare(opts["--scenario"], engine_argv)
    try:
        cfg.layer_override()
    except ValueError as e:
        return _bad_override(sc, cfg, e)
    import asyncio

    from bringup.scenario.lifecycle import run

    asyncio.run(run(sc, cfg, rule, scale))
    return 0


def check(args: list[str]) -> int:
    if not args or args[0].startswith("-"):
        sys.stderr.write(f"{USAGE}error: check needs a scenario FILE\n")
        return 2
    path, rest = args[0], args[1:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    from bringup.scenario.loader import ScenarioError, load_scenario
    from bringup.scenario.summary import describe, describe_launch

    try:
        sc = load_scenario(path)
    except ScenarioError as e:
        sys.stderr.write(f"invalid: {e}\n")
        return 1
    sys.stdout.write(describe(sc))
    if rest:
        sc, cfg, rule = _prepare(path, rest)
        sys.stdout.write(describe_launch(sc, cfg, rule))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0 if args else 2
    cmd, rest = args[0], args[1:]
    if cmd == "serve":
        return serve(rest)
    if cmd == "check":
        return check(rest)
    sys.stderr.write(f"{USAGE}error: unknown command {cmd!r}\n")
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
