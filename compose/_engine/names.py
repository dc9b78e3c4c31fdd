"""The names the builder and the engine share, at the bottom of both: ``START``/``END``, the merge config a node's
fan-in takes, the handler shape, and the engine's two markers. Imports nothing of pyeino's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["CALLING", "END", "NOTHING", "START", "FanInMergeConfig", "Handler"]

START = "start"
END = "end"

Handler = Callable[[Any, Any], Any]  # a pre/post handler: (value, state) -> value

NOTHING: Any = object()  # "no value yet" (None is a value)
CALLING: Any = object()  # a split superstep stopped at its node's call (``pregel.pregel_step(split=True)``)


@dataclass(frozen=True, slots=True)
class FanInMergeConfig:
    """How values arriving at one node in one step are merged. ``stream_merge_with_source_eof``: the merged
    stream yields a ``SourceEOF(predecessor_key)`` error item as each predecessor's stream ends."""

    stream_merge_with_source_eof: bool = False
