/*
 * ndjson.h - incremental newline-delimited JSON framing with a hard bound.
 *
 * Contract:
 *  - A reader owns one input buffer that never holds more than max_line + 1
 *    bytes of an unfinished line, whatever the peer sends.
 *  - Lines end at '\n'; a '\r' just before it is dropped.  Blank lines
 *    (empty after dropping '\r', or only spaces/tabs) are skipped silently.
 *  - A line longer than max_line bytes (not counting "\r\n") is reported once
 *    as NDJSON_TOO_LONG, and every byte up to and including the next '\n' is
 *    discarded, so the stream stays usable.
 *  - No allocation happens in ndjson_next(); ndjson_feed() grows the buffer
 *    up to the bound.  Functions return 0 on success and -1 on allocation
 *    failure unless stated otherwise.
 *
 * Typical use, on a readable socket:
 *      ndjson_feed(&rd, bytes, n);
 *      while ((r = ndjson_next(&rd, &line, &len)) != NDJSON_AGAIN) ...
 * The pointer returned for a line stays valid until the next call to
 * ndjson_feed() or ndjson_free().
 */
#ifndef SANDBOXD_NDJSON_H
#define SANDBOXD_NDJSON_H

#include <stddef.h>

enum ndjson_status {
    NDJSON_AGAIN = 0,   /* no complete line buffered; feed more bytes */
    NDJSON_LINE,        /* *line / *len hold one line, without the newline */
    NDJSON_TOO_LONG,    /* a line exceeded max_line; it is being discarded */
};

struct ndjson_reader {
    char   *buf;        /* owned */
    size_t  len;        /* bytes held */
    size_t  cap;        /* allocated */
    size_t  pos;        /* start of unconsumed data */
    size_t  scan;       /* bytes after pos already scanned for '\n' */
    size_t  max_line;
    int     discarding; /* inside an over-long line */
};

void ndjson_init(struct ndjson_reader *rd, size_t max_line);
void ndjson_free(struct ndjson_reader *rd);
/* Append bytes read from the peer.  While discarding an over-long line the
 * bytes are dropped without being stored. */
int  ndjson_feed(struct ndjson_reader *rd, const char *data, size_t n);
enum ndjson_status ndjson_next(struct ndjson_reader *rd, const char **line, size_t *len);
/* Bytes of an unfinished line currently buffered (for tests and EOF checks). */
size_t ndjson_pending(const struct ndjson_reader *rd);

#endif
