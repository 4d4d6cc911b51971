/* Runs in: shared */
/*
 * ndjson.h - incremental newline-delimited JSON framing with a hard bound.
 *
 * Contract:
 *  - A reader owns one input buffer that never holds more than max_line + 1
 *    bytes of an unfinished line, whatever the peer sends or how the bytes
 *    are split into ndjson_feed() calls.  Complete lines stay buffered until
 *    ndjson_next() returns them, so the buffer is bounded by max_line + 2
 *    plus the bytes of complete lines fed and not yet taken; an owner that
 *    drains with ndjson_next() after every feed holds at most max_line + 2
 *    plus one read's worth.
 *  - Lines end at '\n'; a '\r' just before it is dropped.  Blank lines
 *    (empty after dropping '\r', or only spaces/tabs) are skipped silently.
 *  - A line longer than max_line bytes (not counting "\r\n") is reported once
 *    as NDJSON_TOO_LONG, and every byte up to and including the next '\n' is
 *    discarded, so the stream stays usable.  It is reported in stream order
 *    (after the complete lines before it), as soon as it is known to be too
 *    long: the newline need not have arrived.  Length is judged before
 *    blankness, so an over-long run of spaces is TOO_LONG too.
 *  - Bytes are opaque: NUL and invalid UTF-8 are passed through unchanged
 *    (the JSON parser judges them).  Total work is O(bytes fed): each byte
 *    is searched for '\n' once and moved at most a bounded number of times.
 *  - No allocation happens in ndjson_next(); ndjson_feed() grows the buffer
 *    up to the bound.  Functions return 0 on success and -1 on allocation
 *    failure unless stated otherwise.
 *
 * Typical use, on a readable socket:
 *      ndjson_feed(&rd, bytes, n);
 *      while ((r = ndjson_next(&rd, &line, &len)) != NDJSON_AGAIN) ...
 * The pointer returned for a line stays valid until the next call to
 * ndjson_feed(), ndjson_shrink() or ndjson_free().
 */
#ifndef SANDBOXD_NDJSON_H
#define SANDBOXD_NDJSON_H

#include <stddef.h>

#include "proto/inbuf.h"

enum ndjson_status {
    NDJSON_AGAIN = 0,   /* no complete line buffered; feed more bytes */
    NDJSON_LINE,        /* *line / *len hold one line, without the newline */
    NDJSON_TOO_LONG,    /* a line exceeded max_line; it is being discarded */
};

struct ndjson_reader {
    struct inbuf in;    /* owned; the held bytes */
    size_t  scan;       /* bytes after pos already scanned for '\n' */
    size_t  max_line;
    int     discarding; /* inside an over-long line (values: ndjson.c) */
    size_t  tail;       /* bytes held after the last '\n': the unfinished
                         * line (added: feed must bound it in O(1)) */
    const char *head;   /* the last NDJSON_TOO_LONG line's first bytes */
    size_t  head_len;
};

/* max_line is clamped to SIZE_MAX / 4 so that size arithmetic cannot wrap.
 * ndjson_init() does not allocate. */
void ndjson_init(struct ndjson_reader *rd, size_t max_line);
void ndjson_free(struct ndjson_reader *rd);
/* Append bytes read from the peer.  While discarding an over-long line the
 * bytes are dropped without being stored. */
int  ndjson_feed(struct ndjson_reader *rd, const char *data, size_t n);
/* Return the next event.  On NDJSON_LINE, *line points into the buffer (not
 * NUL-terminated; it may contain NUL bytes) and *len is its length.  On
 * NDJSON_TOO_LONG and NDJSON_AGAIN, *line is set to NULL and *len to 0. */
enum ndjson_status ndjson_next(struct ndjson_reader *rd, const char **line, size_t *len);
/* After NDJSON_TOO_LONG: the first bytes of that line (at most max_line + 1,
 * without the newline), so its owner can look for what it can still read
 * there (a request id).  Valid until the next ndjson_feed(), ndjson_shrink()
 * or ndjson_free(). */
void ndjson_too_long_head(const struct ndjson_reader *rd, const char **head, size_t *len);
/* Give back a large buffer once nothing is held (see inbuf_release_idle):
 * owners call it after handling the lines of a read, since it invalidates
 * line pointers.  Buffers up to NDJSON_IDLE_KEEP bytes are kept for reuse. */
#define NDJSON_IDLE_KEEP (64u * 1024)
void ndjson_shrink(struct ndjson_reader *rd);
/* Bytes allocated for the buffer now (what this reader costs in memory). */
size_t ndjson_allocated(const struct ndjson_reader *rd);
/* Bytes held and not yet returned by ndjson_next().  Once ndjson_next() has
 * returned NDJSON_AGAIN this is exactly the unfinished line, so a nonzero
 * value at EOF means the peer closed mid-line.  The remainder of an
 * over-long line being discarded is not held and not counted. */
size_t ndjson_pending(const struct ndjson_reader *rd);

#endif
