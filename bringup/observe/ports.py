"""Whose port a port-in-use failure is.

"Address already in use" is the machine's business only when the port is the server's own: the
one bringup picked for the launch, taken by another process between the pick and the bind (a race:
launch again on another port, nothing learned of the configuration). When the failure names
another port, the address is one a setting of the launch gives (a distributed-init address, a
KV connector's or a ZMQ socket's port, a torch TCPStore's master port): the failure is that
setting's, and the search must learn from it like any other. Relaunching it on a new server port
changes nothing: a run that treated every such failure as the machine's relaunched the same
configuration until its budget was spent. (An engine's own internal port, a free one it picked,
raced by another process, also names another port: rare, as engines check that a port is free
first, and it does not come back on the next launch, while a setting's port fails every time, so
the search soon tells the two apart.)

Port forms read (each from a real message): torch's TCPStore "port: 29500, useIpv6: 0, code: -98,
name: EADDRINUSE, message: address already in use" (modelscope/ms-swift#3988, om-ai-lab/VLM-R1#289),
"The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use)"
(showlab/Tune-A-Video#90), Python's "[Errno 98] Address already in use: ('127.0.0.1', 5000)"
(litnimax/astconfman#19), ZMQ's "Address already in use (addr='tcp://127.0.0.1:5557')".
"""

from __future__ import annotations

import re

from bringup.observe.outcome import Outcome

_IN_USE = re.compile(r"address already in use|EADDRINUSE|Errno 98|errno: 98", re.IGNORECASE)
_PORTS = (
    re.compile(r"\bport[\s:=]+(\d{2,5})\b", re.IGNORECASE),
    re.compile(r"(?:\d{1,3}(?:\.\d{1,3}){3}|localhost|\]|::|[A-Za-z][\w-]*(?:\.[\w-]+)+):(\d{2,5})\b"),
    re.compile(r"\('[^']*',\s*(\d{2,5})\)"),
)


def ports_named(lines: list[str]) -> set[int]:
    """The port numbers the lines that say an address is in use name (all lines if none says so)."""
    said = [ln for ln in lines if _IN_USE.search(ln)] or lines
    return {int(m.group(1)) for ln in said for rx in _PORTS for m in rx.finditer(ln)}


def _ports_of(out: Outcome) -> set[int]:
    """The ports a failure's evidence and root exception name."""
    return ports_named([*out.evidence, out.root_exception or ""])


def server_port(argv: list[str]) -> int | None:
    """The port the launch's own command gives the server (``--port N`` or ``--port=N``)."""
    for i, a in enumerate(argv):
        value = (
            a.partition("=")[2]
            if a.startswith("--port=")
            else (argv[i + 1] if a == "--port" and i + 1 < len(argv) else "")
        )
        if value.isdigit():
            return int(value)
    return None


def server_port_race(out: Outcome) -> bool:
    """A port-in-use failure that is the server's own port (or that names no port at all, as the
    uvicorn bind does): the machine's race, not the configuration's. False for any other failure,
    and for one that names a port other than the server's."""
    if out.failure_class != "port-in-use":
        return False
    if out.phase == "spawn":  # bringup's own check before the launch: its pick was taken
        return True
    named = _ports_of(out)
    own = server_port(out.argv)
    return not named or (own is not None and own in named)


def setting_port_hint(out: Outcome) -> str:
    """What to say of a port-in-use failure that is not the server's own port."""
    named = ", ".join(str(p) for p in sorted(_ports_of(out)))
    own = server_port(out.argv)
    return (
        f"The address in use is port {named}, not the server's own"
        + (f" ({own})" if own is not None else "")
        + ": a setting of the launch gives it (a distributed-init address, a connector's or a socket's "
        "port). Free that port or give the setting another one; relaunching on a new server port "
        "changes nothing."
    )
