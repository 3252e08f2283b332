"""Resolving a protocol spec: a registered name, a file, a module or an installed entry point.

A researcher's own protocol lives in one file beside their notebook (docs/PROTOCOL_API.md) and
runs, unchanged, everywhere a shipped one does. The spec is what a job's configuration carries, so
every process that builds a role (a Ray actor, an explore worker) resolves the same spec itself:

* ``operator-event``: a name in the registry;
* ``path/to/file.py``: the one :class:`~runtime.protocols.base.Protocol` subclass the file defines;
* ``path/to/file.py:ClassName``: that class of the file;
* ``pkg.mod:ClassName`` or ``pkg.mod``: an importable module (``pkg.mod``: its one subclass);
* an entry point's name in the group ``commitlab.protocols`` of an installed package.

A spec that does not load, or a class that does not implement the API, is a
:class:`ProtocolSpecError` naming the file or class and what is missing.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import sys
from types import ModuleType

from runtime.core.errors import UserError
from runtime.protocols.base import CoordinatorSide, Protocol, WriterSide

ENTRY_POINT_GROUP = "commitlab.protocols"


class ProtocolSpecError(UserError):
    """A --protocol spec that does not resolve to a protocol implementing the API."""

    heading = "protocol"


def load_protocol(spec: str, registered: dict[str, type[Protocol]]) -> type[Protocol]:
    """The protocol class ``spec`` names (see the module docstring), checked against the API."""
    if spec in registered:
        return registered[spec]
    target, _, class_name = spec.partition(":") if not _is_windows_drive(spec) else (spec, "", "")
    if target.endswith(".py") or os.sep in target or "/" in target:
        cls = _from_module(_module_from_file(spec, target), class_name, spec)
    else:
        cls = _from_entry_point(spec) or _from_module(_import_module(spec, target, list(registered)), class_name, spec)
    check_protocol(cls, spec)
    if cls.name in registered and registered[cls.name] is not cls:
        raise ProtocolSpecError(
            f"--protocol {spec}: {cls.__qualname__}.name is {cls.name!r}, a shipped protocol's name; "
            "give your protocol a name of its own, so results do not mix the two"
        )
    return cls


def absolute_spec(spec: str) -> str:
    """``spec`` with a file's path made absolute, so a process with another working directory (a
    Ray worker, an explore worker) loads the same file; other specs unchanged."""
    target, sep, class_name = spec.partition(":")
    if target.endswith(".py") and not os.path.isabs(target):
        return os.path.abspath(target) + sep + class_name
    return spec


def _is_windows_drive(spec: str) -> bool:
    return len(spec) > 2 and spec[1] == ":" and spec[2] in "\\/"


def _module_from_file(spec: str, path: str) -> ModuleType:
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise ProtocolSpecError(f"--protocol {spec}: no file {path}; give a path to a .py file that defines a protocol")
    # one module per file path, so a second load of the same file reuses it
    mod_name = "commitlab_protocol_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    loader_spec = importlib.util.spec_from_file_location(mod_name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise ProtocolSpecError(f"--protocol {spec}: {path} is not a Python source file")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[mod_name] = module  # dataclasses and pickling look the module up by name
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[mod_name]
        raise ProtocolSpecError(f"--protocol {spec}: {path} does not load: {type(exc).__name__}: {exc}") from exc
    return module


def _import_module(spec: str, name: str, shipped: list[str]) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ProtocolSpecError(
            f"--protocol {spec}: not a shipped protocol, a .py file, an importable module nor an entry point "
            f"of {ENTRY_POINT_GROUP!r} ({exc}); choose one of {', '.join(shipped)}, or give a path/to/file.py[:Class]"
        ) from exc
    except Exception as exc:
        raise ProtocolSpecError(f"--protocol {spec}: module {name} does not load: {type(exc).__name__}: {exc}") from exc


def _from_entry_point(spec: str) -> type[Protocol] | None:
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == spec:
            try:
                loaded = ep.load()
            except Exception as exc:
                raise ProtocolSpecError(
                    f"--protocol {spec}: entry point {ep.value} does not load: {type(exc).__name__}: {exc}"
                ) from exc
            if not (inspect.isclass(loaded) and issubclass(loaded, Protocol)):
                raise ProtocolSpecError(f"--protocol {spec}: entry point {ep.value} is not a Protocol subclass")
            return loaded
    return None


def _from_module(module: ModuleType, class_name: str, spec: str) -> type[Protocol]:
    where = getattr(module, "__file__", None) or module.__name__
    if class_name:
        cls = getattr(module, class_name, None)
        if not (inspect.isclass(cls) and issubclass(cls, Protocol)):
            raise ProtocolSpecError(f"--protocol {spec}: {where} defines no Protocol subclass {class_name!r}")
        return cls
    # the module's own subclasses, not the ones it imports (a file may import a shipped protocol)
    own = [
        c
        for c in vars(module).values()
        if inspect.isclass(c) and issubclass(c, Protocol) and c is not Protocol and c.__module__ == module.__name__
    ]
    if len(own) != 1:
        found = ", ".join(sorted(c.__name__ for c in own)) or "none"
        raise ProtocolSpecError(
            f"--protocol {spec}: {where} must define exactly one Protocol subclass (found: {found}); "
            f"name the one to run as {spec}:ClassName"
        )
    return own[0]


def check_protocol(cls: type[Protocol], spec: str) -> None:
    """Raises :class:`ProtocolSpecError` listing what ``cls`` lacks of the API (base.py)."""
    missing: list[str] = []
    if not isinstance(getattr(cls, "name", None), str) or not cls.name:
        missing.append("a non-empty `name` (what results and tables call it)")
    for attr, base in (("writer_side", WriterSide), ("coordinator_side", CoordinatorSide)):
        side = getattr(cls, attr, None)
        if not (inspect.isclass(side) and issubclass(side, base)):
            missing.append(f"`{attr}`, a {base.__name__} subclass")
        elif inspect.isabstract(side):
            methods = ", ".join(sorted(getattr(side, "__abstractmethods__", ())))
            missing.append(f"{side.__name__}.{methods} (abstract in {base.__name__})")
    if cls.extra_roles and cls.make_role.__func__ is Protocol.make_role.__func__:  # type: ignore[attr-defined]
        missing.append(f"make_role, to build its extra_roles {', '.join(cls.extra_roles)}")
    if missing:
        raise ProtocolSpecError(
            f"--protocol {spec}: {cls.__module__}.{cls.__qualname__} does not implement the protocol API: "
            f"missing {'; '.join(missing)} (docs/PROTOCOL_API.md)"
        )
