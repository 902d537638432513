"""Key-value table rules without storage: configuration, keys, batches, conditions, versions and
the router's hash."""

from __future__ import annotations

import pytest

import pravega_spark as ps
from pravega_spark import Insert, Put, Remove, Version
from pravega_spark.store.schema import MAX_BATCH_KEY_COUNT, MAX_KEY_LENGTH, MAX_VALUE_LENGTH
from pravega_spark.tables.kv_router import partition_of, xxhash64
from pravega_spark.tables.table_entries import check_batch, check_conditions, check_key, check_value

CONFIG = ps.KeyValueTableConfiguration(4, primary_key_length=2, secondary_key_length=1)


@pytest.mark.parametrize("args", [(0, 1, 0), (1, 0, 0), (1, 1, -1), (True, 1, 0), (1, "2", 0),
                                  (1, MAX_KEY_LENGTH, 1)])
def test_configuration_is_validated(args):
    with pytest.raises(ps.InvalidConfigError):
        ps.KeyValueTableConfiguration(*args)


def test_configuration_round_trips_and_allows_the_longest_key():
    config = ps.KeyValueTableConfiguration(3, MAX_KEY_LENGTH - 1, 1)
    assert ps.KeyValueTableConfiguration.from_json(config.to_json()) == config and config.key_length == MAX_KEY_LENGTH


def test_keys_and_values():
    assert check_key(bytearray(b"abc"), CONFIG) == b"abc"
    for bad in (b"ab", b"abcd", "abc", None):
        with pytest.raises(ps.InvalidKeyError):
            check_key(bad, CONFIG)
    assert len(check_value(b"x" * MAX_VALUE_LENGTH)) == MAX_VALUE_LENGTH
    with pytest.raises(ps.TableEntryTooLargeError):
        check_value(b"x" * (MAX_VALUE_LENGTH + 1))


def test_batches_follow_pravegas_rules():
    assert check_batch([Put(b"abc", b"1"), Insert(b"abd", b"2")], CONFIG) == b"ab"
    assert check_batch([Remove(b"abc"), Remove(b"abd", Version(1, 2))], CONFIG) == b"ab"
    cases = [([], ps.InvalidBatchError), ([Put(b"abc", b"1"), Put(b"xyc", b"1")], ps.InvalidBatchError),
             ([Put(b"abc", b"1"), Remove(b"abd")], ps.InvalidBatchError),
             ([Put(b"abc", b"1"), Put(b"abc", b"2")], ps.InvalidBatchError), (["abc"], ps.InvalidBatchError),
             ([Put(b"ab" + bytes([i % 256]), b"1") for i in range(MAX_BATCH_KEY_COUNT + 1)], ps.TableEntryTooLargeError),
             ([Put(b"ab" + bytes([i]), b"x" * MAX_VALUE_LENGTH) for i in range(17)], ps.TableEntryTooLargeError)]
    for batch, error in cases:
        with pytest.raises(error):
            check_batch(batch, CONFIG)


def test_conditions():
    current = {b"abc": Version(1, 5)}
    check_conditions([Put(b"abc", b"1", Version(1, 5)), Insert(b"abd", b"1"), Put(b"abe", b"1"), Remove(b"abf")], current)
    for mods, error in [([Insert(b"abc", b"1")], ps.BadKeyVersionError),
                        ([Put(b"abc", b"1", Version(1, 4))], ps.BadKeyVersionError),
                        ([Put(b"abc", b"1", Version.NOT_EXISTS)], ps.BadKeyVersionError),
                        ([Remove(b"abd", Version(1, 5))], ps.NoSuchKeyError)]:
        with pytest.raises(error):
            check_conditions(mods, current)
    assert issubclass(ps.BadKeyVersionError, ps.ConditionalTableUpdateError)


def test_versions_order_and_print():
    assert Version(1, 2) < Version(1, 3) and str(Version(2, 9)) == "2:9"
    assert Version.from_string("2:9") == Version(2, 9)
    with pytest.raises(ValueError):
        Version.from_string("nine")


def test_router_hash_and_partitions():
    # Spark's xxhash64 (seed 42) of known inputs (checked against Spark in the integration tests)
    assert xxhash64(b"") == -7444071767201028348
    counts = [0] * 4
    for i in range(4000):
        counts[partition_of(b"%06d" % i, 4)] += 1
    assert all(800 < c < 1200 for c in counts)
    assert partition_of(b"anything", 1) == 0
