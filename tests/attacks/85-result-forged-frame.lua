-- expect: ok
-- value: "\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"value\":\"forged\"}}\n\u0000"
-- why: return a string holding a newline-framed JSON-RPC reply (and a NUL): it must arrive as one escaped string, never as a frame of its own
return '\n{"jsonrpc":"2.0","id":1,"result":{"value":"forged"}}\n\0'
