/* test_jsonpass.c - validation without a tree, walking, splicing (proto/jsonpass.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "proto/jsonpass.h"

static int jansson_says(const char *s, size_t n)
{
    json_error_t e;
    json_t *v = json_loadb(s, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    json_decref(v);
    return v ? 0 : -1;
}

/* jp_validate agrees with jansson for every chunk size, the tiny ones
 * included (they make the walker handle almost every container). */
static void agree(const char *s, size_t n)
{
    static const size_t chunks[] = { 1, 2, 3, 5, 8, 13, 64, JP_CHUNK };
    int want = jansson_says(s, n);

    for (size_t i = 0; i < sizeof chunks / sizeof *chunks; i++) {
        int got = jp_validate(s, n, chunks[i]);
        if (got != want)
            fail_msg("chunk %zu: jp_validate %d, jansson %d for \"%.*s\"", chunks[i], got, want,
                     (int)(n > 200 ? 200 : n), s);
    }
}

static void agree_str(const char *s) { agree(s, strlen(s)); }

static void test_agrees_with_jansson(void **state)
{
    static const char *const corpus[] = {
        "", " ", "1", " 1 ", "-", "-0", "01", "1.", "1.5e3", "1e400", "-1e400", "1e-400",
        "9223372036854775807", "9223372036854775808", "-9223372036854775808", "true", "tru",
        "truex", "null", "nul", "\"a\"", "\"a", "\"\\u0000\"", "\"\\ud800\"", "\"\\ud83d\\ude00\"",
        "\"\\x\"", "\"\xff\"", "\"\xc3\xa9\"", "\"\x01\"", "[]", "[", "]", "[1]", "[1,]", "[,1]",
        "[1 2]", "[1,2]x", "[1}", "{}", "{", "{\"a\":1}", "{\"a\"}", "{\"a\":}", "{\"a\":1,}",
        "{,}", "{1:2}", "{\"a\\u0000\":1}", "{\"a\":\"\\u0000\"}", "[[],[[]],{\"k\":[1,{}]}]",
        "[\"]\",\"[\",\"{\",\"}\",\"\\\"\"]", "{\"a\":1 \"b\":2}", "{\"a\" : 1 , \"b\" : [ 2 ] }",
        "[1,2,3,4,5,6,7,8,9,10,11,12]", "[[1,2],[3,4],[5,[6,[7]]]]", "{\"x\":{\"y\":{\"z\":[]}}}",
        "[true,false,null,\"s\",1.5,-2]", "[1]]", "[[1]", "{\"a\":1}}", " [ 1 , 2 ] ",
        "[1\t,\n2\r]", "[1\f]", "[\"a\"\"b\"]", "{\"a\":1:2}", "[1,{\"a\":[1,2,}]", "[00]",
        "{\"\xff\":1}", "[\"\xed\xa0\x80\"]", "[1e5,2E-3,-0.0,0e0]", "[.5]", "[+1]", "[1,,2]",
    };
    (void)state;
    for (size_t i = 0; i < sizeof corpus / sizeof *corpus; i++)
        agree_str(corpus[i]);
    agree("[\"a\0b\"]", 7);                 /* a raw NUL */
    agree("[1,\0]", 5);
}

static char *nested(size_t depth, const char *inner)
{
    size_t n = strlen(inner);
    char *s = malloc(2 * depth + n + 1), *p = s;

    memset(p, '[', depth);
    p += depth;
    memcpy(p, inner, n);
    p += n;
    memset(p, ']', depth);
    p[depth] = '\0';
    return s;
}

/* Strings longer than the chunk are judged by jsonpass itself: every rule
 * of jansson's string lexer, alone, inside text and inside containers. */
static void test_long_strings_as_jansson(void **state)
{
    static const char *const body[] = {
        "plain text", "\\\"\\/\\b\\f\\n\\r\\t\\\\", "\\x", "\\", "\\ ", "\\u", "\\u12",
        "\\u12g4", "\\u0041", "\\u00e9\\u00E9", "\\u0000", "\\ud800", "\\udc00", "\\ud800\\u0041",
        "\\ud800\\ud800", "\\ud800\\udc00", "\\uDBFF\\uDFFF", "\\ud800x", "\\ud800\\n",
        "\\ud800\\u", "\\ud800\\udc0", "\\udfff\\ud800", "\x01", "\x1f", "\x7f", "\t",
        "\xc3\xa9", "\xc3", "\xc3x", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xe0\xa0\x80",
        "\xed\x9f\xbf", "\xed\xa0\x80", "\xef\xbf\xbf", "\xf0\x8f\xbf\xbf",
        "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80",
        "\xff", "\x80", "\xe2\x82", "\xe2\x82\xac\xe2\x82\xac", "\xf0\x9f\x98\x80",
    };
    char buf[256];
    (void)state;
    for (size_t i = 0; i < sizeof body / sizeof *body; i++) {
        static const char *const frame[][2] = {
            { "\"", "\"" }, { "\"ab", "cd\"" }, { "[\"", "\"]" }, { "{\"k\":\"", "\"}" },
            { "[[\"k\",\"x", "x\"],1]" },
        };
        for (size_t f = 0; f < sizeof frame / sizeof *frame; f++) {
            int n = snprintf(buf, sizeof buf, "%s%s%s", frame[f][0], body[i], frame[f][1]);
            agree(buf, (size_t)n);
        }
    }
    agree("\"a\0b\"", 5);                  /* a raw NUL in a long string */
}

/* Long strings are scanned eight bytes at a time (proto/ascii.h): every
 * byte value and every escape at every offset of a plain string, so that
 * each lands in every position of a word and past the last whole word. */
static void test_every_byte_at_every_offset_as_jansson(void **state)
{
    static const char *const esc[] = { "\\\"", "\\\\", "\\n", "\\u0041", "\\x", "\\",
                                       "\\ud800\\udc00", "\xc3\xa9", "\xe2\x82\xac", "\xc3" };
    char buf[64];
    (void)state;
    for (size_t at = 0; at < 20; at++) {
        for (int c = 0; c < 256; c++) {
            memset(buf, 'a', 22);
            buf[0] = buf[21] = '"';
            buf[1 + at] = (char)c;
            agree(buf, 22);
        }
        for (size_t e = 0; e < sizeof esc / sizeof *esc; e++) {
            int n = snprintf(buf, sizeof buf, "\"%.*s%s%.*s\"", (int)at, "aaaaaaaaaaaaaaaaaaaa",
                             esc[e], (int)(19 - at), "aaaaaaaaaaaaaaaaaaaa");
            agree(buf, (size_t)n);
        }
    }
}

/* jansson's limit: no value deeper than 2048, scalars counted. */
static void test_depth_as_jansson(void **state)
{
    static const size_t depths[] = { 2046, 2047, 2048, 2049, 2050 };
    static const char *const inners[] = { "", "1", "{}", "{\"a\":1}", "1,[2]" };
    (void)state;
    for (size_t i = 0; i < sizeof depths / sizeof *depths; i++)
        for (size_t j = 0; j < sizeof inners / sizeof *inners; j++) {
            char *s = nested(depths[i], inners[j]);
            agree_str(s);
            free(s);
        }
}

/* A large array of many small values: validated with bounded trees. */
static void test_large_containers(void **state)
{
    size_t n = 200000;
    char *s = malloc(3 * n + 2), *p = s;
    (void)state;
    *p++ = '[';
    for (size_t i = 0; i < n; i++) {
        memcpy(p, i ? ",[]" : "[]", i ? 3 : 2);
        p += i ? 3 : 2;
    }
    *p++ = ']';
    assert_int_equal(jp_validate(s, (size_t)(p - s), JP_CHUNK), 0);
    assert_int_equal(jansson_says(s, (size_t)(p - s)), 0);
    s[100000] = '}';                        /* a wrong bracket deep inside */
    agree(s, (size_t)(p - s));
    free(s);
}

static void test_iterate(void **state)
{
    const char *t = " {\"a\" : [1, 2] , \"b\":\"x,y\", \"c\":{}} ";
    struct jp_span v = jp_trim(t, strlen(t)), k, e;
    struct jp_iter it;
    json_t *key;
    (void)state;
    assert_int_equal(jp_iter_init(&it, v), 0);
    assert_int_equal(jp_iter_next(&it, &k, &e), 1);
    key = jp_key(k);
    assert_string_equal(json_string_value(key), "a");
    json_decref(key);
    assert_int_equal(e.n, 6);
    assert_memory_equal(e.p, "[1, 2]", 6);
    assert_int_equal(jp_iter_next(&it, &k, &e), 1);
    assert_memory_equal(e.p, "\"x,y\"", 5);
    assert_int_equal(jp_iter_next(&it, &k, &e), 1);
    assert_memory_equal(e.p, "{}", 2);
    assert_int_equal(jp_iter_next(&it, &k, &e), 0);
    assert_int_equal(jp_iter_init(&it, jp_trim("[]", 2)), 0);
    assert_int_equal(jp_iter_next(&it, &k, &e), 0);
    assert_int_equal(jp_iter_init(&it, jp_trim("1", 1)), -1);
}

static void test_splice(void **state)
{
    json_t *v = json_pack("{s:o,s:s,s:o}", "value", jp_token(0), "x", "\x01sbx-splice-0-",
                          "b", jp_token(1));
    struct jp_splice sp[2] = { { { "[1, 2]", 6 } }, { { "{}", 2 } } };
    size_t len;
    char *out = jp_dump_spliced(v, sp, 2, &len);
    (void)state;
    assert_non_null(out);
    assert_string_equal(out, "{\"value\":[1, 2],\"x\":\"\\u0001sbx-splice-0-\",\"b\":{}}");
    assert_int_equal(len, strlen(out));
    free(out);
    /* a token twice: refused */
    json_object_set_new(v, "again", jp_token(1));
    assert_null(jp_dump_spliced(v, sp, 2, &len));
    json_decref(v);
}

/* jp_quote gives the string jansson reads back, for every ASCII byte and
 * some UTF-8. */
static void test_quote(void **state)
{
    char in[160];
    size_t n = 0, len;
    char *q;
    json_error_t e;
    json_t *v;
    (void)state;
    for (int c = 1; c < 128; c++)
        in[n++] = (char)c;
    memcpy(in + n, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9);
    n += 9;
    in[n++] = '\0';                        /* NUL too (\u0000) */
    q = jp_quote(in, n, &len);
    assert_non_null(q);
    assert_int_equal(strlen(q), len);
    v = json_loadb(q, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    assert_non_null(v);
    assert_int_equal(json_string_length(v), n);
    assert_memory_equal(json_string_value(v), in, n);
    json_decref(v);
    free(q);
}

/* jp_quote writes what jansson writes, with every ASCII byte at every
 * offset of a plain string (the runs between them are copied a word at a
 * time). */
static void test_quote_every_byte_at_every_offset(void **state)
{
    char in[24];
    (void)state;
    for (size_t n = 1; n <= sizeof in; n += 5)
        for (size_t at = 0; at < n; at++)
            for (int c = 0; c < 128; c++) {
                json_t *ref;
                char *want, *got;
                size_t len;
                memset(in, 'a', sizeof in);
                in[at] = (char)c;
                ref = json_stringn(in, n);
                want = json_dumps(ref, JSON_ENCODE_ANY | JSON_COMPACT);
                got = jp_quote(in, n, &len);
                assert_non_null(want);
                assert_non_null(got);
                if (len != strlen(want) || strcmp(got, want) != 0)
                    fail_msg("byte %d at %zu of %zu: jp_quote %s, jansson %s", c, at, n, got, want);
                json_decref(ref);
                free(want);
                free(got);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agrees_with_jansson),
        cmocka_unit_test(test_long_strings_as_jansson),
        cmocka_unit_test(test_every_byte_at_every_offset_as_jansson),
        cmocka_unit_test(test_depth_as_jansson),
        cmocka_unit_test(test_large_containers),
        cmocka_unit_test(test_iterate),
        cmocka_unit_test(test_splice),
        cmocka_unit_test(test_quote),
        cmocka_unit_test(test_quote_every_byte_at_every_offset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
