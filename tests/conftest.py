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
    """For async tests: fail if the test leaves tasks running (request it by name)."""
    before = {t.id for t in anyio.get_running_tasks()}
    yield
    await anyio.wait_all_tasks_blocked()
    # the plugin drives a fixture's teardown from a helper task of its own: that one is not a leak
    current = anyio.get_current_task().id
    after = [
        t
        for t in anyio.get_running_tasks()
        if t.id not in before and t.id != current and "_call_in_runner_task" not in repr(t.coro)
    ]
    assert not after, f"tasks left running: {[t.name for t in after]}"
