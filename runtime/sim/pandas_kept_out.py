"""pyarrow kept from importing pandas into a search's process.

pyarrow imports pandas (28 MB of a check's 66 MB process, and a tenth of a CPU second) only to
ask whether an input is a pandas object, at a process's first ``pa.array`` (pyarrow's pandas
shim, ``_is_array_like``) and its first conversion to NumPy (Arrow's ``InitPandasStaticData``).
Both ask once per process and remember the answer, so :func:`keep_pandas_out` asks them with
pandas refused: the answer "no pandas" changes no conversion of the simulator's inputs (lists
and Arrow arrays, never pandas objects). pyarrow's own pandas conversions (``to_pandas``) still
import it when called (the shim tries again). A search's process then never imports it: the fork
search forks a smaller process (a third of a fork's cost), the re-running one saves the import.
"""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any

import pyarrow as pa

__all__ = ["keep_pandas_out"]


class _NoPandas(importlib.abc.MetaPathFinder):
    """An import of pandas fails while this finder is first on ``sys.meta_path``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname == "pandas":
            raise ModuleNotFoundError("No module named 'pandas' (kept out of the search)", name=fullname)


def keep_pandas_out() -> None:
    """Asks pyarrow's two questions with pandas refused (see the module docstring). Nothing to do
    if pandas is imported already."""
    if "pandas" in sys.modules:
        return
    refuse = _NoPandas()
    sys.meta_path.insert(0, refuse)
    try:
        pa.array([""], pa.string())
        pa.chunked_array([pa.array([0], pa.int64())]).to_numpy()
    finally:
        sys.meta_path.remove(refuse)
