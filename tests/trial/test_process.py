"""Teardown leaves nothing behind: a process group, stray descendants, the port."""

import os
import sys
import textwrap
import time

import psutil

from bringup.guard.secrets import Redactor
from bringup.trial.process import ServerProcess, free_port, port_is_free

# A "server" that binds a port, forks a worker ignoring SIGTERM, and a grandchild that leaves
# the process group (setsid) - the worst case for a teardown that only signals the group.
SERVER = textwrap.dedent("""
    import os, signal, socket, sys, time
    port = int(sys.argv[1])
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port)); s.listen()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if os.fork() == 0:
            os.setsid()
            os.write(1, f"grandchild {os.getpid()}\\n".encode())  # one write: lines never interleave
            time.sleep(600)
        os.write(1, f"worker {os.getpid()}\\n".encode())
        time.sleep(600)
    os.write(1, f"secret is {os.environ.get('HF_TOKEN')}\\n".encode())
    os.write(1, b"ready\\n")
    time.sleep(600)
""")


def _pids(server: ServerProcess, word: str) -> list[int]:
    return [int(ln.text.split()[1]) for ln in server.all_lines if ln.text.startswith(word)]


def test_terminate_kills_group_strays_and_frees_port(tmp_path):
    port = free_port()
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    env = {**os.environ, "HF_TOKEN": "hf_supersecretvalue123"}
    server = ServerProcess(
        [sys.executable, str(script), str(port)], tmp_path / "server.log", env=env, redactor=Redactor(env)
    )
    deadline = time.monotonic() + 30  # three Python processes start on two busy cores
    while time.monotonic() < deadline and not (
        _pids(server, "grandchild")
        and _pids(server, "worker")
        and any(ln.text == "ready" for ln in server.all_lines)
    ):
        time.sleep(0.05)
    kids = _pids(server, "grandchild") + _pids(server, "worker")
    assert len(kids) == 2 and not port_is_free(port)
    report = server.terminate(grace=0.5, port=port)
    # The worker ignores SIGTERM: either the orphan guard (bringup/data/orphanguard) kills it once
    # its parent, the leader, has gone, or teardown's SIGKILL does; never SIGTERM alone without it.
    assert report.signal_used in ("SIGTERM", "SIGKILL")
    assert report.leftover_pids == [] and report.port_free
    for pid in [server.pid, *kids]:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    log = (tmp_path / "server.log").read_text()
    assert "hf_supersecretvalue123" not in log and "secret is ***" in log


def test_lines_are_timestamped_as_they_stream(tmp_path):
    code = "import time\nprint('a', flush=True)\ntime.sleep(0.5)\nprint('b', flush=True)\n"
    server = ServerProcess([sys.executable, "-c", code], tmp_path / "s.log")
    server.proc.wait(timeout=10)
    server.terminate(grace=0.5)
    a, b = server.all_lines[0], server.all_lines[1]
    assert (a.text, b.text) == ("a", "b")
    assert b.t - a.t >= 0.4  # stamped as each arrived, not together at the end


def test_terminate_of_exited_process_is_quick(tmp_path):
    server = ServerProcess([sys.executable, "-c", "print('bye')"], tmp_path / "s.log")
    server.proc.wait(timeout=10)
    report = server.terminate(grace=5)
    assert report.signal_used == "none" and report.leftover_pids == []


def test_port_is_free_detects_listener():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    assert not port_is_free(port)
    s.close()
    assert port_is_free(port)
