"""SIGINT, SIGTERM and SIGHUP ask the running job to stop (it still writes its record); the same
stop delivered twice (timeout(1) signals the command and then its group) is one stop; a second
one later ends the command at once with the first's exit code and says how far the record got;
the handlers are the process's own again afterwards."""

from __future__ import annotations

import os
import signal
import time

import pytest
from rich.console import Console

from runtime.cli import terminal
from runtime.cli.terminal import StopNow, interruptible


@pytest.fixture(autouse=True)
def _signals_as_a_terminal_leaves_them():
    """The test session's signals as a terminal's shell leaves them: a session started by nohup
    or in a script's background ignores SIGHUP or SIGINT, which the command keeps ignoring."""
    defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
    defaults[signal.SIGHUP] = signal.SIG_DFL
    previous = {sig: signal.signal(sig, handler) for sig, handler in defaults.items()}
    yield
    for sig, handler in previous.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_the_first_signal_asks_the_job_to_stop_and_a_later_second_ends_at_once(sig, code, monkeypatch):
    monkeypatch.setattr(terminal, "SAME_STOP_S", 0.2)
    before = signal.getsignal(sig)
    console = Console(record=True, width=200)
    with pytest.raises(StopNow) as ended, interruptible(console) as stop:
        assert not stop.is_set()
        os.kill(os.getpid(), sig)
        assert stop.is_set() and stop.signal == sig.name
        os.kill(os.getpid(), sig)  # at once: the same stop delivered again, not a second one
        time.sleep(0.3)
        os.kill(os.getpid(), sig)
    assert ended.value.exit_code == code
    text = console.export_text()
    assert "stopping the job and writing its record" in text
    assert "stopped at once; result.json was not written" in text
    assert signal.getsignal(sig) is before


def test_a_second_signal_after_the_record_was_written_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(terminal, "SAME_STOP_S", 0.0)
    console = Console(record=True, width=200)
    with pytest.raises(StopNow), interruptible(console) as stop:
        os.kill(os.getpid(), signal.SIGINT)
        stop.record_written(str(tmp_path / "result.json"), complete=False)
        os.kill(os.getpid(), signal.SIGTERM)
    assert "result.json was written; what the run committed was not checked" in console.export_text()


def test_a_stop_during_a_start_up_step_ends_the_step(monkeypatch):
    from runtime.job.stop import StartUpStopped

    console = Console(record=True, width=200)
    with interruptible(console) as stop:
        with pytest.raises(StartUpStopped), stop.start_up():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # ended by the signal
        assert stop.signal == "SIGTERM" and not stop.abortable
        with pytest.raises(StartUpStopped), stop.start_up():  # a later step does not start
            pass


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_stop_before_the_jobs_handlers_stops_the_job_even_when_its_interrupt_was_swallowed(sig, code):
    """Between the command's start and a job's handlers, a stopping signal ends the command with
    its exit code and is noted: a library that catches everything while it loads cannot make the
    stop vanish."""
    previous = signal.signal(sig, terminal.noting_stop)
    try:
        try:  # as a library's `except BaseException: pass` would
            os.kill(os.getpid(), sig)
            time.sleep(1)
        except KeyboardInterrupt as exc:
            assert getattr(exc, "exit_code", None) == code
        console = Console(record=True, width=200)
        with interruptible(console) as stop:
            assert stop.is_set() and stop.signal == sig.name
        assert f"{sig.name} before the job started: stopping it" in console.export_text()
        with interruptible(console) as stop:  # noted once: the next job is not stopped by it
            assert not stop.is_set()
    finally:
        signal.signal(sig, previous)
        terminal._noted.clear()


def test_a_stop_while_the_modules_load_ends_the_command_even_when_an_import_swallowed_it(monkeypatch, capsys):
    import runtime.cli as cli

    monkeypatch.setattr(cli, "_stopped_before", [])
    with pytest.raises(SystemExit):
        cli._before_the_command(int(signal.SIGHUP), None)
    assert cli._guarded_main(["--help-not-reached"]) == 129  # the command did not start
    assert "SIGHUP: stopped before the command started" in capsys.readouterr().err


def test_a_signal_the_command_was_started_to_ignore_stays_ignored():
    """``nohup commitlab run``: closing the terminal does not stop the job (nor does a SIGINT to
    a script's background job), as Python leaves an ignored SIGINT ignored."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with interruptible(Console(record=True, width=200)) as stop:
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.2)
            assert not stop.is_set()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_a_stop_before_the_jobs_handlers_ends_the_command_with_a_line_and_its_code(monkeypatch, capsys):
    from runtime.cli import command

    def stopped_while_the_options_are_read(argv):
        raise terminal.StoppedBeforeTheJob("SIGHUP")

    monkeypatch.setattr(command, "parse_args", stopped_while_the_options_are_read)
    assert command.main(["run"]) == 129
    assert "SIGHUP: stopped before the job started (no result.json)" in capsys.readouterr().out


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stop_while_a_job_command_checks_its_options_is_left_to_the_job_which_writes_its_record(sig, code, capsys):
    """Once ``run`` has read its arguments, a first stop before the job's handlers is noted, not
    raised: the option checks go on and the job stops in its start-up, so its record is written
    (before: the command ended with "no result.json"). A second signal meanwhile ends it at once."""
    previous = signal.signal(sig, terminal.noting_stop)
    try:
        terminal.defer_stops_to_the_job()
        os.kill(os.getpid(), sig)  # no KeyboardInterrupt: the option checks go on
        time.sleep(0.2)
        assert f"{sig.name}: the job stops as it starts and writes its record" in capsys.readouterr().err
        with pytest.raises(terminal.StoppedBeforeTheJob) as second:
            os.kill(os.getpid(), sig)
            time.sleep(1)
        assert second.value.exit_code == code
        console = Console(record=True, width=200)
        with interruptible(console) as stop:  # the job's handlers: it stops in its start-up
            assert stop.is_set() and stop.signal == sig.name
        assert f"{sig.name} before the job started: stopping it and writing its record" in console.export_text()
        with pytest.raises(KeyboardInterrupt):  # the job's command is over: a stop is not deferred any more
            os.kill(os.getpid(), sig)
            time.sleep(1)
    finally:
        signal.signal(sig, previous)
        terminal._noted.clear()
        terminal._deferred.clear()


def test_a_first_stop_while_a_job_commands_modules_load_is_left_to_the_job(monkeypatch, capsys):
    """``commitlab run`` stopped in its first second or two, while its modules load: the first
    signal is noted for the job (which stops in its start-up with its record), not the end of the
    command with no record; a second one meanwhile ends the command there."""
    import runtime.cli as cli
    from runtime.cli import command

    monkeypatch.setattr(cli, "_stopped_before", [])
    monkeypatch.setattr(cli, "_left_to_the_job", [])
    cli._before_a_job(int(signal.SIGTERM), None)  # no SystemExit: the modules go on loading
    assert "SIGTERM: the job stops as it starts and writes its record" in capsys.readouterr().err
    seen: list[list[str]] = []
    monkeypatch.setattr(command, "main", lambda argv: seen.append(list(terminal._noted)) or 0)
    try:
        assert cli._guarded_main(["run", "--records", "10"]) == 0
        assert seen == [["SIGTERM"]]  # the job's handlers find it (interruptible) and stop the job
    finally:
        terminal._noted.clear()
    cli._before_a_job(int(signal.SIGTERM), None)
    with pytest.raises(SystemExit) as second:
        cli._before_a_job(int(signal.SIGINT), None)
    assert second.value.code == 130
