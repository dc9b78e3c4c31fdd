"""The engine behind ``Graph``, ``Chain`` and ``Workflow``: it runs the tables the builder compiles a graph into
(``compose.graph._compiler``) and imports neither the builder nor ``Runnable``.

- ``names``: ``START``, ``END`` and the other names the builder (``compose.graph``) shares with the engine;
- ``tables``: the precompiled, integer-indexed tables, the protocols of what they hold (a branch, a sub-graph, a
  field mapping), and the pure routing functions over them;
- ``run_state``: ``RunState``, a run's mutable state in one record;
- ``pregel`` (supersteps with a barrier), ``dag`` (eager, with skip propagation), ``routing`` and ``node_exec``:
  the run's functions over (tables, run state);
- ``scheduler``: ``GraphRun``, the one driver of a run (``step(until=)``), binding the run state's hooks;
- ``resume``: pausing a run into a ``RunSnapshot`` and continuing from one;
- ``stepped``: ``SteppedRun``, a run that settles each step where it ends (its post handlers run), for what
  watches its steps: the history, stream modes;
- ``history``: ``RecordedRun``, a run that keeps a snapshot per step (``compile(keep_history=)``), replaying from
  one, and ``update_state``;
- ``options``: a call's options, checked against the tables before the run starts.

Nothing is imported here, so that importing one module does not import the others.
"""
