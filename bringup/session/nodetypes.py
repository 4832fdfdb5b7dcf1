"""One model brought up on every node type of a Ray cluster at once, with a summary per type.

A node type is a Ray custom resource ``bringup-hw-<hash>`` that a worker declares when it joins
(``bringup doctor`` prints the line; bringup/trial/rayexec.py). For each type asked for, this module runs
one ordinary bring-up (`bringup.session.run.Run`) in a thread of the driver: its trials pinned to that
type's resource (``RunSettings.node_type``), its own runs folder ``OUT/<type>/`` (journal, run
folder, FINDINGS.md, report.html, as a single run writes them), and its facts gathered on a node
of that type by a Ray task that runs what ``bringup doctor`` runs (`bringup.session.identity.gather_facts`
on the run's target), never on the driver. Then one summary: ``OUT/NODE-TYPES.md`` and
``OUT/node-types.json``.

The declared resource and the gathered facts: the resource name is authoritative for routing
(the facts task and every trial of the type ask for it, so they run only on nodes that declare
it); the facts come from the node and drive knowledge, the space, the GPU count and the memory plan.
A node declared from ``bringup doctor`` on its own machine hashes its facts to the name it
declares. Where they differ (a node declared by hand, or the scenario double, which replays the
machine its scenario describes whatever node runs it) the summary says so, and the run goes on.

A type that no alive node declares, whose facts task fails, or whose run stops with an error gets
its own line in the summary; the other types carry on. ``run.py``'s loop knows nothing of this.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from bringup.guard import secrets
from bringup.guard.safetext import md_code, md_text, safe_text
from bringup.session.identity import gather_facts, hardware_fingerprint
from bringup.session.run import Run
from bringup.session.settings import QuietObserver, RunObserver, RunSettings
from bringup.trial.rayexec import DOUBLE_GPU, RayClusterError, import_ray, resource_name, worker_command

if TYPE_CHECKING:
    from bringup.facts.modelinfo import Fingerprint
    from bringup.record.results import Attempt, Purpose, RunResult
    from bringup.search.space import Space

PREFIX = "bringup-hw-"
# A facts task resolves the target on its node: a real engine's --help, a model's headers.
FACTS_TIMEOUT_S = 600.0
SUMMARY_MD, SUMMARY_JSON = "NODE-TYPES.md", "node-types.json"


class Stopped(Exception):
    """The whole bring-up was stopped (Ctrl-C at the driver): each type's run tears down."""


class TypeResult(BaseModel):
    """One node type's line in the summary."""

    node_type: str
    nodes: int = 0  # alive nodes that declare it, when the bring-up started
    gpus: float = 0  # GPUs (or a double's bringup-gpu) those nodes declare
    status: str  # a run's status (validated, no-working-config, budget), or no-node, facts-failed, error, interrupted
    validated: bool = False
    why: str = ""
    command: str | None = None
    minimal_fix: str | None = None
    launches: int = 0
    screening_launches: int = 0
    minimize_launches: int = 0
    lost_trials: int = 0
    wall_seconds: float = 0.0  # facts and run, this type's thread from start to end
    facts_seconds: float | None = None
    simulated_hours: float | None = None
    facts_node: str | None = None  # host/node-id where the facts were gathered
    # The resource the node's facts hash to (node_type itself on a node declared from its doctor).
    facts_type: str | None = None
    declared: list[str] = Field(default_factory=list)  # the bringup-hw-* resources that node declares
    note: str = ""
    run_id: str | None = None
    runs_dir: str  # OUT/<type>: this type's journal and runs
    findings: str | None = None
    report: str | None = None


class NodeTypesResult(BaseModel):
    address: str
    asked: str
    out: str
    started: float
    wall_seconds: float
    types: list[TypeResult]

    @property
    def all_validated(self) -> bool:
        return bool(self.types) and all(t.validated for t in self.types)


@dataclass
class NodeType:
    name: str  # bringup-hw-<hash>
    nodes: int
    gpus: float


def type_name(text: str) -> str:
    """A node type as the user may write it: ``bringup-hw-<hash>``, a fingerprint ``scope:<hash>``
    (what `bringup doctor` prints), or the hash alone."""
    text = text.strip()
    if text.startswith(PREFIX):
        return text
    return resource_name(text) if ":" in text else PREFIX + text


def discover(nodes: list[dict[str, Any]]) -> dict[str, NodeType]:
    """The node types of a cluster (``ray.nodes()``): each bringup-hw-* resource of an alive node."""
    out: dict[str, NodeType] = {}
    for n in nodes:
        if not n.get("Alive"):
            continue
        res = n.get("Resources", {})
        gpus = float(res.get("GPU", 0) or res.get(DOUBLE_GPU, 0))
        for k in res:
            if k.startswith(PREFIX):
                t = out.setdefault(k, NodeType(k, 0, 0.0))
                t.nodes += 1
                t.gpus += gpus
    return out


def select(asked: str, found: dict[str, NodeType]) -> list[str]:
    """The types to bring up, in the order asked: a comma-separated list of types (kept even when
    no node declares one: it gets its line in the summary) where ``all`` is every type found."""
    out: list[str] = []
    for part in asked.split(","):
        if not part.strip():
            continue
        for name in sorted(found) if part.strip() == "all" else [type_name(part)]:
            if name not in out:
                out.append(name)
    return out


def node_facts(settings: dict[str, Any]) -> dict[str, Any]:
    """The Ray task on a node of one type: the run's target resolved there and its facts gathered
    as `bringup doctor` and a local run gather them; with where it ran and what that node declares."""
    import socket

    import ray

    from bringup.session.settings import settings_target

    s = RunSettings.model_validate(settings)
    node_id = ray.get_runtime_context().get_node_id()
    declared = sorted(
        k
        for n in ray.nodes()
        if n.get("NodeID") == node_id
        for k in n.get("Resources", {})
        if k.startswith(PREFIX)
    )
    target = settings_target(s)
    facts, model_fp = gather_facts(target)
    hw = hardware_fingerprint(facts, target.world.identity_scope())
    return {
        "facts": facts,
        "model_fp": model_fp,
        "where": f"{socket.gethostname()}/{node_id[:8]}",
        "declared": declared,
        "facts_type": resource_name(hw),
    }


def _connect(ray: Any, address: str) -> bool:
    """Connect this driver to the cluster unless it is; whether it did (then it disconnects)."""
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    except ConnectionError as e:
        raise RayClusterError(
            f"no Ray cluster at {address} ({e}); node types are those of a running "
            "cluster: start one (ray start --head), and its workers with `bringup doctor`'s line"
        ) from None
    return True


def _as_gathered(got: dict[str, Any], node_type: str) -> tuple[dict, Fingerprint | None]:
    """The facts a run of this type reads: the node's, with which node and type they describe."""
    facts = dict(got["facts"])
    facts["ray.node_type"], facts["ray.node"] = node_type, got["where"]
    return facts, got["model_fp"]


def facts_for_type(
    settings: RunSettings, timeout: float = FACTS_TIMEOUT_S
) -> tuple[dict, Fingerprint | None] | None:
    """A run pinned to a node type but started on its own (one type's run resumed) gathers its
    facts on a node of that type too; None for a run that is not pinned (its facts are this machine's)."""
    if not (settings.ray and settings.node_type):
        return None
    ray, name = import_ray(), settings.node_type
    own = _connect(ray, settings.ray)
    try:
        if name not in discover(ray.nodes()):
            raise RayClusterError(
                f"no alive node declares {name}, the node type of this run; a worker of this type "
                f"joins with: {worker_command(name)}"
            )
        ref = (
            ray.remote(node_facts)
            .options(resources={name: 0.001}, num_cpus=0, max_retries=0)
            .remote(_absolute(settings).model_dump())
        )
        try:
            got = ray.get(ref, timeout=timeout)
        except ray.exceptions.RayTaskError as e:
            raise RayClusterError(
                f"the facts task on a node of {name} failed: {_first_line(e.cause or e)}"
            ) from None
        except ray.exceptions.GetTimeoutError:
            ray.cancel(ref, force=True)
            raise RayClusterError(f"no node of {name} gathered the facts within {timeout:.0f} s") from None
    finally:
        if own:
            ray.shutdown()
    return _as_gathered(got, name)


def _absolute(settings: RunSettings) -> RunSettings:
    """Paths as the nodes read them: a scenario or model folder named relative to the driver's
    folder is sent absolute (Ray's workers start elsewhere)."""
    upd: dict[str, Any] = {}
    for key in ("scenario", "model", "space_file"):
        v = getattr(settings, key)
        if v and not os.path.isabs(v) and Path(v).exists():
            upd[key] = str(Path(v).resolve())
    return settings.model_copy(update=upd)


class _Guarded:
    """A type's observer that also stops its run once the whole bring-up is stopped (the run's
    thread raises, so its executor cancels its trials and the journal marks it interrupted)."""

    def __init__(self, inner: RunObserver, stop: threading.Event) -> None:
        self.inner, self.stop = inner, stop

    def _check(self) -> None:
        if self.stop.is_set():
            raise Stopped("stopped at the driver")

    def started(self, run_id: str, run_dir: Path, space: Space, resumed: int) -> None:
        self._check()
        self.inner.started(run_id, run_dir, space, resumed)

    def launching(self, seq: int, purpose: Purpose, changes: str, screen: bool) -> None:
        self._check()
        self.inner.launching(seq, purpose, changes, screen)

    def trial_event(self, kind: str, text: str) -> None:
        self._check()
        self.inner.trial_event(kind, text)

    def attempted(self, attempt: Attempt) -> None:
        self.inner.attempted(attempt)
        self._check()

    def finished(self, result: RunResult) -> None:
        self.inner.finished(result)


@dataclass
class NodeTypes:
    """One bring-up per node type of the cluster at ``settings.ray``, at once."""

    settings: RunSettings
    out: Path
    asked: str = "all"
    observer_for: Callable[[str], RunObserver] | None = None  # a type's progress display
    facts_timeout: float = FACTS_TIMEOUT_S

    def execute(self) -> NodeTypesResult:
        if not self.settings.ray:
            raise RayClusterError("bringing up node types needs a Ray cluster: --ray ADDRESS")
        ray = import_ray()
        own = _connect(ray, self.settings.ray)  # one connection for every type's executor: none closes it
        self.stop = threading.Event()
        self._head = "HEAD:6379" if self.settings.ray == "auto" else self.settings.ray
        t0 = time.time()
        try:
            found = discover(ray.nodes())
            names = select(self.asked, found)
            if not names:
                raise RayClusterError(
                    f"no alive node of the cluster at {self.settings.ray} declares a {PREFIX}* resource; "
                    f"each worker declares its type when it joins: {worker_command('hw:<hash>')} "
                    "(`bringup doctor` on the worker prints its line)"
                )
            self._task = ray.remote(node_facts)
            results = self._all(names, found, _absolute(self.settings))
        finally:
            if own:
                ray.shutdown()
        res = NodeTypesResult(
            address=self.settings.ray,
            asked=self.asked,
            out=str(self.out),
            started=t0,
            wall_seconds=time.time() - t0,
            types=[results[n] for n in names],
        )
        write_summary(res, self.out)
        return res

    def _all(
        self, names: list[str], found: dict[str, NodeType], settings: RunSettings
    ) -> dict[str, TypeResult]:
        """Each type in a thread of its own, all at once; a stop (Ctrl-C, SIGTERM) reaches each."""
        results: dict[str, TypeResult] = {}
        threads = [
            threading.Thread(
                target=lambda n=n: results.__setitem__(n, self._one(n, found, settings)),
                name=f"nodetype-{n}",
                daemon=True,
            )
            for n in names
        ]
        for th in threads:
            th.start()
        try:
            for th in threads:
                while th.is_alive():
                    th.join(timeout=0.5)
        except BaseException:
            self.stop.set()  # each run's next event raises: its trials torn down, its journal marked
            for th in threads:
                th.join(timeout=60)
            raise
        return results

    def _facts(self, name: str, settings: RunSettings) -> dict[str, Any]:
        """The facts task on a node of this type; waits in short steps so a stop is heard."""
        ray = import_ray()
        ref = self._task.options(resources={name: 0.001}, num_cpus=0, max_retries=0).remote(
            settings.model_dump()
        )
        deadline = time.monotonic() + self.facts_timeout
        while True:
            ready, _ = ray.wait([ref], timeout=0.5)
            if ready:
                try:
                    return ray.get(ref)
                except ray.exceptions.RayTaskError as e:  # the node's own exception, not Ray's wrapper
                    cause = getattr(e, "cause", None)
                    raise (cause if isinstance(cause, Exception) else e) from None
            if self.stop.is_set():
                ray.cancel(ref, force=True)
                raise Stopped("stopped at the driver")
            if time.monotonic() > deadline:
                ray.cancel(ref, force=True)
                raise TimeoutError(f"no answer from a node of this type within {self.facts_timeout:.0f} s")

    def _one(self, name: str, found: dict[str, NodeType], settings: RunSettings) -> TypeResult:
        """One type, start to end; never raises (its failure is its line)."""
        t0 = time.time()
        nt = found.get(name)
        base = TypeResult(
            node_type=name,
            nodes=nt.nodes if nt else 0,
            gpus=nt.gpus if nt else 0,
            status="no-node",
            runs_dir=str(self.out / name),
        )
        if nt is None:
            base.why = (
                f"no alive node declares {name}; the cluster has {', '.join(sorted(found)) or 'none'}. "
                f"A worker of this type joins with: {worker_command(name, self._head)}"
            )
            return base
        try:
            got = self._facts(name, settings)
        except Stopped:
            return base.model_copy(update={"status": "interrupted", "why": "stopped before its facts came"})
        except Exception as e:  # noqa: BLE001 - a node's failure is that type's line, not the others' end
            return base.model_copy(
                update={
                    "status": "facts-failed",
                    "why": f"the facts task on a node of this type failed: {_first_line(e)}",
                    "wall_seconds": time.time() - t0,
                }
            )
        upd: dict[str, Any] = {
            "facts_seconds": time.time() - t0,
            "facts_node": got["where"],
            "facts_type": got["facts_type"],
            "declared": got["declared"],
        }
        if name not in got["declared"]:  # Ray placed it elsewhere: never take another type's facts
            return base.model_copy(
                update={
                    **upd,
                    "status": "facts-failed",
                    "why": f"the facts task ran on {got['where']}, which does not declare {name}",
                }
            )
        if got["facts_type"] != name:
            upd["note"] = (
                f"its node's facts hash to {got['facts_type']}: trials go to the nodes that declare "
                f"{name}, knowledge reads the facts of {got['where']}"
            )
        obs = _Guarded(self.observer_for(name) if self.observer_for else QuietObserver(), self.stop)
        run = Run(
            settings.model_copy(update={"node_type": name}),
            self.out / name,
            observer=obs,
            node_facts=_as_gathered(got, name),
        )
        try:
            r = run.execute()
        except Stopped:
            return base.model_copy(
                update={**upd, "status": "interrupted", "why": "stopped at the driver", "run_id": run.run_id}
            )
        except Exception as e:  # noqa: BLE001 - as above: this type's line says what stopped it
            return base.model_copy(
                update={
                    **upd,
                    "status": "error",
                    "why": _first_line(e),
                    "run_id": run.run_id,
                    "wall_seconds": time.time() - t0,
                }
            )
        html = Path(r.run_dir) / "report.html"
        return base.model_copy(
            update={
                **upd,
                "status": r.status,
                "validated": r.validated,
                "why": r.stop_reason,
                "command": r.final_command,
                "minimal_fix": r.minimal_fix_str,
                "launches": r.launches,
                "screening_launches": r.screening_launches,
                "minimize_launches": r.minimize_launches,
                "lost_trials": len(r.lost_trials),
                "simulated_hours": r.simulated_hours,
                "run_id": r.run_id,
                "findings": str(Path(r.run_dir) / "FINDINGS.md"),
                "report": str(html) if html.exists() else None,
                "wall_seconds": time.time() - t0,
            }
        )


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"[:400]


def verdict(t: TypeResult) -> str:
    """A type's verdict in a few words."""
    if t.validated:
        return "validated"
    return {
        "no-node": "no node",
        "facts-failed": "facts failed",
        "error": "error",
        "interrupted": "interrupted",
    }.get(t.status, f"not validated ({t.status})")


def _link(path: str | None, out: Path) -> str:
    if not path:
        return ""
    p = Path(path)
    try:
        rel = p.relative_to(out)
    except ValueError:
        rel = p
    return f"[{p.name}]({rel})"


_cell = md_text  # text from outside as a Markdown cell (bringup/guard/safetext.py)


def summary_markdown(res: NodeTypesResult) -> str:
    out = Path(res.out)
    ok = sum(1 for t in res.types if t.validated)
    lines = [
        "# Bring-up per node type",
        "",
        f"Cluster `{res.address}`, node types asked: `{res.asked}`; {ok} of {len(res.types)} validated "
        f"in {res.wall_seconds:.1f} s wall. Each type's journal and runs are in `<type>/` beside this file.",
        "",
        "| node type | nodes | verdict | why | command | launches | wall s | facts from | report |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for t in res.types:
        launches = f"{t.launches}" + (f" ({t.screening_launches} screens)" if t.screening_launches else "")
        if t.minimize_launches:
            launches += f" + {t.minimize_launches} minimize"
        wall = f"{t.wall_seconds:.1f}" + (
            f" ({t.simulated_hours:.2f} sim h)" if t.simulated_hours is not None else ""
        )
        links = " ".join(x for x in (_link(t.findings, out), _link(t.report, out)) if x)
        lines.append(
            f"| `{t.node_type}` | {t.nodes} | {verdict(t)} | {_cell(t.why)} | "
            f"{md_code(t.command) if t.command else ''} | {launches} | {wall} | "
            f"{_cell(t.facts_node)} | {links} |"
        )
    notes = [f"- `{t.node_type}`: {t.note}" for t in res.types if t.note]
    if notes:
        lines += ["", "Notes:", "", *notes]
    return "\n".join(lines) + "\n"


def write_summary(res: NodeTypesResult, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / SUMMARY_MD, out / SUMMARY_JSON
    secrets.write_text(
        md, safe_text(summary_markdown(res))
    )  # commands may carry a token: scrubbed as FINDINGS.md is
    secrets.write_text(js, json.dumps(res.model_dump(), indent=2))
    return md, js
