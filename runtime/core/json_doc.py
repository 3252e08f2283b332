"""A JSON object as ``json.load`` gives it and ``json.dump`` takes it: what a typed record's
``to_json`` writes and ``from_json`` reads, and the documents the commands write (result.json,
compare.json, faults.json, explore.json). Its values are open by nature: a record's types live in
the record, not in its JSON form."""

from __future__ import annotations

from typing import Any

JsonObject = dict[str, Any]
