"""Routes of kubecontrol/web.py served over plain TCP on a loopback port, in the test's own
event loop: for handlers tested whole, with real requests (the product serves them over TLS,
kubecontrol/webhook_server.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

from kubecontrol import web


@contextlib.asynccontextmanager
async def serving(
    routes: Sequence[web.RouteDef], *, max_body: int = 1 << 20, linger: float = 1.0
) -> AsyncIterator[int]:
    """The port the routes are served on, until the block ends."""
    served = web.Server(routes, max_body=max_body, keepalive=30.0, linger=linger)
    server = await asyncio.get_running_loop().create_server(served.connection, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for connection in list(served.connections):
            connection.force_close()
        await server.wait_closed()
