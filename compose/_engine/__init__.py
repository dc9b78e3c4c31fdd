"""The engine behind ``Graph``, ``Chain`` and ``Workflow``: compile a graph into tables, then run them.

- ``type_checks``: the edge and branch type checks at build and compile time, and the runtime checkers for edges
  that only *may* fit;
- ``compiler``: a checked ``Graph`` into ``Tables`` (imported by ``Graph.compile()`` on first use);
- ``tables``: the precompiled, integer-indexed tables and the pure routing functions over them;
- ``scheduler``: ``GraphRun``, one run over the tables, with its two channel strategies, ``pregel`` (supersteps
  with a barrier) and ``dag`` (eager, with skip propagation);
- ``resume``: pausing a run into a ``RunSnapshot`` and continuing from one;
- ``stepped``: ``SteppedRun``, a run that settles each step where it ends (its post handlers run), for what
  watches its steps: the history, stream modes;
- ``history``: ``RecordedRun``, a run that keeps a snapshot per step (``compile(keep_history=)``), replaying from
  one, and ``update_state``;
- ``options``: a call's options, checked against the tables before the run starts.

Nothing is imported here, so that importing one module does not import the others.
"""
