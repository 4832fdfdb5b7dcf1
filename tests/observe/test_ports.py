"""Whose port a port-in-use failure is (bringup/observe/ports.py): the server's own, or a setting's."""

from __future__ import annotations

from bringup.observe.outcome import Outcome
from bringup.observe.ports import ports_named, server_port, server_port_race, setting_port_hint

TCPSTORE = (
    "RuntimeError: The server socket has failed to listen on any local network address. "
    "port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use"
)


def taken(line: str, phase: str = "distributed-init", port: int = 8123) -> Outcome:
    return Outcome(
        status="fails",
        failure_class="port-in-use",
        phase=phase,
        evidence=[line],
        argv=["python", "-m", "sglang.launch_server", "--model-path", "m", "--port", str(port)],
    )


def test_the_ports_real_messages_name():
    assert ports_named([TCPSTORE]) == {29500}
    assert ports_named(
        ["The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use)."]
    ) == {29500}
    assert ports_named(["OSError: [Errno 98] Address already in use: ('127.0.0.1', 5000)"]) == {5000}
    assert ports_named(["zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5557')"]) == {5557}
    assert ports_named(["ERROR: [Errno 98] error while attempting to bind: address already in use"]) == set()
    # only the lines that say an address is in use, when some do: a log's other ports are not it
    assert ports_named(["listening on 127.0.0.1:9000", TCPSTORE]) == {29500}


def test_the_servers_port_is_read_from_the_launch_command():
    assert server_port(["vllm", "serve", "m", "--port", "8001"]) == 8001
    assert server_port(["vllm", "serve", "m", "--port=8002"]) == 8002
    assert server_port(["vllm", "serve", "m"]) is None


def test_only_the_servers_own_port_is_the_machines_race():
    assert server_port_race(taken("[Errno 98] Address already in use: ('0.0.0.0', 8123)"))
    assert server_port_race(taken("ERROR: [Errno 98] address already in use"))  # names none: as before
    assert server_port_race(
        taken("port 8123 on 127.0.0.1 is already in use (checked before launch)", "spawn")
    )
    assert not server_port_race(taken(TCPSTORE))  # a setting's master port
    assert not server_port_race(Outcome(status="fails", failure_class="bad-flag", evidence=[TCPSTORE]))
    hint = setting_port_hint(taken(TCPSTORE))
    assert "29500" in hint and "8123" in hint
