/*
 * chan.c - typed, length-checked frames between supervisor and worker.
 *
 * The reader judges a frame by its 8-byte header alone (type allowed in
 * this direction, length within that type's bound) before it needs any
 * payload byte, so a hostile length never makes it wait for, or grow
 * towards, gigabytes.  The blocking helpers use only read(2) and write(2):
 * they run in the worker after seccomp, which allows nothing else on the
 * channel.
 */
#include "proto/chan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(sizeof(struct chan_header) == CHAN_HEADER_SIZE, "header layout");

#define SMALL_FRAME 4096    /* chan_send: up to this, header and payload go
                             * out in one write(2) from a stack buffer */

/* ------------------------------------------------------------------------
 * Incremental reader (supervisor side)
 * --------------------------------------------------------------------- */

void chan_reader_init(struct chan_reader *rd, size_t max_payload, int from_worker)
{
    memset(rd, 0, sizeof *rd);
    rd->max_payload = max_payload;
    rd->from_worker = from_worker != 0;
}

void chan_reader_free(struct chan_reader *rd)
{
    inbuf_free(&rd->in);
}

/* Types each direction may carry; everything else, unknown types included,
 * is a violation. */
static int type_allowed(int from_worker, uint32_t type)
{
    if (from_worker)
        return type == CHAN_OUTPUT || type == CHAN_TOOL_CALL
            || type == CHAN_RESULT || type == CHAN_ERROR
            || type == CHAN_SYSCALL;    /* containment: the SIGSYS report */
    return type == CHAN_JOB || type == CHAN_TOOL_RESULT;
}

static int header_ok(const struct chan_reader *rd, const struct chan_header *h)
{
    size_t bound = h->type == CHAN_OUTPUT ? CHAN_OUTPUT_MAX : rd->max_payload;

    /* containment: the SIGSYS report has one fixed size */
    if (h->type == CHAN_SYSCALL && rd->from_worker)
        return h->len == CHAN_SYSCALL_SIZE;
    return type_allowed(rd->from_worker, h->type) && h->len <= bound;
}

/* The header of the frame at pos, if all of it is held. */
static int head(const struct chan_reader *rd, struct chan_header *h)
{
    if (inbuf_held(&rd->in) < CHAN_HEADER_SIZE)
        return 0;
    memcpy(h, inbuf_data(&rd->in), sizeof *h);
    return 1;
}

/* The buffer need not grow past one whole frame of the largest kind this
 * reader accepts (see inbuf.h); it may move payloads. */
static int append(struct chan_reader *rd, const void *data, size_t n)
{
    size_t most = rd->max_payload > CHAN_OUTPUT_MAX ? rd->max_payload : CHAN_OUTPUT_MAX;

    most = most > SIZE_MAX - CHAN_HEADER_SIZE ? SIZE_MAX : most + CHAN_HEADER_SIZE;
    return inbuf_append(&rd->in, data, n, most);
}

/*
 * The header of the next frame to be returned is completed first and
 * judged before anything after it is stored: a bad header poisons the
 * reader here, and its payload is never buffered.  A poisoned reader drops
 * what it is fed and returns 0; chan_reader_next() reports CHAN_BAD.
 */
int chan_reader_feed(struct chan_reader *rd, const void *data, size_t n)
{
    const unsigned char *p = data;
    size_t held = inbuf_held(&rd->in);
    struct chan_header h;

    if (rd->bad)
        return 0;
    if (held < CHAN_HEADER_SIZE) {
        size_t k = CHAN_HEADER_SIZE - held < n ? CHAN_HEADER_SIZE - held : n;

        if (append(rd, p, k) < 0)
            return -1;
        p += k;
        n -= k;
        if (head(rd, &h) && !header_ok(rd, &h)) {
            rd->bad = 1;
            return 0;
        }
    }
    return append(rd, p, n);
}

enum chan_status chan_reader_next(struct chan_reader *rd, uint32_t *type,
                                  const unsigned char **payload, size_t *len)
{
    struct chan_header h;

    *type = 0;
    *payload = NULL;
    *len = 0;
    if (rd->bad)
        return CHAN_BAD;
    if (!head(rd, &h))
        return CHAN_AGAIN;
    if (!header_ok(rd, &h)) {
        rd->bad = 1;
        return CHAN_BAD;
    }
    if (inbuf_held(&rd->in) - CHAN_HEADER_SIZE < h.len)
        return CHAN_AGAIN;
    *type = h.type;
    *payload = (const unsigned char *)inbuf_data(&rd->in) + CHAN_HEADER_SIZE;
    *len = h.len;
    inbuf_consume(&rd->in, CHAN_HEADER_SIZE + h.len);  /* never moves */
    return CHAN_FRAME;
}

/* ------------------------------------------------------------------------
 * Encoding and blocking helpers (worker side, tests)
 * --------------------------------------------------------------------- */

unsigned char *chan_frame_new(uint32_t type, const void *payload, size_t len, size_t *out_len)
{
    struct chan_header h;
    unsigned char *frame;

    if (len > UINT32_MAX || len > SIZE_MAX - CHAN_HEADER_SIZE)
        return NULL;
    frame = malloc(CHAN_HEADER_SIZE + len);
    if (frame == NULL)
        return NULL;
    h.type = type;
    h.len = (uint32_t)len;
    memcpy(frame, &h, CHAN_HEADER_SIZE);
    if (len > 0)
        memcpy(frame + CHAN_HEADER_SIZE, payload, len);
    *out_len = CHAN_HEADER_SIZE + len;
    return frame;
}

/* Write all n bytes, retrying after EINTR and short writes. */
static int write_full(int fd, const void *data, size_t n)
{
    const unsigned char *p = data;

    while (n > 0) {
        ssize_t w = write(fd, p, n);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        if (w == 0) {       /* not expected of a socket; avoid spinning */
            errno = EIO;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Read exactly n bytes, retrying after EINTR and short reads.  At EOF:
 * errno 0 if nothing was read, EPROTO if some was (a truncated frame). */
static int read_full(int fd, void *data, size_t n)
{
    unsigned char *p = data;
    size_t got = 0;

    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0) {
            errno = got ? EPROTO : 0;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

/*
 * A peer that has closed makes write(2) raise SIGPIPE; the worker keeps the
 * default action (its supervisor is gone), other callers ignore SIGPIPE and
 * get -1 with errno EPIPE.  len > UINT32_MAX fails with EMSGSIZE.
 */
int chan_send(int fd, uint32_t type, const void *payload, size_t len)
{
    unsigned char small[CHAN_HEADER_SIZE + SMALL_FRAME];
    struct chan_header h;

    if (len > UINT32_MAX) {
        errno = EMSGSIZE;
        return -1;
    }
    h.type = type;
    h.len = (uint32_t)len;
    if (len <= SMALL_FRAME) {
        memcpy(small, &h, CHAN_HEADER_SIZE);
        if (len > 0)
            memcpy(small + CHAN_HEADER_SIZE, payload, len);
        return write_full(fd, small, CHAN_HEADER_SIZE + len);
    }
    if (write_full(fd, &h, CHAN_HEADER_SIZE) < 0)
        return -1;
    return write_full(fd, payload, len);
}

/*
 * On -1, errno tells why: 0 for EOF before a frame began, EPROTO for EOF
 * inside a frame, EMSGSIZE for a length above max_payload (the header has
 * been read, the payload has not: the stream is unusable), ENOMEM, or the
 * read(2) error.  *payload is NULL after any failure.
 */
int chan_recv(int fd, uint32_t *type, char **payload, size_t *len, size_t max_payload)
{
    struct chan_header h;
    char *buf;

    *payload = NULL;
    *len = 0;
    if (read_full(fd, &h, sizeof h) < 0)
        return -1;
    if (h.len > max_payload) {
        errno = EMSGSIZE;
        return -1;
    }
    buf = malloc((size_t)h.len + 1);
    if (buf == NULL) {
        errno = ENOMEM;
        return -1;
    }
    if (read_full(fd, buf, h.len) < 0) {
        if (errno == 0)
            errno = EPROTO;     /* the header was there: truncated */
        free(buf);
        return -1;
    }
    buf[h.len] = '\0';
    *type = h.type;
    *payload = buf;
    *len = h.len;
    return 0;
}
