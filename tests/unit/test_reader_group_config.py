"""ReaderGroupConfig: Pravega's builder rules (ReaderGroupConfigTest re-expressed), pure Python."""

from __future__ import annotations

from datetime import timedelta

import pytest

import pravega_spark as ps
from pravega_spark.readers.reader_group_config import EARLIEST, LATEST

S = "iot/sensors"
AUTO = ps.StreamDataRetention.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT


def cut(positions: dict[int, int], stream: str = S) -> ps.StreamCut:
    return ps.StreamCut(stream, positions)


def test_defaults_are_pravegas_and_starts_are_normalised():
    config = ps.ReaderGroupConfig({S: "earliest"})
    assert config.automatic_checkpoint_interval == timedelta(seconds=30)
    assert config.max_outstanding_checkpoints == 3
    assert config.retention_type is ps.StreamDataRetention.NONE and not config.is_subscriber
    assert (config.start_of(S), config.end_of(S)) == (EARLIEST, None)
    unbounded = ps.ReaderGroupConfig({S: (ps.StreamCut.UNBOUNDED, ps.StreamCut.UNBOUNDED)})
    assert (unbounded.start_of(S), unbounded.end_of(S)) == (EARLIEST, None)  # Pravega's UNBOUNDED start: the head
    assert ps.ReaderGroupConfig({S: "latest"}, automatic_checkpoint_interval=None).start_of(S) == LATEST


def test_streams_of_several_scopes_and_names_at_pravegas_limits():
    longest = f"{'s' * 255}/{'t' * 250}"
    config = ps.ReaderGroupConfig({S: "earliest", "other/alerts": "latest", longest: (cut({0: 0}, longest), None)})
    assert config.scoped_streams == sorted([S, "other/alerts", longest])
    with pytest.raises(ps.InvalidConfigError, match="reader group stream"):
        ps.ReaderGroupConfig({f"{'s' * 256}/t": "earliest"})
    with pytest.raises(ps.InvalidConfigError, match="reader group stream"):
        ps.ReaderGroupConfig({"no-slash": "earliest"})


@pytest.mark.parametrize("start, end", [
    ({0: 10, 1: 20}, {0: 10, 1: 25}),          # equal or further
    ({0: 10, 1: 20}, {0: 15, 1: -1}),          # an end of -1 bounds nothing
    ({0: -1, 1: 20}, {0: -1, 1: 20}),          # future in both
    ({0: 10, 1: 20}, {1: 30, (1 << 32) | 2: 0, (1 << 32) | 3: 0}),  # end after a scale: larger ids
    ({0: 0, 1: 0}, {1: 5, 2: 5}),              # segment 0 not in the end: only the id bounds apply
])
def test_start_before_end_is_accepted(start, end):
    config = ps.ReaderGroupConfig({S: (cut(start), cut(end))})
    assert config.end_of(S) == cut(end)


@pytest.mark.parametrize("start, end, message", [
    ({0: 30, 1: 20}, {0: 10, 1: 25}, "segment 0 starts at offset 30, after its end offset 10"),
    ({0: -1, 1: 20}, {0: 15, 1: 25}, "segment 0 starts at offset -1, after its end offset 15"),
    ({(1 << 32) | 2: 0, (1 << 32) | 3: 0}, {0: 10, 1: 25}, "must precede"),  # start after the end's segments
    ({0: 0, 3: 0}, {1: 5, 2: 5}, "must precede"),  # smallest ids in order, largest not
])
def test_start_after_end_is_refused(start, end, message):
    with pytest.raises(ps.InvalidConfigError, match=message):
        ps.ReaderGroupConfig({S: (cut(start), cut(end))})


@pytest.mark.parametrize("streams, message", [
    ({}, "non-empty mapping"),
    ([S], "non-empty mapping"),
    ({S: cut({0: 0}, "iot/other")}, "start cut of 'iot/sensors' is a cut of 'iot/other'"),
    ({S: ("earliest", cut({0: 0}, "iot/other"))}, "end cut of 'iot/sensors' is a cut of 'iot/other'"),
    ({S: "head"}, "must be 'earliest', 'latest' or a StreamCut"),
    ({S: ("earliest", "latest")}, "must be None \\(unbounded\\) or a StreamCut"),
    ({S: ("earliest", None, None)}, "must be a \\(start, end\\) pair"),
])
def test_invalid_streams_are_refused(streams, message):
    with pytest.raises(ps.InvalidConfigError, match=message):
        ps.ReaderGroupConfig(streams)


@pytest.mark.parametrize("kwargs, message", [
    ({"max_outstanding_checkpoints": 0}, "max_outstanding_checkpoints must be an int >= 1, got 0"),
    ({"max_outstanding_checkpoints": True}, "max_outstanding_checkpoints"),
    ({"automatic_checkpoint_interval": timedelta(0)}, "positive timedelta or None"),
    ({"automatic_checkpoint_interval": 30}, "positive timedelta or None"),
    ({"retention_type": "KEEP"}, "retention_type must be one of NONE, MANUAL_RELEASE_AT_USER_STREAMCUT"),
    ({"position_refresh_interval": timedelta(0)}, "position_refresh_interval must be a positive timedelta"),
    ({"position_refresh_interval": 10}, "position_refresh_interval must be a positive timedelta"),
    ({"reader_silence_limit": timedelta(seconds=19)}, r"at least twice the position refresh interval \(0:00:20\)"),
    ({"position_refresh_interval": timedelta(seconds=1), "reader_silence_limit": timedelta(milliseconds=1999)},
     "reader_silence_limit must be None or a timedelta"),
])
def test_invalid_settings_are_refused(kwargs, message):
    with pytest.raises(ps.InvalidConfigError, match=message):
        ps.ReaderGroupConfig({S: "earliest"}, **kwargs)


def test_json_round_trip_equality_and_hash():
    config = ps.ReaderGroupConfig({S: (cut({0: 8, 1: 16}), cut({0: 80, 1: -1})), "other/alerts": "latest"},
                                  automatic_checkpoint_interval=timedelta(milliseconds=1500),
                                  max_outstanding_checkpoints=1, retention_type="MANUAL_RELEASE_AT_USER_STREAMCUT")
    assert config.retention_type is ps.StreamDataRetention.MANUAL_RELEASE_AT_USER_STREAMCUT and config.is_subscriber
    again = ps.ReaderGroupConfig.from_json(config.to_json())
    assert again == config and hash(again) == hash(config)
    assert again != ps.ReaderGroupConfig({S: "earliest"}, retention_type=AUTO)
    assert ps.ReaderGroupConfig.from_json(ps.ReaderGroupConfig({S: "earliest"}, automatic_checkpoint_interval=None)
                                          .to_json()).automatic_checkpoint_interval is None
    assert "retention_type=MANUAL_RELEASE_AT_USER_STREAMCUT" in repr(config)
    # Pravega's write rule: refresh every 10 s, readers silent for 60 s taken offline (None: never)
    assert (config.position_refresh_interval, config.reader_silence_limit) == (timedelta(seconds=10),
                                                                                timedelta(seconds=60))
    tuned = ps.ReaderGroupConfig({S: "earliest"}, position_refresh_interval=timedelta(seconds=2),
                                 reader_silence_limit=None)
    again = ps.ReaderGroupConfig.from_json(tuned.to_json())
    assert again == tuned and again.reader_silence_limit is None and again != ps.ReaderGroupConfig({S: "earliest"})
