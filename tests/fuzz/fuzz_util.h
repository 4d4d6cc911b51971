/*
 * fuzz_util.h - small helpers shared by the libFuzzer targets in tests/fuzz/.
 *
 * CHECK() aborts with a message (libFuzzer then saves the input as a crash
 * artifact); it is used for contract violations, never for harness errors.
 * The split-point generator is a deterministic xorshift seeded from the
 * input's own header bytes, so a saved artifact always replays the same
 * chunking.
 */
#ifndef SANDBOXD_FUZZ_UTIL_H
#define SANDBOXD_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: contract violated: %s: ", __FILE__,       \
                    __LINE__, #cond);                                         \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            abort();                                                          \
        }                                                                     \
    } while (0)

struct splitter {
    uint32_t s;     /* xorshift state, never 0 */
    unsigned mode;  /* how chunk sizes are drawn */
};

static inline void splitter_init(struct splitter *sp, uint8_t a, uint8_t b)
{
    sp->s = 0x9E3779B9u ^ ((uint32_t)a << 8 | b);
    if (sp->s == 0)
        sp->s = 1;
    sp->mode = a & 7;
}

static inline uint32_t splitter_rand(struct splitter *sp)
{
    uint32_t x = sp->s;

    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return sp->s = x;
}

/* Length of the next chunk, 1..left. */
static inline size_t splitter_next(struct splitter *sp, size_t left)
{
    uint32_t r = splitter_rand(sp);
    size_t n;

    switch (sp->mode) {
    case 0: n = 1; break;                       /* byte at a time */
    case 1: n = 1 + r % 3; break;
    case 2: n = 1 + r % 16; break;
    case 3: n = 1 + r % 256; break;
    case 4: n = 1 + r % 8192; break;
    case 5: n = (r & 1) ? 1 : 1 + (r >> 1) % 4096; break;    /* mixed */
    case 6: n = 7 + r % 3; break;               /* around a chan header */
    default: n = left; break;                   /* everything at once */
    }
    return n < left ? n : left;
}

#endif
