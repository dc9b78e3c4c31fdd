"""Callbacks around a graph run and its nodes (eino-semantics 1.8): which handlers a run at a path has, a node's
four methods wrapped to fire them, and the callbacks of a run that fails before it starts."""

from __future__ import annotations

from typing import Any

import anyio

from compose._engine.options import CallOptions
from compose.callbacks import (
    CallbackConfig,
    CallbackHandler,
    RunInfo,
    _current_config,
    _node_handlers,
    fire_end,
    fire_end_stream,
    fire_error,
    fire_failure,
    fire_start,
    fire_start_stream,
    make_config,
)
from compose.errors import GraphInterrupt
from compose.lambdas import Paradigms, derive
from compose.stream import close_if_stream as _close

__all__ = ["callback_config", "fail_early", "with_callbacks"]


def with_callbacks(p: Paradigms, handlers: tuple[CallbackHandler, ...], info: RunInfo) -> Paradigms:
    """Fire callbacks around what the component implements, then derive the rest (eino-semantics 1.8)."""

    report = p.report

    def wrap(fn: Any, stream_in: bool, stream_out: bool) -> Any:
        async def run(x: Any, **o: Any) -> Any:
            if stream_in:
                x = await fire_start_stream(handlers, info, x)
            else:
                await fire_start(handlers, info, x if report is None else report[0](x))
            token = _node_handlers.set(handlers)  # what the node runs (a ToolsNode's tools) reports to them
            try:
                out = await fn(x, **o)
            except BaseException as exc:
                with anyio.CancelScope(shield=True):
                    await fire_failure(handlers, info, exc)
                raise
            finally:
                _node_handlers.reset(token)
            if stream_out:
                return await fire_end_stream(handlers, info, out)
            await fire_end(handlers, info, out if report is None or stream_in else report[1](x, out))
            return out

        return run

    impl = p.implemented
    return derive(
        invoke=wrap(p.invoke, False, False) if "invoke" in impl else None,
        stream=wrap(p.stream, False, True) if "stream" in impl else None,
        collect=wrap(p.collect, True, False) if "collect" in impl else None,
        transform=wrap(p.transform, True, True) if "transform" in impl else None,
    )


def callback_config(options: CallOptions, path: tuple[str, ...]) -> CallbackConfig | None:
    """The handlers of a run at ``path``: this call's merged with the enclosing run's (a top-level run also
    picks up the global ones); a nested run without callbacks of its own shares its parent's."""
    if options.callbacks or not path:
        return make_config(options.callbacks, options.designate, path)
    return _current_config.get()


async def fail_early(
    options: CallOptions, path: tuple[str, ...], info: RunInfo, streaming: bool, value: Any, exc: BaseException
) -> None:
    """A run failing before it starts (bad options, no checkpoint store, a wrong input, its state factory...)
    still fires its graph's ``on_start`` and ``on_error`` once each, as Eino's deferred graph callbacks do
    (``TestEarlyFailCallback``); cancellation and interrupts fire nothing. Closes ``value`` (the run's input)."""
    with anyio.CancelScope(shield=True):
        try:
            if isinstance(exc, Exception) and not isinstance(exc, GraphInterrupt):
                cb = callback_config(options, path)
                handlers = cb.for_path(path) if cb is not None else ()
                if handlers:
                    if streaming:
                        value = await fire_start_stream(handlers, info, value)
                    else:
                        await fire_start(handlers, info, value)
                    await fire_error(handlers, info, exc)
        finally:
            await _close(value)
