/*
 * bindings.c - globals carried between executions as typed JSON
 * (contract: bindings.h).
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
#include "proto/bindings.h"

#include "proto/utf8.h"
#include "worker/codec.h"

#include <lauxlib.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIND_STR_(x) #x
#define BIND_STR(x) BIND_STR_(x)

static const char err_large[] = "bindings too large";
static const char err_nomem[] = "out of memory";
static const char err_top[] = "malformed bindings: not an array of [name, value] pairs";
static const char err_value[] = "malformed bindings: a value is null, a bare real or an object";
static const char err_tagged[] = "malformed bindings: a tagged value is not [tag, string or array]";
static const char err_tag[] = "malformed bindings: unknown tag (expected \"b\", \"f\" or \"t\")";
static const char err_b64[] = "malformed bindings: invalid base64 in a \"b\" value";
static const char err_float[] = "malformed bindings: invalid hex float in an \"f\" value";
static const char err_entry[] = "malformed bindings: a table entry is not a [key, value] pair";
static const char err_key[] = "malformed bindings: a table key is a table or NaN";
static const char err_depth[] = "malformed bindings: tables nested deeper than "
                                BIND_STR(CODEC_MAX_DEPTH);

/* ---------------------------------------------------------------- base64 */

static const char b64_digits[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

#define B64_BAD ((size_t)-1)

static size_t b64_len(size_t n)
{
    return n / 3 * 4 + (n % 3 ? 4 : 0);
}

/* A new JSON string holding in[0..n) in padded base64 (RFC 4648 section 4).
 * NULL on allocation failure. */
static json_t *b64_string(const unsigned char *in, size_t n)
{
    size_t i, o = 0, olen = b64_len(n);
    char *out;
    json_t *j;
    uint32_t w;

    if (n > SIZE_MAX / 4 || (out = malloc(olen + 1)) == NULL)
        return NULL;
    for (i = 0; i + 2 < n; i += 3) {
        w = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = b64_digits[w >> 18 & 63];
        out[o++] = b64_digits[w >> 12 & 63];
        out[o++] = b64_digits[w >> 6 & 63];
        out[o++] = b64_digits[w & 63];
    }
    if (i < n) {
        w = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
        out[o++] = b64_digits[w >> 18 & 63];
        out[o++] = b64_digits[w >> 12 & 63];
        out[o++] = i + 1 < n ? b64_digits[w >> 6 & 63] : '=';
        out[o++] = '=';
    }
    out[o] = '\0';
    j = json_stringn_nocheck(out, o);
    free(out);
    return j;
}

static int b64_value(unsigned char c)
{
    const char *p;

    if (c == '\0' || (p = strchr(b64_digits, c)) == NULL)
        return -1;
    return (int)(p - b64_digits);
}

/* Decode in[0..n) into out, which holds the decoded length, or validate
 * only when out is NULL.  Strict: padded to a multiple of 4, alphabet
 * characters only, '=' only as the last one or two, and the unused bits
 * of a padded group zero (so each byte string has one encoding).  Returns
 * the decoded length or B64_BAD. */
static size_t b64_decode(const char *in, size_t n, unsigned char *out)
{
    size_t i, j, o = 0, pad = 0, end;
    uint32_t w;
    int v;

    if (n % 4 != 0)
        return B64_BAD;
    if (n > 0 && in[n - 1] == '=')
        pad = in[n - 2] == '=' ? 2 : 1;
    end = n - pad;
    for (i = 0; i < n; i += 4) {
        w = 0;
        for (j = i; j < i + 4; j++) {
            v = j < end ? b64_value((unsigned char)in[j]) : 0;
            if (v < 0)
                return B64_BAD;
            w = w << 6 | (uint32_t)v;
        }
        if (i + 4 == n && pad > 0 && (w & ((1u << (8 * pad)) - 1)) != 0)
            return B64_BAD;
        for (j = 0; j < (i + 4 == n ? 3 - pad : 3); j++, o++)
            if (out != NULL)
                out[o] = (unsigned char)(w >> (16 - 8 * j));
    }
    return o;
}

/* ------------------------------------------------------------ hex floats */

static int is_lower_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Parse the payload of an "f" value: what "%a" prints for a double in the
 * C locale ([-]0xH[.H+]p(+|-)D+, lowercase), or inf, -inf, nan, -nan.
 * Anything else, and a finite text that overflows, is rejected. */
static int parse_float(const char *s, size_t len, double *d)
{
    const char *p = s + (s[0] == '-');
    char *end;

    if (strlen(s) != len)
        return -1;
    if (strcmp(p, "inf") == 0 || strcmp(p, "nan") == 0) {
        *d = p[0] == 'i' ? HUGE_VAL : NAN;
        *d = copysign(*d, p == s ? 1.0 : -1.0);
        return 0;
    }
    if (p[0] != '0' || p[1] != 'x' || !is_lower_hex(p[2]))
        return -1;
    p += 3;
    if (*p == '.') {
        if (!is_lower_hex(*++p))
            return -1;
        while (is_lower_hex(*p))
            p++;
    }
    if (*p++ != 'p' || (*p != '+' && *p != '-') || !is_digit(*++p))
        return -1;
    while (is_digit(*p))
        p++;
    if (*p != '\0')
        return -1;
    *d = strtod(s, &end);
    if (end != s + len || isinf(*d))
        return -1;
    return 0;
}

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
 * es is emptied either way.  NULL on allocation failure. */
static json_t *entries_array(struct entries *es)
{
    json_t *arr = json_array();
    size_t i;

    for (i = 1; i < es->n; i++)
        if (entry_cmp(&es->v[i - 1], &es->v[i]) > 0)
            break;
    if (i < es->n)
        qsort(es->v, es->n, sizeof *es->v, entry_cmp);
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
        if (charge(x, b64_len(len) + 8) < 0) /* ["b",""] */
            return -1;
        *out = tagged("b", b64_string((const unsigned char *)s, len));
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

/* Validates (L == NULL) or pushes (L != NULL) stored values.  The push pass
 * runs only after a validation pass succeeded, so its checks cannot fail. */
struct restorer {
    lua_State *L;
    const char *err;
};

static int rst_value(struct restorer *r, const json_t *v, int depth, int is_key);

static int rst_fail(struct restorer *r, const char *err)
{
    r->err = err;
    return -1;
}

static int rst_bytes(struct restorer *r, const json_t *p)
{
    const char *s = json_string_value(p);
    size_t len = json_string_length(p), n;
    luaL_Buffer b;
    char *dst;

    if ((n = b64_decode(s, len, NULL)) == B64_BAD)
        return rst_fail(r, err_b64);
    if (r->L != NULL) {
        /* the buffer belongs to Lua: nothing leaks if a memory error is raised */
        dst = luaL_buffinitsize(r->L, &b, n);
        b64_decode(s, len, (unsigned char *)dst);
        luaL_pushresultsize(&b, n);
    }
    return 0;
}

static int rst_float(struct restorer *r, const json_t *p, int is_key)
{
    double d;

    if (parse_float(json_string_value(p), json_string_length(p), &d) < 0)
        return rst_fail(r, err_float);
    if (is_key && isnan(d))
        return rst_fail(r, err_key);
    if (r->L != NULL)
        lua_pushnumber(r->L, (lua_Number)d);
    return 0;
}

/* Entries [[k, v], ...] of a table whose own depth is depth. */
static int rst_table(struct restorer *r, const json_t *p, int depth)
{
    size_t i, n = json_array_size(p), seq = 0;
    const json_t *e;

    if (depth > CODEC_MAX_DEPTH)
        return rst_fail(r, err_depth);
    for (i = 0; i < n; i++) {
        e = json_array_get(p, i);
        if (!json_is_array(e) || json_array_size(e) != 2)
            return rst_fail(r, err_entry);
        if (seq == i && json_is_integer(json_array_get(e, 0)) &&
            json_integer_value(json_array_get(e, 0)) == (json_int_t)i + 1)
            seq++;
    }
    if (r->L != NULL) {
        /* the table, a key, a value (a string buffer box); sizes are hints */
        luaL_checkstack(r->L, 4, NULL);
        lua_createtable(r->L, seq > INT_MAX ? INT_MAX : (int)seq,
                        n - seq > INT_MAX ? INT_MAX : (int)(n - seq));
    }
    for (i = 0; i < n; i++) {
        e = json_array_get(p, i);
        if (rst_value(r, json_array_get(e, 0), depth, 1) < 0 ||
            rst_value(r, json_array_get(e, 1), depth, 0) < 0)
            return -1;
        if (r->L != NULL)
            lua_rawset(r->L, -3);
    }
    return 0;
}

/* ["b"|"f"|"t", payload] */
static int rst_tagged(struct restorer *r, const json_t *v, int depth, int is_key)
{
    const json_t *t = json_array_get(v, 0), *p = json_array_get(v, 1);
    const char *tag;

    if (json_array_size(v) != 2 || !json_is_string(t))
        return rst_fail(r, err_tagged);
    if (json_string_length(t) != 1)
        return rst_fail(r, err_tag);
    tag = json_string_value(t);
    if (tag[0] == 't') {
        if (!json_is_array(p))
            return rst_fail(r, err_tagged);
        if (is_key)
            return rst_fail(r, err_key);
        return rst_table(r, p, depth + 1);
    }
    if (tag[0] != 'b' && tag[0] != 'f')
        return rst_fail(r, err_tag);
    if (!json_is_string(p))
        return rst_fail(r, err_tagged);
    return tag[0] == 'b' ? rst_bytes(r, p) : rst_float(r, p, is_key);
}

/* depth: tables enclosing v. */
static int rst_value(struct restorer *r, const json_t *v, int depth, int is_key)
{
    lua_State *L = r->L;

    switch (json_typeof(v)) {
    case JSON_TRUE:
    case JSON_FALSE:
        if (L != NULL)
            lua_pushboolean(L, json_is_true(v));
        return 0;
    case JSON_INTEGER:
        if (L != NULL)
            lua_pushinteger(L, (lua_Integer)json_integer_value(v));
        return 0;
    case JSON_STRING:
        if (L != NULL)
            lua_pushlstring(L, json_string_value(v), json_string_length(v));
        return 0;
    case JSON_ARRAY:
        return rst_tagged(r, v, depth, is_key);
    default:
        return rst_fail(r, err_value);
    }
}

/* Check the whole of b: a JSON array of [string, value] pairs. */
static int validate(const json_t *b, const char **err)
{
    struct restorer r = {NULL, NULL};
    const json_t *e;
    size_t i;

    if (!json_is_array(b))
        goto bad;
    json_array_foreach(b, i, e) {
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(json_array_get(e, 0)))
            goto bad;
        if (rst_value(&r, json_array_get(e, 1), 0, 0) < 0) {
            *err = r.err;
            return -1;
        }
    }
    return 0;
bad:
    *err = err_top;
    return -1;
}

int bindings_restore(lua_State *L, int gidx, int bidx, const json_t *b, const char **err)
{
    struct restorer r = {L, NULL};
    const json_t *e, *name;
    size_t i;

    if (validate(b, err) < 0)
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
        if (rst_value(&r, json_array_get(e, 1), 0, 0) < 0) { /* validated: cannot happen */
            lua_pop(L, 1);
            *err = r.err;
            return -1;
        }
        lua_rawset(L, gidx);
    }
    return 0;
}

json_t *bindings_names(const json_t *b, const char **err)
{
    json_t *names, *name;
    const json_t *e;
    size_t i;

    if (validate(b, err) < 0)
        return NULL;
    if ((names = json_array()) == NULL)
        goto nomem;
    json_array_foreach(b, i, e) {
        name = json_array_get(e, 0);
        if (json_array_append_new(names, json_stringn_nocheck(json_string_value(name),
                                                              json_string_length(name))) < 0)
            goto nomem;
    }
    return names;
nomem:
    json_decref(names);
    *err = err_nomem;
    return NULL;
}

/* ------------------------------------------------------ names from text */

/* One pass over bindings text (valid JSON) that makes the checks of
 * validate(), without a tree: the supervisor reads bindings larger than the
 * tree budget it grants a message (a table of 50,000 records is 3 MB of
 * text and some 50 MB of jansson values).  Only strings that need their
 * value are decoded (tags, "b" and "f" payloads), one at a time; every
 * byte is looked at a bounded number of times, and the recursion is bounded
 * by CODEC_MAX_DEPTH tables (an array that is not a table's is refused at
 * its first element). */
struct tv {
    const char *s;
    size_t n, i;
    const char *err;
};

static int tv_fail(struct tv *t, const char *err)
{
    t->err = err;
    return -1;
}

/* The next byte after blanks, or -1 at the end. */
static int tv_peek(struct tv *t)
{
    while (t->i < t->n && (t->s[t->i] == ' ' || t->s[t->i] == '\t' || t->s[t->i] == '\n' ||
                           t->s[t->i] == '\r'))
        t->i++;
    return t->i < t->n ? (unsigned char)t->s[t->i] : -1;
}

static int tv_eat(struct tv *t, int c)
{
    if (tv_peek(t) != c)
        return 0;
    t->i++;
    return 1;
}

/* The string literal at the position (quotes included) into *out. */
static int tv_string(struct tv *t, const char **p, size_t *len)
{
    size_t j;

    if (tv_peek(t) != '"')
        return -1;
    for (j = t->i + 1; j < t->n && t->s[j] != '"'; j++)
        if (t->s[j] == '\\')
            j++;
    if (j >= t->n)
        return -1;
    *p = t->s + t->i;
    *len = j + 1 - t->i;
    t->i = j + 1;
    return 0;
}

/* The value of a string literal, or NULL (out of memory). */
static json_t *tv_decode(struct tv *t, const char *p, size_t len)
{
    json_error_t jerr;
    json_t *v = json_loadb(p, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);

    if (!json_is_string(v)) {
        json_decref(v);
        t->err = err_nomem;
        return NULL;
    }
    return v;
}

static int tv_value(struct tv *t, int depth, int is_key);

/* A table's entries [[k, v], ...] at its own depth. */
static int tv_table(struct tv *t, int depth)
{
    if (depth > CODEC_MAX_DEPTH)
        return tv_fail(t, err_depth);
    t->i++;                                     /* '[' */
    if (tv_eat(t, ']'))
        return 0;
    do {
        if (!tv_eat(t, '[') || tv_value(t, depth, 1) < 0 || !tv_eat(t, ',') ||
            tv_value(t, depth, 0) < 0 || !tv_eat(t, ']'))
            return tv_fail(t, t->err ? t->err : err_entry);
    } while (tv_eat(t, ','));
    return tv_eat(t, ']') ? 0 : tv_fail(t, err_entry);
}

/* ["b"|"f"|"t", payload] */
static int tv_tagged(struct tv *t, int depth, int is_key)
{
    struct restorer r = {NULL, NULL};
    const char *p;
    size_t len;
    json_t *tag, *payload;
    char c;
    int rc;

    t->i++;                                     /* '[' */
    if (tv_string(t, &p, &len) < 0)
        return tv_fail(t, err_tagged);
    if (len > 8)                                /* "\u00XX" at most for one byte */
        return tv_fail(t, err_tag);
    if (!(tag = tv_decode(t, p, len)))
        return -1;
    c = json_string_length(tag) == 1 ? json_string_value(tag)[0] : 0;
    json_decref(tag);
    if (!tv_eat(t, ','))
        return tv_fail(t, err_tagged);
    if (c == 't') {
        if (tv_peek(t) != '[')
            return tv_fail(t, err_tagged);
        if (is_key)
            return tv_fail(t, err_key);
        if (tv_table(t, depth + 1) < 0)
            return -1;
    } else if (c == 'b' || c == 'f') {
        if (tv_string(t, &p, &len) < 0)
            return tv_fail(t, err_tagged);
        if (!(payload = tv_decode(t, p, len)))
            return -1;
        rc = c == 'b' ? rst_bytes(&r, payload) : rst_float(&r, payload, is_key);
        json_decref(payload);
        if (rc < 0)
            return tv_fail(t, r.err);
    } else {
        return tv_fail(t, err_tag);
    }
    return tv_eat(t, ']') ? 0 : tv_fail(t, err_tagged);
}

/* A value (or a table key): a string, an integer, a boolean or a tagged
 * value; null, reals and objects are refused. */
static int tv_value(struct tv *t, int depth, int is_key)
{
    const char *p;
    size_t len, j;

    switch (tv_peek(t)) {
    case '"':
        return tv_string(t, &p, &len) < 0 ? tv_fail(t, err_value) : 0;
    case '[':
        return tv_tagged(t, depth, is_key);
    case -1:
    case '{':
    case 'n':
        return tv_fail(t, err_value);
    default:
        break;
    }
    /* true, false, or a number: an integer unless it has a fraction or an
     * exponent (the text is valid JSON) */
    for (j = t->i; j < t->n && strchr(" \t\r\n,]}:", t->s[j]) == NULL; j++)
        if (t->s[t->i] != 't' && t->s[t->i] != 'f' &&
            (t->s[j] == '.' || t->s[j] == 'e' || t->s[j] == 'E'))
            return tv_fail(t, err_value);
    if (j == t->i)
        return tv_fail(t, err_value);
    /* jansson reads one byte past a bare token and cannot put back a NUL:
     * it takes "46\0]" as [46], so this reader does too */
    t->i = j < t->n && t->s[j] == '\0' ? j + 1 : j;
    return 0;
}

int bindings_names_text(const char *s, size_t n, char **out, size_t *outlen, const char **err)
{
    struct tv t = {s, n, 0, NULL};
    char *buf = NULL;
    size_t used = 1;
    const char *p;
    size_t len;

    /* the names are the pairs' first members as written: at most the text */
    if (!(buf = malloc(n + 2))) {
        *err = err_nomem;
        return -1;
    }
    buf[0] = '[';
    if (!tv_eat(&t, '['))
        goto top;
    if (!tv_eat(&t, ']')) {
        do {
            if (!tv_eat(&t, '[') || tv_string(&t, &p, &len) < 0 || !tv_eat(&t, ','))
                goto top;
            if (tv_value(&t, 0, 0) < 0)
                goto fail;
            if (!tv_eat(&t, ']'))
                goto top;
            if (used > 1)
                buf[used++] = ',';
            memcpy(buf + used, p, len);
            used += len;
        } while (tv_eat(&t, ','));
        if (!tv_eat(&t, ']'))
            goto top;
    }
    if (tv_peek(&t) != -1)
        goto top;
    buf[used++] = ']';
    *out = buf;
    *outlen = used;
    return 0;
top:
    t.err = err_top;
fail:
    free(buf);
    *err = t.err ? t.err : err_top;
    return -1;
}
