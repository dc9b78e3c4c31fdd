"""Shared fixtures: every async test runs on asyncio and trio; every test ends with no open stream and no task."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest


@pytest.fixture(
    params=[
        pytest.param(("asyncio", {}), id="asyncio"),
        pytest.param(("trio", {}), id="trio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def _no_stream_leaks() -> Iterator[None]:
    """Fail the test if it leaves a stream reader open (neither closed nor read to its end)."""
    from compose import stream

    stream._reset_leak_tracking()
    yield
    gc.collect()
    leaked = stream._open_reader_report()
    stream._reset_leak_tracking()
    assert not leaked, f"stream readers left open: {leaked}"


@pytest.fixture
async def no_task_leaks() -> AsyncIterator[None]:
    """For async tests: fail if the test leaves tasks running (request it, or use it through `leak_check`)."""
    before = {t.id for t in anyio.get_running_tasks()}
    yield
    await anyio.wait_all_tasks_blocked()
    after = [t for t in anyio.get_running_tasks() if t.id not in before]
    assert not after, f"tasks left running: {[t.name for t in after]}"
