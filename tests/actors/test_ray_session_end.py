"""What ending the driver's own Ray leaves: nothing that names its session, even a raylet agent
spawned after the driver listed its processes (a stop while ``ray.init`` ran: the agent, orphaned
by the raylet's end, outlived the run in 1 of 20 SIGHUPs to the group)."""

from __future__ import annotations

import subprocess
import sys
import uuid

import psutil

from actors.ray_session import _end_processes_naming, session_names


def test_a_process_naming_the_session_of_the_drivers_ray_is_ended():
    name = f"session_test_{uuid.uuid4().hex}"
    agent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"--session-name={name}"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "--session-name=session_other"])
    try:
        assert session_names([psutil.Process(agent.pid)]) == {name}
        assert _end_processes_naming(name) == [agent.pid]
        assert agent.wait(10) is not None
        assert other.poll() is None  # another session's process is not this driver's
    finally:
        for proc in (agent, other):
            proc.kill()
            proc.wait()
