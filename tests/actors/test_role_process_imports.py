"""A role process runs without pandas: pyarrow would import it at its first conversion (about
0.2 s of CPU at every process start) only to recognise pandas objects, which no role holds."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_BODY = """
import hashlib, io, sys
import numpy as np, pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
keys = pa.array([f"k{i}" for i in range(500)])
t = pa.table({"k": keys, "v": pa.array(np.arange(500)), "b": [True, False] * 250})
t = t.take(pc.sort_indices(t, sort_keys=[("k", "descending")]))
values = (t.column("v").to_numpy().tolist(), t.column("k").to_numpy(zero_copy_only=False).tolist(), t.to_pylist())
buf = io.BytesIO()
pq.write_table(t, buf, compression="snappy")
print("pandas" in sys.modules, hashlib.sha256(repr(values).encode() + buf.getvalue()).hexdigest())
"""
# the conversions run as a role's code runs them: in a module of the project (the importer the
# role process's finder looks at)
_PROBE = (
    "import sys\n"
    "from actors.process_actor import without_pandas\n"
    "if sys.argv[1] == 'role':\n"
    "    without_pandas()\n"
    f"exec({_BODY!r}, {{'__name__': 'actors.role_probe'}})\n"
)


def _probe(mode: str) -> tuple[str, str]:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True, timeout=120)
    loaded, digest = out.stdout.split()
    return loaded, digest


def test_a_role_process_converts_the_same_without_importing_pandas() -> None:
    role_loaded, role_digest = _probe("role")
    driver_loaded, driver_digest = _probe("driver")
    assert role_loaded == "False"  # pyarrow's conversions did not import pandas
    assert driver_loaded == "True"  # (they do where pandas is left alone)
    assert role_digest == driver_digest  # the same values and the same parquet bytes


def test_a_role_process_does_not_import_the_drivers_planning() -> None:
    """The process actor's module (what every role process imports first) leaves out the stream's
    planning: the generator, the input checks, the verifier, Spark and pandas."""
    code = "import sys, actors.process_actor; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    loaded = set(out.stdout.split())
    driver_only = {"actors.stream_plan", "runtime.data.generator", "runtime.data.input_format", "runtime.lab.verify"}
    assert not loaded & (driver_only | {"pandas", "pyspark", "matplotlib"})


def test_a_module_outside_the_project_still_imports_pandas_in_a_role_process(tmp_path) -> None:
    """A researcher's own protocol file may use pandas: only the project's code and pyarrow are
    told it is absent."""
    (tmp_path / "my_protocol.py").write_text("import pandas\nVERSION = pandas.__version__\n")
    code = textwrap.dedent(
        """
        import sys
        from actors.process_actor import without_pandas
        without_pandas()
        # pyarrow's conversion from the project's code: refused, as in a role
        exec("import pyarrow as pa; pa.array([1, 2]).to_numpy()", {"__name__": "actors.role_probe"})
        assert "pandas" not in sys.modules
        sys.path.insert(0, sys.argv[1])
        import my_protocol
        print(bool(my_protocol.VERSION))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == ["True"]
