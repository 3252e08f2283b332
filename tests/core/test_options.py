"""The command line's options come from JobConfig's one table: every option has help and shows its
default, the parsed flags give back JobConfig's defaults, a --config file (YAML, JSON, a run's
result.json) sets values that flags override, and bad values exit 2 naming the flag, before any
Ray or Spark start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.cli import main
from runtime.cli.command import build_parser, parse_args
from runtime.cli.options import job_config, option_fields
from runtime.core.config import JobConfig, flag_of


@pytest.mark.parametrize(
    "command", ["run", "compare", "faults", "deadlock", "verify", "simulate", "explore", "replay", "shrink"]
)
def test_every_option_has_help_and_shows_its_default(command):
    _, commands = build_parser()
    for action in commands[command].options:
        if not action.option_strings or action.dest in ("help", "config"):
            continue
        assert action.help, f"{command} {action.option_strings[0]} has no help"
        if action.nargs != 0 and not action.required:  # a switch is off (or on, for a --no- switch)
            shown = "default" in action.help or "required" in action.help
            assert shown, f"{command} {action.option_strings[0]} does not show its default"


def test_the_parsed_defaults_are_jobconfigs_defaults(tmp_path):
    args = parse_args(["run", "--out", str(tmp_path)])
    cfg = job_config(args, str(tmp_path))
    defaults = JobConfig()
    for f in option_fields():
        assert getattr(cfg, f.name) == getattr(defaults, f.name), flag_of(f.name)
    assert cfg.explicit_durations == [] and cfg.table == str(tmp_path / "table")


def test_a_yaml_file_sets_values_and_flags_win(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(
        "writers: 3\ncheckpoint-timeout: 7.5\nkafka_commit_interval_s: 0.4\nfaults: task.in_snapshot@2#1\n"
        "abort_checkpoints: '3'\nprotocol: ckp-meta\n"
    )
    args = parse_args(["run", "--config", str(path), "--writers", "4", "--out", str(tmp_path)])
    cfg = job_config(args, str(tmp_path))
    assert (cfg.writers, cfg.checkpoint_timeout_s, cfg.kafka_commit_interval_s) == (4, 7.5, 0.4)
    assert cfg.protocol == "ckp-meta" and cfg.schedule.abort_checkpoints == [3]
    assert [f.text() for f in cfg.faults] == ["task.in_snapshot@2#1"]
    assert cfg.commit_ack_timeout_s == 7.5  # Hudi's ack timeout follows the checkpoint timeout
    assert sorted(cfg.explicit_durations or []) == ["checkpoint_timeout_s", "kafka_commit_interval_s"]


def test_a_key_that_is_no_option_is_refused_naming_it(tmp_path, capsys):
    path = tmp_path / "job.yaml"
    path.write_text("writers: 3\nwritres: 4\n")
    assert main(["run", "--config", str(path), "--out", str(tmp_path)]) == 2
    out = " ".join(capsys.readouterr().out.split())  # the console folds a long line
    assert "'writres' is not an option of `commitlab run`" in out and str(path) in out


def test_a_file_that_is_not_a_mapping_is_refused(tmp_path, capsys):
    path = tmp_path / "job.yaml"
    path.write_text("- writers\n")
    assert main(["simulate", "--config", str(path), "--out", str(tmp_path)]) == 2
    assert "expected a mapping of option names to values" in " ".join(capsys.readouterr().out.split())


def test_a_recorded_run_runs_again_from_its_result_json(tmp_path):
    """The recorded configuration gives the same run: the simulator's trace is the same, byte for
    byte, though the re-run is written elsewhere."""
    first = ["simulate", "--storage", "memory", "--quiet", "--writers", "3", "--checkpoints", "4"]
    first += ["--records", "3000", "--faults", "task.in_snapshot@2#1", "--time-scale", "0.1", "--wait-tick", "0.02"]
    assert main([*first, "--out", str(tmp_path / "a")]) == 0
    again = ["simulate", "--config", str(tmp_path / "a" / "result.json"), "--quiet", "--out", str(tmp_path / "b")]
    assert main(again) == 0
    a, b = (json.loads((tmp_path / d / "result.json").read_text()) for d in "ab")
    assert a["trace_sha256"] == b["trace_sha256"]
    assert b["config"]["writers"] == 3 and b["config"]["faults"] == a["config"]["faults"]
    assert b["durations"] == a["durations"]  # the scale and the one explicit duration


def test_a_result_json_config_rescales_what_the_run_took_from_the_time_scale(tmp_path):
    assert main(["simulate", "--storage", "memory", "--quiet", "--out", str(tmp_path / "a")]) == 0
    args = parse_args(["run", "--config", str(tmp_path / "a" / "result.json"), "--time-scale", "0.1"])
    cfg = job_config(args, str(tmp_path / "b"))
    assert cfg.wait_tick_s == pytest.approx(0.1) and cfg.table == str(tmp_path / "b" / "table")


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--abort-checkpoints", "2,x"], "--abort-checkpoints: 'x' is not a checkpoint id"),
        (["--abort-checkpoints", "9"], "--abort-checkpoints 9: the job takes checkpoints 1 to 5"),
        (["--faults", "task.in_snapshot@2#2"], "task #2 does not exist with --writers 2"),
        (["--faults", "task.in_snapshot@8"], "checkpoint @8 is never taken with --checkpoints 5"),
        (["--faults", "task.sideways"], "--faults: unknown fault point 'task.sideways'"),
        (["--max-restarts", "-1"], "--max-restarts must not be negative"),
        (["--checkpoint-timeout", "0"], "--checkpoint-timeout must be a positive number of seconds"),
        (["--writers", "0"], "--writers must be at least 1"),
    ],
)
def test_bad_options_exit_2_naming_the_flag_before_ray_starts(tmp_path, capsys, no_ray, flags, message):
    code = main(["run", "--source", "generator", "--quiet", "--out", str(tmp_path / "out"), *flags])
    assert code == 2
    assert message in capsys.readouterr().out
    assert not (tmp_path / "out" / "table").exists()


def test_an_unwritable_out_exits_2_before_ray_starts(tmp_path, capsys, no_ray):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["run", "--source", "generator", "--quiet", "--out", str(blocker / "out")]) == 2
    assert "is a file, not a directory; choose another --out" in capsys.readouterr().out


def test_a_simulation_never_removes_a_table_it_did_not_write(tmp_path, capsys):
    table = tmp_path / "table" / ".hoodie"
    table.mkdir(parents=True)
    (table / "hoodie.properties").write_text("hoodie.table.name=theirs\n")
    assert main(["simulate", "--storage", "memory", "--quiet", "--out", str(tmp_path)]) == 2
    assert "no simulation under" in capsys.readouterr().out
    assert (table / "hoodie.properties").read_text() == "hoodie.table.name=theirs\n"
    # a simulation's own table is replaced by the next simulation
    out = tmp_path / "sim"
    assert main(["simulate", "--quiet", "--records", "400", "--out", str(out)]) == 0
    assert main(["simulate", "--quiet", "--records", "400", "--out", str(out)]) == 0
    assert Path(out / "table" / ".hoodie" / "hoodie.properties").exists()


def test_a_config_file_may_give_what_a_command_requires(tmp_path):
    path = tmp_path / "explore.yaml"
    path.write_text("scenario: deadlock\nseeds: 3\nprotocol: operator-event\n")
    args = parse_args(["explore", "--config", str(path), "--seeds", "2"])
    assert (args.scenario, args.seeds, args.protocol) == ("deadlock", 2, "operator-event")


@pytest.mark.parametrize(
    "command, positional, text, dest, value, flag",
    [
        ("run", [], "writers: 3", "writers", 3, ["--writers", "5"]),
        ("deadlock", [], "expect: deadlock", "expect", "deadlock", ["--expect", "commits"]),
        ("compare", [], "table-type: both", "table_type", "both", ["--table-type", "merge-on-read"]),
        ("faults", [], "seeds: 4", "seeds", 4, ["--seeds", "5"]),
        ("verify", [], "key: k2", "key", "k2", ["--key", "k3"]),
        ("report", ["DIR"], "html: a.html", "html", "a.html", ["--html", "b.html"]),
        ("simulate", [], "schedule_seed: 7", "schedule_seed", 7, ["--seed", "9"]),
        ("explore", [], "scenario: deadlock\nseeds: 5", "seeds", 5, ["--seeds", "6"]),
        ("replay", [], "seed: 5\nprotocol: ckp-meta\nscenario: deadlock", "seed", 5, ["--seed", "6"]),
        ("shrink", [], "seed: 5\nprotocol: ckp-meta\nschedule: s.json", "seed", 5, ["--seed", "6"]),
        ("s3-endpoint", [], "port: 9100", "port", 9100, ["--port", "9200"]),
    ],
)
def test_every_command_takes_a_config_file_and_flags_win(tmp_path, command, positional, text, dest, value, flag):
    path = tmp_path / "c.yaml"
    path.write_text(text + "\n")
    assert getattr(parse_args([command, *positional, "--config", str(path)]), dest) == value
    flagged = parse_args([command, *positional, "--config", str(path), *flag])
    assert str(getattr(flagged, dest)) == flag[1]


def test_bad_input_anywhere_exits_2_with_its_message_and_no_traceback(tmp_path, capsys):
    """A table that is not a Hudi table is the user's mistake (a TableError): exit 2, named."""
    (tmp_path / "not-a-table").mkdir()
    assert main(["verify", "--table", str(tmp_path / "not-a-table")]) == 2
    out = capsys.readouterr().out
    assert "Traceback" not in out and "Error" in out
