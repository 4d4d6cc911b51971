/*
 * bindings.h - globals carried between executions as plain data.
 *
 * The bindings value is opaque to clients but is ordinary JSON: an array of
 * [name, value] pairs sorted by name (bytewise), `[]` meaning fresh state.
 * Values use a typed encoding that restores exactly what was saved:
 *
 *   true / false            JSON boolean
 *   integer                 JSON integer
 *   string, valid UTF-8     JSON string (NUL allowed)
 *   string, other bytes     ["b", "<base64>"]
 *   float                   ["f", "<C99 hex float, e.g. 0x1.8p+1, or inf, -inf, nan>"]
 *   table                   ["t", [[key, value], ...]]   (keys encoded the same way)
 *
 * What is kept: globals whose name is a UTF-8 string and that the sandbox did
 * not define (bindings_export is given the baseline: the set of names that
 * existed before user code ran).  Functions, userdata, threads and
 * metatables are not kept; a table entry whose key or value is not plain
 * data is dropped; a table met again on the current path (a cycle) is
 * dropped at the point of recurrence, as Legion does; nesting deeper than
 * CODEC_MAX_DEPTH drops the too-deep entry.  Reading is raw.
 *
 * Restoring sets each name as a raw global unless the name is in the
 * baseline (the sandbox's names always win).
 */
#ifndef SANDBOXD_BINDINGS_H
#define SANDBOXD_BINDINGS_H

#include <jansson.h>
#include <lua.h>
#include <stddef.h>

/* Read the globals table at stack index gidx.  The baseline is a table at
 * stack index bidx whose keys are the names to skip.  On success *out is a
 * new JSON array (owned by the caller) and *size its approximate encoded
 * size in bytes.  Returns 0, or -1 with *err set (out of memory, or the
 * encoding grew beyond max_bytes: err is then "bindings too large"; a
 * max_bytes of 0 means unbounded). */
int bindings_export(lua_State *L, int gidx, int bidx, size_t max_bytes,
                    json_t **out, size_t *size, const char **err);

/* Set the globals in b (borrowed) into the table at gidx, skipping names
 * present as keys in the baseline table at bidx.  Returns 0, or -1 with
 * *err set when b is malformed (nothing partial is promised). */
int bindings_restore(lua_State *L, int gidx, int bidx, const json_t *b, const char **err);

/* The names held by bindings b, as a new JSON array of strings in stored
 * order; NULL with *err set when b is malformed.  Runs in the supervisor:
 * pure JSON, no Lua. */
json_t *bindings_names(const json_t *b, const char **err);

#endif
