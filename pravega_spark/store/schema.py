"""Names of tables and columns, record types, and the Delta schemas of every table.

Layout of a store (``root``)::

    root/_pravega/scopes              scope catalog
    root/_pravega/streams             the store table: no rows; its properties hold the store's
                                      format and shard count
    root/_pravega/s<k>/streams        shard k of the stream catalogue: each stream's row (state,
                                      configuration, and its segments), KVT rows and scope
                                      deletion marks, partitioned by stream_key (a hash)
    root/_pravega/s<k>/<kind>         shard k of a kind of per-stream rows (retention_set,
                                      subscribers, writer_marks, watermarks, autoscale, and
                                      transient: manifests of large events being written), each
                                      stream's rows in its partition ``stream_key``, in shard
                                      ``shard_of(stream_key)``; created on first use
    root/_pravega/s<k>/reader_groups  shard k of the reader groups (partitioned by group_key), and
    root/_pravega/s<k>/reader_group_members  of their members (by group_key, member_key)
    root/<scope>/<stream>             the stream: its events table (partitioned by segment_id,
                                      base_offset, end_offset), readable with plain SQL
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .. import _delta

SYSTEM_DIR = "_pravega"
# The store's format, a property of its streams table set when the store is created. 1: stores
# made before it was recorded (no property); 2: events tables may hold write marks (the public-API
# backend's write numbers, ``MARKS_SEGMENT``). A store of a format above ``STORE_FORMAT`` is refused
# (``StoreFormatError``); older ones are read as they are.
STORE_FORMAT = 3
STORE_FORMAT_PROPERTY = "pravega_spark.store.format"
# Format 3 (issue #68) keeps a stream's bookkeeping in store-level tables split into shards: the
# shard count, a power of two fixed when the store is created, is this property of the streams
# table. A stream's rows of every kind are in the shard of its key, so two streams of different
# shards never commit to the same log.
SHARDS_PROPERTY = "pravega_spark.store.shards"
# set while ``upgrade-store`` moves a store to this format: both libraries refuse the store
UPGRADE_PROPERTY = "pravega_spark.store.upgrade"
DEFAULT_SHARDS = 16
MAX_SHARDS = 256
SCOPES_TABLE = "scopes"
STREAMS_TABLE = "streams"
READER_GROUPS_TABLE = "reader_groups"
READER_GROUP_MEMBERS_TABLE = "reader_group_members"
SEGMENTS_TABLE = "segments"
RETENTION_SET_TABLE = "retention_set"
# the kinds of per-stream rows kept in shard tables (``shard_dir``/kind), in this order
AUTOSCALE_TABLE = "autoscale"
SUBSCRIBERS_TABLE = "subscribers"
TRANSIENT_TABLE = "transient"
WRITER_MARKS_TABLE = "writer_marks"
WATERMARKS_TABLE = "watermarks"
SHARD_KINDS = (RETENTION_SET_TABLE, SUBSCRIBERS_TABLE, WRITER_MARKS_TABLE, WATERMARKS_TABLE, AUTOSCALE_TABLE,
               TRANSIENT_TABLE)
# Tables emptied (not removed) by a deletion on a backend without a file system: their bytes
# leave storage at the next VACUUM (``admin.maintenance.vacuum`` visits them), which then forgets
# them once the retention it used covers their removal.
REMOVED_TABLES = "removed_tables"
REMOVED_TABLES_SCHEMA = StructType([
    StructField("path", StringType(), False),
    StructField("removal_time", TimestampType(), False),
])

# Pravega frames each event with an 8-byte header (int32 type + int32 length).
HEADER_SIZE = 8
MAX_EVENT_SIZE = 8 * 1024 * 1024
MAX_LARGE_EVENT_SIZE = 1024 * 1024 * 1024

# record_type of a row in the events table. EVENT is Pravega's wire type code for an event.
# A SEAL row closes a segment: it sits at the segment's sealed size and fences appends (see
# docs/ARCHITECTURE.md); readers never see it.
RECORD_EVENT = 0
RECORD_SEAL = 1
# A TRUNCATE row marks a segment's start offset after a truncation (offset = next_offset = the
# head's offset): it keeps the segment's length known when every event below it was deleted.
# Negative, so that a segment's max(record_type) still tells whether it is sealed.
RECORD_TRUNCATE = -1
# A STAGED row is an event of an open transaction, in the transaction's own staging partition (a
# negative segment_id): offset = the staging commit's read version, next_offset = its rank in that
# write. Never read as an event; moved into the segments by the commit (see transactions.py).
RECORD_STAGED = -2
# A large event is several CHUNK rows, contiguous in one segment: the first (offset =
# event_offset) carries the event's 8-byte header in its framing (next_offset = offset + 8 + len),
# the others only their bytes (next_offset = offset + len); the last is a CHUNK_END row. Only the
# first chunk's offset and the last one's next_offset are event boundaries (see large_events.py).
RECORD_CHUNK = -3
RECORD_CHUNK_END = -4
CHUNK_TYPES = (RECORD_CHUNK, RECORD_CHUNK_END)
# A WRITE_MARK row holds a writer's last write number on the public-API backend (where Delta's
# idempotent-write settings are refused), in the marks partition ``MARKS_SEGMENT`` below every
# staging partition: never an event (see ``_delta.sql_writes.MARKS_SEGMENT``).
RECORD_WRITE_MARK = _delta.RECORD_WRITE_MARK
MARKS_SEGMENT = _delta.MARKS_SEGMENT

# The catalog and per-stream metadata tables take a commit per state change: a checkpoint (a Spark
# job writing Parquet, about a second here) every 100 commits instead of Delta's 10. Their state is
# known without one: the checksum file of each commit lists their files.
SMALL_TABLE_PROPERTIES = {"delta.checkpointInterval": "100"}

SCOPES_SCHEMA = StructType([
    StructField("scope", StringType(), False),
    StructField("creation_time", TimestampType(), False),
])

# The streams table is partitioned by a fixed-length hash of the scoped name, not by the names
# themselves: a 250-character stream name would make a partition directory longer than file
# systems allow (255 bytes). Each stream's row still has a partition (and a fence) of its own.
STREAM_KEY = "stream_key"
# A scope's deletion mark in the streams table: a row with this (invalid) stream name in the
# partition of ``stream_key(scope, SCOPE_MARK)``, state SCOPE_DELETED and the scope's creation
# time. ``Store.mark_scope_deleted`` writes it; ``Store.insert_stream`` is fenced on it.
SCOPE_MARK = ""
SCOPE_DELETED = "SCOPE_DELETED"

SEGMENTS_SCHEMA = StructType([
    StructField("segment_id", LongType(), False),
    StructField("segment_number", IntegerType(), False),
    StructField("creation_epoch", IntegerType(), False),
    StructField("key_start", DoubleType(), False),
    StructField("key_end", DoubleType(), False),
    StructField("creation_time", TimestampType(), False),
    StructField("sealed_epoch", IntegerType(), True),
    StructField("sealed_size", LongType(), True),
])
# a segment of a stream row's ``segments`` (Delta refuses NOT NULL inside arrays)
SEGMENT_ENTRY = StructType([StructField(f.name, f.dataType, True) for f in SEGMENTS_SCHEMA.fields])

STREAMS_SCHEMA = StructType([
    StructField(STREAM_KEY, StringType(), False),
    StructField("scope", StringType(), False),
    StructField("stream", StringType(), False),
    StructField("state", StringType(), False),
    StructField("configuration", StringType(), False),
    StructField("tags", ArrayType(StringType(), False), False),
    StructField("current_epoch", IntegerType(), False),
    # the epoch transition record of a scale in progress (JSON), else null
    StructField("pending_scale", StringType(), True),
    # the head stream cut (text form) once truncated, else null (= epoch 0 at offset 0)
    StructField("head_stream_cut", StringType(), True),
    StructField("creation_time", TimestampType(), False),
    StructField("update_time", TimestampType(), False),
    # bumped by every change: the compare-and-set token of the row
    StructField("row_version", LongType(), False),
    # the truncation record (JSON, see truncation.TruncationRecord) once truncated, else null
    StructField("truncation", StringType(), True),
    # the stream's segment history (``SEGMENT_ENTRY``s by segment id): changed only by the
    # compare-and-sets of the workflows that change it (create, scale, seal); [] in KVT rows and
    # scope deletion marks
    StructField("segments", ArrayType(SEGMENT_ENTRY, True), True),
])

# Reader groups (one row per group, its own partition: the compare-and-set fence of its state,
# Pravega's state synchronizer), partitioned by a hash of the scoped group name like the streams,
# in the shard of that hash (``_pravega/s<k>/reader_groups``).
READER_GROUP_KEY = "group_key"

READER_GROUPS_SCHEMA = StructType([
    StructField(READER_GROUP_KEY, StringType(), False),
    StructField("scope", StringType(), False),
    StructField("reader_group", StringType(), False),
    StructField("configuration", StringType(), False),  # ReaderGroupConfig JSON
    StructField("generation", LongType(), False),
    StructField("state", StringType(), False),  # ReaderGroupState JSON
    StructField("creation_time", TimestampType(), False),
    StructField("update_time", TimestampType(), False),
])

# Reader group members (one row per online reader, in a partition of its own, under its group's in
# the group's shard: ``_pravega/s<k>/reader_group_members``): the positions and
# liveness a reader records every refresh interval (issue #31, Pravega's write rule). Readers'
# refreshes never conflict with each other nor with the group's row, which only ownership changes
# commit. ``incarnation`` matches the group state's record of the reader's join: a row left by an
# earlier incarnation of the same reader id is ignored.
MEMBER_KEY = "member_key"

READER_GROUP_MEMBERS_SCHEMA = StructType([
    StructField(READER_GROUP_KEY, StringType(), False),
    StructField(MEMBER_KEY, StringType(), False),
    StructField("scope", StringType(), False),
    StructField("reader_group", StringType(), False),
    StructField("reader", StringType(), False),
    StructField("incarnation", StringType(), False),
    StructField("positions", StringType(), False),  # {"scope/stream#segment": offset} JSON
    StructField("last_seen", LongType(), False),  # ms since the epoch
    StructField("update_time", TimestampType(), False),
])

# The events table (layout v2): a data file's offsets are relative to its ``base_offset``, a
# partition value fixed by the commit that adds the file (so a file's contents never depend on the
# segment's tail when it is written: see docs/ARCHITECTURE.md). ``[base_offset, end_offset)``
# covers the absolute offsets of the file's rows; both are partition values, so a read between
# two offsets prunes files from the log alone, and a segment's tail is ``max(end_offset)``.
# The absolute offset of a row is ``base_offset + rel_offset`` (``Store.events`` adds it).
EVENTS_SCHEMA = StructType([
    StructField("segment_id", LongType(), False),
    StructField("base_offset", LongType(), False),
    StructField("end_offset", LongType(), False),
    StructField("rel_offset", LongType(), False),
    StructField("rel_next_offset", LongType(), False),
    StructField("record_type", IntegerType(), False),
    StructField("routing_key", StringType(), True),
    StructField("event", BinaryType(), True),
    StructField("writer_id", StringType(), True),
    StructField("write_time", TimestampType(), False),
    # for a chunk row of a large event: the offset of the event (its first chunk), relative to
    # the row's base_offset; else null
    StructField("rel_event_offset", LongType(), True),
])

EVENTS_PARTITION = "segment_id"
EVENTS_PARTITIONS = ("segment_id", "base_offset", "end_offset")
# A file is written before its base is known: its base_offset partition value then says which
# write task wrote it (``UNPLACED - task``; its directory keeps that name), and the commit sets
# the real one (``FileEntry.placed``). Delta reads partition values from the log, never from paths.
UNPLACED = -1
# the numeric statistics a control record's file (seal, truncate) carries when written directly
EVENTS_STATS_COLUMNS = ("rel_offset", "rel_next_offset", "record_type", "rel_event_offset")
# File statistics on the columns that seals, boundaries and times are read from (and that data
# skipping uses); none on the payload or the routing key, which would only slow every write.
EVENTS_PROPERTIES = {
    "delta.dataSkippingStatsColumns": "rel_offset,rel_next_offset,record_type,write_time,rel_event_offset",
    # truncation must really remove bytes: a DELETE rewrites files rather than hiding rows
    # behind deletion vectors (on by default for new tables on Databricks)
    "delta.enableDeletionVectors": "false",
    # every append, transaction step and seal is a commit: checkpoint every 100 commits rather
    # than 10 (a checkpoint costs seconds; writers read tails and application versions from the
    # log and checksum files, not from a checkpoint)
    "delta.checkpointInterval": "100",
}
# The columns of ``Store.events``: absolute offsets, plus each row's file bounds (for pruning).
EVENTS_VIEW_COLUMNS = ["segment_id", "offset", "next_offset", "record_type", "routing_key", "event",
                       "writer_id", "write_time", "event_offset", "base_offset", "end_offset"]

# The transient area of large events (Pravega's transient segments): one partition per large event
# being written (under its stream's, in its shard: ``_pravega/s<k>/transient``), one row (and file)
# per staged chunk. A row is a manifest entry: the chunk itself
# is a data file of the events table, written once (under ``events/transient=<id>/``) and not
# referenced by the events table until the event's commit adds it there. ``position`` is the
# chunk's first byte in the event's payload, ``size`` its length, ``file`` its add action (JSON);
# ``key_position`` is the event's key-space position, fixed when it was started.
TRANSIENT_PARTITION = "transient_id"
TRANSIENT_SCHEMA = StructType([
    StructField("transient_id", StringType(), False),
    StructField("writer_id", StringType(), False),
    StructField("routing_key", StringType(), True),
    StructField("key_position", DoubleType(), False),
    StructField("position", LongType(), False),
    StructField("size", LongType(), False),
    StructField("file", StringType(), False),
    StructField("stage_time", TimestampType(), False),
])
TRANSIENT_STATS_COLUMNS = ("position", "size")
TRANSIENT_PROPERTIES = {
    "delta.dataSkippingStatsColumns": "position,size,stage_time",
    # one commit per staged chunk (128 per GiB): checkpoint rarely, the table stays tiny
    "delta.checkpointInterval": "100",
}

# The auto-scaler's memory of a stream's open segments (Pravega keeps it in the segment store's
# cache and the controller's cold markers): the last scale-up and scale-down requests (the mute)
# and the time a cold mark expires. One small table per stream, rewritten by each run.
AUTOSCALE_SCHEMA = StructType([
    StructField("segment_id", LongType(), False),
    StructField("last_up", TimestampType(), True),
    StructField("last_down", TimestampType(), True),
    StructField("cold_until", TimestampType(), True),
])

RETENTION_SET_SCHEMA = StructType([
    StructField("recording_time", TimestampType(), False),
    # bytes from the stream's start to the cut, truncated bytes included (Pravega's recordingSize)
    StructField("recording_size", LongType(), False),
    StructField("stream_cut", StringType(), False),
])

# (Delta refuses NOT NULL inside arrays)
CUT_ENTRIES = ArrayType(StructType([
    StructField("segment_id", LongType(), True),
    StructField("offset", LongType(), True),
]), True)

SUBSCRIBERS_SCHEMA = StructType([
    StructField("subscriber", StringType(), False),
    StructField("generation", LongType(), False),
    # the subscriber's last published cut; empty until it publishes one
    StructField("stream_cut", CUT_ENTRIES, False),
    StructField("update_time", TimestampType(), False),
])

# A writer's marks (``controller.watermarks``), in a partition of their own per writer: a writer
# id is any string, so the partition value is a fixed-length hash of it (``writer_key``).
WRITER_KEY = "writer_key"
WRITER_MARKS_SCHEMA = StructType([
    StructField(WRITER_KEY, StringType(), False),
    StructField("writer_id", StringType(), False),
    StructField("time", TimestampType(), False),
    StructField("position", CUT_ENTRIES, False),
    StructField("is_alive", BooleanType(), False),
    StructField("note_time", TimestampType(), False),
    StructField("stale_since", TimestampType(), True),
])
WATERMARKS_SCHEMA = StructType([
    StructField("lower_time_bound", TimestampType(), False),
    StructField("upper_time_bound", TimestampType(), False),
    StructField("stream_cut", StringType(), False),
    StructField("emit_time", TimestampType(), False),
])


def shard_of(key: str, shards: int) -> int:
    """The shard of a ``stream_key`` (16 hex digits) in a store of ``shards`` shards: its first
    16 bits modulo the count. The 65,536 buckets spread evenly over any power of two up to
    ``MAX_SHARDS``. In SQL: ``conv(substr(stream_key, 1, 4), 16, 10) % shards``."""
    return int(key[:4], 16) % shards


def shard_dir(shard: int) -> str:
    """The directory of shard ``shard``'s tables under ``SYSTEM_DIR``."""
    return f"s{shard}"


def valid_shard_count(shards: object) -> bool:
    """Whether ``shards`` can be a store's shard count: a power of two in [1, ``MAX_SHARDS``]."""
    return (isinstance(shards, int) and not isinstance(shards, bool) and 1 <= shards <= MAX_SHARDS
            and shards & (shards - 1) == 0)


# Each shard kind's table: the kind's columns after ``stream_key``, partitioned by it (and, for
# writer marks, by the writer's key too, so that writers of one stream never conflict).
SHARD_SCHEMAS = {
    RETENTION_SET_TABLE: RETENTION_SET_SCHEMA,
    SUBSCRIBERS_TABLE: SUBSCRIBERS_SCHEMA,
    WRITER_MARKS_TABLE: WRITER_MARKS_SCHEMA,
    WATERMARKS_TABLE: WATERMARKS_SCHEMA,
    AUTOSCALE_TABLE: AUTOSCALE_SCHEMA,
    TRANSIENT_TABLE: TRANSIENT_SCHEMA,
}


def shard_schema(kind: str) -> StructType:
    """The shard table of ``kind``: ``stream_key`` then the kind's own columns."""
    return StructType([StructField(STREAM_KEY, StringType(), False), *SHARD_SCHEMAS[kind].fields])


def shard_partitions(kind: str) -> tuple[str, ...]:
    """The partition columns of ``kind``'s shard tables."""
    return (STREAM_KEY, *{WRITER_MARKS_TABLE: (WRITER_KEY,), TRANSIENT_TABLE: (TRANSIENT_PARTITION,)}.get(kind, ()))


# the transient shard tables: manifests by stream and by large event (``writers.large_events``)
TRANSIENT_TABLE_SCHEMA = shard_schema(TRANSIENT_TABLE)
TRANSIENT_PARTITIONS = shard_partitions(TRANSIENT_TABLE)


READ_COLUMNS = ["scope", "stream", "segment_id", "offset", "event", "routing_key", "writer_id",
                "write_time"]

# The prefix of the columns ``validation`` adds to a prepared table: ``violates_<invariant>``.
VIOLATION_PREFIX = "violates_"

# ---- key-value tables (Pravega's KeyValueTable, PRAVEGA_SEMANTICS section 12) ---------------------
# A KVT is registered in the streams table (the controller's catalogue of a scope: one fence makes
# ``delete_scope`` see it) under the internal name ``KVT_PREFIX + name``; its data is one Delta
# table, an append-only log of entries as in Pravega's table segments: a put or insert adds an
# entry, a removal adds a tombstone, and a key's live entry is its newest. ``partition`` is the
# table segment (the primary key's hash range); ``version`` the entry's segment version, which
# increases in each partition with every commit (the partition's largest version plus one);
# ``key_hash`` is ``xxhash64(key)``, whose file statistics and sorted row groups let a lookup
# read only the few files and row groups that may hold a key.
KVT_PREFIX = "_kvt."
KVT_PARTITION = "partition"
KVT_SCHEMA = StructType([
    StructField("partition", IntegerType(), False),
    StructField("key_hash", LongType(), False),
    StructField("key", BinaryType(), False),
    StructField("value", BinaryType(), True),  # null in a tombstone
    StructField("version", LongType(), False),
    StructField("removed", BooleanType(), False),
])
KVT_STATS_COLUMNS = ("key_hash", "version")
KVT_PROPERTIES = {
    "delta.dataSkippingStatsColumns": "key_hash,version",
    # no row tracking: it makes each small commit ~10x slower (0.78 s vs 0.08 s, measured);
    # validation finds the commit that added an entry from the log's JSON instead
    "delta.enableDeletionVectors": "false",
    "delta.checkpointInterval": "100",
}
MAX_KEY_LENGTH = 8192
"""Pravega's ``TableSegment.MAXIMUM_KEY_LENGTH``: primary plus secondary key bytes."""
MAX_VALUE_LENGTH = 1024 * 1024 - 8192
"""Pravega's ``TableSegment.MAXIMUM_VALUE_LENGTH`` (1,040,384 bytes)."""
MAX_BATCH_KEY_COUNT = 256
"""Pravega's ``MAXIMUM_BATCH_KEY_COUNT``: keys in one atomic batch."""
MAX_BATCH_LENGTH = 16 * 1024 * 1024 - 1 - 8192
"""Pravega's ``MAXIMUM_BATCH_LENGTH``: key and value bytes of one atomic batch."""
