"""The package layering of ``runtime/`` and ``actors/`` (pyproject.toml, ``[tool.importlinter]``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_import_contract_is_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout


def test_runtime_root_holds_only_the_entry_point_and_packages():
    loose = {p.name for p in (ROOT / "runtime").glob("*.py")}
    assert loose == {"__init__.py", "__main__.py"}  # the command line is the package runtime/cli/


def test_python_m_runtime_is_the_one_module_entry_point():
    """``python -m runtime`` runs the command line; no other module of runtime/ or actors/ is a
    ``python -m`` program (``commitlab timeline`` draws a trace file)."""
    mains = {
        str(p.relative_to(ROOT))
        for package in ("runtime", "actors")
        for p in (ROOT / package).rglob("*.py")
        if p.name == "__main__.py" or 'if __name__ == "__main__"' in p.read_text()
    }
    assert mains == {"runtime/__main__.py"}


def test_no_function_of_runtime_or_actors_is_over_sixty_lines():
    """The project's rule for readable code: a function that grows past 60 lines is split."""
    import ast

    long = []
    for package in ("runtime", "actors"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > 60:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, long


def _module_imports() -> dict[str, set[str]]:
    """Every module of runtime/ and actors/ -> the modules of runtime/ and actors/ it imports,
    at any depth (a function's import too), a package's ``__init__`` named by the package."""
    import ast

    files = {}
    for package in ("runtime", "actors"):
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        targets = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                targets += [base, *(f"{base}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets += [a.name for a in node.names]
        graph[module] = set()
        for target in targets:
            while target and target not in files:
                target = target.rpartition(".")[0]
            if target and target != module and not module.startswith(target + "."):
                graph[module].add(target)
    return graph


def test_no_modules_import_each_other_in_a_circle():
    """A module never imports, directly or through others, one that imports it (function-level
    imports included): each concept builds on the ones below it."""
    import graphlib

    try:
        graphlib.TopologicalSorter(_module_imports()).prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"modules that import each other in a circle: {' -> '.join(exc.args[1])}") from None
