/* test_inbuf.c - the growable input buffer (proto/inbuf.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/inbuf.h"

static void test_empty_and_free(void **state)
{
    struct inbuf b = { 0 };
    (void)state;
    assert_int_equal(inbuf_held(&b), 0);
    assert_int_equal(inbuf_append(&b, "x", 0, 100), 0);
    assert_null(b.buf);                     /* nothing appended, nothing allocated */
    assert_int_equal(inbuf_append(&b, "abc", 3, 100), 0);
    assert_int_equal(inbuf_held(&b), 3);
    assert_memory_equal(inbuf_data(&b), "abc", 3);
    inbuf_free(&b);
    assert_null(b.buf);
    assert_int_equal(b.len + b.cap + b.pos, 0);
}

/* Growth doubles, but stops at the bound while the held bytes fit in it. */
static void test_growth_stops_at_bound(void **state)
{
    struct inbuf b = { 0 };
    char chunk[1000];
    (void)state;
    memset(chunk, 'a', sizeof chunk);
    for (int i = 0; i < 10; i++)
        assert_int_equal(inbuf_append(&b, chunk, sizeof chunk, 10002), 0);
    assert_int_equal(inbuf_held(&b), 10000);
    assert_int_equal(b.cap, 10002);         /* not 16384 */
    /* past the bound (complete messages not yet taken): it still grows */
    assert_int_equal(inbuf_append(&b, chunk, 100, 10002), 0);
    assert_true(b.cap >= 10100);
    inbuf_free(&b);
}

/* Consuming never moves bytes, so a pointer taken before stays valid; the
 * buffer resets to its start when emptied. */
static void test_consume_does_not_move(void **state)
{
    struct inbuf b = { 0 };
    const char *p;
    (void)state;
    assert_int_equal(inbuf_append(&b, "line1\nline2\n", 12, 1000), 0);
    p = inbuf_data(&b);
    inbuf_consume(&b, 6);
    assert_memory_equal(p, "line1", 5);
    assert_memory_equal(inbuf_data(&b), "line2", 5);
    inbuf_consume(&b, 6);
    assert_int_equal(b.pos, 0);
    assert_int_equal(b.len, 0);
    inbuf_free(&b);
}

/* A stream fed and consumed a little at a time stays in a small buffer:
 * compaction reclaims the consumed prefix instead of growing. */
static void test_compaction_keeps_it_small(void **state)
{
    struct inbuf b = { 0 };
    char msg[100];
    (void)state;
    memset(msg, 'm', sizeof msg);
    for (int i = 0; i < 100000; i++) {
        assert_int_equal(inbuf_append(&b, msg, sizeof msg, SIZE_MAX), 0);
        inbuf_consume(&b, 60);              /* always 40 bytes more held */
        if (inbuf_held(&b) > 2000)
            inbuf_consume(&b, inbuf_held(&b) - 100);
    }
    assert_true(b.cap <= 4096);
    assert_true(inbuf_held(&b) <= 2000);
    inbuf_free(&b);
}

/* A size that would overflow fails without touching what is held. */
static void test_overflow_refused(void **state)
{
    struct inbuf b = { 0 };
    (void)state;
    assert_int_equal(inbuf_append(&b, "abc", 3, 100), 0);
    assert_int_equal(inbuf_append(&b, "x", SIZE_MAX - 1, SIZE_MAX), -1);
    assert_int_equal(inbuf_held(&b), 3);
    assert_memory_equal(inbuf_data(&b), "abc", 3);
    inbuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_and_free),
        cmocka_unit_test(test_growth_stops_at_bound),
        cmocka_unit_test(test_consume_does_not_move),
        cmocka_unit_test(test_compaction_keeps_it_small),
        cmocka_unit_test(test_overflow_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
