"""sandboxd._types - the types of the public API that are not classes of
their own: the stats of an execution, and the aliases that name what the
other signatures take."""

from typing import Any, Mapping, Sequence, TypedDict

__all__ = ["Stats", "Bindings", "Limits", "Tools"]


class Stats(TypedDict, total=False):
    """An execution's stats as the daemon reports them (docs/protocol.md): a
    dict, so `stats["tool_calls"]` reads as before; every key may be absent
    from an older or a future daemon's answer."""

    wall_us: int            # from the job reaching a worker to the answer, queue time not counted
    cpu_us: int             # CPU time of the worker process
    reductions: int         # Lua VM steps counted (0 unless max_reductions is set)
    heap_peak_bytes: int    # the most memory the Lua state held
    tool_calls: int         # tool/call requests sent


# An execute's bindings: opaque to the client, handed back as they came.
Bindings = Sequence[Any]
# The protocol's limits object: {"max_heap": ..., "cpu_ms": ..., ...}.
Limits = Mapping[str, Any]
# {table name: a dict of callables, an object, a module or a Table}.
Tools = Mapping[str, Any]
