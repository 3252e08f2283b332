"""The HashMap iteration order the merge writes new keys in, checked against a real JVM.

A ``java.util.HashMap`` is filled through py4j (the JVM pyspark launches for Spark, started once
for this module) with the same keys in the same order, and its ``keySet`` order is compared with
:func:`runtime.hudi.formats.java_hashmap.iteration_order` over :func:`runtime.data.bucket.java_string_hashes`.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from itertools import product
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from runtime.data.bucket import java_string_hash, java_string_hashes
from runtime.hudi.formats import java_hashmap
from runtime.hudi.formats.java_hashmap import MIN_TREEIFY_CAPACITY, capacity, iteration_order, iteration_orders, spread


@pytest.fixture(scope="module")
def jvm() -> Iterator[Any]:
    from pyspark.java_gateway import launch_gateway

    gateway = launch_gateway()
    try:
        yield gateway.jvm
    finally:
        gateway.shutdown()


def java_order(jvm: Any, keys: list[str]) -> list[str]:
    m = jvm.java.util.HashMap()
    for k in keys:
        m.put(k, 0)
    return list(m.keySet().toArray())


def our_order(keys: list[str]) -> list[str]:
    order = iteration_order(java_string_hashes(pa.array(keys, pa.string())))
    return [keys[i] for i in order]


def colliding(blocks: int) -> list[str]:
    """2**blocks distinct strings with one String.hashCode ("Aa" and "BB" hash alike)."""
    return ["".join(p) for p in product(("Aa", "BB"), repeat=blocks)]


def test_string_hash_codes_are_javas(jvm):
    rng = random.Random(7)
    keys = ["", "a", "key-000000001", "é", "中文", "😀x"] + [
        "".join(rng.choice(string.printable) for _ in range(rng.randint(0, 30))) for _ in range(300)
    ]
    want = [jvm.java.util.Objects.hashCode(k) & 0xFFFFFFFF for k in keys]
    assert java_string_hashes(pa.array(keys)).tolist() == want
    assert [java_string_hash(k) for k in keys] == want


@pytest.mark.parametrize("n", [0, 1, 2, 12, 13, 25, 100, 777, 3000])
def test_random_keys_iterate_as_javas_hashmap_does(jvm, n):
    rng = random.Random(n)
    keys = list({f"key-{rng.randrange(10**9):09d}": None for _ in range(n)})
    assert our_order(keys) == java_order(jvm, keys)


def test_a_crowded_bin_doubles_a_small_table_before_the_load_factor_does(jvm):
    # 9 keys in one bin of 16: treeifyBin resizes (the table is below 64 bins) at 10 keys, which
    # the load factor alone would allow in 16 bins
    keys = colliding(4)[:9] + ["x", "y"]
    assert capacity(spread(java_string_hashes(pa.array(keys)))) > 16
    assert our_order(keys) == java_order(jvm, keys)
    mixed = ["k1", "k2"] + colliding(4)[:10] + ["k3"]  # the 9th and the 10th: 16 -> 32 -> 64 bins
    assert capacity(spread(java_string_hashes(pa.array(mixed)))) == 64
    assert our_order(mixed) == java_order(jvm, mixed)


def test_a_treeified_bin_is_the_documented_difference(jvm):
    # at 64 bins and more a bin of 9 keys becomes a tree, iterated root first: the bins and their
    # order agree with Java, the order inside such a bin may not (the module docstring says so)
    keys = [f"pad-{i}" for i in range(60)] + colliding(4)
    ours, javas = our_order(keys), java_order(jvm, keys)
    assert capacity(spread(java_string_hashes(pa.array(keys)))) >= MIN_TREEIFY_CAPACITY
    assert sorted(ours) == sorted(javas)
    tree = set(colliding(4))
    assert [k for k in ours if k not in tree] == [k for k in javas if k not in tree]
    # the tree's keys sit together, where the bin is, in both
    first = ours.index(next(k for k in ours if k in tree))
    assert set(ours[first : first + len(tree)]) == tree
    assert set(javas[first : first + len(tree)]) == tree


def test_the_hash_codes_of_a_sliced_or_chunked_array(jvm):
    keys = [f"id-{i}" for i in range(100)]
    arr = pa.chunked_array([pa.array(keys[:40]), pa.array(keys[40:])]).slice(5, 90)
    want = [java_string_hash(k) for k in keys[5:95]]
    assert java_string_hashes(arr).tolist() == want
    assert np.array_equal(java_string_hashes(pa.array(keys).slice(30)), [java_string_hash(k) for k in keys[30:]])


def test_a_small_maps_order_on_python_ints_is_the_general_paths(monkeypatch):
    # a flush's few keys take a path of their own (no numpy): the same orders, crowded bins included
    rng = random.Random(3)
    cases = [np.array([rng.getrandbits(32) for _ in range(n)], dtype=np.uint32) for n in range(2, 60) for _ in range(5)]
    cases += [np.array([i << 4 for i in range(n)], dtype=np.uint32) for n in (9, 10, 20, 48)]  # one bin of 16
    cases += [java_string_hashes(pa.array(colliding(4)[:k] + ["x", "y"])) for k in (8, 9, 10)]
    # a generator's sequential keys crowd a bin of 16 often (two in five of the simulator's flushes)
    sequential = [[f"key-{i:09d}" for i in range(s, s + n)] for s in (0, 977) for n in (9, 12, 30)]
    cases += [java_string_hashes(pa.array(keys)) for keys in sequential]
    # hash codes whose two maps grow to different sizes (found by a search of the general path)
    grow_apart = [368, 3312, 8801, 14385, 20080, 32592, 35312, 35952, 36401, 36624, 36785, 38096, 38961, 45713]
    cases.append(np.array([*grow_apart, 53712, 57202], dtype=np.uint32))
    small = [iteration_orders(h) for h in cases]
    monkeypatch.setattr(java_hashmap, "SMALL_MAP", 0)
    general = [iteration_orders(h) for h in cases]
    for (a1, a2), (b1, b2) in zip(small, general, strict=True):
        assert a1.tolist() == b1.tolist() and a2.tolist() == b2.tolist()
    assert any(not np.array_equal(a1, a2) for a1, a2 in small)  # two maps of different sizes among them
