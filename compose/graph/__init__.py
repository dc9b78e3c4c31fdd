"""Building graphs: the ``Graph`` builder and the two front ends on it, ``Chain`` and ``Workflow``.

- ``builder``: :class:`Graph` (nodes, edges, branches, build-time checks: ``_type_checks``, ``compile()``);
- ``branch``: the routing a node's output decides (:class:`GraphBranch`, :class:`StreamGraphBranch` and their
  multi-target variants);
- ``chain``: :class:`Chain`, a graph built by appending nodes, with ``Parallel`` and ``ChainBranch`` steps;
- ``workflow``: :class:`Workflow`, a graph whose edges map fields (``_field_mapping``: :class:`FieldMapping`,
  ``map_fields`` and the paths they read and write);
- ``info``: what a compiled graph looks like (:class:`GraphInfo`, its nodes and branches, Mermaid), handed to
  compile callbacks.

``_compiler`` checks a graph and compiles it into the engine's tables (``compose._engine``), which run as a
:class:`~compose.runnable.Runnable`; the engine imports nothing of this package (``START``/``END`` are its).
"""

from compose.graph._field_mapping import (
    FieldMapping,
    from_field,
    from_field_path,
    map_field_paths,
    map_fields,
    to_field,
    to_field_path,
)
from compose.graph.branch import GraphBranch, GraphMultiBranch, StreamGraphBranch, StreamGraphMultiBranch
from compose.graph.builder import END, START, FanInMergeConfig, Graph, NodeOptions, TriggerMode
from compose.graph.chain import Chain, ChainBranch, ChainNodeOptions, Parallel
from compose.graph.info import BranchInfo, CompileCallback, GraphCompileCallback, GraphInfo, NodeInfo
from compose.graph.workflow import Workflow, WorkflowNode

__all__ = [
    "END",
    "START",
    "BranchInfo",
    "Chain",
    "ChainBranch",
    "ChainNodeOptions",
    "CompileCallback",
    "FanInMergeConfig",
    "FieldMapping",
    "Graph",
    "GraphBranch",
    "GraphCompileCallback",
    "GraphInfo",
    "GraphMultiBranch",
    "NodeInfo",
    "NodeOptions",
    "Parallel",
    "StreamGraphBranch",
    "StreamGraphMultiBranch",
    "TriggerMode",
    "Workflow",
    "WorkflowNode",
    "from_field",
    "from_field_path",
    "map_field_paths",
    "map_fields",
    "to_field",
    "to_field_path",
]
