/*
 * utf8.c - UTF-8 checks and repair for JSON strings (contract: utf8.h).
 */
#include "proto/utf8.h"

#include "proto/ascii.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the well-formed UTF-8 sequence at s[0..n) (n >= 1), or 0 when
 * s[0] does not start one.  RFC 3629: no overlong forms, no surrogates
 * (U+D800..U+DFFF), nothing above U+10FFFF, no truncated sequence. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t len, i;

    if (c < 0x80)
        return 1;
    if (c < 0xC2) /* continuation byte, or overlong 2-byte lead */
        return 0;
    if (c < 0xE0) {
        len = 2;
    } else if (c < 0xF0) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c < 0xF5) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* above U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

size_t utf8_complete(const char *s, size_t len)
{
    size_t i = len;

    while (i > 0 && len - i < 4) {
        unsigned char ch = (unsigned char)s[i - 1];
        size_t need;
        if (ch < 0x80)
            return len;
        if ((ch & 0xC0) == 0x80) {  /* continuation: look further back */
            i--;
            continue;
        }
        if (ch < 0xC2 || ch > 0xF4)
            return len;             /* never a lead byte: nothing to wait for */
        need = ch >= 0xF0 ? 4 : ch >= 0xE0 ? 3 : 2;
        return len - (i - 1) < need ? i - 1 : len;
    }
    return len;
}

int utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, k;

    while ((i += ascii_span(s + i, len - i)) < len) {
        if ((k = utf8_seq(p + i, len - i)) == 0)
            return 0;
        i += k;
    }
    return 1;
}

size_t utf8_json_cost(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, k, cost = 2;

    while (i < len) {
        k = ascii_json_span(s + i, len - i);
        cost += k;
        if ((i += k) == len)
            break;
        k = utf8_seq(p + i, len - i);
        if (k == 0) {
            cost += 3;
            i++;
            continue;
        }
        if (k == 1 && (p[i] < 0x20 || p[i] == '"' || p[i] == '\\'))
            cost += p[i] < 0x20 ? 6 : 2;
        else
            cost += k;
        i += k;
    }
    return cost;
}

/* The well-formed sequence at p[0..n) as utf8_seq, but with NUL counted
 * as invalid when nul_bad is set. */
static size_t utf8_seq_in(const unsigned char *p, size_t n, int nul_bad)
{
    return nul_bad && p[0] == '\0' ? 0 : utf8_seq(p, n);
}

char *utf8_repair(const char *s, size_t len, int nul_bad, size_t *outlen)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, o = 0, k, bad = 0;
    char *out;

    while (i < len) {
        k = utf8_seq_in(p + i, len - i, nul_bad);
        bad += k == 0;
        i += k ? k : 1;
    }
    if (bad > (SIZE_MAX - len - 1) / 2)
        return NULL;
    if ((out = malloc(len + 2 * bad + 1)) == NULL)
        return NULL;
    for (i = 0; i < len;) {
        k = utf8_seq_in(p + i, len - i, nul_bad);
        if (k == 0) {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
        }
    }
    out[o] = '\0';
    *outlen = o;
    return out;
}

json_t *utf8_string_new(const char *s, size_t len)
{
    json_t *j;
    char *fixed;
    size_t n;

    if (utf8_valid(s, len))
        return json_stringn_nocheck(s, len);
    if ((fixed = utf8_repair(s, len, 0, &n)) == NULL)
        return NULL;
    j = json_stringn_nocheck(fixed, n);
    free(fixed);
    return j;
}
