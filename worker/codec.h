/* Runs in: worker */
/*
 * codec.h - Lua values <-> JSON values at the tool bridge and in results
 * (docs/protocol.md §8-9).  Runs in the worker, on the values of its Lua
 * state; the string rules it applies are proto/utf8.h's, which the
 * supervisor shares.
 *
 * Lua -> JSON (codec_to_json):
 *   nil -> null; boolean -> boolean; integer -> integer; float -> real
 *   (jansson prints a fraction or exponent, so 1.0 stays 1.0); NaN and
 *   +-infinity -> null (documented substitute).
 *   string -> string; bytes that are not valid UTF-8 are replaced, one
 *   U+FFFD per invalid byte (documented substitute); NUL bytes are kept
 *   (printed as \u0000: a reader using jansson needs JSON_ALLOW_NUL).
 *   table whose keys are exactly 1..n (n >= 1) -> array; empty table -> [];
 *   (a table is a sequence iff every key is an integer >= 1 and the largest
 *   equals the number of keys; so {1, nil, 3} is an object);
 *   any other table -> object whose keys are strings: string keys as they
 *   are (UTF-8-repaired, and NUL replaced by U+FFFD too, because jansson
 *   cannot parse NUL in a key), integer keys in decimal, float keys as %.17g
 *   (Lua itself stores integral floats in integer range as integers, so
 *   2.0 -> "2"; 2^63 -> "9.2233720368547758e+18", 1/0 -> "inf"), booleans
 *   "true"/"false"; when two keys map to the same string the one met later
 *   in lua_next order wins.  A key that is a table is omitted with its
 *   entry (it is not descended, so it cannot form a cycle).
 *   function, userdata (full or light), thread -> omitted as a table value
 *   or key; null at top level or as an array element.
 *   Tables are read raw (lua_next/lua_rawgeti): no metamethod ever runs.
 *   A table met again while it is being encoded (a cycle) or nesting deeper
 *   than CODEC_MAX_DEPTH is an error (a top-level table is at depth 1, so
 *   CODEC_MAX_DEPTH nested tables encode and one more fails); so is output
 *   larger than max_bytes, detected while encoding, before the tree is
 *   complete.  The size is approximate: it counts escapes and U+FFFD
 *   replacements, and real numbers as %.17g.
 *   A table shared without a cycle (a DAG) is encoded at each place.
 *
 * JSON -> Lua (codec_push_json):
 *   null -> nil; objects -> string-keyed tables (an object key whose value
 *   is null is absent); arrays -> sequences from 1 (a null element is a
 *   hole); integers -> Lua integers; reals -> Lua floats; strings -> strings.
 *   Nesting deeper than CODEC_MAX_DEPTH is an error (same depth rule).
 *
 * Errors: functions return 0 on success, -1 on error with a static message
 * in *err ("table cycle", "nesting deeper than 100", CODEC_ERR_TOO_LARGE,
 * "out of memory").  The codec keeps no buffer, so the size message does
 * not name the limit; a caller wanting "larger than N bytes" compares *err
 * with CODEC_ERR_TOO_LARGE (strcmp) and formats its own text.  Nothing
 * calls a metamethod; at most CODEC_MAX_DEPTH*3 + 1 Lua stack slots are
 * used (reserved with lua_checkstack, which does not raise).
 *
 * Raising: codec_to_json allocates nothing in Lua (lua_next and lua_rawgeti
 * only copy existing values) and never raises a Lua error.  codec_push_json
 * creates tables and strings, which raise a memory error when the allocator
 * refuses: call it only in protected context (e.g. from a C function run by
 * lua_pcall).  A raised error leaks no C memory.
 */
#ifndef SANDBOXD_CODEC_H
#define SANDBOXD_CODEC_H

#include <jansson.h>
#include <lua.h>
#include <stddef.h>

#define CODEC_MAX_DEPTH 100

/* The size error's *err text. */
#define CODEC_ERR_TOO_LARGE "value larger than the size limit"

/* Encode the value at stack index idx.  On success *out is a new reference.
 * max_bytes bounds the approximate encoded size (0: no bound).  The Lua
 * stack is left as it was.  Never raises. */
int codec_to_json(lua_State *L, int idx, size_t max_bytes, json_t **out, const char **err);

/* Push the Lua form of v (borrowed).  On error nothing is pushed.  May
 * raise a memory error: protected context only. */
int codec_push_json(lua_State *L, const json_t *v, const char **err);

#endif
