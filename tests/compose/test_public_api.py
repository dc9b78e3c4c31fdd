"""The public API: ``__all__`` lists exactly the public names, sorted, and each imports."""

from __future__ import annotations

import ast
import importlib
import tomllib
import types
from pathlib import Path

import pytest


def _public_packages() -> list[str]:
    """The packages pyproject ships whose names have no private part (new ones are checked as they come)."""
    with (Path(__file__).resolve().parents[2] / "pyproject.toml").open("rb") as f:
        packages: list[str] = tomllib.load(f)["tool"]["setuptools"]["packages"]
    public = [p for p in packages if not any(part.startswith("_") for part in p.split(".")) and p not in _NOT_YET]
    return [*public, "compose.lowlevel"]


# these import helpers under public names (TYPE_CHECKING, lazy_names, one_chunk, ...) that __all__ rightly leaves out
_NOT_YET = {"compose.stream", "adk.agents", "adk.serve"}

# a root lists what a user reaches for first; the names of these namespaces it keeps importable without listing them
_NAMESPACES = {"compose": ("compose.errors", "compose.components", "compose.testing"), "adk": ("adk.errors",)}

# every name the roots listed before issue #35 trimmed them: each still imports from its root
_OLD_ROOT_NAMES = {
    "compose": """
        END SKIP START AudioPart BaseTool BranchError BranchInfo CallbackHandler Chain ChainBranch ChainNodeOptions
        ChatModel ChatModelError ChatModelOptions ChatTemplate CheckPointStore CheckpointClaimedError CheckpointError
        CheckpointExistsError CheckpointNotFoundError CheckpointStoreError CompileCallback ComposeError ConcatError
        ContentPart Document DocumentTransformer Embedder EmptyStreamError ExternalInterrupt FanInMergeConfig
        FanInMergeError FieldMapping FieldMappingError FieldMappingTypeError FileLoader FilePart FormatType
        FunctionCall Graph GraphBranch GraphBuildError GraphCompileCallback GraphCompiledError GraphInfo
        GraphInterrupt GraphMultiBranch GraphRunError HashingEmbedder ImageDetail ImagePart InMemoryCheckPointStore
        InMemoryVectorIndex Indexer IndexerOptions InterruptCtx InterruptInfo InterruptNotFoundError InterruptSignal
        InvalidGraphError InvokableTool JSONActionChatModel Lambda Loader LoaderError MCPServerError MCPToolError
        MaxStepsExceededError Message MessagesPlaceholder MessagesPlaceholderError MessagesTemplate ModelAuthError
        ModelBadRequestError ModelRateLimitError ModelResponseError ModelServerError ModelTimeoutError NodeInfo
        NodeOptions NodeOutputTypeError NodeRunError OTelHandler OpenAIChatModel Parallel PathOutsideRootError
        PostgresCheckPointStore PromptError ResponseFormatUnsupportedError ResponseMeta ResumeContext Retriever
        RetrieverOptions Role RunInfo Runnable RuntimeTypeError SQLiteCheckPointStore ScriptExhaustedError
        ScriptedChatModel Source SourceEOF StateError StateSnapshot StateUpdateError StreamEnd StreamError
        StreamGraphBranch StreamGraphMultiBranch StreamMode StreamObserver StreamPart StreamReader StreamToolOutput
        StreamWriter StreamableTool TemplateFormatError TemplateSandboxError TextPart TextSplitter ToolArgumentsError
        ToolArgumentsHandlerError ToolCall ToolError ToolExecutionError ToolInfo ToolInput ToolInputError
        ToolMiddleware ToolNotFoundError ToolOutput ToolTimeoutError ToolsNode TriggerMode TypeMismatchError Usage
        VideoPart Workflow WorkflowNode append_global_callbacks approx_part_tokens assistant_message
        clear_global_callbacks concat concat_items concat_message_lists concat_messages from_field from_field_path
        get_interrupt_state get_resume_context get_resume_data get_stream_writer get_tool_call_id interrupt
        map_field_paths map_fields merge_named_streams merge_streams observe_stream pipe process_state prune
        register_concat register_values_merge stateful_interrupt system_message to_field to_field_path tool
        tool_errors_as_results tool_message user_message
    """.split(),  # noqa: SIM905 (frozen lists, read as words)
    "adk": """
        TELEMETRY_EVENT_NAMES TRANSFER_TO_AGENT_TOOL_DESCRIPTION TRANSFER_TO_AGENT_TOOL_NAME Agent AgentAction
        AgentCancelledError AgentCheckpoint AgentContext AgentError AgentEvent AgentInput AgentInterruptInfo
        AgentMiddleware AgentOutput AgentRun AgentTimeoutError AgentTool ApprovalDecision ApprovalMiddleware
        ApprovalPredicate ApprovalRequest BackendFileNotFoundError BreakLoopAction CancelHandle CancelMode
        CancelOutcome ChatModelAgent ChatModelAgentContext ChatModelAgentState ChatModelHook CheckpointNotFoundError
        EditError ExceedMaxIterationsError FailoverContext FailoverError FileTooLargeError FilesystemError FlowAgent
        GrepPatternError HistoryEntry HistoryLimit HistoryRewriter InMemorySessionStore InstructionFormatError
        JSONActionChatModel JSONLTraceWriter LoopAgent MessageVariant ModelFailoverConfig ModelRetryConfig
        ModelWrapper ParallelAgent PatchToolCallsMiddleware PostgresSessionStore ResumableAgent ResumeInfo
        RetryExhaustedError RunSession Runner SQLiteSessionStore SearchLimitError SequentialAgent Session
        SessionBusyError SessionError SessionLeaseLostError SessionRun SessionStore SessionStoreError SkillError
        StallDetectedError State StreamCancelledError StructuredOutputError SummarizationMiddleware Summarized
        TaskListError TelemetryEvent TelemetryHandler TokenBudgetExceededError ToolExecutionMode
        ToolResultReductionMiddleware ToolsConfig TransferError TransferToAgentAction Turn UnsafePathError
        WillRetryError add_session_value add_session_values agent_with_deterministic_transfer_to agent_with_options
        approval_middleware approximate_tokens default_backoff default_history_rewriter default_is_retryable exit_tool
        format_instruction gen_transfer_messages get_session_value get_session_values rewrite_message send_event
        send_tool_gen_action set_sub_agents transfer_instruction
    """.split(),  # noqa: SIM905 (frozen lists, read as words)
}


@pytest.mark.parametrize("package", _public_packages())
def test_all_is_exact_and_importable(package: str) -> None:
    mod = importlib.import_module(package)
    exported = list(mod.__all__)
    # dir() lists the names a package imports on first use (compose._lazy) as well as those it has imported
    public = {
        name
        for name in dir(mod)
        if not name.startswith("_")
        and not isinstance(getattr(mod, name), types.ModuleType)
        and name != "annotations"
    }
    namespaced = {name for ns in _NAMESPACES.get(package, ()) for name in importlib.import_module(ns).__all__}
    assert set(exported) <= public
    assert public - set(exported) <= namespaced, sorted(public - set(exported) - namespaced)
    assert len(exported) == len(set(exported))
    for name in exported:
        assert getattr(mod, name) is not None
        exec(f"from {package} import {name}", {})


def test_roots_list_no_error_retrieval_or_testing_name_and_keep_every_old_name() -> None:
    import adk
    import compose
    from compose.errors import GraphInterrupt

    for root in (compose, adk):
        exported = [getattr(root, name) for name in root.__all__]
        # errors live in .errors; interrupts are not failures
        errors = [v for v in exported if isinstance(v, type) and issubclass(v, Exception)]
        assert [e for e in errors if not issubclass(e, GraphInterrupt)] == []
    assert not {*compose.components.__all__, "ScriptedChatModel"} & set(compose.__all__)
    for package, names in _OLD_ROOT_NAMES.items():
        for name in names:
            exec(f"from {package} import {name}", {})
    assert compose.ToolError is compose.errors.ToolError and adk.AgentError is adk.errors.AgentError


def test_adk_imports_nothing_private_from_compose() -> None:
    """adk reaches compose through public names only: compose.lowlevel is the home of what it needs beyond the
    user's API (compose._engine, which the run driver is moving out of adk's reach, excepted)."""
    root = Path(__file__).resolve().parents[2]
    private = []
    for path in sorted((root / "adk").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("compose"):
                names = [node.module or "", *(a.name for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("compose")]
            else:
                continue
            if any(part.startswith("_") for name in names for part in name.split(".")) and not names[0].startswith(
                "compose._engine"
            ):
                private.append(f"{path.relative_to(root)}:{node.lineno}")
    assert private == []


def test_every_imported_distribution_is_declared() -> None:
    """Each third-party module compose and adk import (optional ones too) comes from a distribution that
    pyproject declares, in the core dependencies or an extra."""
    import re
    import sys
    from importlib.metadata import packages_distributions

    root = Path(__file__).resolve().parents[2]
    with (root / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    extras = project["optional-dependencies"].values()
    requirements = [*project["dependencies"], *(r for extra in extras for r in extra)]
    declared = {re.sub(r"[-_.]+", "-", re.split(r"[\[<>=;! ]", r)[0]).lower() for r in requirements}
    modules = set()
    for path in [*(root / "compose").rglob("*.py"), *(root / "adk").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                modules.update(a.name.split(".")[0] for a in node.names)
    third_party = modules - set(sys.stdlib_module_names) - {"compose", "adk", "__future__"}
    distributions = packages_distributions()
    undeclared = {
        m: distributions.get(m)
        for m in third_party
        if not {re.sub(r"[-_.]+", "-", d).lower() for d in distributions.get(m, [m])} & declared
    }
    assert undeclared == {}


def test_importing_compose_does_not_import_test_dependencies() -> None:
    import subprocess
    import sys

    code = (
        "import compose, adk, sys; "
        "print(sorted(m for m in ('hypothesis', 'compose.testing', 'pytest') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cold_start_imports_no_optional_dependencies() -> None:
    """Importing compose and adk and building an agent on the scripted model imports neither the openai SDK nor
    networkx (compile time only) nor psycopg; the names that import them on first use still resolve."""
    import subprocess
    import sys

    code = """
import sys
import compose, adk
from compose import ScriptedChatModel, tool
from adk import ChatModelAgent, Runner

async def add_one(x: int) -> int:
    '''Add one.

    Args:
        x: the number.
    '''
    return x + 1

Runner(ChatModelAgent("a", "an agent", model=ScriptedChatModel(["hi"]), tools=[tool(add_one)]))
heavy = ("openai", "networkx", "psycopg", "psycopg_pool", "sqlite3", "compose.models.json_action", "jinja2")
print(sorted(m for m in heavy if m in sys.modules))

import compose.models
from compose.models.json_action import JSONActionChatModel
from compose.models.openai_model import OpenAIChatModel, translate_openai_error
assert compose.OpenAIChatModel is compose.models.OpenAIChatModel is OpenAIChatModel
assert compose.JSONActionChatModel is adk.JSONActionChatModel is JSONActionChatModel
assert compose.models.translate_openai_error is translate_openai_error
assert "OpenAIChatModel" in dir(compose) and "JSONActionChatModel" in dir(adk)
print("openai" in sys.modules)
try:
    compose.NoSuchName
except AttributeError as e:
    print(e)
namespace = {}
exec("from compose import *; from adk import *; from compose.models import *", namespace)
assert {*compose.__all__, *adk.__all__, *compose.models.__all__} <= namespace.keys()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]", "True", "module 'compose' has no attribute 'NoSuchName'"]


def test_compile_imports_networkx_and_still_checks_the_graph() -> None:
    import subprocess
    import sys

    code = """
import sys
import compose
from compose import END, START, Graph, InvalidGraphError

async def step(x: str) -> str:
    return x

g = Graph(input_type=str, output_type=str)
g.add_lambda_node("a", step)
g.add_lambda_node("b", step)
g.add_edge(START, "a")
g.add_edge("a", "b")
g.add_edge("b", "a")
g.add_edge("b", END)
print("networkx" in sys.modules)
try:
    g.compile(trigger_mode="all_predecessor")
except InvalidGraphError as e:
    print(e)
print("networkx" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["False", "DAG is invalid, has loop: a -> b -> a", "True"]


def test_a_plain_agent_imports_no_deferred_module() -> None:
    """Cold start: importing compose and adk and building an agent leaves the openai SDK, OpenTelemetry and the
    built-in middlewares (filesystem, skills, summarization...) unimported until first use."""
    import subprocess
    import sys

    code = (
        "import sys, compose, adk\n"
        "adk.Runner(adk.ChatModelAgent('c', 'd', model=compose.ScriptedChatModel(['x'])))\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    deferred = {
        "openai",
        "opentelemetry",
        "compose.models.openai_model",
        "adk.middlewares.filesystem",
        "adk.middlewares.agentsmd",
        "adk.middlewares.skill",
        "adk.middlewares.plantask",
        "adk.middlewares.summarization",
        "adk.middlewares.reduction",
        "adk.middlewares.toolsearch",
    }
    assert not deferred & loaded
    import adk

    assert adk.SummarizationMiddleware.__module__ == "adk.middlewares.summarization"  # still reachable
