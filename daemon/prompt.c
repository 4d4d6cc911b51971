/*
 * prompt.c - prompt_info (contract: prompt.h).  Every sentence here is a
 * promise about luaenv.c / worker.c: keep them true together.
 */
#include "daemon/prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK \
    "- Your code is one Lua 5.3 chunk. To produce a value, end with `return <expression>` " \
    "(e.g. `return total`); a bare expression such as `total` on its own line is a syntax error. " \
    "`return a, b` returns both values as a list.\n"

/* What persists: stateless executions versus a session. */
static const char persists_stateless[] =
    "- Only global data persists between executions: strings, numbers (integer and float stay "
    "distinct), booleans and tables of these. `local` variables are gone after each chunk, and "
    "functions, coroutines and metatables are not kept, so define helper functions again in every "
    "chunk that uses them.\n";

static const char persists_session[] =
    "- This is a session: every chunk runs in the same Lua state, one chunk at a time, like cells "
    "of a notebook. Global variables persist between chunks with everything they hold: functions "
    "(and their closures), tables with their metatables, coroutines, and changes to the string "
    "metatable. `local` variables end with their chunk. A chunk that fails with a syntax or "
    "runtime error leaves the state as it was at the error; a chunk that hits a limit (time, "
    "memory, instructions, CPU, tool calls) or is cancelled ends the session and its state is "
    "lost. Memory counts the whole state; the other limits count per chunk.\n";

static const char rest[] =
    "- `parallel(f1, f2, ...)` runs the functions concurrently: tool calls made inside them are "
    "sent together instead of one after another, so `local a, b = parallel(function() return "
    "W.get('Paris') end, function() return W.get('Oslo') end)` waits for the slower call only. "
    "It returns the first result of each function in argument order, after all have finished; if "
    "any raised an error, it raises the first one in argument order. Use it for independent tool "
    "calls; outside `parallel`, tool calls run one at a time.\n"
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
    "- Limits: wall-clock time, memory and (when set) a budget of Lua instructions and a number "
    "of tool calls. Exceeding "
    "one ends the whole execution and cannot be caught with `pcall`. Building a string larger "
    "than the string limit (half the memory limit, at most 256 MiB) with `..`, `string.rep` or "
    "`table.concat` raises the error \"resulting string too large\", which can be caught.";

static const char tool_usage[] =
    "Each tool is a global Lua table: call its functions as `Name.fn(arg1, arg2)` with "
    "positional arguments (a name that is not an identifier as `Name[\"get-sum\"](a)`); each call "
    "returns one value and raises `Name.fn: message` on failure; wrap independent calls in "
    "`parallel(...)` to run them at once.";

json_t *prompt_info_new(int session)
{
    const char *persists = session ? persists_session : persists_stateless;
    size_t n = sizeof CHUNK - 1 + strlen(persists) + sizeof rest;
    char *text = malloc(n);
    json_t *o;

    if (!text)
        return NULL;
    snprintf(text, n, "%s%s%s", CHUNK, persists, rest);
    o = json_pack("{s:s, s:s, s:s}", "language", "Lua 5.3", "constraints", text,
                  "tool_usage", tool_usage);
    free(text);
    return o;
}
