"""The Delta seam: the one package that touches Delta's JVM classes or py4j.

Everything it hands out is a plain Python value: :class:`FileEntry` (a data file as the log
records it), :class:`TableState` (a version, its table id and listed files),
:class:`PartitionSummary`, :class:`CommitMetrics`, rows as dicts, DataFrames, and the log's
changes as dicts. Everything it takes back is plain too: a commit is a list of ``FileEntry``,
:class:`Removal` and :class:`AppVersion` values.

The interface the rest of the library uses is :class:`DeltaBackend` (``backend.py``), one per
session from ``backend_for``, and its transactions' :class:`TableTransaction`
(``transaction_protocol.py``). The modules:

- ``files``: the plain values, summaries of partitions, Parquet encoding, the store's clock;
- ``retry``: Delta's conflicts recognised, bounded retries;
- ``session``: session settings, qualified paths, facts about sessions and plans;
- ``log``: log reads (versions, listed files, summaries, commits' changes);
- ``storage``: files under tables (rows without a Spark job, writes, deletes, VACUUM);
- ``relocate``: a table's log written one folder up, its data left in place (the upgrade, #68);
- ``actions``: plain values to Delta's actions and back, in batches;
- ``transaction``: a transaction driven directly (the classic backend's fence), table creation;
- ``rows``: a small table's compare-and-set, shared by both backends;
- ``local_data``: rows from this process as a DataFrame that a Spark Connect server does not keep;
- ``backend``: the ``DeltaBackend`` protocol and ``backend_for``, the one switch;
- ``classic_backend``: ``ClassicBackend``, through the JVM;
- ``jvm``: JVM classes looked up once, and the probe of OSS Delta's classes;
- ``sql``: public SQL only (each fence is one MERGE), and ``SqlTransaction``;
- ``sql_backend``: ``SqlBackend``, over ``sql``;
- ``transaction_protocol``: ``TableTransaction``, the verbs both transactions implement.
"""

from .backend import DeltaBackend, backend_for, backend_kind
from .classic_backend import ClassicBackend
from .files import (
    AppVersion,
    CommitMetrics,
    FileEntry,
    PartitionSummary,
    Removal,
    TableState,
    arrow_type,
    clock,
    commit_times,
    misplaced,
    parquet_rows_beside,
    removals,
    set_clock,
    summarize,
)
from .local_data import is_connect_session, local_frame
from .log import summarize_table, table_state
from .relocate import relocate_log
from .retry import CONFLICTS, DEFAULT_RETRY, Retry, RetryPolicy, is_conflict, retries, retrying
from .rows import replace
from .session import (
    SESSION_CONF,
    foreach_batch_here,
    observed_if_done,
    session_key,
    streaming_query_id,
    streaming_query_sink,
)
from .sql_backend import SqlBackend
from .sql_tables import set_properties
from .sql_writes import MARKS_SEGMENT, RECORD_WRITE_MARK, SINK_MARK_SCOPE
from .storage import commit_lock, local_dir, read_rows
from .transaction import DeltaTransaction
from .transaction_protocol import TableTransaction

__all__ = [
    "SINK_MARK_SCOPE",
    "CONFLICTS", "DEFAULT_RETRY", "SESSION_CONF", "AppVersion", "arrow_type", "backend_for",
    "ClassicBackend", "clock", "commit_lock", "commit_times", "CommitMetrics", "SqlBackend",
    "DeltaBackend", "DeltaTransaction", "is_connect_session", "local_frame", "MARKS_SEGMENT", "RECORD_WRITE_MARK", "FileEntry", "is_conflict", "local_dir", "misplaced",
    "observed_if_done", "parquet_rows_beside", "PartitionSummary", "read_rows", "Removal",
    "removals", "replace", "retries", "Retry", "retrying", "RetryPolicy", "session_key",
    "set_clock", "foreach_batch_here", "streaming_query_id", "streaming_query_sink", "summarize", "summarize_table",
    "table_state", "TableState", "TableTransaction", "backend_kind", "relocate_log", "set_properties",
]
