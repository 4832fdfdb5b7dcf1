"""Put on the PYTHONPATH of every server bringup launches: a process of a trial dies with its parent.

The parent-death signal that bringup sets (PR_SET_PDEATHSIG, bringup/trial/process.py) reaches only
the server's leader; vLLM's EngineCore and its workers are the leader's children, ignore
SIGTERM, and outlived a kill -9 of both the watchdog and bringup (6.2 GB held, issue 28). Here
each Python process of a trial (it carries BRINGUP_TRIAL_TAG) opens a pidfd of its parent and
a daemon thread waits on it: the kernel makes it readable when the parent *process* has exited
(unlike PR_SET_PDEATHSIG, which fires when the parent *thread* that forked it ends, and would
kill workers started from a short-lived thread). Then this process SIGKILLs itself, and its own
children follow the same way, down the tree. Without pidfd_open (Python < 3.9, Linux < 5.3) the
thread watches getppid() instead. Standard library only, Python 3.8+: it runs in the engine's
interpreter. An earlier sitecustomize on the path still runs after this one.
"""

import importlib
import os
import select  # here, not in the watching thread: an import there races the interpreter's start-up
import sys
import time


def _watch(ppid):
    try:
        fd = os.pidfd_open(ppid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None and os.getppid() == ppid:  # opened on the real parent, still alive
        while True:
            try:
                if select.select([fd], [], [])[0]:
                    break
            except InterruptedError:
                continue
    else:
        while os.getppid() == ppid:
            time.sleep(0.5)
    os.kill(os.getpid(), 9)


def _guard():
    if not os.environ.get("BRINGUP_TRIAL_TAG"):
        return
    ppid = os.getppid()
    if ppid <= 1:
        return
    import threading

    threading.Thread(target=_watch, args=(ppid,), name="bringup-orphan-guard", daemon=True).start()


def _chain():
    """Run the sitecustomize this one hides (a distribution's or a virtual environment's)."""
    here = os.path.dirname(os.path.abspath(__file__))
    saved = sys.path[:]
    mod = sys.modules.pop("sitecustomize", None)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    except Exception:  # the other hook's own failure must not stop the server
        pass
    finally:
        sys.path[:] = saved
        if mod is not None:
            sys.modules["sitecustomize"] = mod


try:
    _guard()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_guard)  # a forked worker watches its new parent
except Exception:
    pass
_chain()
