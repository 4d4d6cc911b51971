/* outq.c - see outq.h. */
#include "daemon/outq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void outq_free(struct outq *q)
{
    free(q->buf);
    q->buf = NULL;
    q->len = q->pos = q->cap = 0;
}

int outq_append(struct outq *q, const void *data, size_t n, size_t bound)
{
    if (q->pos == q->len)
        q->len = q->pos = 0;                    /* drained: start over */
    if (n > bound || q->len - q->pos > bound - n)
        return -1;
    if (q->len + n > q->cap) {
        size_t cap = q->cap ? q->cap : 4096;
        char *p;

        if (q->pos > 0) {                       /* reuse the written prefix first */
            memmove(q->buf, q->buf + q->pos, q->len - q->pos);
            q->len -= q->pos;
            q->pos = 0;
        }
        while (cap < q->len + n)
            cap *= 2;
        if (cap != q->cap) {
            if (!(p = realloc(q->buf, cap)))
                return -1;
            q->buf = p;
            q->cap = cap;
        }
    }
    memcpy(q->buf + q->len, data, n);
    q->len += n;
    return 0;
}

enum outq_status outq_flush(struct outq *q, int fd)
{
    while (q->pos < q->len) {
        ssize_t n = write(fd, q->buf + q->pos, q->len - q->pos);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return OUTQ_AGAIN;
        if (n <= 0) {
            outq_free(q);
            return OUTQ_ERROR;
        }
        q->pos += (size_t)n;
    }
    outq_free(q);           /* idle connections hold no buffer */
    return OUTQ_DONE;
}
