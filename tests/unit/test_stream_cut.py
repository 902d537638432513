"""Tests for pravega_spark.stream.stream_cut (pure Python, no Spark session)."""

from __future__ import annotations

import base64
import copy
import dataclasses
import gzip
import json
import pickle
import random
import re
from collections.abc import Iterable, Mapping, Sequence

import pytest

from pravega_spark.errors import InvalidStreamCutError, PravegaSparkError
from pravega_spark.stream.cut_algorithms import (
    CutComparison,
    compare_stream_cuts,
    cut_span,
    head_of_stream,
    segments_between,
    size_between,
    stream_cut_equal_or_after,
    tail_cut,
    validate_stream_cut,
)
from pravega_spark.stream.segments import (
    SegmentRecord,
    current_epoch,
    epoch_members,
    initial_segments,
    segment_id,
    successors_with_predecessors,
)
from pravega_spark.stream.stream_cut import StreamCut

STREAM = "iot/sensors"


def sid(number: int, epoch: int) -> int:
    return segment_id(number, epoch)


def scale(
    records: Sequence[SegmentRecord],
    sealed: Iterable[int],
    new_ranges: Sequence[tuple[float, float]],
    sizes: Mapping[int, int] | None = None,
) -> list[SegmentRecord]:
    """One scale as the spec numbers it: epoch current+1, numbers from max(current)+1."""
    sealed = set(sealed)
    sizes = sizes or {}
    epoch = current_epoch(records) + 1
    next_number = max(r.segment_number for r in records if r.sealed_epoch is None) + 1
    out = [
        dataclasses.replace(r, sealed_epoch=epoch, sealed_size=sizes.get(r.segment_id, 0))
        if r.segment_id in sealed else r
        for r in records
    ]
    out += [SegmentRecord(sid(next_number + i, epoch), lo, hi) for i, (lo, hi) in enumerate(new_ranges)]
    return out


def cut(positions: Mapping[int, int]) -> StreamCut:
    return StreamCut(STREAM, positions)


# History H1 (the brief's example):
#   epoch 0: S0 [0, .5)  S1 [.5, 1)
#   epoch 1: S0 split into S2 [0, .25), S3 [.25, .5)          (S0 sealed with 100 bytes)
#   epoch 2: S3 and S1 merged into S4 [.25, 1)                 (S3: 50 bytes, S1: 200 bytes)
S0, S1 = sid(0, 0), sid(1, 0)
S2, S3 = sid(2, 1), sid(3, 1)
S4 = sid(4, 2)
H1 = scale(scale(initial_segments(2), [S0], [(0.0, 0.25), (0.25, 0.5)], {S0: 100}),
           [S3, S1], [(0.25, 1.0)], {S3: 50, S1: 200})
H1_LENGTHS = {S2: 30, S4: 70}

# History H2: merge then split.
#   epoch 0: A [0, .5)  B [.5, 1);  epoch 1: A+B -> C [0, 1);  epoch 2: C -> D [0, .5), E [.5, 1)
A, B, C, D, E = sid(0, 0), sid(1, 0), sid(2, 1), sid(3, 2), sid(4, 2)
H2 = scale(scale(initial_segments(2), [A, B], [(0.0, 1.0)], {A: 10, B: 10}),
           [C], [(0.0, 0.5), (0.5, 1.0)], {C: 10})

# History H3: a scale that seals A and B and re-cuts their range, then splits the first new one.
#   epoch 0: A [0, .5)  B [.5, 1);  epoch 1: A+B -> X [0, .75), T [.75, 1);
#   epoch 2: X -> X1 [0, .5), X2 [.5, .75)
X, T, X1, X2 = sid(2, 1), sid(3, 1), sid(4, 2), sid(5, 2)
H3 = scale(scale(initial_segments(2), [A, B], [(0.0, 0.75), (0.75, 1.0)], {A: 10, B: 10}),
           [X], [(0.0, 0.5), (0.5, 0.75)], {X: 10})


# ---------------------------------------------------------------------------------------------
# The value type
# ---------------------------------------------------------------------------------------------


def test_positions_are_read_only_and_sorted_copies():
    source = {S3: 5, S2: 10, S1: 7}
    c = cut(source)
    source[S0] = 1
    assert list(c.positions) == [S1, S2, S3]
    assert dict(c.positions) == {S1: 7, S2: 10, S3: 5}
    with pytest.raises(TypeError):
        c.positions[S0] = 1  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.stream = "x/y"  # type: ignore[misc]


def test_hash_and_equality_ignore_insertion_order():
    a = cut({S2: 10, S3: 5, S1: 7})
    b = cut({S1: 7, S3: 5, S2: 10})
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != cut({S1: 7, S3: 5, S2: 11})
    assert a != StreamCut("iot/other", {S1: 7, S3: 5, S2: 10})
    assert StreamCut.UNBOUNDED != StreamCut(STREAM, {})
    assert a != "not a cut"


def test_repr_uses_pravega_segment_names():
    assert repr(cut({0: 120, sid(3, 1): -1})) == "StreamCut(iot/sensors, {0.#epoch.0: 120, 3.#epoch.1: -1})"
    assert repr(StreamCut.UNBOUNDED) == "StreamCut.UNBOUNDED"


def test_helpers():
    c = cut({S2: 10, S4: -1})
    assert c.segment_ids == (S2, S4)
    assert c.future_segments == (S4,)
    assert (c.scope, c.stream_name) == ("iot", "sensors")
    assert c.with_positions({S4: 0, S3: 1}) == cut({S2: 10, S3: 1, S4: 0})
    assert c == cut({S2: 10, S4: -1})  # unchanged
    assert dataclasses.replace(c, positions={S2: 11}) == cut({S2: 11})
    with pytest.raises(InvalidStreamCutError):
        dataclasses.replace(c, positions={S2: -2})
    with pytest.raises(InvalidStreamCutError, match="UNBOUNDED"):
        StreamCut.UNBOUNDED.with_positions({0: 1})


def test_unbounded_singleton():
    u = StreamCut.UNBOUNDED
    assert u.is_unbounded and u.stream == "" and dict(u.positions) == {}
    assert not cut({0: 0}).is_unbounded
    assert StreamCut.from_text("UNBOUNDED") is u
    assert StreamCut.from_text(" UNBOUNDED\n") is u
    assert StreamCut.from_json(u.to_json()) is u
    assert pickle.loads(pickle.dumps(u)) is u
    assert copy.deepcopy(u) is u and copy.copy(u) is u


def test_pickle_and_deepcopy_round_trip():
    c = cut({S2: 10, S4: -1})
    assert pickle.loads(pickle.dumps(c)) == c
    assert copy.deepcopy(c) == c


@pytest.mark.parametrize(
    ("stream", "positions", "message"),
    [
        ("iotsensors", {0: 0}, "one '/'"),
        ("iot/sensors/x", {0: 0}, "one '/'"),
        ("/sensors", {0: 0}, "one '/'"),
        ("iot/", {0: 0}, "one '/'"),
        ("io:t/sensors", {0: 0}, "no ':'"),
        (None, {0: 0}, "string"),
        (STREAM, [(0, 0)], "mapping"),
        (STREAM, {True: 0}, "segment id must be an int"),
        (STREAM, {"0": 0}, "segment id must be an int"),
        (STREAM, {-1: 0}, "epoch << 32"),
        (STREAM, {(1 << 31): 0}, "epoch << 32"),
        (STREAM, {(1 << 63): 0}, "epoch << 32"),
        (STREAM, {0: 1.0}, "offset of segment 0.#epoch.0 must be an int"),
        (STREAM, {0: False}, "must be an int"),
        (STREAM, {0: None}, "must be an int"),
        (STREAM, {0: -2}, "-1 for a future segment"),
    ],
)
def test_constructor_validates(stream, positions, message):
    with pytest.raises(InvalidStreamCutError, match=re.escape(message)):
        StreamCut(stream, positions)


def test_errors_are_value_errors_of_the_library_root():
    with pytest.raises(PravegaSparkError):
        StreamCut("bad", {})
    with pytest.raises(ValueError):
        StreamCut("bad", {})


@pytest.mark.parametrize(
    "c",
    [
        cut({0: 120, sid(3, 1): -1}),
        cut({}),
        cut({sid(2**31 - 1, 2**31 - 1): 2**62}),
        StreamCut("a.b-c/d", {sid(i, i // 3): i * 8 for i in range(200)}),
    ],
)
def test_text_and_json_round_trip(c):
    text = c.as_text()
    assert re.fullmatch(r"[A-Za-z0-9_=-]+", text), "text form must be URL-safe"
    assert StreamCut.from_text(text) == c
    assert StreamCut.from_text(text.rstrip("=")) == c  # padding may be dropped in URLs
    assert c.as_text() == text  # deterministic (no gzip timestamp)
    assert StreamCut.from_json(c.to_json()) == c
    assert StreamCut.from_json(json.loads(c.to_json())) == c


def test_text_payload_is_pravegas_version_0_format():
    c = cut({0: 120, sid(3, 1): -1})
    payload = gzip.decompress(base64.urlsafe_b64decode(c.as_text())).decode()
    assert payload == "0:iot/sensors:0,3:0,1:120,-1"
    # A string built the way Pravega's asText does (standard base64 alphabet) is read back.
    pravega_text = base64.b64encode(gzip.compress(b"0:iot/sensors:3,0:1,0:-1,120")).decode()
    assert StreamCut.from_text(pravega_text) == c


def test_json_form():
    c = cut({0: 120, sid(3, 1): -1})
    assert json.loads(c.to_json()) == {"stream": STREAM, "positions": {"0": 120, str(sid(3, 1)): -1}}
    assert json.loads(StreamCut.UNBOUNDED.to_json()) == {"stream": None, "positions": {}}


def _text(payload: str) -> str:
    return base64.urlsafe_b64encode(gzip.compress(payload.encode())).decode()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("not base64!", "not base64"),
        (base64.urlsafe_b64encode(b"plain bytes").decode(), "not gzip"),
        (_text("1:iot/sensors:0:0:0"), "version-0"),
        (_text("0:iot/sensors:0:0"), "version-0"),
        (_text("0:iot/sensors:0,1:0:0"), "2 segment numbers, 1 epochs and 1 offsets"),
        (_text("0:iot/sensors:x:0:0"), "must be integers"),
        (_text("0:iot/sensors:0,0:0,0:1,2"), "listed twice"),
        (_text("0:iot/sensors:-1:0:0"), "must be in [0, 2^31)"),
        (_text("0:iot/sensors:0:0:-5"), "-1 for a future segment"),
        (_text("0:iotsensors:0:0:0"), "one '/'"),
        (base64.urlsafe_b64encode(gzip.compress(b"0:a/b:0:0:0")[:-4]).decode(), "truncated"),
    ],
)
def test_bad_text_is_refused(text, message):
    with pytest.raises(InvalidStreamCutError, match=re.escape(message)):
        StreamCut.from_text(text)


def test_from_text_refuses_non_strings():
    with pytest.raises(InvalidStreamCutError, match="must be a str"):
        StreamCut.from_text(b"UNBOUNDED")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{", "does not parse"),
        ("[]", "exactly the keys"),
        ('{"stream": "a/b"}', "exactly the keys"),
        ('{"stream": "a/b", "positions": {}, "extra": 1}', "exactly the keys"),
        ('{"stream": "a/b", "positions": []}', "object of segment id"),
        ('{"stream": "a/b", "positions": {"x": 1}}', "decimal digits"),
        ('{"stream": "a/b", "positions": {"-1": 1}}', "decimal digits"),
        ('{"stream": "a/b", "positions": {"0": 1.5}}', "must be an int"),
        ('{"stream": "a/b", "positions": {"0": true}}', "must be an int"),
        ('{"stream": "a/b", "positions": {"0": 1, "0": 2}}', "repeats the key"),
        ('{"stream": null, "positions": {"0": 1}}', "UNBOUNDED"),
        ('{"stream": 7, "positions": {}}', "string"),
    ],
)
def test_bad_json_is_refused(data, message):
    with pytest.raises(InvalidStreamCutError, match=re.escape(message)):
        StreamCut.from_json(data)


# -- DataFrame conversion with stand-ins (Spark itself is exercised by the lead's tests) ---------


class _FakeDataFrame:
    def __init__(self, columns: list[str], rows: list[dict]):
        self.columns = columns
        self._rows = rows

    def select(self, *cols: str) -> _FakeDataFrame:
        return _FakeDataFrame(list(cols), [{c: r[c] for c in cols} for r in self._rows])

    def collect(self) -> list[dict]:
        return list(self._rows)


class _FakeSpark:
    def createDataFrame(self, rows, schema):  # noqa: N802 - pyspark's name
        return rows, schema


def test_to_df_rows_and_schema():
    pytest.importorskip("pyspark")
    rows, schema = cut({0: 120, sid(3, 1): -1}).to_df(_FakeSpark())
    assert schema.simpleString() == (
        "struct<stream:string,segment_id:bigint,segment_number:int,creation_epoch:int,offset:bigint>")
    assert rows == [(STREAM, 0, 0, 0, 120), (STREAM, sid(3, 1), 3, 1, -1)]
    assert StreamCut.UNBOUNDED.to_df(_FakeSpark())[0] == []


def test_from_df():
    cols = ["stream", "segment_id", "segment_number", "creation_epoch", "offset"]
    rows = [dict(zip(cols, r, strict=True)) for r in [(STREAM, 0, 0, 0, 120), (STREAM, sid(3, 1), 3, 1, -1)]]
    expected = cut({0: 120, sid(3, 1): -1})
    assert StreamCut.from_df(_FakeDataFrame(cols, rows)) == expected
    # The stream argument wins and the stream column is then not needed.
    bare = _FakeDataFrame(["segment_id", "offset"], [{"segment_id": 0, "offset": 120}])
    assert StreamCut.from_df(bare, stream="a/b") == StreamCut("a/b", {0: 120})
    # No rows: the empty cut of the given stream, else UNBOUNDED (to_df(UNBOUNDED) round trip).
    assert StreamCut.from_df(_FakeDataFrame(cols, []), stream="a/b") == StreamCut("a/b", {})
    assert StreamCut.from_df(_FakeDataFrame(cols, [])) is StreamCut.UNBOUNDED


@pytest.mark.parametrize(
    ("columns", "rows", "stream", "message"),
    [
        (["segment_id"], [], None, "missing ['offset']"),
        (["segment_id", "offset"], [{"segment_id": 0, "offset": 1}], None, "pass stream="),
        (["stream", "segment_id", "offset"],
         [{"stream": "a/b", "segment_id": 0, "offset": 1}, {"stream": "a/c", "segment_id": 1, "offset": 1}],
         None, "several streams"),
        (["stream", "segment_id", "offset"], [{"stream": None, "segment_id": 0, "offset": 1}], None, "nulls"),
        (["segment_id", "offset"], [{"segment_id": 0, "offset": None}], "a/b", "must not be null"),
        (["segment_id", "offset"], [{"segment_id": 0, "offset": 1}, {"segment_id": 0, "offset": 2}],
         "a/b", "listed twice"),
    ],
)
def test_from_df_errors(columns, rows, stream, message):
    with pytest.raises(InvalidStreamCutError, match=re.escape(message)):
        StreamCut.from_df(_FakeDataFrame(columns, rows), stream=stream)


# ---------------------------------------------------------------------------------------------
# Head, tail, spans
# ---------------------------------------------------------------------------------------------


def test_head_and_tail():
    assert head_of_stream(H1, STREAM) == cut({S0: 0, S1: 0})
    assert tail_cut(STREAM, H1, H1_LENGTHS) == cut({S2: 30, S4: 70})
    assert tail_cut(STREAM, H1, {S2: 30}) == cut({S2: 30, S4: 0})  # no length: empty segment
    with pytest.raises(InvalidStreamCutError, match="no epoch-0"):
        head_of_stream([], STREAM)
    with pytest.raises(InvalidStreamCutError, match="empty"):
        tail_cut(STREAM, [], {})


def test_tail_of_a_history_whose_last_segments_carry_a_sealed_epoch():
    sealed = [dataclasses.replace(r, sealed_epoch=3, sealed_size=9) if r.sealed_epoch is None else r for r in H1]
    assert tail_cut(STREAM, sealed, {}) == cut({S2: 9, S4: 9})


def test_spans():
    assert cut_span(cut({S0: 5, S1: 3}), H1) == {S0: 0, S1: 0}
    assert cut_span(cut({S2: 10, S3: 5, S1: 7}), H1) == {S2: 1, S3: 1, S1: 1}
    assert cut_span(cut({S2: 10, S4: 0}), H1) == {S2: 2, S4: 2}
    # S1 lives in epochs 0-1: its span stops at 1 although the cut reaches epoch 2.
    assert cut_span(cut({S0: 5, S1: 3, S4: -1}), H1) == {S0: 0, S1: 1, S4: 2}
    assert cut_span(StreamCut.UNBOUNDED, H1) == {}
    with pytest.raises(InvalidStreamCutError, match="not segments of the stream: 9.#epoch.0"):
        cut_span(cut({sid(9, 0): 0}), H1)


# Pravega's StreamTestBase.truncationTest history (starting segment number 0):
#   epoch 0: 0, 1;  epoch 1: 1 -> 2, 3;  epoch 2: 3 -> 4, 5;  epoch 3: 2 -> 6, 7;  epoch 4: 0 -> 8, 9
def _truncation_test_history() -> list[SegmentRecord]:
    h = initial_segments(2)
    h = scale(h, [sid(1, 0)], [(0.5, 0.75), (0.75, 1.0)], {sid(1, 0): 100})
    h = scale(h, [sid(3, 1)], [(0.75, (0.75 + 1.0) / 2), ((0.75 + 1.0) / 2, 1.0)], {sid(3, 1): 100})
    h = scale(h, [sid(2, 1)], [(0.5, (0.75 + 0.5) / 2), ((0.75 + 0.5) / 2, 0.75)], {sid(2, 1): 100})
    return scale(h, [sid(0, 0)], [(0.0, 0.25), (0.25, 0.5)], {sid(0, 0): 100})


def test_pravega_truncation_scenario():
    h = _truncation_test_history()
    zero, one, two, three = sid(0, 0), sid(1, 0), sid(2, 1), sid(3, 1)
    four, five, eight, nine = sid(4, 2), sid(5, 2), sid(8, 4), sid(9, 4)
    cut1 = cut({zero: 1, one: 1})
    cut2 = cut({zero: 1, two: 1, four: 1, five: 1})
    cut3 = cut({two: 10, four: 10, five: 10, eight: 10, nine: 10})
    for c in (cut1, cut2, cut3):
        validate_stream_cut(c, h)
    assert cut_span(cut2, h) == {zero: 2, two: 2, four: 2, five: 2}
    assert cut_span(cut3, h) == {two: 2, four: 4, five: 4, eight: 4, nine: 4}
    # Each truncation must be equal-or-after the previous one; toDelete = between - new cut.
    assert stream_cut_equal_or_after(cut2, cut1, h)
    assert set(segments_between(cut1, cut2, h)) - set(cut2.positions) == {one, three}
    assert stream_cut_equal_or_after(cut3, cut2, h)
    assert set(segments_between(cut2, cut3, h)) - set(cut3.positions) == {zero}
    behind = cut({two: 1, four: 1, five: 1, eight: 1, nine: 1})
    assert not stream_cut_equal_or_after(behind, cut3, h)
    older = cut({two: 10, four: 10, five: 10, zero: 10})
    validate_stream_cut(older, h)
    assert not stream_cut_equal_or_after(older, cut3, h)


# ---------------------------------------------------------------------------------------------
# Validity
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "positions",
    [
        {S0: 0, S1: 0},                    # head
        {S0: 100, S1: 200},                # both at their sealed sizes
        {S2: 10, S3: 5, S1: 7},            # epoch 1
        {S2: 30, S4: 70},                  # tail
        {S2: 10, S3: 5, S4: -1},           # S1 read, S4 not reached: covers [.5, 1)
        {S2: 10, S3: -1, S1: 0},           # gap [.25, .5) covered by a future segment
        {S2: 10, S4: -1},                  # S3 and S1 fully read
        {S0: 3, S4: -1},                   # S1 read; S4 overlaps S0's successor only
        {S0: 3, S3: -1, S1: 4},            # a future successor next to its predecessor's sibling
    ],
)
def test_valid_cuts(positions):
    validate_stream_cut(cut(positions), H1, H1_LENGTHS)


@pytest.mark.parametrize(
    ("history", "positions", "message"),
    [
        (H1, {}, "at least one segment"),
        (H1, {S0: 0, sid(9, 0): 0}, "not segments of the stream: 9.#epoch.0"),
        (H1, {S0: 101, S1: 0}, "offset 101 of segment 0.#epoch.0 is beyond its length 100"),
        (H1, {S2: 31, S4: 0}, "offset 31 of segment 2.#epoch.1 is beyond its length 30"),
        (H1, {S0: 5, S2: 3, S1: 0}, "segments 0.#epoch.0 [0.0, 0.5) and 2.#epoch.1 [0.0, 0.25) overlap"),
        # predecessor and successor both at non-negative offsets
        (H1, {S2: 1, S3: 1, S1: 1, S4: 0}, "overlap"),
        (H1, {S0: -1, S2: 3, S3: 0, S1: 0}, "future segment 0.#epoch.0 (offset -1) comes before segment 2.#epoch.1"),
        (H1, {S3: -1, S2: 0, S1: 0, S0: 0}, "overlap"),
        (H1, {S2: 10, S1: 0}, "key range [0.25, 0.5) is not covered"),
        (H1, {S0: 0}, "key range [0.5, 1.0) is not covered"),
        (H1, {S2: 0, S3: 0}, "key range [0.5, 1.0) is not covered"),
        (H1, {S1: -1}, "key range [0.0, 0.5) is not covered"),
        # merge then split: E is a descendant of A through C although E does not overlap A
        (H2, {A: 5, E: 3}, "segment 2.#epoch.1 [0.0, 1.0) is only partly after the cut"),
        # C follows A (still being read) on [0, .5) but would be skipped on [.5, 1)
        (H2, {A: 5, D: -1, E: -1}, "segment 2.#epoch.1 [0.0, 1.0) is only partly after the cut"),
        # X follows A (still being read) on [0, .5) but would be skipped on [.5, .75)
        (H3, {A: 5, T: 3, X2: -1}, "segment 2.#epoch.1 [0.0, 0.75) is only partly after the cut: it follows 0.#epoch.0 but not on [0.5, 0.75)"),
    ],
)
def test_invalid_cuts(history, positions, message):
    with pytest.raises(InvalidStreamCutError, match=re.escape(message)):
        validate_stream_cut(cut(positions), history, H1_LENGTHS if history is H1 else None)


@pytest.mark.parametrize(
    ("history", "positions"),
    [
        (H2, {A: 5, B: 3}),
        (H2, {A: 5, C: -1}),     # B read, C not reached
        (H2, {A: 10, B: 10}),
        (H2, {C: 4}),
        (H2, {D: 0, E: 7}),
        (H3, {A: 5, T: 3, X: -1}),
        (H3, {X1: 1, X2: 1, T: 1}),
        (H3, {A: 1, B: 1}),
    ],
)
def test_valid_cuts_across_merges(history, positions):
    validate_stream_cut(cut(positions), history)


def test_unbounded_is_not_validated():
    validate_stream_cut(StreamCut.UNBOUNDED, H1)


def test_open_segment_lengths_are_only_checked_when_given():
    validate_stream_cut(cut({S2: 10_000, S4: 0}), H1)
    with pytest.raises(InvalidStreamCutError, match="beyond its length 0"):
        validate_stream_cut(cut({S2: 0, S4: 1}), H1, {S2: 0})  # S4 missing: empty


def test_event_boundary_hook():
    calls = []

    def on_boundary(segment: int, offset: int) -> bool:
        calls.append((segment, offset))
        return offset % 8 == 0

    validate_stream_cut(cut({S2: 16, S3: 0, S1: 200}), H1, H1_LENGTHS, is_event_boundary=on_boundary)
    assert calls == [(S2, 16)]  # 0 and a segment's length are always boundaries
    with pytest.raises(InvalidStreamCutError, match="offset 12 of segment 2.#epoch.1 is not on an event boundary"):
        validate_stream_cut(cut({S2: 12, S3: 0, S1: 0}), H1, H1_LENGTHS, is_event_boundary=on_boundary)


def test_pravega_valid_cut_of_a_stream_with_many_scales():
    # StreamMetadataStoreTest.streamCutTest: 100 segments, each scale replaces all of them; a cut
    # taking segment i from any epoch is valid, {0: 0} alone is not.
    h = initial_segments(100)
    for _ in range(10):
        current = [r for r in h if r.sealed_epoch is None]
        h = scale(h, [r.segment_id for r in current], [(r.key_start, r.key_end) for r in current])
    rng = random.Random(7)
    mixed = {}
    for i in range(100):
        epoch = rng.randrange(10)
        mixed[sid(epoch * 100 + i, epoch)] = 0
    validate_stream_cut(cut(mixed), h)
    with pytest.raises(InvalidStreamCutError, match="not covered"):
        validate_stream_cut(cut({0: 0}), h)


# ---------------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------------


def test_equal_or_after_on_one_epoch():
    h = initial_segments(2)
    base = cut({0: 10, 1: 10})
    assert stream_cut_equal_or_after(base, base, h)
    assert stream_cut_equal_or_after(cut({0: 10, 1: 20}), base, h)
    assert not stream_cut_equal_or_after(cut({0: 9, 1: 15}), base, h)
    assert stream_cut_equal_or_after(cut({0: 9, 1: 15}), cut({0: 1, 1: 1}), h)


def test_equal_or_after_across_epochs_both_directions():
    epoch1 = cut({S2: 10, S3: 5, S1: 7})
    later = cut({S2: 10, S4: 0})
    assert stream_cut_equal_or_after(later, epoch1, H1)
    assert not stream_cut_equal_or_after(epoch1, later, H1)
    head = head_of_stream(H1, STREAM)
    tail = tail_cut(STREAM, H1, H1_LENGTHS)
    assert stream_cut_equal_or_after(tail, head, H1)
    assert not stream_cut_equal_or_after(head, tail, H1)
    # Same segment: offsets decide even if the rest moved on.
    assert not stream_cut_equal_or_after(cut({S2: 9, S4: 0}), epoch1, H1)


def test_future_entry_is_before_any_offset_of_its_segment():
    future = cut({S2: 10, S4: -1})
    started = cut({S2: 10, S4: 0})
    assert stream_cut_equal_or_after(started, future, H1)
    assert not stream_cut_equal_or_after(future, started, H1)
    assert compare_stream_cuts(future, started, H1) is CutComparison.BEFORE
    # A future successor is after the predecessors being read (span and id).
    assert stream_cut_equal_or_after(cut({S2: 10, S3: 5, S4: -1}), cut({S2: 10, S3: 5, S1: 7}), H1)


def test_cut_with_a_future_successor_beside_its_predecessor_is_equal_or_after_itself():
    # A subscribers' lower bound can hold S1 (still being read) and its merged successor S4 at -1
    # (S4's other predecessor S3 is done). Truncating there makes it the head, and reading from
    # "earliest" compares it with itself (regression: it was "before" itself).
    head = cut({S2: 10, S1: 20, S4: -1})
    validate_stream_cut(head, H1)
    assert stream_cut_equal_or_after(head, head, H1)
    later = cut({S2: 20, S1: 20, S4: -1})
    assert stream_cut_equal_or_after(later, head, H1)
    assert not stream_cut_equal_or_after(head, later, H1)
    assert stream_cut_equal_or_after(cut({S2: 10, S4: 0}), head, H1)
    assert not stream_cut_equal_or_after(cut({S2: 10, S3: 0, S1: 20}), head, H1)  # S3 not done yet
    assert not stream_cut_equal_or_after(head, cut({S2: 10, S1: 30, S4: -1}), H1)


def test_pravega_compare_scenarios():
    # StreamMetadataStoreTest.strictlyGreaterThanTest
    h = initial_segments(2)
    ref = cut({0: 10, 1: 10})
    assert compare_stream_cuts(cut({0: 0, 1: 10}), ref, h) is CutComparison.BEFORE
    assert compare_stream_cuts(cut({0: 10, 1: 10}), ref, h) is CutComparison.EQUAL_OR_AFTER
    assert compare_stream_cuts(cut({0: 1, 1: 11}), ref, h) is CutComparison.OVERLAPS
    assert compare_stream_cuts(cut({0: 20, 1: 20}), ref, h) is CutComparison.EQUAL_OR_AFTER


def test_compare_across_epochs():
    epoch1 = cut({S2: 10, S3: 5, S1: 7})
    later = cut({S2: 10, S4: 0})
    assert compare_stream_cuts(later, epoch1, H1) is CutComparison.EQUAL_OR_AFTER
    assert compare_stream_cuts(epoch1, later, H1) is CutComparison.BEFORE
    ahead_in_s2 = cut({S2: 20, S3: 5, S1: 7})
    assert compare_stream_cuts(ahead_in_s2, later, H1) is CutComparison.OVERLAPS
    assert compare_stream_cuts(later, ahead_in_s2, H1) is CutComparison.OVERLAPS


def test_comparisons_refuse_unbounded_other_streams_and_unknown_segments():
    c = cut({S0: 0, S1: 0})
    for fn in (stream_cut_equal_or_after, compare_stream_cuts):
        with pytest.raises(InvalidStreamCutError, match="unbounded or empty"):
            fn(c, StreamCut.UNBOUNDED, H1)
        with pytest.raises(InvalidStreamCutError, match="unbounded or empty"):
            fn(StreamCut(STREAM, {}), c, H1)
        with pytest.raises(InvalidStreamCutError, match="different streams"):
            fn(c, StreamCut("iot/other", {S0: 0, S1: 0}), H1)
        with pytest.raises(InvalidStreamCutError, match="not segments of the stream"):
            fn(c, cut({sid(7, 3): 0}), H1)


# ---------------------------------------------------------------------------------------------
# Segments and sizes between cuts
# ---------------------------------------------------------------------------------------------


def test_segments_and_size_between_across_a_scale():
    head = head_of_stream(H1, STREAM)
    tail = tail_cut(STREAM, H1, H1_LENGTHS)
    everything = 100 + 200 + 50 + 30 + 70
    assert segments_between(head, tail, H1) == [S0, S1, S2, S3, S4]
    assert size_between(head, tail, H1, H1_LENGTHS) == everything
    assert size_between(StreamCut.UNBOUNDED, tail, H1, H1_LENGTHS) == everything
    assert size_between(StreamCut.UNBOUNDED, StreamCut.UNBOUNDED, H1, H1_LENGTHS) == everything

    epoch1 = cut({S2: 10, S3: 5, S1: 7})
    assert segments_between(epoch1, tail, H1) == [S1, S2, S3, S4]
    # S2: 30 - 10; S3: 50 - 5; S1: 200 - 7; S4: 70
    assert size_between(epoch1, tail, H1, H1_LENGTHS) == 20 + 45 + 193 + 70
    assert size_between(epoch1, StreamCut.UNBOUNDED, H1, H1_LENGTHS) == 20 + 45 + 193 + 70
    assert size_between(head, epoch1, H1) == 100 + 10 + 5 + 7
    assert size_between(epoch1, epoch1, H1) == 0

    # Future entries count from 0; an open segment of unknown size adds nothing.
    with_future = cut({S2: 10, S3: 5, S4: -1})
    assert size_between(epoch1, with_future, H1) == 0 + 0 + (200 - 7) + 0
    # S3 is still being read in `with_future`: its 45 remaining bytes count although the
    # future entry S4 overlaps it (Pravega's segmentsBetweenStreamCutSpans drops S3 here).
    assert segments_between(with_future, tail, H1) == [S2, S3, S4]
    assert size_between(with_future, tail, H1, H1_LENGTHS) == 20 + 45 + 70
    # ... while S1, read to its end and followed by S4, stays out.
    assert S1 not in segments_between(with_future, StreamCut.UNBOUNDED, H1)
    assert size_between(epoch1, StreamCut.UNBOUNDED, H1) == 45 + 193


def test_between_refuses_a_to_cut_before_from():
    epoch1 = cut({S2: 10, S3: 5, S1: 7})
    later = cut({S2: 10, S4: 0})
    with pytest.raises(InvalidStreamCutError, match="is not equal to or after"):
        segments_between(later, epoch1, H1)
    with pytest.raises(InvalidStreamCutError, match="is not equal to or after"):
        size_between(later, epoch1, H1)
    with pytest.raises(InvalidStreamCutError, match="different streams"):
        segments_between(epoch1, StreamCut("iot/other", {S2: 10, S4: 0}), H1)


def test_pravega_size_scenario():
    # StreamMetadataStoreTest.sizeTest: epoch 0 {0, 1}; both sealed at 40 bytes into 2, 3.
    h = scale(initial_segments(2), [0, 1], [(0.0, 0.5), (0.5, 1.0)], {0: 40, 1: 40})
    start = StreamCut.UNBOUNDED
    assert size_between(start, cut({0: 10, 1: 10}), h) == 20
    assert size_between(start, cut({0: 20, 1: 20}), h) == 40
    assert size_between(start, cut({0: 30, 1: 30}), h) == 60
    map4 = cut({0: 40, sid(3, 1): 10})
    validate_stream_cut(map4, h)
    assert size_between(start, map4, h) == 90
    assert size_between(start, cut({sid(2, 1): 10, sid(3, 1): 10}), h) == 100
    # getSizeTillStreamCut with a reference record: reference size + size(reference -> cut).
    assert 60 + size_between(cut({0: 30, 1: 30}), map4, h) == 90


def _segments_between_history() -> list[SegmentRecord]:
    # StreamTestBase.testStreamCutSegmentsBetween: 0, 1, 2 -> 3..8 (each split in two) -> 9, 10.
    h = initial_segments(3)
    zero, one, two = h
    h = scale(h, [0, 1, 2], [(0.0, 0.16), (0.16, zero.key_end), (one.key_start, 0.5), (0.5, one.key_end),
                             (two.key_start, 0.83), (0.83, two.key_end)])
    return scale(h, [sid(n, 1) for n in range(3, 9)], [(0.0, 0.5), (0.5, 1.0)])


def test_pravega_segments_between_scenarios():
    h = _segments_between_history()
    n = {i: sid(i, 0 if i < 3 else 1 if i < 9 else 2) for i in range(11)}

    def between(frm: Iterable[int], to: Iterable[int] | None = None) -> list[int]:
        to_cut = StreamCut.UNBOUNDED if to is None else cut({n[i]: 0 for i in to})
        return segments_between(cut({n[i]: 0 for i in frm}), to_cut, h)

    assert len(between([0, 1, 2])) == 11
    assert len(between([0, 2, 5, 6])) == 10 and n[1] not in between([0, 2, 5, 6])
    assert between([0, 5, 10]) == [n[i] for i in (0, 3, 4, 5, 9, 10)]
    assert set(between([6, 7, 8, 9])) == {n[i] for i in (6, 7, 8, 9, 10)}
    assert between([10, 9]) == [n[9], n[10]]
    for frm, to in [([3, 4, 1, 2], [0, 1, 2]), ([3, 4, 1, 2], [0, 5, 6, 2]), ([0, 5, 6, 2], [8, 7, 1, 3, 4])]:
        with pytest.raises(InvalidStreamCutError, match="not equal to or after"):
            between(frm, to)
    assert set(between([0, 1, 2], [0, 5, 6, 2])) == {n[i] for i in (0, 1, 2, 5, 6)}
    assert len(between([0, 5, 6, 2], [9, 10])) == 10 and n[1] not in between([0, 5, 6, 2], [9, 10])
    from_start = segments_between(StreamCut.UNBOUNDED, cut({n[i]: 0 for i in (0, 5, 6, 2)}), h)
    assert set(from_start) == {n[i] for i in (0, 1, 2, 5, 6)}


# ---------------------------------------------------------------------------------------------
# Long histories, cross-checked against straightforward re-statements of the rules
# ---------------------------------------------------------------------------------------------


def _long_history(epochs: int, seed: int, sizes: int = 1000) -> list[SegmentRecord]:
    """Alternating splits and merges of neighbours, 2..12 open segments."""
    rng = random.Random(seed)
    h = initial_segments(4)
    for _ in range(epochs):
        current = sorted((r for r in h if r.sealed_epoch is None), key=lambda r: r.key_start)
        if len(current) > 2 and (len(current) >= 12 or rng.random() < 0.45):
            i = rng.randrange(len(current) - 1)
            a, b = current[i], current[i + 1]
            h = scale(h, [a.segment_id, b.segment_id], [(a.key_start, b.key_end)],
                      {a.segment_id: sizes, b.segment_id: sizes})
        else:
            s = rng.choice(current)
            mid = (s.key_start + s.key_end) / 2
            h = scale(h, [s.segment_id], [(s.key_start, mid), (mid, s.key_end)], {s.segment_id: sizes})
    return h


def _naive_span(c: StreamCut, by_id: Mapping[int, SegmentRecord]) -> dict[int, int]:
    low = min(by_id[s].creation_epoch for s in c.positions)
    high = max(by_id[s].creation_epoch for s in c.positions)
    return {s: max(e for e in range(low, high + 1) if by_id[s].in_epoch(e)) for s in c.positions}


def _naive_equal_or_after(c1: StreamCut, c2: StreamCut, h: Sequence[SegmentRecord]) -> bool:
    by_id = {r.segment_id: r for r in h}
    sp1, sp2 = _naive_span(c1, by_id), _naive_span(c2, by_id)
    return not any(
        (s1 == s2 and c1.positions[s1] < c2.positions[s2])
        or (by_id[s1].overlaps(by_id[s2]) and sp1[s1] < sp2[s2])
        for s1 in c1.positions for s2 in c2.positions
    )


def _naive_compare(c1: StreamCut, c2: StreamCut, h: Sequence[SegmentRecord]) -> CutComparison:
    by_id = {r.segment_id: r for r in h}
    results = set()
    for s1 in c1.positions:
        for s2 in c2.positions:
            if s1 == s2:
                results.add((c1.positions[s1] > c2.positions[s2]) - (c1.positions[s1] < c2.positions[s2]))
            elif by_id[s1].overlaps(by_id[s2]):
                results.add((s1 > s2) - (s1 < s2))
    if 1 in results and -1 in results:
        return CutComparison.OVERLAPS
    return CutComparison.BEFORE if -1 in results else CutComparison.EQUAL_OR_AFTER


def _naive_between(c1: StreamCut, c2: StreamCut, h: Sequence[SegmentRecord]) -> list[int]:
    by_id = {r.segment_id: r for r in h}
    sp1, sp2 = _naive_span(c1, by_id), _naive_span(c2, by_id)
    f_low, f_high, t_low, t_high = min(sp1.values()), max(sp1.values()), min(sp2.values()), max(sp2.values())
    out = set()
    for e in range(f_low, t_high + 1):
        for r in epoch_members(h, e):
            if f_high <= e <= t_low:
                out.add(r.segment_id)
                continue
            from_ids = [s for s in c1.positions if by_id[s].overlaps(r)]
            after_from = all(s <= r.segment_id for s in from_ids) or any(s <= r.segment_id for s in from_ids)
            if after_from and all(r.segment_id <= s for s in c2.positions if by_id[s].overlaps(r)):
                out.add(r.segment_id)
    return sorted(out)


def _chain_model_is_valid(c: StreamCut, h: Sequence[SegmentRecord]) -> bool:
    """The semantic model, key by key: for each elementary key interval, the segments that held
    it form a chain in time; the cut's position there is the first listed segment of the chain.
    Valid iff every key has a position, every segment at a non-negative offset is that first
    listed segment on all its keys, and every other segment is either before the position on all
    of its keys or on none."""
    bounds = sorted({r.key_start for r in h} | {r.key_end for r in h})
    before: dict[int, set[bool]] = {}
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        mid = (lo + hi) / 2
        chain = sorted((r for r in h if r.key_start <= mid < r.key_end), key=lambda r: r.creation_epoch)
        listed = [i for i, r in enumerate(chain) if r.segment_id in c.positions]
        if not listed:
            return False
        first = listed[0]
        for i, r in enumerate(chain):
            if r.segment_id in c.positions:
                if c.positions[r.segment_id] >= 0 and i != first:
                    return False
            else:
                before.setdefault(r.segment_id, set()).add(i < first)
    return all(len(v) == 1 for v in before.values())


def _random_cut(h: Sequence[SegmentRecord], rng: random.Random) -> StreamCut:
    last = current_epoch(h)
    e = rng.randrange(last + 1)
    positions = {r.segment_id: rng.choice((0, 3)) for r in epoch_members(h, e)}
    for _ in range(rng.randrange(4)):
        sealed = [s for s in positions if next(r for r in h if r.segment_id == s).sealed_epoch is not None]
        if not sealed:
            break
        s = rng.choice(sealed)
        del positions[s]
        for succ in successors_with_predecessors(h, s):
            positions.setdefault(succ, rng.choice((-1, -1, 0)))
    roll = rng.random()
    if roll < 0.15 and len(positions) > 1:
        del positions[rng.choice(list(positions))]
    elif roll < 0.3:
        positions[rng.choice(h).segment_id] = rng.choice((-1, 0))
    elif roll < 0.4:
        positions[rng.choice(list(positions))] = -1
    return cut(positions)


def _is_valid(c: StreamCut, h: Sequence[SegmentRecord]) -> bool:
    try:
        validate_stream_cut(c, h)
    except InvalidStreamCutError:
        return False
    return True


def test_validity_matches_the_key_by_key_model_on_random_cuts():
    h = _long_history(40, seed=1)
    rng = random.Random(2)
    verdicts = []
    for _ in range(400):
        c = _random_cut(h, rng)
        expected = _chain_model_is_valid(c, h)
        assert _is_valid(c, h) == expected, c
        verdicts.append(expected)
    assert 40 < sum(verdicts) < 360  # both kinds were exercised


def test_comparisons_match_naive_rules_on_random_cuts():
    h = _long_history(40, seed=3)
    rng = random.Random(4)
    cuts = [c for c in (_random_cut(h, rng) for _ in range(300)) if _is_valid(c, h)][:60]
    assert len(cuts) >= 30
    for c1, c2 in zip(cuts, cuts[1:] + cuts[:1], strict=True):
        by_id = {r.segment_id: r for r in h}
        assert cut_span(c1, h) == _naive_span(c1, by_id)
        ge = stream_cut_equal_or_after(c1, c2, h)
        assert ge == _naive_equal_or_after(c1, c2, h)
        assert compare_stream_cuts(c1, c2, h) == _naive_compare(c1, c2, h)
        if ge:
            assert segments_between(c2, c1, h) == _naive_between(c2, c1, h)
        else:
            with pytest.raises(InvalidStreamCutError):
                segments_between(c2, c1, h)


def test_long_history():
    h = _long_history(1000, seed=5, sizes=64)
    assert current_epoch(h) == 1000 and len(h) > 1400
    lengths = {r.segment_id: 8 for r in h if r.sealed_epoch is None}
    head = head_of_stream(h, STREAM)
    tail = tail_cut(STREAM, h, lengths)
    validate_stream_cut(tail, h, lengths)
    validate_stream_cut(head, h, lengths)
    assert stream_cut_equal_or_after(tail, head, h)
    assert not stream_cut_equal_or_after(head, tail, h)
    assert compare_stream_cuts(head, tail, h) is CutComparison.BEFORE
    assert segments_between(head, tail, h) == sorted(r.segment_id for r in h)
    expected = sum(64 if r.sealed_epoch is not None else 8 for r in h)
    assert size_between(head, tail, h, lengths) == expected
    assert size_between(StreamCut.UNBOUNDED, StreamCut.UNBOUNDED, h, lengths) == expected
    middle = cut({r.segment_id: 0 for r in epoch_members(h, 500)})
    validate_stream_cut(middle, h)
    before_middle = sum(64 for r in h if r.sealed_epoch is not None and r.sealed_epoch <= 500)
    assert size_between(head, middle, h) == before_middle
    assert size_between(middle, tail, h, lengths) == expected - before_middle
