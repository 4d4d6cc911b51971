/* Runs in: shared */
/*
 * inbuf.h - the growable input buffer under both stream readers
 * (proto/ndjson for client lines, proto/chan for worker frames).
 *
 * Contract:
 *  - Bytes are appended at the end and consumed from the front; buf[pos..len)
 *    is what is held.  An inbuf owns buf; a zeroed inbuf is empty and valid,
 *    and inbuf_free() returns it to that state.
 *  - Appending compacts (moves the held bytes to the front) when the
 *    consumed prefix is at least as large as what would move, so moving is
 *    paid for by consumption and total work stays O(bytes appended); and
 *    when there is otherwise no room.  Growth doubles from a small start,
 *    but never past `bound` while the held bytes fit in it: a reader passes
 *    its own worst case (a maximal line, a maximal frame) and one long
 *    message never costs more than that.
 *  - Appending may move buf: pointers into it are valid only until the next
 *    inbuf_append() or inbuf_release_idle().  inbuf_consume() never moves or
 *    allocates.
 *  - Functions return 0 on success and -1 on allocation failure or a size
 *    that would overflow; on failure nothing is appended and what was held
 *    is unchanged.
 */
#ifndef SANDBOXD_INBUF_H
#define SANDBOXD_INBUF_H

#include <stddef.h>

struct inbuf {
    char   *buf;    /* owned */
    size_t  len;    /* end of the held bytes */
    size_t  cap;    /* allocated */
    size_t  pos;    /* start of the held bytes */
};

void   inbuf_free(struct inbuf *b);
int    inbuf_append(struct inbuf *b, const void *data, size_t n, size_t bound);
/* Drop n held bytes from the front (n <= inbuf_held()). */
void   inbuf_consume(struct inbuf *b, size_t n);
/* When nothing is held and more than `keep` bytes are allocated, free the
 * allocation (the next append starts small again).  One large message must
 * not pin its buffer for the rest of a long-lived stream. */
void   inbuf_release_idle(struct inbuf *b, size_t keep);
static inline size_t inbuf_held(const struct inbuf *b) { return b->len - b->pos; }
static inline char *inbuf_data(const struct inbuf *b) { return b->buf + b->pos; }

#endif
