"""Property-based testing of graphs: random graph specs, a reference interpreter, and leak checks.

A *graph spec* (:class:`GraphSpec`) is plain data: lambda nodes that append a tag to their input, edges,
branches that choose their successors deterministically from the value, sub-graphs, both trigger modes.
:func:`build` turns a spec into a real :class:`~compose.graph.Graph`; :func:`reference_run` interprets the same
spec directly, with plain loops and no concurrency or streams, as an oracle for differential tests (it follows
eino-semantics 1.2-1.4; read :func:`reference_trace` against it). :func:`graphs` is a hypothesis strategy of
specs that compile. Hypothesis is imported only when a strategy is asked for.

The value rules, shared by the built graph and the reference:

* every value is a dict (the graph input ``{"in": "xy"}``; each node's output goes under its ``output_key``,
  by default its own key); :func:`flat` reads a value as text: a string itself, a dict the concatenation of its
  values in key order (so fan-in merges are compared independently of their order);
* a lambda node outputs ``flat(input)[-WINDOW:] + tag`` (a stream node emits the same text in several pieces);
  a node with ``fails_on`` raises ``ValueError`` when that character is in its text;
* a branch chooses from ``flat(value)`` by its ``rule``: ``"hash"`` (crc32), ``"first"`` (the first character:
  a stream branch reads only the first chunk) or ``"length"`` (``targets[1]`` once the text is at least
  ``threshold`` long, else ``targets[0]``: the bounded loops of Pregel mode).

Example, a differential test of the engine (the package's own suite is ``tests/property``)::

    from hypothesis import given
    from compose.testing import build, graph_inputs, graphs, reference_trace, same_outcome

    @given(spec=graphs(), x=graph_inputs())
    async def test_engine_against_the_reference(spec, x):
        expected = reference_trace(spec, x)
        runnable = build(spec).compile(**spec.compile_options())
        try:
            result, error = await runnable.invoke(x), None
        except Exception as exc:
            result, error = None, exc
        assert same_outcome(error, expected), spec.to_python()
        assert result == expected.output, spec.to_python()

``assert_no_leaks()`` and ``ScriptedChatModel`` serve users' tests of their own graphs and agents;
``chat_scripts()`` generates scripted model runs for agent properties. ``cassette(path)`` records a run's model and
tool calls to a JSON file and replays them later (``compose.testing.cassette``; under pytest, the
``pyeino_cassette`` fixture and ``--cassette-mode``).
"""

from compose.models.scripted import ScriptedChatModel
from compose.testing._reference import Trace, reference_run, reference_trace, same_outcome
from compose.testing._spec import WINDOW, BranchSpec, GraphSpec, NodeSpec, branch, build, flat, node_fn, node_text
from compose.testing._strategies import ChatScript, assert_no_leaks, chat_scripts, graph_inputs, graphs
from compose.testing.cassette import Cassette, CassetteChatModel, CassetteMode, cassette

__all__ = [
    "WINDOW",
    "BranchSpec",
    "Cassette",
    "CassetteChatModel",
    "CassetteMode",
    "ChatScript",
    "GraphSpec",
    "NodeSpec",
    "ScriptedChatModel",
    "Trace",
    "assert_no_leaks",
    "branch",
    "build",
    "cassette",
    "chat_scripts",
    "flat",
    "graph_inputs",
    "graphs",
    "node_fn",
    "node_text",
    "reference_run",
    "reference_trace",
    "same_outcome",
]
