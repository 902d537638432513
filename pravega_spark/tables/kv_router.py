"""Key-value table routing: key bytes -> hash -> partition (Pravega's ``KeyValueTableRouter``).

Pravega routes a key by its **primary key** alone (``HashHelper.seededWith("KeyValueTableRouter")
.hashToRange(primaryKey)`` over ``partitionCount`` equal ranges), so every key of one primary key
lands in one table segment, and a batch for one primary key is one segment's atomic update. Here
the hash is Spark's ``xxhash64`` (seed 42), read as a fraction of ``[0, 1)`` from its top 52 bits,
the construction ``routing.key_position`` uses for streams. The same function is written twice:
in Python (``xxhash64``: a single key's partition needs no Spark job) and as a Column (bulk
updates); ``tests/unit/test_kv_router.py`` checks that they agree.

Example:
    >>> xxhash64(b"")
    -7444071767201028348
    >>> partition_of(b"pk-1", 4)
    1
"""

from __future__ import annotations

import struct

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = ["key_hash", "partition_column", "partition_of", "xxhash64"]

_MASK = (1 << 64) - 1
_P1, _P2, _P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P4, _P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
SPARK_SEED = 42
TWO_POW_52 = float(1 << 52)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _MASK, 31) * _P1) & _MASK


def xxhash64(data: bytes, seed: int = SPARK_SEED) -> int:
    """XXH64 of ``data`` as a signed 64-bit int: Spark's ``xxhash64`` of a binary value.

    The published XXH64 algorithm (stripes of 32 bytes in four lanes, then 8-, 4- and 1-byte
    tails, then the avalanche), written for keys of at most 8 KiB.
    """
    n = len(data)
    i = 0
    if n >= 32:
        v1, v2, v3, v4 = (seed + _P1 + _P2) & _MASK, (seed + _P2) & _MASK, seed & _MASK, (seed - _P1) & _MASK
        while i + 32 <= n:
            a, b, c, d = struct.unpack_from("<4Q", data, i)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            i += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK
        for lane in (v1, v2, v3, v4):
            h = ((h ^ _round(0, lane)) * _P1 + _P4) & _MASK
    else:
        h = (seed + _P5) & _MASK
    h = (h + n) & _MASK
    while i + 8 <= n:
        (k,) = struct.unpack_from("<Q", data, i)
        h = (_rotl(h ^ _round(0, k), 27) * _P1 + _P4) & _MASK
        i += 8
    if i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = (_rotl(h ^ ((k * _P1) & _MASK), 23) * _P2 + _P3) & _MASK
        i += 4
    while i < n:
        h = (_rotl(h ^ ((data[i] * _P5) & _MASK), 11) * _P1) & _MASK
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _MASK
    h ^= h >> 29
    h = (h * _P3) & _MASK
    h ^= h >> 32
    return h - (1 << 64) if h >= (1 << 63) else h


def partition_of(primary_key: bytes, partition_count: int) -> int:
    """The partition (table segment) of every key with this primary key."""
    position = ((xxhash64(primary_key) & _MASK) >> 12) / TWO_POW_52
    return min(int(position * partition_count), partition_count - 1)


def key_hash(key: bytes) -> int:
    """The ``key_hash`` column's value for a whole key (its file statistics prune lookups)."""
    return xxhash64(key)


def partition_column(key: Column | str, *, primary_key_length: int, partition_count: int) -> Column:
    """``partition_of`` as a Column over a binary key column (its first ``primary_key_length``
    bytes are the primary key)."""
    column = F.col(key) if isinstance(key, str) else key
    position = F.shiftrightunsigned(F.xxhash64(F.substring(column, 1, primary_key_length)), 12).cast("double") \
        / F.lit(TWO_POW_52)
    return F.least(F.floor(position * F.lit(float(partition_count))), F.lit(partition_count - 1)).cast("int")
