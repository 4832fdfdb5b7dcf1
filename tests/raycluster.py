"""A throwaway Ray cluster on this machine for tests and benchmarks: a head and worker nodes,
each a ``ray start --block`` in its own process group, on ports of their own and a temp dir of
their own, so that stopping it touches nothing else (never ``ray stop``, which stops every Ray
on the machine)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bringup.trial.slots import PortPool

RAY = str(Path(sys.executable).with_name("ray"))
REPO = Path(__file__).resolve().parents[1]


@dataclass
class Node:
    name: str
    proc: subprocess.Popen
    resources: dict[str, float]

    def kill(self) -> None:
        """The node dies at once, as a machine that loses power: every process of its group."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)


@dataclass
class LocalCluster:
    tmp: Path
    port: int
    nodes: list[Node] = field(default_factory=list)
    _ports: PortPool = field(default_factory=PortPool)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        return env

    def start_node(
        self, name: str, resources: dict[str, float], head: bool = False, cpus: int = 1, gpus: int = 0
    ) -> Node:
        """A node; ``gpus`` it declares to Ray (none need exist: Ray then only assigns their ids)."""
        p = self._ports
        # Workers' ports first, a range of 41 none of the cluster's other ports falls in (the pool
        # draws at random; Ray refuses a node whose worker range holds one of its own ports).
        w = p.take()
        while any(q in p.taken for q in range(w + 1, w + 41)):
            w = p.take()
        p.taken.update(range(w, w + 41))
        argv = [
            RAY,
            "start",
            "--block",
            "--disable-usage-stats",
            f"--num-cpus={cpus}",
            f"--num-gpus={gpus}",
            f"--resources={json.dumps(resources)}",
            "--object-store-memory=200000000",
            f"--node-manager-port={p.take()}",
            f"--object-manager-port={p.take()}",
            f"--metrics-export-port={p.take()}",
            f"--dashboard-agent-listen-port={p.take()}",
            f"--dashboard-agent-grpc-port={p.take()}",
            f"--runtime-env-agent-port={p.take()}",
            f"--min-worker-port={w}",
            f"--max-worker-port={w + 40}",
            "--node-ip-address=127.0.0.1",
        ]
        if head:
            argv += [
                "--head",
                f"--port={self.port}",
                f"--temp-dir={self.tmp}",
                "--include-dashboard=false",
                f"--ray-client-server-port={p.take()}",
            ]
        else:
            argv += [f"--address={self.address}"]
        log = open(self.tmp.parent / f"{name}.log", "wb")
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=self._env(), start_new_session=True
        )
        node = Node(name, proc, resources)
        self.nodes.append(node)
        return node

    def wait_nodes(self, n: int, timeout: float = 240.0) -> None:
        """Until ``n`` nodes are alive (asked through a short-lived driver of its own)."""
        code = (
            f"import ray; ray.init(address={self.address!r}, log_to_driver=False); "
            "print(sum(1 for n in ray.nodes() if n['Alive']))"
        )
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                r = subprocess.run(
                    [sys.executable, "-c", code], capture_output=True, text=True, env=self._env(), timeout=90
                )
            except subprocess.TimeoutExpired:
                continue
            last = r.stderr[-1500:]
            if (
                r.returncode == 0
                and r.stdout.strip().splitlines()
                and int(r.stdout.strip().splitlines()[-1]) >= n
            ):
                return
            for node in self.nodes:
                if node.proc.poll() is not None:
                    raise RuntimeError(f"ray node {node.name} exited: {self.log(node.name)[-2000:]}")
            time.sleep(1.0)
        raise TimeoutError(f"{n} ray nodes not alive after {timeout} s: {last}")

    def log(self, name: str) -> str:
        return (self.tmp.parent / f"{name}.log").read_text(errors="replace")

    def processes(self) -> list[psutil.Process]:
        """Processes of this cluster still alive: by process group, or by our temp dir on their command line."""
        out = []
        groups = {n.proc.pid for n in self.nodes}
        for p in psutil.process_iter(["pid", "cmdline"]):
            try:
                if os.getpgid(p.pid) in groups or str(self.tmp) in " ".join(p.info["cmdline"] or []):
                    out.append(p)
            except (ProcessLookupError, psutil.Error):
                continue
        return out

    def stop(self) -> None:
        """SIGTERM each node's group (ray start --block stops its node), then SIGKILL what is left."""
        for node in reversed(self.nodes):
            if node.proc.poll() is None:
                try:
                    os.killpg(node.proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 15
        while self.processes() and time.monotonic() < deadline:
            time.sleep(0.3)
        for p in self.processes():
            try:
                p.kill()
            except psutil.Error:
                pass
        for node in self.nodes:
            try:
                node.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        psutil.wait_procs(self.processes(), timeout=10)
        shutil.rmtree(self.tmp.parent, ignore_errors=True)


def local_cluster() -> LocalCluster:
    base = Path(tempfile.mkdtemp(prefix="brt-", dir="/tmp"))  # short: Ray's socket paths have a length limit
    return LocalCluster(base / "r", PortPool().take())
