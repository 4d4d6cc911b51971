/*
 * ndjson.c - incremental newline-delimited framing with a hard bound.
 *
 * Layout of the buffer (a proto/inbuf): the held bytes are zero or more
 * complete lines (each ending in '\n') followed by the unfinished line, whose
 * length is `tail`.  The first `scan` held bytes are known to hold no '\n',
 * so ndjson_next() never searches a byte twice.
 *
 * Bounding: ndjson_feed() stores at most max_line + 1 bytes of the unfinished
 * line (a line of max_line bytes plus its '\r').  When a line outgrows that,
 * the stored bytes become a "stub": exactly max_line + 1 bytes whose last
 * byte is not '\r', so that the stub, once ended by '\n', reads as a line of
 * max_line + 1 bytes, which ndjson_next() reports as too long.  The rest of
 * the line is dropped by ndjson_feed() without being stored.
 */
#include "proto/ndjson.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Values of rd->discarding. */
enum {
    KEEP = 0,       /* storing bytes normally */
    STUB_HELD,      /* the unfinished line is an unreported stub; feed drops
                     * the rest of it and ends the stub with '\n' */
    DROPPING,       /* reported and removed; feed drops through the '\n' */
};

#define STUB_BYTE  '#'  /* replaces a final '\r' of a stub; never delivered */

void ndjson_init(struct ndjson_reader *rd, size_t max_line)
{
    memset(rd, 0, sizeof *rd);
    rd->max_line = max_line > SIZE_MAX / 4 ? SIZE_MAX / 4 : max_line;
}

void ndjson_free(struct ndjson_reader *rd)
{
    inbuf_free(&rd->in);
    ndjson_init(rd, rd->max_line);
}

void ndjson_shrink(struct ndjson_reader *rd)
{
    if (inbuf_held(&rd->in) == 0)
        rd->scan = 0;
    inbuf_release_idle(&rd->in, NDJSON_IDLE_KEEP);
}

size_t ndjson_allocated(const struct ndjson_reader *rd)
{
    return rd->in.cap;
}

size_t ndjson_pending(const struct ndjson_reader *rd)
{
    return inbuf_held(&rd->in);
}

/* Every owner of a reader drains it after each feed, so the buffer need
 * never grow past one maximal line plus its "\r\n" (see inbuf.h). */
static int append(struct ndjson_reader *rd, const char *data, size_t n)
{
    return inbuf_append(&rd->in, data, n, rd->max_line + 2);
}

/* The unfinished line has reached max_line + 1 bytes and is known to be too
 * long: make sure it cannot be mistaken for max_line bytes plus '\r'. */
static void hold_stub(struct ndjson_reader *rd)
{
    if (rd->in.buf[rd->in.len - 1] == '\r')
        rd->in.buf[rd->in.len - 1] = STUB_BYTE;
    rd->discarding = STUB_HELD;
}

/* The segment ends the line being discarded (it holds the '\n'). */
static int end_discard(struct ndjson_reader *rd)
{
    if (rd->discarding == STUB_HELD && append(rd, "\n", 1) < 0)
        return -1;
    rd->discarding = KEEP;
    rd->tail = 0;
    return 0;
}

/*
 * Feed works one segment at a time: the bytes up to and including the next
 * '\n', or all remaining bytes.  On allocation failure the bytes of the
 * current segment are lost and -1 is returned; the reader stays consistent
 * but the stream is no longer trustworthy, so owners drop the peer.
 */
int ndjson_feed(struct ndjson_reader *rd, const char *data, size_t n)
{
    size_t limit = rd->max_line + 1;

    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t seg = nl ? (size_t)(nl - data) + 1 : n;
        size_t body = nl ? seg - 1 : seg;   /* bytes before the '\n' */
        size_t room = limit - rd->tail;

        if (rd->discarding != KEEP) {
            if (nl && end_discard(rd) < 0)
                return -1;
        } else if (body <= room) {
            if (append(rd, data, seg) < 0)
                return -1;
            rd->tail = nl ? 0 : rd->tail + seg;
            if (rd->tail == limit && rd->in.buf[rd->in.len - 1] != '\r')
                hold_stub(rd);
        } else {
            /* Too long: keep room bytes as the stub; the '\n', if any, is
             * handled by the discarding branch on the next turn. */
            if (append(rd, data, room) < 0)
                return -1;
            rd->tail = limit;
            hold_stub(rd);
            seg = body;
        }
        data += seg;
        n -= seg;
    }
    return 0;
}

static int is_blank(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t')
            return 0;
    return 1;
}

/* No '\n' is held after pos.  If the unfinished line is a stub, report it
 * now and forget it: the peer may never send the newline. */
static enum ndjson_status no_line(struct ndjson_reader *rd)
{
    if (rd->discarding != STUB_HELD)
        return NDJSON_AGAIN;
    rd->head = inbuf_data(&rd->in);     /* consume never moves the bytes */
    rd->head_len = inbuf_held(&rd->in);
    inbuf_consume(&rd->in, inbuf_held(&rd->in));
    rd->scan = 0;
    rd->tail = 0;
    rd->discarding = DROPPING;
    return NDJSON_TOO_LONG;
}

void ndjson_too_long_head(const struct ndjson_reader *rd, const char **head, size_t *len)
{
    *head = rd->head;
    *len = rd->head_len;
}

enum ndjson_status ndjson_next(struct ndjson_reader *rd, const char **line, size_t *len)
{
    *line = NULL;
    *len = 0;
    for (;;) {
        size_t held = inbuf_held(&rd->in);
        char *start, *nl;
        size_t n;

        if (held == 0) {
            rd->scan = 0;
            return no_line(rd);
        }
        start = inbuf_data(&rd->in);
        nl = memchr(start + rd->scan, '\n', held - rd->scan);
        if (nl == NULL) {
            rd->scan = held;
            return no_line(rd);
        }
        n = (size_t)(nl - start);
        inbuf_consume(&rd->in, n + 1);   /* start stays valid: consume never moves */
        rd->scan = 0;
        if (n > 0 && start[n - 1] == '\r')
            n--;
        if (n > rd->max_line) {
            rd->head = start;
            rd->head_len = n;
            return NDJSON_TOO_LONG;
        }
        if (!is_blank(start, n)) {
            *line = start;
            *len = n;
            return NDJSON_LINE;
        }
    }
}
