"""SIGINT, SIGTERM and SIGHUP handled alike: the first one interrupts, the cleanup then runs in peace.

Inside :func:`termination_handled` the first of these signals raises :class:`Terminated` (a
``KeyboardInterrupt``, so every Ctrl-C path of the executor and the runtimes handles it: the
engine, container or job is stopped and the run recorded as interrupted). Later signals are only
noted: the cleanup that follows (stopping the engine, writing the records, the summary and the
manifest) is bounded in time and must not be cut short, or the artifact would not validate.
The exit status is the shell's: 128 + the signal number (130 SIGINT, 143 SIGTERM, 129 SIGHUP).

Signals reach the main thread only. Work done in other threads (the executor's runs in flight at once,
``orchestrator.run.concurrent``) is told to stop with :func:`request_stop`: those threads poll
:func:`stopping` and sleep with :func:`pause`, which the request cuts short.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []
_stop = threading.Event()


def request_stop() -> None:
    """Ask every thread that polls :func:`stopping` to stop what it does (the main thread was interrupted)."""
    _stop.set()


def clear_stop() -> None:
    """Forget an earlier stop request (a new scenario starts)."""
    _stop.clear()


def stopping() -> bool:
    """Whether a stop was requested (:func:`request_stop`)."""
    return _stop.is_set()


def pause(seconds: float) -> None:
    """Sleep ``seconds``, woken early by a stop request."""
    _stop.wait(seconds)


class Terminated(KeyboardInterrupt):
    """The first termination signal, raised in the main thread."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _handler(signum: int, frame: Any) -> None:
    _received.append(signum)
    if len(_received) == 1:
        raise Terminated(signum)


def forget() -> None:
    """Forget the signals received and any stop request (a process that runs several scenarios, as a test session)."""
    _received.clear()
    _stop.clear()


def received() -> int | None:
    """The first signal received inside the current :func:`termination_handled` block (or None)."""
    return _received[0] if _received else None


def exit_status(default: int = 130) -> int:
    """128 + the first signal received (``default`` for a KeyboardInterrupt raised otherwise)."""
    return 128 + _received[0] if _received else default


def interrupt_reason(exc: BaseException | None = None) -> str:
    """'interrupted by the user (Ctrl-C)' or 'interrupted by SIGTERM' (the record's reason)."""
    signum = exc.signum if isinstance(exc, Terminated) else received()
    if signum is None or signum == signal.SIGINT:
        return "interrupted by the user (Ctrl-C)"
    return f"interrupted by {signal.Signals(signum).name}"


@contextmanager
def termination_handled() -> Iterator[None]:
    """Install the handlers for the block (main thread only; elsewhere a no-op), restore them after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    forget()
    previous = {sig: signal.signal(sig, _handler) for sig in HANDLED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def ignore_from_now() -> None:
    """The command is over and everything it wrote is complete: a SIGINT/SIGTERM/SIGHUP arriving while the
    interpreter shuts down changes nothing, so it must not kill the process by the signal's default action."""
    if threading.current_thread() is threading.main_thread():
        for sig in HANDLED:
            signal.signal(sig, signal.SIG_IGN)
