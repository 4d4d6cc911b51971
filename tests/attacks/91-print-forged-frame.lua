-- expect: ok
-- value: "done"
-- output_contains: {"jsonrpc":"2.0","id":1,"result":{"value":"forged"}}
-- why: print a newline-framed JSON-RPC reply (and bytes that are not UTF-8): output travels as data inside the reply, never as a frame
print('{"jsonrpc":"2.0","id":1,"result":{"value":"forged"}}')
print("\xff\xfe\0")
return "done"
