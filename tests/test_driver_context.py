"""A driver's signal handling (``contrasweep.runner.driver_context``, issue 72): the handlers a
sweep installs are put back when its call ends, and a call outside the main thread (a sweep run
from a thread of a notebook or a service) installs none, where Python would refuse one."""

from __future__ import annotations

import signal
import threading

from contrasweep.runner.driver_context import ctrl_c_seen, deferred_ctrl_c, restored_signals


def _mine(signum, frame):  # a kernel's own handler
    pass


def test_restored_signals_puts_back_the_callers_handlers():
    before = signal.signal(signal.SIGINT, _mine), signal.signal(signal.SIGTERM, _mine)
    try:
        with restored_signals():
            signal.signal(signal.SIGINT, signal.default_int_handler)  # as Tune and init_ray do
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        assert signal.getsignal(signal.SIGINT) is _mine and signal.getsignal(signal.SIGTERM) is _mine
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])


def test_outside_the_main_thread_no_handler_is_installed():
    found, handler = [], signal.getsignal(signal.SIGINT)

    def driver():
        with restored_signals(), deferred_ctrl_c() as asked, ctrl_c_seen() as seen:
            found.append((asked(), signal.getsignal(signal.SIGINT)))
        found.append(seen())

    thread = threading.Thread(target=driver)
    thread.start()
    thread.join(timeout=10)
    assert found == [(False, handler), False]  # no ValueError, nothing asked, nothing seen
    assert signal.getsignal(signal.SIGINT) is handler


def test_a_ctrl_c_in_the_main_thread_is_held_then_seen():
    with deferred_ctrl_c() as asked:
        signal.raise_signal(signal.SIGINT)  # held: the block goes on
        held = asked()
    assert held is True
