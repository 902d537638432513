"""A reader group's exactly-once Delta sink: the group's position of record.

``ReaderGroup.delta_sink(path)`` returns a :class:`ReaderGroupSink`; each reader writes its
batches with ``sink.write(batch)``. A batch's rows and, for each segment in it, two Delta
application versions (``SetTransaction``) land in one commit:

- ``<scope>/<group>/pos/<scope>/<stream>#<segment>`` = the batch's end offset in that segment;
- ``<scope>/<group>/own/<scope>/<stream>#<segment>`` = the owner's token (the group state's
  revision at which the writing reader acquired the segment).

Before committing, the write compares each segment's recorded offset with the batch's range:
at or past its end, the segment's rows were written already (a replay) and are left out; inside
it, an overlap (``IllegalStateError``); at or before its start, the rows are new. A recorded
owner token above the writer's means the segment was handed to another reader after this one was
declared dead: the write is refused (``ReaderNotInReaderGroupError``), so a zombie reader cannot
commit a batch of a segment it no longer owns. Delta fails two concurrent commits recording the
same application id (``ConcurrentTransactionException``), and the loser's retry sees the winner.

On the public-API backend (no ``SetTransaction`` can be written there), the same marks are rows
of the sink's own table (``scope = "pravega-spark/mark"``, ``stream`` the id, ``segment_id`` the
value; ``_delta.sql_writes.merge_marked``), set with the batch's rows in one MERGE that is a
compare-and-set of the marks read; ``ReaderGroupSink.read()`` leaves them out.

The group records the sink's path, and the sink's table is created then (so a take-over always
has a table to fence), so a dead reader's segments go back at the offsets the sink holds
(``fence``): exactly-once without replay. A fence also records which join of which reader it took
over (``<scope>/<group>/off/<reader>@<incarnation>``): a reader that rejoins while the take-over is
half done (fenced, not yet removed from the group) finds it there and completes it first. Per-key order across readers: sort the sink by
``(revision, segment_id, offset)`` with the batch's ``revision`` written next to its rows.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from .. import _delta
from ..errors import IllegalStateError, InvalidConfigError, ReaderNotInReaderGroupError
from .reader_group_state import SegmentRef

log = logging.getLogger("pravega_spark")


class ReaderGroupSink:
    """Exactly-once writes of a reader group's batches to one Delta table (see the module docstring).

    Example:
        >>> sink = group.delta_sink("/lake/sensors_copy")  # doctest: +SKIP
        >>> batch = reader.read_next(); sink.write(batch)  # doctest: +SKIP
    """

    def __init__(self, spark: SparkSession, path: str, group: str) -> None:
        if not isinstance(path, str) or not path:
            raise InvalidConfigError(f"a sink path is a non-empty str, got {path!r}")
        self.spark = spark
        self.backend = _delta.backend_for(spark)
        self.path = path
        self.group = group  # the group's scoped name
        self._created = False

    def __repr__(self) -> str:
        return f"ReaderGroupSink({self.path!r}, group={self.group})"

    def _app_id(self, kind: str, ref: SegmentRef) -> str:
        return f"{self.group}/{kind}/{ref}"

    def _taken_id(self, reader_id: str, incarnation: str) -> str:
        return f"{self.group}/off/{reader_id}@{incarnation}"

    def create(self, schema: StructType) -> bool:
        """Create the sink's table with ``schema`` unless it exists; True if this call created it."""
        created = self.backend.create_table(self.path, schema)
        self._created = True
        return created

    def read(self) -> DataFrame:
        """The sink's rows (on the public-API backend without the rows that hold its positions,
        whose ``scope`` is ``"pravega-spark/mark"``)."""
        return self.backend.read(self.path).where(F.col("scope") != F.lit(_delta.SINK_MARK_SCOPE))

    # ---- writing -------------------------------------------------------------------------------
    def write(self, batch, rows: DataFrame | None = None) -> int:
        """Append ``batch``'s events (or ``rows``: any columns, derived from them, with ``scope``,
        ``stream`` and ``segment_id``) exactly once; one commit with the positions.

        Args:
            batch: a ``ReadBatch`` from ``EventStreamReader.read_next``.
            rows: what to write (default: ``batch.events`` with the batch's ``revision``).

        Returns:
            The number of segments whose rows were written (0: nothing new, e.g. a replay).

        Raises:
            ReaderNotInReaderGroupError: a segment of the batch was handed to another reader.
            IllegalStateError: the sink holds part of a segment's range (an overlap).
        """
        if not batch.ranges:
            return 0
        if rows is None:
            rows = batch.events.withColumn("revision", F.lit(batch.revision))
        if not self._created:
            self.backend.create_table(self.path, rows.schema)
            self._created = True
        ranges = {SegmentRef(stream, sid): rng for (stream, sid), rng in batch.ranges.items()}
        owners = {SegmentRef(stream, sid): tok for (stream, sid), tok in batch.owners.items()}

        def attempt() -> int:
            txn = self.backend.transaction(self.path)
            keep = self._new_segments(ranges, owners, txn.app_version)
            if not keep:
                return 0
            data = rows if len(keep) == len(ranges) else rows.where(_segments_in(keep))
            actions = [txn.set_app_version(self._app_id(kind, ref), value)
                       for ref in keep for kind, value in (("pos", ranges[ref][1]), ("own", owners.get(ref, 0)))]
            txn.commit(txn.write(data, ()), (), actions)
            return len(keep)

        def attempt_rows() -> int:  # the public-API backend: the marks are rows of the sink (``_delta.sql``)
            marks = self.backend.marks_in(self.path, f"{self.group}/")
            keep = self._new_segments(ranges, owners, lambda app: marks.get(app, -1))
            if not keep:
                return 0
            data = rows if len(keep) == len(ranges) else rows.where(_segments_in(keep))
            new = {self._app_id(kind, ref): value for ref in keep
                   for kind, value in (("pos", ranges[ref][1]), ("own", owners.get(ref, 0)))}
            self.backend.merge_marked(self.path, data, new, {a: marks.get(a) for a in new})
            return len(keep)

        written = _delta.retrying(attempt if self.backend.places_files else attempt_rows,
                                  f"write a batch of {self.group} to {self.path}")
        log.log(logging.INFO if written else logging.DEBUG, "%r: batch at revision %d written (%d of %d segments)",
                self, batch.revision, written, len(ranges))
        return written

    def _new_segments(self, ranges: Mapping[SegmentRef, tuple[int, int]], owners: Mapping[SegmentRef, int],
                      recorded) -> list[SegmentRef]:
        """The segments of a batch whose rows the sink does not hold yet, given ``recorded(app id)``
        (-1: none).

        Raises:
            ReaderNotInReaderGroupError: a segment was handed to another reader.
            IllegalStateError: the sink holds part of a segment's range.
        """
        keep: list[SegmentRef] = []
        for ref, (low, high) in sorted(ranges.items()):
            owner = recorded(self._app_id("own", ref))
            if owner > owners.get(ref, -1):
                raise ReaderNotInReaderGroupError(
                    f"{self!r}: segment {ref} was handed to another reader (owner token {owner}, this "
                    f"reader's {owners.get(ref, -1)}): this reader was taken offline; join again")
            done = recorded(self._app_id("pos", ref))
            if done >= high:
                continue  # written already: a replay
            if done > low:
                raise IllegalStateError(f"{self!r}: the sink holds {ref} up to offset {done}, inside the batch's "
                                        f"range [{low}, {high})")
            keep.append(ref)
        return keep

    # ---- the positions of record ---------------------------------------------------------------
    def fence(self, refs: Iterable[SegmentRef], token: int,
              taken: Mapping[str, str] | None = None) -> dict[SegmentRef, int]:
        """Hand ``refs`` over: one commit recording owner ``token`` for each (any later write by an
        owner with a lower token is refused) and the joins ``taken`` over (reader id ->
        incarnation, see ``taken_over``), returning the end offsets recorded for them (read in
        that commit: a concurrent write of theirs makes it conflict and read again)."""
        refs = sorted(set(refs))
        if not refs or not self.backend.exists(self.path):
            return {}  # no segments to hand over; or a group whose sink predates its creation at delta_sink

        def attempt() -> dict[SegmentRef, int]:
            txn = self.backend.transaction(self.path)
            found = {}
            actions = []
            for ref in refs:
                found[ref] = txn.app_version(self._app_id("pos", ref))
                owner = txn.app_version(self._app_id("own", ref))
                actions.append(txn.set_app_version(self._app_id("own", ref), max(owner, token)))
            actions += [txn.set_app_version(self._taken_id(r, inc), token) for r, inc in sorted((taken or {}).items())]
            txn.commit(None, (), actions)
            return {ref: off for ref, off in found.items() if off >= 0}

        def attempt_rows() -> dict[SegmentRef, int]:  # the public-API backend: row marks
            marks = self.backend.marks_in(self.path, f"{self.group}/")
            new: dict[str, int] = {}
            for ref in refs:  # the positions too (unchanged; -1: none), so that a write since fails this
                new[self._app_id("pos", ref)] = marks.get(self._app_id("pos", ref), -1)
                new[self._app_id("own", ref)] = max(marks.get(self._app_id("own", ref), -1), token)
            new.update({self._taken_id(r, inc): token for r, inc in sorted((taken or {}).items())})
            self.backend.merge_marked(self.path, None, new, {a: marks.get(a) for a in new})
            return {ref: new[self._app_id("pos", ref)] for ref in refs if new[self._app_id("pos", ref)] >= 0}

        return _delta.retrying(attempt if self.backend.places_files else attempt_rows,
                               f"fence {len(refs)} segments of {self.group} in {self.path}")

    def taken_over(self, reader_id: str, incarnation: str) -> bool:
        """Whether a take-over fenced this join of ``reader_id`` here (its removal from the group
        may not have followed yet: the remover died, or is between its two commits)."""
        if not self.backend.exists(self.path):
            return False
        app = self._taken_id(reader_id, incarnation)
        if not self.backend.places_files:
            return self.backend.marks_in(self.path, app).get(app, -1) >= 0
        return self.backend.transaction(self.path).app_version(app) >= 0


def _segments_in(refs: Iterable[SegmentRef]):
    cond = None
    for ref in refs:
        scope, stream = ref.stream.split("/")
        c = (F.col("scope") == scope) & (F.col("stream") == stream) & (F.col("segment_id") == ref.segment_id)
        cond = c if cond is None else cond | c
    return cond
