"""Truncation: the stream's truncation record (Pravega's ``StreamTruncationRecord``), pure Python.

A truncation moves the stream's head to a new cut. The record says where the head is, which
segments the truncation in progress deletes, which earlier truncations deleted, and how many bytes
were truncated in total (``size_till``). It lives in the stream's row, next to the state, so the
head moves in the same commit that marks the stream ``TRUNCATING``; the data is deleted after
that, and a crash in between is finished from the record (see ``controller.stream_tasks.truncate_stream``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ..errors import InvalidStreamCutError
from .cut_algorithms import (
    head_of_stream,
    segments_between,
    size_between,
    stream_cut_equal_or_after,
)
from .segments import SegmentRecord
from .stream_cut import StreamCut


@dataclass(frozen=True)
class TruncationRecord:
    """Where the stream starts and what truncation deleted (Pravega's ``StreamTruncationRecord``).

    Attributes:
        stream_cut: the head: the cut the stream was last truncated at.
        to_delete: segments the truncation in progress deletes (wholly before ``stream_cut``).
        deleted_segments: segments deleted by earlier, completed truncations.
        size_till: bytes truncated in total, from the stream's start up to ``stream_cut``.
        updating: True while the truncation's data deletes are not all done.
    """

    stream_cut: StreamCut
    to_delete: tuple[int, ...] = ()
    deleted_segments: tuple[int, ...] = ()
    size_till: int = 0
    updating: bool = False

    def __repr__(self) -> str:
        state = "updating" if self.updating else "complete"
        return (f"TruncationRecord({state}, head={self.stream_cut!r}, to_delete={list(self.to_delete)}, "
                f"deleted={len(self.deleted_segments)} segments, size_till={self.size_till})")

    def to_json(self) -> str:
        # "head" repeats the cut's positions in plain JSON, for SQL (``streaming.head_map``)
        return json.dumps({"stream_cut": self.stream_cut.as_text(),
                           "head": [[int(s), int(o)] for s, o in sorted(self.stream_cut.positions.items())],
                           "to_delete": list(self.to_delete),
                           "deleted_segments": list(self.deleted_segments),
                           "size_till": self.size_till, "updating": self.updating})

    @classmethod
    def from_json(cls, text: str) -> TruncationRecord:
        data = json.loads(text)
        return cls(StreamCut.from_text(data["stream_cut"]), tuple(data["to_delete"]),
                   tuple(data["deleted_segments"]), int(data["size_till"]), bool(data["updating"]))

    def completed(self) -> TruncationRecord:
        """The record once its deletes are done (Pravega's ``completeTruncation``)."""
        return replace(self, to_delete=(), deleted_segments=tuple(sorted({*self.deleted_segments, *self.to_delete})),
                       updating=False)


def initial_truncation_record(records: Sequence[SegmentRecord], stream: str) -> TruncationRecord:
    """The record of a never-truncated stream: the head is epoch 0 at offset 0."""
    return TruncationRecord(head_of_stream(records, stream))


def compute_truncation_record(previous: TruncationRecord, cut: StreamCut, records: Sequence[SegmentRecord],
                              lengths: Mapping[int, int] | None = None) -> TruncationRecord:
    """The record of truncating at ``cut`` (Pravega's ``computeTruncationRecord``).

    ``to_delete`` holds the segments between the previous head and ``cut`` that are not in
    ``cut``: every one of them lies wholly before the new head. ``size_till`` grows by the bytes
    between the two heads. ``lengths`` gives open segments' lengths.

    Raises:
        InvalidStreamCutError: ``cut`` is not equal to or after the previous head.
    """
    if not stream_cut_equal_or_after(cut, previous.stream_cut, records):
        raise InvalidStreamCutError(
            f"cannot truncate at {cut!r}: it is not equal to or after the current head {previous.stream_cut!r}")
    between = segments_between(previous.stream_cut, cut, records)
    to_delete = tuple(sorted(sid for sid in between if sid not in cut.positions))
    size = size_between(previous.stream_cut, cut, records, lengths)
    return TruncationRecord(cut, to_delete, previous.deleted_segments, previous.size_till + size, True)


def partial_truncations(record: TruncationRecord) -> dict[int, int]:
    """The segments of the head that lose bytes: segment id -> first offset kept (> 0)."""
    return {sid: off for sid, off in record.stream_cut.positions.items() if off > 0}
