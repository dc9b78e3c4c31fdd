"""The approval guard moved to :mod:`adk.middlewares.approval`; this name keeps working."""

from adk.middlewares.approval import *  # noqa: F403
from adk.middlewares.approval import __all__ as __all__
from adk.middlewares.approval import as_approval_request as as_approval_request
