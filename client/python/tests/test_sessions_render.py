"""Sessions without daemon sessions (bindings held by the client), render()
and system_prompt()."""

import asyncio

import pytest

import sandboxd


def test_stateless_session_bindings_only_on_success(sock):
    with sandboxd.Client(sock) as c:
        with c.session(daemon=False, tools={"T": {"inc": lambda x: x + 1}}) as s:
            assert s.execute("n = T.inc(0)").binding_names == ["n"]
            s.execute("n = T.inc(n)")
            with pytest.raises(sandboxd.LuaError):
                s.execute("n = 100 error('boom')")
            assert s.execute("return n").value == 2                # 100 was not kept
            snap = s.snapshot()
            assert snap["binding_names"] == ["n"]
            r = c.execute("return n * 10", bindings=snap["bindings"])
            assert r.value == 20


def test_async_stateless_session(sock):
    async def main():
        async with sandboxd.AsyncClient(sock) as c:
            async with c.session(daemon=False, bindings=[["a", 1]], limits={"max_heap": 50000000},
                                 timeout_ms=5000) as s:
                await s.execute("a = a + 1")
                with pytest.raises(sandboxd.LimitExceeded):
                    await s.execute("a = 99 while true do end", timeout_ms=100)
                assert (await s.execute("return a")).value == 2
                assert s.bindings == [["a", 2]]
    asyncio.run(main())


def test_render_result(sock):
    with sandboxd.Client(sock) as c:
        r = c.execute("x = 1 y = 'a' print('hello') return {1, 2}")
    text = sandboxd.render(r)
    assert "Result: [1, 2]" in text and "hello" in text
    assert "Available variables: `x`, `y`" in text


def test_render_error(sock):
    with sandboxd.Client(sock) as c:
        try:
            c.execute("print('so far') T.f() T.f() error('bad thing')",
                      tools={"T": {"f": lambda: 1}})
        except sandboxd.SandboxdError as e:
            text = sandboxd.render(e)
    assert "runtime_error" in text and "bad thing" in text
    assert "so far" in text and "Tool calls that had run: 2" in text
    assert "unchanged" in text


def test_render_cuts_long_values():
    r = sandboxd.Result(value="x" * 100000)
    assert len(sandboxd.render(r, max_chars=1000)) < 1200


def test_system_prompt(sock):
    def get(city, units="C"):
        """Weather in a city."""
    with sandboxd.Client(sock) as c:
        p = c.system_prompt({"Weather": {"get": get}})
        info = c.prompt_info()
    assert info["constraints"].strip() in p and info["tool_usage"] in p
    assert "`Weather.get(city, units?)`: Weather in a city." in p
    assert sandboxd.system_prompt(None, info).startswith("You can run code")
