"""Tasks end for sure, even one that swallows a cancellation (issue 17: a stalled worker)."""

from __future__ import annotations

import asyncio

from evaluators.aio import cancel_and_wait


def test_a_task_that_swallows_cancels_still_ends_and_one_that_never_ends_is_left():
    async def run():
        stop = asyncio.Event()

        async def stubborn(swallow: int) -> str:
            # As a loop over wait_for on Python 3.11 can: a cancel lands and the loop goes on.
            while True:
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    if swallow == 0 or stop.is_set():
                        raise
                    swallow -= 1

        two = asyncio.ensure_future(stubborn(2))
        done = asyncio.ensure_future(asyncio.sleep(0))
        await asyncio.sleep(0.01)
        assert await asyncio.wait_for(cancel_and_wait(two, done, every_s=0.05), 5) == set()
        assert two.cancelled() and done.done()
        # gather() would wait for ever on such a task: here the wait ends after its rounds.
        never = asyncio.ensure_future(stubborn(10 ** 9))
        await asyncio.sleep(0.01)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        assert await cancel_and_wait(never, every_s=0.02, rounds=5) == {never}
        assert not never.done() and loop.time() - t0 < 1.0
        stop.set()  # the test leaves nothing behind
        never.cancel()
        await asyncio.gather(never, return_exceptions=True)

    asyncio.run(run())


def test_a_probe_cancelled_again_and_again_leaves_no_exception_unretrieved(monkeypatch):
    # The probe's caller cancels it every half second until it ends (`cancel_and_wait`); a
    # second cancel used to cut the probe's own ending short: its load-and-run task, which
    # had swallowed the first cancel, then failed with no one to retrieve the failure.
    import gc
    import types

    import evaluators.checks.probe_run as probe_run
    from evaluators.checks.probes import StepFailure

    async def load_and_run(runner, cov, gate):
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass  # swallowed, as a wait_for on Python 3.11 can
        await asyncio.sleep(0.1)
        raise StepFailure("failed after the cancel")

    async def watchdog(runner, hang_timeout_ms, waits=None):
        await asyncio.sleep(10)

    monkeypatch.setattr(probe_run, "_load_and_run", load_and_run)
    monkeypatch.setattr(probe_run, "_watchdog", watchdog)
    unretrieved = []

    async def run():
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, ctx: unretrieved.append(ctx.get("message")))
        runner = types.SimpleNamespace(watch=types.SimpleNamespace(hung=False))
        guarded = asyncio.ensure_future(probe_run._guarded(runner, 1000, None, None))
        await asyncio.sleep(0.05)
        await cancel_and_wait(guarded, every_s=0.02)
        await asyncio.sleep(0.3)
        gc.collect()
        await asyncio.sleep(0)
        return runner.watch.hung

    hung = asyncio.run(run())
    assert unretrieved == []
    assert hung is True  # it may still act on the page: never reused


def test_dump_tasks_writes_what_each_pending_task_awaits():
    import io

    from evaluators.aio import dump_tasks

    async def waiting_for_the_gate(gate: asyncio.Event) -> None:
        await gate.wait()

    async def deep_inside(gate: asyncio.Event) -> None:
        await waiting_for_the_gate(gate)

    async def run() -> tuple[int, str]:
        gate = asyncio.Event()
        # The wait sits two coroutines down: the dump must reach it, not stop at the task's
        # outermost coroutine (all `Task.print_stack` shows of a suspended task).
        t = asyncio.ensure_future(deep_inside(gate))
        await asyncio.sleep(0)
        out = io.StringIO()
        n = dump_tasks(out)
        gate.set()
        await t
        return n, out.getvalue()

    n, text = asyncio.run(run())
    assert n == 2  # the test's own task and the waiting one
    assert "in deep_inside" in text and "in waiting_for_the_gate" in text
    assert "in wait" in text and "wait_for=<Future pending" in text
