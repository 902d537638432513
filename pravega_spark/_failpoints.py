"""Crash and pause points for tests.

``PRAVEGA_SPARK_FAILPOINT=<name>`` SIGKILLs the process at ``<name>`` (the crash tests kill a real
process between two commits of a workflow); ``PRAVEGA_SPARK_PAUSE=<name>=<seconds>`` sleeps there
(a test lets a concurrent commit land inside a transaction); ``PRAVEGA_SPARK_HOLD=<name>=<file>``
creates ``<file>.held`` and waits there until ``<file>`` exists (at most 5 minutes: a test
releases a thread held between two commits). All are no-ops unless the environment names the point.
"""

from __future__ import annotations

import os
import signal
import time


def failpoint(name: str) -> None:
    if os.environ.get("PRAVEGA_SPARK_FAILPOINT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
    pause = os.environ.get("PRAVEGA_SPARK_PAUSE", "")
    if pause.startswith(name + "="):
        time.sleep(float(pause[len(name) + 1:]))
    hold = os.environ.get("PRAVEGA_SPARK_HOLD", "")
    if hold.startswith(name + "="):
        release, deadline = hold[len(name) + 1:], time.monotonic() + 300
        open(release + ".held", "w").close()
        while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.05)
