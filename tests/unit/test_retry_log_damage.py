"""``retrying`` never retries a damaged log (a gap in its versions), even when the error's text
also names a conflict (a JVM stack trace through a commit that lost its put-if-absent)."""

from __future__ import annotations

import pytest

from pravega_spark import _delta

NOT_CONTIGUOUS = (
    "[DELTA_VERSIONS_NOT_CONTIGUOUS] Versions ([0, 1, 3, 4]) are not contiguous. A gap in the delta log between "
    "versions 1 and 3 was detected while trying to load version 4.\n"
    "JVM stacktrace:\norg.apache.spark.sql.delta.DeltaIllegalStateException: [DELTA_VERSIONS_NOT_CONTIGUOUS] ...\n"
    "\tat org.apache.spark.sql.delta.OptimisticTransactionImpl.checkForConflicts(...)\n"
    "Suppressed: java.nio.file.FileAlreadyExistsException: s3a://b/t/_delta_log/00000000000000000004.json\n")


def test_a_gap_in_the_log_is_not_a_conflict_even_when_a_conflict_is_named_in_its_trace():
    assert not _delta.is_conflict(RuntimeError(NOT_CONTIGUOUS))
    assert not _delta.is_conflict(RuntimeError("[DELTA_VERSIONS_NOT_CONTIGUOUS] Versions ([0, 2]) are not contiguous."))
    assert _delta.is_conflict(RuntimeError("java.nio.file.FileAlreadyExistsException: .../00004.json"))  # unchanged


def test_retrying_raises_a_gap_in_the_log_at_once():
    calls = []

    def step():
        calls.append(1)
        raise RuntimeError(NOT_CONTIGUOUS)

    with pytest.raises(RuntimeError, match="DELTA_VERSIONS_NOT_CONTIGUOUS"):
        _delta.retrying(step, "a read", _delta.RetryPolicy(attempts=5, initial_backoff=0.0, max_backoff=0.0))
    assert len(calls) == 1
