/*
 * bindings_lua.c - a Lua state's globals exported as bindings and restored
 * from them (contract: bindings_lua.h; the format: proto/bindings.h).
 *
 * Export reads raw and pushes only copies of existing values into slots
 * reserved with lua_checkstack, so it allocates nothing in Lua and cannot
 * raise; Lua strings it points at stay alive because the tables holding
 * them are neither changed nor collected meanwhile (no Lua allocation, no
 * GC step).  Restore creates tables and strings and must run in protected
 * context.  It validates everything before it sets anything, so a malformed
 * value leaves the globals untouched.
 *
 * Table entries are sorted (booleans, integers, floats, strings; each in
 * its natural order, strings bytewise) so that equal data gives equal JSON
 * whatever the table's internal layout: an export of a restore is
 * byte-identical to what was restored.
 */
#include "worker/bindings_lua.h"

#include "proto/bindings.h"
#include "proto/mutant.h"
#include "proto/sort.h"
#include "proto/utf8.h"
#include "worker/codec.h"

#include <lauxlib.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(BINDINGS_MAX_DEPTH == CODEC_MAX_DEPTH,
               "an exported table nests as deep as a restore accepts");

static const char err_large[] = "bindings too large";
static const char err_nomem[] = "out of memory";

/* ---------------------------------------------------------------- export */

#define EXP_DROP 1 /* exp_value: the value is not kept */

struct exporter {
    lua_State *L;
    size_t max;  /* 0: unbounded */
    size_t used; /* JSON bytes so far, exactly as json_dumps(JSON_COMPACT) writes them */
    int depth;   /* tables on the current path */
    const void *path[CODEC_MAX_DEPTH];
    const void *root; /* the globals table: on every path, at depth 0 */
    const char *err;
};

/* One [key, value] pair of a table, or [name, value] at top level, with
 * what sorting needs.  s points into a Lua string kept alive by its table. */
struct entry {
    int rank; /* 0 boolean, 1 integer, 2 float, 3 string */
    lua_Integer i;
    double d;
    const char *s;
    size_t len;
    json_t *pair;
};

struct entries {
    struct entry *v;
    size_t n, cap;
};

static int charge(struct exporter *x, size_t n)
{
    if (x->max != 0 && n > x->max - x->used) {
        x->err = err_large;
        return -1;
    }
    x->used = n > SIZE_MAX - x->used ? SIZE_MAX : x->used + n;
    return 0;
}

/* The JSON size of a valid UTF-8 string as jansson (and jp_quote) write
 * it: the quotes, '"', '\\' and the five short control escapes in two
 * bytes, every other control byte as \u00XX. */
static size_t text_cost(const char *s, size_t len)
{
    size_t i, cost = len + 2;

    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' ||
            c == '\t')
            cost += 1;
        else if (c < 0x20)
            cost += 5;
    }
    return cost;
}

/* The decimal digits of v, its sign included. */
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

/* What a [key, value] pair adds besides its key and value: its brackets
 * and the comma between them, and the comma before it unless it is the
 * first of its array (n: pairs kept so far there). */
static size_t pair_cost(size_t n)
{
    return n > 0 ? 4 : 3;
}

/* A new array [tag, payload]; steals payload (also on failure). */
static json_t *tagged(const char *tag, json_t *payload)
{
    json_t *a;

    if (payload == NULL)
        return NULL;
    if ((a = json_array()) == NULL || json_array_append_new(a, json_string_nocheck(tag)) < 0 ||
        json_array_append_new(a, payload) < 0) {
        if (a == NULL)
            json_decref(payload);
        json_decref(a);
        return NULL;
    }
    return a;
}

/* A new array [a, b]; steals both (also on failure). */
static json_t *pair_new(json_t *a, json_t *b)
{
    json_t *p = json_array();

    if (p == NULL || a == NULL || b == NULL) {
        json_decref(a);
        json_decref(b);
        json_decref(p);
        return NULL;
    }
    if (json_array_append_new(p, a) < 0) {
        json_decref(b);
        json_decref(p);
        return NULL;
    }
    if (json_array_append_new(p, b) < 0) {
        json_decref(p);
        return NULL;
    }
    return p;
}

static int entries_push(struct entries *es, const struct entry *e)
{
    struct entry *nv;
    size_t cap;

    if (es->n == es->cap) {
        cap = es->cap ? es->cap * 2 : 8;
        if (cap > SIZE_MAX / sizeof *nv || (nv = realloc(es->v, cap * sizeof *nv)) == NULL)
            return -1;
        es->v = nv;
        es->cap = cap;
    }
    es->v[es->n++] = *e;
    return 0;
}

static void entries_free(struct entries *es)
{
    size_t i;

    for (i = 0; i < es->n; i++)
        json_decref(es->v[i].pair);
    free(es->v);
    es->v = NULL;
    es->n = es->cap = 0;
}

static int entry_cmp(const void *pa, const void *pb)
{
    const struct entry *a = pa, *b = pb;
    int c;

    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    switch (a->rank) {
    case 0:
    case 1:
        return a->i < b->i ? -1 : a->i > b->i;
    case 2: /* never NaN: NaN cannot be a key */
        return a->d < b->d ? -1 : a->d > b->d;
    default:
        c = memcmp(a->s, b->s, a->len < b->len ? a->len : b->len);
        return c != 0 ? c : a->len < b->len ? -1 : a->len > b->len;
    }
}

/* Sort es (unless already in order) and move its pairs into a new array;
 * es is emptied either way.  NULL on allocation failure.  Keys are unique
 * in a table, so an unstable sort still gives one order. */
static json_t *entries_array(struct entries *es)
{
    json_t *arr = json_array();
    size_t i;

    for (i = 1; i < es->n; i++)
        if (entry_cmp(&es->v[i - 1], &es->v[i]) > 0)
            break;
    if (i < es->n && MUTANT(LIBC_QSORT))
        qsort(es->v, es->n, sizeof *es->v, entry_cmp);  /* mutant: sysinfo on 61 entries */
    else if (i < es->n)
        sort_array(es->v, es->n, sizeof *es->v, entry_cmp); /* not qsort: see proto/sort.h */
    for (i = 0; arr != NULL && i < es->n; i++) {
        json_t *p = es->v[i].pair;
        es->v[i].pair = NULL;
        if (json_array_append_new(arr, p) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    entries_free(es);
    return arr;
}

/* Fill the sort fields of e for the key at idx (boolean, number, string). */
static void entry_key(lua_State *L, int idx, struct entry *e)
{
    memset(e, 0, sizeof *e);
    switch (lua_type(L, idx)) {
    case LUA_TBOOLEAN:
        e->rank = 0;
        e->i = lua_toboolean(L, idx);
        break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            e->rank = 1;
            e->i = lua_tointeger(L, idx);
        } else {
            e->rank = 2;
            e->d = (double)lua_tonumber(L, idx);
        }
        break;
    default:
        e->rank = 3;
        e->s = lua_tolstring(L, idx, &e->len);
        break;
    }
}

static int is_data_key(int type)
{
    return type == LUA_TBOOLEAN || type == LUA_TNUMBER || type == LUA_TSTRING;
}

static int exp_value(struct exporter *x, int idx, json_t **out);

static int exp_string(struct exporter *x, int idx, json_t **out)
{
    size_t len;
    const char *s = lua_tolstring(x->L, idx, &len);

    if (utf8_valid(s, len)) {
        if (charge(x, text_cost(s, len)) < 0)
            return -1;
        *out = json_stringn_nocheck(s, len);
    } else {
        if (charge(x, bindings_b64_len(len) + 8) < 0) /* ["b",""] */
            return -1;
        *out = tagged("b", bindings_b64_string((const unsigned char *)s, len));
    }
    if (*out == NULL) {
        x->err = err_nomem;
        return -1;
    }
    return 0;
}

static int exp_number(struct exporter *x, int idx, json_t **out)
{
    char buf[64];
    int n;

    if (lua_isinteger(x->L, idx)) {
        if (charge(x, int_cost(lua_tointeger(x->L, idx))) < 0)
            return -1;
        *out = json_integer((json_int_t)lua_tointeger(x->L, idx));
    } else {
        /* %a is exact; glibc prints inf, -inf, nan, -nan for the rest */
        n = snprintf(buf, sizeof buf, "%a", (double)lua_tonumber(x->L, idx));
        if (n < 0 || (size_t)n >= sizeof buf) /* cannot happen: at most ~24 */
            n = 0;
        if (charge(x, (size_t)n + 8) < 0) /* ["f",""] */
            return -1;
        *out = tagged("f", json_stringn_nocheck(buf, (size_t)n));
    }
    if (*out == NULL) {
        x->err = err_nomem;
        return -1;
    }
    return 0;
}

/* One entry of the table being read: key at kidx, value at kidx + 1.
 * Adds it to es unless the key or value is not kept. */
static int exp_entry(struct exporter *x, int kidx, struct entries *es)
{
    struct entry e;
    json_t *k = NULL, *v = NULL;
    int rc;

    if (!is_data_key(lua_type(x->L, kidx)))
        return 0;
    if ((rc = exp_value(x, kidx + 1, &v)) != 0)
        return rc < 0 ? -1 : 0;
    if (exp_value(x, kidx, &k) != 0) /* a data key is never dropped */
        goto fail;
    if (charge(x, pair_cost(es->n)) < 0) /* ,[k,v] */
        goto fail;
    entry_key(x->L, kidx, &e);
    if ((e.pair = pair_new(k, v)) == NULL) {
        x->err = err_nomem;
        return -1;
    }
    if (entries_push(es, &e) < 0) {
        json_decref(e.pair);
        x->err = err_nomem;
        return -1;
    }
    return 0;
fail:
    json_decref(k);
    json_decref(v);
    return -1;
}

static int exp_table(struct exporter *x, int idx, json_t **out)
{
    lua_State *L = x->L;
    const void *p = lua_topointer(L, idx);
    struct entries es = {NULL, 0, 0};
    int i, top = lua_gettop(L);

    if (p == x->root)
        return EXP_DROP; /* g = _G: a cycle through the globals table */
    for (i = 0; i < x->depth; i++)
        if (x->path[i] == p)
            return EXP_DROP; /* a cycle: cut where it recurs */
    if (x->depth == CODEC_MAX_DEPTH)
        return EXP_DROP;
    if (!lua_checkstack(L, 3)) { /* key, value of lua_next */
        x->err = err_nomem;
        return -1;
    }
    if (charge(x, 8) < 0) /* ["t",[]] */
        return -1;
    x->path[x->depth++] = p;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        if (exp_entry(x, top + 1, &es) < 0)
            goto fail;
        lua_pop(L, 1);
    }
    x->depth--;
    if ((*out = tagged("t", entries_array(&es))) == NULL) {
        x->err = err_nomem;
        return -1;
    }
    return 0;
fail:
    x->depth--;
    lua_settop(L, top);
    entries_free(&es);
    return -1;
}

/* 0 and *out (new), EXP_DROP when the value is not kept, -1 on error. */
static int exp_value(struct exporter *x, int idx, json_t **out)
{
    switch (lua_type(x->L, idx)) {
    case LUA_TBOOLEAN:
        if (charge(x, lua_toboolean(x->L, idx) ? 4 : 5) < 0)
            return -1;
        *out = json_boolean(lua_toboolean(x->L, idx));
        return 0;
    case LUA_TNUMBER:
        return exp_number(x, idx, out);
    case LUA_TSTRING:
        return exp_string(x, idx, out);
    case LUA_TTABLE:
        return exp_table(x, idx, out);
    default: /* nil, functions, userdata, threads */
        return EXP_DROP;
    }
}

/* Whether the key at kidx is a key of the baseline table at bidx. */
static int in_baseline(lua_State *L, int bidx, int kidx)
{
    int found;

    lua_pushvalue(L, kidx);
    found = lua_rawget(L, bidx) != LUA_TNIL;
    lua_pop(L, 1);
    return found;
}

/* The global at kidx (name) and kidx + 1 (value): added to es if kept. */
static int exp_global(struct exporter *x, int bidx, int kidx, struct entries *es)
{
    lua_State *L = x->L;
    struct entry e;
    json_t *v = NULL, *name;
    int rc;

    if (lua_type(L, kidx) != LUA_TSTRING)
        return 0;
    entry_key(L, kidx, &e);
    if (!utf8_valid(e.s, e.len) || in_baseline(L, bidx, kidx))
        return 0;
    if ((rc = exp_value(x, kidx + 1, &v)) != 0)
        return rc < 0 ? -1 : 0;
    if (charge(x, text_cost(e.s, e.len) + pair_cost(es->n)) < 0) {
        json_decref(v);
        return -1;
    }
    name = json_stringn_nocheck(e.s, e.len);
    if ((e.pair = pair_new(name, v)) == NULL || entries_push(es, &e) < 0) {
        json_decref(e.pair);
        x->err = err_nomem;
        return -1;
    }
    return 0;
}

int bindings_export(lua_State *L, int gidx, int bidx, size_t max_bytes,
                    json_t **out, size_t *size, const char **err)
{
    struct exporter x;
    struct entries es = {NULL, 0, 0};
    int top = lua_gettop(L);
    json_t *arr;

    memset(&x, 0, sizeof x);
    x.L = L;
    x.max = max_bytes;
    gidx = lua_absindex(L, gidx);
    bidx = lua_absindex(L, bidx);
    x.root = lua_topointer(L, gidx);
    if (!lua_checkstack(L, 4)) { /* key, value, baseline probe */
        *err = err_nomem;
        return -1;
    }
    if (charge(&x, 2) < 0)
        goto fail;
    lua_pushnil(L);
    while (lua_next(L, gidx) != 0) {
        if (exp_global(&x, bidx, top + 1, &es) < 0)
            goto fail;
        lua_pop(L, 1);
    }
    if ((arr = entries_array(&es)) == NULL) {
        *err = err_nomem;
        return -1;
    }
    *out = arr;
    *size = x.used;
    return 0;
fail:
    lua_settop(L, top);
    entries_free(&es);
    *err = x.err;
    return -1;
}

/* --------------------------------------------------------------- restore */

/* The sink that pushes each value bindings_walk() hands over onto the Lua
 * state (ctx).  Each push may raise a memory error. */
static void push_boolean(void *L, int b)
{
    lua_pushboolean(L, b);
}

static void push_integer(void *L, json_int_t i)
{
    lua_pushinteger(L, (lua_Integer)i);
}

static void push_number(void *L, double d)
{
    lua_pushnumber(L, (lua_Number)d);
}

static void push_string(void *L, const char *s, size_t len)
{
    lua_pushlstring(L, s, len);
}

static void push_bytes(void *L, const char *b64, size_t len, size_t n)
{
    luaL_Buffer b;
    char *dst;

    /* the buffer belongs to Lua: nothing leaks if a memory error is raised */
    dst = luaL_buffinitsize(L, &b, n);
    bindings_b64_decode(b64, len, (unsigned char *)dst);
    luaL_pushresultsize(&b, n);
}

static void push_table(void *L, size_t seq, size_t rest)
{
    /* the table, a key, a value (a string buffer box); sizes are hints */
    luaL_checkstack(L, 4, NULL);
    lua_createtable(L, seq > INT_MAX ? INT_MAX : (int)seq, rest > INT_MAX ? INT_MAX : (int)rest);
}

static void push_entry(void *L)
{
    lua_rawset(L, -3);
}

static const struct bindings_sink lua_sink = {
    .boolean = push_boolean, .integer = push_integer, .number = push_number,
    .string = push_string, .bytes = push_bytes, .table = push_table, .entry = push_entry,
};

int bindings_restore(lua_State *L, int gidx, int bidx, const json_t *b, const char **err)
{
    const json_t *e, *name;
    size_t i;

    if (bindings_check(b, err) < 0)
        return -1;
    gidx = lua_absindex(L, gidx);
    bidx = lua_absindex(L, bidx);
    luaL_checkstack(L, 4, NULL); /* name, baseline probe or value, buffer box */
    json_array_foreach(b, i, e) {
        name = json_array_get(e, 0);
        lua_pushlstring(L, json_string_value(name), json_string_length(name));
        if (in_baseline(L, bidx, lua_gettop(L))) {
            lua_pop(L, 1);
            continue;
        }
        /* checked above: cannot fail */
        if (bindings_walk(json_array_get(e, 1), &lua_sink, L, err) < 0) {
            lua_pop(L, 1);
            return -1;
        }
        lua_rawset(L, gidx);
    }
    return 0;
}
