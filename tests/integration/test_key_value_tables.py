"""Key-value tables on real Delta tables: lifecycle, Pravega's conditional scenarios, limits, batch
rules, bulk updates, reads, validation, and real processes racing on keys."""

from __future__ import annotations

import os

import pytest
from pyspark.sql import functions as F

import pravega_spark as ps
from pravega_spark import Insert, Put, Remove, Version
from pravega_spark.store.schema import MAX_BATCH_LENGTH, MAX_KEY_LENGTH, MAX_VALUE_LENGTH
from pravega_spark.tables.kv_router import partition_of
from tests.conftest import CONNECT
from tests.processes import spawn

CONFIG = ps.KeyValueTableConfiguration(4, primary_key_length=4, secondary_key_length=2)


@pytest.fixture
def kvt(manager) -> ps.KeyValueTable:
    manager.create_scope("kv")
    assert manager.create_key_value_table("kv", "table", CONFIG)
    return manager.key_value_table("kv", "table")


def entries_version(kvt) -> int:
    return kvt.spark.sql(f"DESCRIBE HISTORY delta.`{kvt.path}` LIMIT 1").collect()[0]["version"]


@pytest.mark.connect
def test_conditional_updates_follow_pravega(kvt):
    # insert twice: the second finds the key
    v1 = kvt.insert(b"aaaa01", b"one")
    with pytest.raises(ps.BadKeyVersionError):
        kvt.insert(b"aaaa01", b"again")
    # a put at the current version succeeds; the same (now stale) version fails
    v2 = kvt.put(b"aaaa01", b"two", v1)
    assert v2 > v1 and v2.segment == v1.segment == partition_of(b"aaaa", 4)
    with pytest.raises(ps.BadKeyVersionError):
        kvt.put(b"aaaa01", b"stale", v1)
    assert kvt.get(b"aaaa01") == ps.TableEntry(b"aaaa01", b"two", v2)
    # a conditional update of a missing key; a conditional remove with a bad version
    with pytest.raises(ps.NoSuchKeyError):
        kvt.put(b"aaaa02", b"x", v2)
    with pytest.raises(ps.BadKeyVersionError):
        kvt.remove(b"aaaa01", v1)
    assert isinstance(ps.NoSuchKeyError("x"), ps.ConditionalTableUpdateError)
    # remove, then insert again: a newer version than any before
    kvt.remove(b"aaaa01", v2)
    assert kvt.get(b"aaaa01") is None and not kvt.exists(b"aaaa01")
    with pytest.raises(ps.NoSuchKeyError):
        kvt.remove(b"aaaa01", v2)
    kvt.remove(b"aaaa01")  # unconditional remove of an absent key: nothing to do
    v3 = kvt.insert(b"aaaa01", b"three")
    assert v3 > v2
    assert kvt.put(b"aaaa01", b"four", Version.from_string(str(v3))) > v3
    # an insert spelled as a put at NOT_EXISTS
    v4 = kvt.put(b"bbbb01", b"b", Version.NOT_EXISTS)
    with pytest.raises(ps.BadKeyVersionError):
        kvt.put(b"bbbb01", b"b", Version.NOT_EXISTS)
    assert kvt.get_all([b"bbbb01", b"cccc01", b"aaaa01"])[0].version == v4
    assert kvt.get_all([b"bbbb01", b"cccc01"])[1] is None
    rows = {bytes(r["key"]): (bytes(r["value"]), r["version"]) for r in kvt.entries().collect()}
    assert rows == {b"aaaa01": (b"four", rows[b"aaaa01"][1]), b"bbbb01": (b"b", v4.number)}


def test_keys_values_and_batches_at_pravega_limits(kvt, manager):
    before = entries_version(kvt)
    for bad in (b"aaaa0", b"aaaa012", "aaaa01", b""):
        with pytest.raises(ps.InvalidKeyError):
            kvt.put(bad, b"v")
        with pytest.raises(ps.InvalidKeyError):
            kvt.get(bad)
    # a value of exactly the maximum is accepted, one byte more refused
    biggest = bytes(range(256)) * (MAX_VALUE_LENGTH // 256)
    assert len(biggest) == MAX_VALUE_LENGTH
    version = kvt.put(b"maxv01", biggest)
    stored = kvt.get(b"maxv01")
    assert stored.value == biggest and stored.version == version
    after_big = entries_version(kvt)
    with pytest.raises(ps.TableEntryTooLargeError):
        kvt.put(b"maxv02", biggest + b"x")
    # batch rules: one primary key, no mixing, no key twice, <= 256 keys, <= the byte limit
    bad_batches = [
        ([Put(b"aaaa01", b"v"), Put(b"bbbb01", b"v")], ps.InvalidBatchError),
        ([Put(b"aaaa01", b"v"), Remove(b"aaaa02")], ps.InvalidBatchError),
        ([Put(b"aaaa01", b"v"), Insert(b"aaaa01", b"w")], ps.InvalidBatchError),
        ([], ps.InvalidBatchError),
        ([Put(b"aa%04d" % i, b"v") for i in range(257)], ps.TableEntryTooLargeError),
        ([Put(b"zzzz%02d" % i, biggest) for i in range(17)], ps.TableEntryTooLargeError),
    ]
    for batch, error in bad_batches:
        with pytest.raises(error):
            kvt.update(batch)
    assert entries_version(kvt) == after_big > before  # refused input changed nothing
    # a batch of 256 keys of one primary key is one commit, all or nothing
    wide = ps.KeyValueTableConfiguration(1, primary_key_length=2, secondary_key_length=2)
    manager.create_key_value_table("kv", "wide", wide)
    table = manager.key_value_table("kv", "wide")
    versions = table.update([Put(b"pk" + i.to_bytes(2, "big"), b"v%d" % i) for i in range(256)])
    assert len(set(versions)) == 1 and table.entries().count() == 256
    with pytest.raises(ps.BadKeyVersionError):  # one stale key: none of the 256 applies
        table.update([Put(b"pk" + i.to_bytes(2, "big"), b"new", versions[0] if i else Version(0, 999))
                      for i in range(256)])
    assert table.entries().where(F.col("value") == F.lit(bytearray(b"new"))).count() == 0
    # the longest key Pravega allows, and a configuration one byte over
    longest = ps.KeyValueTableConfiguration(2, primary_key_length=MAX_KEY_LENGTH - 1, secondary_key_length=1)
    manager.create_key_value_table("kv", "long-keys", longest)
    table = manager.key_value_table("kv", "long-keys")
    key = bytes(MAX_KEY_LENGTH - 1) + b"\xff"
    assert table.get(key) is None
    inserted = table.insert(key, b"v")
    assert table.get(key) == ps.TableEntry(key, b"v", inserted)
    with pytest.raises(ps.InvalidConfigError):
        ps.KeyValueTableConfiguration(2, primary_key_length=MAX_KEY_LENGTH, secondary_key_length=1)
    assert MAX_BATCH_LENGTH == 16 * 1024 * 1024 - 1 - 8192


@pytest.mark.connect
def test_lifecycle_names_and_scope(manager):
    manager.create_scope("kv")
    longest = "k" * 250
    config = ps.KeyValueTableConfiguration(2, 8)
    assert manager.create_key_value_table("kv", longest, config)
    assert not manager.create_key_value_table("kv", longest, config)
    assert manager.create_key_value_table("kv", "other", ps.KeyValueTableConfiguration(3, 2, 1))
    for bad in ("k" * 251, "_internal", "a/b", ".."):
        with pytest.raises(ps.InvalidNameError):
            manager.create_key_value_table("kv", bad, config)
    with pytest.raises(ps.ScopeNotFoundError):
        manager.create_key_value_table("nope", "t", config)
    with pytest.raises(ps.InvalidConfigError):
        manager.create_key_value_table("kv", "t", "not a config")
    listed = {r["key_value_table"]: (r["partition_count"], r["primary_key_length"], r["secondary_key_length"])
              for r in manager.list_key_value_tables("kv").collect()}
    assert listed == {longest: (2, 8, 0), "other": (3, 2, 1)}
    assert manager.list_streams("kv").count() == 0  # KVTs are not streams
    with pytest.raises(ps.ScopeNotEmptyError):
        manager.delete_scope("kv")
    handle = manager.key_value_table("kv", "other")
    handle.put(b"abc", b"v")
    assert manager.delete_key_value_table("kv", "other")
    assert not manager.delete_key_value_table("kv", "other")
    with pytest.raises(ps.KeyValueTableNotFoundError):
        handle.get(b"abc")
    with pytest.raises(ps.KeyValueTableNotFoundError):
        manager.key_value_table("kv", "other")
    # created again: empty, and the old handle still refuses
    assert manager.create_key_value_table("kv", "other", ps.KeyValueTableConfiguration(3, 2, 1))
    assert manager.key_value_table("kv", "other").get(b"abc") is None
    with pytest.raises(ps.KeyValueTableNotFoundError):
        handle.put(b"abc", b"v")
    manager.delete_key_value_table("kv", "other")
    manager.delete_key_value_table("kv", longest)
    assert manager.delete_scope("kv")


@pytest.mark.slow
@pytest.mark.connect
def test_update_all_mixed_outcomes_atomic_per_primary_key(kvt, spark):
    v_a = kvt.put(b"aaaa01", b"a1")
    kvt.put(b"bbbb01", b"b1")
    before = {bytes(r["key"]): r["version"] for r in kvt.entries().collect()}
    rows = [(b"cccc%02d" % i, b"c%d" % i, None) for i in range(20)]  # new keys, unconditional
    rows += [(b"aaaa01", b"a2", v_a.number),  # a put at the current version
             (b"aaaa02", b"a3", -1),  # an insert
             (b"bbbb01", b"b2", 12345),  # a stale version: fails, and so does bbbb02
             (b"bbbb02", b"b3", None),
             (b"dddd01", b"d", 7),  # a version for a missing key
             (b"eeee01", b"e1", None), (b"eeee01", b"e2", None),  # a key twice
             (b"ffff", b"f", None)]  # a short key
    df = spark.createDataFrame(rows, "key binary, value binary, version long")
    out = {bytes(r["key"]): (r["version"], r["error"]) for r in kvt.update_all(df, version="version").collect()}
    assert out[b"aaaa01"][1] is None and out[b"aaaa01"][0] > v_a.number
    assert out[b"aaaa02"][1] is None
    assert out[b"bbbb01"] == (None, "BadKeyVersion") and out[b"bbbb02"] == (None, "BatchFailed")
    assert out[b"dddd01"] == (None, "NoSuchKey")
    assert out[b"eeee01"] == (None, "DuplicateKey")
    assert out[b"ffff"] == (None, "InvalidKey")
    assert all(out[b"cccc%02d" % i][1] is None for i in range(20))
    live = {bytes(r["key"]): (bytes(r["value"]), r["version"]) for r in kvt.entries().collect()}
    assert live[b"aaaa01"] == (b"a2", out[b"aaaa01"][0]) and live[b"aaaa02"][0] == b"a3"
    assert live[b"bbbb01"] == (b"b1", before[b"bbbb01"]) and b"bbbb02" not in live
    assert b"dddd01" not in live and b"eeee01" not in live and len(live) == 23
    # the outcome is materialized: reading it again, after more updates, gives the same rows
    again = kvt.update_all(df.where(F.col("key") == F.lit(bytearray(b"aaaa02"))), version="version")
    assert again.collect()[0]["error"] == "BadKeyVersion"
    # reads: one primary key with a secondary-key range, by prefix, by range, time travel
    pk = sorted(bytes(r["key"]) for r in kvt.for_primary_key(b"cccc", b"05", b"07").collect())
    assert pk == [b"cccc05", b"cccc06", b"cccc07"]
    assert kvt.for_primary_key(b"cccc", prefix=b"1").count() == 10
    assert kvt.for_prefix(b"aa").count() == 2
    assert {bytes(r["key"])[:4] for r in kvt.for_range(b"bbbb", b"cccc").collect()} == {b"bbbb", b"cccc"}
    assert kvt.entries(version=1).count() == 1
    with pytest.raises(ps.InvalidConfigError):
        kvt.update_all(df, key="nope")


def test_get_reads_a_few_files_without_a_spark_job(kvt, spark):
    df = spark.range(3000).select(F.concat(F.lit(b"pk"), F.lpad(F.col("id").cast("string"), 4, "0")
                                           .cast("binary")).alias("key"),
                                  F.col("id").cast("string").cast("binary").alias("value"))
    kvt.update_all(df).collect()
    kvt.put(b"pk0007", b"newer")
    sc = spark.sparkContext
    sc.setJobGroup("kv-get", "kv-get")
    try:
        entry = kvt.get(b"pk0007")
        files = kvt.files_read
        others = kvt.get_all([b"pk0100", b"pk2999", b"zz0000"])
    finally:
        sc.setJobGroup("other", "other")
    assert entry.value == b"newer" and others[0].value == b"100" and others[2] is None
    assert sc.statusTracker().getJobIdsForGroup("kv-get") == []
    assert files is not None and 1 <= files <= 2


@pytest.mark.slow
@pytest.mark.skipif(CONNECT, reason="Great Expectations runs on the classic tier")
def test_validation_catches_a_duplicated_key_and_a_key_in_the_wrong_partition(kvt, manager, spark):
    kvt.update([Put(b"aaaa01", b"1"), Put(b"aaaa02", b"2")])
    kvt.put(b"aaaa01", b"3")
    kvt.remove(b"aaaa02")
    kvt.put(b"bbbb01", b"4")
    result = manager.validate_key_value_table("kv", "table")
    assert result.success, str(result)
    good = kvt.entries_log().where(F.col("key") == F.lit(bytearray(b"bbbb01"))).collect()[0]
    wrong = (good["partition"] + 1) % 4
    # a duplicated entry (same key and version), and an entry stored in another partition
    bad = spark.createDataFrame([(good["partition"], good["key_hash"], bytes(good["key"]), b"dup", good["version"], False),
                                 (wrong, good["key_hash"], bytes(good["key"]), b"moved", good["version"] + 5, False)],
                                kvt.entries_log().schema)
    bad.write.format("delta").mode("append").save(kvt.path)
    result = manager.validate_key_value_table("kv", "table")
    failed = {r.expectation for r in result.failures}
    # the duplicate also repeats a version in the log's order
    assert failed == {"kv_one_live_entry_per_key", "kv_key_in_its_partition", "kv_versions_increase_per_key"}, \
        str(result)
    assert kvt.get(b"aaaa01").value == b"3"


def test_compaction_keeps_live_entries_and_versions(kvt):
    for i in range(3):
        kvt.put(b"aaaa01", b"v%d" % i)
    v = kvt.put(b"aaaa02", b"x")
    kvt.remove(b"aaaa02", v)
    live = sorted((bytes(r["key"]), bytes(r["value"]), r["version"]) for r in kvt.entries().collect())
    assert kvt.compact() == 3  # two older puts of aaaa01, aaaa02's put (its tombstone is the newest)
    assert sorted((bytes(r["key"]), bytes(r["value"]), r["version"]) for r in kvt.entries().collect()) == live
    assert kvt.insert(b"aaaa02", b"y").number > v.number  # versions go on from the partition's largest


def _outputs(procs, timeout=300):
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err[-3000:]
        outs.append(out)
    return outs


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.skipif(CONNECT, reason="the processes run classic sessions")
def test_processes_racing_on_one_key_exactly_one_wins_each_round(kvt, root, tmp_path):
    first = kvt.insert(b"race01", b"start")
    rounds = 3
    procs = [spawn("kv-cas", "--root", root, "--scope", "kv", "--stream", "table", "--key-list", "race01",
                   "--writer", name, "--rounds", str(rounds), "--parties", "2", "--barrier", str(tmp_path / "b"))
             for name in ("p1", "p2")]
    outs = _outputs(procs)
    wins = [line for out in outs for line in out.splitlines() if " WIN " in line]
    for r in range(rounds):
        assert sum(line.startswith(f"ROUND {r} WIN") for line in wins) == 1, outs
    entry = kvt.get(b"race01")
    assert entry.version == max(Version.from_string(line.split()[-1]) for line in wins) > first
    assert entry.value.decode().endswith(f":{rounds - 1}")


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.skipif(CONNECT, reason="the processes run classic sessions")
def test_processes_on_different_partitions_never_retry(kvt, root, tmp_path):
    primaries = {}
    for i in range(100):
        pk = b"p%03d" % i
        primaries.setdefault(partition_of(pk, 4), pk)
    a, b = primaries[0], primaries[3]
    procs = [spawn("kv-puts", "--root", root, "--scope", "kv", "--stream", "table", "--key-list", pk.decode(),
                   "--writer", pk.decode(), "--number", "12", "--parties", "2", "--barrier", str(tmp_path / "b"))
             for pk in (a, b)]
    outs = _outputs(procs)
    assert [out.strip().splitlines()[-1] for out in outs] == ["RETRIES 0", "RETRIES 0"], outs
    live = kvt.entries().collect()
    assert len(live) == 16 and all(bytes(r["value"]).startswith(b"w") for r in live)
    assert os.path.isdir(str(tmp_path / "b"))


def test_router_matches_spark(spark):
    from pravega_spark.tables.kv_router import partition_column, xxhash64

    keys = [bytes((i * 7 + j) % 256 for j in range(n)) for i, n in enumerate(list(range(0, 70)) + [255, 8192])]
    df = spark.createDataFrame([(k,) for k in keys], "key binary")
    got = df.select(F.xxhash64("key").alias("h"),
                    partition_column("key", primary_key_length=3, partition_count=7).alias("p")).collect()
    assert [r["h"] for r in got] == [xxhash64(k) for k in keys]
    assert [r["p"] for r in got] == [partition_of(k[:3], 7) for k in keys]
