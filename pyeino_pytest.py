"""The pytest plugin of pyeino's cassettes (registered through the ``pytest11`` entry point ``pyeino_cassette``).

A top-level module that imports nothing of pyeino until a test asks for the fixture: entry-point plugins load
before coverage measurement starts, so a plugin inside ``compose`` would hide the import-time lines of every
module it imported from ``pytest --cov``.

* The ``pyeino_cassette`` fixture is an open :class:`~compose.testing.cassette.Cassette` named after the test:
  ``cassettes/<module>/<test>.json`` beside the test module (``tests/cassettes/test_trip/test_day_trip.json`` for
  ``tests/test_trip.py::test_day_trip``; a parametrized test's id is part of the name). It is saved when the test
  ends.
* ``--cassette-mode once|none|all|new`` sets the mode of every such cassette for the run (default ``once``: record
  what is missing locally; CI passes ``none`` so that a request nobody recorded fails the build).

Example::

    async def test_day_trip(pyeino_cassette):
        model = pyeino_cassette.wrap(OpenAIChatModel("gpt-4o-mini"))
        ...
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from compose.testing.cassette import Cassette

__all__ = ["MODES", "cassette_path", "pyeino_cassette", "pytest_addoption"]

MODES = ("once", "none", "all", "new")
"""The cassette modes (``compose.testing.CassetteMode``; a test checks that the two agree)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-\[\]]+")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pyeino", "pyeino cassettes")
    group.addoption(
        "--cassette-mode",
        action="store",
        default="once",
        choices=MODES,
        help="mode of the pyeino_cassette fixture's cassettes: once (default), none (replay only: CI), all, new",
    )


def cassette_path(node: pytest.Item) -> Path:
    """Where the cassette of test ``node`` lives: ``cassettes/<module>/<test>.json`` beside its module."""
    module = Path(str(node.path))
    name = _UNSAFE.sub("_", node.name)
    return module.parent / "cassettes" / module.stem / f"{name}.json"


@pytest.fixture
def pyeino_cassette(request: pytest.FixtureRequest) -> Iterator[Cassette]:
    """An open cassette named after the test, in the run's ``--cassette-mode``; saved at the end of the test."""
    from compose.testing.cassette import Cassette

    node = request.node
    assert isinstance(node, pytest.Item)
    with Cassette(cassette_path(node), request.config.getoption("--cassette-mode")) as tape:
        yield tape
