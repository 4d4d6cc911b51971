/*
 * test_ndjson.c - the NDJSON framer against hostile input.
 *
 * Most tests run a stream through the reader with a given chunk size and
 * compare the sequence of events, written as text ("L<line>|" for a line,
 * "T|" for TOO_LONG, NUL shown as "\0"), with the expected one.  Running the
 * same stream whole and one byte at a time catches state kept wrongly
 * between feeds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "proto/ndjson.h"

struct events {
    char  *text;
    size_t len, cap;
};

static void ev_put(struct events *ev, const char *s, size_t n)
{
    if (ev->len + n + 1 > ev->cap) {
        ev->cap = (ev->len + n + 1) * 2;
        ev->text = realloc(ev->text, ev->cap);
        assert_non_null(ev->text);
    }
    memcpy(ev->text + ev->len, s, n);
    ev->len += n;
    ev->text[ev->len] = '\0';
}

static void drain(struct ndjson_reader *rd, struct events *ev)
{
    const char *line;
    size_t len, i;
    enum ndjson_status st;

    while ((st = ndjson_next(rd, &line, &len)) != NDJSON_AGAIN) {
        if (st == NDJSON_TOO_LONG) {
            assert_null(line);
            ev_put(ev, "T|", 2);
            continue;
        }
        assert_int_equal(st, NDJSON_LINE);
        ev_put(ev, "L", 1);
        for (i = 0; i < len; i++) {
            if (line[i] == '\0')
                ev_put(ev, "\\0", 2);
            else
                ev_put(ev, &line[i], 1);
        }
        ev_put(ev, "|", 1);
    }
    assert_null(line);
    assert_int_equal(len, 0);
}

/* Run in[0..n) through a fresh reader in chunks of `chunk` bytes, draining
 * after every feed; check the memory bound on the way.  Returns the events
 * (caller frees) and the bytes still pending at the end in *pending. */
static char *run(size_t max_line, const char *in, size_t n, size_t chunk, size_t *pending)
{
    struct ndjson_reader rd;
    struct events ev = {0};
    size_t off, k;

    ndjson_init(&rd, max_line);
    ev_put(&ev, "", 0);
    for (off = 0; off < n; off += k) {
        k = n - off < chunk ? n - off : chunk;
        assert_int_equal(ndjson_feed(&rd, in + off, k), 0);
        drain(&rd, &ev);
        /* after draining: only the unfinished line (bounded) is held */
        assert_true(ndjson_pending(&rd) <= max_line + 1);
        assert_true(rd.in.cap <= max_line + 2 + k + 256);
    }
    if (pending)
        *pending = ndjson_pending(&rd);
    ndjson_free(&rd);
    return ev.text;
}

/* Same stream, whole, in 7-byte chunks and byte by byte: same events. */
static void expect_events(size_t max_line, const char *in, size_t n, const char *want)
{
    static const size_t chunks[] = { SIZE_MAX, 7, 1 };
    size_t i;

    for (i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        char *got = run(max_line, in, n, chunks[i], NULL);
        assert_string_equal(got, want);
        free(got);
    }
}

#define EXPECT(max, lit, want) expect_events((max), (lit), sizeof(lit) - 1, (want))

static void test_simple_lines(void **state)
{
    (void)state;
    EXPECT(100, "{\"a\":1}\n{\"b\":2}\n", "L{\"a\":1}|L{\"b\":2}|");
    EXPECT(100, "abc", "");                 /* unfinished: nothing yet */
    EXPECT(100, "", "");
}

static void test_crlf(void **state)
{
    (void)state;
    EXPECT(100, "one\r\ntwo\r\nthree\n", "Lone|Ltwo|Lthree|");
    /* only the '\r' right before '\n' is dropped */
    EXPECT(100, "a\rb\r\r\n", "La\rb\r|");
    EXPECT(100, "\ra\n", "L\ra|");
}

static void test_blank_lines_skipped(void **state)
{
    (void)state;
    EXPECT(100, "\n\n\r\n  \n\t \t\r\nx\n \r\n", "Lx|");
    /* other whitespace is not blank: the JSON parser judges it */
    EXPECT(100, "\v\n\f\n", "L\v|L\f|");
    EXPECT(100, " x \n", "L x |");
}

static void test_exact_bound(void **state)
{
    (void)state;
    /* max_line 10: ten bytes pass, with or without '\r' */
    EXPECT(10, "0123456789\n", "L0123456789|");
    EXPECT(10, "0123456789\r\n", "L0123456789|");
    /* eleven bytes are too long, and the next line still arrives */
    EXPECT(10, "0123456789A\nok\n", "T|Lok|");
    EXPECT(10, "0123456789A\r\nok\n", "T|Lok|");
    /* eleventh byte '\r' not followed by '\n': too long */
    EXPECT(10, "0123456789\rX\nok\n", "T|Lok|");
    EXPECT(10, "0123456789\r\rX\nok\n", "T|Lok|");
    EXPECT(10, "0123456789\r\r\nok\n", "T|Lok|");
    /* blankness does not excuse length */
    EXPECT(3, "    \nok\n", "T|Lok|");
    /* max_line 0: only blank lines fit */
    EXPECT(0, "\n\r\nx\n\n", "T|");
}

static void test_too_long_once_then_recovers(void **state)
{
    size_t max = 64, n = 100000, i;
    char *in = malloc(n + 32);

    (void)state;
    assert_non_null(in);
    for (i = 0; i < n; i++)
        in[i] = (char)('a' + i % 26);
    memcpy(in + n, "\nnext\n", 6);
    expect_events(max, in, n + 6, "T|Lnext|");
    /* several long lines between normal ones: one report each, in order */
    memcpy(in, "first\n", 6);
    in[5000] = '\n';
    memcpy(in + 5001, "mid\n", 4);
    expect_events(max, in, n + 6, "Lfirst|T|Lmid|T|Lnext|");
    free(in);
}

/* The report comes as soon as the line is known to be too long, before its
 * newline, and only once however many more bytes arrive. */
static void test_too_long_reported_before_newline(void **state)
{
    struct ndjson_reader rd;
    const char *line;
    size_t len, i;

    (void)state;
    ndjson_init(&rd, 8);
    assert_int_equal(ndjson_feed(&rd, "ok\n012345678", 12), 0);
    assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_LINE);
    assert_int_equal(len, 2);
    assert_memory_equal(line, "ok", 2);
    assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_TOO_LONG);
    ndjson_too_long_head(&rd, &line, &len);     /* its first max_line + 1 bytes */
    assert_int_equal(len, 9);
    assert_memory_equal(line, "012345678", 9);
    assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_AGAIN);
    assert_int_equal(ndjson_pending(&rd), 0);
    for (i = 0; i < 1000; i++) {
        assert_int_equal(ndjson_feed(&rd, "zzzzzzzz", 8), 0);
        assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_AGAIN);
        assert_int_equal(ndjson_pending(&rd), 0);
    }
    assert_int_equal(ndjson_feed(&rd, "zz\nafter\n", 9), 0);
    assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_LINE);
    assert_int_equal(len, 5);
    assert_memory_equal(line, "after", 5);
    assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_AGAIN);
    /* a whole long line in one feed: its head is what was kept of it */
    assert_int_equal(ndjson_feed(&rd, "abcdefghijkl\nok\n", 16), 0);
    assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_TOO_LONG);
    ndjson_too_long_head(&rd, &line, &len);
    assert_true(len >= 9 && len <= 12);
    assert_memory_equal(line, "abcdefghi", 9);
    assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_LINE);
    assert_memory_equal(line, "ok", 2);
    ndjson_free(&rd);
}

/* Lines fed but not yet taken keep their order around a long line, even if
 * the owner feeds several times before draining. */
static void test_feed_without_draining(void **state)
{
    struct ndjson_reader rd;
    struct events ev = {0};
    char big[50];

    (void)state;
    memset(big, 'x', sizeof big);
    ndjson_init(&rd, 10);
    ev_put(&ev, "", 0);
    assert_int_equal(ndjson_feed(&rd, "a\nb\n", 4), 0);
    assert_int_equal(ndjson_feed(&rd, big, sizeof big), 0);
    assert_int_equal(ndjson_feed(&rd, big, sizeof big), 0);
    assert_int_equal(ndjson_feed(&rd, "\nc\nd", 4), 0);
    drain(&rd, &ev);
    assert_string_equal(ev.text, "La|Lb|T|Lc|");
    assert_int_equal(ndjson_pending(&rd), 1);
    free(ev.text);
    ndjson_free(&rd);
}

/* A peer that never sends '\n': memory stays at the bound whether the owner
 * drains or not, and whatever the chunk size. */
static void test_no_newline_memory_bounded(void **state)
{
    static const size_t chunks[] = { 1, 3, 4096, 1 << 20 };
    size_t max = 1000, total = 4u << 20, i, off, k;
    char *junk = malloc(total);

    (void)state;
    assert_non_null(junk);
    memset(junk, '[', total);
    for (i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        struct ndjson_reader rd;

        ndjson_init(&rd, max);
        for (off = 0; off < total; off += k) {
            k = total - off < chunks[i] ? total - off : chunks[i];
            assert_int_equal(ndjson_feed(&rd, junk + off, k), 0);
            assert_true(rd.in.cap <= max + 2);
            assert_true(ndjson_pending(&rd) <= max + 1);
        }
        ndjson_free(&rd);
    }
    free(junk);
}

static void test_embedded_nul(void **state)
{
    (void)state;
    EXPECT(100, "a\0b\n\0\n", "La\\0b|L\\0|");
    /* NUL is not blank */
    EXPECT(100, " \0 \n", "L \\0 |");
}

static void test_line_pointer_content(void **state)
{
    struct ndjson_reader rd;
    const char *line;
    size_t len;

    (void)state;
    ndjson_init(&rd, 100);
    assert_int_equal(ndjson_feed(&rd, "{\"x\"", 4), 0);
    assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_AGAIN);
    assert_int_equal(ndjson_pending(&rd), 4);
    assert_int_equal(ndjson_feed(&rd, ":1}\r\n{", 6), 0);
    assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_LINE);
    assert_int_equal(len, 7);
    assert_memory_equal(line, "{\"x\":1}", 7);
    assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_AGAIN);
    /* EOF here: the peer left one byte of an unfinished line */
    assert_int_equal(ndjson_pending(&rd), 1);
    ndjson_free(&rd);
    assert_null(rd.in.buf);
    assert_int_equal(rd.max_line, 100);
}

/* Consumed bytes are reclaimed: a long stream of short lines runs in a
 * buffer of constant size. */
static void test_compaction(void **state)
{
    struct ndjson_reader rd;
    const char *line;
    size_t len, i, got = 0;

    (void)state;
    ndjson_init(&rd, 100);
    /* a partial line is always held, so the buffer never simply empties */
    assert_int_equal(ndjson_feed(&rd, "{\"k", 3), 0);
    for (i = 0; i < 100000; i++) {
        assert_int_equal(ndjson_feed(&rd, "\":1}\n{\"k", 8), 0);
        assert_int_equal(ndjson_feed(&rd, "\":2}\n{\"k", 8), 0);
        while (ndjson_next(&rd, &line, &len) == NDJSON_LINE) {
            assert_int_equal(len, 7);
            got++;
        }
        assert_int_equal(ndjson_pending(&rd), 3);
        assert_true(rd.in.cap <= 256);
    }
    assert_int_equal(got, 200000);
    ndjson_free(&rd);
}

/* A large message's buffer is given back once it is handled; a small one
 * is kept for reuse; a buffer still holding an unfinished line is kept. */
static void test_shrink(void **state)
{
    struct ndjson_reader rd;
    const char *line;
    size_t len, n = 1 << 20;
    char *big = malloc(n + 1);

    (void)state;
    assert_non_null(big);
    memset(big, 'x', n);
    big[n] = '\n';
    ndjson_init(&rd, 2 << 20);
    assert_int_equal(ndjson_feed(&rd, big, n + 1), 0);
    assert_true(ndjson_allocated(&rd) > n);
    assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_LINE);
    assert_int_equal(len, n);
    ndjson_shrink(&rd);
    assert_int_equal(ndjson_allocated(&rd), 0);
    assert_null(rd.in.buf);
    /* small: kept */
    assert_int_equal(ndjson_feed(&rd, "{}\n", 3), 0);
    assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_LINE);
    ndjson_shrink(&rd);
    assert_true(ndjson_allocated(&rd) > 0 && ndjson_allocated(&rd) <= NDJSON_IDLE_KEEP);
    /* an unfinished large line: kept, and it still completes */
    assert_int_equal(ndjson_feed(&rd, big, n), 0);
    ndjson_shrink(&rd);
    assert_true(ndjson_allocated(&rd) >= n);
    assert_int_equal(ndjson_feed(&rd, "\n", 1), 0);
    assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_LINE);
    assert_int_equal(len, n);
    ndjson_free(&rd);
    free(big);
}

/* O(n): one 8 MiB line fed a byte at a time, drained after every byte, and
 * a near-limit line held unfinished while bytes trickle in.  A quadratic
 * framer would take hours; the alarm turns that into a failure. */
static void test_linear_time(void **state)
{
    struct ndjson_reader rd;
    const char *line;
    size_t len, i, max = 8u << 20;

    (void)state;
    alarm(20);
    ndjson_init(&rd, max);
    for (i = 0; i < max; i++) {
        assert_int_equal(ndjson_feed(&rd, "x", 1), 0);
        assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_AGAIN);
    }
    assert_int_equal(ndjson_feed(&rd, "\n", 1), 0);
    assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_LINE);
    assert_int_equal(len, max);
    /* a complete line held before an unfinished one, owner not draining */
    assert_int_equal(ndjson_feed(&rd, "a\n", 2), 0);
    for (i = 0; i < max; i++)
        assert_int_equal(ndjson_feed(&rd, "y", 1), 0);
    assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_LINE);
    assert_int_equal(ndjson_next(&rd, &line, &len), NDJSON_AGAIN);
    assert_int_equal(ndjson_pending(&rd), max);
    ndjson_free(&rd);
    alarm(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple_lines),
        cmocka_unit_test(test_crlf),
        cmocka_unit_test(test_blank_lines_skipped),
        cmocka_unit_test(test_exact_bound),
        cmocka_unit_test(test_too_long_once_then_recovers),
        cmocka_unit_test(test_too_long_reported_before_newline),
        cmocka_unit_test(test_feed_without_draining),
        cmocka_unit_test(test_no_newline_memory_bounded),
        cmocka_unit_test(test_embedded_nul),
        cmocka_unit_test(test_line_pointer_content),
        cmocka_unit_test(test_compaction),
        cmocka_unit_test(test_shrink),
        cmocka_unit_test(test_linear_time),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
