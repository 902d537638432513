"""Tests for pravega_spark.stream.config (Pravega's ScalingPolicy, RetentionPolicy, StreamConfiguration)."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta

import pytest

from pravega_spark.errors import InvalidConfigError, PravegaSparkError
from pravega_spark.stream.config import (
    MAX_TAG_COUNT,
    MAX_TAG_LENGTH,
    RetentionPolicy,
    RetentionType,
    ScaleType,
    ScalingPolicy,
    StreamConfiguration,
)

# --- ScalingPolicy -------------------------------------------------------------------------------


def test_fixed_policy_fields():
    policy = ScalingPolicy.fixed(3)
    assert policy == ScalingPolicy(ScaleType.FIXED_NUM_SEGMENTS, 0, 0, 3)
    assert (policy.target_rate, policy.scale_factor, policy.min_num_segments) == (0, 0, 3)


def test_rate_policies_fields():
    events = ScalingPolicy.by_event_rate(100, 2, 3)
    assert events.scale_type is ScaleType.BY_RATE_IN_EVENTS_PER_SEC
    assert (events.target_rate, events.scale_factor, events.min_num_segments) == (100, 2, 3)
    data = ScalingPolicy.by_data_rate(1024, 4, 1)
    assert data.scale_type is ScaleType.BY_RATE_IN_KBYTES_PER_SEC
    assert (data.target_rate, data.scale_factor, data.min_num_segments) == (1024, 4, 1)


@pytest.mark.parametrize("bad", [0, -1])
def test_fixed_needs_positive_segments(bad):
    with pytest.raises(InvalidConfigError, match=f"min_num_segments must be >= 1, got {bad}"):
        ScalingPolicy.fixed(bad)


@pytest.mark.parametrize(
    "args, fragment",
    [
        ((0, 2, 1), "target_rate must be >= 1, got 0"),
        ((-5, 2, 1), "target_rate must be >= 1, got -5"),
        ((10, 0, 1), "scale_factor must be >= 1, got 0"),
        ((10, 2, 0), "min_num_segments must be >= 1, got 0"),
        ((1.5, 2, 1), "target_rate must be an int >= 1, got float 1.5"),
        ((10, True, 1), "scale_factor must be an int >= 1, got bool True"),
        ((10, 2, "3"), "min_num_segments must be an int >= 1, got str '3'"),
    ],
)
@pytest.mark.parametrize("factory", [ScalingPolicy.by_event_rate, ScalingPolicy.by_data_rate])
def test_rate_policy_validation(factory, args, fragment):
    with pytest.raises(InvalidConfigError) as info:
        factory(*args)
    assert fragment in str(info.value)


def test_scaling_bool_and_float_refused():
    with pytest.raises(InvalidConfigError, match="got bool True"):
        ScalingPolicy.fixed(True)
    with pytest.raises(InvalidConfigError, match="got float 2.0"):
        ScalingPolicy.fixed(2.0)


def test_direct_construction_is_validated():
    with pytest.raises(InvalidConfigError, match="target_rate=0 and scale_factor=0"):
        ScalingPolicy(ScaleType.FIXED_NUM_SEGMENTS, 10, 2, 1)
    with pytest.raises(InvalidConfigError, match="target_rate=0 and scale_factor=0"):
        ScalingPolicy(ScaleType.FIXED_NUM_SEGMENTS, False, 0, 1)
    with pytest.raises(InvalidConfigError, match="scale_type must be a ScaleType"):
        ScalingPolicy("FIXED_NUM_SEGMENTS", 0, 0, 1)
    with pytest.raises(InvalidConfigError, match="target_rate must be >= 1"):
        ScalingPolicy(ScaleType.BY_RATE_IN_EVENTS_PER_SEC, 0, 0, 1)
    with pytest.raises(InvalidConfigError, match="min_num_segments must be >= 1"):
        dataclasses.replace(ScalingPolicy.fixed(2), min_num_segments=0)


def test_config_error_bases():
    with pytest.raises(ValueError):
        ScalingPolicy.fixed(0)
    with pytest.raises(PravegaSparkError):
        ScalingPolicy.fixed(0)


def test_scaling_repr():
    assert repr(ScalingPolicy.fixed(3)) == "ScalingPolicy.fixed(3)"
    assert repr(ScalingPolicy.by_event_rate(100, 2, 3)) == (
        "ScalingPolicy.by_event_rate(target_rate=100, scale_factor=2, min_num_segments=3)"
    )
    assert repr(ScalingPolicy.by_data_rate(64, 3, 1)) == (
        "ScalingPolicy.by_data_rate(target_kbps=64, scale_factor=3, min_num_segments=1)"
    )


@pytest.mark.parametrize(
    "policy",
    [
        ScalingPolicy.fixed(1),
        ScalingPolicy.by_event_rate(100, 2, 3),
        ScalingPolicy.by_data_rate(1024, 4, 7),
    ],
)
def test_scaling_dict_round_trip(policy):
    assert ScalingPolicy.from_dict(json.loads(json.dumps(policy.to_dict()))) == policy


def test_scaling_from_dict_errors():
    with pytest.raises(InvalidConfigError, match="scale_type must be one of FIXED_NUM_SEGMENTS"):
        ScalingPolicy.from_dict(
            {"scale_type": "BY_MOOD", "target_rate": 0, "scale_factor": 0, "min_num_segments": 1}
        )
    with pytest.raises(InvalidConfigError, match="missing 'min_num_segments'"):
        ScalingPolicy.from_dict(
            {"scale_type": "FIXED_NUM_SEGMENTS", "target_rate": 0, "scale_factor": 0}
        )


# --- RetentionPolicy -----------------------------------------------------------------------------


def test_by_time_fields():
    policy = RetentionPolicy.by_time(timedelta(days=1))
    assert policy.retention_type is RetentionType.TIME
    assert policy.retention_param == timedelta(days=1)
    assert policy.retention_max is None
    bounded = RetentionPolicy.by_time(timedelta(hours=1), timedelta(days=7))
    assert bounded.retention_max == timedelta(days=7)
    assert RetentionPolicy.by_time(timedelta(0)).retention_param == timedelta(0)


def test_by_size_fields():
    policy = RetentionPolicy.by_size_bytes(10 << 30)
    assert policy.retention_type is RetentionType.SIZE
    assert policy.retention_param == 10 << 30
    assert policy.retention_max is None
    assert RetentionPolicy.by_size_bytes(0, 0).retention_max == 0
    assert RetentionPolicy.by_size_bytes(5, 10).retention_max == 10


@pytest.mark.parametrize(
    "args, fragment",
    [
        ((timedelta(seconds=-1),), "time retention min must be >= timedelta(0)"),
        ((3600,), "time retention min must be a datetime.timedelta >= 0, got int 3600"),
        ((timedelta(1), 5), "time retention max must be a datetime.timedelta >= 0, got int 5"),
        ((timedelta(days=2), timedelta(days=1)), "retention max must be >= min"),
    ],
)
def test_by_time_validation(args, fragment):
    with pytest.raises(InvalidConfigError) as info:
        RetentionPolicy.by_time(*args)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "args, fragment",
    [
        ((-1,), "size retention min (bytes) must be >= 0, got -1"),
        ((1.5,), "must be an int >= 0, got float 1.5"),
        ((True,), "must be an int >= 0, got bool True"),
        ((10, -1), "size retention max (bytes) must be >= 0, got -1"),
        ((10, 5), "retention max must be >= min, got max=5 < min=10"),
        ((timedelta(1),), "got timedelta"),
    ],
)
def test_by_size_validation(args, fragment):
    with pytest.raises(InvalidConfigError) as info:
        RetentionPolicy.by_size_bytes(*args)
    assert fragment in str(info.value)


def test_retention_type_must_be_enum():
    with pytest.raises(InvalidConfigError, match="retention_type must be a RetentionType"):
        RetentionPolicy("TIME", timedelta(1))


def test_retention_repr():
    assert repr(RetentionPolicy.by_time(timedelta(days=1))) == (
        "RetentionPolicy.by_time(min='1 day, 0:00:00')"
    )
    assert repr(RetentionPolicy.by_time(timedelta(hours=1), timedelta(days=2))) == (
        "RetentionPolicy.by_time(min='1:00:00', max='2 days, 0:00:00')"
    )
    assert repr(RetentionPolicy.by_size_bytes(1024)) == "RetentionPolicy.by_size_bytes(min=1024)"
    assert (
        repr(RetentionPolicy.by_size_bytes(1, 2)) == "RetentionPolicy.by_size_bytes(min=1, max=2)"
    )


@pytest.mark.parametrize(
    "policy",
    [
        RetentionPolicy.by_time(timedelta(days=1)),
        RetentionPolicy.by_time(timedelta(microseconds=1), timedelta(days=36500, microseconds=7)),
        RetentionPolicy.by_time(timedelta(0)),
        RetentionPolicy.by_size_bytes(10 << 30),
        RetentionPolicy.by_size_bytes(0, (1 << 62) + 1),
    ],
)
def test_retention_dict_round_trip(policy):
    assert RetentionPolicy.from_dict(json.loads(json.dumps(policy.to_dict()))) == policy


def test_retention_dict_units():
    assert RetentionPolicy.by_time(timedelta(seconds=1)).to_dict() == {
        "retention_type": "TIME",
        "unit": "microseconds",
        "retention_param": 1_000_000,
        "retention_max": None,
    }
    assert RetentionPolicy.by_size_bytes(5, 6).to_dict()["unit"] == "bytes"
    with pytest.raises(InvalidConfigError, match="stored in microseconds, got unit 'bytes'"):
        RetentionPolicy.from_dict(
            {"retention_type": "TIME", "unit": "bytes", "retention_param": 1, "retention_max": None}
        )


# --- StreamConfiguration -------------------------------------------------------------------------


def test_stream_configuration_defaults():
    config = StreamConfiguration()
    assert config.scaling_policy == ScalingPolicy.fixed(1)
    assert config.retention_policy is None
    assert config.tags == ()
    assert config.timestamp_aggregation_timeout is None
    assert config.rollover_size_bytes == 0


def test_tags_normalised_sorted_and_deduplicated():
    config = StreamConfiguration(tags=["prod", "iot", "prod", "eu"])
    assert config.tags == ("eu", "iot", "prod")
    assert StreamConfiguration(tags=("b", "a")).tags == ("a", "b")
    assert StreamConfiguration(tags={"x"}).tags == ("x",)
    assert StreamConfiguration(tags=(t for t in ["z", "y"])).tags == ("y", "z")
    assert StreamConfiguration(tags=["a", "b"]) == StreamConfiguration(tags=["b", "a", "a"])


def test_tag_count_limit_127():
    tags = [f"t{i}" for i in range(MAX_TAG_COUNT)]
    assert len(StreamConfiguration(tags=tags).tags) == 127
    with pytest.raises(InvalidConfigError) as info:
        StreamConfiguration(tags=tags + ["one-more"])
    assert "at most 127 tags, got 128 distinct tags" in str(info.value)
    # duplicates are collapsed before counting
    assert len(StreamConfiguration(tags=tags + ["t0"]).tags) == 127


def test_tag_length_limit_255():
    assert StreamConfiguration(tags=["x" * MAX_TAG_LENGTH]).tags == ("x" * 255,)
    with pytest.raises(InvalidConfigError) as info:
        StreamConfiguration(tags=["x" * 256])
    message = str(info.value)
    assert "1 to 255 chars, got 256 chars" in message
    assert len(message) < 200


@pytest.mark.parametrize(
    "tags, fragment",
    [
        ("prod", "tags must be an iterable of str (e.g. a list), got str 'prod'"),
        (None, "got NoneType None"),
        (5, "got int 5"),
        ([1], "each tag must be a str, got int 1"),
        ([None], "each tag must be a str, got NoneType None"),
        ([""], "1 to 255 chars, got 0 chars"),
    ],
)
def test_tag_validation(tags, fragment):
    with pytest.raises(InvalidConfigError) as info:
        StreamConfiguration(tags=tags)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"scaling_policy": 3}, "scaling_policy must be a ScalingPolicy"),
        ({"scaling_policy": None}, "got NoneType None"),
        ({"retention_policy": "7d"}, "retention_policy must be a RetentionPolicy or None, got str"),
        ({"timestamp_aggregation_timeout": 10}, "timestamp_aggregation_timeout must be a datetime"),
        (
            {"timestamp_aggregation_timeout": timedelta(seconds=-1)},
            "timestamp_aggregation_timeout must be >= timedelta(0)",
        ),
        ({"rollover_size_bytes": -1}, "rollover_size_bytes must be >= 0, got -1"),
        ({"rollover_size_bytes": 1.0}, "rollover_size_bytes must be an int >= 0, got float"),
        ({"rollover_size_bytes": False}, "got bool False"),
    ],
)
def test_stream_configuration_validation(kwargs, fragment):
    with pytest.raises(InvalidConfigError) as info:
        StreamConfiguration(**kwargs)
    assert fragment in str(info.value)


def test_replace_is_validated_and_normalised():
    config = StreamConfiguration(tags=["a"])
    assert dataclasses.replace(config, tags=["c", "b", "c"]).tags == ("b", "c")
    with pytest.raises(InvalidConfigError):
        dataclasses.replace(config, rollover_size_bytes=-5)


def test_frozen():
    config = StreamConfiguration()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.tags = ("x",)  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ScalingPolicy.fixed(1).min_num_segments = 2  # type: ignore[misc]


def test_equality_and_hashability():
    a = StreamConfiguration(
        ScalingPolicy.by_event_rate(10, 2, 3),
        RetentionPolicy.by_time(timedelta(hours=1)),
        ["b", "a"],
        timedelta(seconds=5),
        1024,
    )
    b = StreamConfiguration(
        ScalingPolicy.by_event_rate(10, 2, 3),
        RetentionPolicy.by_time(timedelta(minutes=60)),
        ("a", "b", "a"),
        timedelta(milliseconds=5000),
        1024,
    )
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b, StreamConfiguration()}) == 2
    assert len({ScalingPolicy.fixed(1), ScalingPolicy.fixed(1), ScalingPolicy.fixed(2)}) == 2
    assert hash(RetentionPolicy.by_size_bytes(1)) == hash(RetentionPolicy.by_size_bytes(1))
    assert RetentionPolicy.by_size_bytes(1) != RetentionPolicy.by_size_bytes(1, 1)


CONFIGS = [
    StreamConfiguration(),
    StreamConfiguration(
        scaling_policy=ScalingPolicy.fixed(3),
        retention_policy=RetentionPolicy.by_size_bytes(10 << 30),
        tags=["prod"],
    ),
    StreamConfiguration(
        scaling_policy=ScalingPolicy.by_event_rate(1000, 2, 4),
        retention_policy=RetentionPolicy.by_time(timedelta(days=1), timedelta(days=30)),
        tags=["z", "a", "m"],
        timestamp_aggregation_timeout=timedelta(seconds=1, microseconds=1),
        rollover_size_bytes=64 << 20,
    ),
    StreamConfiguration(
        scaling_policy=ScalingPolicy.by_data_rate(512, 3, 2),
        retention_policy=RetentionPolicy.by_time(timedelta(days=99999, microseconds=999999)),
        tags=[f"tag-{i}" for i in range(127)],
        timestamp_aggregation_timeout=timedelta(0),
    ),
]


@pytest.mark.parametrize("config", CONFIGS)
def test_json_round_trip(config):
    text = config.to_json()
    json.loads(text)  # plain JSON
    restored = StreamConfiguration.from_json(text)
    assert restored == config
    assert restored.to_json() == text
    assert isinstance(restored.tags, tuple)


def test_json_shape():
    config = StreamConfiguration(
        retention_policy=RetentionPolicy.by_time(timedelta(minutes=1)),
        tags=["b", "a"],
        timestamp_aggregation_timeout=timedelta(seconds=2),
    )
    data = json.loads(config.to_json())
    assert data["tags"] == ["a", "b"]
    assert data["timestamp_aggregation_timeout_us"] == 2_000_000
    assert data["retention_policy"]["retention_param"] == 60_000_000
    assert data["scaling_policy"]["scale_type"] == "FIXED_NUM_SEGMENTS"
    assert json.loads(StreamConfiguration().to_json())["retention_policy"] is None


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "stream configuration must be a JSON object, got list"),
        ("{}", "stream configuration is missing 'retention_policy'"),
        (None, "not valid JSON"),
    ],
)
def test_from_json_errors(text, fragment):
    with pytest.raises(InvalidConfigError) as info:
        StreamConfiguration.from_json(text)
    assert fragment in str(info.value)


def test_from_json_revalidates():
    data = json.loads(StreamConfiguration(tags=["a"]).to_json())
    data["scaling_policy"]["min_num_segments"] = 0
    with pytest.raises(InvalidConfigError, match="min_num_segments must be >= 1, got 0"):
        StreamConfiguration.from_json(json.dumps(data))
    data = json.loads(StreamConfiguration().to_json())
    data["timestamp_aggregation_timeout_us"] = -1
    with pytest.raises(InvalidConfigError, match="timestamp_aggregation_timeout_us must be >= 0"):
        StreamConfiguration.from_json(json.dumps(data))
