"""A run's container dies with bench: a watchdog process removes it when bench is gone.

bench starts ``python -m orchestrator.runtimes.docker_watchdog NAME`` before it creates the
container ``NAME``, in its own session (a Ctrl-C at the terminal does not reach it), with a pipe
as its stdin whose only writer is bench. When the run ends normally bench writes ``done`` and
closes the pipe; the watchdog exits. When bench dies without that (SIGKILL, a crash of the
interpreter), the kernel closes the pipe, the watchdog reads end-of-file without ``done`` and
removes the container (force: stop and remove), then exits.
"""

from __future__ import annotations

import subprocess
import sys

DONE = b"done"


def start(name: str) -> subprocess.Popen[bytes] | None:
    """Start the watchdog of container ``name`` (None when it cannot be started)."""
    try:
        return subprocess.Popen([sys.executable, "-m", __name__, name], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None


def release(watchdog: subprocess.Popen[bytes] | None) -> None:
    """The run ended and bench removed the container itself: let the watchdog go."""
    if watchdog is None or watchdog.stdin is None:
        return
    try:
        watchdog.stdin.write(DONE)
        watchdog.stdin.close()
        watchdog.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        watchdog.kill()


def main(argv: list[str]) -> int:
    name = argv[0]
    received = sys.stdin.buffer.read()  # returns at end-of-file: bench closed the pipe or died
    if received.endswith(DONE):
        return 0
    from orchestrator.docker_client import connect

    try:
        client = connect()
        client.api.remove_container(name, force=True, v=True)
    except Exception:  # already gone (404), or no daemon: nothing left to do
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
