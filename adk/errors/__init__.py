"""The errors an agent run ends with (each arrives as the run's one error event, ``AgentEvent.error``).

::

    ComposeError (compose.errors)
    └── AgentError                      base of the agent kit's own failures
        ├── ExceedMaxIterationsError    the model was about to be called more than ``max_iterations`` times
        ├── TokenBudgetExceededError    the run's token usage reached ``max_budget_tokens``
        ├── StallDetectedError          the same tool was called ``stall_window`` times in a row
        ├── AgentTimeoutError           the run took longer than ``timeout`` (also a ``TimeoutError``)
        ├── AgentCancelledError         ``run.cancel()`` stopped the run (``adk.cancel``); ``.interrupt_contexts``,
        │                               ``.checkpoint_id`` (resume it there), ``.mode``, ``.escalated``
        ├── StreamCancelledError        ends an event stream an immediate cancel cut off
        ├── RetryExhaustedError         every model retry failed; ``.last_error``, ``.total_retries``
        ├── StructuredOutputError       no answer matched the agent's ``output_type`` within its retries; ``.raw``
        ├── WillRetryError              ends the event stream of a failed model attempt that will be retried
        ├── TransferError               a transfer named an agent that is neither a sub-agent nor the parent
        ├── FailoverError               model failover could not pick a next model (``ModelFailoverConfig``)
        ├── FilesystemError             a backend (``adk.middlewares.filesystem``) refused or failed an operation
        │   ├── UnsafePathError         a path escapes the root, holds a NUL byte, is too long or a symlink
        │   │                           points out of the root (also ValueError); ``.path``, ``.problem``
        │   ├── BackendFileNotFoundError  no file at that path (also FileNotFoundError)
        │   ├── FileTooLargeError       a file or a write is over the backend's size bound; ``.size``, ``.limit``
        │   ├── EditError               ``old_string`` empty, missing or not unique, or the file is not UTF-8
        │   │                           (also ValueError)
        │   ├── GrepPatternError        a grep regex or a glob pattern does not compile or is too big (also
        │   │                           ValueError)
        │   └── SearchLimitError        a glob or grep ran over the backend's time or size bound; ``.operation``,
        │                               ``.pattern``
        ├── SkillError                  a skill (``SKILL.md``) is malformed or unknown; ``.skill``, ``.path``
        ├── TaskListError               a plantask tool (``TaskCreate`` ...) refused its call (also ValueError)
        ├── ServeError                  an AG-UI request the server (``adk.serve``) cannot run
        │   ├── InterruptPendingError   a run on a thread with open interrupts does not answer them all
        │   └── RunNotFoundError        a run's parentRunId names no run of its thread
        ├── RemoteAgentError            a remote A2A agent (``RemoteA2AAgent``) failed, refused or was unreachable;
        │                               ``.url``, ``.task_id``, ``.state``
        ├── DurableError                a durable run's failure (``adk.durable``, extra ``dbos``)
        │   ├── DurableBackendError     ``adk.durable`` called under trio (DBOS is asyncio-only; also RuntimeError)
        │   ├── DurableSerializationError  a value is not JSON, or a pickled row was refused (also TypeError)
        │   ├── DurableStepError        a step's failure replayed from the system database
        │   ├── DurableRunError         ``DurableHandle.result()`` of a run that failed
        │   └── DurableTimeoutError     ``DurableHandle.result(timeout=...)`` ran out (also TimeoutError)
        ├── DatasetError                an evaluation dataset (``adk.evals``) is invalid: names the file, case,
        │                               evaluator or field (also a ValueError)
        └── SessionError                a conversation (``adk.sessions``) cannot be run, read or stored
            ├── SessionBusyError        another run on the session is in flight; ``.session_id``, ``.holder``
            ├── SessionLeaseLostError   the run's lease on its session was lost (taken after expiry, or the
            │                           session was deleted): nothing was appended
            └── SessionStoreError       a session store's database failed; cause in ``__cause__``
    └── CheckpointError (compose.errors, also a ValueError)
        └── CheckpointNotFoundError     ``runner.resume`` was given an id with no checkpoint (``reason="not_found"``;
                                        compose's class, re-exported here)
"""

from __future__ import annotations

from typing import Any

from compose.errors import CheckpointNotFoundError, ComposeError

__all__ = [
    "AgentCancelledError",
    "AgentError",
    "AgentTimeoutError",
    "BackendFileNotFoundError",
    "CheckpointNotFoundError",
    "DatasetError",
    "DurableBackendError",
    "DurableError",
    "DurableRunError",
    "DurableSerializationError",
    "DurableStepError",
    "DurableTimeoutError",
    "EditError",
    "ExceedMaxIterationsError",
    "FailoverError",
    "FileTooLargeError",
    "FilesystemError",
    "GrepPatternError",
    "InterruptPendingError",
    "RemoteAgentError",
    "RetryExhaustedError",
    "RunNotFoundError",
    "SearchLimitError",
    "ServeError",
    "SessionBusyError",
    "SessionError",
    "SessionLeaseLostError",
    "SessionStoreError",
    "SkillError",
    "StallDetectedError",
    "StreamCancelledError",
    "StructuredOutputError",
    "TaskListError",
    "TokenBudgetExceededError",
    "TransferError",
    "UnsafePathError",
    "WillRetryError",
]


class AgentError(ComposeError):
    """Base of the agent kit's failures; ``reason`` is the run's termination reason it stands for."""

    reason = "error"


class ExceedMaxIterationsError(AgentError):
    """Raised before a model call when the run already made ``max_iterations`` model calls (Eino's
    ``ErrExceedMaxIterations``)."""

    reason = "max_iterations"

    def __init__(self, max_iterations: int) -> None:
        super().__init__(f"exceeds max iterations ({max_iterations} model calls)")
        self.max_iterations = max_iterations


class TokenBudgetExceededError(AgentError):
    """Raised before a model call when the run's total token usage has reached ``max_budget_tokens``."""

    reason = "token_budget"

    def __init__(self, used_tokens: int, max_budget_tokens: int) -> None:
        super().__init__(f"token budget exceeded: {used_tokens} tokens used, budget {max_budget_tokens}")
        self.used_tokens = used_tokens
        self.max_budget_tokens = max_budget_tokens


class StallDetectedError(AgentError):
    """Raised before the next model call when the last ``window`` tool calls all called ``tool_name``."""

    reason = "stall"

    def __init__(self, tool_name: str, window: int) -> None:
        super().__init__(f"stall detected: tool '{tool_name}' was called {window} times in a row")
        self.tool_name = tool_name
        self.window = window


class AgentTimeoutError(AgentError, TimeoutError):
    """Raised when the run took longer than the agent's ``timeout`` (seconds)."""

    reason = "timeout"

    def __init__(self, timeout: float) -> None:
        super().__init__(f"agent run timed out after {timeout:g}s")
        self.timeout = timeout


class AgentCancelledError(AgentError):
    """The run was cancelled by ``run.cancel()`` (Eino's ``CancelError``; ``adk.cancel``): its last event's error.

    Attributes:
        mode: the cancel modes in force when it took effect (``{"immediate"}`` after an escalation).
        escalated: a safe-point cancel was escalated to immediate (by a later call, or its ``timeout``).
        timed_out: the escalation was the timeout's (the safe point was not reached in time).
        interrupt_contexts: where the run stopped (an interrupt's contexts: ids and addresses).
        checkpoint_id: the id the run was saved under (``runner.resume(checkpoint_id)`` continues it), or None
            when the run has no checkpoint store or id.
    """

    reason = "cancelled"

    def __init__(
        self,
        mode: frozenset[str],
        *,
        escalated: bool = False,
        timed_out: bool = False,
        interrupt_contexts: list[Any] | None = None,
        checkpoint_id: str | None = None,
    ) -> None:
        modes = ", ".join(sorted(mode))
        super().__init__(f"agent cancelled: mode={modes}, escalated={escalated}")
        self.mode = mode
        self.escalated = escalated
        self.timed_out = timed_out
        self.interrupt_contexts = list(interrupt_contexts or [])
        self.checkpoint_id = checkpoint_id


class StreamCancelledError(AgentError):
    """Ends an event's message stream that an immediate cancel cut off (Eino's ``ErrStreamCanceled``); the model
    call runs again when the run is resumed."""

    reason = "cancelled"

    def __init__(self) -> None:
        super().__init__("stream cancelled")


class RetryExhaustedError(AgentError):
    """Every attempt of a model call failed with a retryable error ("exceeds max retries")."""

    reason = "retry_exhausted"

    def __init__(self, last_error: BaseException, total_retries: int) -> None:
        super().__init__(f"exceeds max retries ({total_retries} retries), last error: {last_error}")
        self.last_error = last_error
        self.total_retries = total_retries


class WillRetryError(AgentError):
    """The last item of a failed model attempt's event stream when the call will be retried.

    ``err_str`` is the failure's text, ``retry_attempt`` the attempt that failed (0-based); the original
    exception is ``__cause__``.
    """

    reason = "will_retry"

    def __init__(self, err_str: str, retry_attempt: int) -> None:
        super().__init__(f"model attempt {retry_attempt} failed and will be retried: {err_str}")
        self.err_str = err_str
        self.retry_attempt = retry_attempt


class TransferError(AgentError):
    """A transfer named an agent that is neither a sub-agent nor the parent of the agent transferring (Eino's
    message); ``.dest`` and ``.source`` name both."""

    def __init__(self, dest: str, source: str) -> None:
        super().__init__(f"transfer failed: agent '{dest}' not found when transferring from '{source}'")
        self.dest = dest
        self.source = source


class ServeError(AgentError):
    """An AG-UI request the server (``adk.serve``) cannot run; sent to the client as ``RUN_ERROR`` with the
    class name as ``code``."""

    reason = "serve"


class InterruptPendingError(ServeError):
    """A run on a thread whose last run paused does not answer every open interrupt in its ``resume`` entries
    (AG-UI's interrupts: pending interrupts block new input, and a resume addresses all of them);
    ``.thread_id`` and ``.pending`` (the unanswered interrupt ids) say which."""

    def __init__(self, thread_id: str, pending: list[str]) -> None:
        super().__init__(
            f"thread {thread_id!r} has open interrupts {sorted(pending)}: send resume entries answering all of "
            "them (status 'resolved' with a payload, or 'cancelled')"
        )
        self.thread_id = thread_id
        self.pending = sorted(pending)


class RunNotFoundError(ServeError):
    """A ``RunAgentInput``'s ``parentRunId`` names no run of its thread that the server knows (AG-UI's branching:
    the parent is a prior run of the same thread); ``.thread_id`` and ``.run_id`` say which."""

    def __init__(self, thread_id: str, run_id: str, known: list[str]) -> None:
        shown = ", ".join(repr(r) for r in known[-10:]) or "none"
        super().__init__(f"thread {thread_id!r} has no run {run_id!r} to branch from (its runs: {shown})")
        self.thread_id = thread_id
        self.run_id = run_id


class RemoteAgentError(AgentError):
    """A remote A2A agent (``adk.agents.RemoteA2AAgent``) could not be reached, answered with an error, or
    ended its task ``failed``/``rejected``/``canceled``; ``.url`` names the server, ``.task_id`` and ``.state``
    the remote task (when there was one); the client's exception, if any, is the ``__cause__``."""

    reason = "remote"

    def __init__(self, url: str, message: str, *, task_id: str | None = None, state: str | None = None) -> None:
        where = f" (task {task_id!r}, {state})" if task_id and state else f" (task {task_id!r})" if task_id else ""
        super().__init__(f"remote A2A agent at {url}{where}: {message}")
        self.url = url
        self.task_id = task_id
        self.state = state


class DurableError(AgentError):
    """Base of the failures of durable runs (``adk.durable``, extra ``dbos``)."""

    reason = "durable"


class DurableBackendError(DurableError, RuntimeError):
    """A durable-run API was called under an async backend DBOS does not support (DBOS is asyncio-only; under
    trio every other part of pyeino works, ``adk.durable`` raises this)."""

    def __init__(self, backend: str) -> None:
        super().__init__(
            f"adk.durable runs on DBOS, which is asyncio-only: it cannot run under {backend} (run this part of "
            "the program with anyio.run(..., backend='asyncio'))"
        )
        self.backend = backend


class DurableSerializationError(DurableError, TypeError):
    """A value bound for DBOS's system database is not JSON, or a row read from it is not pyeino's JSON (a
    pickled row is refused, never unpickled). ``what`` names the value or row."""

    def __init__(self, what: str, detail: str) -> None:
        super().__init__(f"{what}: {detail}")
        self.what = what
        self.detail = detail


class DurableStepError(DurableError):
    """A step's failure as recorded in DBOS's system database and replayed from it: ``error_type`` is the
    original exception's class name, ``message`` its text."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message


class DurableRunError(DurableError):
    """A durable run ended with an error (``DurableHandle.result()``): ``run_id``, the error's class name
    ``error_type`` and text ``message``."""

    def __init__(self, run_id: str, error_type: str, message: str) -> None:
        super().__init__(f"durable run {run_id!r} failed: {error_type}: {message}")
        self.run_id = run_id
        self.error_type = error_type
        self.message = message


class DurableTimeoutError(DurableError, TimeoutError):
    """``DurableHandle.result(timeout=...)`` ran out before the run ended: ``run_id``, its DBOS ``status`` then
    (``"ENQUEUED"``: no worker has taken it yet, see ``DurableClient.workers()``) and the ``timeout``. The run
    goes on; wait again or cancel it."""

    def __init__(self, run_id: str, status: str, timeout: float) -> None:
        hint = " (no worker has dequeued it: is one running? DurableClient.workers() lists them)"
        super().__init__(
            f"durable run {run_id!r} did not end within {timeout}s; its status is {status}"
            + (hint if status == "ENQUEUED" else "")
        )
        self.run_id = run_id
        self.status = status
        self.timeout = timeout


class StructuredOutputError(AgentError):
    """No answer matched the agent's ``output_type``: the first answer and ``output_retries`` more were invalid.

    ``raw`` is the last answer as the model gave it (the text, or the ``final_answer`` tool's arguments),
    ``error`` why it was rejected, ``attempts`` how many answers were checked.
    """

    reason = "structured_output"

    def __init__(self, output_type: str, raw: str, error: str, attempts: int) -> None:
        super().__init__(
            f"no valid {output_type} after {attempts} answers; last error: {error}; last answer: {raw[:200]!r}"
        )
        self.output_type = output_type
        self.raw = raw
        self.error = error
        self.attempts = attempts


class DatasetError(AgentError, ValueError):
    """An evaluation dataset (``adk.evals``) cannot be built or loaded: the message names the file, the case, the
    evaluator or the field at fault."""


class SessionError(AgentError):
    """A conversation kept in a session store (``adk.sessions``) cannot be run, read or stored."""

    reason = "session"


class SessionBusyError(SessionError):
    """A run was started on a session that has a run in flight (its lease is held), and did not wait for it
    (``Runner(session_wait=...)``) or waited in vain; raised by the run's first ``__anext__``, nothing ran.

    ``holder`` describes the lease holder (which process, until when) when the store knows it.
    """

    def __init__(self, session_id: str, holder: str = "", waited: float = 0.0) -> None:
        held = f" (held by {holder})" if holder else ""
        wait = f" after waiting {waited:g}s" if waited else ""
        super().__init__(f"session {session_id!r} has a run in flight{held}: not started{wait}")
        self.session_id = session_id
        self.holder = holder


class SessionLeaseLostError(SessionError):
    """A run's lease on its session was lost before it could append (it expired and another run took it, or the
    session was deleted meanwhile): nothing of the run was appended."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id!r}: this run's lease was lost (expired and taken by another run, or the session "
            "was deleted): its messages were not appended"
        )
        self.session_id = session_id


class SessionStoreError(SessionError):
    """A session store's database failed (unreachable, locked past its timeout, ...); cause in ``__cause__``."""


class FailoverError(AgentError):
    """Model failover (``ModelFailoverConfig``) could not pick the next model: ``get_failover_model`` returned
    no model at ``attempt`` (Eino: "failover GetFailoverModel returned nil model at attempt N")."""

    reason = "failover"

    def __init__(self, attempt: int) -> None:
        super().__init__(f"failover GetFailoverModel returned nil model at attempt {attempt}")
        self.attempt = attempt


class FilesystemError(AgentError):
    """A filesystem backend (``adk.middlewares.filesystem``) refused or failed an operation on ``path`` (a
    virtual path, never a host path)."""

    reason = "filesystem"

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class UnsafePathError(FilesystemError, ValueError):
    """A path the backend refuses: ``..`` climbing above the root, a NUL byte, too long, or (``LocalBackend``)
    resolving through a symlink to outside the root. ``problem`` says which."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"unsafe path {path!r}: {problem}", path)
        self.problem = problem


class BackendFileNotFoundError(FilesystemError, FileNotFoundError):
    """No file at the path (Eino's "file not found: /path")."""

    def __init__(self, path: str) -> None:
        super().__init__(f"file not found: {path}", path)


class FileTooLargeError(FilesystemError):
    """A file (or a write's content) is over the backend's size bound: ``size`` and ``limit`` in bytes."""

    def __init__(self, path: str, size: int, limit: int) -> None:
        super().__init__(f"file {path} is too large: {size} bytes, the limit is {limit} bytes", path)
        self.size = size
        self.limit = limit


class EditError(FilesystemError, ValueError):
    """An ``edit`` that cannot apply: ``old_string`` empty, not found, or found more than once without
    ``replace_all`` (Eino's messages), or a file that is not UTF-8 text (rewriting it would lose its bytes)."""


class GrepPatternError(FilesystemError, ValueError):
    """A grep regular expression or a glob pattern that does not compile, or a glob too big to match."""


class SearchLimitError(FilesystemError):
    """A ``glob`` or ``grep`` stopped at one of its backend's bounds (``search_timeout`` seconds, or
    ``max_search_bytes`` of file contents to search): ``operation`` is ``"glob"`` or ``"grep"``, ``pattern`` the
    pattern, ``path`` the directory searched."""

    def __init__(self, operation: str, pattern: str, path: str, problem: str) -> None:
        shown = pattern if len(pattern) <= 100 else pattern[:100] + "..."
        super().__init__(
            f"{operation} {shown!r} in {path} stopped: {problem}; narrow the search (path, glob, type) or "
            "simplify the pattern",
            path,
        )
        self.operation = operation
        self.pattern = pattern


class SkillError(AgentError, ValueError):
    """A skill (``adk.middlewares.SkillMiddleware``) that is malformed (its ``SKILL.md`` front matter is not a
    safe YAML mapping with a name and a description, or names an unknown agent or model) or unknown.
    ``skill`` is its name (or directory), ``path`` its ``SKILL.md``."""

    reason = "skill"

    def __init__(self, message: str, *, skill: str = "", path: str = "") -> None:
        super().__init__(message)
        self.skill = skill
        self.path = path


class TaskListError(AgentError, ValueError):
    """A plantask tool (``TaskCreate``, ``TaskGet``, ``TaskUpdate``, ``TaskList``) refused its call: an invalid
    task id, a missing task, a cyclic dependency, a task file that is not a task (Eino's messages)."""

    reason = "task_list"
