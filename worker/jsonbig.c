/*
 * jsonbig.c - load and dump trees whose long strings are handled in one
 * pass.  See jsonbig.h.
 */
#include "worker/jsonbig.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/jsonpass.h"

/* ---- loading ---- */

static char *put_utf8(char *q, unsigned long u)
{
    if (u < 0x80) {
        *q++ = (char)u;
    } else if (u < 0x800) {
        *q++ = (char)(0xC0 | u >> 6);
        *q++ = (char)(0x80 | (u & 0x3F));
    } else if (u < 0x10000) {
        *q++ = (char)(0xE0 | u >> 12);
        *q++ = (char)(0x80 | (u >> 6 & 0x3F));
        *q++ = (char)(0x80 | (u & 0x3F));
    } else {
        *q++ = (char)(0xF0 | u >> 18);
        *q++ = (char)(0x80 | (u >> 12 & 0x3F));
        *q++ = (char)(0x80 | (u >> 6 & 0x3F));
        *q++ = (char)(0x80 | (u & 0x3F));
    }
    return q;
}

/* The string value of the quoted, validated text v: the bytes between the
 * escapes copied whole.  A decoded string is never longer than its text. */
static json_t *load_string(struct jp_span v)
{
    const char *p = v.p + 1, *end = v.p + v.n - 1;
    char *buf = malloc(v.n), *q = buf;
    json_t *j = NULL;

    if (!buf || v.n < 2 || v.p[v.n - 1] != '"') {
        free(buf);
        return NULL;
    }
    while (p < end) {
        const char *bs = memchr(p, '\\', (size_t)(end - p));
        size_t run = (size_t)((bs ? bs : end) - p);
        long u, lo;

        memcpy(q, p, run);
        q += run;
        p += run;
        if (!bs)
            break;
        if (end - p < 2)
            goto out;
        switch (p[1]) {
        case '"': case '\\': case '/': *q++ = p[1]; p += 2; continue;
        case 'b': *q++ = '\b'; p += 2; continue;
        case 'f': *q++ = '\f'; p += 2; continue;
        case 'n': *q++ = '\n'; p += 2; continue;
        case 'r': *q++ = '\r'; p += 2; continue;
        case 't': *q++ = '\t'; p += 2; continue;
        case 'u': break;
        default: goto out;
        }
        if (end - p < 6 || (u = jp_hex4(p + 2)) < 0 || (u >= 0xDC00 && u <= 0xDFFF))
            goto out;
        p += 6;
        if (u >= 0xD800 && u <= 0xDBFF) {           /* its low surrogate follows */
            if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || (lo = jp_hex4(p + 2)) < 0xDC00 ||
                lo > 0xDFFF)
                goto out;
            u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            p += 6;
        }
        q = put_utf8(q, (unsigned long)u);
    }
    j = json_stringn_nocheck(buf, (size_t)(q - buf));  /* validated UTF-8 */
out:
    free(buf);
    return j;
}

/* open + s[0..n) + close, parsed by jansson. */
static json_t *load_wrapped(char open, const char *s, size_t n)
{
    char *buf = malloc(n + 2);
    json_t *j;

    if (!buf)
        return NULL;
    buf[0] = open;
    memcpy(buf + 1, s, n);
    buf[n + 1] = open == '{' ? '}' : ']';
    j = json_loadb(buf, n + 2, JSON_ALLOW_NUL, NULL);
    free(buf);
    return j;
}

static json_t *load(struct jp_span v, size_t chunk, int depth);

/* Add the run s[0..n) of small members (parsed together) to out. */
static int add_run(json_t *out, int obj, const char *s, size_t n)
{
    json_t *t = load_wrapped(obj ? '{' : '[', s, n);
    int rc = !t ? -1 : obj ? json_object_update(out, t) : json_array_extend(out, t);

    json_decref(t);
    return rc;
}

static json_t *load_container(struct jp_span v, size_t chunk, int depth)
{
    int obj = v.p[0] == '{';
    json_t *out = obj ? json_object() : json_array(), *val, *key;
    struct jp_iter it;
    struct jp_span k, m;
    const char *run = NULL, *run_end = NULL;

    if (!out || jp_iter_init(&it, v) < 0)
        goto fail;
    while (jp_iter_next(&it, &k, &m)) {
        const char *ms = obj ? k.p : m.p, *me = m.p + m.n;
        if ((size_t)(me - ms) <= chunk) {           /* small: joins the run */
            if (run && (size_t)(me - run) > chunk) {
                if (add_run(out, obj, run, (size_t)(run_end - run)) < 0)
                    goto fail;
                run = NULL;
            }
            if (!run)
                run = ms;
            run_end = me;
            continue;
        }
        if (run && add_run(out, obj, run, (size_t)(run_end - run)) < 0)
            goto fail;
        run = NULL;
        if (!(val = load(m, chunk, depth + 1)))
            goto fail;
        if (obj) {
            if (!(key = jp_key(k))) {
                json_decref(val);
                goto fail;
            }
            if (json_object_set_new(out, json_string_value(key), val) < 0) {  /* takes val */
                json_decref(key);
                goto fail;
            }
            json_decref(key);
        } else if (json_array_append_new(out, val) < 0) {
            goto fail;
        }
    }
    if (run && add_run(out, obj, run, (size_t)(run_end - run)) < 0)
        goto fail;
    return out;
fail:
    json_decref(out);
    return NULL;
}

static json_t *load(struct jp_span v, size_t chunk, int depth)
{
    if (v.n == 0 || depth > JP_MAX_DEPTH)
        return NULL;
    if (v.n > chunk && v.p[0] == '"')
        return load_string(v);
    if (v.n > chunk && (v.p[0] == '[' || v.p[0] == '{'))
        return load_container(v, chunk, depth);
    return json_loadb(v.p, v.n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
}

json_t *jb_load(const char *s, size_t n, size_t chunk)
{
    return load(jp_trim(s, n), chunk ? chunk : 1, 1);
}

/* ---- dumping ---- */
/* A string of a container that jb_dump swapped for a token. */
struct swapped {
    json_t *parent, *orig;      /* orig: the reference the parent held */
    const char *key;            /* objects: the member's key (the parent's) */
    size_t index;               /* arrays */
};

/* Put `with` in the place of member m of v (key for objects, else index).
 * Takes with; 0 on success. */
static int put_member(json_t *v, const char *key, size_t index, json_t *with)
{
    return key ? json_object_set_new(v, key, with) : json_array_set_new(v, index, with);
}

/* Member m of v: swap it for token *n when it is a long string (0, or -1
 * when out of memory: stop), else look inside it. */
static int swap_member(json_t *v, const char *key, size_t index, json_t *m, size_t big,
                       struct swapped *sw, struct jp_splice *sp, size_t *n, int depth);

static int swap_big(json_t *v, size_t big, struct swapped *sw, struct jp_splice *sp, size_t *n,
                    int depth)
{
    const char *key;
    json_t *m;
    size_t i;

    if (depth > JP_MAX_DEPTH)
        return 0;
    if (json_is_object(v)) {
        json_object_foreach(v, key, m)
            if (*n == 16 || swap_member(v, key, 0, m, big, sw, sp, n, depth) < 0)
                return -1;
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, m)
            if (*n == 16 || swap_member(v, NULL, i, m, big, sw, sp, n, depth) < 0)
                return -1;
    }
    return 0;
}

static int swap_member(json_t *v, const char *key, size_t index, json_t *m, size_t big,
                       struct swapped *sw, struct jp_splice *sp, size_t *n, int depth)
{
    if (!json_is_string(m) || json_string_length(m) <= big)
        return swap_big(m, big, sw, sp, n, depth + 1);
    sw[*n] = (struct swapped){ v, json_incref(m), key, index };
    sp[*n].raw.p = jp_quote(json_string_value(m), json_string_length(m), &sp[*n].raw.n);
    if (!sp[*n].raw.p || put_member(v, key, index, jp_token((unsigned)*n)) < 0) {
        free((char *)sp[*n].raw.p);
        json_decref(m);
        return -1;
    }
    (*n)++;
    return 0;
}

char *jb_dump(json_t *v, size_t big, size_t *len)
{
    struct swapped sw[16];
    struct jp_splice sp[16];
    size_t n = 0;
    char *out;

    (void)swap_big(v, big, sw, sp, &n, 1);    /* what it swapped is spliced */
    out = n ? jp_dump_spliced(v, sp, n, len) : json_dumps(v, JSON_COMPACT);
    if (out && !n)
        *len = strlen(out);
    while (n-- > 0) {           /* put the strings back, the last swapped first */
        put_member(sw[n].parent, sw[n].key, sw[n].index, sw[n].orig);
        free((char *)sp[n].raw.p);
    }
    return out;
}
