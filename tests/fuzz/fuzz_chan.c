/*
 * fuzz_chan.c - the supervisor's frame reader (proto/chan.c), which sees
 * whatever a compromised worker writes.
 *
 * Input layout:
 *   byte 0   bits 0-2: how chunk sizes are drawn (fuzz_util.h);
 *            bit 3: from_worker; bits 4-6: max_payload (0 ... 65537)
 *   byte 1   seed for the split points
 *   rest     the byte stream (8-byte host-order headers + payloads)
 *
 * The stream is fed in chunks to a reader in the chosen direction, then,
 * with other split points, to a reader in the other direction; each is
 * drained with chan_reader_next() after every feed.  Checks:
 *  - the frames and the final status equal what a reference model of the
 *    contract in chan.h predicts for the whole stream (independent of the
 *    split points): frames in order until the first header whose type is
 *    not allowed in this direction or whose length is above its bound;
 *  - every frame's length respects the bound of its type (OUTPUT <=
 *    CHAN_OUTPUT_MAX, SYSCALL == CHAN_SYSCALL_SIZE, others <= max_payload),
 *    and chan_frame_new() re-encodes it to the bytes it came from;
 *  - once CHAN_BAD is returned it is returned forever, and feeding a
 *    poisoned reader returns 0;
 *  - after a drain the reader holds only the unfinished frame, whose header
 *    (when complete) is within bounds, so a hostile length never makes it
 *    buffer more than one allowed frame.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/chan.h"
#include "tests/fuzz/fuzz_util.h"

/* The contract's rules, written out independently of chan.c. */
static int allowed(int from_worker, size_t max_payload, uint32_t type, uint32_t len)
{
    if (from_worker) {
        switch (type) {
        case CHAN_OUTPUT:    return len <= CHAN_OUTPUT_MAX;
        case CHAN_SYSCALL:   return len == CHAN_SYSCALL_SIZE;
        case CHAN_TOOL_CALL:
        case CHAN_RESULT:
        case CHAN_ERROR:     return len <= max_payload;
        default:             return 0;
        }
    }
    return (type == CHAN_JOB || type == CHAN_TOOL_RESULT) && len <= max_payload;
}

struct frame {
    size_t off;     /* header offset in the stream */
    uint32_t type, len;
};

struct model {
    struct frame *f;
    size_t n, cap;
    int bad;
};

static void model_build(struct model *m, const unsigned char *d, size_t n,
                        int from_worker, size_t max_payload)
{
    size_t off = 0;

    m->n = 0;
    m->bad = 0;
    while (n - off >= CHAN_HEADER_SIZE) {
        struct chan_header h;

        memcpy(&h, d + off, sizeof h);
        if (!allowed(from_worker, max_payload, h.type, h.len)) {
            m->bad = 1;
            return;
        }
        if (n - off - CHAN_HEADER_SIZE < h.len)
            return;
        if (m->n == m->cap) {
            m->cap = m->cap ? m->cap * 2 : 64;
            if ((m->f = realloc(m->f, m->cap * sizeof *m->f)) == NULL)
                abort();
        }
        m->f[m->n].off = off;
        m->f[m->n].type = h.type;
        m->f[m->n].len = h.len;
        m->n++;
        off += CHAN_HEADER_SIZE + h.len;
    }
}

static void run_reader(const unsigned char *d, size_t n, int from_worker, size_t max_payload,
                       struct splitter *sp, struct model *m)
{
    struct chan_reader rd;
    size_t off = 0, k = 0;
    int bad = 0;

    model_build(m, d, n, from_worker, max_payload);
    chan_reader_init(&rd, max_payload, from_worker);
    while (off < n) {
        size_t chunk = splitter_next(sp, n - off);
        enum chan_status st;
        const unsigned char *payload;
        uint32_t type;
        size_t len;

        CHECK(chan_reader_feed(&rd, d + off, chunk) == 0, "chan_reader_feed failed");
        off += chunk;
        while ((st = chan_reader_next(&rd, &type, &payload, &len)) == CHAN_FRAME) {
            unsigned char *enc;
            size_t enc_len = 0;

            CHECK(!bad, "a frame after CHAN_BAD");
            CHECK(k < m->n, "extra frame type %u len %zu", type, len);
            CHECK(allowed(from_worker, max_payload, type, (uint32_t)len),
                  "frame type %u len %zu out of bounds (from_worker %d, max %zu)",
                  type, len, from_worker, max_payload);
            CHECK(len <= CHAN_OUTPUT_MAX || len <= max_payload, "frame too long");
            CHECK(type == m->f[k].type && len == m->f[k].len,
                  "frame %zu: type %u len %zu, model %u %u", k, type, len,
                  m->f[k].type, m->f[k].len);
            CHECK(len == 0 || memcmp(payload, d + m->f[k].off + CHAN_HEADER_SIZE, len) == 0,
                  "frame %zu payload differs", k);
            enc = chan_frame_new(type, payload, len, &enc_len);
            CHECK(enc != NULL && enc_len == CHAN_HEADER_SIZE + len &&
                  memcmp(enc, d + m->f[k].off, enc_len) == 0, "chan_frame_new differs");
            free(enc);
            k++;
        }
        CHECK(type == 0 && payload == NULL && len == 0, "non-frame status with a frame");
        if (st == CHAN_BAD) {
            bad = 1;
        } else {
            CHECK(st == CHAN_AGAIN, "bad status %d", (int)st);
            CHECK(!bad, "CHAN_BAD did not stick");
            /* only the unfinished frame is held, and it is one we accept */
            if (inbuf_held(&rd.in) >= CHAN_HEADER_SIZE) {
                struct chan_header h;

                memcpy(&h, inbuf_data(&rd.in), sizeof h);
                CHECK(allowed(from_worker, max_payload, h.type, h.len),
                      "an unacceptable header is held: type %u len %u", h.type, h.len);
                CHECK(inbuf_held(&rd.in) < CHAN_HEADER_SIZE + (size_t)h.len,
                      "a whole frame held after AGAIN");
            }
        }
    }
    CHECK(k == m->n, "%zu frames, model %zu", k, m->n);
    CHECK(bad == m->bad, "bad %d, model %d", bad, m->bad);
    if (bad) {
        /* poisoned forever: more bytes, even a valid frame, change nothing */
        static const unsigned char more[CHAN_HEADER_SIZE] = {0};
        const unsigned char *payload;
        uint32_t type;
        size_t len;

        CHECK(chan_reader_feed(&rd, more, sizeof more) == 0, "feed to poisoned reader");
        CHECK(chan_reader_feed(&rd, d, n) == 0, "feed to poisoned reader");
        CHECK(chan_reader_next(&rd, &type, &payload, &len) == CHAN_BAD, "BAD did not stick");
        CHECK(chan_reader_next(&rd, &type, &payload, &len) == CHAN_BAD, "BAD did not stick");
        CHECK(type == 0 && payload == NULL && len == 0, "BAD with a frame");
    }
    chan_reader_free(&rd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t max_payloads[8] = {0, 1, 7, 8, 9, 64, 4096, CHAN_OUTPUT_MAX + 1};
    static struct model m;
    struct splitter sp;
    int from_worker;
    size_t max_payload;

    if (size < 2)
        return 0;
    from_worker = data[0] >> 3 & 1;
    max_payload = max_payloads[data[0] >> 4 & 7];
    splitter_init(&sp, data[0], data[1]);
    run_reader(data + 2, size - 2, from_worker, max_payload, &sp, &m);
    splitter_init(&sp, (uint8_t)(data[1] + 3), (uint8_t)(data[0] ^ 0xa5));
    run_reader(data + 2, size - 2, !from_worker, max_payload, &sp, &m);
    return 0;
}
