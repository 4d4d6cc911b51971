/*
 * prompt.c - prompt_info (contract: prompt.h).  Every sentence here is a
 * promise about luaenv.c / worker.c: keep them true together.
 */
#include "daemon/prompt.h"

static const char constraints[] =
    "- Your code is one Lua 5.3 chunk. To produce a value, end with `return <expression>` "
    "(e.g. `return total`); a bare expression such as `total` on its own line is a syntax error. "
    "`return a, b` returns both values as a list.\n"
    "- Only global data persists between executions: strings, numbers (integer and float stay "
    "distinct), booleans and tables of these. `local` variables are gone after each chunk, and "
    "functions, coroutines and metatables are not kept, so define helper functions again in every "
    "chunk that uses them.\n"
    "- Tools are global tables; call them as `Name.fn(...)` with positional arguments. Pass "
    "tables with string keys for structured arguments (arrays as 1-based sequences). Each call "
    "returns exactly one value (objects arrive as string-keyed tables, arrays as sequences from 1). "
    "A failing tool raises an error `Name.fn: message`, which `pcall` can catch.\n"
    "- `print` output is captured and returned to the caller next to the result; you may not "
    "see it, so return the values you need instead of printing them.\n"
    "- Available: the base functions (`pairs`, `ipairs`, `type`, `tostring`, `tonumber`, `select`, "
    "`error`, `assert`, `pcall`, `xpcall`, `setmetatable`, `getmetatable`, `rawget`, `rawset`, "
    "`rawequal`, `rawlen`, `next`, `unpack`), `load` (Lua source text only), `string` (without "
    "`dump`), `table`, `math`, `utf8`, `coroutine`, and `os.time`, `os.clock`, `os.date`, "
    "`os.difftime`. `collectgarbage(\"count\")` reports memory; its other options do nothing.\n"
    "- Not available: `io`, `os.execute`, `os.getenv`, `os.exit` and the rest of `os`, `require`, "
    "`package`, `debug`, `dofile`, `loadfile`, `string.dump`, binary chunks, and `__gc` "
    "metamethods (`setmetatable` refuses them). There is no file, network or process access.\n"
    "- Limits: wall-clock time, memory and (when set) a budget of Lua instructions. Exceeding "
    "one ends the whole execution and cannot be caught with `pcall`. Building a string larger "
    "than the string limit (half the memory limit, at most 256 MiB) with `..`, `string.rep` or "
    "`table.concat` raises the error \"resulting string too large\", which can be caught.";

static const char tool_usage[] =
    "Each tool is a global Lua table: call its functions as `Name.fn(arg1, arg2)` with "
    "positional arguments; each call returns one value and raises `Name.fn: message` on failure.";

json_t *prompt_info_new(void)
{
    return json_pack("{s:s, s:s, s:s}", "language", "Lua 5.3", "constraints", constraints,
                     "tool_usage", tool_usage);
}
