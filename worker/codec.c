/*
 * codec.c - Lua values <-> JSON values (contract: codec.h).  The string
 * rules (UTF-8 checks, repair, the cost of a string) are proto/utf8.c's.
 *
 * Lua -> JSON reads tables raw (lua_next, lua_rawgeti) and pushes nothing
 * that needs memory: lua_next and lua_rawgeti only copy existing values
 * into stack slots reserved with lua_checkstack, which itself never raises.
 * So codec_to_json cannot raise a Lua error and no GC step runs while it
 * holds pointers to Lua strings.
 *
 * JSON -> Lua allocates Lua objects, and any allocation may raise a memory
 * error: codec_push_json must run in protected context.
 */
#include "worker/codec.h"

#include "proto/utf8.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(lua_Integer) <= sizeof(json_int_t),
               "JSON integers must hold every Lua integer");

#define CODEC_STR_(x) #x
#define CODEC_STR(x) CODEC_STR_(x)

static const char err_cycle[] = "table cycle";
static const char err_depth[] = "nesting deeper than " CODEC_STR(CODEC_MAX_DEPTH);
static const char err_size[] = CODEC_ERR_TOO_LARGE;
static const char err_nomem[] = "out of memory";

/* --------------------------------------------------------- Lua -> JSON */

struct enc {
    lua_State *L;
    size_t max;  /* 0: unbounded */
    size_t used; /* approximate bytes so far; <= max when max != 0 */
    int depth;   /* tables on the current path */
    const void *path[CODEC_MAX_DEPTH];
    const char *err;
};

/* Account n more output bytes; fails once the total passes the bound. */
static int charge(struct enc *e, size_t n)
{
    if (e->max != 0 && n > e->max - e->used) {
        e->err = err_size;
        return -1;
    }
    e->used = n > SIZE_MAX - e->used ? SIZE_MAX : e->used + n;
    return 0;
}

static size_t int_cost(lua_Integer v)
{
    lua_Unsigned u = v < 0 ? 0u - (lua_Unsigned)v : (lua_Unsigned)v;
    size_t n = v < 0 ? 2 : 1;

    while (u >= 10) {
        u /= 10;
        n++;
    }
    return n;
}

/* Omitted as a table value or key; null at top level and in arrays. */
static int is_opaque(int type)
{
    return type == LUA_TFUNCTION || type == LUA_TUSERDATA ||
           type == LUA_TLIGHTUSERDATA || type == LUA_TTHREAD;
}

static int enc_value(struct enc *e, int idx, json_t **out);

static int enc_string(struct enc *e, int idx, json_t **out)
{
    size_t len;
    const char *s = lua_tolstring(e->L, idx, &len); /* a string: no conversion */

    /* Cheap lower bound first, so a huge string is rejected unscanned. */
    if (e->max != 0 && len > e->max - e->used) {
        e->err = err_size;
        return -1;
    }
    if (charge(e, utf8_json_cost(s, len)) < 0)
        return -1;
    if ((*out = utf8_string_new(s, len)) == NULL) {
        e->err = err_nomem;
        return -1;
    }
    return 0;
}

static int enc_number(struct enc *e, int idx, json_t **out)
{
    char buf[64];
    lua_Number d;
    int n;

    if (lua_isinteger(e->L, idx)) {
        lua_Integer i = lua_tointeger(e->L, idx);
        if (charge(e, int_cost(i)) < 0)
            return -1;
        *out = json_integer((json_int_t)i);
    } else if (isfinite(d = lua_tonumber(e->L, idx))) {
        /* jansson prints %.17g and appends ".0" when needed */
        n = snprintf(buf, sizeof buf, "%.17g", (double)d);
        if (charge(e, (size_t)(n > 0 ? n : 0) + 2) < 0)
            return -1;
        *out = json_real((double)d);
    } else {
        if (charge(e, 4) < 0) /* NaN and infinities: null */
            return -1;
        *out = json_null();
    }
    if (*out == NULL) {
        e->err = err_nomem;
        return -1;
    }
    return 0;
}

/* Write the object key for the key at idx into buf (or point at the Lua
 * string); returns 0, 1 when the key is not representable (a table or an
 * opaque value), -1 when out of memory.  *fixed, when set, is a malloc'd
 * repair the caller frees.  A NUL in a string key is replaced like an
 * invalid byte: jansson's parser refuses NUL in object keys even with
 * JSON_ALLOW_NUL, so such output could not be read back. */
static int key_string(struct enc *e, int idx, char *buf, size_t bufsz,
                      const char **key, size_t *klen, char **fixed)
{
    lua_State *L = e->L;
    int n;

    *fixed = NULL;
    switch (lua_type(L, idx)) {
    case LUA_TSTRING:
        *key = lua_tolstring(L, idx, klen);
        if (!utf8_valid(*key, *klen) || memchr(*key, '\0', *klen) != NULL) {
            if ((*fixed = utf8_repair(*key, *klen, 1, klen)) == NULL)
                return -1;
            *key = *fixed;
        }
        return 0;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx))
            n = snprintf(buf, bufsz, LUA_INTEGER_FMT, (LUAI_UACINT)lua_tointeger(L, idx));
        else /* integral floats in integer range are stored as integers */
            n = snprintf(buf, bufsz, "%.17g", (double)lua_tonumber(L, idx));
        *key = buf;
        *klen = (size_t)(n > 0 ? n : 0);
        return 0;
    case LUA_TBOOLEAN:
        *key = lua_toboolean(L, idx) ? "true" : "false";
        *klen = strlen(*key);
        return 0;
    default:
        return 1;
    }
}

static int enc_array(struct enc *e, int idx, lua_Integer n, json_t **out)
{
    json_t *arr = json_array(), *v;
    lua_Integer i;

    if (arr == NULL)
        goto nomem;
    for (i = 1; i <= n; i++) {
        lua_rawgeti(e->L, idx, i);
        if (charge(e, 1) < 0 || enc_value(e, lua_gettop(e->L), &v) < 0) {
            lua_pop(e->L, 1);
            goto fail;
        }
        lua_pop(e->L, 1);
        if (json_array_append_new(arr, v) < 0)
            goto nomem;
    }
    *out = arr;
    return 0;
nomem:
    e->err = err_nomem;
fail:
    json_decref(arr);
    return -1;
}

static int enc_object(struct enc *e, int idx, json_t **out)
{
    lua_State *L = e->L;
    int top = lua_gettop(L);
    json_t *obj = json_object(), *v;
    char buf[64], *fixed;
    const char *key;
    size_t klen;
    int rc;

    if (obj == NULL)
        goto nomem;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        if (is_opaque(lua_type(L, -1))) {
            lua_pop(L, 1);
            continue;
        }
        rc = key_string(e, top + 1, buf, sizeof buf, &key, &klen, &fixed);
        if (rc < 0)
            goto nomem;
        if (rc > 0) {
            lua_pop(L, 1);
            continue;
        }
        /* the key as it will be written: quoted and escaped, then ':' and ',' */
        if (charge(e, utf8_json_cost(key, klen) + 2) < 0 || enc_value(e, top + 2, &v) < 0) {
            free(fixed);
            goto fail;
        }
        rc = json_object_setn_new_nocheck(obj, key, klen, v);
        free(fixed);
        if (rc < 0)
            goto nomem;
        lua_pop(L, 1);
    }
    *out = obj;
    return 0;
nomem:
    e->err = err_nomem;
fail:
    lua_settop(L, top);
    json_decref(obj);
    return -1;
}

/* Count the keys of the table at idx; the table is a sequence iff every
 * key is an integer >= 1 and the largest equals the count (distinct keys,
 * so they are exactly 1..n).  Returns n for a sequence (0 when empty), -1
 * otherwise. */
static lua_Integer sequence_length(lua_State *L, int idx)
{
    lua_Integer n = 0, max = 0, k;

    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        lua_pop(L, 1);
        if (!lua_isinteger(L, -1) || (k = lua_tointeger(L, -1)) < 1) {
            lua_pop(L, 1);
            return -1;
        }
        if (k > max)
            max = k;
        n++;
    }
    return max == n ? n : -1;
}

static int enc_table(struct enc *e, int idx, json_t **out)
{
    const void *p = lua_topointer(e->L, idx);
    lua_Integer n;
    int i, rc;

    for (i = 0; i < e->depth; i++) {
        if (e->path[i] == p) {
            e->err = err_cycle;
            return -1;
        }
    }
    if (e->depth == CODEC_MAX_DEPTH) {
        e->err = err_depth;
        return -1;
    }
    /* key + value of lua_next; lua_checkstack does not raise */
    if (!lua_checkstack(e->L, 3)) {
        e->err = err_nomem;
        return -1;
    }
    if (charge(e, 2) < 0)
        return -1;
    e->path[e->depth++] = p;
    n = sequence_length(e->L, idx);
    rc = n >= 0 ? enc_array(e, idx, n, out) : enc_object(e, idx, out);
    e->depth--;
    return rc;
}

static int enc_value(struct enc *e, int idx, json_t **out)
{
    switch (lua_type(e->L, idx)) {
    case LUA_TBOOLEAN:
        if (charge(e, 5) < 0)
            return -1;
        *out = json_boolean(lua_toboolean(e->L, idx));
        return 0;
    case LUA_TNUMBER:
        return enc_number(e, idx, out);
    case LUA_TSTRING:
        return enc_string(e, idx, out);
    case LUA_TTABLE:
        return enc_table(e, idx, out);
    default: /* nil; opaque values where they cannot be omitted */
        if (charge(e, 4) < 0)
            return -1;
        *out = json_null();
        return 0;
    }
}

int codec_to_json(lua_State *L, int idx, size_t max_bytes, json_t **out, const char **err)
{
    struct enc e;
    int top = lua_gettop(L);
    json_t *v = NULL;

    memset(&e, 0, sizeof e);
    e.L = L;
    e.max = max_bytes;
    if (enc_value(&e, lua_absindex(L, idx), &v) < 0) {
        lua_settop(L, top);
        *err = e.err;
        return -1;
    }
    *out = v;
    return 0;
}

/* --------------------------------------------------------- JSON -> Lua */

static int push_value(lua_State *L, const json_t *v, int depth, const char **err);

static int push_object(lua_State *L, const json_t *v, int depth, const char **err)
{
    const char *key;
    size_t klen;
    json_t *val;

    size_t n = json_object_size(v);

    lua_createtable(L, 0, n > INT_MAX ? INT_MAX : (int)n); /* a size hint */
    json_object_keylen_foreach((json_t *)v, key, klen, val) {
        if (json_is_null(val))
            continue;
        lua_pushlstring(L, key, klen);
        if (push_value(L, val, depth, err) < 0)
            return -1;
        lua_rawset(L, -3);
    }
    return 0;
}

static int push_array(lua_State *L, const json_t *v, int depth, const char **err)
{
    size_t i, n = json_array_size(v);

    lua_createtable(L, n > INT_MAX ? INT_MAX : (int)n, 0); /* a size hint */
    for (i = 0; i < n; i++) {
        const json_t *el = json_array_get(v, i);
        if (json_is_null(el))
            continue; /* a hole */
        if (push_value(L, el, depth, err) < 0)
            return -1;
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 0;
}

/* Push v; on error the caller restores the stack top.  depth counts the
 * containers enclosing v. */
static int push_value(lua_State *L, const json_t *v, int depth, const char **err)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
    case JSON_ARRAY:
        if (depth == CODEC_MAX_DEPTH) {
            *err = err_depth;
            return -1;
        }
        /* the table, a key, a value, one spare */
        if (!lua_checkstack(L, 4)) {
            *err = err_nomem;
            return -1;
        }
        return json_is_object(v) ? push_object(L, v, depth + 1, err)
                                 : push_array(L, v, depth + 1, err);
    case JSON_STRING:
        lua_pushlstring(L, json_string_value(v), json_string_length(v));
        return 0;
    case JSON_INTEGER:
        lua_pushinteger(L, (lua_Integer)json_integer_value(v));
        return 0;
    case JSON_REAL:
        lua_pushnumber(L, (lua_Number)json_real_value(v));
        return 0;
    case JSON_TRUE:
        lua_pushboolean(L, 1);
        return 0;
    case JSON_FALSE:
        lua_pushboolean(L, 0);
        return 0;
    case JSON_NULL:
    default:
        lua_pushnil(L);
        return 0;
    }
}

int codec_push_json(lua_State *L, const json_t *v, const char **err)
{
    int top = lua_gettop(L);

    if (!lua_checkstack(L, 1)) {
        *err = err_nomem;
        return -1;
    }
    if (push_value(L, v, 0, err) < 0) {
        lua_settop(L, top);
        return -1;
    }
    return 0;
}
