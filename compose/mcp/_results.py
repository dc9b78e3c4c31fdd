"""What the model sees of an MCP tool's result, and the argument check against its input schema."""

from __future__ import annotations

import json
import logging
from typing import Any

import jsonschema
import mcp_types

logger = logging.getLogger("compose.mcp")


def schema_validator(schema: dict[str, Any]) -> Any:
    """A JSON Schema validator of ``schema``, or None when the schema is itself invalid (the server checks)."""
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError:
        logger.warning("an MCP tool's input schema is not a valid JSON Schema; its arguments are not checked here")
        return None
    return cls(schema)


def result_text(result: mcp_types.CallToolResult) -> str:
    """What the model sees of a result: its text blocks joined, else its structured content as JSON; a text
    block that only repeats the structured content (the SDK's indented JSON of a dict) becomes the compact JSON."""
    structured = result.structured_content
    compact = None if structured is None else json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    parts = [_block_text(block) for block in result.content]
    if not parts:
        return compact or ""
    if compact is not None and len(result.content) == 1 and isinstance(result.content[0], mcp_types.TextContent):
        try:
            repeats = json.loads(parts[0]) == structured
        except ValueError:
            repeats = False
        if repeats:
            return compact
    return "\n".join(parts)


def _block_text(block: Any) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent):
        return f"[image: {block.mime_type}]"
    if isinstance(block, mcp_types.AudioContent):
        return f"[audio: {block.mime_type}]"
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource: {block.uri}]"
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return resource.text
        return f"[resource: {resource.uri} ({resource.mime_type or 'binary'})]"
    return f"[{getattr(block, 'type', type(block).__name__)}]"
