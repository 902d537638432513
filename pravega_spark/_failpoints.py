"""Crash points for tests: ``PRAVEGA_SPARK_FAILPOINT=<name>`` SIGKILLs the process at ``<name>``.

Used by the crash tests to kill a real process between two commits of a workflow; a no-op unless
the environment variable names the point.
"""

from __future__ import annotations

import os
import signal


def failpoint(name: str) -> None:
    if os.environ.get("PRAVEGA_SPARK_FAILPOINT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
