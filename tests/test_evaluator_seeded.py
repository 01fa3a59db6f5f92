"""Math.random is seeded in every document (issue 20: a reward that does not flip)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from evaluators.config import EvalConfig
from evaluators.sandbox.app_server import APP_URL
from evaluators.sandbox.browser import BrowserWorker

DRAWS = ("<!doctype html><html><body><p id=out></p><script>"
         "document.getElementById('out').textContent = JSON.stringify("
         "Array.from({length: 5}, () => Math.random()));</script></body></html>")


def _draws(seed: int | None, pages: int = 2) -> list[list[float]]:
    """Five draws of Math.random at load, in `pages` pages one after another."""
    cfg = EvalConfig().browser
    cfg = dataclasses.replace(cfg, random_seed=seed, page_reuse=1)

    async def run():
        worker = await BrowserWorker(cfg).start()
        out = []
        try:
            for _ in range(pages):
                async with worker.page(DRAWS) as (page, _, _):
                    await page.goto(APP_URL)
                    out.append(await page.evaluate(
                        "JSON.parse(document.getElementById('out').textContent)"))
        finally:
            await worker.close()
        return out

    return asyncio.run(run())


@pytest.mark.browser
@pytest.mark.timeout(120)
def test_every_document_draws_the_same_sequence_from_the_seed():
    a, b = _draws(0)
    assert a == b and len(set(a)) == 5 and all(0 <= x < 1 for x in a)
    (c,) = _draws(1, pages=1)
    assert c != a  # another seed, another sequence
    d, e = _draws(None)
    assert d != e and d != a  # unseeded: the browser's own, different in each document
