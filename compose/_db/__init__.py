"""The SQL store core the checkpoint stores (``compose.checkpoint``) and the session stores (``adk.sessions``) share.

``core``: ``SqlStore`` (leases, their keeper, fenced writes, retired deletes) over a ``Dialect`` (retries of a
locked database); ``sqlite`` and ``postgres``: the two dialects; ``keeper``: the lease keeper thread; ``store``: the
``async with`` base class and the argument checks. The drivers are imported on first use.
"""
