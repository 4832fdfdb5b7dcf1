"""Issue 24 measures on the real vLLM CPU build: false alarms of the users'-use probes, ladder time.

One vLLM CPU server (the embedded default's model and flags: the tiny generated model,
--gpu-memory-utilization 0.7) is started once. Then:

- the whole ladder `--ladders` times (each probe's seconds), and, with `--before DIR` (a source tree
  of an earlier bringup, e.g. `git archive COMMIT | tar -x -C DIR`), that tree's ladder as many
  times, interleaved, in a subprocess against the same server: the ladder's time before and after;
- `--runs` times: the sampled probes (`sampled`, `sampled-reference` with the model's float32
  reference computed in-process) and the long-prompt probe. Every failure on this healthy server is
  a false alarm. Each run's long prompt differs (its number in the filler), so the long-prompt
  probe sees as many different random-weight answers. Each run also replays the long-prompt probe's old way (the answer's first half fed
  back as text, compared without checking the round trip) beside the ids the server returns, so the
  table shows how often text fed back is not the answer's own tokens, how often the old probe
  called the healthy server wrong, and how often a text round trip that keeps the token count still
  holds other tokens (the risk left where a server returns no ids: SGLang before 0.5.23).

Run (wrap it in the engine lock: it launches a real engine):
    flock /tmp/bringup-engine.lock .venv/bin/python benchmarks/sampled_probes.py --runs 100 \
        --before /tmp/probes-before
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bringup.engines.base import engine_info
from bringup.testmodel.tiny import TestModelSpec, write_test_model
from bringup.trial.process import ServerProcess, free_port
from bringup.verify import probes_user as u
from bringup.verify.probes import ProbeConfig, ProbeRunner
from bringup.verify.reference import compute_reference

# The ladder of another source tree, in its own interpreter: prints {probe: [passed, seconds, detail]}.
OLD_LADDER = """
import json, sys
from bringup.engines.base import engine_info
from bringup.verify.probes import ProbeConfig, ProbeRunner
from bringup.verify.reference import compute_reference
url, model = sys.argv[1], sys.argv[2]
sup = engine_info("vllm").probes
cfg = ProbeConfig(reference=compute_reference(model), top_k=sup.top_k, seeded=sup.seeded, request_timeout=120)
res = ProbeRunner(url, cfg).run()
print(json.dumps({r.name: [r.passed, r.seconds, r.detail[:200]] for r in res}))
"""


def wait_ready(url: str, server: ServerProcess, limit: float = 900.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if server.exited():
            raise SystemExit(f"vLLM exited with {server.poll()}")
        try:
            if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                return time.monotonic() - t0
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise SystemExit(f"vLLM not ready after {limit:.0f} s")


def users_probes(url: str, cfg: ProbeConfig) -> tuple[list, ProbeRunner]:
    """The ladder's first two probes (the model name and max_model_len, the greedy timing the stall
    deadline is derived from), then the sampled probes and the long prompt."""
    r = ProbeRunner(url, cfg)
    r.ladder = lambda: [  # type: ignore[method-assign]
        ("health", r.probe_health),
        ("completion", r.probe_completion),
        ("sampled", lambda c: u.probe_sampled(r, c)),
        ("sampled-reference", lambda c: u.probe_sampled_reference(r, c)),
        ("long-prompt", lambda c: u.probe_long_prompt(r, c)),
    ]
    return r.run(), r


def _post(client: httpx.Client, body: dict) -> dict:
    r = client.post("/v1/completions", json=body)
    r.raise_for_status()
    return r.json()


def text_round_trip(url: str, runner: ProbeRunner, half: int = 8) -> dict:
    """The long-prompt probe's old way, beside the truth the server's ids tell: the first answer,
    then the prompt plus its first half as text."""
    model, n_ctx = runner.model, runner.max_model_len or 2048
    with httpx.Client(base_url=url, timeout=120) as client:
        calib = _post(client, {"model": model, "prompt": u.long_prompt(64), "max_tokens": 1})
        per_word = max(calib["usage"]["prompt_tokens"] / 64, 0.5)
        prompt = u.long_prompt(int(int(n_ctx * 0.5) / per_word) - 8)
        common = {"model": model, "temperature": 0, "ignore_eos": True, "return_token_ids": True}
        first = _post(client, {**common, "prompt": prompt, "max_tokens": 2 * half, "logprobs": 1})
        c1 = first["choices"][0]
        toks, ids = c1["logprobs"]["tokens"], c1["token_ids"]
        fed = "".join(toks[:half])
        second = _post(client, {**common, "prompt": prompt + fed, "max_tokens": half, "logprobs": 5})
    c2 = second["choices"][0]
    got, top = c2["logprobs"]["tokens"], c2["logprobs"]["top_logprobs"]
    n1, n2 = first["usage"]["prompt_tokens"], second["usage"]["prompt_tokens"]
    same_ids = (
        c2["prompt_token_ids"][n1:] == ids[:half] and c2["prompt_token_ids"][:n1] == c1["prompt_token_ids"]
    )
    want = toks[half : 2 * half]
    k = next((i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b), None)
    tie = (
        k is not None
        and want[k] in top[k]
        and got[k] in top[k]
        and abs(top[k][got[k]] - top[k][want[k]]) < 0.5
    )
    frag = any(t == "" or "\ufffd" in t for t in toks[:half])
    return {
        "fragment": frag,
        "old_differs": k is not None and not frag,  # the old probe compared, and the halves differ
        "old_tie": k is not None and tie and not frag,  # ... at a near tie it then allowed
        "count_kept": n2 == n1 + half,  # what the new text path checks
        "same_ids": same_ids,  # the truth: the text read back as the answer's own tokens
        "old_alarm": k is not None and not tie and not any(t == "" or "\ufffd" in t for t in toks[:half]),
    }


def old_ladder(tree: Path, url: str, model: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    # cwd: `python -c` puts the working directory first on sys.path, before PYTHONPATH's tree.
    out = subprocess.run(
        [sys.executable, "-c", OLD_LADDER, url, model],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode:
        raise SystemExit(f"the old ladder failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def ladders(url: str, cfg: ProbeConfig, model: str, n: int, before: Path | None) -> dict:
    after: list[dict] = []
    old: list[dict] = []
    for _ in range(n):
        after.append({r.name: [r.passed, r.seconds, r.detail[:200]] for r in ProbeRunner(url, cfg).run()})
        if before is not None:
            old.append(old_ladder(before, url, model))
    fig = {"after": _ladder_fig(after)}
    if old:
        fig["before"] = _ladder_fig(old)
    return fig


def _ladder_fig(runs: list[dict]) -> dict:
    totals = [sum(v[1] for v in r.values()) for r in runs]
    return {
        "seconds_median": round(statistics.median(totals), 2),
        "seconds": [round(t, 2) for t in totals],
        "probes_median_s": {k: round(statistics.median(r[k][1] for r in runs), 2) for k in runs[-1]},
        "failed": [f"{k}: {v[2]}" for r in runs for k, v in r.items() if not v[0]],
        "last": {k: v[2] for k, v in runs[-1].items()},
    }


def table(fig: dict) -> str:
    runs = fig["runs"]
    rt = fig["text_round_trip"]
    rows = [
        ("runs against one healthy vLLM CPU server", runs),
        ("false alarms: sampled", fig["alarms_by_probe"].get("sampled", 0)),
        ("false alarms: sampled-reference", fig["alarms_by_probe"].get("sampled-reference", 0)),
        ("false alarms: long-prompt (ids fed back)", fig["alarms_by_probe"].get("long-prompt", 0)),
        ("long-prompt compared by token ids", fig["long_prompt_by_ids"]),
        ("... of which parted at a near tie (allowed)", fig["long_prompt_by_ids_near_tie"]),
        ("old probe (text fed back, unchecked): halves differ", rt["old_differs"]),
        ("... of those allowed as a near tie (flat logits)", rt["old_tie"]),
        ("old probe: false alarms", rt["old_alarm"]),
        ("text fed back held a byte fragment", rt["fragment"]),
        ("text fed back re-tokenized to another count", runs - rt["count_kept"]),
        ("text kept the count but not the tokens (text path's residual risk)", rt["count_kept_other_ids"]),
        ("sampled probes' time per run, median (s)", fig["sampled_seconds_median"]),
        ("long-prompt probe's time per run, median (s)", fig["long_seconds_median"]),
    ]
    if "before" in fig["ladder"]:
        rows.append(("ladder before (s, median)", fig["ladder"]["before"]["seconds_median"]))
    rows.append(("ladder after (s, median)", fig["ladder"]["after"]["seconds_median"]))
    w = max(len(r[0]) for r in rows)
    return "\n".join(f"| {a:<{w}} | {b} |" for a, b in rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--ladders", type=int, default=3, help="whole ladders (each code) for the time")
    ap.add_argument("--before", type=Path, default=None, help="source tree of the ladder to compare with")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sampled-probes-"))
    model = write_test_model(tmp / "model", TestModelSpec())
    ref = compute_reference(str(model))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model)]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--gpu-memory-utilization", "0.7"]
    server = ServerProcess(argv, tmp / "server.log")
    sup = engine_info("vllm").probes
    cfg = ProbeConfig(reference=ref, top_k=sup.top_k, seeded=sup.seeded, request_timeout=120)
    fig: dict = {}
    try:
        fig["ready_s"] = round(wait_ready(url, server), 1)
        fig["ladder"] = ladders(url, cfg, str(model), args.ladders, args.before)
        print("ladder", json.dumps({k: v["seconds"] for k, v in fig["ladder"].items()}), file=sys.stderr)
        alarms: list[str] = []
        by_probe: dict[str, int] = {}
        secs: list[float] = []
        long_secs: list[float] = []
        by_ids = 0
        rt = {
            k: 0
            for k in ("fragment", "count_kept", "count_kept_other_ids", "old_alarm", "old_differs", "old_tie")
        }
        ids_tie = 0
        filler = u.LONG_FILLER
        for i in range(args.runs):
            # Greedy answers to one prompt are one answer: each run's long prompt differs (a run
            # number in the filler), so the runs feed back `--runs` different random-weight answers.
            u.LONG_FILLER = f"Run {i}: {filler}"
            res, runner = users_probes(url, cfg)
            secs.append(sum(r.seconds for r in res if r.name.startswith("sampled")))
            long_secs += [r.seconds for r in res if r.name == "long-prompt"]
            by_ids += any(r.name == "long-prompt" and "fed back as token ids" in r.detail for r in res)
            ids_tie += any(r.name == "long-prompt" and "a near tie at token" in r.detail for r in res)
            for r in res:
                if not r.passed:
                    alarms.append(f"run {i}: {r.name}: {r.kind}: {r.detail}")
                    by_probe[r.name] = by_probe.get(r.name, 0) + 1
            t = text_round_trip(url, runner)
            rt["fragment"] += t["fragment"]
            rt["count_kept"] += t["count_kept"]
            rt["count_kept_other_ids"] += t["count_kept"] and not t["same_ids"]
            for key in ("old_alarm", "old_differs", "old_tie"):
                rt[key] += t[key]
            if i % 10 == 0:
                print(f"run {i}: {len(alarms)} false alarms so far; {rt}", file=sys.stderr)
        fig.update(
            runs=args.runs,
            false_alarms=len(alarms),
            alarms_by_probe=by_probe,
            alarms=alarms[:20],
            long_prompt_by_ids=by_ids,
            long_prompt_by_ids_near_tie=ids_tie,
            text_round_trip=rt,
            sampled_seconds_median=round(statistics.median(secs), 3),
            long_seconds_median=round(statistics.median(long_secs), 3) if long_secs else None,
            last=[r.detail[:300] for r in res if r.name in ("sampled", "sampled-reference", "long-prompt")],
        )
    finally:
        server.terminate()
    print(json.dumps(fig, indent=1))
    print(table(fig))
    if args.out:
        args.out.write_text(json.dumps(fig, indent=1))


if __name__ == "__main__":
    main()
