"""``Runnable``: a compiled graph, run in four paradigms (eino-semantics 1.7).

The graph itself runs in two modes: ``invoke`` runs every node with its invoke form and values flow on edges;
``stream``/``collect``/``transform`` run every node with its transform form and streams flow on edges. So
``stream(x)`` = transform of a one-chunk stream, ``collect(r)`` = concat of transform. ``stream()`` returns as
soon as END has a stream; the rest of the work happens lazily as the caller reads it.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast, overload

import anyio
import anyio.from_thread
import anyio.lowlevel

from compose._engine.history import begin_lineage, get_state, get_state_history, open_recorded, update_state
from compose._engine.options import CallOptions
from compose._engine.resume import GRAPH_CHECKPOINT_KIND, claim_snapshot
from compose._engine.run_callbacks import fail_early
from compose._engine.scheduler import GraphRun
from compose._engine.stepped import SteppedRun
from compose._types import runtime_checker, type_name
from compose.callbacks import RunInfo
from compose.checkpoint import encode_checkpoint
from compose.checkpoint._history import StateSnapshot
from compose.checkpoint._protocol import _release_claim, _release_claim_after, _retire
from compose.checkpoint._snapshot import RunSnapshot
from compose.errors import GraphInterrupt, GraphRunError, RuntimeTypeError, StreamEnd
from compose.graph.info import GraphInfo, build_graph_info
from compose.stream import StreamReader, concat
from compose.stream import close_if_stream as _close
from compose.stream_modes import StreamMode, StreamPart, parse_modes, stream_parts

if TYPE_CHECKING:
    from compose._engine.tables import Tables

__all__ = ["Runnable"]

_KIND = GRAPH_CHECKPOINT_KIND

I = TypeVar("I")  # noqa: E741
O = TypeVar("O")  # noqa: E741


class Runnable(Generic[I, O]):
    """A compiled graph. Per-call options (keyword arguments of every method):

    * ``max_run_steps``: override the step limit (Pregel mode only);
    * ``callbacks``: ``CallbackHandler``s for this run (the graph and every node, nested graphs included);
    * ``designate``: restrict ``callbacks`` to these node keys or paths into sub-graphs (``("sub", "inner")``);
    * ``node_options``: ``{"node_key": {...}}`` keyword options for one node (a chat model receives them as model
      options; a lambda as keyword arguments if it accepts ``**opts``; a sub-graph as its own call options);
    * checkpoints: ``checkpoint_id`` (save a pause there; resume from it when it exists), ``resume={interrupt_id:
      data}``, ``state_modifier``, ``force_new_run``, ``claim_stale_after`` (seconds: a resume takes over a claim
      on the checkpoint not renewed for that long, left by a worker that died mid-resume; default: the store's
      ``claim_ttl``, after which an unrenewed claim of the SQL stores expires anyway);
    * ``external_interrupt``: a ``StopRequest`` (``ExternalInterrupt``) to stop the run from outside;
    * ``resume_all``: answer every open interrupt of the checkpoint with this one value ("approve all");
    * history (``compile(keep_history=...)``): ``from_step=k`` continues from snapshot ``k`` of ``branch``
      (``"main"`` when None) as a new branch of the same history, the input ignored (pass None); ``fork_id``
      continues under a new checkpoint id instead, the history up to ``k`` copied there (an id that has a
      history or a saved checkpoint already raises ``CheckpointExistsError``).

    Options naming nodes are checked before the run starts (``GraphRunError`` naming the unknown node).
    """

    def __init__(self, tables: Tables) -> None:
        self._tables = tables
        self._info = RunInfo(tables.name, "Graph", "Graph")
        self._input_ok = runtime_checker(tables.input_type)
        self._graph_info: GraphInfo | None = None

    def _check_input(self, x: Any) -> None:
        if not self._input_ok(x):
            raise RuntimeTypeError(
                f"graph '{self._tables.name}' input: expected type: {type_name(self._tables.input_type)}, "
                f"actual type: {type(x).__qualname__}"
            )

    @property
    def name(self) -> str:
        """The name given to ``compile(name=)``."""
        return self._tables.name

    @property
    def input_type(self) -> Any:
        """The graph's input type."""
        return self._tables.input_type

    @property
    def output_type(self) -> Any:
        """The graph's output type."""
        return self._tables.output_type

    def graph_info(self) -> GraphInfo:
        """What the graph is made of: nodes, edges, branches, sub-graphs (built on the first call, then cached).

        Example::

            print(runnable.graph_info().to_mermaid())
        """
        if self._graph_info is None:
            self._graph_info = build_graph_info(self._tables)
        return self._graph_info

    async def get_state_history(self, checkpoint_id: str) -> list[StateSnapshot]:
        """The snapshots of ``checkpoint_id``'s runs (every branch), newest first (``compile(keep_history=)``).

        Example::

            for snap in await runnable.get_state_history("run-1"):
                print(snap.branch, snap.step, snap.next_nodes, snap.node_outputs)
        """
        return await get_state_history(self._tables, checkpoint_id)

    async def get_state(
        self, checkpoint_id: str, step: int | None = None, branch: str | None = None
    ) -> StateSnapshot | None:
        """One snapshot: at ``step`` of ``branch`` (``"main"`` by default), or the newest (of ``branch``) when
        ``step`` is None; None when the history has none. A ``step`` that is not there raises
        ``CheckpointNotFoundError``."""
        return await get_state(self._tables, checkpoint_id, step, branch)

    async def update_state(
        self,
        checkpoint_id: str,
        step: int,
        *,
        as_node: str,
        output: Any,
        state: Mapping[str, Any] | None = None,
        fork_id: str | None = None,
        branch: str | None = None,
    ) -> StateSnapshot:
        """Write snapshot ``step + 1`` on a new branch as if ``as_node`` (a node that runs from snapshot ``step``)
        had produced ``output``: it is routed to its successors as its output would be (its post handler runs),
        and ``state`` (a patch of the state's fields) is applied through the state type. Continue with
        ``invoke(None, checkpoint_id=..., from_step=step + 1, branch=snap.branch)`` on the snapshot returned.
        ``fork_id`` writes it under a new checkpoint id (the history up to ``step`` copied), as its main branch.
        An ``output`` routed to END makes it the final snapshot (continuing from it returns that output).

        Raises:
            StateUpdateError: ``as_node`` is not a node of the graph or does not run from that step; ``output``
                is not of its output type; ``state`` does not fit the state type.
            CheckpointNotFoundError: the history has no such step.
            CheckpointExistsError: ``fork_id`` has a history or a saved checkpoint already (nothing is written).
        """
        return await update_state(
            self._tables, self._info, checkpoint_id, step, as_node=as_node, output=output, state=state,
            fork_id=fork_id, branch=branch,
        )

    def __repr__(self) -> str:
        t = self._tables
        mode = "all_predecessor" if t.dag else "any_predecessor"
        return f"Runnable({t.name!r}, nodes={list(t.keys[: t.n])}, trigger_mode={mode!r})"

    async def _open(
        self,
        x: Any,
        *,
        streaming: bool,
        options: CallOptions,
        path: tuple[str, ...],
        info: RunInfo,
        address: str = "",
        restore: tuple[RunSnapshot, Mapping[str, Any]] | None = None,
        check: tuple[Any] | None = None,
        origin: object = None,
        cancel_checked: bool = False,
    ) -> RunHandle:
        """Start a run: resume it from its checkpoint when there is one (claimed, so that exactly one of several
        concurrent resumes gets it), else check the input and begin afresh."""
        if not path and not cancel_checked:
            await _entry_checkpoint(x)
        t = self._tables
        store = t.checkpoint_store
        checkpoint_id = options.checkpoint_id if not path else None
        owner = ""
        # a run whose steps are watched settles each where it ends (``stepped``); a plain run pays nothing for it
        make: Callable[..., GraphRun] = SteppedRun if options.step_watch is not None and not path else GraphRun
        recorded = False
        try:
            if checkpoint_id is not None:
                if store is None:
                    raise GraphRunError("receive checkpoint id but have not set checkpoint store")
                if t.keep_history is not None:  # a recorded run (the only path history costs anything on)
                    make, checkpoint_id, restore = await open_recorded(t, store, checkpoint_id, options, streaming)
                    recorded = True
                elif options.from_step is not None:
                    raise GraphRunError(
                        f"from_step= replays a run's history: graph '{t.name}' needs compile(keep_history=True)"
                    )
                if restore is None and not options.force_new_run:
                    owner = uuid.uuid4().hex
                    restore = await claim_snapshot(
                        t, store, checkpoint_id, owner, streaming=streaming, options=options
                    )
                if recorded:
                    await begin_lineage(make, restore, bool(owner))
            if check is not None and restore is None:
                self._check_input(check[0])
            run = make(
                t,
                streaming=streaming,
                options=options,
                path=path,
                info=info,
                address=address,
                restore_from=restore,
                origin=origin,
            )
        except BaseException as exc:
            if owner and restore is not None and checkpoint_id is not None:
                await _release_claim_after(exc, store, checkpoint_id, owner)
            await fail_early(options, path, info, streaming, x, exc)
            raise
        if checkpoint_id is None:  # nothing to save, retire or release: the caller drives the graph run itself
            await run.begin(x)
            return run
        # restored from its checkpoint (claimed): deleted when it completes; a replay of the history is not
        handle = CheckpointedRun(run, store, checkpoint_id, owner, restore is not None and bool(owner), t.fingerprint)
        await handle.begin(x)
        return handle

    async def _open_watched(
        self, source: StreamReader[Any], options: CallOptions, check: tuple[Any] | None
    ) -> tuple[RunHandle, GraphRun]:
        """A streaming run watched with stream modes (``stream_modes``): its handle and the graph run in it."""
        handle = await self._open(source, streaming=True, options=options, path=(), info=self._info, check=check)
        run = handle._run if isinstance(handle, CheckpointedRun) else handle
        assert isinstance(run, GraphRun)
        return handle, run

    async def _execute(self, x: Any, **kwargs: Any) -> Any:
        handle = await self._open(x, **kwargs)
        await handle.step(to_end=True)
        return handle.result

    async def start_run(self, x: Any, *, streaming: bool, cancel_checked: bool = False, **opts: Any) -> RunHandle:
        """Begin a run that the caller drives superstep by superstep (``await run.step()`` until it returns True,
        then ``run.result``; ``await run.aclose()`` when abandoning it). In a streaming run ``x`` is a stream.
        Checkpoint options (``checkpoint_id``, ``resume``, ...) work as for ``invoke``. ``cancel_checked``: the
        caller has just passed a cancellation check (its own entry point's) and not awaited since, so this one
        is not repeated.

        This is how the agent runner interleaves events with the run without a background task.
        """
        if streaming:
            _check_reader(x, "start_run")
        options = CallOptions.parse(opts)
        return await self._open(
            x, streaming=streaming, options=options, path=(), info=self._info, cancel_checked=cancel_checked
        )

    async def invoke(self, x: I | None, **opts: Any) -> O:
        """Run with a value; every node runs its invoke form. Returns END's value."""
        options = CallOptions.parse(opts)
        return cast(
            O, await self._execute(x, streaming=False, options=options, path=(), info=self._info, check=(x,))
        )

    @overload
    async def stream(self, x: I | None, *, stream_mode: None = None, **opts: Any) -> StreamReader[O]: ...

    @overload
    async def stream(
        self, x: I | None, *, stream_mode: StreamMode | Sequence[StreamMode], subgraphs: bool = False, **opts: Any
    ) -> StreamReader[StreamPart]: ...

    async def stream(
        self,
        x: I | None,
        *,
        stream_mode: StreamMode | Sequence[StreamMode] | None = None,
        subgraphs: bool = False,
        **opts: Any,
    ) -> StreamReader[O] | StreamReader[StreamPart]:
        """Run in streaming mode with a value; returns END's stream as soon as END has one.

        With ``stream_mode`` (one mode or several: ``"values"``, ``"updates"``, ``"messages"``, ``"custom"``,
        ``"debug"``, ``"output"``) the reader yields ``StreamPart(mode, data, namespace)`` s instead, live as
        the run goes (it starts at the first ``recv()``; read the parts in one task: see
        ``compose.stream_modes``); ``subgraphs=True`` adds the parts of nodes inside sub-graphs.

        Example::

            async for part in await runnable.stream(x, stream_mode=["updates", "messages"]):
                print(part.mode, part.namespace, part.data)
        """
        if stream_mode is not None:
            modes = parse_modes(stream_mode)
            CallOptions.parse(opts)  # bad options fail here, not at the first read
            return stream_parts(self._open_watched, x, modes, subgraphs, opts)
        options = CallOptions.parse(opts)
        return cast(
            StreamReader[O],
            await self._execute(
                StreamReader.from_iterable((x,)),
                streaming=True,
                options=options,
                path=(),
                info=self._info,
                check=(x,),
            ),
        )

    @overload
    async def transform(self, reader: StreamReader[I], *, stream_mode: None = None, **opts: Any) -> StreamReader[O]: ...

    @overload
    async def transform(
        self,
        reader: StreamReader[I],
        *,
        stream_mode: StreamMode | Sequence[StreamMode],
        subgraphs: bool = False,
        **opts: Any,
    ) -> StreamReader[StreamPart]: ...

    async def transform(
        self,
        reader: StreamReader[I],
        *,
        stream_mode: StreamMode | Sequence[StreamMode] | None = None,
        subgraphs: bool = False,
        **opts: Any,
    ) -> StreamReader[O] | StreamReader[StreamPart]:
        """Run in streaming mode with a stream; returns END's stream. Takes ownership of ``reader``.

        With ``stream_mode`` the reader yields ``StreamPart`` s instead, as for ``stream``."""
        _check_reader(reader, "transform")
        try:
            options = CallOptions.parse(opts)
            modes = parse_modes(stream_mode) if stream_mode is not None else None
        except BaseException:
            await reader.aclose()
            raise
        if modes is not None:
            return stream_parts(self._open_watched, None, modes, subgraphs, opts, source=reader)
        return cast(
            StreamReader[O],
            await self._execute(reader, streaming=True, options=options, path=(), info=self._info),
        )

    async def collect(self, reader: StreamReader[I], **opts: Any) -> O:
        """Run in streaming mode with a stream and concatenate END's stream into one value."""
        _check_reader(reader, "collect")
        return cast(O, await concat(await self.transform(reader, **opts)))

    def invoke_sync(self, x: I, **opts: Any) -> O:
        """Blocking ``invoke`` for scripts (runs its own event loop; not for use inside async code)."""

        async def main() -> O:
            return await self.invoke(x, **opts)

        return anyio.run(main)

    def stream_sync(self, x: I, **opts: Any) -> Iterator[O]:
        """Blocking ``stream`` for scripts: an iterator of chunks (an event loop runs in a helper thread)."""
        with anyio.from_thread.start_blocking_portal() as portal:
            reader = portal.call(lambda: self.stream(x, **opts))
            try:
                while True:
                    try:
                        yield portal.call(reader.recv)
                    except StreamEnd:
                        return
            finally:
                portal.call(reader.aclose)


async def _entry_checkpoint(x: Any) -> None:
    """Every public entry point is a cancellation point (trio's rule for async APIs): a call made in a cancelled
    scope runs nothing and raises the cancellation, even for a graph whose nodes never await. Only a check, not
    a schedule point: a yield to the event loop per call would cost more than a short graph's whole run."""
    try:
        await anyio.lowlevel.checkpoint_if_cancelled()
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _close(x)
        raise


def _check_reader(reader: Any, method: str) -> None:
    if not isinstance(reader, StreamReader):
        raise TypeError(
            f"Runnable.{method}() takes a StreamReader, got {type(reader).__qualname__} (invoke()/stream() take a "
            "value; StreamReader.from_iterable(items) makes a stream)"
        )


class RunHandle(Protocol):
    """A run in progress that its caller drives (``Runnable.start_run``): the graph run itself when it has no
    checkpoint id (no object, no frame of a handle's in between), else a ``CheckpointedRun`` around it."""

    @property
    def result(self) -> Any:
        """END's value once ``step()`` returned True."""

    def step(self, *, to_end: bool = False, until: Callable[[], bool] | None = None) -> Awaitable[bool]:
        """Run one superstep (or, with ``to_end``, all of them; with ``until``, as many as it takes for it to
        return True after one); True once ``result`` is set (await it)."""

    async def aclose(self) -> None:
        """Abandon the run: close every stream it holds (and release a claimed checkpoint); what can suspend is
        shielded where it runs, so a caller in a cancelled scope closes everything."""


class CheckpointedRun:
    """A run in progress with its checkpoint id: saved when the run pauses, deleted when a resumed run
    finishes, released when a resumed run fails (so it can be resumed again)."""

    __slots__ = ("_checkpoint_id", "_fingerprint", "_owner", "_restored", "_run", "_store")

    def __init__(
        self, run: GraphRun, store: Any, checkpoint_id: str, owner: str, restored: bool, fingerprint: str
    ) -> None:
        self._run = run
        self._store = store
        self._checkpoint_id = checkpoint_id
        self._owner = owner
        self._restored = restored
        self._fingerprint = fingerprint

    def __repr__(self) -> str:
        return f"CheckpointedRun({self._run!r}, checkpoint_id={self._checkpoint_id!r})"

    @property
    def result(self) -> Any:
        """END's value once ``step()`` returned True."""
        return self._run.result

    async def begin(self, x: Any) -> None:
        await self._guard(self._run.begin(x))

    async def step(self, *, to_end: bool = False, until: Callable[[], bool] | None = None) -> bool:
        """Run one superstep (or, with ``to_end``, all of them; with ``until``, as many as it takes for it to
        return True after one); True once ``result`` is set. A resumed run's checkpoint is deleted when it
        finishes."""
        done: bool = await self._guard(self._run.step(to_end, until))
        if done and self._restored:
            owner, self._owner = self._owner, ""
            # retention: a finished run's is not kept; a delete that fails keeps the claim (never released here:
            # the checkpoint must not be resumed as if the run had not completed)
            await _retire(self._store, self._checkpoint_id, owner)
        return done

    async def aclose(self) -> None:
        """Abandon the run: close every stream it holds (and release a claimed checkpoint, shielded)."""
        await self._run.aclose()
        await self._release_claim()

    async def _guard(self, work: Any) -> Any:
        try:
            return await work
        except GraphInterrupt as exc:
            try:
                await self._save(exc)  # writing the new checkpoint clears the claim
            except BaseException as error:
                await self._release_after(error)
                raise
            raise
        except BaseException as exc:
            await self._release_after(exc)
            raise

    async def _release_after(self, exc: BaseException) -> None:
        """The run failed (``exc``): a resumed run's checkpoint stays resumable."""
        if self._owner and self._restored:
            owner, self._owner = self._owner, ""
            await _release_claim_after(exc, self._store, self._checkpoint_id, owner)

    async def _save(self, exc: GraphInterrupt) -> None:
        """The run paused: store its snapshot under the checkpoint id."""
        paused = getattr(exc, "snapshot", None)
        assert isinstance(paused, RunSnapshot)
        data = encode_checkpoint(paused, kind=_KIND, fingerprint=self._fingerprint)
        await self._store.set(self._checkpoint_id, data)
        exc.checkpoint_id = self._checkpoint_id

    async def _release_claim(self) -> None:
        """The run was abandoned: a resumed run's checkpoint stays resumable."""
        if self._owner and self._restored:
            owner, self._owner = self._owner, ""
            await _release_claim(self._store, self._checkpoint_id, owner)
