"""The reconcile loop's wait: an event wakes it at once, and so does kopf's stop flag (through the stop
relay, without polling), so a deleted service's loop ends promptly and a shutdown never waits a resync."""

import asyncio

from kopf._cogs.aiokits.aioenums import FlagSetter
from kopf._core.intents.stoppers import DaemonStoppingReason

from ascend_operator.controller.handlers import _relay_stop, _sleep


def _loop_flags(*, stopped: bool = False) -> tuple[FlagSetter[DaemonStoppingReason], asyncio.Event]:
    """kopf's stop flag of a daemon (as kopf builds it) and the loop's waker."""
    setter: FlagSetter[DaemonStoppingReason] = FlagSetter()
    if stopped:
        setter.set(DaemonStoppingReason.RESOURCE_DELETED)
    return setter, asyncio.Event()


async def _run_until_blocked() -> None:
    """Let every task started so far run until it waits on something (no timer is involved: a zero sleep
    only yields to the loop), so a task still pending afterwards is blocked, not merely not scheduled yet."""
    for _ in range(10):
        await asyncio.sleep(0)


async def test_a_stop_ends_a_long_wait_at_once() -> None:
    setter, waker = _loop_flags()
    relay = asyncio.create_task(_relay_stop(setter.async_waiter, waker))
    sleep = asyncio.create_task(_sleep(setter.async_waiter, waker, 300.0))
    await _run_until_blocked()
    assert not sleep.done()  # waiting: it did not return at once
    setter.set(DaemonStoppingReason.RESOURCE_DELETED)
    await asyncio.wait_for(sleep, 1.0)  # not the 300 s resync
    await asyncio.wait_for(relay, 1.0)
    assert waker.is_set()


async def test_an_event_wakes_the_wait_and_the_relay_keeps_waiting() -> None:
    setter, waker = _loop_flags()
    relay = asyncio.create_task(_relay_stop(setter.async_waiter, waker))
    sleep = asyncio.create_task(_sleep(setter.async_waiter, waker, 300.0))
    await _run_until_blocked()
    assert not sleep.done()
    waker.set()
    await asyncio.wait_for(sleep, 1.0)
    assert not relay.done()
    relay.cancel()  # what the loop's `finally` does if kopf gives up on the daemon
    await asyncio.gather(relay, return_exceptions=True)
    assert not setter.is_set()


async def test_a_stopped_loop_does_not_wait_at_all() -> None:
    setter, waker = _loop_flags(stopped=True)
    await asyncio.wait_for(_sleep(setter.async_waiter, waker, 300.0), 0.5)


async def test_the_wait_ends_when_its_time_is_up() -> None:
    setter, waker = _loop_flags()
    await asyncio.wait_for(_sleep(setter.async_waiter, waker, 0.05), 1.0)
    assert not waker.is_set()
