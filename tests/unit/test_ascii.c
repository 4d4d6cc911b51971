/* test_ascii.c - the word-at-a-time spans of plain ASCII (proto/ascii.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/ascii.h"

static int is_ascii(unsigned char c)
{
    return c < 0x80;
}

static int is_json_plain(unsigned char c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* The span is exactly the whole words of the leading run: the contract's
 * "certainly in the class" (never a byte outside it) and its promise to
 * stop only at a word holding such a byte (never short for no reason). */
static void exact(size_t (*span)(const char *, size_t), int (*in)(unsigned char),
                  const char *s, size_t n)
{
    size_t run = 0, got = span(s, n);

    while (run < n && in((unsigned char)s[run]))
        run++;
    if (got != run / 8 * 8)
        fail_msg("span %zu for a run of %zu in %zu bytes", got, run, n);
}

/* Every byte value at every offset of a plain background, at every length
 * up to three words and at every alignment. */
static void every_byte_everywhere(size_t (*span)(const char *, size_t), int (*in)(unsigned char))
{
    char buf[40];

    for (int c = 0; c < 256; c++)
        for (size_t at = 0; at < 24; at++)
            for (size_t n = at + 1; n <= 24; n += 7)
                for (size_t align = 0; align < 8; align++) {
                    memset(buf, 'a', sizeof buf);
                    buf[align + at] = (char)c;
                    exact(span, in, buf + align, n);
                }
}

static void test_ascii_span(void **state)
{
    (void)state;
    every_byte_everywhere(ascii_span, is_ascii);
}

static void test_json_span(void **state)
{
    (void)state;
    every_byte_everywhere(ascii_json_span, is_json_plain);
}

/* Random texts rich in the bytes on the classes' edges. */
static void test_random(void **state)
{
    static const unsigned char edge[] = { 0x00, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d,
                                          0x7e, 0x7f, 0x80, 0x81, 0xa2, 0xdc, 0xff, 'a' };
    char buf[64];
    uint32_t x = 12345;
    (void)state;
    for (int k = 0; k < 200000; k++) {
        size_t n;
        for (size_t i = 0; i < sizeof buf; i++) {
            x = x * 1103515245u + 12345u;
            /* mostly plain, so runs reach past a few words */
            buf[i] = (char)((x >> 16) % 8 ? 'a' + (x >> 8) % 26 : edge[(x >> 20) % sizeof edge]);
        }
        n = (x >> 4) % sizeof buf;
        exact(ascii_span, is_ascii, buf, n);
        exact(ascii_json_span, is_json_plain, buf, n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ascii_span),
        cmocka_unit_test(test_json_span),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
