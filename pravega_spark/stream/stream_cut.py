"""Stream cuts: a position in every part of a stream's key space (Pravega's ``StreamCut``).

A :class:`StreamCut` maps segment ids to byte offsets. Offset ``-1`` marks a *future* segment:
one the cut has not reached yet, listed to cover a key range that no segment at a non-negative
offset covers (for example the successor of a merge whose other predecessor is still being read).

This module is the value type (Pravega's client-side ``StreamCut``/``StreamCutImpl``): building,
checking, text and DataFrame forms. The controller's algorithms over cuts (validity, span,
comparison, segments and size between two cuts) are in :mod:`pravega_spark.stream.cut_algorithms`.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import numbers
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from pravega_spark.errors import InvalidStreamCutError
from pravega_spark.stream.segments import (
    MAX_EPOCH_OR_NUMBER,
    creation_epoch,
    segment_id,
    segment_number,
    short_segment_name,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["FUTURE_OFFSET", "StreamCut"]

FUTURE_OFFSET = -1
"""The offset that marks a future segment (Pravega: any negative offset in a controller cut)."""

_UNBOUNDED_TEXT = "UNBOUNDED"
_TEXT_VERSION = "0"  # Pravega's StreamCutImpl.TO_STRING_VERSION: the payload format is Pravega's.
_MAX_TEXT_BYTES = 64 << 20  # refuse to inflate more than this from a text form
_URLSAFE_TO_STANDARD = str.maketrans("-_", "+/")
_DIGITS = re.compile(r"[0-9]+")

# Columns of StreamCut.to_df / StreamCut.from_df.
_COL_STREAM = "stream"
_COL_SEGMENT_ID = "segment_id"
_COL_SEGMENT_NUMBER = "segment_number"
_COL_CREATION_EPOCH = "creation_epoch"
_COL_OFFSET = "offset"


def _as_int(value: Any, what: str) -> int:
    """``value`` as an ``int``; bools, floats and strings are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidStreamCutError(f"{what} must be an int, got {type(value).__name__} {value!r}")
    return int(value)


def _check_segment_id(value: Any) -> int:
    sid = _as_int(value, "segment id")
    if sid < 0 or creation_epoch(sid) > MAX_EPOCH_OR_NUMBER or segment_number(sid) > MAX_EPOCH_OR_NUMBER:
        raise InvalidStreamCutError(
            f"segment id {sid} is not epoch << 32 | number with epoch and number in [0, 2^31)")
    return sid


def _check_offset(sid: int, value: Any) -> int:
    offset = _as_int(value, f"offset of segment {short_segment_name(sid)}")
    if offset < FUTURE_OFFSET:
        raise InvalidStreamCutError(
            f"offset of segment {short_segment_name(sid)} is {offset}; offsets are >= 0, or -1 for a future segment")
    return offset


def _check_stream(stream: Any) -> str:
    if not isinstance(stream, str):
        raise InvalidStreamCutError(f"stream must be a 'scope/stream' string, got {type(stream).__name__}")
    scope, sep, name = stream.partition("/")
    if not sep or not scope or not name or "/" in name or ":" in stream:
        raise InvalidStreamCutError(f"stream must be 'scope/stream' (one '/', no ':'), got {stream!r}")
    return stream


@dataclass(frozen=True, eq=False)
class StreamCut:
    """A position in a stream: one byte offset per segment (Pravega's ``StreamCut``).

    Immutable and hashable; equality is on the stream and the positions. ``positions`` is a
    read-only mapping ordered by segment id. :attr:`UNBOUNDED` is the singleton meaning "no
    bound" (the earliest position as a start, the latest as an end), as in Pravega.

    Example:
        >>> cut = StreamCut("iot/sensors", {0: 120, (1 << 32) | 3: -1})
        >>> cut
        StreamCut(iot/sensors, {0.#epoch.0: 120, 3.#epoch.1: -1})
        >>> StreamCut.from_text(cut.as_text()) == cut
        True

    Attributes:
        stream: the scoped stream name, ``"scope/stream"`` (``""`` only for :attr:`UNBOUNDED`).
        positions: segment id (``creation_epoch << 32 | number``) -> byte offset; ``-1`` marks a
            future segment.
    """

    stream: str
    positions: Mapping[int, int]

    UNBOUNDED: ClassVar[StreamCut]

    def __post_init__(self) -> None:
        _check_stream(self.stream)
        if not isinstance(self.positions, Mapping):
            raise InvalidStreamCutError(
                f"positions must be a mapping of segment id to offset, got {type(self.positions).__name__}")
        checked: dict[int, int] = {}
        for key, value in self.positions.items():
            sid = _check_segment_id(key)
            if sid in checked:
                raise InvalidStreamCutError(f"segment {short_segment_name(sid)} is listed twice")
            checked[sid] = _check_offset(sid, value)
        object.__setattr__(self, "positions", MappingProxyType(dict(sorted(checked.items()))))

    @classmethod
    def _make_unbounded(cls) -> StreamCut:
        cut = object.__new__(cls)
        object.__setattr__(cut, "stream", "")
        object.__setattr__(cut, "positions", MappingProxyType({}))
        return cut

    # -- value semantics -------------------------------------------------------------------

    def _key(self) -> tuple[str, tuple[tuple[int, int], ...]]:
        return self.stream, tuple(self.positions.items())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StreamCut):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        if self.is_unbounded:
            return "StreamCut.UNBOUNDED"
        inner = ", ".join(f"{short_segment_name(sid)}: {off}" for sid, off in self.positions.items())
        return f"StreamCut({self.stream}, {{{inner}}})"

    def __reduce__(self) -> tuple[Any, ...]:
        # MappingProxyType cannot be pickled: rebuild from a plain dict (and keep the singleton).
        if self.is_unbounded:
            return (_unbounded, ())
        return (StreamCut, (self.stream, dict(self.positions)))

    # -- accessors -------------------------------------------------------------------------

    @property
    def is_unbounded(self) -> bool:
        """Whether this is :attr:`UNBOUNDED`."""
        return self.stream == ""

    @property
    def scope(self) -> str:
        """The scope part of :attr:`stream` (``""`` for :attr:`UNBOUNDED`)."""
        return self.stream.partition("/")[0]

    @property
    def stream_name(self) -> str:
        """The stream part of :attr:`stream` (``""`` for :attr:`UNBOUNDED`)."""
        return self.stream.partition("/")[2]

    @property
    def segment_ids(self) -> tuple[int, ...]:
        """Every segment id of the cut, ascending."""
        return tuple(self.positions)

    @property
    def future_segments(self) -> tuple[int, ...]:
        """The ids of the future segments (offset ``-1``), ascending."""
        return tuple(sid for sid, off in self.positions.items() if off < 0)

    def with_positions(self, positions: Mapping[int, int]) -> StreamCut:
        """A copy with ``positions`` added or replaced (Pravega: a new ``StreamCutImpl``).

        Example:
            >>> StreamCut("iot/sensors", {0: 10, 1: 10}).with_positions({1: 20})
            StreamCut(iot/sensors, {0.#epoch.0: 10, 1.#epoch.0: 20})
        """
        if self.is_unbounded:
            raise InvalidStreamCutError("StreamCut.UNBOUNDED has no stream to add positions to")
        return StreamCut(self.stream, {**self.positions, **positions})

    # -- text form -------------------------------------------------------------------------

    def as_text(self) -> str:
        """Compact, URL-safe text form (Pravega's ``StreamCut.asText``).

        The payload is Pravega's version-0 text, ``0:scope/stream:numbers:epochs:offsets``,
        gzipped and base64-encoded with the URL-safe alphabet (``-_`` instead of ``+/``).
        :meth:`from_text` also reads Pravega's own (standard alphabet) strings.

        Example:
            >>> StreamCut.UNBOUNDED.as_text()
            'UNBOUNDED'
        """
        if self.is_unbounded:
            return _UNBOUNDED_TEXT
        ids = list(self.positions)
        text = ":".join((
            _TEXT_VERSION,
            self.stream,
            ",".join(str(segment_number(sid)) for sid in ids),
            ",".join(str(creation_epoch(sid)) for sid in ids),
            ",".join(str(off) for off in self.positions.values()),
        ))
        return base64.urlsafe_b64encode(gzip.compress(text.encode("utf-8"), mtime=0)).decode("ascii")

    @classmethod
    def from_text(cls, text: str) -> StreamCut:
        """Parse :meth:`as_text` output (Pravega's ``StreamCut.from``).

        Raises:
            InvalidStreamCutError: the text is not a stream cut.

        Example:
            >>> StreamCut.from_text("UNBOUNDED") is StreamCut.UNBOUNDED
            True
        """
        if not isinstance(text, str):
            raise InvalidStreamCutError(f"stream cut text must be a str, got {type(text).__name__}")
        text = text.strip()
        if text == _UNBOUNDED_TEXT:
            return cls.UNBOUNDED
        if not text:
            raise InvalidStreamCutError("stream cut text is empty")
        try:
            padded = text.translate(_URLSAFE_TO_STANDARD) + "=" * (-len(text) % 4)
            raw = base64.b64decode(padded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidStreamCutError(f"stream cut text is not base64: {text[:40]!r}") from exc
        plain = _gunzip(raw)
        parts = plain.split(":", 4)
        if len(parts) != 5 or parts[0] != _TEXT_VERSION:
            raise InvalidStreamCutError(
                f"stream cut text is not version-{_TEXT_VERSION} 'v:scope/stream:numbers:epochs:offsets'")
        _, stream, numbers_, epochs, offsets = parts
        numbers_list = _int_list(numbers_, "segment numbers")
        epochs_list = _int_list(epochs, "epochs")
        offsets_list = _int_list(offsets, "offsets")
        if not len(numbers_list) == len(epochs_list) == len(offsets_list):
            raise InvalidStreamCutError(
                f"stream cut text has {len(numbers_list)} segment numbers, {len(epochs_list)} epochs "
                f"and {len(offsets_list)} offsets")
        positions: dict[int, int] = {}
        for number, epoch, offset in zip(numbers_list, epochs_list, offsets_list, strict=True):
            try:
                sid = segment_id(number, epoch)
            except ValueError as exc:
                raise InvalidStreamCutError(str(exc)) from exc
            if sid in positions:
                raise InvalidStreamCutError(f"segment {short_segment_name(sid)} is listed twice")
            positions[sid] = offset
        return cls(stream, positions)

    # -- JSON ------------------------------------------------------------------------------

    def to_json(self) -> str:
        """JSON form: ``{"stream": "scope/stream", "positions": {"<segment id>": offset}}``.

        :attr:`UNBOUNDED` is ``{"stream": null, "positions": {}}``.

        Example:
            >>> StreamCut("iot/sensors", {0: 120}).to_json()
            '{"stream":"iot/sensors","positions":{"0":120}}'
        """
        stream = None if self.is_unbounded else self.stream
        positions = {str(sid): off for sid, off in self.positions.items()}
        return json.dumps({"stream": stream, "positions": positions}, separators=(",", ":"))

    @classmethod
    def from_json(cls, data: str | bytes | bytearray | Mapping[str, Any]) -> StreamCut:
        """Parse :meth:`to_json` output (a JSON string, or the object it decodes to).

        Raises:
            InvalidStreamCutError: not a stream cut in JSON form.

        Example:
            >>> StreamCut.from_json('{"stream": null, "positions": {}}') is StreamCut.UNBOUNDED
            True
        """
        if isinstance(data, (str, bytes, bytearray)):
            try:
                obj = json.loads(data, object_pairs_hook=_no_duplicate_keys)
            except InvalidStreamCutError:
                raise
            except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                raise InvalidStreamCutError(f"stream cut JSON does not parse: {exc}") from exc
        else:
            obj = data
        if not isinstance(obj, Mapping) or set(obj) != {"stream", "positions"}:
            raise InvalidStreamCutError(
                'stream cut JSON must be an object with exactly the keys "stream" and "positions"')
        stream, raw_positions = obj["stream"], obj["positions"]
        if not isinstance(raw_positions, Mapping):
            raise InvalidStreamCutError('"positions" must be an object of segment id -> offset')
        if stream is None:
            if raw_positions:
                raise InvalidStreamCutError('a stream cut with "stream": null (UNBOUNDED) has no positions')
            return cls.UNBOUNDED
        positions: dict[int, int] = {}
        for key, offset in raw_positions.items():
            if not isinstance(key, str) or not _DIGITS.fullmatch(key):
                raise InvalidStreamCutError(f"segment id keys must be decimal digits, got {key!r}")
            positions[int(key)] = offset
        return cls(stream, positions)

    # -- DataFrames ------------------------------------------------------------------------

    def to_df(self, spark: SparkSession) -> DataFrame:
        """One row per segment: ``stream, segment_id, segment_number, creation_epoch, offset``.

        Schema: ``stream string, segment_id long, segment_number int, creation_epoch int,
        offset long``. :attr:`UNBOUNDED` gives an empty DataFrame. Mirrors the connector view of a
        Pravega ``StreamCut`` (segment -> offset).

        Example:
            >>> cut.to_df(spark).show()  # doctest: +SKIP
        """
        from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

        schema = StructType([
            StructField(_COL_STREAM, StringType(), False),
            StructField(_COL_SEGMENT_ID, LongType(), False),
            StructField(_COL_SEGMENT_NUMBER, IntegerType(), False),
            StructField(_COL_CREATION_EPOCH, IntegerType(), False),
            StructField(_COL_OFFSET, LongType(), False),
        ])
        rows = [
            (self.stream, sid, segment_number(sid), creation_epoch(sid), off)
            for sid, off in self.positions.items()
        ]
        return spark.createDataFrame(rows, schema)

    @classmethod
    def from_df(cls, df: DataFrame, stream: str | None = None) -> StreamCut:
        """Build a cut from a DataFrame of ``segment_id, offset`` rows (collected to the driver).

        ``stream`` defaults to the DataFrame's single distinct ``stream`` value. No rows give
        ``StreamCut(stream, {})`` when ``stream`` is passed, else :attr:`UNBOUNDED` (so
        ``from_df(cut.to_df(spark)) == cut`` for every cut).

        Raises:
            InvalidStreamCutError: missing columns, nulls, a segment listed twice, no stream or
                several streams.

        Example:
            >>> StreamCut.from_df(spark.table("cuts").where("name = 'ckpt-7'"))  # doctest: +SKIP
        """
        columns = list(df.columns)
        missing = [c for c in (_COL_SEGMENT_ID, _COL_OFFSET) if c not in columns]
        if missing:
            raise InvalidStreamCutError(
                f"a stream cut DataFrame needs columns {_COL_SEGMENT_ID}, {_COL_OFFSET}; "
                f"missing {missing}, got {columns}")
        read_stream = stream is None and _COL_STREAM in columns
        selected = [_COL_SEGMENT_ID, _COL_OFFSET] + ([_COL_STREAM] if read_stream else [])
        rows = df.select(*selected).collect()
        if read_stream:
            streams = {row[_COL_STREAM] for row in rows}
            if None in streams:
                raise InvalidStreamCutError(f"column {_COL_STREAM} has nulls")
            if len(streams) > 1:
                raise InvalidStreamCutError(f"rows of several streams: {sorted(streams)}; pass stream=")
            stream = streams.pop() if streams else None
        if stream is None:
            if rows:
                raise InvalidStreamCutError(f"no {_COL_STREAM} column: pass stream='scope/stream'")
            return cls.UNBOUNDED
        positions: dict[int, int] = {}
        for row in rows:
            sid, offset = row[_COL_SEGMENT_ID], row[_COL_OFFSET]
            if sid is None or offset is None:
                raise InvalidStreamCutError(f"{_COL_SEGMENT_ID} and {_COL_OFFSET} must not be null")
            sid = _check_segment_id(sid)
            if sid in positions:
                raise InvalidStreamCutError(f"segment {short_segment_name(sid)} is listed twice")
            positions[sid] = offset
        return cls(stream, positions)


StreamCut.UNBOUNDED = StreamCut._make_unbounded()


def _unbounded() -> StreamCut:
    """Unpickling hook: the :attr:`StreamCut.UNBOUNDED` singleton."""
    return StreamCut.UNBOUNDED


def _gunzip(raw: bytes) -> str:
    decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        plain = decompressor.decompress(raw, _MAX_TEXT_BYTES)
    except zlib.error as exc:
        raise InvalidStreamCutError("stream cut text is not gzip data") from exc
    if decompressor.unconsumed_tail:
        raise InvalidStreamCutError(f"stream cut text inflates to more than {_MAX_TEXT_BYTES} bytes")
    if not decompressor.eof or decompressor.unused_data:
        raise InvalidStreamCutError("stream cut text is truncated or has trailing data")
    try:
        return plain.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidStreamCutError("stream cut text is not UTF-8") from exc


def _int_list(text: str, what: str) -> list[int]:
    if text.strip() == "":
        return []
    out = []
    for item in text.split(","):
        item = item.strip()
        if not re.fullmatch(r"-?[0-9]+", item):
            raise InvalidStreamCutError(f"stream cut text: {what} must be integers, got {item!r}")
        out.append(int(item))
    return out


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InvalidStreamCutError(f"stream cut JSON repeats the key {key!r}")
        out[key] = value
    return out


# ---------------------------------------------------------------------------------------------
# Pure functions over a stream's segment history
