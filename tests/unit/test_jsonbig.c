/* test_jsonbig.c - loading and dumping long strings in one pass (worker/jsonbig.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "worker/jsonbig.h"
#include "proto/jsonpass.h"

/* jb_load gives jansson's tree for every chunk size, the tiny ones making
 * nearly every string and container "long". */
static void same_tree(const char *s, size_t n)
{
    static const size_t chunks[] = { 1, 2, 3, 5, 8, 13, 64, JP_CHUNK };
    json_t *ref = json_loadb(s, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);

    assert_non_null(ref);
    for (size_t i = 0; i < sizeof chunks / sizeof *chunks; i++) {
        json_t *got = jb_load(s, n, chunks[i]);
        if (!got || !json_equal(got, ref))
            fail_msg("chunk %zu: jb_load differs from jansson for \"%.*s\"", chunks[i],
                     (int)(n > 200 ? 200 : n), s);
        json_decref(got);
    }
    json_decref(ref);
}

static void test_load_as_jansson(void **state)
{
    static const char *const corpus[] = {
        "1", " 1 ", "-0", "1.5e3", "true", "null", "\"a\"", "\"\"", "\"\\u0000\"",
        "\"\\ud83d\\ude00 and \\uDBFF\\uDFFF\"", "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"",
        "\"\\u0041\\u00e9\\u20ac\\u07ff\\u0800\\uffff\"", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"",
        "[]", "{}", "[1,2,3,4,5,6,7,8,9,10,11,12]", "[[1,2],[3,4],[5,[6,[7]]]]",
        "{\"x\":{\"y\":{\"z\":[]}}}", "{\"a\":1,\"a\":2}", "{\"a\":\"long string one\",\"b\":[\"x\",\"yy\"],\"a\":3}",
        "[[\"data\",\"xxxxxxxxxxxxxxxxxxxxxxxx\"],[\"n\",1],[\"t\",{\"k\":\"v\\nv\"}]]",
        " [ 1 , \"two\" , { \"k\" : [ true , null ] } ] ", "{\"k\\u00e9y\":\"v\"}",
    };
    (void)state;
    for (size_t i = 0; i < sizeof corpus / sizeof *corpus; i++)
        same_tree(corpus[i], strlen(corpus[i]));
}

/* A long string with a broken escape or no closing quote gives no tree. */
static void test_load_refuses_invalid(void **state)
{
    static const char *const bad[] = {
        "\"\\x\"", "\"\\u12\"", "\"\\udc00\"", "\"\\ud800\"", "\"\\ud800\\u0041\"", "\"\\",
        "\"abc", "",
    };
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *got = jb_load(bad[i], strlen(bad[i]), 1);
        if (got)
            fail_msg("jb_load gave a tree for \"%s\"", bad[i]);
    }
}

/* jb_dump gives the same JSON as json_dumps and leaves the tree as it
 * was: long strings (escapes, control bytes, UTF-8) in objects, arrays and
 * nested ones, more of them than it splices, and short ones beside them. */
static void test_dump_big(void **state)
{
    json_t *v = json_object(), *arr = json_array(), *copy, *back;
    char big[300];
    size_t len;
    char *out;
    (void)state;
    for (size_t i = 0; i < sizeof big - 1; i++)
        big[i] = "ab\"\\\n\x01/\xc3\xa9"[i % 9];    /* 299 bytes: no cut sequence */
    big[sizeof big - 1] = '\0';
    json_object_set_new(v, "value", json_string(big));
    assert_int_equal(json_string_length(json_object_get(v, "value")), 299);
    json_object_set_new(v, "short", json_string("s"));
    for (int i = 0; i < 20; i++)
        json_array_append_new(arr, i % 3 ? json_string(big) : json_pack("[s,i]", big, i));
    json_object_set_new(v, "bindings", arr);
    copy = json_deep_copy(v);
    out = jb_dump(v, 100, &len);
    assert_non_null(out);
    assert_int_equal(len, strlen(out));
    back = json_loadb(out, len, 0, NULL);
    assert_non_null(back);
    assert_true(json_equal(back, copy));
    assert_true(json_equal(v, copy));         /* the tree is as it was */
    free(out);
    out = jb_dump(v, 1000, &len);          /* nothing long: jansson's dump */
    assert_non_null(out);
    assert_int_equal(len, strlen(out));
    json_decref(back);
    assert_non_null(back = json_loadb(out, len, 0, NULL));
    assert_true(json_equal(back, copy));
    free(out);
    json_decref(back);
    json_decref(copy);
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_as_jansson),
        cmocka_unit_test(test_load_refuses_invalid),
        cmocka_unit_test(test_dump_big),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
