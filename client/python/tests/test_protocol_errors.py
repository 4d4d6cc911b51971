"""What the clients do with bytes that are not the protocol.  The real daemon
never sends these, so a small socket server stands in for a broken one."""

import asyncio
import os
import socket
import threading

import pytest

import sandboxd


@pytest.fixture
def broken(tmp_path):
    """A server answering describe normally, then the next request with the
    bytes in `replies` (a list, one entry per connection)."""
    path = str(tmp_path / "broken.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(4)
    replies = []

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            try:
                with c:
                    f = c.makefile("rb")
                    f.readline()                    # describe
                    c.sendall(b'{"jsonrpc":"2.0","id":1,"result":{"daemon":{"max_message_bytes"'
                              b':1000000},"maximums":{"max_output_bytes":1000,'
                              b'"max_bindings_bytes":1000}}}\n')
                    f.readline()
                    if replies:
                        c.sendall(replies.pop(0))
                    f.read()
            except OSError:
                pass                                # the client hung up on the garbage

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield path, replies
    srv.close()
    os.unlink(path)


@pytest.mark.parametrize("reply", [
    b"this is not json\n",
    b"[1, 2]\n",
    b"x" * 5000000,                                 # a line past any answer's length
])
def test_garbage_is_a_protocol_error(broken, reply):
    path, replies = broken
    replies.append(reply)
    with pytest.raises(sandboxd.ProtocolError):
        sandboxd.Client(path).execute("return 1")

    replies.append(reply)

    async def main():
        with pytest.raises(sandboxd.ProtocolError):
            await sandboxd.AsyncClient(path).execute("return 1")
    asyncio.run(main())


def test_unroutable_answers_are_ignored(broken):
    path, replies = broken
    replies.append(b'{"jsonrpc":"2.0","id":[1],"result":1}\n'
                   b'{"jsonrpc":"2.0","id":99,"result":1}\n'
                   b'{"jsonrpc":"2.0","id":2,"result":{"value":7}}\n')
    assert sandboxd.Client(path).execute("return 7").value == 7
