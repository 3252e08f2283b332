"""A JSON object as ``json.load`` gives it and ``json.dump`` takes it: what a typed record's
``to_json`` writes and ``from_json`` reads, and the documents the commands write (result.json,
compare.json, faults.json, explore.json). Its values are open by nature: a record's types live in
the record, not in its JSON form."""

from __future__ import annotations

import json
import math
from typing import Any

JsonObject = dict[str, Any]


def dumps_indented(doc: Any) -> str:
    """``json.dumps(doc, indent=2)``, the same text, without the standard library's pure-Python
    encoder (an indent takes it off the C one: a generator per level and per value; commit
    metadata is encoded so for every commit). Anything but plain JSON values goes to
    ``json.dumps`` itself, which raises as it always did."""
    parts: list[str] = []
    try:
        _indented(doc, parts, "\n")
    except (_NotPlain, RecursionError):
        return json.dumps(doc, indent=2)
    return "".join(parts)


class _NotPlain(Exception):
    """A value or key ``json.dumps`` would hand to ``default`` (or reject)."""


_escape = json.encoder.encode_basestring_ascii  # ensure_ascii, as json.dumps has it


def _float_text(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def _key_text(key: Any) -> str:
    # json.dumps's order of tests: str, float, the three constants, int
    if isinstance(key, str):
        return _escape(key)
    if isinstance(key, float):
        return _escape(_float_text(key))
    if key is True or key is False or key is None:
        return _escape({True: "true", False: "false", None: "null"}[key])
    if isinstance(key, int):
        return _escape(int.__repr__(key))
    raise _NotPlain


# A key's text by the key (str keys only: the field names of commit metadata repeat in every
# write stat, 71,000 a check). Pure and keyed by value; bounded, so a run's partition names
# cannot grow it without limit.
_KEY_TEXTS: dict[str, str] = {}
_KEY_TEXTS_MAX = 4096


def _cached_key_text(key: Any) -> str:
    if type(key) is not str:
        return _key_text(key)
    text = _KEY_TEXTS.get(key)
    if text is None:
        text = _escape(key)
        if len(_KEY_TEXTS) < _KEY_TEXTS_MAX:
            _KEY_TEXTS[key] = text
    return text


def _leaf_text(value: Any) -> str | None:
    """The text of a value of exactly a plain JSON leaf type (None: a container, a subclass or
    anything else, which :func:`_indented` takes through json.dumps's order of tests)."""
    kind = type(value)
    if kind is str:
        return _escape(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        return _float_text(value)
    return None


def _indented(value: Any, parts: list[str], newline: str) -> None:
    # json.dumps's order of tests: str, the three constants, int, float, list/tuple, dict; a
    # container's plain leaves are written in the container's loop, one piece per item (a
    # commit's metadata is mostly leaves: a call for each was most of the encoder's time)
    if isinstance(value, str):
        parts.append(_escape(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, int):
        parts.append(int.__repr__(value))
    elif isinstance(value, float):
        parts.append(_float_text(value))
    elif isinstance(value, (list, tuple)):
        if not value:
            parts.append("[]")
            return
        inner, sep = newline + "  ", "["
        for item in value:
            leaf = _leaf_text(item)
            if leaf is None:
                parts.append(sep + inner)
                _indented(item, parts, inner)
            else:
                parts.append(f"{sep}{inner}{leaf}")
            sep = ","
        parts.append(newline + "]")
    elif isinstance(value, dict):
        if not value:
            parts.append("{}")
            return
        inner, sep = newline + "  ", "{"
        for key, item in value.items():
            leaf = _leaf_text(item)
            if leaf is None:
                parts.append(f"{sep}{inner}{_cached_key_text(key)}: ")
                _indented(item, parts, inner)
            else:
                parts.append(f"{sep}{inner}{_cached_key_text(key)}: {leaf}")
            sep = ","
        parts.append(newline + "}")
    else:
        raise _NotPlain
