"""The exception hierarchy of pyeino's ``compose`` package.

Every error names what is at fault (node, edge, tool, field or type). Interrupts are not failures and do not
derive from :class:`ComposeError`::

    Exception
    ├── ComposeError                      base of every pyeino failure
    │   ├── GraphBuildError               building or compiling a graph (raised at the call that caused it)
    │   │   ├── TypeMismatchError         an edge/branch/handler joins incompatible types
    │   │   ├── GraphCompiledError        the graph was mutated after compile()
    │   │   └── InvalidGraphError         compile-time structure problems (loops in DAG mode, unreachable nodes, ...)
    │   ├── GraphRunError                 a run failed
    │   │   ├── MaxStepsExceededError     the step limit was reached (Pregel mode)
    │   │   ├── NodeRunError              a node (or its handler) raised; ``.node_path``; cause in ``__cause__``
    │   │   │   └── NodeOutputTypeError(RuntimeTypeError)   a node's output (or chunk) is not of its declared type
    │   │   ├── BranchError               a branch condition failed or chose a node outside its end nodes
    │   │   ├── RuntimeTypeError          a value crossing an ``Any`` edge had the wrong type
    │   │   ├── FanInMergeError           values arriving at one node could not be merged
    │   │   ├── FieldMappingError(LookupError)  a Workflow field mapping failed (missing map key, None on the path)
    │   │   │   └── FieldMappingTypeError(RuntimeTypeError)  a mapped value is not of the target field's type
    │   │   ├── StateError                ``process_state`` found no state of the asked type
    │   │   └── StateUpdateError(ValueError)  ``update_state`` names a node or gives an output/state that does not fit
    │   ├── StreamError                   misuse of a stream or an impossible concat
    │   │   ├── EmptyStreamError          concat of a stream with no chunk
    │   │   └── ConcatError               chunks that cannot be concatenated (conflicting values, no rule)
    │   ├── ToolError                     tools and ToolsNode
    │   │   ├── ToolNotFoundError         an assistant message called a tool the node does not have
    │   │   ├── ToolArgumentsError        arguments were not valid JSON or failed validation
    │   │   ├── ToolInputError            the ToolsNode input was not an assistant message with tool calls
    │   │   ├── ToolTimeoutError          a tool ran longer than its ``timeout`` (also a ``TimeoutError``)
    │   │   ├── ToolExecutionError        a tool raised; names the tool and call id; cause in ``__cause__``
    │   │   │   └── ToolArgumentsHandlerError   the ``tool_arguments_handler`` failed for a call
    │   │   ├── MCPServerError(ConnectionError)  an MCP server cannot be reached, or died, or broke the protocol
    │   │   └── MCPToolError              an MCP server answered a tool call with an error; names server and tool
    │   ├── ChatModelError                a chat model call failed; ``.retryable`` says whether retrying may help
    │   │   ├── ModelRateLimitError       HTTP 429 (retryable)
    │   │   ├── ModelTimeoutError         the request timed out (retryable)
    │   │   ├── ModelServerError          HTTP 5xx or a broken/truncated stream (retryable)
    │   │   ├── ModelBadRequestError      HTTP 400/404/422, or a request that cannot be encoded (not retryable)
    │   │   │   └── ResponseFormatUnsupportedError  the server refused ``response_format`` (HTTP 4xx or 5xx)
    │   │   ├── ModelAuthError            HTTP 401/403 (not retryable)
    │   │   ├── ModelResponseError        an answer that cannot be understood (wrong shape, not a JSON action, ...)
    │   │   └── ScriptExhaustedError      a ScriptedChatModel was called past its script
    │   ├── CheckpointError(ValueError)   a checkpoint cannot be read, trusted or resumed; ``.reason`` says why
    │   │   ├── CheckpointNotFoundError(LookupError)  a resume names a checkpoint id with nothing stored under it
    │   │   └── InterruptNotFoundError(LookupError)   resume data names an interrupt id the checkpoint does not have
    │   ├── CheckpointStoreError          a checkpoint store's database failed; cause in ``__cause__``
    │   ├── PromptError(ValueError)       a chat template cannot produce its messages (compose.prompt)
    │   │   ├── TemplateFormatError       a message's content cannot be rendered (syntax, missing variable, ...)
    │   │   │   └── TemplateSandboxError  a Jinja2 template tried to read a file or reach an unsafe attribute
    │   │   └── MessagesPlaceholderError  a placeholder's variable is missing or is not a list of messages
    │   ├── LoaderError                   a document loader could not read its source; cause in ``__cause__``
    │   │   └── PathOutsideRootError(PermissionError)  a FileLoader source escapes its root directory
    │   └── CassetteError                 a record/replay cassette cannot be used (compose.testing.cassette)
    │       ├── CassetteNotFoundError(FileNotFoundError)  replay-only mode and no cassette file
    │       └── CassetteMismatchError(LookupError)  a replayed call matches no recorded one; ``.field`` differs
    ├── StreamEnd(EOFError)               the end of a stream; raised by ``recv()`` again on every later call
    └── GraphInterrupt                    a run paused at an interrupt (not a failure); ``.info``, ``.checkpoint_id``
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from compose._types import type_name

__all__ = [
    "BranchError",
    "CassetteError",
    "CassetteMismatchError",
    "CassetteNotFoundError",
    "ChatModelError",
    "CheckpointError",
    "CheckpointNotFoundError",
    "CheckpointProblem",
    "CheckpointStoreError",
    "ComposeError",
    "ConcatError",
    "EmptyStreamError",
    "FanInMergeError",
    "FieldMappingError",
    "FieldMappingTypeError",
    "GraphBuildError",
    "GraphCompiledError",
    "GraphInterrupt",
    "GraphRunError",
    "InterruptNotFoundError",
    "InvalidGraphError",
    "LoaderError",
    "MCPServerError",
    "MCPToolError",
    "MaxStepsExceededError",
    "MessagesPlaceholderError",
    "ModelAuthError",
    "ModelBadRequestError",
    "ModelRateLimitError",
    "ModelResponseError",
    "ModelServerError",
    "ModelTimeoutError",
    "NodeOutputTypeError",
    "NodeRunError",
    "PathOutsideRootError",
    "PromptError",
    "ResponseFormatUnsupportedError",
    "RuntimeTypeError",
    "ScriptExhaustedError",
    "StateError",
    "StateUpdateError",
    "StreamEnd",
    "StreamError",
    "TemplateFormatError",
    "TemplateSandboxError",
    "ToolArgumentsError",
    "ToolArgumentsHandlerError",
    "ToolError",
    "ToolExecutionError",
    "ToolInputError",
    "ToolNotFoundError",
    "ToolTimeoutError",
    "TypeMismatchError",
]


class ComposeError(Exception):
    """Base class of every failure raised by pyeino."""


# ---------------------------------------------------------------------------------------------------------------
# Build and compile


class GraphBuildError(ComposeError):
    """Raised by a graph builder call (add node/edge/branch, compile) that cannot be honoured."""


class TypeMismatchError(GraphBuildError, TypeError):
    """Raised when an edge, branch or handler joins two incompatible types.

    Attributes name both ends and both types, e.g. ``graph edge[a]-[b]: start node's output type[int] and end
    node's input type[str] mismatch``.
    """

    def __init__(
        self,
        message: str,
        *,
        start: str | None = None,
        end: str | None = None,
        output_type: Any = None,
        input_type: Any = None,
    ) -> None:
        super().__init__(message)
        self.start = start
        self.end = end
        self.output_type = output_type
        self.input_type = input_type


class GraphCompiledError(GraphBuildError):
    """Raised when a graph is modified after ``compile()``."""

    def __init__(self, message: str = "graph has been compiled, cannot be modified") -> None:
        super().__init__(message)


class InvalidGraphError(GraphBuildError):
    """Raised by ``compile()`` for structural problems: a loop in DAG mode, an unreachable node, no start/end."""


# ---------------------------------------------------------------------------------------------------------------
# Running


class GraphRunError(ComposeError):
    """Base class of failures while a compiled graph runs."""


class MaxStepsExceededError(GraphRunError):
    """Raised when a Pregel run needs more supersteps than ``max_run_steps`` allows."""

    def __init__(self, max_steps: int) -> None:
        super().__init__(f"[GraphRunError] exceeds max steps ({max_steps})")
        self.max_steps = max_steps


class NodeRunError(GraphRunError):
    """Raised when a node, its state handler or its input conversion fails.

    ``node_path`` lists node keys from the outermost graph down to the failing node; the original exception is
    ``__cause__``. ``phase`` says what failed: ``""`` (the node), ``"pre handler"``, ``"post handler"``,
    ``"output"`` (:class:`NodeOutputTypeError`) or ``"stream"``: an error inside the node's output stream in a
    streaming run (the model's connection broke, a tool failed mid-stream), named once after the node that
    produced the stream and raised as it is wherever the stream is read (by the next node, a handler, a branch,
    the caller).
    """

    _origin: object = None  # the run whose stream named it (compose._engine.blame); None for other errors

    def __init__(self, node_path: Sequence[str], cause: BaseException, *, phase: str = "") -> None:
        self.node_path = list(node_path)
        self.phase = phase
        where = f" {phase}" if phase else ""
        super().__init__(
            f"[NodeRunError] node{where} failed: {type(cause).__name__}: {cause}\n"
            f"------------------------\nnode path: [{', '.join(self.node_path)}]"
        )
        self.__cause__ = cause

    def with_parent(self, key: str) -> NodeRunError:
        """Return the same error with ``key`` prepended to the node path (used as it rises through sub-graphs)."""
        cause = self.__cause__
        assert cause is not None
        err = NodeRunError([key, *self.node_path], cause, phase=self.phase)
        err.__traceback__ = self.__traceback__
        return err


class BranchError(GraphRunError):
    """Raised when a branch condition fails or returns a node that is not one of its end nodes."""

    def __init__(self, message: str, *, node: str | None = None) -> None:
        super().__init__(message)
        self.node = node


class RuntimeTypeError(GraphRunError, TypeError):
    """Raised when a value crossing an edge typed ``Any`` on one side is not of the type the other side needs."""


class NodeOutputTypeError(NodeRunError, RuntimeTypeError):
    """Raised when a node returns a value that is not of its declared output type, or its output stream yields
    such a chunk (then as an error item of the stream, where it is read); ``node_path`` names the node.

    Only concrete declared types are checked, with one shallow ``isinstance`` (``list[Message]``: a list; an
    ``int`` passes for ``float``); ``Any``, TypeVars, Protocols and ``Literal`` are not. A node with an
    ``output_key`` is checked on its value before it is wrapped. ``expected`` is the declared type, ``actual``
    the type of the value. There is no ``__cause__``: the node itself did not fail.
    """

    def __init__(self, node_path: Sequence[str], expected: Any, actual: type, *, chunk: bool = False) -> None:
        self.node_path = list(node_path)
        self.phase = "output"
        self.expected = expected
        self.actual = actual
        self.chunk = chunk
        what = "a chunk of the output stream" if chunk else "the output"
        key = self.node_path[-1] if self.node_path else ""
        GraphRunError.__init__(
            self,
            f"[NodeRunError] runtime type check fail on {what} of node[{key}]: expected type: "
            f"{type_name(expected)}, actual type: {actual.__qualname__}\n"
            f"------------------------\nnode path: [{', '.join(self.node_path)}]",
        )

    def with_parent(self, key: str) -> NodeRunError:
        err = NodeOutputTypeError([key, *self.node_path], self.expected, self.actual, chunk=self.chunk)
        err.__traceback__ = self.__traceback__
        return err


class FanInMergeError(GraphRunError):
    """Raised when several values arrive at one node in one step and cannot be merged."""


class FieldMappingError(GraphRunError, LookupError):
    """Raised when a Workflow field mapping fails at run time: a map key on the source path is missing (invoke
    mode; a streaming run skips the chunk), or a value on the way to the field is None (both modes; in a streaming
    run as an error item of the mapped stream).

    ``node_path`` lists node keys from the outermost graph down to the node whose input was being mapped,
    ``predecessor`` is the node the value came from and ``field_path`` the source path of the mapping (the
    target path for a failing custom extractor).
    """

    def __init__(
        self, problem: str, *, node_path: Sequence[str], predecessor: str, field_path: Sequence[str]
    ) -> None:
        self.node_path = list(node_path)
        self.predecessor = predecessor
        self.field_path = list(field_path)
        self.problem = problem
        node = self.node_path[-1] if self.node_path else ""
        super().__init__(
            f"[FieldMappingError] field mapping from node '{predecessor}' to node '{node}', field path "
            f"[{'.'.join(self.field_path)}]: {problem}\n"
            f"------------------------\nnode path: [{', '.join(self.node_path)}]"
        )


class FieldMappingTypeError(FieldMappingError, RuntimeTypeError):
    """Raised when a Workflow field mapping whose types only may fit (from ``Any``, a ``dict[str, Any]`` value, a
    base class to a subclass, a union) carries a value that is not of the target field's type: a ``None`` or a
    ``str`` mapped into an ``int``, an ``Animal`` that is not the ``Dog`` the node takes (Eino's "runtime check
    failed for mapping ..., field[X]-[Y] is absolutely not assignable"). In a streaming run it is an error item
    of the mapped stream. ``expected`` is the field's type, ``actual`` the value's."""

    def __init__(
        self,
        problem: str,
        *,
        node_path: Sequence[str],
        predecessor: str,
        field_path: Sequence[str],
        expected: Any,
        actual: type,
    ) -> None:
        super().__init__(problem, node_path=node_path, predecessor=predecessor, field_path=field_path)
        self.expected = expected
        self.actual = actual


class StateError(GraphRunError, LookupError):
    """Raised by ``process_state`` when the run has no state, or no state of the requested type."""


class StateUpdateError(GraphRunError, ValueError):
    """``Runnable.update_state`` was given a node the graph does not have or that does not run from that step, an
    output that is not of the node's output type, or a state patch that does not fit the state type; the message
    names which."""


# ---------------------------------------------------------------------------------------------------------------
# Streams


class StreamEnd(EOFError):
    """The end of a stream. ``recv()`` raises it at the end and again on every later call."""


class StreamError(ComposeError):
    """Misuse of a stream, or chunks that cannot be combined."""


class EmptyStreamError(StreamError):
    """Raised by ``concat`` when the stream had no chunk."""

    def __init__(self, message: str = "stream reader is empty, concat fail") -> None:
        super().__init__(message)


class ConcatError(StreamError, ValueError):
    """Raised when chunks cannot be concatenated (conflicting values, or no rule for their type)."""


# ---------------------------------------------------------------------------------------------------------------
# Tools


class ToolError(ComposeError):
    """Base class of tool and ToolsNode failures."""


class ToolNotFoundError(ToolError, LookupError):
    """Raised when a tool call names a tool the ToolsNode does not have (and no unknown-tools handler answers)."""

    def __init__(self, tool_name: str) -> None:
        super().__init__(f"tool {tool_name} not found in toolsNode indexes")
        self.tool_name = tool_name


class ToolArgumentsError(ToolError, ValueError):
    """Raised when a tool's arguments are not valid JSON or fail validation; names the tool and the field."""

    def __init__(self, tool_name: str, message: str, *, field: str | None = None) -> None:
        where = f" field '{field}'" if field else ""
        super().__init__(f"invalid arguments for tool '{tool_name}'{where}: {message}")
        self.tool_name = tool_name
        self.field = field


class ToolInputError(ToolError, ValueError):
    """Raised when the ToolsNode input is not an assistant message with at least one tool call."""


class ToolExecutionError(ToolError):
    """Raised when a tool fails inside a ToolsNode; names the tool and the call id, the cause is ``__cause__``."""

    def __init__(self, tool_name: str, call_id: str, cause: BaseException, *, streaming: bool = False) -> None:
        if streaming:
            msg = f"failed to stream tool call {call_id} (tool '{tool_name}'): {type(cause).__name__}: {cause}"
        else:
            msg = f"failed to invoke tool[name:{tool_name} id:{call_id}]: {type(cause).__name__}: {cause}"
        super().__init__(msg)
        self.tool_name = tool_name
        self.call_id = call_id
        self.__cause__ = cause


class ToolTimeoutError(ToolError, TimeoutError):
    """Raised when a tool runs (or streams) longer than its ``timeout``."""

    def __init__(self, tool_name: str, timeout: float) -> None:
        super().__init__(f"tool '{tool_name}' timed out after {timeout:g}s")
        self.tool_name = tool_name
        self.timeout = timeout


class ToolArgumentsHandlerError(ToolExecutionError):
    """Raised when ``tool_arguments_handler`` fails for a call; the cause is ``__cause__``."""

    def __init__(self, tool_name: str, call_id: str, arguments: str, cause: BaseException) -> None:
        super().__init__(tool_name, call_id, cause)
        self.args = (
            f"failed to execute tool[name:{tool_name} arguments:{arguments}] arguments handler: "
            f"{type(cause).__name__}: {cause}",
        )
        self.arguments = arguments


class MCPServerError(ToolError, ConnectionError):
    """Raised by ``compose.mcp`` when an MCP server cannot be started or reached, does not answer in time while
    connecting, closes the connection (it exited, crashed or hung up; every later call raises this too), or
    answers with something that is not MCP. ``server`` names it; the SDK's error is ``__cause__``."""

    def __init__(self, server: str, problem: str) -> None:
        super().__init__(f"MCP server '{server}': {problem}")
        self.server = server
        self.problem = problem


class MCPToolError(ToolError):
    """Raised by a ``compose.mcp`` tool when its server answers the call with an error (a result flagged
    ``is_error``, or a JSON-RPC error). ``server``, ``tool_name`` (the server's name for the tool) and ``text``
    (what the server said, which the model reads when tool errors are returned as results)."""

    def __init__(self, server: str, tool_name: str, text: str) -> None:
        super().__init__(f"MCP server '{server}' tool '{tool_name}' failed: {text}")
        self.server = server
        self.tool_name = tool_name
        self.text = text


# ---------------------------------------------------------------------------------------------------------------
# Chat models


class ChatModelError(ComposeError):
    """A chat model call failed. ``retryable`` says whether trying again may help.

    ``status_code`` is the HTTP status when there was one; ``retry_after`` the wait in seconds the provider
    asked for (its ``Retry-After`` header, in seconds or as an HTTP date), which the agent's model retry honours.
    """

    retryable: bool = False

    def __init__(self, message: str, *, status_code: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after = retry_after


class ModelRateLimitError(ChatModelError):
    """The provider rate-limited the request (HTTP 429). Retryable."""

    retryable = True


class ModelTimeoutError(ChatModelError):
    """The request timed out, or a streamed answer stalled (no data for the model's idle timeout). Retryable."""

    retryable = True


class ModelServerError(ChatModelError):
    """The provider failed (HTTP 5xx, connection error, or a stream that broke off). Retryable."""

    retryable = True


class ModelBadRequestError(ChatModelError):
    """The provider rejected the request (HTTP 400, 404, 422), or it cannot be sent (a request message with a
    lone surrogate, which UTF-8 cannot encode). Not retryable."""


class ResponseFormatUnsupportedError(ModelBadRequestError):
    """The server refused the request's ``response_format`` (structured output by JSON schema): an HTTP 4xx, or a
    5xx, whose error names ``response_format``, ``json_schema`` or ``json_object``, such as llama.cpp's server's
    HTTP 500 "Input should be 'text' or 'json_object'". Not retryable: the same request is refused again. An agent
    with ``output_mode="auto"`` falls back to its ``final_answer`` tool on it."""


class ModelAuthError(ChatModelError):
    """Authentication or permission failed (HTTP 401, 403). Not retryable."""


class ModelResponseError(ChatModelError):
    """The model answered with something that cannot be understood: a body or stream chunk of the wrong shape
    (quoted in the message), an answer that is not a JSON action, or a chat model returning something other
    than a ``Message``."""


class ScriptExhaustedError(ChatModelError):
    """A ScriptedChatModel was called more times than it has scripted responses."""


# ---------------------------------------------------------------------------------------------------------------
# Checkpoints

CheckpointProblem = Literal[
    "not_checkpoint",
    "version",
    "kind",
    "digest",
    "fingerprint",
    "payload",
    "encode",
    "claimed",
    "not_found",
    "unknown_interrupt",
]


class CheckpointError(ComposeError, ValueError):
    """A checkpoint cannot be written, read or resumed.

    ``reason`` says which check failed: ``"not_checkpoint"`` (not an envelope, or corrupted beyond reading),
    ``"version"`` (another envelope format version), ``"kind"`` (e.g. an agent checkpoint given to a graph),
    ``"digest"`` (bytes changed after writing, or the wrong key), ``"fingerprint"`` (written by a different
    graph, or the graph's structure, node types or state type changed), ``"payload"`` (the payload, or a value
    in it, does not fit what the graph declares), ``"encode"`` (the payload cannot be serialised), ``"claimed"``
    (another run is resuming it), ``"not_found"`` (nothing is stored under the id: :class:`CheckpointNotFoundError`)
    or ``"unknown_interrupt"`` (resume data for an interrupt the checkpoint does not have:
    :class:`InterruptNotFoundError`).
    """

    def __init__(self, message: str, *, reason: CheckpointProblem) -> None:
        super().__init__(message)
        self.reason: CheckpointProblem = reason


class CheckpointNotFoundError(CheckpointError, LookupError):
    """A resume found nothing under its checkpoint id (Eino's "checkpoint[...] not exist"): the id was never
    written, its run was already resumed to completion (and its checkpoint deleted), or it was pruned.

    Raised by ``invoke(..., checkpoint_id=id, resume={...})`` (resume data for a checkpoint that does not exist
    is never a fresh run) and by the agent runner's ``resume``. ``reason`` is ``"not_found"``.
    """

    def __init__(self, checkpoint_id: str, hint: str = "") -> None:
        super().__init__(
            f"failed to load from checkpoint: checkpoint[{checkpoint_id}] not exist"
            + (f"; {hint}" if hint else ""),
            reason="not_found",
        )
        self.checkpoint_id = checkpoint_id


class InterruptNotFoundError(CheckpointError, LookupError):
    """Resume data names interrupt ids that the checkpoint does not have (``.unknown``); ``.known`` lists the
    ids it has. Nothing ran and the checkpoint is unchanged. ``reason`` is ``"unknown_interrupt"``."""

    def __init__(self, checkpoint_id: str, unknown: Sequence[str], known: Sequence[str]) -> None:
        super().__init__(
            f"cannot resume checkpoint {checkpoint_id!r}: {sorted(unknown)} are not among its interrupt ids "
            f"{sorted(known)} (ids come from the interrupt's InterruptCtx.id; an id of an earlier pause is "
            "not valid once the run paused again)",
            reason="unknown_interrupt",
        )
        self.checkpoint_id = checkpoint_id
        self.unknown = sorted(unknown)
        self.known = sorted(known)


class CheckpointStoreError(ComposeError):
    """A checkpoint store's database failed (unreachable, locked past its timeout, ...); cause in ``__cause__``."""


# ---------------------------------------------------------------------------------------------------------------
# Prompt templates


class PromptError(ComposeError, ValueError):
    """A chat template (``compose.prompt``) cannot produce its messages."""


class TemplateFormatError(PromptError):
    """A template's content cannot be rendered with the variables: a syntax error (a lone ``{`` in an f-string,
    an unclosed Jinja2 tag), a placeholder naming no variable, a field or format spec the value does not have.
    Raised when the template is built for what the text alone shows, else when it is formatted.

    Attributes:
        problem: what is wrong, without the location.
        key: the variable (or field) at fault, when there is one.
        index: the position of the template message among the chat template's templates, when known.
    """

    def __init__(self, problem: str, *, key: str | None = None, index: int | None = None) -> None:
        where = f"chat template message {index}: " if index is not None else ""
        super().__init__(f"{where}{problem}")
        self.problem = problem
        self.key = key
        self.index = index

    def at(self, index: int) -> TemplateFormatError:
        """The same error, located at template message ``index``."""
        located = type(self)(self.problem, key=self.key, index=index)
        located.__cause__ = self.__cause__
        return located


class TemplateSandboxError(TemplateFormatError):
    """A Jinja2 template tried what its sandbox forbids: ``{% include %}``, ``{% import %}``, ``{% from %}`` or
    ``{% extends %}`` (a template must not read files) or an unsafe attribute such as ``__class__`` (it must not
    run code)."""


class MessagesPlaceholderError(PromptError):
    """A ``MessagesPlaceholder``'s variable is missing (and the placeholder is not optional) or its value is not
    a list of ``Message``.

    Attributes:
        key: the placeholder's variable.
    """

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


# ---------------------------------------------------------------------------------------------------------------
# Interrupts


# ---------------------------------------------------------------------------------------------------------------
# Retrieval components


class LoaderError(ComposeError):
    """Raised by a loader that cannot read a source: missing, not a file, not decodable, a bad URI."""


class PathOutsideRootError(LoaderError, PermissionError):
    """Raised by a FileLoader for a source outside its root: an absolute path, a ``..`` component, or a symlink
    that resolves outside the root. ``.uri`` is the source asked for."""

    def __init__(self, uri: str, root: str) -> None:
        super().__init__(f"source {uri!r} is outside the loader's root directory {root!r}")
        self.uri = uri
        self.root = root


class GraphInterrupt(Exception):
    """A run paused at an interrupt. Not a failure: never caught as an error by pyeino.

    ``info`` is the ``InterruptInfo``; ``checkpoint_id`` the id the run was checkpointed under (or None).
    """

    def __init__(self, info: Any, checkpoint_id: str | None = None) -> None:
        super().__init__("graph interrupted")
        self.info = info
        self.checkpoint_id = checkpoint_id


# ---------------------------------------------------------------------------------------------------------------
# Cassettes (compose.testing.cassette)


class CassetteError(ComposeError):
    """A record/replay cassette cannot be used: not open, unreadable, or asked for something it cannot give."""


class CassetteNotFoundError(CassetteError, FileNotFoundError):
    """A cassette in replay-only mode (``"none"``) has no file to replay."""


class CassetteMismatchError(CassetteError, LookupError):
    """A call made during replay matches no recorded call.

    Attributes:
        kind: ``"model"`` or ``"tool"``.
        field: the path of the first field where the call differs from the nearest recorded one
            (``"messages[2].content"``, ``"options.temperature"``, ``"arguments"``), or None when nothing of that
            kind was recorded.
        request: the call's request, as it would be recorded.
        nearest: the nearest recorded request (None when there is none).
        diff: a unified diff from the nearest recorded request to this one (``""`` when there is none).
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        field: str | None,
        request: Any,
        nearest: Any,
        diff: str,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.field = field
        self.request = request
        self.nearest = nearest
        self.diff = diff
