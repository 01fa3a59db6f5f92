"""Page admission counts pages held by running tasks (`sandbox.holds`); no browser needed."""

from __future__ import annotations

import asyncio
import logging

import pytest

from evaluators.config import BrowserConfig
from evaluators.sandbox.browser import BrowserWorker


async def _held_by_a_task(worker: BrowserWorker, ends: bool) -> asyncio.Task:
    """A task that is admitted a page and then ends without closing it, or holds it."""
    admitted = asyncio.Event()

    async def holder() -> None:
        await worker._admit()
        admitted.set()
        if not ends:
            await asyncio.Event().wait()

    task = asyncio.ensure_future(holder())
    await admitted.wait()
    await asyncio.sleep(0)
    return task


@pytest.mark.parametrize("holder_ends", [True, False])
def test_a_page_waiting_alone_gets_the_place_of_a_holder_that_ended(holder_ends):
    # The control (a holder still running) must keep the page alone waiting: otherwise
    # the first case would pass whatever admission counted.
    async def run() -> bool:
        worker = BrowserWorker(BrowserConfig())
        task = await _held_by_a_task(worker, ends=holder_ends)
        try:
            await asyncio.wait_for(worker._admit_alone(), 1.0)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            task.cancel()

    assert asyncio.run(run()) is holder_ends


def test_a_page_held_long_while_another_waits_is_reported_once_with_the_task_stacks(
        capsys, caplog):
    async def run() -> None:
        worker = BrowserWorker(BrowserConfig())
        worker._holds.report_s = 0.1
        task = await _held_by_a_task(worker, ends=False)
        try:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(worker._admit_alone(), 0.6)
        finally:
            task.cancel()

    with caplog.at_level(logging.WARNING, logger="evaluators.sandbox.holds"):
        asyncio.run(run())
    reports = [r for r in caplog.records if "while another waits to open" in r.getMessage()]
    assert len(reports) == 1
    # The holder's own frame is on stderr: what the page waits behind is on record.
    assert "in holder" in capsys.readouterr().err

