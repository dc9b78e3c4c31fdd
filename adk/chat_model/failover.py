"""Model failover (Eino's ``ModelFailoverConfig``, ``adk/failover_chatmodel.go``): when a model call fails, the
same request goes to another model.

``ChatModelAgent(..., model_config=ModelConfig(failover=ModelFailoverConfig(models=[backup])))``. Each model call of
a run first tries the model that last answered in this run (at first the agent's own); when that fails (after its
retries, ``model_retry``, which sit inside failover) and ``should_failover(output, error)`` says so, failover
attempts ``1..max_retries`` each ask ``get_failover_model`` for a model (and optionally other messages) and call it
with the request; the first that answers becomes the run's model for its later calls. When every attempt failed, the
last error is raised. ``models=[...]`` is the shorthand for a fixed list: the attempts try the agent's own model and
then ``models`` in order, skipping the one that just failed as the run's current model.

As in Eino: the failover wrapper is outside the retry wrapper and the event sender, so every attempt sends its
own model event (a failed streaming attempt's event stream ends with ``WillRetryError`` when another attempt
follows); a stream is read to its end before it is accepted (a failure in the middle fails over too, its
partial message given to ``should_failover``); the middlewares' ``wrap_model`` wrappers wrap each attempt's
model; interrupts (``GraphInterrupt``) and cancellation never fail over. Beyond Eino, an answer whose
``response_meta.model`` is empty gets the name of the model that answered (its ``model_name``, else its class
name), in its event too.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from adk.chat_model._context import current_react
from adk.errors import AgentTimeoutError, FailoverError
from compose.errors import GraphInterrupt
from compose.models.base import ChatModel, model_identity
from compose.schema import Message, ResponseMeta, ToolInfo, concat_messages
from compose.stream import StreamReader

__all__ = ["FailoverContext", "ModelFailoverConfig", "default_should_failover"]

FailoverPick = ChatModel | tuple[ChatModel, Sequence[Message] | None] | None


@dataclass(frozen=True, slots=True)
class FailoverContext:
    """What ``get_failover_model`` is told (Eino's ``FailoverContext``).

    Attributes:
        failover_attempt: the attempt, from 1.
        input_messages: the request's messages.
        last_output_message: the failed attempt's (partial, for a stream) message, or None.
        last_error: the failed attempt's error (a ``RetryExhaustedError`` when retries ran out).
    """

    failover_attempt: int
    input_messages: list[Message]
    last_output_message: Message | None
    last_error: BaseException


def default_should_failover(message: Message | None, error: BaseException) -> bool:
    """Fail over on every error but the run's own deadline (``AgentTimeoutError``)."""
    return not isinstance(error, AgentTimeoutError)


@dataclass(frozen=True)
class ModelFailoverConfig:
    """How a ChatModelAgent fails over to other models (see the module docstring).

    Args:
        models: the shorthand: models to try after the agent's own, in order.
        get_failover_model: ``(FailoverContext) -> model | (model, messages) | None``, sync or async: the model
            for an attempt (and messages replacing the request's, or None to keep them). None fails the call
            with ``FailoverError``; an exception it raises fails the call with that exception.
        should_failover: ``(message, error) -> bool``: whether a failure fails over (default
            :func:`default_should_failover`).
        max_retries: failover attempts per model call (default: ``len(models)``; with ``get_failover_model``
            required).

    Raises:
        ValueError: neither or both of ``models`` and ``get_failover_model``, or a missing/negative
            ``max_retries``.

    Example::

        ChatModelAgent(..., model_config=ModelConfig(failover=ModelFailoverConfig(models=[backup_model])))
    """

    models: Sequence[ChatModel] = ()
    get_failover_model: Callable[[FailoverContext], FailoverPick | Awaitable[FailoverPick]] | None = None
    should_failover: Callable[[Message | None, BaseException], bool] = default_should_failover
    max_retries: int | None = None

    def __post_init__(self) -> None:
        if bool(self.models) == (self.get_failover_model is not None):
            raise ValueError("ModelFailoverConfig needs either models=[...] or get_failover_model= (not both)")
        if self.get_failover_model is not None and self.max_retries is None:
            raise ValueError("ModelFailoverConfig(get_failover_model=...) needs max_retries")
        if self.max_retries is not None and self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")

    @property
    def attempts(self) -> int:
        """Failover attempts per model call."""
        return self.max_retries if self.max_retries is not None else len(self.models)


# the model the innermost proxy calls, set around each attempt
current_failover_model: ContextVar[ChatModel | None] = ContextVar("pyeino_failover_model", default=None)


def model_label(model: Any) -> str:
    """The name an answer's ``response_meta.model`` gets: the model's ``model_name``, else its class name."""
    return model_identity(model)[0] or type(model).__qualname__


def _labelled(msg: Message, label: str) -> Message:
    meta = msg.response_meta
    if meta is not None and meta.model:
        return msg
    meta = meta.model_copy(update={"model": label}) if meta is not None else ResponseMeta(model=label)
    return msg.model_copy(update={"response_meta": meta})


class FailoverProxy:
    """The innermost model of an agent with failover: calls the attempt's model (the agent's own outside
    failover) with the tools bound to it, and names it in the answer."""

    def __init__(self, own: ChatModel, tools: Sequence[ToolInfo] | None = None) -> None:
        self.own = own
        self.tools = tuple(tools) if tools is not None else None
        self._bound: dict[int, tuple[ChatModel, ChatModel]] = {}

    def with_tools(self, tools: Sequence[ToolInfo]) -> FailoverProxy:
        return FailoverProxy(self.own, tools)

    def __repr__(self) -> str:
        return f"FailoverProxy({self.own!r})"

    def _target(self) -> tuple[ChatModel, ChatModel]:
        model = current_failover_model.get() or self.own
        if not self.tools:
            return model, model
        hit = self._bound.get(id(model))
        if hit is None or hit[0] is not model:
            hit = (model, model.with_tools(self.tools))
            self._bound[id(model)] = hit
        return hit

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        model, bound = self._target()
        return _labelled(await bound.generate(messages, **opts), model_label(model))

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        model, bound = self._target()
        reader = await bound.stream(messages, **opts)
        label = model_label(model)
        first = [True]

        def tag(chunk: Message) -> Message:
            if first[0]:
                first[0] = False
                return _labelled(chunk, label)
            return chunk

        return reader.map(tag)


# whether another failover attempt follows the one in progress (a failed attempt's event ends with WillRetryError)
failover_has_more: ContextVar[bool] = ContextVar("pyeino_failover_has_more", default=False)


class FailoverChatModel:
    """Fails over between models around ``inner`` (the agent's retry / event / wrapper chain over a
    :class:`FailoverProxy`); see the module docstring."""

    def __init__(self, inner: ChatModel, config: ModelFailoverConfig, own: ChatModel) -> None:
        self.inner = inner
        self.config = config
        self.own = own

    def with_tools(self, tools: Sequence[ToolInfo]) -> FailoverChatModel:
        return FailoverChatModel(self.inner.with_tools(tools), self.config, self.own)

    def __repr__(self) -> str:
        return f"FailoverChatModel({self.inner!r}, attempts={self.config.attempts})"

    def _current(self) -> ChatModel:
        run = current_react.get()
        model = run.failover_model if run is not None else None
        return model if model is not None else self.own

    def _succeeded(self, model: ChatModel) -> None:
        run = current_react.get()
        if run is not None:
            run.failover_model = model

    async def _pick(self, ctx: FailoverContext, current: ChatModel) -> tuple[ChatModel, list[Message]]:
        config = self.config
        if config.get_failover_model is None:
            chain = [m for m in (self.own, *config.models) if m is not current]
            index = ctx.failover_attempt - 1
            if index >= len(chain):
                raise FailoverError(ctx.failover_attempt)
            return chain[index], ctx.input_messages
        picked = config.get_failover_model(ctx)
        if inspect.isawaitable(picked):
            picked = await picked
        messages: Sequence[Message] | None = None
        if isinstance(picked, tuple):
            picked, messages = picked
        if picked is None:
            raise FailoverError(ctx.failover_attempt)
        return picked, list(messages) if messages is not None else ctx.input_messages

    async def _attempt(self, model: ChatModel, has_more: bool, call: Callable[[], Awaitable[Any]]) -> Any:
        token = current_failover_model.set(model)
        more = failover_has_more.set(has_more)
        try:
            return await call()
        finally:
            failover_has_more.reset(more)
            current_failover_model.reset(token)

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return await self._run(list(messages), opts, streaming=False)  # type: ignore[no-any-return]

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        return await self._run(list(messages), opts, streaming=True)  # type: ignore[no-any-return]

    async def _once(
        self, model: ChatModel, messages: list[Message], opts: dict[str, Any], streaming: bool, has_more: bool
    ) -> tuple[Any, Message | None, Exception | None]:
        """One attempt: ``(result, partial, error)``; a stream is read to its end first. An interrupt is no
        failure: it propagates."""
        if not streaming:
            try:
                return await self._attempt(model, has_more, lambda: self.inner.generate(messages, **opts)), None, None
            except GraphInterrupt:
                raise
            except Exception as exc:
                return None, None, exc
        try:
            reader: StreamReader[Message] = await self._attempt(
                model, has_more, lambda: self.inner.stream(messages, **opts)
            )
        except GraphInterrupt:
            raise
        except Exception as exc:
            return None, None, exc
        check, keep = reader.copy(2)
        chunks: list[Message] = []
        try:
            async for chunk in check:
                chunks.append(chunk)
        except GraphInterrupt:
            await keep.aclose()
            raise
        except Exception as exc:
            await keep.aclose()
            return None, concat_messages(chunks) if chunks else None, exc
        finally:
            await check.aclose()
        return keep, None, None

    async def _run(self, messages: list[Message], opts: dict[str, Any], *, streaming: bool) -> Any:
        config = self.config
        attempts = config.attempts
        current = self._current()
        result, partial, error = await self._once(current, messages, opts, streaming, attempts > 0)
        if error is None:
            return result
        if not config.should_failover(partial, error):
            raise error
        for attempt in range(1, attempts + 1):
            ctx = FailoverContext(attempt, messages, partial, error)
            model, request = await self._pick(ctx, current)
            result, partial, failed = await self._once(model, request, opts, streaming, attempt < attempts)
            if failed is None:
                self._succeeded(model)
                return result
            error = failed
            if not config.should_failover(partial, error):
                raise error
        raise error
