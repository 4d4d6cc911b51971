/* Runs in: shared */
/*
 * ascii.h - leading runs of plain ASCII, found eight bytes at a time.
 *
 * The scanners of long strings (strict UTF-8 checks, the JSON string rules,
 * quoting) spend nearly all their time on printable ASCII, where each byte
 * needs no decision.  These functions return how many leading bytes of
 * s[0..n) certainly belong to a class, testing one 64-bit word at a time
 * with exact byte tests (a word has a byte below k, k <= 0x80, iff
 * (w - k*ONES) & ~w & HIGHS is not 0; a byte equal to c iff the word xor c
 * has a zero byte).  The count is a multiple of 8 and may stop short of
 * the run's end: the caller's own byte loop decides the bytes after it, so
 * a span is only ever a shortcut past bytes that loop would accept one by
 * one.  Loads go through memcpy: no alignment or aliasing assumption.
 */
#ifndef SANDBOXD_ASCII_H
#define SANDBOXD_ASCII_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proto/mutant.h"

#define ASCII_ONES  0x0101010101010101ull
#define ASCII_HIGHS 0x8080808080808080ull

/* Bytes below 0x80. */
static inline size_t ascii_span(const char *s, size_t n)
{
    size_t i = 0;
    uint64_t w;

    for (; n - i >= 8; i += 8) {
        memcpy(&w, s + i, 8);
        if (w & ASCII_HIGHS)
            break;
    }
    return i;
}

/* Bytes that stand for themselves inside a JSON string: 0x20..0x7F but
 * for '"' and '\\'. */
static inline size_t ascii_json_span(const char *s, size_t n)
{
    size_t i = 0;
    uint64_t w, q, b;

    for (; n - i >= 8; i += 8) {
        memcpy(&w, s + i, 8);
        q = w ^ (ASCII_ONES * '"');
        b = w ^ (ASCII_ONES * '\\');
        /* (the mutant: a backslash passes as plain) */
        if ((w | ((w - ASCII_ONES * 0x20) & ~w) | ((q - ASCII_ONES) & ~q) |
             (MUTANT(ASCII_SPAN) ? 0 : (b - ASCII_ONES) & ~b)) & ASCII_HIGHS)
            break;
    }
    return i;
}

#endif
