/*
 * inbuf.c - the growable input buffer.  See inbuf.h.
 */
#include "proto/inbuf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MIN_CAP 256     /* small peers stay small */

void inbuf_free(struct inbuf *b)
{
    free(b->buf);
    memset(b, 0, sizeof *b);
}

static void compact(struct inbuf *b)
{
    if (b->pos == 0)
        return;
    memmove(b->buf, b->buf + b->pos, b->len - b->pos);
    b->len -= b->pos;
    b->pos = 0;
}

/* Make room for n more bytes (see the contract for the policy). */
static int reserve(struct inbuf *b, size_t n, size_t bound)
{
    size_t need, ncap;
    char *nbuf;

    if (b->pos > 0 && b->pos >= b->len - b->pos)
        compact(b);
    if (b->cap - b->len >= n)
        return 0;
    compact(b);
    if (n > SIZE_MAX / 2 - b->len)
        return -1;
    need = b->len + n;
    if (need <= b->cap)
        return 0;
    ncap = b->cap ? b->cap : MIN_CAP;
    while (ncap < need)
        ncap *= 2;
    if (ncap > bound && need <= bound)
        ncap = bound;
    nbuf = realloc(b->buf, ncap);
    if (nbuf == NULL)
        return -1;
    b->buf = nbuf;
    b->cap = ncap;
    return 0;
}

int inbuf_append(struct inbuf *b, const void *data, size_t n, size_t bound)
{
    if (n == 0)
        return 0;
    if (reserve(b, n, bound) < 0)
        return -1;
    memcpy(b->buf + b->len, data, n);
    b->len += n;
    return 0;
}

void inbuf_consume(struct inbuf *b, size_t n)
{
    b->pos += n;
    if (b->pos == b->len)
        b->pos = b->len = 0;    /* nothing held: reset without moving */
}

void inbuf_release_idle(struct inbuf *b, size_t keep)
{
    if (b->pos == b->len && b->cap > keep)
        inbuf_free(b);
}
