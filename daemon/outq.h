/* Runs in: supervisor */
/*
 * outq.h - a non-blocking write queue for one fd (a client connection or a
 * worker channel).
 *
 * Contract:
 *  - outq_append() copies n bytes to the tail; -1 (nothing queued) when the
 *    bytes still unwritten would exceed `bound`, or on allocation failure.
 *  - outq_flush() writes as much as the fd takes now, without blocking:
 *    OUTQ_DONE when the queue is empty, OUTQ_AGAIN when the fd is full (wait
 *    for writability), OUTQ_ERROR when the peer is gone (the queue is then
 *    dropped).  Memory is released whenever the queue drains.
 */
#ifndef SANDBOXD_OUTQ_H
#define SANDBOXD_OUTQ_H

#include <stddef.h>

enum outq_status { OUTQ_DONE, OUTQ_AGAIN, OUTQ_ERROR };

struct outq {
    char  *buf;         /* owned: buf[pos..len) is still to be written */
    size_t len, pos, cap;
};

void outq_free(struct outq *q);
static inline int outq_empty(const struct outq *q) { return q->pos == q->len; }
/* Bytes queued and not yet written. */
static inline size_t outq_pending(const struct outq *q) { return q->len - q->pos; }
int  outq_append(struct outq *q, const void *data, size_t n, size_t bound);
enum outq_status outq_flush(struct outq *q, int fd);

#endif
