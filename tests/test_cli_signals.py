"""SIGTERM is Ctrl-C: the first asks the running job to stop (it still writes its record), a
second interrupts at once; the handlers are the process's own again afterwards."""

from __future__ import annotations

import os
import signal

import pytest
from rich.console import Console

from runtime.cli.terminal import interruptible


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_the_first_signal_asks_the_job_to_stop_and_a_second_interrupts(sig):
    before = signal.getsignal(sig)
    console = Console(record=True, width=120)
    with pytest.raises(KeyboardInterrupt), interruptible(console) as stop:
        assert not stop.is_set()
        os.kill(os.getpid(), sig)
        assert stop.is_set()
        os.kill(os.getpid(), sig)
    assert "stopping the job and writing its record" in console.export_text()
    assert signal.getsignal(sig) is before
