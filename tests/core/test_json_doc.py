"""Commit metadata (layout 1) is JSON indented by two spaces: ``dumps_indented`` writes the text
``json.dumps(doc, indent=2)`` writes, byte for byte, and fails where it fails."""

from __future__ import annotations

import enum
import json
import math
import random
from typing import Any

import pytest

from runtime.core.json_doc import dumps_indented


class _Level(enum.IntEnum):
    HIGH = 2


def _random_doc(rng: random.Random, depth: int = 0) -> Any:
    leaves: list[Any] = [
        None,
        True,
        False,
        0,
        -7,
        2**70,
        1.5,
        -0.0,
        1e300,
        math.nan,
        math.inf,
        -math.inf,
        "",
        "plain",
        'quo"te\\ \n\t',
        "naïve ✓ \U0001f600",
        _Level.HIGH,
    ]
    kind = rng.randrange(4) if depth < 4 else 0
    if kind == 0:
        return rng.choice(leaves)
    if kind == 1:
        return [_random_doc(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 2:
        return tuple(_random_doc(rng, depth + 1) for _ in range(rng.randrange(3)))
    keys: list[Any] = ["k", "é", "", 1, 2.5, True, False, None, "x" * 3]
    return {rng.choice(keys): _random_doc(rng, depth + 1) for _ in range(rng.randrange(5))}


def test_the_same_text_as_json_dumps_indent_2() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        doc = _random_doc(rng)
        assert dumps_indented(doc) == json.dumps(doc, indent=2)


def test_a_commit_metadata_document() -> None:
    doc = {
        "partitionToWriteStats": {"": [{"fileId": "f-0", "numWrites": 10, "totalWriteBytes": 1234}]},
        "compacted": False,
        "extraMetadata": {"schema": '{"type":"record"}'},
        "operationType": "UPSERT",
        "empty": {},
        "none": [],
    }
    assert dumps_indented(doc) == json.dumps(doc, indent=2)


@pytest.mark.parametrize("doc", [{"a": object()}, {(1, 2): 1}, [{1, 2}]])
def test_what_json_dumps_rejects_it_rejects(doc: Any) -> None:
    with pytest.raises(TypeError):
        json.dumps(doc, indent=2)
    with pytest.raises(TypeError):
        dumps_indented(doc)


def test_a_circular_document_is_refused_as_json_dumps_refuses_it() -> None:
    doc: dict[str, Any] = {}
    doc["self"] = doc
    with pytest.raises(ValueError, match="Circular"):
        dumps_indented(doc)
