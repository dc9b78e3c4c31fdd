"""The JSON serializer pyeino gives DBOS, and the guard that refuses pickled rows.

DBOS stores workflow inputs and outputs, step outputs and errors, messages, events and stream values through
its configured ``Serializer``; its default pickles them. :class:`JsonSerializer` stores JSON only: plain JSON
values pass as they are, a :class:`~compose.schema.Message` is stored as its pydantic JSON under a ``$message``
tag (and comes back a ``Message``), an exception as ``{"$error": {"type", "message"}}`` (it comes back a
:class:`~adk.errors.DurableStepError`). Anything else is refused with a
:class:`~adk.errors.DurableSerializationError` naming its type, at the point it is written.

A row's ``serialization`` column says which serializer wrote it, and DBOS loads a row marked ``py_pickle`` with
``pickle`` whatever serializer is configured (a process with DBOS's default configuration writes such rows).
:func:`refuse_pickled_rows` replaces that loader, so such a row raises instead of being unpickled; a row in
any other format that is not pyeino's JSON is refused by :meth:`JsonSerializer.deserialize`.
"""

from __future__ import annotations

import json
from typing import Any

from dbos import _serialization as dbos_serialization
from dbos._serialization import Serializer

from adk.errors import DurableRunError, DurableSerializationError, DurableStepError
from compose.schema import Message

__all__ = ["JsonSerializer", "refuse_pickled_rows"]

_MESSAGE = "$message"
_ERROR = "$error"


def _encode(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Message):
        return {_MESSAGE: value.model_dump(mode="json", exclude_none=True)}
    if isinstance(value, (list, tuple)):
        return [_encode(v, where) for v in value]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise DurableSerializationError(where, f"a mapping key is {type(k).__qualname__}, not str")
            out[k] = _encode(v, where)
        return out
    raise DurableSerializationError(
        where, f"{type(value).__qualname__} is not JSON (durable values are JSON, Messages or exceptions)"
    )


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1:
            if _MESSAGE in value:
                return Message.model_validate(value[_MESSAGE])
            if _ERROR in value:
                err = value[_ERROR]
                return DurableStepError(str(err.get("type", "Exception")), str(err.get("message", "")))
        return {k: _decode(v) for k, v in value.items()}
    return value


class JsonSerializer(Serializer):
    """DBOS's serializer for pyeino: JSON in, JSON out, never pickle (see the module docstring)."""

    def name(self) -> str:
        return "pyeino_json"

    def serialize(self, data: Any) -> str:
        if isinstance(data, (DurableStepError, DurableRunError)):  # keeps the original error's type and text
            payload: Any = {_ERROR: {"type": data.error_type, "message": data.message}}
        elif isinstance(data, BaseException):
            payload = {_ERROR: {"type": type(data).__qualname__, "message": str(data)}}
        else:
            payload = _encode(data, "a value stored in DBOS's system database")
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)

    def deserialize(self, serialized_data: str) -> Any:
        try:
            value = json.loads(serialized_data)
        except (TypeError, ValueError) as e:
            raise DurableSerializationError(
                "a row of DBOS's system database", "it is not JSON (a pickled row is refused, never unpickled)"
            ) from e
        return _decode(value)


class _RefusePickle(Serializer):
    """Stands in for DBOS's pickle serializer: rows it wrote are refused, and nothing is written with it."""

    def name(self) -> str:
        return "py_pickle"

    def serialize(self, data: Any) -> str:
        raise DurableSerializationError(
            f"a {type(data).__qualname__} value", "DBOS was asked to pickle it; pyeino stores JSON only"
        )

    def deserialize(self, serialized_data: str) -> Any:
        raise DurableSerializationError(
            "a row of DBOS's system database", "it was pickled (serialization 'py_pickle'); pyeino refuses to unpickle"
        )


def refuse_pickled_rows() -> None:
    """Make DBOS refuse rows marked ``py_pickle`` in this process instead of unpickling them (idempotent).

    DBOS picks the loader by a row's ``serialization`` column, before consulting the configured serializer, so
    the refusal replaces DBOS's module-level pickle serializer (``dbos._serialization.DBOSDefaultSerializer``).
    """
    dbos_serialization.DBOSDefaultSerializer = _RefusePickle()
