#!/usr/bin/env python3
"""Write the seed corpora tests/fuzz/corpus/<target>/ (run from the repo root).

Seeds are small, meaningful inputs taken from the unit tests; the first
bytes of the ndjson and chan seeds are the harness's control bytes (see the
comment at the top of each target).
"""
import os
import struct

ROOT = "tests/fuzz/corpus"


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- fuzz_ndjson_rpc: [mode/max_line byte][seed byte] stream
LINES = [
    b'{"jsonrpc":"2.0","id":1,"method":"execute","params":{"code":"return 1+1"}}',
    b'{"jsonrpc":"2.0","id":"a-1","method":"execute","params":{"code":"x","bindings":[["x",1]]}}',
    b'{"method":"ping","id":0,"jsonrpc":"2.0"}',
    b'{"jsonrpc":"2.0","method":"$/cancelRequest","params":[1]}',
    b'{"jsonrpc":"2.0","id":"t1","result":{"temp":3}}',
    b'{"jsonrpc":"2.0","id":3,"result":null}',
    b'{"jsonrpc":"2.0","id":5,"error":{"code":-32000,"message":"boom","data":{"kind":"x"}}}',
    b'{"jsonrpc":"2.0","id":5,"result":1,"error":{}}',
    b'{"jsonrpc":"2.0","method":"m","id":"a\\u0000b"}',
    b'{"jsonrpc":"2.0\\u0000","id":1,"method":"m"}',
    b'{"jsonrpc":"2.0","id":1,"method":"pi\\u0000ng"}',
    b'{"jsonrpc":"2.0","id":1.5,"method":"m"}',
    b'[{"jsonrpc":"2.0","id":1,"method":"m"}]',
    b'{"a":"\xff"}',
    b'{"id":99999999999999999999,"jsonrpc":"2.0","method":"m"}',
]
write("fuzz_ndjson_rpc", "requests_4096", b"\x07\x01" + b"\n".join(LINES) + b"\n")
write("fuzz_ndjson_rpc", "requests_bytewise", b"\x00\x02" + b"\r\n".join(LINES) + b"\r\n")
write("fuzz_ndjson_rpc", "blank_and_crlf", b"\x0a\x03" + b"\n \t \n\r\n" + LINES[0] + b"\r\n\r\r\n")
write("fuzz_ndjson_rpc", "too_long_64", b"\x1b\x04" + b"x" * 70 + b"\n" + LINES[2] + b"\n" + b" " * 80 + b"\n" + b"y" * 65 + b"\r")
write("fuzz_ndjson_rpc", "stub_cr_16", b"\x22\x05" + b"a" * 16 + b"\r\n" + b"b" * 16 + b"\r" + b"c\n" + b'{"jsonrpc":"2.0"}\n')
write("fuzz_ndjson_rpc", "nul_bytes", b"\x2d\x06" + b'{"jsonrpc":"2.0","id":1,\x00"method":"m"}\n\x00\n')

# ---- fuzz_chan: [mode | from_worker<<3 | max_payload_index<<4][seed] frames
def frame(t, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return struct.pack("=II", t, len(payload)) + payload

JOB, TOOL_RESULT, OUTPUT, TOOL_CALL, RESULT, ERROR, SYSCALL = 1, 2, 16, 17, 18, 19, 31
W = 1 << 3
P4096 = 6 << 4
write("fuzz_chan", "worker_frames", bytes([7 | W | P4096, 1]) +
      frame(OUTPUT, "hello\n") + frame(TOOL_CALL, '{"tool":"t","function":"f","args":[1]}') +
      frame(OUTPUT, b"") + frame(RESULT, '{"value":2,"bindings":[]}'))
write("fuzz_chan", "worker_error_split", bytes([6 | W | P4096, 2]) +
      frame(ERROR, '{"kind":"runtime_error","message":"x"}') + frame(OUTPUT, "a" * 40))
write("fuzz_chan", "worker_syscall", bytes([0 | W | P4096, 3]) + frame(SYSCALL, struct.pack("=iI", 59, 0xC000003E)))
write("fuzz_chan", "supervisor_frames", bytes([2 | P4096, 4]) +
      frame(JOB, '{"code":"return 1","bindings":[]}') + frame(TOOL_RESULT, '{"ok":true,"value":1}'))
write("fuzz_chan", "bad_type", bytes([3 | W | P4096, 5]) + frame(RESULT, "{}") + frame(JOB, "{}") + frame(RESULT, "{}"))
write("fuzz_chan", "too_long_header", bytes([7 | W | (5 << 4), 6]) + frame(RESULT, "x" * 64) + struct.pack("=II", RESULT, 65) + b"y" * 65)
write("fuzz_chan", "huge_length", bytes([5 | W | P4096, 7]) + struct.pack("=II", OUTPUT, 0xFFFFFFFF) + b"z" * 32)

# ---- fuzz_codec: a JSON value (a tool result's "value")
CODEC = {
    "object": '{"a":1,"b":[1,2,3],"c":{"d":null,"e":"x"},"f":1.5,"g":true}',
    "array_holes": '[1,null,3,null]',
    "empty": '[{},[],"",0]',
    "strings": '["a\\u0000b","\\u00e9\\ud83d\\ude00","\\"\\\\\\n\\t\\u0001"]',
    "numbers": '[9223372036854775807,-9223372036854775808,1.0,-0.0,1e300,2.5e-308]',
    "numeric_keys": '{"1":"a","2":"b","-1":"c","1.5":"d"}',
    "deep_100": "[" * 100 + "]" * 100,
    "deep_101": "[" * 101 + "]" * 101,
    "scalar": '"just a string"',
    "ctl_keys": '{"\\u0001\\u0002":"\\u001f","\\"k\\"":1}',
}
for name, text in CODEC.items():
    write("fuzz_codec", name, text)

# ---- fuzz_bindings: a bindings value
BIND = {
    "basic": '[["b",true],["f",["f","0x1.8p+1"]],["i",3],["no",false],["s","hi"]]',
    "names": '[["B",4],["a",3],["a\\u0000",5],["ab",2],["b",1],["\\u00e9",6]]',
    "floats": '[["nz",["f","-0x0p+0"]],["pz",["f","0x0p+0"]],["pinf",["f","inf"]],'
              '["ninf",["f","-inf"]],["nan",["f","nan"]],["pnan",["f","-nan"]],'
              '["tiny",["f","0x0.0000000000001p-1022"]],["maxi",9223372036854775807]]',
    "bytes": '[["b1",["b","/w=="]],["b2",["b","//4="]],["b3",["b","//79"]],["b4",["b","/wABAg=="]],'
             '["over",["b","wIA="]],["nul","a\\u0000b"],["e",["b",""]]]',
    "tables": '[["t",["t",[[false,"F"],[true,"T"],[-1,-9223372036854775808],[1,1],'
              '[2,["f","0x1p+1"]],[3,"x"],[["f","0x1.8p+0"],"h"],'
              '[["f","0x1p+63"],"huge"],[["f","inf"],"inf"],["",0],'
              '["nested",["t",[["a",["t",[["b",["t",[["c",9223372036854775807]]]]]]]]]],'
              '[["b","/w=="],"bad"]]]]]',
    "baseline": '[["_G",1],["string",5],["table",["t",[]]],["x",1],["_ENV",2]]',
    "dups_and_float_keys": '[["d",1],["d",2],["t",["t",[[["f","0x1p+0"],"one"],[1,"uno"],[["f","-0x0p+0"],0]]]]]',
    "malformed_b64": '[["ok",1],["a",["b","QR=="]]]',
    "malformed_key": '[["ok",1],["a",["t",[[["f","nan"],1]]]]]',
    "empty": '[]',
}
BIND["deep_100"] = '[["a",' + '["t",[[1,' * 100 + '0' + ']]]' * 100 + ']]'
BIND["deep_101"] = '[["a",' + '["t",[[1,' * 101 + '0' + ']]]' * 101 + ']]'
for name, text in BIND.items():
    write("fuzz_bindings", name, text)

# ---- fuzz_tools: a request's params.tools
TOOLS = {
    "none": 'null',
    "empty": '[]',
    "weather": '[{"name":"Weather","module":"MyApp.Tools.Weather","functions":'
               '[{"name":"get","arities":[1,2]},{"name":"list"},"set"]}]',
    "any_names": '[{"name":"_x9","functions":["valid?","get-sum","\u00e9",'
                 '{"name":"f","arities":null}]},{"name":"Empty","module":null,"functions":null}]',
    "reserved": '[{"name":"print"}]',
    "dup_tool": '[{"name":"A"},{"name":"A"}]',
    "dup_function": '[{"name":"A","functions":["f",{"name":"f","arities":[0]}]}]',
    "nul_name": '[{"name":"A","functions":["a\u0000b"]}]',
    "bad_arity": '[{"name":"A","functions":[{"name":"f","arities":[251]}]}]',
    "module_dunder": '[{"name":"A","functions":["__module"]}]',
}
for name, text in TOOLS.items():
    write("fuzz_tools", name, text)

# ---- fuzz_pattern: byte 0 even: generator choices; odd: a raw case
write("fuzz_pattern", "generated", b"\x00abcdefghijklmnop")
write("fuzz_pattern", "raw-gsub", b"\x01\x03\x05aab(a+)b\xff%1-")
write("fuzz_pattern", "raw-find", b"\x01\x04\x06a(b)c%b()\xff")
