/*
 * bindings.c - the bindings format (contract: bindings.h): base64 and hex
 * floats, the check of a whole value, the walk that hands a checked value
 * to a sink, and the names, from a tree or from text.  No Lua: the
 * worker's export and restore are worker/bindings_lua.c.
 *
 * The check and the walk are one pass of the same code (no sink: check
 * only), so what the supervisor accepts and what the worker restores
 * cannot differ. */
#include "proto/bindings.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIND_STR_(x) #x
#define BIND_STR(x) BIND_STR_(x)

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
                                BIND_STR(BINDINGS_MAX_DEPTH);

/* ---------------------------------------------------------------- base64 */

static const char b64_digits[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t bindings_b64_len(size_t n)
{
    return n / 3 * 4 + (n % 3 ? 4 : 0);
}

json_t *bindings_b64_string(const unsigned char *in, size_t n)
{
    size_t i, o = 0, olen = bindings_b64_len(n);
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

size_t bindings_b64_decode(const char *in, size_t n, unsigned char *out)
{
    size_t i, j, o = 0, pad = 0, end;
    uint32_t w;
    int v;

    if (n % 4 != 0)
        return BINDINGS_B64_BAD;
    if (n > 0 && in[n - 1] == '=')
        pad = in[n - 2] == '=' ? 2 : 1;
    end = n - pad;
    for (i = 0; i < n; i += 4) {
        w = 0;
        for (j = i; j < i + 4; j++) {
            v = j < end ? b64_value((unsigned char)in[j]) : 0;
            if (v < 0)
                return BINDINGS_B64_BAD;
            w = w << 6 | (uint32_t)v;
        }
        if (i + 4 == n && pad > 0 && (w & ((1u << (8 * pad)) - 1)) != 0)
            return BINDINGS_B64_BAD;
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

/* ---------------------------------------------------------- check, walk */

/* Validates (sk == NULL) or hands stored values to sk (sk != NULL).  The
 * second pass runs only after a validation pass succeeded, so its checks
 * cannot fail. */
struct restorer {
    const struct bindings_sink *sk;
    void *ctx;
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

    if ((n = bindings_b64_decode(s, len, NULL)) == BINDINGS_B64_BAD)
        return rst_fail(r, err_b64);
    if (r->sk != NULL)
        r->sk->bytes(r->ctx, s, len, n);
    return 0;
}

static int rst_float(struct restorer *r, const json_t *p, int is_key)
{
    double d;

    if (parse_float(json_string_value(p), json_string_length(p), &d) < 0)
        return rst_fail(r, err_float);
    if (is_key && isnan(d))
        return rst_fail(r, err_key);
    if (r->sk != NULL)
        r->sk->number(r->ctx, d);
    return 0;
}

/* Entries [[k, v], ...] of a table whose own depth is depth. */
static int rst_table(struct restorer *r, const json_t *p, int depth)
{
    size_t i, n = json_array_size(p), seq = 0;
    const json_t *e;

    if (depth > BINDINGS_MAX_DEPTH)
        return rst_fail(r, err_depth);
    for (i = 0; i < n; i++) {
        e = json_array_get(p, i);
        if (!json_is_array(e) || json_array_size(e) != 2)
            return rst_fail(r, err_entry);
        if (seq == i && json_is_integer(json_array_get(e, 0)) &&
            json_integer_value(json_array_get(e, 0)) == (json_int_t)i + 1)
            seq++;
    }
    if (r->sk != NULL)
        r->sk->table(r->ctx, seq, n - seq);
    for (i = 0; i < n; i++) {
        e = json_array_get(p, i);
        if (rst_value(r, json_array_get(e, 0), depth, 1) < 0 ||
            rst_value(r, json_array_get(e, 1), depth, 0) < 0)
            return -1;
        if (r->sk != NULL)
            r->sk->entry(r->ctx);
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
    const struct bindings_sink *sk = r->sk;

    switch (json_typeof(v)) {
    case JSON_TRUE:
    case JSON_FALSE:
        if (sk != NULL)
            sk->boolean(r->ctx, json_is_true(v));
        return 0;
    case JSON_INTEGER:
        if (sk != NULL)
            sk->integer(r->ctx, json_integer_value(v));
        return 0;
    case JSON_STRING:
        if (sk != NULL)
            sk->string(r->ctx, json_string_value(v), json_string_length(v));
        return 0;
    case JSON_ARRAY:
        return rst_tagged(r, v, depth, is_key);
    default:
        return rst_fail(r, err_value);
    }
}

int bindings_check(const json_t *b, const char **err)
{
    struct restorer r = {NULL, NULL, NULL};
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

int bindings_walk(const json_t *v, const struct bindings_sink *sk, void *ctx, const char **err)
{
    struct restorer r = {sk, ctx, NULL};

    if (rst_value(&r, v, 0, 0) < 0) {
        *err = r.err;
        return -1;
    }
    return 0;
}

json_t *bindings_names(const json_t *b, const char **err)
{
    json_t *names, *name;
    const json_t *e;
    size_t i;

    if (bindings_check(b, err) < 0)
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
 * bindings_check(), without a tree: the supervisor reads bindings larger than the
 * tree budget it grants a message (a table of 50,000 records is 3 MB of
 * text and some 50 MB of jansson values).  Only strings that need their
 * value are decoded (tags, "b" and "f" payloads), one at a time; every
 * byte is looked at a bounded number of times, and the recursion is bounded
 * by BINDINGS_MAX_DEPTH tables (an array that is not a table's is refused at
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
    if (depth > BINDINGS_MAX_DEPTH)
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
    struct restorer r = {NULL, NULL, NULL};
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
