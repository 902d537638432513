"""What holds a JVM's heap: a small reader of HPROF heap dumps (``jcmd PID GC.heap_dump FILE``).

It answers the two questions a class histogram cannot: which objects keep a class's instances
alive (the shortest reference path from a GC root to each, grouped by path), and how much of the
heap goes once the instances of a class are gone (their retained size: what is reachable from
the GC roots only through them). The long soak uses it to split the live heap between Spark
Connect's stopped streaming queries and everything else (``tests/soak_long.py --heap-dumps``).

Sizes are HotSpot's shallow sizes with compressed references (a 12-byte header, 4-byte
references, 8-byte alignment), so the reachable total is close to ``GC.heap_info``'s live heap.
Classes and the dump's GC roots are the roots; a ``java.lang.ref.Reference``'s ``referent`` is
not a strong reference and is not followed.

    .venv/bin/python -m bench.hprof DUMP.hprof --paths org.apache.spark.sql.delta.Snapshot
    .venv/bin/python -m bench.hprof DUMP.hprof --retained CLASS [CLASS ...]
"""

from __future__ import annotations

import argparse
import mmap
import struct
from collections import Counter

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order

# HPROF basic types: 2 is a reference (the dump's identifier size), the rest their byte width
_WIDTH = {4: 1, 5: 2, 6: 4, 7: 8, 8: 1, 9: 2, 10: 4, 11: 8}
_ID = struct.Struct(">Q")
_ROOT_BODY = {0xFF: 8, 0x05: 8, 0x07: 8, 0x01: 16, 0x02: 16, 0x03: 16, 0x08: 16, 0x04: 12, 0x06: 12}
STREAMING_QUERY_CACHE = "org.apache.spark.sql.connect.service.SparkConnectStreamingQueryCache"
STREAMING_QUERY = "org.apache.spark.sql.execution.streaming.runtime.StreamingQueryWrapper"
TORRENT_BROADCAST = "org.apache.spark.broadcast.TorrentBroadcast"
BROADCAST_BLOCK_ID = "org.apache.spark.storage.BroadcastBlockId"
# the map entries that hold a block manager's blocks by id (the MemoryStore's LinkedHashMap, the
# BlockInfoManager's ConcurrentHashMap)
_MAP_ENTRIES = {"java.util.LinkedHashMap$Entry": "value", "java.util.HashMap$Node": "value",
                "java.util.concurrent.ConcurrentHashMap$Node": "val"}


def _aligned(size: int) -> int:
    return (size + 7) & ~7


class HeapDump:
    """A heap dump's objects and references, as a graph reachable from a virtual root.

    Args:
        path: an HPROF file with 8-byte identifiers (a 64-bit HotSpot JVM's dump).
    """

    def __init__(self, path: str) -> None:
        with open(path, "rb") as f:
            self._data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        data = self._data
        end = data.find(b"\0")
        if struct.unpack_from(">I", data, end + 1)[0] != 8:
            raise ValueError(f"{path}: only 8-byte identifiers are read")
        self._names: dict[int, str] = {}
        self._class_name_id: dict[int, int] = {}
        self._super: dict[int, int] = {}
        self._fields: dict[int, list[tuple[int, int]]] = {}
        self._statics: dict[int, list[tuple[str, int]]] = {}
        self._layouts: dict[int, list[tuple[str, int, int]]] = {}  # every field: (name, type, offset)
        self._refs: dict[int, list[tuple[str, int]]] = {}  # strong reference fields: (name, offset)
        # (id, kind, size, where): kind is the class of an instance or an object array, 0 for a class,
        # -type for a primitive array; where is the file offset of an instance's fields or a
        # primitive array's elements (> 0), or of an object array's elements (< 0)
        objects: list[tuple[int, int, int, int]] = []
        instances: list[tuple[int, int, int]] = []
        self._roots: list[int] = []
        self._lengths: dict[int, int] = {}  # a primitive array's length
        src: list[int] = []
        dst: list[int] = []
        pos, n = end + 1 + 12, len(data)
        while pos < n:
            tag = data[pos]
            length = struct.unpack_from(">I", data, pos + 5)[0]
            body, pos = pos + 9, pos + 9 + length
            if tag == 0x01:
                self._names[_ID.unpack_from(data, body)[0]] = data[body + 8:body + length].decode("utf-8", "replace")
            elif tag == 0x02:
                self._class_name_id[_ID.unpack_from(data, body + 4)[0]] = _ID.unpack_from(data, body + 16)[0]
            elif tag in (0x0C, 0x1C):
                self._read_heap(body, body + length, objects, instances, src, dst)
        for oid, cid, off in instances:
            for _, at in self._layout(cid):
                ref = _ID.unpack_from(data, off + at)[0]
                if ref:
                    src.append(oid)
                    dst.append(ref)
        self.ids = np.array([o[0] for o in objects], dtype=np.uint64)
        table = np.array([o[1:] for o in objects], dtype=np.int64).reshape(-1, 3)
        self.kinds, self.sizes, self._where = table[:, 0].copy(), table[:, 1].copy(), table[:, 2].copy()
        del objects, table
        self._order = np.argsort(self.ids)
        self._sorted = self.ids[self._order]
        count = len(self.ids)
        s, d = self.index(np.array(src, dtype=np.uint64)), self.index(np.array(dst, dtype=np.uint64))
        keep = (s >= 0) & (d >= 0)
        roots = self.index(np.unique(np.array(self._roots, dtype=np.uint64)))
        roots = roots[roots >= 0]
        rows = np.concatenate([s[keep], np.full(len(roots), count)])
        cols = np.concatenate([d[keep], roots])
        self.graph = csr_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(count + 1, count + 1))
        self.root = count
        self._class_of_name: dict[str, list[int]] = {}
        self._live: float | None = None  # bytes reachable from the roots, once asked

    def _read_heap(self, p, stop, objects, instances, src, dst) -> None:
        data = self._data
        while p < stop:
            sub = data[p]
            p += 1
            if sub in _ROOT_BODY:
                self._roots.append(_ID.unpack_from(data, p)[0])
                p += _ROOT_BODY[sub]
            elif sub == 0x20:  # a class: its constant pool, static fields and instance fields
                cid = _ID.unpack_from(data, p)[0]
                self._super[cid] = _ID.unpack_from(data, p + 12)[0]
                p += 8 + 4 + 6 * 8 + 4
                pool, p = struct.unpack_from(">H", data, p)[0], p + 2
                for _ in range(pool):  # (index u2, type u1, value)
                    p += 3 + (_WIDTH.get(data[p + 2]) or 8)
                count, p = struct.unpack_from(">H", data, p)[0], p + 2
                statics = []
                for _ in range(count):  # (name id, type u1, value)
                    name, kind = _ID.unpack_from(data, p)[0], data[p + 8]
                    p += 9
                    if kind == 2:
                        ref = _ID.unpack_from(data, p)[0]
                        if ref:
                            statics.append((self._names.get(name, "?"), ref))
                            src.append(cid)
                            dst.append(ref)
                    p += _WIDTH.get(kind) or 8
                self._statics[cid] = statics
                count, p = struct.unpack_from(">H", data, p)[0], p + 2
                fields = []
                for _ in range(count):  # (name id, type u1)
                    fields.append((_ID.unpack_from(data, p)[0], data[p + 8]))
                    p += 9
                self._fields[cid] = fields
                self._roots.append(cid)
                objects.append((cid, 0, 0, 0))
            elif sub == 0x21:  # an instance: its fields' bytes, this class's first, then its supers'
                oid, _, cid, nbytes = struct.unpack_from(">QIQI", data, p)
                p += 24
                instances.append((oid, cid, p))
                refs = sum(1 for _, kind, _ in self._offsets(cid) if kind == 2)
                objects.append((oid, cid, _aligned(12 + nbytes - 4 * refs), p))
                p += nbytes
            elif sub == 0x22:  # an object array
                oid, _, count, cid = struct.unpack_from(">QIIQ", data, p)
                p += 24
                for ref in struct.unpack_from(f">{count}Q", data, p):
                    if ref:
                        src.append(oid)
                        dst.append(ref)
                objects.append((oid, cid, _aligned(16 + 4 * count), -p))
                p += 8 * count
            elif sub == 0x23:  # a primitive array
                oid, _, count, kind = struct.unpack_from(">QIIB", data, p)
                p += 17
                objects.append((oid, -kind, _aligned(16 + _WIDTH[kind] * count), p))
                self._lengths[oid] = count
                p += _WIDTH[kind] * count
            else:
                raise ValueError(f"unknown heap dump record {sub:#x} at byte {p - 1}")

    def _offsets(self, cid: int) -> list[tuple[str, int, int]]:
        """(name, type, byte offset) of every field in an instance of class ``cid``: its own
        fields first, then its superclasses', as the dump stores them."""
        if cid not in self._layouts:
            fields, at, klass = [], 0, cid
            while klass:
                for name_id, kind in self._fields.get(klass, ()):
                    fields.append((self._names.get(name_id, "?"), kind, at))
                    at += _WIDTH.get(kind) or 8
                klass = self._super.get(klass, 0)
            self._layouts[cid] = fields
        return self._layouts[cid]

    def _layout(self, cid: int) -> list[tuple[str, int]]:
        """(name, byte offset) of the strong reference fields in an instance of class ``cid`` (a
        ``Reference``'s ``referent`` is not one)."""
        if cid not in self._refs:
            weak = self._is_reference(cid)
            self._refs[cid] = [(name, at) for name, kind, at in self._offsets(cid)
                               if kind == 2 and not (weak and name == "referent")]
        return self._refs[cid]

    def _is_reference(self, cid: int) -> bool:
        while cid:
            if self.class_name(cid) == "java.lang.ref.Reference":
                return True
            cid = self._super.get(cid, 0)
        return False

    def class_name(self, cid: int) -> str:
        return self._names.get(self._class_name_id.get(cid, 0), f"?{cid:x}").replace("/", ".")

    def index(self, object_ids: np.ndarray) -> np.ndarray:
        """Row index of each object id, -1 where the dump has no such object."""
        at = np.minimum(np.searchsorted(self._sorted, object_ids), len(self._sorted) - 1)
        return np.where(self._sorted[at] == object_ids, self._order[at], -1)

    def instances(self, class_name: str) -> np.ndarray:
        """Row indexes of the instances of exactly ``class_name``."""
        if class_name not in self._class_of_name:
            cids = [cid for cid in self._class_name_id if self.class_name(cid) == class_name]
            self._class_of_name[class_name] = cids
        return np.nonzero(np.isin(self.kinds, self._class_of_name[class_name]))[0]

    def _reachable(self, without: np.ndarray | None = None) -> np.ndarray:
        graph = self.graph
        if without is not None and len(without):
            graph = graph.copy()
            graph.data[np.isin(graph.indices, without)] = 0
            graph.eliminate_zeros()
        found = breadth_first_order(graph, self.root, directed=True, return_predecessors=False)
        return found[found < self.root]

    def _live_bytes(self, without: np.ndarray | None = None) -> float:
        if without is None:
            if self._live is None:
                self._live = float(self.sizes[self._reachable()].sum())
            return self._live
        return float(self.sizes[self._reachable(without)].sum())

    def live_mib(self) -> float:
        """MiB reachable from the GC roots."""
        return self._live_bytes() / 2**20

    def retained_mib(self, class_name: str) -> float:
        """MiB reachable only through the instances of ``class_name`` (their retained size)."""
        return (self._live_bytes() - self._live_bytes(self.instances(class_name))) / 2**20

    def retained_with_broadcasts(self, class_name: str) -> tuple[float, int]:
        """(MiB, broadcasts): what the instances of ``class_name`` keep alive, counting as theirs
        the block manager's copies of each broadcast whose handle (a ``TorrentBroadcast``) only
        they reach. The block manager holds those copies directly, but Spark's ``ContextCleaner``
        drops a broadcast's blocks once its handle is collected: they go with the instances."""
        holders = self.instances(class_name)
        kept = np.setdiff1d(self._reachable(), self._reachable(holders))
        handles = kept[np.isin(kept, self.instances(TORRENT_BROADCAST))]
        ids = {self.long_field(int(h), "id") for h in handles}
        keys = {int(self.ids[b]) for b in self.instances(BROADCAST_BLOCK_ID) if self.long_field(int(b), "broadcastId") in ids}
        values = []
        for name, value in _MAP_ENTRIES.items():
            for entry in self.instances(name):
                kind, at = int(self.kinds[entry]), int(self._where[entry])
                key_at = next(off for field, off in self._layout(kind) if field == "key")
                if _ID.unpack_from(self._data, at + key_at)[0] in keys:
                    values.append(self.field(int(entry), value))
        without = np.concatenate([holders, np.array([v for v in values if v >= 0], dtype=holders.dtype)])
        return (self._live_bytes() - self._live_bytes(without)) / 2**20, len(ids)

    def long_field(self, row: int, name: str) -> int | None:
        """An instance's ``long`` field ``name`` (its own or a superclass's), None if absent."""
        at = next((at for field, kind, at in self._offsets(int(self.kinds[row])) if field == name and kind == 11), None)
        return None if at is None else struct.unpack_from(">q", self._data, int(self._where[row]) + at)[0]

    def retained_each_mib(self, class_name: str) -> list[tuple[int, float]]:
        """(row, MiB reachable only through it) for each instance of ``class_name``."""
        return [(int(row), (self._live_bytes() - self._live_bytes(np.array([row]))) / 2**20)
                for row in self.instances(class_name)]

    def field(self, row: int, name: str) -> int:
        """The row an instance's reference field ``name`` points to, -1 for null or absent."""
        kind, at = int(self.kinds[row]), int(self._where[row])
        for field, off in self._layout(kind) if kind > 0 and at > 0 else ():
            if field == name:
                ref = _ID.unpack_from(self._data, at + off)[0]
                return int(self.index(np.array([ref], dtype=np.uint64))[0]) if ref else -1
        return -1

    def string(self, row: int) -> str | None:
        """A ``java.lang.String``'s text (Latin-1 or UTF-16, as compact strings store it)."""
        value = self.field(row, "value")
        if row < 0 or value < 0:
            return None
        count, at = self._lengths[int(self.ids[value])], int(self._where[value])
        raw = bytes(self._data[at:at + count])
        coder = self._byte_field(row, "coder")  # 0 Latin-1, 1 UTF-16
        return raw.decode("utf-16-be" if coder else "latin-1")

    def _byte_field(self, row: int, name: str) -> int:
        at = next((at for field, kind, at in self._offsets(int(self.kinds[row])) if field == name and kind in (4, 8)), None)
        return 0 if at is None else self._data[int(self._where[row]) + at]

    def _label(self, row: int) -> str:
        kind = int(self.kinds[row])
        if kind == 0:
            return f"class {self.class_name(int(self.ids[row]))}"
        return self.class_name(kind) if kind > 0 else f"primitive array ({kind})"

    def _field(self, parent: int, child_id: int) -> str:
        kind, at = int(self.kinds[parent]), int(self._where[parent])
        if kind < 0:
            return ""
        if kind == 0:
            return next((f"::{name}" for name, ref in self._statics.get(int(self.ids[parent]), ()) if ref == child_id), "")
        if at < 0:
            return "[]"
        return next((f".{name}" for name, off in self._layout(kind) if _ID.unpack_from(self._data, at + off)[0] == child_id),
                    "")

    def paths(self, class_name: str, tail: int = 12) -> list[tuple[int, list[str]]]:
        """The shortest path from a GC root to each instance of ``class_name``, grouped by the
        last ``tail`` steps: (instances, steps from the root), most instances first."""
        _, parent = breadth_first_order(self.graph, self.root, directed=True, return_predecessors=True)
        groups: Counter = Counter()
        example: dict[tuple, list[str]] = {}
        for row in self.instances(class_name):
            steps, at = [], int(row)
            while True:
                up = int(parent[at])
                if up < 0:
                    steps.append("(unreachable)")
                    break
                if up == self.root:
                    steps.append("(GC root)")
                    break
                steps.append(self._label(up) + self._field(up, int(self.ids[at])))
                at = up
            steps.reverse()
            key = tuple(steps[:2] + steps[-tail:])
            groups[key] += 1
            example.setdefault(key, steps)
        return [(count, example[key]) for key, count in groups.most_common()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dump")
    parser.add_argument("--paths", metavar="CLASS", help="reference paths from GC roots to this class's instances")
    parser.add_argument("--retained", metavar="CLASS", nargs="*", default=[], help="retained size of these classes' instances")
    parser.add_argument("--with-broadcasts", metavar="CLASS", nargs="*", default=[],
                        help="retained size of these classes' instances, the broadcasts only they reference included")
    args = parser.parse_args()
    heap = HeapDump(args.dump)
    print(f"{len(heap.ids):,} objects; {heap.live_mib():.1f} MiB reachable from GC roots")
    for name in args.retained:
        print(f"{name}: {len(heap.instances(name))} instances retain {heap.retained_mib(name):.1f} MiB")
    for name in args.with_broadcasts:
        mib, broadcasts = heap.retained_with_broadcasts(name)
        print(f"{name}: {len(heap.instances(name))} instances retain {mib:.1f} MiB with the {broadcasts} broadcasts "
              "only they reference")
    if args.paths:
        for count, steps in heap.paths(args.paths)[:30]:
            print(f"\n{count} x, {len(steps)} steps:")
            print("\n".join(f"    {step}" for step in steps))


if __name__ == "__main__":
    main()
