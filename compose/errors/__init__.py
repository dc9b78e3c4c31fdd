"""The exception hierarchy of pyeino's ``compose`` package.

Every error names what is at fault (node, edge, tool, field or type). Interrupts are not failures and do not
derive from :class:`ComposeError`. Each area's classes live in a private module of this package (``_build``,
``_run``, ``_streams``, ``_tools``, ``_models``, ``_checkpoints``, ``_prompts``, ``_loaders``, ``_cassettes``,
``_interrupts``); import them from ``compose.errors`` (``compose`` keeps the older names importable)::

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
    │   │   ├── CheckpointClaimedError    another run is resuming it: its holder and how old its claim is
    │   │   ├── CheckpointExistsError     a fork names a checkpoint id that already has a history or a checkpoint
    │   │   └── InterruptNotFoundError(LookupError)   resume data names an interrupt id the checkpoint does not have
    │   ├── CheckpointStoreError          a checkpoint store's database failed; cause in ``__cause__``
    │   ├── PromptError(ValueError)       a chat template cannot produce its messages (compose.prompt)
    │   │   ├── TemplateFormatError       a message's content cannot be rendered (syntax, missing variable, ...)
    │   │   │   └── TemplateSandboxError  a Jinja2 template tried to read a file or reach an unsafe attribute
    │   │   └── MessagesPlaceholderError  a placeholder's variable is missing or is not a list of messages
    │   ├── LoaderError                   a document loader could not read its source; cause in ``__cause__``
    │   │   └── PathOutsideRootError(PermissionError)  a FileLoader source escapes its root directory
    │   ├── CassetteError                 a record/replay cassette cannot be used (compose.testing.cassette)
    │   │   ├── CassetteNotFoundError(FileNotFoundError)  replay-only mode and no cassette file
    │   │   └── CassetteMismatchError(LookupError)  a replayed call matches no recorded one; ``.field`` differs
    │   └── SourceEOF                     an error item of ``merge_named_streams``: source ``.name`` ended (not the end)
    ├── StreamEnd(EOFError)               the end of a stream; raised by ``recv()`` again on every later call
    └── GraphInterrupt                    a run paused at an interrupt (not a failure); ``.info``, ``.checkpoint_id``
"""

# ruff: noqa: F403 (each module's __all__ is its part of the tree; this __all__ is theirs together)
from compose.errors import (
    _base,
    _build,
    _cassettes,
    _checkpoints,
    _interrupts,
    _loaders,
    _models,
    _prompts,
    _run,
    _streams,
    _tools,
)
from compose.errors._base import *
from compose.errors._build import *
from compose.errors._cassettes import *
from compose.errors._checkpoints import *
from compose.errors._interrupts import *
from compose.errors._loaders import *
from compose.errors._models import *
from compose.errors._prompts import *
from compose.errors._run import *
from compose.errors._streams import *
from compose.errors._tools import *

__all__ = []
__all__ += _base.__all__
__all__ += _build.__all__
__all__ += _cassettes.__all__
__all__ += _checkpoints.__all__
__all__ += _interrupts.__all__
__all__ += _loaders.__all__
__all__ += _models.__all__
__all__ += _prompts.__all__
__all__ += _run.__all__
__all__ += _streams.__all__
__all__ += _tools.__all__
