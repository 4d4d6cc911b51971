"""sandboxd - the Python client of the sandboxd daemon (standard library only).

    import sandboxd

    with sandboxd.Client() as c:                        # blocking
        r = c.execute("return Weather.get(city).temp",
                      tools={"Weather": {"get": get_weather}},
                      bindings=[["city", "Paris"]])

    async with sandboxd.AsyncClient() as c:             # asyncio
        r = await c.execute("return 1 + 1")

See the package README (client/python/README.md) for the whole surface.
"""

from ._core import DEFAULT_SOCKET, Result
from ._types import Stats
from .aio import AsyncClient, AsyncSession, LiveOutput
from .errors import (Busy, Cancelled, DaemonUnavailable, Forbidden, InvalidRequest,
                     LimitExceeded, LuaError, ProtocolError, SandboxdError, SessionNotFound,
                     ToolAbort, ToolAborted)
from .render import catalog, render, system_prompt
from .sync import Client, Session
from .tools import Table, tool
from .values import Unencodable, to_jsonable

__version__ = "1.0.0"

__all__ = [
    "Client", "AsyncClient", "Session", "AsyncSession", "Result", "Stats", "LiveOutput",
    "DEFAULT_SOCKET",
    "tool", "Table", "ToolAbort", "render", "system_prompt", "catalog",
    "to_jsonable", "Unencodable",
    "SandboxdError", "LuaError", "LimitExceeded", "Cancelled", "ToolAborted", "Busy",
    "Forbidden", "SessionNotFound", "InvalidRequest", "DaemonUnavailable", "ProtocolError",
]
