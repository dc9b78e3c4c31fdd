"""A persistent task list (Eino's ``adk/middlewares/plantask``): the ``TaskCreate``, ``TaskGet``, ``TaskUpdate`` and
``TaskList`` tools, each task a JSON file ``<base_dir>/<id>.json`` in a filesystem backend.

Tasks have ``id``, ``subject``, ``description``, ``status`` (``pending``, ``in_progress``, ``completed``; setting
``deleted`` removes the task and its links), ``blocks`` / ``blockedBy`` (kept symmetric, cycles refused),
``activeForm``, ``owner`` and ``metadata``. Ids grow from ``<base_dir>/.highwatermark``. When every task is
completed the list is cleared. Each tool answers ``{"result": "..."}`` with Eino's texts; the tools of one agent
run one at a time (a lock). Where pyeino differs: ``TaskList`` sorts by the number of the id (Eino sorts the id
strings, so ``10`` before ``2``).
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from adk.errors import BackendFileNotFoundError, TaskListError
from adk.middlewares import _plantask_prompts as prompts
from adk.middlewares.base import AgentMiddleware, ChatModelAgentContext
from adk.middlewares.filesystem import Backend
from compose.schema import ToolInfo
from compose.tools.arguments import Run, SchemaTool

__all__ = ["PlanTaskMiddleware", "Task"]

_ID = re.compile(r"^\d+$")
_HIGH_WATERMARK = ".highwatermark"
_ACTIVE_FORM = 'Present continuous form shown in spinner when in_progress (e.g., "Running tests")'


@dataclass
class Task:
    """One task, as its JSON file holds it (Eino's field names)."""

    id: str
    subject: str = ""
    description: str = ""
    status: str = "pending"
    blocks: list[str] = field(default_factory=list)
    blockedBy: list[str] = field(default_factory=list)
    activeForm: str = ""
    owner: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "id": self.id,
            "subject": self.subject,
            "description": self.description,
            "status": self.status,
            "blocks": self.blocks,
            "blockedBy": self.blockedBy,
        }
        if self.activeForm:
            data["activeForm"] = self.activeForm
        if self.owner:
            data["owner"] = self.owner
        if self.metadata:
            data["metadata"] = self.metadata
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @staticmethod
    def from_json(text: str, where: str) -> Task:
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError("not an object")
            return Task(
                id=str(data["id"]),
                subject=str(data.get("subject", "")),
                description=str(data.get("description", "")),
                status=str(data.get("status", "pending")),
                blocks=[str(x) for x in data.get("blocks") or []],
                blockedBy=[str(x) for x in data.get("blockedBy") or []],
                activeForm=str(data.get("activeForm", "")),
                owner=str(data.get("owner", "")),
                metadata=dict(data.get("metadata") or {}),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise TaskListError(f"{where}: not a task: {exc}") from exc


def _out(result: str) -> str:
    return json.dumps({"result": result}, ensure_ascii=False, separators=(",", ":"))


def _unique(items: list[str], more: list[str]) -> list[str]:
    out = list(items)
    for item in more:
        if item not in out:
            out.append(item)
    return out


def _reaches(tasks: dict[str, Task], start: str, goal: str, seen: set[str]) -> bool:
    if start == goal:
        return True
    if start in seen:
        return False
    seen.add(start)
    task = tasks.get(start)
    return task is not None and any(_reaches(tasks, b, goal, seen) for b in task.blocks)


def _cyclic(tasks: dict[str, Task], blocker: str, blocked: str) -> bool:
    return blocker == blocked or _reaches(tasks, blocked, blocker, set())


def _s(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _task_tool(
    name: str, description: str, props: dict[str, Any], required: list[str], fn: Run, lock: anyio.Lock
) -> SchemaTool:
    """One of the task tools; the tools of one agent share ``lock`` and so run one at a time."""

    async def run(args: dict[str, Any]) -> str:
        async with lock:
            return await fn(args)

    schema = {"type": "object", "properties": props, **({"required": required} if required else {})}
    return SchemaTool(ToolInfo(name=name, description=description, parameters=schema), run)


class PlanTaskMiddleware(AgentMiddleware):
    """Adds Eino's task-list tools over ``backend`` (see the module docstring).

    Args:
        backend: where the task files live.
        base_dir: their directory (required, e.g. ``/tasks``).

    Raises:
        ValueError: no ``base_dir``.
    """

    def __init__(self, backend: Backend, base_dir: str) -> None:
        if not base_dir:
            raise ValueError("baseDir is required")
        self.backend = backend
        self.base_dir = base_dir

    def __repr__(self) -> str:
        return f"PlanTaskMiddleware({self.backend!r}, {self.base_dir!r})"

    def _path(self, task_id: str) -> str:
        return posixpath.join(self.base_dir, f"{task_id}.json")

    async def _read(self, task_id: str, where: str) -> Task:
        try:
            text = await self.backend.read(self._path(task_id))
        except BackendFileNotFoundError as exc:
            raise TaskListError(f"{where}: {exc}") from exc
        return Task.from_json(text, where)

    async def _write(self, task: Task) -> None:
        await self.backend.write(self._path(task.id), task.to_json())

    async def _list(self) -> list[Task]:
        tasks: list[Task] = []
        for info in await self.backend.ls(self.base_dir):
            name = posixpath.basename(info.path)
            if info.is_dir or not name.endswith(".json") or not _ID.match(name[:-5]):
                continue
            where = f"TaskList parse task file {self._path(name[:-5])} failed"
            tasks.append(Task.from_json(await self.backend.read(self._path(name[:-5])), where))
        return sorted(tasks, key=lambda t: int(t.id))

    @staticmethod
    def _check_id(tool: str, task_id: Any, what: str = "task ID") -> str:
        if not isinstance(task_id, str) or not _ID.match(task_id):
            raise TaskListError(f"{tool} validate {what} failed, err: invalid format: {task_id}")
        return task_id

    async def _link(
        self, tasks: dict[str, Task], task_id: str, task: Task, others: list[str], field: Literal["blocks", "blockedBy"]
    ) -> None:
        """Add ``others`` to ``task``'s ``field`` (``blocks`` or ``blockedBy``), and ``task`` to the other side of
        each of them, after checking every id and that no link closes a cycle in ``tasks``."""
        reverse: Literal["blocks", "blockedBy"] = "blockedBy" if field == "blocks" else "blocks"
        for other in others:
            self._check_id("TaskUpdate", other, "blocked task ID" if field == "blocks" else "blocking task ID")
            blocker, blocked = (task_id, other) if field == "blocks" else (other, task_id)
            if _cyclic(tasks, blocker, blocked):
                raise TaskListError(
                    f"TaskUpdate adding Task #{other} to {field} of Task #{task_id} would create a cyclic dependency"
                )
        for other in others:
            target = await self._read(other, f"TaskUpdate update Task #{task_id} {field} failed, err")
            setattr(target, reverse, _unique(getattr(target, reverse), [task_id]))
            await self._write(target)
        setattr(task, field, _unique(getattr(task, field), others))

    async def task_create(self, args: dict[str, Any]) -> str:
        """``TaskCreate``."""
        mark = 0
        names = {posixpath.basename(i.path) for i in await self.backend.ls(self.base_dir)}
        if _HIGH_WATERMARK in names:
            text = (await self.backend.read(posixpath.join(self.base_dir, _HIGH_WATERMARK))).strip()
            mark = int(text) if text.isdigit() else 0
        task_id = str(mark + 1)
        if f"{task_id}.json" in names:
            raise TaskListError(f"task #{task_id} already exists")
        task = Task(
            id=task_id,
            subject=str(args.get("subject") or ""),
            description=str(args.get("description") or ""),
            activeForm=str(args.get("activeForm") or ""),
            metadata=dict(args.get("metadata") or {}),  # the tool checked it is an object
        )
        await self.backend.write(posixpath.join(self.base_dir, _HIGH_WATERMARK), task_id)
        await self._write(task)
        return _out(f"Task #{task_id} created successfully: {task.subject}")

    async def task_get(self, args: dict[str, Any]) -> str:
        """``TaskGet``."""
        task_id = self._check_id("TaskGet", args.get("taskId"))
        task = await self._read(task_id, f"TaskGet get Task #{task_id} failed, err")
        lines = [f"Task #{task.id}: {task.subject}\n", f"Status: {task.status}\n", f"Description: {task.description}\n"]
        if task.blockedBy:
            lines.append("Blocked by: " + ", ".join("#" + i for i in task.blockedBy) + "\n")
        if task.blocks:
            lines.append("Blocks: " + ", ".join("#" + i for i in task.blocks) + "\n")
        if task.owner:
            lines.append(f"Owner: {task.owner}\n")
        return _out("".join(lines))

    async def task_list(self, args: dict[str, Any]) -> str:
        """``TaskList``."""
        tasks = await self._list()
        if not tasks:
            return _out("No tasks found.")
        lines = []
        for task in tasks:
            line = f"#{task.id} [{task.status}] {task.subject}"
            if task.owner:
                line += f" [owner: {task.owner}]"
            if task.blockedBy:
                line += " [blocked by " + ", ".join("#" + i for i in task.blockedBy) + "]"
            lines.append(line)
        return _out("\n".join(lines))

    async def task_update(self, args: dict[str, Any]) -> str:
        """``TaskUpdate``."""
        task_id = self._check_id("TaskUpdate", args.get("taskId"))
        status = args.get("status") or ""
        if status == "deleted":
            for linked in await self._list():
                if linked.id == task_id:
                    continue
                if task_id in linked.blocks or task_id in linked.blockedBy:
                    linked.blocks = [i for i in linked.blocks if i != task_id]
                    linked.blockedBy = [i for i in linked.blockedBy if i != task_id]
                    await self._write(linked)
            await self.backend.delete(self._path(task_id))
            return _out(f"Updated task #{task_id} deleted")
        task = await self._read(task_id, f"TaskUpdate read Task #{task_id} failed, err")
        updated: list[str] = []
        for key in ("subject", "description", "activeForm"):
            value = args.get(key)
            if value:
                setattr(task, key, str(value))
                updated.append(key)
        if status:
            if status not in ("pending", "in_progress", "completed"):
                raise TaskListError(f"TaskUpdate: unknown status {status!r}")
            task.status = status
            updated.append("status")
        add_blocks = [str(x) for x in args.get("addBlocks") or []]
        add_blocked_by = [str(x) for x in args.get("addBlockedBy") or []]
        if add_blocks or add_blocked_by:
            tasks = {t.id: t for t in await self._list()}
            if add_blocks:
                await self._link(tasks, task_id, task, add_blocks, "blocks")
                updated.append("blocks")
            if add_blocked_by:
                await self._link(tasks, task_id, task, add_blocked_by, "blockedBy")
                updated.append("blockedBy")
        if args.get("owner"):
            task.owner = str(args["owner"])
            updated.append("owner")
        metadata = args.get("metadata")
        if isinstance(metadata, dict):
            for key, value in metadata.items():
                if value is None:
                    task.metadata.pop(key, None)
                else:
                    task.metadata[key] = value
            updated.append("metadata")
        await self._write(task)
        if status == "completed":
            tasks_now = await self._list()
            if all(t.status == "completed" for t in tasks_now):
                for t in tasks_now:
                    await self.backend.delete(self._path(t.id))
        return _out(f"Updated task #{task_id} {', '.join(updated)}")

    async def before_agent(self, context: ChatModelAgentContext) -> ChatModelAgentContext:
        lock = anyio.Lock()
        meta = {"type": "object", "properties": {"propertyNames": {"type": "string"}}}
        ids = {"type": "array", "items": {"type": "string"}}
        tools = [
            _task_tool(
                "TaskCreate",
                prompts.TASK_CREATE_DESCRIPTION,
                {
                    "subject": _s("A brief title for the task"),
                    "description": _s("A detailed description of what needs to be done"),
                    "activeForm": _s(_ACTIVE_FORM),
                    "metadata": {**meta, "description": "Arbitrary metadata to attach to the task"},
                },
                ["subject", "description"],
                self.task_create,
                lock,
            ),
            _task_tool(
                "TaskGet",
                prompts.TASK_GET_DESCRIPTION,
                {"taskId": _s("The ID of the task to retrieve")},
                ["taskId"],
                self.task_get,
                lock,
            ),
            _task_tool(
                "TaskUpdate",
                prompts.TASK_UPDATE_DESCRIPTION,
                {
                    "taskId": _s("The ID of the task to update"),
                    "subject": _s("New subject for the task"),
                    "description": _s("New description for the task"),
                    "activeForm": _s(_ACTIVE_FORM),
                    "status": {
                        **_s("New status for the task: 'pending', 'in_progress', 'completed', or 'deleted'"),
                        "enum": ["pending", "in_progress", "completed", "deleted"],
                    },
                    "addBlocks": {**ids, "description": "Task IDs that this task blocks"},
                    "addBlockedBy": {**ids, "description": "Task IDs that block this task"},
                    "owner": _s("New owner for the task"),
                    "metadata": {
                        **meta,
                        "description": "Metadata keys to merge into the task. Set a key to null to delete it.",
                    },
                },
                ["taskId"],
                self.task_update,
                lock,
            ),
            _task_tool("TaskList", prompts.TASK_LIST_DESCRIPTION, {}, [], self.task_list, lock),
        ]
        return ChatModelAgentContext(context.instruction, [*context.tools, *tools], set(context.return_directly))
