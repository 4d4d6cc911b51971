/*
 * codec.h - Lua values <-> JSON values at the tool bridge and in results
 * (CONTRACT section 6).  Runs only in the worker.
 *
 * Lua -> JSON (codec_to_json):
 *   nil -> null; boolean -> boolean; integer -> integer; float -> real
 *   (jansson prints a fraction or exponent, so 1.0 stays 1.0); NaN and
 *   +-infinity -> null (documented substitute).
 *   string -> string; bytes that are not valid UTF-8 are replaced, one
 *   U+FFFD per invalid byte (documented substitute); NUL bytes are kept.
 *   table whose keys are exactly 1..n (n >= 1) -> array; empty table -> [];
 *   any other table -> object whose keys are strings: string keys as they
 *   are (UTF-8-repaired), integer keys in decimal, float keys as %.17g
 *   (integral floats as integers: 2.0 -> "2"), booleans "true"/"false";
 *   when two keys map to the same string the one met later in lua_next
 *   order wins.
 *   function, userdata, thread -> omitted as a table value or key;
 *   null at top level or as an array element.
 *   Tables are read raw (lua_next/lua_rawgeti): no metamethod ever runs.
 *   A table met again while it is being encoded (a cycle) or nesting deeper
 *   than CODEC_MAX_DEPTH is an error; so is output larger than max_bytes.
 *   A table shared without a cycle (a DAG) is encoded at each place.
 *
 * JSON -> Lua (codec_push_json):
 *   null -> nil; objects -> string-keyed tables (an object key whose value
 *   is null is absent); arrays -> sequences from 1 (a null element is a
 *   hole); integers -> Lua integers; reals -> Lua floats; strings -> strings.
 *   Nesting deeper than CODEC_MAX_DEPTH is an error.
 *
 * Errors: functions return 0 on success, -1 on error with a static or
 * buffer-held message in *err ("table cycle", "nesting deeper than 100",
 * "value larger than N bytes", "out of memory").  They never raise Lua
 * errors and never call metamethods; they use at most CODEC_MAX_DEPTH*3
 * Lua stack slots (checked with lua_checkstack).
 */
#ifndef SANDBOXD_CODEC_H
#define SANDBOXD_CODEC_H

#include <jansson.h>
#include <lua.h>
#include <stddef.h>

#define CODEC_MAX_DEPTH 100

/* Encode the value at stack index idx.  On success *out is a new reference.
 * max_bytes bounds the approximate encoded size (0: no bound). */
int codec_to_json(lua_State *L, int idx, size_t max_bytes, json_t **out, const char **err);

/* Push the Lua form of v (borrowed).  On error nothing is pushed. */
int codec_push_json(lua_State *L, const json_t *v, const char **err);

/* Return a new JSON string for the bytes s[0..len), replacing invalid UTF-8
 * as described above.  NULL only on allocation failure. */
json_t *codec_string_new(const char *s, size_t len);

#endif
