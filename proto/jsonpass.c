/*
 * jsonpass.c - validate JSON without building it, walk it, and splice raw
 * bytes into what is sent.  See jsonpass.h.
 *
 * The validator splits the work with jansson: a value of at most `chunk`
 * bytes, or any value that is not a container, is parsed by json_loadb
 * itself (and freed at once), so everything jansson checks inside values
 * (UTF-8, escapes, numbers, NUL in keys) is judged by jansson.  What this
 * file checks is the structure of the large containers above those pieces
 * (brackets, commas, colons, whitespace) and the nesting depth, which it
 * counts as jansson does: every value, scalar or container, is one level
 * deeper than the container holding it, and no value may be deeper than
 * JP_MAX_DEPTH.  Consecutive small elements of a large container go to
 * jansson together, wrapped in a container of the same kind, so the cost
 * per element stays jansson's.
 *
 * One exception: a string value larger than `chunk` (the megabytes of a
 * returned text) is checked here, by jansson's own rules for a string
 * value, because jansson would copy it byte by byte into a buffer and then
 * into a string only to free both: two thirds of the supervisor's time for
 * such a message.  The rules (jansson 2.14 lex_scan_string): no byte below
 * 0x20; a backslash is followed by one of "\/bfnrt or by u and four hex
 * digits; a \u escape of a high surrogate is followed by a \u escape of a
 * low one, and a low one never stands alone; \u0000 is allowed (the caller
 * passes JSON_ALLOW_NUL); the bytes are strict UTF-8 (utf8_valid).
 * Keys still go to jansson, which refuses a NUL in them.  fuzz_jsonpass
 * holds the two to the same answers.
 */
#include "proto/jsonpass.h"

#include "proto/ascii.h"
#include "proto/mutant.h"
#include "proto/utf8.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define FAIL SIZE_MAX

static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int is_delim(unsigned char c)
{
    return is_ws(c) || c == ',' || c == ':' || c == '[' || c == ']' || c == '{' || c == '}' ||
           c == '"';
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && is_ws((unsigned char)s[i]))
        i++;
    return i;
}

/* Index after the closing quote of the string opening at s[i]; FAIL when
 * it does not close before n.  A quote closes it when an even number of
 * backslashes (inside the string) stands right before it: memchr finds the
 * quotes, so a megabyte of text is not looked at byte by byte. */
static size_t string_end(const char *s, size_t n, size_t i)
{
    size_t open = i;
    const char *q;

    for (i++; i < n && (q = memchr(s + i, '"', n - i)) != NULL; i = (size_t)(q - s) + 1) {
        size_t k = (size_t)(q - s), bs = 0;
        while (k - bs > open + 1 && s[k - bs - 1] == '\\')
            bs++;
        if (bs % 2 == 0)
            return (size_t)(q - s) + 1;
    }
    return FAIL;
}

/*
 * End (exclusive) of the value starting at s[i], bounded by n, and in *md
 * the depth of its deepest value counted from it (a scalar 1, `[]` 1,
 * `[1]` 2).  Brackets are matched by count, not kind: a wrong kind is found
 * later, by jansson or by walk().  FAIL when nothing value-like starts at i
 * or it does not end before n.
 */
static size_t value_end(const char *s, size_t n, size_t i, int *md)
{
    size_t d = 0, maxd = 1;
    int in_scalar = 0;
    unsigned char c;

    *md = 0;
    if (i >= n)
        return FAIL;
    c = (unsigned char)s[i];
    if (c == '"') {
        *md = 1;
        return string_end(s, n, i);
    }
    if (c != '[' && c != '{') {
        size_t j = i;
        while (j < n && !is_delim((unsigned char)s[j]))
            j++;
        if (j == i)
            return FAIL;
        *md = 1;
        return j;
    }
    for (; i < n; i++) {
        c = (unsigned char)s[i];
        if (c == '"') {
            if (d + 1 > maxd)
                maxd = d + 1;
            if ((i = string_end(s, n, i)) == FAIL)
                return FAIL;
            i--;
            in_scalar = 0;
        } else if (c == '[' || c == '{') {
            if (++d > maxd)
                maxd = d;
            in_scalar = 0;
        } else if (c == ']' || c == '}') {
            if (--d == 0) {
                *md = maxd > (size_t)JP_MAX_DEPTH + 1 ? JP_MAX_DEPTH + 1 : (int)maxd;
                return i + 1;
            }
            in_scalar = 0;
        } else if (is_delim(c)) {
            in_scalar = 0;
        } else if (!in_scalar) {
            in_scalar = 1;
            if (d + 1 > maxd)
                maxd = d + 1;
        }
    }
    return FAIL;
}

static int jansson_ok(const char *p, size_t n)
{
    json_error_t err;
    json_t *v = json_loadb(p, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);

    json_decref(v);
    return v ? 0 : -1;
}

/* open + s[0..n) + close, validated by jansson. */
static int jansson_wrapped(char open, const char *s, size_t n, const char *close)
{
    size_t cl = strlen(close);
    char *buf = malloc(n + cl + 1);
    int rc;

    if (!buf)
        return -1;
    buf[0] = open;
    memcpy(buf + 1, s, n);
    memcpy(buf + 1 + n, close, cl);
    rc = jansson_ok(buf, n + 1 + cl);
    free(buf);
    return rc;
}

long jp_hex4(const char *s)
{
    long v = 0;

    for (int i = 0; i < 4; i++) {
        unsigned char c = (unsigned char)s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
                c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* 0 when p[0..n) is one JSON string value jansson accepts (see the header
 * comment for the rules), else -1. */
static int string_ok(const char *p, size_t n)
{
    size_t i = 1, j;

    if (n < 2 || p[0] != '"' || p[n - 1] != '"')
        return -1;
    n--;                                        /* the closing quote */
    while ((i += ascii_json_span(p + i, n - i)) < n) {
        unsigned char c = (unsigned char)p[i];
        long u, lo;

        if (c >= 0x80) {                        /* a run of multi-byte sequences */
            for (j = i; j < n && (unsigned char)p[j] >= 0x80; j++)
                ;
            if (!MUTANT(STRING_UTF8) && !utf8_valid(p + i, j - i))
                return -1;
            i = j;
        } else if (c < 0x20 || c == '"') {
            return -1;                          /* a quote ends the string early */
        } else if (c != '\\') {
            i++;
        } else if (i + 1 < n && strchr("\"\\/bfnrt", p[i + 1]) && p[i + 1] != '\0') {
            i += 2;
        } else if (i + 6 <= n && p[i + 1] == 'u' && (u = jp_hex4(p + i + 2)) >= 0) {
            i += 6;
            if (u >= 0xDC00 && u <= 0xDFFF)
                return -1;                      /* a low surrogate alone */
            if (u >= 0xD800 && u <= 0xDBFF) {   /* a high one: its low one follows */
                if (i + 6 > n || p[i] != '\\' || p[i + 1] != 'u' ||
                    (lo = jp_hex4(p + i + 2)) < 0xDC00 || lo > 0xDFFF)
                    return -1;
                i += 6;
            }
        } else {
            return -1;
        }
    }
    return 0;
}

static int check(const char *p, size_t len, size_t outside, int md, size_t chunk);

/* A large container p[0..len) (p[0] is '[' or '{'), `outside` containers
 * around it. */
static int walk(const char *p, size_t len, size_t outside, size_t chunk)
{
    int obj = p[0] == '{';
    size_t end = len - 1, i, run = 0, run_end = 0;
    int in_run = 0;

    if (p[end] != (obj ? '}' : ']'))
        return -1;
    i = skip_ws(p, end, 1);
    if (i == end)
        return 0;
    for (;;) {
        size_t ms = i, ke = 0, ve, next;
        int md;

        if (obj) {
            if (p[i] != '"' || (ke = string_end(p, end, i)) == FAIL)
                return -1;
            i = skip_ws(p, end, ke);
            if (i >= end || p[i] != ':')
                return -1;
            i = skip_ws(p, end, i + 1);
        }
        if ((ve = value_end(p, end, i, &md)) == FAIL)
            return -1;
        if (outside + 1 + (size_t)md > JP_MAX_DEPTH)
            return -1;
        next = skip_ws(p, end, ve);
        if (next != end && p[next] != ',')
            return -1;
        if (ve - ms > chunk) {
            if (in_run && jansson_wrapped(p[0], p + run, run_end - run, obj ? "}" : "]") < 0)
                return -1;
            in_run = 0;
            if (obj && jansson_wrapped('{', p + ms, ke - ms, ":0}") < 0)
                return -1;
            if (check(p + i, ve - i, outside + 1, md, chunk) < 0)
                return -1;
        } else {
            if (in_run && ve - run > chunk) {
                if (jansson_wrapped(p[0], p + run, run_end - run, obj ? "}" : "]") < 0)
                    return -1;
                in_run = 0;
            }
            if (!in_run) {
                run = ms;
                in_run = 1;
            }
            run_end = ve;
        }
        if (next == end)
            break;
        i = skip_ws(p, end, next + 1);
        if (i >= end)
            return -1;                  /* a comma before the close */
    }
    if (in_run && jansson_wrapped(p[0], p + run, run_end - run, obj ? "}" : "]") < 0)
        return -1;
    return 0;
}

/* The value p[0..len), `outside` containers around it, its own depth md. */
static int check(const char *p, size_t len, size_t outside, int md, size_t chunk)
{
    if (outside + (size_t)md > JP_MAX_DEPTH)
        return -1;
    if (MUTANT(PASS_WALK))
        chunk = SIZE_MAX;               /* mutant: jansson builds the whole */
    if (len > chunk && p[0] == '"')
        return string_ok(p, len);
    if (len <= chunk || (p[0] != '[' && p[0] != '{'))
        return jansson_ok(p, len);
    return walk(p, len, outside, chunk);
}

int jp_validate(const char *s, size_t n, size_t chunk)
{
    size_t i = skip_ws(s, n, 0), e;
    int md;

    if (chunk == 0)
        chunk = 1;
    if ((e = value_end(s, n, i, &md)) == FAIL || skip_ws(s, n, e) != n)
        return -1;
    return check(s + i, e - i, 0, md, chunk);
}

struct jp_span jp_trim(const char *s, size_t n)
{
    size_t i = skip_ws(s, n, 0);

    while (n > i && is_ws((unsigned char)s[n - 1]))
        n--;
    return (struct jp_span){ s + i, n - i };
}

int jp_iter_init(struct jp_iter *it, struct jp_span v)
{
    if (v.n < 2 || (v.p[0] != '[' && v.p[0] != '{'))
        return -1;
    it->s = v.p;
    it->n = v.n - 1;                    /* the closing bracket */
    it->i = 1;
    it->obj = v.p[0] == '{';
    return 0;
}

int jp_iter_next(struct jp_iter *it, struct jp_span *key, struct jp_span *val)
{
    size_t i = skip_ws(it->s, it->n, it->i), e;
    int md;

    if (i >= it->n)
        return 0;
    if (it->obj) {
        if (it->s[i] != '"' || (e = string_end(it->s, it->n, i)) == FAIL)
            return 0;
        key->p = it->s + i;
        key->n = e - i;
        i = skip_ws(it->s, it->n, e);
        if (i >= it->n || it->s[i] != ':')
            return 0;
        i = skip_ws(it->s, it->n, i + 1);
    } else if (key) {
        key->p = NULL;
        key->n = 0;
    }
    if ((e = value_end(it->s, it->n, i, &md)) == FAIL)
        return 0;
    val->p = it->s + i;
    val->n = e - i;
    i = skip_ws(it->s, it->n, e);
    it->i = i < it->n && it->s[i] == ',' ? i + 1 : it->n;
    return 1;
}

json_t *jp_key(struct jp_span key)
{
    json_error_t err;

    return json_loadb(key.p, key.n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
}

char *jp_quote(const char *s, size_t n, size_t *len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t out = 2;
    char *buf, *q;

    for (size_t i = 0; i < n; i++) {
        size_t k = ascii_json_span(s + i, n - i);
        unsigned char c;

        out += k;
        if ((i += k) == n)
            break;
        c = (unsigned char)s[i];
        out += c == '"' || c == '\\' || c == '\n' || c == '\t' || c == '\r' || c == '\b' ||
               c == '\f' ? 2 : c < 0x20 ? 6 : 1;
    }
    if (!(buf = malloc(out + 1)))
        return NULL;
    q = buf;
    *q++ = '"';
    for (size_t i = 0; i < n; i++) {
        size_t k = ascii_json_span(s + i, n - i);
        unsigned char c;
        const char *esc = NULL;

        memcpy(q, s + i, k);
        q += k;
        if ((i += k) == n)
            break;
        c = (unsigned char)s[i];
        switch (c) {
        case '"':  esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\t': esc = "\\t"; break;
        case '\r': esc = "\\r"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default: break;
        }
        if (esc) {
            *q++ = esc[0];
            *q++ = esc[1];
        } else if (c < 0x20) {
            memcpy(q, "\\u00", 4);
            q[4] = hex[c >> 4];
            q[5] = hex[c & 15];
            q += 6;
        } else {
            *q++ = (char)c;
        }
    }
    *q++ = '"';
    *q = '\0';
    *len = out;
    return buf;
}

/* ------------------------------------------------------------------------
 * Splicing
 * --------------------------------------------------------------------- */

static char nonce[17];

static void init_nonce(void)
{
    unsigned char b[8];
    uint64_t v = 0;

    if (nonce[0])
        return;
    if (getrandom(b, sizeof b, GRND_NONBLOCK) == (ssize_t)sizeof b)
        memcpy(&v, b, sizeof v);
    else
        v = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    snprintf(nonce, sizeof nonce, "%016llx", (unsigned long long)v);
}

json_t *jp_token(unsigned i)
{
    char t[64];

    init_nonce();
    snprintf(t, sizeof t, "\x01sbx-splice-%u-%s\x01", i, nonce);
    return json_string(t);
}

struct hit {
    size_t at, len;
    const struct jp_span *raw;
};

static int by_pos(const void *a, const void *b)
{
    const struct hit *x = a, *y = b;
    return x->at < y->at ? -1 : x->at > y->at;
}

char *jp_dump_spliced(const json_t *v, const struct jp_splice *sp, size_t nsp, size_t *len)
{
    struct hit hits[16];
    char *text, *out, *q;
    size_t n, total, pos;

    if (nsp > 16 || !(text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)))
        return NULL;
    n = strlen(text);
    total = n;
    init_nonce();
    for (size_t i = 0; i < nsp; i++) {
        char tok[80];
        int tl = snprintf(tok, sizeof tok, "\"\\u0001sbx-splice-%zu-%s\\u0001\"", i, nonce);
        const char *at = memmem(text, n, tok, (size_t)tl);

        if (!at || memmem(at + 1, n - (size_t)(at + 1 - text), tok, (size_t)tl)) {
            free(text);
            return NULL;
        }
        hits[i] = (struct hit){ (size_t)(at - text), (size_t)tl, &sp[i].raw };
        total = total - (size_t)tl + sp[i].raw.n;
    }
    qsort(hits, nsp, sizeof *hits, by_pos);
    if (!(out = malloc(total + 1))) {
        free(text);
        return NULL;
    }
    q = out;
    pos = 0;
    for (size_t i = 0; i < nsp; i++) {
        memcpy(q, text + pos, hits[i].at - pos);
        q += hits[i].at - pos;
        memcpy(q, hits[i].raw->p, hits[i].raw->n);
        q += hits[i].raw->n;
        pos = hits[i].at + hits[i].len;
    }
    memcpy(q, text + pos, n - pos);
    q += n - pos;
    *q = '\0';
    free(text);
    *len = total;
    return out;
}

void jp_init(void)
{
    init_nonce();
}

