"""Tests mirror runtime/'s packages; every test that needs Ray or Spark lives under tests/ray/,
whose conftest starts them once per session. ``pytest --ignore=tests/ray`` is the fast loop."""
