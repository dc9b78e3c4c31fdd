"""Errors of the built-in middlewares' tools: skills and the plantask task list."""

from __future__ import annotations

from adk.errors._base import AgentError

__all__ = ["SkillError", "TaskListError"]


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
