"""The Delta seam: the one package that touches Delta's JVM classes or py4j.

Everything it hands out is a plain Python value: :class:`FileEntry` (a data file as the log
records it), :class:`TableState` (a version, its table id and listed files),
:class:`PartitionSummary`, :class:`CommitMetrics`, rows as dicts, DataFrames, and the log's
changes as dicts. Everything it takes back is plain too: a commit is a list of ``FileEntry``,
:class:`Removal` and :class:`AppVersion` values.

The interface the rest of the library uses is :class:`backend.DeltaBackend` (``backend.py``);
``ClassicBackend`` implements it through the JVM. The modules:

- ``files``: the plain values, summaries of partitions, Parquet encoding, the store's clock;
- ``retry``: Delta's conflicts recognised, bounded retries;
- ``session``: session settings, qualified paths, facts about sessions and plans;
- ``log``: log reads (versions, listed files, summaries, commits' changes);
- ``storage``: files under tables (rows without a Spark job, writes, deletes, VACUUM);
- ``actions``: plain values to Delta's actions and back, in batches;
- ``transaction``: a transaction driven directly (the classic backend's fence), table creation;
- ``connect``: the Spark Connect backend (public SQL only: each fence is one MERGE);
- ``dispatch``: the seam's functions, each run by its session's backend.
"""

from .backend import ClassicBackend, ConnectBackend, DeltaBackend, backend_for, replace
from .connect import is_connect
from .dispatch import (
    activate,
    added_in,
    check_root,
    configure_session,
    create_table,
    delete_files,
    delete_matching,
    estimated_size,
    exists,
    file_changes,
    in_session,
    is_stopped,
    is_table,
    latest,
    lookup,
    plan_leaves,
    pyarrow_s3_options,
    qualify,
    read,
    recent_changes,
    remove_path,
    require_classic,
    transaction,
    vacuum,
    version,
    wait_for_listeners,
)
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
    parquet_rows_beside,
    removals,
    set_clock,
    summarize,
)
from .log import summarize_table, table_state
from .retry import CONFLICTS, DEFAULT_RETRY, Retry, RetryPolicy, is_conflict, retries, retrying
from .session import (
    SESSION_CONF,
    observed_if_done,
    session_key,
    streaming_query_id,
    streaming_query_sink,
)
from .storage import commit_lock, local_dir, read_rows
from .transaction import DeltaTransaction

__all__ = [
    "CONFLICTS", "DEFAULT_RETRY", "SESSION_CONF", "AppVersion", "ClassicBackend", "CommitMetrics", "ConnectBackend",
    "backend_for", "require_classic", "is_connect", "transaction", "lookup", "delete_matching", "retries", "added_in",
    "DeltaBackend", "DeltaTransaction", "FileEntry", "check_root", "pyarrow_s3_options", "PartitionSummary", "Removal", "Retry",
    "RetryPolicy", "TableState", "activate", "arrow_type", "clock", "commit_lock", "commit_times", "configure_session",
    "create_table", "delete_files", "estimated_size", "exists", "file_changes", "in_session",
    "is_conflict", "is_stopped", "is_table", "latest", "local_dir", "observed_if_done", "parquet_rows_beside", "plan_leaves", "qualify", "streaming_query_id", "streaming_query_sink", "read", "read_rows",
    "recent_changes", "remove_path", "removals", "replace", "retrying", "session_key", "set_clock", "summarize",
    "summarize_table", "table_state", "vacuum", "version", "wait_for_listeners",
]
