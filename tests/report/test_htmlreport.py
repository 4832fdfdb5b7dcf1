"""The HTML report: what the page says, what it draws, that log text cannot run, checked in a real
headless Chromium (the rendered DOM and a screenshot), plus the plot geometry and links in Python."""

from __future__ import annotations

import math
import os
import shutil
import signal
import struct
import subprocess
import time
import zlib
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import psutil
import pytest

from bringup.observe.outcome import Outcome, ProbeResult, Timings
from bringup.record.results import Attempt, Prediction, RunResult
from bringup.report.html import load_tunes, render_html, svg, write_html
from bringup.tuning.result import SweepPoint, TunePoint, TuneResult
from tests.conftest import group_alive

XSS = "<script>alert(1)</script>"
# A log line with everything an HTML page must escape: a tag, an ampersand, both quotes.
EVIL = f"RuntimeError: bad value {XSS} & \"double\" 'single' <img src=x onerror=alert(2)>"
BASELINE = (
    "python -m sglang.launch_server --model-path zai-org/GLM-5-NVFP4 --tp 8 --quantization modelopt_fp4 "
    "--kv-cache-dtype fp8_e4m3 --mem-fraction-static 0.95"
)
FINAL = (
    "python -m sglang.launch_server --model-path zai-org/GLM-5-NVFP4 --tp 8 --quantization modelopt_fp4 "
    "--kv-cache-dtype fp8_e4m3 --nsa-decode-backend trtllm"
)
SWEEP = (1, 2, 4, 16, 64, 128)


# -- fixtures: a bring-up run with trial folders, and a tuning session --------------------------


def _trial(run_dir: Path, name: str, status: str, evidence: list[str], probes: list[ProbeResult]) -> Path:
    d = run_dir / "trials" / name
    d.mkdir(parents=True)
    (d / "server.log").write_text("starting\n" + "\n".join(evidence) + "\n")
    out = Outcome(
        status=status,
        evidence=evidence,
        probes=probes,
        timings=Timings(total=3.0),  # type: ignore[arg-type]
        log_path=str(d / "server.log"),
    )
    (d / "outcome.json").write_text(out.model_dump_json())
    return d


def make_run(run_dir: Path) -> RunResult:
    """Six launches as in the seeds' story; attempt 2's evidence and hint carry hostile text, and
    attempt 3's recorded trial path is stale (the run folder was moved since)."""
    ok = [
        ProbeResult(name="health", passed=True, detail="health 200"),
        ProbeResult(name="long-decode", passed=True, detail="256 tokens, 256 finite logprobs"),
    ]
    spec = [  # number, purpose, changes, status, class, phase, evidence, simulated s
        (
            1,
            "search",
            "(baseline)",
            "fails",
            "oom-graph-capture",
            "graph-capture",
            ["Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 1.12 GiB."],
            683.0,
        ),
        (
            2,
            "screen",
            "drop --mem-fraction-static",
            "fails",
            "nan-output",
            "decode",
            [EVIL, "torch.AcceleratorError: CUDA error: device-side assert triggered"],
            59.0,
        ),
        (
            3,
            "screen",
            "--nsa-decode-backend fa3",
            "fails",
            "unsupported-hardware",
            "kv-alloc",
            ["AssertionError: FlashAttention v3 Backend requires SM>=80 and SM<=90."],
            47.0,
        ),
        (
            4,
            "screen",
            "drop --mem-fraction-static, --nsa-decode-backend trtllm",
            "works",
            None,
            None,
            [],
            74.0,
        ),
        (
            5,
            "search",
            "drop --mem-fraction-static, --nsa-decode-backend trtllm",
            "works",
            None,
            None,
            [],
            756.0,
        ),
        (
            6,
            "minimize",
            "--nsa-decode-backend trtllm",
            "fails",
            "oom-graph-capture",
            "graph-capture",
            ["Exception: Capture cuda graph failed: CUDA out of memory."],
            683.0,
        ),
    ]
    attempts = []
    for n, purpose, changes, status, cls, phase, ev, sim in spec:
        probes = (
            ok
            if status == "works"
            else [ProbeResult(name="completion", passed=False, detail=f"500 {XSS}", phase="decode")]
        )
        d = _trial(run_dir, f"{n:02d}-{purpose}-abc{n}", status, ev, probes)
        recorded = str(Path("/nonexistent/old-place/trials") / d.name) if n == 3 else str(d)
        attempts.append(
            Attempt(
                number=n,
                purpose=purpose,
                changes=changes,
                status=status,
                failure_class=cls,
                phase=phase,
                evidence=ev[0] if ev else "",
                wall_s=4.0 if purpose != "screen" else 1.0,
                simulated_s=sim,
                trial_dir=recorded,
                signature="nan-probability" if cls == "nan-output" else None,
                hint=f'Change the decode attention backend first {XSS} & "quotes"' if n == 2 else None,
            )
        )
    return RunResult(
        run_id="20261129-143431-sglang-GLM-5-NVFP4",
        run_dir=str(run_dir),
        status="validated",
        validated=True,
        launches=5,
        screening_launches=3,
        minimize_launches=1,
        simulated_hours=sum(s[-1] for s in spec) / 3600,
        wall_seconds=16.0,
        final_command=FINAL,
        final_candidate={},
        minimal_fix=["drop --mem-fraction-static", "--nsa-decode-backend trtllm"],
        minimal_fix_str="(drop --mem-fraction-static) --nsa-decode-backend trtllm",
        minimal_fix_verified=True,
        stop_reason="a configuration passed every probe",
        attempts=attempts,
        baseline_command=BASELINE,
        engine="sglang",
        engine_version="0.5.10.post1",
        model="zai-org/GLM-5-NVFP4",
        facts={
            "device": "cuda",
            "gpu.name": "NVIDIA RTX PRO 6000 Blackwell",
            "gpu.count": 8,
            "gpu.compute_capability": 12.0,
            "gpu.memory_gib": 95.6,
            "model.architecture": "GlmMoeDsaForCausalLM",
            "model.attention": "dsa",
            "model.moe": True,
            "model.quantization": "nvfp4",
            "model.weights_gib": 400.0,
        },
        strategy_state={
            "defaults": {"--nsa-decode-backend": {"value": "flashmla_kv", "why": "seen in launch 2"}}
        },
    )


def make_tune(run_dir: Path) -> TuneResult:
    """A 4 × 4 × 2 grid, 30 launched: 5 infeasible (CUDA graphs too big for the memory left),
    2 pruned, the rest measured with throughput and TTFT both rising with concurrency."""
    points: list[TunePoint] = []
    tdir = run_dir / "tune" / "t1" / "trials"
    n = 0
    for mrr in (32, 64, 128, 256):
        for gbs in (32, 64, 128, 256):
            for chunk in (4096, 8192):
                n += 1
                if n > 30:
                    break
                knobs = {
                    "--max-running-requests": mrr,
                    "--cuda-graph-max-bs": gbs,
                    "--chunked-prefill-size": chunk,
                }
                (tdir / f"{n:02d}").mkdir(parents=True)
                (tdir / f"{n:02d}" / "server.log").write_text("log\n")
                common = dict(
                    number=n, knobs=knobs, launch_s=5.0, simulated_s=700.0, trial_dir=str(tdir / f"{n:02d}")
                )
                if n == 12:  # the tuner ruled this one out from an earlier failure: never launched
                    common.update(launch_s=0.0, simulated_s=None, trial_dir="")
                if gbs == 256 and chunk == 8192 or n in (4, 12):
                    points.append(
                        TunePoint(
                            **common,
                            status="infeasible",
                            failure_class="oom-graph-capture",
                            phase="graph-capture",
                            evidence=f'CUDA out of memory {XSS} & "x"',
                        )
                    )
                    continue
                tps = 600.0 * math.sqrt(mrr) * (1.08 if chunk == 8192 else 1.0) + 7 * gbs + n
                ttft = 0.15 + mrr / 180 + gbs / 2000 + n / 1000
                itl = 0.02 + mrr / 20000 - gbs / 40000  # bigger CUDA graphs: faster decode steps
                points.append(
                    TunePoint(
                        **common,
                        status="pruned" if n in (9, 21) else "ok",
                        metrics={
                            "output_tps": tps,
                            "goodput_rps": tps / 300,
                            "ttft_p99_s": ttft,
                            "itl_p99_s": itl,
                            "e2e_p99_s": ttft + 256 * itl,
                        },
                        objective=tps / 300,
                    )
                )
    ok = [p for p in points if p.status == "ok"]
    # The tuner's front is on end-to-end p99 latency (its default), which TuneResult does not name.
    front = [
        p.number
        for p in ok
        if not any(
            q is not p
            and q.metrics["output_tps"] >= p.metrics["output_tps"]
            and q.metrics["e2e_p99_s"] <= p.metrics["e2e_p99_s"]
            for q in ok
        )
    ]
    best = max((p for p in ok if p.metrics["ttft_p99_s"] <= 1.0), key=lambda p: p.objective or 0)
    return TuneResult(
        tune_id="t1",
        run_dir=str(run_dir),
        engine="sglang",
        engine_version="0.5.10.post1",
        model="zai-org/GLM-5-NVFP4",
        base_command=FINAL,
        objective="goodput",
        slo={"ttft_p99": 1.0, "e2e_p99": 6.0},
        workload={"input_len": 1024, "output_len": 256},
        knobs={
            "--max-running-requests": [32, 64, 128, 256],
            "--cuda-graph-max-bs": [32, 64, 128, 256],
            "--chunked-prefill-size": [4096, 8192],
        },
        points=points,
        best=best,
        best_command=FINAL + " " + " ".join(f"{k} {v}" for k, v in best.knobs.items()),
        pareto=front,
        sweep=[
            SweepPoint(
                concurrency=c,
                output_tps=300 * c**0.7,
                rps=0.9 * c,
                goodput_rps=0.8 * c,
                ttft_p50_s=0.1 * c**0.5,
                ttft_p99_s=0.2 * c**0.6,
                itl_p99_s=0.03,
            )
            for c in SWEEP
        ],
        launches=30,
        grid_size=32,
        wall_seconds=150.0,
        simulated_hours=5.8,
    )


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    d = tmp_path / "runs" / "20261129-143431-sglang-GLM-5-NVFP4"
    d.mkdir(parents=True)
    return d


# -- a small DOM from Chromium's serialisation --------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Node:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Node | None):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node | str] = []

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.iter()

    def find_all(self, tag: str, cls: str | None = None) -> list[Node]:
        return [n for n in self.iter() if n.tag == tag and (cls is None or cls in n.classes)]

    def find(self, tag: str, cls: str | None = None) -> Node:
        found = self.find_all(tag, cls)
        assert found, f"no <{tag} class={cls}> in the page"
        return found[0]


class DomBuilder(HTMLParser):
    """html.parser unescapes text (convert_charrefs), so node text is what the browser displays."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Node("#document", {}, None)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: v or "" for k, v in attrs}, self.cur)
        self.cur.children.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, {k: v or "" for k, v in attrs}, self.cur))

    def handle_endtag(self, tag):
        n = self.cur
        while n is not None and n.tag != tag:
            n = n.parent
        if n is not None and n.parent is not None:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def parse_dom(html: str) -> Node:
    b = DomBuilder()
    b.feed(html)
    b.close()
    return b.root


# -- Chromium -----------------------------------------------------------------------------------


def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail(
        "Chromium is not installed: the HTML report test renders the page in a real browser. "
        "Run scripts/setup.sh (it installs Debian's chromium)."
    )


def run_chromium(args: list[str], profile: Path, timeout: float = 90) -> str:
    """One headless Chromium in its own process group; the whole group is killed afterwards,
    and nothing of it (nor anything using its profile folder) may be left running."""
    argv = [
        chromium_binary(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = "", f"Chromium did not finish in {timeout} s"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # the group is already gone
        proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert group_alive(proc.pid) == [], "Chromium's process group outlived the kill"
    strays = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if any(str(profile) in a for a in (p.info["cmdline"] or []))
    ]
    assert strays == [], f"Chromium processes escaped their group: {strays}"
    assert proc.returncode == 0 or out, f"Chromium failed (rc {proc.returncode}): {err[-2000:]}"
    return out


def decode_png(data: bytes) -> np.ndarray:
    """A tiny PNG decoder (8-bit RGB/RGBA, not interlaced: what Chromium writes) -> (h, w, channels)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    i, idat, hdr = 8, [], None
    while i < len(data):
        n, kind = struct.unpack(">I4s", data[i : i + 8])
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", data[i + 8 : i + 8 + n])
        elif kind == b"IDAT":
            idat.append(data[i + 8 : i + 8 + n])
        i += 12 + n
    assert hdr is not None
    w, h, depth, ctype, _, _, interlace = hdr
    assert depth == 8 and ctype in (2, 6) and interlace == 0, f"unexpected PNG format {hdr}"
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(b"".join(idat)), w * bpp
    out = np.zeros((h, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.uint8)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=y * (stride + 1) + 1)
        if f == 0:
            cur = line
        elif f == 1:  # Sub: a running sum per channel
            cur = (
                (np.cumsum(line.reshape(w, bpp), axis=0, dtype=np.uint64) & 0xFF)
                .astype(np.uint8)
                .reshape(stride)
            )
        elif f == 2:  # Up
            cur = line + prev
        else:  # Average, Paeth: each byte needs its reconstructed left neighbour
            row, up = bytearray(line.tobytes()), prev.tobytes()
            for x in range(stride):
                a = row[x - bpp] if x >= bpp else 0
                b = up[x]
                if f == 3:
                    row[x] = (row[x] + ((a + b) >> 1)) & 0xFF
                else:
                    c = up[x - bpp] if x >= bpp else 0
                    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                    row[x] = (row[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
            cur = np.frombuffer(bytes(row), dtype=np.uint8)
        out[y] = cur
        prev = out[y]
    return out.reshape(h, w, bpp)


@pytest.fixture(scope="module")
def browser(tmp_path_factory) -> dict:
    """Render one full report (bring-up + tuning) in Chromium once: its DOM and a screenshot."""
    base = tmp_path_factory.mktemp("html")
    rd = base / "runs" / "20261129-143431-sglang-GLM-5-NVFP4"
    rd.mkdir(parents=True)
    result, tune = make_run(rd), make_tune(rd)
    page = write_html(rd, result, [tune])
    url = page.resolve().as_uri()
    dom = run_chromium(["--dump-dom", url], base / "profile-dom")
    png = base / "report.png"
    run_chromium([f"--screenshot={png}", "--window-size=1400,2000", url], base / "profile-shot")
    if os.environ.get("BRINGUP_SCREENSHOT"):  # a copy to look at: the test cannot judge readability
        shutil.copy(png, os.environ["BRINGUP_SCREENSHOT"])
    return {
        "dir": rd,
        "page": page,
        "result": result,
        "tune": tune,
        "dom": parse_dom(dom),
        "html": dom,
        "png": png,
    }


# -- the page in the browser --------------------------------------------------------------------


@pytest.mark.slow
def test_browser_headline_and_facts(browser):
    dom, r = browser["dom"], browser["result"]
    h1 = dom.find("h1").text()
    assert (
        "zai-org/GLM-5-NVFP4" in h1 and "8 × NVIDIA RTX PRO 6000 Blackwell (SM120)" in h1 and "SGLang" in h1
    )
    assert dom.find("span", "verdict").text() == "Validated"
    line = dom.find("span", "result-line").text()
    assert "5 launches (3 screening with dummy weights, 2 full) + 1 to minimize the fix" in line
    assert f"{r.simulated_hours:.2f} simulated hours of launches (15 s real)" in line
    assert dom.find("code", "minimal-fix").text() == r.minimal_fix_str
    cmd = dom.find("pre", "final-command")
    assert cmd.text() == FINAL  # exactly the command: copying it must give something runnable
    assert "compute capability 12.0" in dom.find("dd", "machine").text()
    assert "DSA attention, MoE, NVFP4" in dom.find("dd", "model").text()


@pytest.mark.slow
def test_browser_attempt_table(browser):
    dom, r = browser["dom"], browser["result"]
    rows = dom.find("table", "attempts").find("tbody").find_all("tr")
    assert len(rows) == len(r.attempts)
    cells = [[td.text().strip() for td in row.find_all("td")] for row in rows]
    assert [c[0] for c in cells] == ["1", "2", "3", "4", "5", "6"]
    assert cells[0][1:6] == ["(baseline)", "full", "fails", "oom-graph-capture", "graph-capture"]
    assert cells[3][3] == "works" and cells[3][6].startswith("all probes passed")
    assert cells[5][2] == "minimize"
    assert cells[1][6].startswith(EVIL[:60])  # the hostile line, shown as text
    assert "min sim." in cells[0][7] and "real" in cells[0][7]
    # A failed attempt's number links to its failure card.
    assert rows[1].find("a").attrs["href"] == "#attempt-2" and dom.find_all("div", "failure")


@pytest.mark.slow
def test_browser_escapes_log_text(browser):
    dom, html = browser["dom"], browser["html"]
    # The browser built no element from log text: no script, no img, no event-handler attribute.
    assert dom.find_all("script") == []
    assert dom.find_all("img") == []
    assert not [n for n in dom.iter() if any(k.lower().startswith("on") for k in n.attrs)]
    assert "<script>" not in html.lower() and "<img" not in html.lower()
    # ... and it shows that text literally, quotes and ampersand included.
    card = next(n for n in dom.find_all("div", "failure") if n.attrs.get("id") == "attempt-2")
    assert EVIL in card.find("pre", "evidence").text()
    assert f'Change the decode attention backend first {XSS} & "quotes"' in card.find("p", "hint").text()
    assert f"500 {XSS}" in card.text()  # the failed probe's detail
    assert f'CUDA out of memory {XSS} & "x"' in dom.find("ul", "not-plotted").text()


@pytest.mark.slow
def test_browser_failures_link_logs(browser):
    dom, rd = browser["dom"], browser["dir"]
    cards = dom.find_all("div", "failure")
    assert [c.attrs["id"] for c in cards] == ["attempt-1", "attempt-2", "attempt-3", "attempt-6"]
    for card in cards:
        link = next(a for a in card.find_all("a") if a.text() == "server.log")
        href = link.attrs["href"]
        assert not href.startswith(("/", "file:")), "links must be relative to the report"
        assert (rd / unquote(href)).resolve().is_file()
    # Attempt 3 was recorded under a folder that no longer exists: found again under trials/.
    assert (
        unquote(next(a for a in cards[2].find_all("a") if a.text() == "server.log").attrs["href"])
        == "trials/03-screen-abc3/server.log"
    )
    assert "Out of memory while capturing CUDA graphs" in cards[0].text()  # the class's meaning


@pytest.mark.slow
def test_browser_timeline(browser):
    dom, r = browser["dom"], browser["result"]
    svg_el = dom.find("svg", "timeline")
    bars = svg_el.find_all("rect", "mark")
    assert len(bars) == len(r.attempts)
    status = [next(c for c in b.classes if c.startswith("status-")) for b in bars]
    assert status == [f"status-{a.status}" for a in r.attempts]
    assert [("kind-screen" in b.classes) for b in bars] == [a.purpose == "screen" for a in r.attempts]
    xs = [float(b.attrs["x"]) for b in bars]
    assert xs == sorted(xs) and len(set(xs)) == len(xs), "launches laid end to end, in order"
    widths = [float(b.attrs["width"]) for b in bars]
    assert widths[4] > 10 * widths[3], "bars are proportional to the simulated time of each launch"
    labels = [t.text() for t in svg_el.find_all("text", "mark-label")]
    assert labels == [
        "oom-graph-capture",
        "nan-output",
        "unsupported-hardware",
        "works",
        "works",
        "oom-graph-capture",
    ]
    assert "simulated minutes since the first launch" in svg_el.text()
    assert [t.text() for t in svg_el.find("g", "axis-x").find_all("text", "tick-label")][:2] == ["0", "10"]


@pytest.mark.slow
def test_browser_tuning(browser):
    dom, t = browser["dom"], browser["tune"]
    section = next(s for s in dom.find_all("section", "tune") if s.attrs.get("id") == "tune-t1")
    assert section.find("pre", "best-command").text() == t.best_command
    rows = section.find("table", "points").find("tbody").find_all("tr")
    assert len(rows) == 30
    assert [r for r in rows if "best" in r.classes][0].find("td").text().startswith(str(t.best.number))
    assert sum("pareto" in r.classes for r in rows) == len(t.pareto)

    pareto = section.find("svg", "pareto")
    measured = [p for p in t.points if p.status != "infeasible"]
    assert len(pareto.find_all("circle", "mark")) == len(measured)
    assert len(pareto.find_all("circle", "pareto")) == len(t.pareto)
    assert len(pareto.find_all("circle", "pruned")) == 2
    assert len(pareto.find_all("circle", "ring")) == 1
    assert pareto.find_all("polyline", "front") and pareto.find_all("polyline", "slo")
    assert "output tok/s" in pareto.text() and "E2E p99 latency (s)" in pareto.text()
    cells = [td.text().strip() for td in rows[11].find_all("td")]
    assert cells[0] == "12" and cells[-1] == "not launched" and not rows[11].find_all("a")
    assert cells[-2].startswith("oom-graph-capture: CUDA out of memory")  # spans the numbers' columns
    assert rows[11].find_all("td")[-2].attrs["colspan"] == "6"  # objective + 5 metrics
    infeasible = section.find("ul", "not-plotted").find_all("li")
    assert len(infeasible) == sum(p.status == "infeasible" for p in t.points) == 5

    sweeps = section.find_all("svg", "sweep")
    assert len(sweeps) == 2
    for s in sweeps:
        assert len(s.find_all("circle", "mark")) == len(SWEEP)
        assert "concurrency (requests in flight) (log scale)" in s.text()
        ticks = [x.text() for x in s.find("g", "axis-x").find_all("text", "tick-label")]
        assert ticks == ["1", "2", "4", "8", "16", "32", "64", "128"]
    assert len(section.find("table", "sweep").find("tbody").find_all("tr")) == len(SWEEP)
    logs = [a.attrs["href"] for a in section.find_all("a", "log")]
    assert len(logs) >= 29 and all((browser["dir"] / unquote(h)).is_file() for h in logs)


@pytest.mark.slow
def test_browser_screenshot(browser):
    data = browser["png"].read_bytes()
    assert len(data) > 30_000, "a screenshot this small is an empty page"
    img = decode_png(data)
    assert img.shape[:2] == (2000, 1400)
    rgb = img[:, :, :3].astype(np.uint32)
    packed = (rgb[:, :, 0] << 16) | (rgb[:, :, 1] << 8) | rgb[:, :, 2]
    colours, counts = np.unique(packed, return_counts=True)
    assert len(colours) > 200, f"only {len(colours)} colours: the page did not render (text is anti-aliased)"
    assert counts.max() < 0.95 * packed.size, "the page is nearly one colour"
    # The CSS applied: the status colours of the badges and bars are on screen.
    for name, hexcol in (("fails red", 0xC62828), ("works green", 0x2E7D32)):
        assert (packed == hexcol).sum() > 200, f"no {name} on the screenshot: styles did not apply"


# -- the same page, checked in Python (fast) -----------------------------------------------------


def test_escaped_source(run_dir):
    html = render_html(run_dir, make_run(run_dir), [make_tune(run_dir)])
    assert "<script" not in html.lower() and "<img" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&amp; &#34;double&#34; &#39;single&#39;" in html
    assert "Content-Security-Policy" in html and "default-src 'none'" in html


def test_write_html_tuning_only_and_nothing(run_dir):
    tune = make_tune(run_dir)
    page = write_html(run_dir, None, [tune])
    assert page == run_dir / "report.html" and page.is_file()
    dom = parse_dom(page.read_text())
    assert dom.find("h1").text().startswith("Tuning: zai-org/GLM-5-NVFP4")
    assert not dom.find_all("table", "attempts") and dom.find_all("svg", "pareto")
    assert not list(run_dir.glob("*.tmp")), "the page is written atomically"
    with pytest.raises(ValueError, match="nothing to report"):
        write_html(run_dir, None, [])


def test_tuning_on_ray_names_its_nodes_and_lost_points(run_dir):
    t = make_tune(run_dir)
    plain = parse_dom(render_html(run_dir, None, [t])).text()
    assert "ran on" not in plain  # on this machine: nothing to say
    t.points[0].where, t.points[1].where = "h1/aaaa1111", "h2/bbbb2222"
    t.lost_trials = ["#3 on h1/aaaa1111: NodeDiedError: the node died"]
    text = parse_dom(render_html(run_dir, None, [t])).text()
    assert "Ray nodes h1/aaaa1111, h2/bbbb2222" in text
    assert "lost with their node and run again: #3 on h1/aaaa1111: NodeDiedError" in text


def test_no_working_configuration(run_dir):
    r = make_run(run_dir)
    r = r.model_copy(
        update={
            "validated": False,
            "status": "budget",
            "final_command": None,
            "minimal_fix_str": None,
            "stop_reason": "the launch budget (5) ran out",
            "attempts": [a for a in r.attempts if a.status != "works"],
        }
    )
    dom = parse_dom(render_html(run_dir, r, []))
    assert dom.find("span", "verdict").text() == "No working configuration"
    assert "the launch budget (5) ran out" in dom.find("section", "headline").text()
    assert not dom.find_all("pre", "final-command")
    assert not [n for n in dom.find_all("h2") if n.attrs.get("id") == "probes"]


def test_missing_trial_folder_says_so(run_dir):
    r = make_run(run_dir)
    shutil.rmtree(run_dir / "trials" / "01-search-abc1")
    dom = parse_dom(render_html(run_dir, r, []))
    card = next(c for c in dom.find_all("div", "failure") if c.attrs["id"] == "attempt-1")
    assert "server.log not found" in card.text()
    assert (
        card.find("pre", "evidence").text().startswith("Exception: Capture cuda graph failed")
    )  # from findings


def test_load_tunes(run_dir):
    tune = make_tune(run_dir)
    assert load_tunes(run_dir) == []
    (run_dir / "tune" / "t1" / "tune.json").write_text(tune.model_dump_json())
    assert [t.tune_id for t in load_tunes(run_dir)] == ["t1"]
    (run_dir / "tune" / "t2").mkdir()
    (run_dir / "tune" / "t2" / "tune.json").write_text("{")
    with pytest.raises(ValueError, match="t2/tune.json"):
        load_tunes(run_dir)


def test_pareto_geometry(run_dir):
    """Higher throughput is drawn higher, the front is a staircase rising to the right, the ring
    is on the best point, and the SLO line sits at its latency."""
    tune = make_tune(run_dir)
    from bringup.report.html.page import _tune_view

    c = _tune_view(tune, run_dir, run_dir).pareto_chart
    assert c is not None
    by_title = {m.title.split()[0]: m for m in c.marks if m.shape == "circle"}
    p_hi = max((p for p in tune.points if p.status == "ok"), key=lambda p: p.metrics["output_tps"])
    p_lo = min((p for p in tune.points if p.status == "ok"), key=lambda p: p.metrics["output_tps"])
    assert by_title[f"#{p_hi.number}"].y < by_title[f"#{p_lo.number}"].y
    ring = next(m for m in c.marks if m.shape == "ring")
    assert (ring.x, ring.y) == (by_title[f"#{tune.best.number}"].x, by_title[f"#{tune.best.number}"].y)
    front = next(line for line in c.lines if line.cls == "front")
    pts = [tuple(map(float, p.split(","))) for p in front.points.split()]
    assert all(b[0] >= a[0] and b[1] <= a[1] for a, b in zip(pts, pts[1:], strict=False))
    slo = next(line for line in c.lines if line.cls == "slo")
    t0, t1 = c.xticks[0], c.xticks[-1]
    expected = t0.pos + (6.0 - float(t0.label)) / (float(t1.label) - float(t0.label)) * (t1.pos - t0.pos)
    assert float(slo.points.split(",")[0]) == pytest.approx(expected)
    assert slo.label == "SLO E2E p99 6 s"


def test_ticks():
    assert svg.nice_ticks(0, 23) == [0, 5, 10, 15, 20, 25]
    assert svg.nice_ticks(0, 0.37) == [0, 0.1, 0.2, 0.3, 0.4]
    assert svg.nice_ticks(0, 22535) == [0, 5000, 10000, 15000, 20000, 25000]
    t = svg.nice_ticks(3, 3)
    assert t[0] < 3 < t[-1]
    assert svg.fmt_num(0.25, 0.25) == "0.25" and svg.fmt_num(20000, 5000) == "20,000"
    scale, ticks = svg.log2_axis([1, 128], 0, 700)
    assert [t.label for t in ticks] == ["1", "2", "4", "8", "16", "32", "64", "128"]
    assert scale(1) == 0 and scale(128) == 700 and scale(8) == pytest.approx(300)
    assert svg.wants_log2([1, 2, 4, 16, 64]) and not svg.wants_log2([10, 20, 30])


def test_wall_time_timeline_without_gpu(run_dir):
    """A real CPU run has no simulated time: the timeline uses wall seconds, the title the CPUs."""
    r = make_run(run_dir)
    r = r.model_copy(
        update={
            "simulated_hours": None,
            "facts": {"device": "cpu", "cpu.count": 16, "host.memory_gib": 64},
            "attempts": [a.model_copy(update={"simulated_s": None}) for a in r.attempts],
        }
    )
    from bringup.report.html.page import _run_view

    view = _run_view(r, run_dir)
    assert view.title.startswith("Bring-up: zai-org/GLM-5-NVFP4 on no GPU (CPU build): 16 CPUs")
    assert view.time_line == "15 s of launches"
    c = view.timeline
    assert c is not None and c.xlabel == "seconds since the first launch"
    bars = [m for m in c.marks if m.shape == "rect"]
    assert [round(b.w / bars[1].w) for b in bars] == [4, 1, 1, 1, 4, 4]  # 4 s full launches, 1 s screens


def test_baseline_judged_before_launch(run_dir):
    """Knowledge ruled the baseline out, so it was never launched: row 0 says why."""
    r = make_run(run_dir)
    r = r.model_copy(
        update={
            "attempts": r.attempts[1:],
            "predictions": [
                Prediction(
                    flag="--mem-fraction-static",
                    level="0.95",
                    verdict="risky",
                    rule="plan",
                    reason="0.95 × 96 GB leaves 3.1 GB <b>for graphs</b>",
                    source="plan",
                )
            ],
        }
    )
    dom = parse_dom(render_html(run_dir, r, []))
    first = dom.find("table", "attempts").find("tbody").find_all("tr")[0]
    cells = [td.text().strip() for td in first.find_all("td")]
    assert cells[:4] == ["0", "(baseline, not launched)", "plan", "predicted fail"]
    assert "--mem-fraction-static 0.95: 0.95 × 96 GB leaves 3.1 GB <b>for graphs</b>" in cells[6]
