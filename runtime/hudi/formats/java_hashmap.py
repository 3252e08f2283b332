"""The iteration order of a ``java.util.HashMap`` whose keys are strings (JDK 8 and later).

Hudi's Flink writer hands a flush's records to the write handle through two hash maps, and
their iteration order is the order of the rows it writes: ``FlinkWriteHelper.deduplicateRecords``
groups the records by key (``Collectors.groupingBy``, a ``HashMap``) and emits one per key in
the map's order; ``HoodieMergeHandle`` puts them into ``keyToNewRecords`` (an
``ExternalSpillableMap`` whose in-memory part is a ``HashMap``) and, at ``close``, appends the keys
that were not in the old file in that map's order.

Source: OpenJDK 8-21 ``java.util.HashMap``: ``hash(key)`` spreads ``h ^ (h >>> 16)``; a key sits in
bin ``(capacity - 1) & hash``; the table starts at 16 bins and doubles when the size passes
0.75 of the capacity (``putVal``: ``++size > threshold``), or, below 64 bins, when one bin
reaches 9 keys (``treeifyBin`` resizes instead of making a tree); a resize splits each bin
keeping its keys' relative order; iteration walks the bins in index order and each bin in
insertion order.

Difference: at 64 bins or more a bin of 9 keys becomes a red-black tree whose iteration order is
not always the insertion order; such bins (several String hash collisions in one bin) keep the
insertion order here. The hash is ``String.hashCode`` (:func:`runtime.data.bucket.java_string_hashes`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

INITIAL_CAPACITY = 16  # DEFAULT_INITIAL_CAPACITY
LOAD_FACTOR = 0.75  # DEFAULT_LOAD_FACTOR
TREEIFY_THRESHOLD = 8  # a bin that already holds this many keys treeifies on the next one
MIN_TREEIFY_CAPACITY = 64  # below it a crowded bin doubles the table instead


def spread(hashes: npt.NDArray[np.uint32]) -> npt.NDArray[np.int64]:
    """``HashMap.hash``: the key's hash code with its high half folded into the low half."""
    h = hashes.astype(np.int64)
    return h ^ (h >> 16)


EARLY_KEYS = MIN_TREEIFY_CAPACITY * 3 // 4  # keys put while the table can be below 64 bins


def crowded(spread_hashes: npt.NDArray[np.int64]) -> bool:
    """Whether a bin may have crowded while the table was small (it then grew early): some bin of
    16 got more than 8 of the keys put while the table was below 64 bins (a bin of 32 is half of
    one of 16, so none of 32 did otherwise)."""
    if len(spread_hashes) <= TREEIFY_THRESHOLD:
        return False
    return bool(np.bincount(spread_hashes[:EARLY_KEYS] & (INITIAL_CAPACITY - 1)).max() > TREEIFY_THRESHOLD)


def capacity(spread_hashes: npt.NDArray[np.int64], was_crowded: bool | None = None) -> int:
    """The table's bin count after the distinct keys were put in this order (``was_crowded``:
    :func:`crowded` of them, when the caller has it)."""
    if was_crowded is None:
        was_crowded = crowded(spread_hashes)
    return _capacity(spread_hashes[:EARLY_KEYS].tolist() if was_crowded else None, len(spread_hashes))


def _capacity(early: list[int] | None, n: int) -> int:
    """:func:`capacity` of ``n`` keys; ``early``: the spread hashes of the first :data:`EARLY_KEYS`
    when a bin crowded (a crowded bin of a small table doubles it), else None."""
    cap = INITIAL_CAPACITY
    threshold = int(cap * LOAD_FACTOR)
    if early is not None:
        counts: dict[int, int] = {}
        for size, h in enumerate(early, start=1):
            if cap >= MIN_TREEIFY_CAPACITY:
                break
            b = h & (cap - 1)
            counts[b] = counts.get(b, 0) + 1
            grew = False
            if counts[b] > TREEIFY_THRESHOLD:  # treeifyBin on a small table: resize
                cap, threshold, grew = cap * 2, threshold * 2, True
            if size > threshold:
                cap, threshold, grew = cap * 2, threshold * 2, True
            if grew:
                counts = {}
                for k in early[:size]:
                    counts[k & (cap - 1)] = counts.get(k & (cap - 1), 0) + 1
    while n > threshold:
        cap, threshold = cap * 2, threshold * 2
    return cap


# Up to this many keys (a flush of the simulator's size) the orders are worked out on Python
# ints: a merge asks for them at every flush, and numpy's per-call cost is most of it at this size.
SMALL_MAP = EARLY_KEYS


def _crowded_small(spread_hashes: list[int]) -> bool:
    """:func:`crowded` of at most :data:`EARLY_KEYS` keys, on Python ints."""
    if len(spread_hashes) <= TREEIFY_THRESHOLD:
        return False
    counts = [0] * INITIAL_CAPACITY
    for h in spread_hashes:
        counts[h & (INITIAL_CAPACITY - 1)] += 1
    return max(counts) > TREEIFY_THRESHOLD


def small_orders(hashes: list[int]) -> tuple[list[int], list[int]]:
    """:func:`iteration_orders` of at most :data:`SMALL_MAP` keys, on Python ints: the capacity,
    then a stable sort by bin, for each of the two maps."""
    spread_hashes = [h ^ (h >> 16) for h in hashes]
    n = len(spread_hashes)
    was_crowded = _crowded_small(spread_hashes)
    first = _capacity(spread_hashes if was_crowded else None, n) - 1
    bins = [h & first for h in spread_hashes]
    order = sorted(range(n), key=bins.__getitem__)
    if not was_crowded:
        return order, order
    put = [spread_hashes[i] for i in order]  # the second map is filled in the first one's order
    second = _capacity(put if _crowded_small(put) else None, n) - 1
    if second == first:
        return order, order
    bins = [h & second for h in put]
    return order, [order[j] for j in sorted(range(n), key=bins.__getitem__)]


def iteration_order(hashes: npt.NDArray[np.uint32]) -> npt.NDArray[np.intp]:
    """Positions of ``hashes`` (the hash codes of distinct keys, in the order they were put) in
    the order a ``HashMap`` holding them iterates."""
    return iteration_orders(hashes)[0]


def iteration_orders(hashes: npt.NDArray[np.uint32]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """(:func:`iteration_order`; the iteration order of a second ``HashMap`` the keys were put
    into in that order), as positions into ``hashes``. The second is the first unless a crowded
    bin grew one of the two tables early, to another size. The keys are spread and their bins
    counted once: a merge asks for both orders at every flush."""
    if len(hashes) < 2:
        order = np.arange(len(hashes))
        return order, order
    if len(hashes) <= SMALL_MAP:
        grouped, put = small_orders(hashes.tolist())
        order = np.array(grouped, dtype=np.intp)
        return order, order if put is grouped else np.array(put, dtype=np.intp)
    s = spread(hashes)
    was_crowded = crowded(s)
    first = capacity(s, was_crowded)
    order = np.argsort(s & (first - 1), kind="stable")
    if not was_crowded:
        return order, order
    second = capacity(s[order])
    if first == second:
        return order, order
    return order, order[np.argsort(s[order] & (second - 1), kind="stable")]
