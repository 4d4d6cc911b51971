/* Runs in: worker */
/*
 * bindings_lua.h - a Lua state's globals exported as bindings and restored
 * from them: the worker's side of the bindings format (proto/bindings.h).
 *
 * What is kept: globals whose name is a UTF-8 string and that the sandbox did
 * not define (bindings_export is given the baseline: the set of names that
 * existed before user code ran).  Functions, userdata, threads and
 * metatables are not kept; a table entry whose key or value is not plain
 * data is dropped; a table met again on the current path (a cycle) is
 * dropped at the point of recurrence, as Legion does (the globals table
 * itself counts as on the path, so `g = _G` is not kept); nesting deeper than
 * CODEC_MAX_DEPTH drops the too-deep entry (a global's own table is at
 * depth 1; restore rejects deeper nesting).  A string key that is not UTF-8
 * is kept (as "b"); a table key drops its entry.  Reading is raw.
 *
 * Restoring sets each name as a raw global unless the name is in the
 * baseline (the sandbox's names always win).
 *
 * Raising: bindings_export allocates nothing in Lua and never raises.
 * bindings_restore creates strings and tables, which raise a memory error
 * when the allocator refuses: call it only in protected context (e.g. from
 * a C function run by lua_pcall); a raised error leaks no C memory.
 */
#ifndef SANDBOXD_BINDINGS_LUA_H
#define SANDBOXD_BINDINGS_LUA_H

#include <jansson.h>
#include <lua.h>
#include <stddef.h>

/* Read the globals table at stack index gidx.  The baseline is a table at
 * stack index bidx whose keys are the names to skip.  On success *out is a
 * new JSON array (owned by the caller) and *size its encoded size in
 * bytes: exactly the length of json_dumps(*out, JSON_COMPACT), counted as
 * it is built.  Returns 0, or -1 with *err set (out of memory, or the
 * encoding would be longer than max_bytes: err is then "bindings too
 * large"; a max_bytes of 0 means unbounded).  The stack is left as it was.  Never
 * raises. */
int bindings_export(lua_State *L, int gidx, int bidx, size_t max_bytes,
                    json_t **out, size_t *size, const char **err);

/* Set the globals in b (borrowed) into the table at gidx, skipping names
 * present as keys in the baseline table at bidx.  Returns 0, or -1 with
 * *err set ("malformed bindings: ...") when b is malformed; b is validated
 * whole first, so then no global has been set.  The stack is left as it
 * was.  Protected context only (see above). */
int bindings_restore(lua_State *L, int gidx, int bidx, const json_t *b, const char **err);

#endif
