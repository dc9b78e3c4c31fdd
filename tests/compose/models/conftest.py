"""The fixtures of the OpenAIChatModel tests: the local scripted server, and a model talking to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from compose.models.openai_model import OpenAIChatModel
from tests.compose.models.openai_server import OpenAIServer


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture
async def model(server: OpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    async with OpenAIChatModel("test-model", base_url=server.base_url, api_key="sk-test") as m:
        yield m
