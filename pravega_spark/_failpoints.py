"""Crash and pause points for tests.

``PRAVEGA_SPARK_FAILPOINT=<name>`` SIGKILLs the process at ``<name>`` (the crash tests kill a real
process between two commits of a workflow); ``PRAVEGA_SPARK_PAUSE=<name>=<seconds>`` sleeps there
(a test lets a concurrent commit land inside a transaction). Both are no-ops unless the
environment names the point.
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
