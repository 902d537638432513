"""A transaction's identity and state, pure: ids, leases, the state encoding and the listing of
states (Pravega's ``TxnId``, lease rules and ``TxnStatus``). ``transactions`` holds the handles."""

from __future__ import annotations

import secrets
import uuid
from datetime import timedelta
from enum import Enum

from ..errors import InvalidConfigError, PingFailedError, TxnNotFoundError
from ..store.clock import from_ms, now_ms, to_ms

TXN_APP_PREFIX = "pravega-txn/"

# Pravega's controller bounds (transaction.lease.count.min/max) and execution time bound.
MIN_LEASE = timedelta(seconds=10)
MAX_LEASE = timedelta(seconds=600)
DEFAULT_LEASE = timedelta(milliseconds=600 * 1000 - 1)  # EventWriterConfig.transactionTimeoutTime
MAX_EXECUTION_TIME = timedelta(days=1)
MAX_EXECUTION_FACTOR = 1000

STATE_OPEN, STATE_COMMITTED, STATE_ABORTED = 0, 1, 2
_RANDOM_BITS = 80  # below the max execution expiry: the begin version and a nonce
_VERSION_BITS = 40
_NONCE_BITS = 40


class TxnStatus(str, Enum):
    """A transaction's status (Pravega's ``Transaction.Status``, plus ``UNKNOWN``)."""

    OPEN = "OPEN"
    COMMITTING = "COMMITTING"
    COMMITTED = "COMMITTED"
    ABORTING = "ABORTING"
    ABORTED = "ABORTED"
    UNKNOWN = "UNKNOWN"

    def __repr__(self) -> str:
        return f"TxnStatus.{self.value}"


# ---- pure helpers: ids, leases, state encoding -------------------------------------------------
def epoch_ms(now=None) -> int:
    """``now`` (default: the store's clock) in ms since the epoch: the unit of transaction times."""
    return to_ms(now) if now is not None else now_ms()


def check_lease(lease: timedelta) -> int:
    """A lease in ms, within Pravega's bounds [10 s, 600 s]."""
    if not isinstance(lease, timedelta):
        raise InvalidConfigError(f"lease must be a timedelta, got {type(lease).__name__}")
    if lease < MIN_LEASE or lease > MAX_LEASE:
        raise InvalidConfigError(f"lease {lease} is outside Pravega's bounds [{MIN_LEASE}, {MAX_LEASE}]")
    return int(lease / timedelta(milliseconds=1))


def ping_expiry(now_ms: int, lease_ms: int, max_execution_expiry_ms_: int) -> int:
    """The lease expiry a ping sets (Pravega's ``pingTxn`` rule).

    Raises:
        PingFailedError: ``now + lease`` passes the max execution time (MAX_EXECUTION_TIME_EXCEEDED).
    """
    expiry = now_ms + lease_ms
    if expiry > max_execution_expiry_ms_:
        raise PingFailedError(f"a lease until {from_ms(expiry).isoformat()} passes the transaction's max "
                              f"execution time {from_ms(max_execution_expiry_ms_).isoformat()}")
    return expiry


def new_txn_id(max_execution_expiry_ms: int, begin_version: int | None = None) -> str:
    """A transaction id: a UUID made of its max execution expiry (epoch ms, top 48 bits), the
    events table version it began after (+1, 40 bits; 0 = unknown) and 40 random bits."""
    version = 0 if begin_version is None or begin_version + 1 >= 1 << _VERSION_BITS else begin_version + 1
    return str(uuid.UUID(int=(max_execution_expiry_ms << _RANDOM_BITS) | (version << _NONCE_BITS)
                         | secrets.randbits(_NONCE_BITS)))


def begin_version(txn_id: uuid.UUID) -> int | None:
    """The events table version the transaction began after: its staged files were all added
    by later commits (None if not recorded)."""
    version = (txn_id.int >> _NONCE_BITS) & ((1 << _VERSION_BITS) - 1)
    return version - 1 if version else None


def parse_txn_id(txn_id: str | uuid.UUID) -> uuid.UUID:
    try:
        return txn_id if isinstance(txn_id, uuid.UUID) else uuid.UUID(str(txn_id))
    except ValueError:
        raise TxnNotFoundError(f"{txn_id!r} is not a transaction id") from None


def max_execution_expiry_ms(txn_id: uuid.UUID) -> int:
    return txn_id.int >> _RANDOM_BITS


def staging_partition(txn_id: uuid.UUID) -> int:
    """The transaction's staging partition: a negative ``segment_id`` no segment ever has."""
    return -1 - (txn_id.int & ((1 << 62) - 1))


def encode_state(state: int, ms: int) -> int:
    return (ms << 2) | state


def decode_state(version: int, now_ms: int) -> tuple[TxnStatus, int]:
    """(status as of ``now_ms``, lease expiry or decision time in ms) of an application version."""
    if version < 0:
        return TxnStatus.UNKNOWN, 0
    state, ms = version & 3, version >> 2
    if state == STATE_COMMITTED:
        return TxnStatus.COMMITTED, ms
    if state == STATE_ABORTED or ms <= now_ms:  # an expired lease is an abort, job or no job
        return TxnStatus.ABORTED, ms
    return TxnStatus.OPEN, ms


# ---- listings: the timeout job's and StreamManager.transactions' -----------------------------------
def transaction_states(txn, now_ms: int) -> list[dict]:
    """Every transaction recorded in the events table's log, with its status as of ``now_ms``."""
    out = []
    for app_id, (version, updated) in sorted(txn.app_versions(TXN_APP_PREFIX).items()):
        txn_id = uuid.UUID(app_id[len(TXN_APP_PREFIX):])
        status, ms = decode_state(version, now_ms)
        stored_open = (version & 3) == STATE_OPEN
        out.append({
            "txn_id": str(txn_id),
            "status": status.value,
            "lease_expiry": from_ms(ms) if stored_open else None,
            "decision_time": None if stored_open else from_ms(ms),
            "max_execution_expiry": from_ms(max_execution_expiry_ms(txn_id)),
            "last_updated": from_ms(updated) if updated is not None else None,
            "timed_out": stored_open and status is TxnStatus.ABORTED,
        })
    return out


TRANSACTIONS_DDL = ("txn_id string, status string, lease_expiry timestamp, decision_time timestamp, "
                    "max_execution_expiry timestamp, last_updated timestamp, timed_out boolean")


