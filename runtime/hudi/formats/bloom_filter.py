"""The bloom filter and record-key range every base file carries in its parquet footer.

Hudi 0.14.0 writes base files through ``HoodieAvroFileWriterFactory.newParquetFileWriter``, whose
``getHoodieAvroWriteSupport`` builds a bloom filter whenever the table populates its meta fields (no
switch turns it off in 0.14: ``hoodie.parquet.bloom.filter.enabled`` came in 0.15.0).
``HoodieBloomFilterWriteSupport`` adds each written record's key (its UTF-8 bytes) and keeps the
least and greatest key (``String.compareTo``); ``finalizeMetadata`` puts in the footer's key-value
metadata ``org.apache.hudi.bloomfilter`` (``serializeToString``), ``hoodie_bloom_filter_type_code``
(for a DYNAMIC filter), ``hoodie_min_record_key`` and ``hoodie_max_record_key``.

The filter is ``BloomFilterFactory.createBloomFilter`` with ``HoodieStorageConfig``'s defaults:
``hoodie.index.bloom.num_entries`` 60000, ``hoodie.index.bloom.fpp`` 1e-9,
``hoodie.bloom.index.filter.dynamic.max.entries`` 100000, ``hoodie.bloom.index.filter.type``
DYNAMIC_V0, hashed with ``Hash.MURMUR_HASH``: a ``HoodieDynamicBoundedBloomFilter`` of
``BloomFilterUtils.getBitSize`` bits and ``getNumHashes`` hashes, whose ``InternalDynamicBloomFilter``
holds one ``InternalBloomFilter`` row per ``num_entries`` keys, adds rows up to ``max.entries``, then
spreads further keys over its rows in turn (``getActiveStandardBF``). A key sets the bits
``HashFunction.hash`` gives: ``nbHash`` chained ``MurmurHash.hash(bytes, seed)`` rounds (each round's
hash seeds the next), each bit ``Math.abs(h % vectorSize)``.

``serializeToString`` is the Hadoop ``Writable`` form, base64 (``java.util.Base64``): per filter
``InternalFilter.write`` (int -1, int nbHash, byte hashType, int vectorSize), then the dynamic
filter's int nr, int currentNbRecord, int rows, then each row's header and its bits, bit ``i`` in
byte ``i / 8`` at ``1 << (i % 8)`` (``InternalBloomFilter.write``). All ints big-endian.

Computed here with numpy over all keys at once: keys are grouped by byte length, MurmurHash2's
per-block mixing does not depend on the seed and is done once, and each of the ``nbHash`` rounds is
one vectorised pass over a group. A filter's bits and key range are kept with the file a writer
wrote (:class:`KeyFilter`): a copy-on-write merge without deletes writes the old keys in their order
and appends the new ones, so the new file's filter is the old one plus the appended keys (a key's
bits and its row depend only on the key and its position), and only those are hashed.
"""

from __future__ import annotations

import base64
import math
import struct
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

BLOOM_FILTER_KEY = "org.apache.hudi.bloomfilter"
TYPE_CODE_KEY = "hoodie_bloom_filter_type_code"
MIN_KEY_KEY = "hoodie_min_record_key"
MAX_KEY_KEY = "hoodie_max_record_key"
FOOTER_KEYS = (BLOOM_FILTER_KEY, TYPE_CODE_KEY, MIN_KEY_KEY, MAX_KEY_KEY)
DYNAMIC_V0 = "DYNAMIC_V0"
MURMUR_HASH = 1  # org.apache.hudi.common.util.hash.Hash.MURMUR_HASH
_VERSION = -1  # InternalFilter.VERSION

U32 = npt.NDArray[np.uint32]
I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]

_M = np.uint32(0x5BD1E995)  # MurmurHash2's multiplier
_CHUNK = 1 << 15  # keys hashed at once


@dataclass(frozen=True)
class BloomFilterSpec:
    """``BloomFilterFactory.createBloomFilter``'s arguments (``HoodieStorageConfig`` defaults)."""

    num_entries: int = 60_000
    fpp: float = 1e-9
    max_entries: int = 100_000

    @property
    def vector_size(self) -> int:
        """``BloomFilterUtils.getBitSize``."""
        return math.ceil(self.num_entries * (-math.log(self.fpp) / (math.log(2) * math.log(2))))

    @property
    def num_hashes(self) -> int:
        """``BloomFilterUtils.getNumHashes``."""
        return math.ceil(math.log(2) * self.vector_size / self.num_entries)

    @property
    def max_rows(self) -> int:
        """The rows ``InternalDynamicBloomFilter.addRow`` grows to: the least ``r`` with ``r * nr >= maxNr``."""
        return max(1, -(-self.max_entries // self.num_entries))


def _utf8_groups(keys: pa.Array) -> dict[int, tuple[I64, U8]]:
    """Keys by UTF-8 byte length: length -> (positions in ``keys``, a (n, length) uint8 matrix)."""
    keys = keys.cast(pa.large_string()) if not pa.types.is_large_string(keys.type) else keys
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int64)[keys.offset : keys.offset + len(keys) + 1]
    data = np.frombuffer(keys.buffers()[2], dtype=np.uint8)
    lengths = np.diff(offsets)
    groups: dict[int, tuple[I64, U8]] = {}
    for length in np.unique(lengths).tolist():
        if length == 0:
            raise ValueError("an empty record key cannot be added to a bloom filter (HashFunction.hash)")
        positions = np.flatnonzero(lengths == length)
        starts = offsets[positions]
        groups[length] = (positions, data[starts[:, None] + np.arange(length)])
    return groups


def _murmur_chain(block: U8, rounds: int) -> U32:
    """``rounds`` chained ``MurmurHash.hash(bytes, seed)`` of each row of ``block`` (keys of one
    length): a (rounds, n) uint32 matrix, row ``i`` seeded with row ``i - 1`` (the first with 0)."""
    n, length = block.shape
    words = length >> 2
    with np.errstate(over="ignore"):
        # the block words' mixing (k *= m; k ^= k >>> 24; k *= m) is the same in every round
        k = np.ascontiguousarray(block[:, : words * 4]).view("<u4").T.copy()  # (words, n)
        k = k * _M
        k ^= k >> np.uint32(24)
        k = k * _M
        # the tail's bytes are Java bytes: sign-extended before the shift
        tail = np.zeros(n, dtype=np.uint32)
        for i, shift in enumerate(range((length - words * 4 - 1) * 8, -1, -8)):
            tail ^= (block[:, words * 4 + i].astype(np.int8).astype(np.int32) << shift).astype(np.uint32)
        out = np.empty((rounds, n), dtype=np.uint32)
        seed = np.zeros(n, dtype=np.uint32)
        h = np.empty(n, dtype=np.uint32)
        shifted = np.empty(n, dtype=np.uint32)
        for r in range(rounds):
            np.bitwise_xor(seed, np.uint32(length), out=h)
            for w in range(words):
                np.multiply(h, _M, out=h)
                h ^= k[w]
            if length & 3:
                h ^= tail
                np.multiply(h, _M, out=h)
            np.right_shift(h, 13, out=shifted)
            h ^= shifted
            np.multiply(h, _M, out=h)
            np.right_shift(h, 15, out=shifted)
            h ^= shifted
            out[r] = h
            seed = out[r]
    return out


def _bit_positions(hashes: U32, vector_size: int) -> U32:
    """``Math.abs(initval % maxValue)`` of each Java int hash, as ``abs(initval) % maxValue``: the
    abs of ``Integer.MIN_VALUE`` wraps to itself, whose unsigned value is the 2**31 Java's remainder
    has the magnitude of."""
    magnitude = np.abs(hashes.view(np.int32)).view(np.uint32)
    return magnitude % np.uint32(vector_size)


def _rows_of(count: int, spec: BloomFilterSpec) -> I64:
    """The dynamic filter's row for the key added ``p``-th, for each ``p`` (``getActiveStandardBF``)."""
    p = np.arange(count, dtype=np.int64)
    full = spec.max_rows * spec.num_entries
    rows = np.minimum(p // spec.num_entries, spec.max_rows - 1)
    # once every row is full: the key that finds them full goes to row 0, then each row in turn
    rows[p > full] = (p[p > full] - full - 1) % spec.max_rows
    if count > full:
        rows[full] = 0
    return rows


@dataclass(frozen=True)
class KeyFilter:
    """The footer's bloom filter and key range after a file's first ``count`` keys: each row's
    bits packed (bit ``i`` in byte ``i / 8`` at ``1 << (i % 8)``, as serialised)."""

    count: int
    packed: U8  # (rows, ceil(vector_size / 8))
    bounds: tuple[str, str] | None
    spec: BloomFilterSpec = BloomFilterSpec()

    @classmethod
    def of(cls, keys: pa.Array | pa.ChunkedArray, spec: BloomFilterSpec = BloomFilterSpec()) -> KeyFilter:
        """The filter after adding ``keys`` in their order."""
        empty = np.zeros((0, -(-spec.vector_size // 8)), dtype=np.uint8)
        return cls(0, empty, None, spec).extended(keys)

    def extended(self, keys: pa.Array | pa.ChunkedArray) -> KeyFilter:
        """The filter after adding ``keys`` to this one's, in their order."""
        if isinstance(keys, pa.ChunkedArray):
            keys = keys.combine_chunks()
        spec, first = self.spec, self.count
        count = first + len(keys)
        every_row = _rows_of(count, spec)
        rows_of = every_row[first:]
        rows = max(1 if count == 0 else int(every_row.max()) + 1, len(self.packed))
        bits = np.zeros((rows, spec.vector_size), dtype=bool)
        for positions, block in _utf8_groups(keys).values():
            for start in range(0, len(positions), _CHUNK):  # a chunk's hashes stay in the CPU's cache
                chunk = slice(start, start + _CHUNK)
                cells = _bit_positions(_murmur_chain(block[chunk], spec.num_hashes), spec.vector_size)
                chunk_rows = rows_of[positions[chunk]]
                for row in np.unique(chunk_rows).tolist():
                    bits[row][(cells if rows == 1 else cells[:, chunk_rows == row]).ravel()] = True
        packed = np.packbits(bits, axis=1, bitorder="little")
        packed[: len(self.packed)] |= self.packed
        bounds = key_range(keys) if self.bounds is None else _wider(self.bounds, keys)
        return KeyFilter(count, packed, bounds, spec)

    def serialized(self) -> str:
        """``HoodieDynamicBoundedBloomFilter.serializeToString``."""
        spec, rows = self.spec, max(1, len(self.packed))
        header = struct.pack(">iiBi", _VERSION, spec.num_hashes, MURMUR_HASH, spec.vector_size)
        current = self.count - (rows - 1) * spec.num_entries  # keys since the last row was added
        out = [header, struct.pack(">iii", spec.num_entries, current, rows)]
        packed = self.packed if len(self.packed) else np.zeros((1, -(-spec.vector_size // 8)), dtype=np.uint8)
        for row in packed:
            out += [header, row.tobytes()]
        return base64.b64encode(b"".join(out)).decode("ascii")

    def footer(self) -> dict[str, str]:
        """``HoodieBloomFilterWriteSupport.finalizeMetadata``."""
        meta = {BLOOM_FILTER_KEY: self.serialized(), TYPE_CODE_KEY: DYNAMIC_V0}
        if self.bounds is not None:
            meta[MIN_KEY_KEY], meta[MAX_KEY_KEY] = self.bounds
        return meta


def _wider(bounds: tuple[str, str], keys: pa.Array) -> tuple[str, str]:
    """``bounds`` widened by ``keys``, in ``key_range``'s order (Java's, on UTF-16 units)."""
    added = key_range(keys)
    if added is None:
        return bounds
    four = sorted((*bounds, *added), key=lambda s: s.encode("utf-16-be"))
    return four[0], four[-1]


def key_range(keys: pa.Array | pa.ChunkedArray) -> tuple[str, str] | None:
    """The least and greatest key as Java's ``String.compareTo`` orders them (UTF-16 code units), or
    None without keys."""
    if len(keys) == 0:
        return None
    low, high = pc.min_max(keys).values()
    # UTF-8 byte order is code point order, which differs from UTF-16's only between a character
    # above U+FFFF and one from U+E000 to U+FFFF (UTF-8 lead bytes 0xEE and above)
    if _has_high_chars(keys):
        ordered = sorted(set(keys.to_pylist()), key=lambda s: s.encode("utf-16-be"))
        return ordered[0], ordered[-1]
    return str(low.as_py()), str(high.as_py())


def _has_high_chars(keys: pa.Array | pa.ChunkedArray) -> bool:
    chunks = keys.chunks if isinstance(keys, pa.ChunkedArray) else [keys]
    for chunk in chunks:
        chunk = chunk.cast(pa.large_string()) if not pa.types.is_large_string(chunk.type) else chunk
        offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int64)
        data = np.frombuffer(chunk.buffers()[2], dtype=np.uint8)[
            offsets[chunk.offset] : offsets[chunk.offset + len(chunk)]
        ]
        if data.size and int(data.max()) >= 0xEE:
            return True
    return False
