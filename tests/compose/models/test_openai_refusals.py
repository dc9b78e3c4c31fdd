"""What OpenAIChatModel says when a server cannot be reached or refuses a request's ``response_format``, over
real HTTP on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import pytest

from compose.errors import ModelServerError, ResponseFormatUnsupportedError
from compose.models.openai_model import OpenAIChatModel
from compose.schema import user_message
from tests.compose.models.openai_server import OpenAIServer, completion, error_reply, json_reply, llama_cpp_check

pytestmark = pytest.mark.anyio

HI = [user_message("hi")]
SCHEMA = {
    "type": "json_schema",
    "json_schema": {"name": "Weather", "schema": {"type": "object", "properties": {}}, "strict": False},
}


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(check=llama_cpp_check) as srv:
        yield srv


@pytest.fixture
async def model(server: OpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    async with OpenAIChatModel("m", base_url=server.base_url, api_key="k") as m:
        yield m


@pytest.mark.parametrize("method", ["generate", "stream"])
async def test_a_refused_connection_names_the_base_url_and_the_cause(method: str) -> None:
    with OpenAIServer() as srv:
        url = srv.base_url  # the port is closed once the server is gone
    async with OpenAIChatModel("m", base_url=url, api_key="k") as model:
        with pytest.raises(ModelServerError) as info:
            await getattr(model, method)(HI)
    message = str(info.value)
    assert message.startswith(f"cannot connect to {url}/ (ConnectionRefusedError: ")
    assert "Connection error." not in message
    assert info.value.retryable and isinstance(info.value.__cause__, openai.APIConnectionError)


@pytest.mark.parametrize("method", ["generate", "stream"])
async def test_a_refused_response_format_is_typed_and_not_retryable(
    server: OpenAIServer, model: OpenAIChatModel, method: str
) -> None:
    with pytest.raises(ResponseFormatUnsupportedError) as info:
        await getattr(model, method)(HI, response_format=SCHEMA)
    error = info.value
    assert not error.retryable and error.status_code == 500
    assert str(error).startswith(f"the server at {server.base_url}/ refused response_format 'json_schema' (")
    assert "Input should be 'text' or 'json_object'" in str(error)
    assert len(server.requests) == 1


async def test_other_errors_of_a_request_with_response_format_keep_their_type(
    server: OpenAIServer, model: OpenAIChatModel
) -> None:
    server.push(error_reply(503, "overloaded"), json_reply(completion("{}")))
    fmt: dict[str, Any] = {"type": "json_object"}
    with pytest.raises(ModelServerError) as info:
        await model.generate(HI, response_format=fmt)
    assert type(info.value) is ModelServerError and info.value.retryable
    assert (await model.generate(HI, response_format=fmt)).content == "{}"  # json_object is accepted
