"""Delta's optimistic-concurrency conflicts, recognised (they share no Python base class), and
bounded retries with exponential backoff around a step that commits once or not at all."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from delta.exceptions import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    DeltaConcurrentModificationException,
    MetadataChangedException,
    ProtocolChangedException,
)

from ..errors import RetriesExhaustedError

log = logging.getLogger("pravega_spark")

T = TypeVar("T")

CONFLICTS: tuple[type[BaseException], ...] = (
    ConcurrentAppendException,
    ConcurrentDeleteReadException,
    ConcurrentDeleteDeleteException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    MetadataChangedException,
    ProtocolChangedException,
    DeltaConcurrentModificationException,
)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and full jitter."""

    attempts: int = 30
    initial_backoff: float = 0.05
    max_backoff: float = 2.0

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.max_backoff, self.initial_backoff * (2**attempt)))


DEFAULT_RETRY = RetryPolicy()

# The message of the error a Spark Connect commit raises when the rows it was decided on changed
# before it ran (``sql.SqlTransaction``): a conflict, like Delta's own.
STALE = "pravega_spark: stale read"


# Errors that mean the log itself looks damaged (a gap in its versions), never a lost race: their
# text can carry a conflict's name too (a JVM stack trace naming the commit's FileAlreadyExists
# that led to the listing), but retrying would hide the damage. A store whose listings leave out
# files is listed again by the log store (ConditionalPutLogStore), not here.
LOG_DAMAGE = ("DELTA_VERSIONS_NOT_CONTIGUOUS",)


class Retry(Exception):
    """Raised inside a retried step to ask for another attempt (e.g. a stale read was detected)."""


def raised(exc: BaseException, message: str) -> bool:
    """Whether ``exc`` is the ``raise_error(message...)`` of our own statement, judged by its first
    line: an error that merely quotes the statement's plan (which holds the same text) is not."""
    first = str(exc).strip().split("\n", 1)[0]
    return "USER_RAISED_EXCEPTION" in first and message in first


def is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is one of Delta's optimistic-concurrency conflicts (never a damaged log)."""
    text = str(exc)
    if any(code in text for code in LOG_DAMAGE):
        return False
    if isinstance(exc, CONFLICTS):
        return True
    # Table creation races surface as a file-already-exists from the log store, and a lost
    # put-if-absent on S3 as HTTP 412 (S3A's RemoteFileChangedException) when a log store passes
    # it on; conflicts from a transaction driven through the JVM (see ``DeltaTransaction``) arrive
    # as a Py4J error naming them.
    return ("FileAlreadyExistsException" in text or "DELTA_CONCURRENT" in text
            or "RemoteFileChangedException" in text or "PreconditionFailed" in text or raised(exc, STALE)
            or any(f"exceptions.{cls.__name__}" in text for cls in CONFLICTS))


_RETRIES = [0]


def retries() -> int:
    """Attempts ``retrying`` has repeated in this process so far (conflicts and stale reads)."""
    return _RETRIES[0]


def retrying(step: Callable[[], T], what: str, policy: RetryPolicy = DEFAULT_RETRY) -> T:
    """Run ``step`` until it succeeds, retrying on Delta conflicts and :class:`Retry`.

    Raises:
        RetriesExhaustedError: after ``policy.attempts`` conflicting attempts. Each attempt is a
            single Delta commit or none, so nothing is half-written.
    """
    last: BaseException | None = None
    for attempt in range(policy.attempts):
        try:
            return step()
        except Retry as exc:
            last = exc
            log.debug("%s: retry %d (%s)", what, attempt + 1, exc)
        except Exception as exc:  # noqa: BLE001 - filtered right below
            if not is_conflict(exc):
                raise
            last = exc
            log.debug("%s: conflict on attempt %d: %s", what, attempt + 1, type(exc).__name__)
        _RETRIES[0] += 1
        if attempt + 1 < policy.attempts:
            time.sleep(policy.delay(attempt))
    raise RetriesExhaustedError(
        f"{what}: gave up after {policy.attempts} attempts conflicting with concurrent writers "
        f"(last: {type(last).__name__}: {str(last).splitlines()[0] if last else ''}); nothing was "
        "written by this call") from last

