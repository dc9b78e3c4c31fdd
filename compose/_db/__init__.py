"""The plumbing the checkpoint stores (``compose.checkpoint``) and the session stores (``adk.sessions``) share.

``store``: the ``async with`` base class and the table-name check; ``sqlite``: one SQLite connection used from
async code; ``postgres``: a psycopg connection pool used from async code. The drivers are imported on first use.
"""
