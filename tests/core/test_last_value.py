"""LastValue: a search's runs of one configuration work its value out once; another
configuration works it out again (never the stale one)."""

from __future__ import annotations

from runtime.core.last_value import LastValue


def test_the_value_is_worked_out_again_only_when_the_key_changes() -> None:
    calls: list[str] = []

    def compute(key: str) -> str:
        calls.append(key)
        return key.upper()

    memo: LastValue[str] = LastValue()
    assert [memo.of(k, lambda k=k: compute(k)) for k in ("a", "a", "b", "a", "a")] == ["A", "A", "B", "A", "A"]
    assert calls == ["a", "b", "a"]
