"""The exception hierarchy of pyeino's agent kit: the errors an agent run ends with (each arrives as the run's one
error event, ``AgentEvent.error``) and those of its features.

Each area's classes live in a private module of this package (``_base``, ``_run``, ``_models``, ``_agents``,
``_filesystem``, ``_middlewares``, ``_serve``, ``_durable``, ``_evals``, ``_sessions``); import them from
``adk.errors`` (the root ``adk`` keeps the older names importable)::

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
        ├── InstructionFormatError      an instruction's placeholders cannot be filled from the session values
        │                               (also ValueError); ``.agent_name``, ``.key``
        ├── TransferError               a transfer named an agent that is neither a sub-agent nor the parent
        ├── PlanExecuteError            a planner or replanner answered neither a plan nor a response
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
    LookupError
    └── ThreadNotFoundError             the server keeps no thread of that id the asking principal may use (404)
    ValueError
    └── ResumePayloadError              a resume entry's payload does not fit its interrupt; ``.field`` (422)
"""

# ruff: noqa: F403 (each module's __all__ is its part of the tree; this __all__ is theirs together)
from adk.errors import _agents, _base, _durable, _evals, _filesystem, _middlewares, _models, _run, _serve, _sessions
from adk.errors._agents import *
from adk.errors._base import *
from adk.errors._durable import *
from adk.errors._evals import *
from adk.errors._filesystem import *
from adk.errors._middlewares import *
from adk.errors._models import *
from adk.errors._run import *
from adk.errors._serve import *
from adk.errors._sessions import *
from compose.errors import CheckpointNotFoundError

__all__ = ["CheckpointNotFoundError"]
__all__ += _agents.__all__
__all__ += _base.__all__
__all__ += _durable.__all__
__all__ += _evals.__all__
__all__ += _filesystem.__all__
__all__ += _middlewares.__all__
__all__ += _models.__all__
__all__ += _run.__all__
__all__ += _serve.__all__
__all__ += _sessions.__all__
