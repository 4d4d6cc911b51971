"""A misbehaving worker can only kill itself ("a malformed or
out-of-state message from a worker kills that worker only and answers its
execution with an error").

Pure Lua cannot make a worker send a bad frame, so the test plays a
compromised worker from outside, as test_containment.py does for forbidden
system calls: it ptraces a worker that is blocked reading its tool answer,
writes a frame header of its choosing into the read buffer, and turns the
read(2) into a write(2) of those 8 bytes back to the supervisor.
"""

import ctypes
import os
import re
import struct

import pytest

import sbx
from test_containment import (ORIG_RAX, RAX, ERESTARTSYS, PTRACE_GETREGS, PTRACE_SETREGS,
                              IS_ROOT, UserRegs, stopped_in_read, TOOLS, BLOCK_CODE)

PTRACE_POKEDATA = 5
RDX, RSI, RDI = 12, 13, 14      # indexes in struct user_regs_struct (x86_64)
SYS_WRITE = 1
CHAN_OUTPUT, CHAN_RESULT = 16, 18   # proto/chan.h

pytestmark = [
    pytest.mark.skipif(not IS_ROOT, reason="needs root (ptrace of a worker under another uid)"),
    pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86_64 register layout"),
]


def send_header_from_worker(pid, ftype, flen):
    """pid is blocked in read(3, header, 8): make it write header {ftype, flen}."""
    with stopped_in_read(pid) as libc:
        regs = UserRegs()
        assert libc.ptrace(PTRACE_GETREGS, pid, None, ctypes.byref(regs)) == 0
        assert regs.r[ORIG_RAX] == 0 and regs.r[RDI] == 3, list(regs.r)
        assert ctypes.c_long(regs.r[RAX]).value == -ERESTARTSYS
        assert regs.r[RDX] == 8, "not reading a frame header: count %d" % regs.r[RDX]
        word = struct.unpack("<q", struct.pack("<II", ftype, flen))[0]
        assert libc.ptrace(PTRACE_POKEDATA, pid, ctypes.c_void_p(regs.r[RSI]),
                           ctypes.c_void_p(word)) == 0, os.strerror(ctypes.get_errno())
        regs.r[ORIG_RAX] = SYS_WRITE        # restarted as write(3, header, 8)
        assert libc.ptrace(PTRACE_SETREGS, pid, None, ctypes.byref(regs)) == 0


@pytest.mark.parametrize("ftype,flen,why", [
    (99, 0, "malformed or oversized frame"),            # unknown type
    (2, 0, "malformed or oversized frame"),             # a supervisor->worker type
    (17, 0x7fffffff, "malformed or oversized frame"),   # TOOL_CALL longer than any bound
    (CHAN_RESULT, 0, "not a JSON object"),              # an end frame that is not JSON
], ids=["unknown-type", "wrong-direction", "oversized", "empty-result"])
# (Output while a tool call is outstanding is no longer out of turn: under
# parallel() the worker keeps running.  A frame out of turn now needs a JSON
# payload, e.g. a result while calls are outstanding, which a forged header
# alone cannot carry; test_parallel.py covers the legal interleavings.)
def test_bad_frame_kills_only_that_worker(daemon, ftype, flen, why):
    bystander = daemon.client()
    b = bystander.send_execute("return T.wait()", tools=TOOLS,
                               handlers={"T.wait": lambda a: sbx.NO_REPLY})
    bcall = bystander.wait_deferred(1)
    before = set(daemon.wait_for_workers(1))

    c = daemon.client()
    i = c.send_execute(BLOCK_CODE, tools=TOOLS, handlers={"T.wait": lambda a: sbx.NO_REPLY})
    c.wait_deferred(1)
    pid = daemon.new_worker(before)
    send_header_from_worker(pid, ftype, flen)
    r = c.wait(i)
    assert r.code == -32007 and r.kind == "crashed", r
    assert why in r.data["reason"], r
    assert r.data.get("output") == "pre\n", r          # what it printed before is kept
    assert "stats" in r.data, r
    daemon.wait_log(r"protocol violation: [^\n]*%s" % re.escape(why))

    # the other execution, its worker and its connection are untouched
    bystander.reply(bcall, "fine")
    rb = bystander.wait(b)
    assert rb.ok and rb.result["value"] == "fine", rb
    c.ping()
    daemon.assert_no_leftovers()
    c.close()
    bystander.close()
