"""Shared helpers of the compose tests."""

from __future__ import annotations

from typing import Any

from compose.graph import END, START, Graph


def line(*nodes: tuple[str, Any], state: Any = None) -> Graph[str, str]:
    """START -> each lambda node ``(key, fn)`` in turn -> END."""
    g = Graph[str, str](state=state)
    prev = START
    for key, fn in nodes:
        g.add_lambda_node(key, fn)
        g.add_edge(prev, key)
        prev = key
    g.add_edge(prev, END)
    return g
