"""The command line's face of :class:`~runtime.core.config.JobConfig`: one table, every command.

Each command's parser is a :class:`CommandParser`: it keeps its own list of the options added to
it (argparse keeps no public one), which is what a configuration file is checked against.

Every JobConfig field that carries an :class:`~runtime.core.job_options.Option` becomes a flag, in its
group, with its help and its default shown; a command picks the fields it takes (``exclude``) and
may give them other defaults or flag names. :func:`config_from_args` reads the same fields back,
so the flags and the configuration cannot drift apart.

A configuration file (``--config FILE``, YAML or JSON) gives values for a command's options by
field name (``checkpoint_timeout_s``) or flag (``checkpoint-timeout``); flags on the command line
win. A run's ``result.json`` is such a file: its ``config`` record re-runs the recorded job (into
a new table under ``--out`` unless ``--table`` is given).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

import yaml

from runtime.core.config import ConfigError, JobConfig, Schedule, flag_of, option_of
from runtime.core.durations import (
    CHECKPOINT_TIMEOUT_DURATIONS,
    HUDI_FLINK_DURATIONS_S,
    TRANSPORT_DEADLINE_FLOORS_S,
    TRANSPORT_DEADLINE_PER_CALLER_S,
    UNSET,
)
from runtime.core.fault_spec import parse_faults
from runtime.core.job_options import WORKLOAD

_TYPES: dict[str, type] = {"int": int, "float": float, "str": str}


class _Container(Protocol):
    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action: ...


class OptionGroup:
    """An argument group (or a mutually exclusive one) of a :class:`CommandParser` whose options
    the parser records."""

    def __init__(self, parser: CommandParser, group: _Container, *, required: bool = False) -> None:
        self._parser, self._group = parser, group
        self.required = required
        self.options: list[argparse.Action] = []

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = self._group.add_argument(*args, **kwargs)
        self.options.append(action)
        self._parser.options.append(action)
        return action


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser that records the options added to it, through it or its groups."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.options: list[argparse.Action] = []  # before argparse adds --help
        self.exclusive: list[tuple[OptionGroup, Any]] = []  # (its options, argparse's group)
        self.groups: dict[str, OptionGroup] = {}
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.options.append(action)
        return action

    def group(self, title: str) -> OptionGroup:
        """The argument group named ``title`` (created on first use)."""
        if title not in self.groups:
            self.groups[title] = OptionGroup(self, self.add_argument_group(title))
        return self.groups[title]

    def exclusive_group(self, *, required: bool) -> OptionGroup:
        group = self.add_mutually_exclusive_group(required=required)
        options = OptionGroup(self, group, required=required)
        self.exclusive.append((options, group))
        return options

    def not_required(self, dests: Collection[str]) -> None:
        """What a configuration file gives, the command line need not."""
        for action in self.options:
            if action.dest in dests:
                action.required = False
        for options, group in self.exclusive:
            if any(a.dest in dests for a in options.options):
                group.required = options.required = False


def option_fields(exclude: Collection[str] = ()) -> list[dataclasses.Field[Any]]:
    """The JobConfig fields that are command-line options, in declaration order."""
    return [f for f in dataclasses.fields(JobConfig) if option_of(f.name) is not None and f.name not in exclude]


def _default_text(name: str, value: Any) -> str:
    if value == UNSET and name in TRANSPORT_DEADLINE_FLOORS_S:
        floor, per_caller = TRANSPORT_DEADLINE_FLOORS_S[name], TRANSPORT_DEADLINE_PER_CALLER_S
        return (
            f"{HUDI_FLINK_DURATIONS_S[name]:g} s x --time-scale, at least {floor:g} s and {per_caller:g} s x --writers"
        )
    if value == UNSET and name in HUDI_FLINK_DURATIONS_S:
        return f"{HUDI_FLINK_DURATIONS_S[name]:g} s x --time-scale"
    if value == UNSET and name in CHECKPOINT_TIMEOUT_DURATIONS:
        return "the checkpoint timeout"
    if value == UNSET and name == "lock_wait_s":
        from runtime.hudi.client.concurrency import HUDI_LOCK_WAIT_S

        return f"{HUDI_LOCK_WAIT_S:g} s x --time-scale"
    if value == UNSET and name == "heartbeat_interval_s":
        from runtime.hudi.client.lock import HEARTBEAT_DEFAULT_TEXT

        return HEARTBEAT_DEFAULT_TEXT
    return repr(value) if value == "" else str(value)


def _metavar(name: str, flag: str, type_name: str, choices: tuple[str, ...]) -> str | None:
    if choices:
        return "{" + ",".join(c for c in choices if c) + "}"
    if name.endswith("_s") and not flag.endswith("-s"):  # a duration's flag drops the _s
        return "SECONDS"
    return {"int": "N", "float": "X"}.get(type_name, name.upper())


def _default_of(defaults: JobConfig, name: str) -> Any:
    """A command's default for a field: a scaled duration stays UNSET unless the command set it."""
    if name in HUDI_FLINK_DURATIONS_S or name in CHECKPOINT_TIMEOUT_DURATIONS:
        return getattr(defaults, name) if name in (defaults.explicit_durations or ()) else UNSET
    return getattr(defaults, name)


def add_job_options(
    parser: CommandParser,
    defaults: JobConfig,
    *,
    exclude: Collection[str] = (),
    flags: Mapping[str, str] | None = None,
    only: Collection[str] | None = None,
    more_choices: Mapping[str, tuple[Sequence[str], str]] | None = None,
) -> None:
    """Adds every JobConfig option not in ``exclude`` (or, given ``only``, those named there) to
    ``parser``, grouped, defaults shown. ``more_choices`` gives a field choices beyond its own,
    with the help text that explains them."""
    if only is not None:
        exclude = [f.name for f in option_fields() if f.name not in only] + ["abort_checkpoints", "faults"]
    for f in option_fields(exclude):
        opt = option_of(f.name)
        assert opt is not None
        group = parser.group(opt.group)
        flag = (flags or {}).get(f.name) or flag_of(f.name)
        default = _default_of(defaults, f.name)
        if f.type == "bool":
            action = "store_false" if default else "store_true"
            group.add_argument(flag, dest=f.name, action=action, default=default, help=opt.help)
            continue
        extra, extra_help = (more_choices or {}).get(f.name, ((), ""))
        choices = [*opt.choices, *extra]
        group.add_argument(
            flag,
            dest=f.name,
            metavar=_metavar(f.name, flag, str(f.type), tuple(choices)),
            type=_TYPES[str(f.type)],
            default=default,
            choices=choices or None,
            help=f"{opt.help} (default: {_default_text(f.name, default)})" + (f"; {extra_help}" if extra_help else ""),
        )
    if "abort_checkpoints" not in exclude:
        parser.group(WORKLOAD).add_argument(
            "--abort-checkpoints",
            default="",
            help="comma-separated checkpoint ids the job manager aborts (default: none)",
        )
    if "faults" not in exclude:
        parser.add_argument(
            "--faults",
            default="",
            help="fault points to arm: point[:target][@checkpoint][#task][=param],... (see commitlab faults --list; "
            "default: none)",
        )


def parse_checkpoint_ids(text: str, flag: str = "--abort-checkpoints") -> list[int]:
    """``2,5`` -> [2, 5]; anything else is a ConfigError naming the flag."""
    ids = []
    for item in filter(None, (x.strip() for x in (text or "").split(","))):
        if not item.isdigit():
            raise ConfigError(f"{flag}: {item!r} is not a checkpoint id; give comma-separated integers, e.g. 2,5")
        ids.append(int(item))
    return ids


def config_from_args(args: argparse.Namespace, *, table: str, arm_faults: bool = True, **fixed: Any) -> JobConfig:
    """The JobConfig of parsed arguments: every option field the command has, the text fields,
    and what a configuration file recorded beyond the options (``args.config_extra``)."""
    values = {f.name: getattr(args, f.name) for f in option_fields() if hasattr(args, f.name)}
    extra: dict[str, Any] = dict(getattr(args, "config_extra", None) or {})
    schedule = _schedule(extra.pop("schedule", {}), parse_checkpoint_ids(getattr(args, "abort_checkpoints", "")))
    faults_text = getattr(args, "faults", "") if arm_faults else ""
    try:
        faults = parse_faults(faults_text)
    except ValueError as exc:
        raise ConfigError(f"--faults: {exc}") from None
    if hasattr(args, "protocol") and args.protocol:
        values["protocol"] = args.protocol
    return JobConfig(**{**extra, **values, "table": table, "faults": faults, "schedule": schedule, **fixed})


def _schedule(recorded: dict[str, Any], aborts: list[int]) -> Schedule:
    """A Schedule from a recorded one (JSON made its checkpoint keys strings) and the aborts."""
    per_checkpoint = {
        k: {int(c): float(v) for c, v in (recorded.get(k) or {}).items()} for k in ("notify_delay_s", "clean_lock_s")
    }
    return Schedule(rounds=recorded.get("rounds"), abort_checkpoints=aborts, **per_checkpoint)


# -- configuration files --------------------------------------------------------------------------


def read_config_file(path: str) -> dict[str, Any]:
    """A YAML or JSON mapping of option values; a ``result.json`` gives its recorded ``config``."""
    try:
        with open(path) as f:
            doc = yaml.safe_load(f)  # JSON is YAML
    except OSError as exc:
        raise ConfigError(f"--config {path}: cannot read it ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"--config {path}: not YAML or JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"--config {path}: expected a mapping of option names to values, got {type(doc).__name__}")
    if isinstance(doc.get("config"), dict) and "protocol" in doc and "status" in doc:
        return _from_result(doc["config"])
    return doc


def _from_result(recorded: dict[str, Any]) -> dict[str, Any]:
    """A result.json's config record as option values: durations the run took from the time scale
    stay unset (a new --time-scale rescales them), its table is not reused."""
    explicit = set(recorded.get("explicit_durations") or ())
    out = {}
    for name, value in recorded.items():
        if name in ("table", "explicit_durations"):
            continue
        if (name in HUDI_FLINK_DURATIONS_S or name in CHECKPOINT_TIMEOUT_DURATIONS) and name not in explicit:
            continue
        out[name] = value
    return out


def apply_config_file(parser: CommandParser, path: str, command: str) -> None:
    """Makes the file's values ``parser``'s defaults, so flags given on the command line win.
    A key that is no option of the command is refused, naming the key, the file and the command."""
    values = read_config_file(path)
    by_name: dict[str, str] = {}
    for action in parser.options:
        for spelling in (action.dest, *action.option_strings):
            by_name[spelling.lstrip("-").replace("-", "_")] = action.dest
    defaults: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in values.items():
        name = str(key).lstrip("-").replace("-", "_")
        if name == "faults" and isinstance(value, list):
            value = ",".join(_fault_text(v) for v in value)
        if name == "schedule" and isinstance(value, dict):
            aborts = value.get("abort_checkpoints") or []
            defaults["abort_checkpoints"] = ",".join(map(str, aborts))
            extra["schedule"] = {k: v for k, v in value.items() if k != "abort_checkpoints"}
            continue
        dest = by_name.get(name)
        if dest is not None:
            defaults[dest] = value
        elif name in {f.name for f in dataclasses.fields(JobConfig)} and parser.get_default("config_extra") is not None:
            extra[name] = value  # a recorded field with no flag (e.g. topic_retention_records)
        else:
            raise ConfigError(
                f"--config {path}: {key!r} is not an option of `commitlab {command}`; "
                f"see `commitlab {command} --help` for the names (field names and flags both work)"
            )
    parser.set_defaults(**defaults, config_extra=extra if parser.get_default("config_extra") is not None else None)
    parser.not_required(defaults)


def _fault_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        from runtime.core.fault_spec import FaultSpec

        return FaultSpec(**{k: v for k, v in value.items() if not k.startswith("@")}).text()
    raise ConfigError(f"--config: a fault is a spec text or a mapping, got {value!r}")


def add_config_option(parser: CommandParser, *, job: bool) -> None:
    """``--config FILE``; ``job``: the command builds a JobConfig, so a file may also give the
    recorded fields that have no flag."""
    parser.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="YAML or JSON file of option values (or a run's result.json, to run it again); flags win",
    )
    parser.set_defaults(config_extra={} if job else None)


def check_writable_dir(path: str, flag: str) -> str:
    """``path`` as an absolute directory this process can create and write, or a ConfigError
    naming ``flag``: checked before any work starts, so a run never ends unable to save."""
    path = os.path.abspath(path)
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        raise ConfigError(f"{flag} {path}: {probe} is a file, not a directory; choose another {flag}")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {path}: {probe} is not writable by this user; choose another {flag}")
    return path


# -- what the commands share ----------------------------------------------------------------------


def protocol_names() -> list[str]:
    from runtime.protocols import PROTOCOLS

    return list(PROTOCOLS)


PROTOCOL_SPEC_HELP = "or your own: path/to/file.py[:Class], pkg.module[:Class], an entry point (docs/PROTOCOL_API.md)"


def protocol_spec(spec: str) -> str:
    """An argparse ``type``: a registered protocol or a spec that loads and implements the API
    (a ProtocolSpecError, exit 2, otherwise), a file's path made absolute for other processes."""
    from runtime.protocols import get_protocol
    from runtime.protocols.loading import absolute_spec

    spec = absolute_spec(spec.strip())
    get_protocol(spec)
    return spec


PROTOCOLS_HELP = "comma-separated protocols (default: all), each a shipped one or a spec as --protocol takes"


def protocol_specs(text: str) -> list[str]:
    """A comma-separated list of protocol specs (empty: every registered protocol)."""
    specs = [protocol_spec(n) for n in text.split(",") if n.strip()] or protocol_names()
    return list(dict.fromkeys(specs))


def protocol_help(what: str) -> str:
    from runtime.protocols import PROTOCOLS

    names = [f"{n} (a what-if, not a Hudi release)" if PROTOCOLS[n].what_if else n for n in protocol_names()]
    return f"{what}: one of {', '.join(names)}, {PROTOCOL_SPEC_HELP}"


def protocol_option(p: CommandParser, default: str) -> None:
    p.add_argument(
        "--protocol", default=default, type=protocol_spec, help=protocol_help(f"the protocol (default: {default})")
    )


def names_option(text: str, known: list[str], flag: str) -> list[str]:
    """A comma-separated selection from ``known`` (empty: all of them)."""
    names = [n.strip() for n in text.split(",") if n.strip()] or list(known)
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ConfigError(f"{flag}: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    return names


def job_config(args: argparse.Namespace, out: str, *, arm_faults: bool = True) -> JobConfig:
    """The job configuration of a command's arguments; the table defaults to OUT/table."""
    return config_from_args(args, table=args.table or os.path.join(out, "table"), arm_faults=arm_faults)


def job_command(
    sub: Any,
    name: str,
    help: str,
    defaults: JobConfig,
    *,
    out: str,
    exclude: tuple[str, ...] = (),
    more_choices: Mapping[str, tuple[Sequence[str], str]] | None = None,
) -> CommandParser:
    """A command that runs jobs: --out, --trace, --quiet, --config and the job options."""
    p: CommandParser = sub.add_parser(name, help=help, description=help)
    p.add_argument(
        "--out", default=out, help=f"directory for the results and, without --table, the table (default: {out})"
    )
    p.add_argument("--table", default=None, help="table path or pyarrow.fs URI (default: OUT/table)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--verbose", action="store_true", help="show Ray's and Spark's own output (default: OUT/logs/ray-and-spark.log)"
    )
    add_config_option(p, job=True)
    add_job_options(p, defaults, exclude=exclude, more_choices=more_choices)
    return p
