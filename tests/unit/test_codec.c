/*
 * test_codec.c - worker/codec.c and proto/utf8.c against a real Lua state, with hostile
 * values: cycles, deep nesting, metatables whose metamethods raise, invalid
 * UTF-8, NaN and infinities, size caps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/utf8.h"
#include "worker/codec.h"

static int setup(void **state)
{
    lua_State *L = luaL_newstate();

    if (L == NULL)
        return -1;
    luaL_openlibs(L);
    *state = L;
    return 0;
}

static int teardown(void **state)
{
    lua_close(*state);
    return 0;
}

/* Run code, leaving its one result on the stack. */
static void eval(lua_State *L, const char *code)
{
    if (luaL_loadstring(L, code) != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK)
        fail_msg("lua: %s", lua_tostring(L, -1));
}

/* Encode the result of code, check the stack is balanced, return the
 * compact sorted JSON text (caller frees), or NULL with *err on error. */
static char *encode_max(lua_State *L, const char *code, size_t max, const char **err)
{
    json_t *j = NULL;
    char *s;
    int top;

    eval(L, code);
    top = lua_gettop(L);
    *err = NULL;
    if (codec_to_json(L, -1, max, &j, err) < 0) {
        assert_non_null(*err);
        assert_int_equal(lua_gettop(L), top);
        lua_pop(L, 1);
        return NULL;
    }
    assert_int_equal(lua_gettop(L), top);
    lua_pop(L, 1);
    s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    assert_non_null(s);
    json_decref(j);
    /* whatever we print, jansson (the supervisor's parser) reads back */
    j = json_loads(s, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (j == NULL)
        fail_msg("unreadable output %s", s);
    json_decref(j);
    return s;
}

static void expect(lua_State *L, const char *code, const char *json)
{
    const char *err;
    char *s = encode_max(L, code, 0, &err);

    if (s == NULL)
        fail_msg("%s: error %s", code, err);
    if (strcmp(s, json) != 0)
        fail_msg("%s: got %s, want %s", code, s, json);
    free(s);
}

static void expect_error(lua_State *L, const char *code, size_t max, const char *want)
{
    const char *err;
    char *s = encode_max(L, code, max, &err);

    if (s != NULL)
        fail_msg("%s: encoded as %s, want error %s", code, s, want);
    assert_string_equal(err, want);
}

static void test_scalars(void **state)
{
    lua_State *L = *state;

    expect(L, "return nil", "null");
    expect(L, "return true", "true");
    expect(L, "return false", "false");
    expect(L, "return 42", "42");
    expect(L, "return -7", "-7");
    expect(L, "return math.maxinteger", "9223372036854775807");
    expect(L, "return math.mininteger", "-9223372036854775808");
    expect(L, "return 1.0", "1.0");
    expect(L, "return 0.5", "0.5");
    expect(L, "return -0.0", "-0.0");
    expect(L, "return 2^63", "9.2233720368547758e18");
    expect(L, "return 0/0", "null");
    expect(L, "return 1/0", "null");
    expect(L, "return -1/0", "null");
    expect(L, "return {0/0, 1/0, 1.5}", "[null,null,1.5]");
    expect(L, "return print", "null");
    expect(L, "return coroutine.create(print)", "null");
    expect(L, "return io.stdout", "null");
}

static void test_strings(void **state)
{
    lua_State *L = *state;

    expect(L, "return 'a\\0b'", "\"a\\u0000b\"");
    expect(L, "return 'caf\\xc3\\xa9 \\xf0\\x9f\\x98\\x80'", "\"caf\xc3\xa9 \xf0\x9f\x98\x80\"");
    expect(L, "return 'a\\xffb'", "\"a\xef\xbf\xbd" "b\"");
    /* overlong NUL: two invalid bytes, two replacements */
    expect(L, "return '\\xc0\\x80'", "\"\xef\xbf\xbd\xef\xbf\xbd\"");
    /* overlong 3-byte form of '/' */
    expect(L, "return '\\xe0\\x80\\xaf'", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
    /* surrogate U+D800 */
    expect(L, "return '\\xed\\xa0\\x80'", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
    /* U+110000 */
    expect(L, "return '\\xf4\\x90\\x80\\x80x'",
           "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdx\"");
    /* truncated at the end */
    expect(L, "return 'x\\xe2\\x82'", "\"x\xef\xbf\xbd\xef\xbf\xbd\"");
    expect(L, "return '\\xf5'", "\"\xef\xbf\xbd\"");
    /* U+10FFFF and U+FFFF are fine */
    expect(L, "return '\\xf4\\x8f\\xbf\\xbf\\xef\\xbf\\xbf'", "\"\xf4\x8f\xbf\xbf\xef\xbf\xbf\"");
    expect(L, "return ''", "\"\"");
}

/* Our validator and jansson's must agree, or json_stringn_nocheck would
 * accept text jansson itself refuses. */
/* utf8_complete: where streamed output may be cut. */
static void test_utf8_complete(void **state)
{
    static const struct { const char *s; size_t keep; } cases[] = {
        {"", 0}, {"abc", 3}, {"a\xc3\xa9", 3}, {"a\xc3", 1},            /* é whole, cut */
        {"\xe2\x82\xac", 3}, {"x\xe2\x82", 1}, {"x\xe2", 1},            /* € */
        {"\xf0\x9f\x98\x80", 4}, {"\xf0\x9f\x98", 0}, {"y\xf0\x9f", 1}, /* 😀 */
        {"\x80\x80\x80\x80", 4},                                         /* not UTF-8: kept */
        {"a\xff", 2},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(utf8_complete(cases[i].s, strlen(cases[i].s)), cases[i].keep);
}

static void test_utf8_agrees_with_jansson(void **state)
{
    static const char *const cases[] = {
        "", "a", "\xc2\x80", "\xc1\xbf", "\xdf\xbf", "\xe0\x9f\xbf", "\xe0\xa0\x80",
        "\xed\x9f\xbf", "\xed\xa0\x80", "\xed\xbf\xbf", "\xee\x80\x80", "\xef\xbf\xbf",
        "\xf0\x8f\xbf\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "\xf4\x90\x80\x80",
        "\xf5\x80\x80\x80", "\xff", "\x80", "\xe2\x82", "\xe2\x82\xac", "\xc3\x28",
        "\xf0\x9f\x98", "a\xf0\x9f\x98\x80z",
    };
    size_t i;
    json_t *j;

    (void)state;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        j = json_stringn(cases[i], strlen(cases[i]));
        if (utf8_valid(cases[i], strlen(cases[i])) != (j != NULL))
            fail_msg("case %zu disagrees with jansson", i);
        json_decref(j);
    }
    assert_int_equal(utf8_valid("a\0b", 3), 1);
}

/* The ASCII runs are skipped a word at a time (proto/ascii.h): every byte
 * value, and a sequence cut by the end, at every offset of a plain text. */
static void test_utf8_every_byte_at_every_offset(void **state)
{
    static const char *const seq[] = { "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xed\xa0\x80" };
    char buf[24];
    json_t *j;

    (void)state;
    for (size_t n = 1; n <= sizeof buf; n += 5)
        for (size_t at = 0; at < n; at++) {
            for (int c = 0; c < 256; c++) {
                memset(buf, 'a', sizeof buf);
                buf[at] = (char)c;
                j = json_stringn(buf, n);
                if (utf8_valid(buf, n) != (j != NULL))
                    fail_msg("byte 0x%02x at %zu of %zu disagrees with jansson", c, at, n);
                json_decref(j);
            }
            for (size_t k = 0; k < sizeof seq / sizeof *seq; k++) {
                size_t len = strlen(seq[k]);
                memset(buf, 'a', sizeof buf);
                memcpy(buf + at, seq[k], at + len <= sizeof buf ? len : sizeof buf - at);
                j = json_stringn(buf, n);
                if (utf8_valid(buf, n) != (j != NULL))
                    fail_msg("sequence %zu at %zu of %zu disagrees with jansson", k, at, n);
                json_decref(j);
            }
        }
}

static void test_string_new(void **state)
{
    json_t *j;

    (void)state;
    j = utf8_string_new("a\0\xff", 3);
    assert_non_null(j);
    assert_int_equal(json_string_length(j), 5);
    assert_memory_equal(json_string_value(j), "a\0\xef\xbf\xbd", 5);
    json_decref(j);
    j = utf8_string_new("ok", 2);
    assert_string_equal(json_string_value(j), "ok");
    json_decref(j);
}

static void test_tables(void **state)
{
    lua_State *L = *state;

    expect(L, "return {}", "[]");
    expect(L, "return {1, 2, 3}", "[1,2,3]");
    expect(L, "return {'a', {true}, {}}", "[\"a\",[true],[]]");
    expect(L, "return {1, nil, 3}", "{\"1\":1,\"3\":3}");
    expect(L, "return {[2] = 'b'}", "{\"2\":\"b\"}");
    expect(L, "return {[0] = 'z', 'a'}", "{\"0\":\"z\",\"1\":\"a\"}");
    expect(L, "return {[-1] = 1}", "{\"-1\":1}");
    expect(L, "return {1, 2, x = 3}", "{\"1\":1,\"2\":2,\"x\":3}");
    expect(L, "return {[1.5] = 1, [true] = 2, [false] = 3}",
           "{\"1.5\":1,\"false\":3,\"true\":2}");
    expect(L, "return {[2^63] = 1, [1/0] = 2, [-1/0] = 3}",
           "{\"-inf\":3,\"9.2233720368547758e+18\":1,\"inf\":2}");
    expect(L, "return {[2.0] = 'two'}", "{\"2\":\"two\"}");
    expect(L, "return {[math.mininteger] = 1}", "{\"-9223372036854775808\":1}");
    /* opaque values: omitted in objects, null in arrays */
    expect(L, "return {f = print, x = 1, [print] = 2, [{}] = 3}", "{\"x\":1}");
    expect(L, "return {1, print, 3}", "[1,null,3]");
    /* keys: invalid UTF-8 and NUL (jansson cannot parse it in a key) replaced */
    expect(L, "return {['a\\0b'] = 1, ['k\\xff'] = 2}",
           "{\"a\xef\xbf\xbd" "b\":1,\"k\xef\xbf\xbd\":2}");
    /* a shared table without a cycle is encoded at each place */
    expect(L, "local s = {1}; return {s, s, {s}}", "[[1],[1],[[1]]]");
    /* a table used as a key is not descended: no cycle */
    expect(L, "local t = {}; t[t] = 1; return t", "{}");
}

static void test_cycles(void **state)
{
    lua_State *L = *state;

    expect_error(L, "local t = {}; t.self = t; return t", 0, "table cycle");
    expect_error(L, "local t = {}; t[1] = t; return t", 0, "table cycle");
    expect_error(L, "local a, b = {}, {}; a.b = b; b.a = a; return a", 0, "table cycle");
    expect_error(L, "local a, b = {}, {}; a[1] = {b}; b[1] = {x = a}; return {a}", 0,
                 "table cycle");
    /* a cycle under a table key is never reached */
    expect(L, "local t = {}; local k = {}; k.k = k; t[k] = 1; t.x = 1; return t", "{\"x\":1}");
}

static const char deep_fmt[] =
    "local t = {} local cur = t for i = 2, %d do cur[1] = {} cur = cur[1] end return t";

static void test_depth(void **state)
{
    lua_State *L = *state;
    char code[200];
    const char *err;
    char *s;
    size_t i, n;

    snprintf(code, sizeof code, deep_fmt, CODEC_MAX_DEPTH);
    s = encode_max(L, code, 0, &err);
    assert_non_null(s);
    n = strlen(s);
    assert_int_equal(n, 2 * CODEC_MAX_DEPTH);
    for (i = 0; i < n; i++)
        assert_int_equal(s[i], i < n / 2 ? '[' : ']');
    free(s);

    snprintf(code, sizeof code, deep_fmt, CODEC_MAX_DEPTH + 1);
    expect_error(L, code, 0, "nesting deeper than 100");
    /* a cycle deeper down is still a cycle, not a depth error */
    expect_error(L, "local t = {{{}}}; t[1][1][1] = t; return t", 0, "table cycle");
}

static void test_metamethods_never_run(void **state)
{
    lua_State *L = *state;

    eval(L, "local boom = function() error('metamethod ran') end\n"
            "mt = {__index = boom, __newindex = boom, __pairs = boom, __len = boom,\n"
            "      __eq = boom, __lt = boom, __le = boom, __tostring = boom,\n"
            "      __call = boom, __concat = boom, __ipairs = boom, __metatable = 'locked'}\n"
            "return true");
    lua_pop(L, 1);
    expect(L, "return setmetatable({1, 2}, mt)", "[1,2]");
    expect(L, "return setmetatable({a = setmetatable({}, mt)}, mt)", "{\"a\":[]}");
    expect(L, "return setmetatable({}, mt)", "[]");
    /* __index would supply t[2]: the raw table is sparse */
    expect(L, "return setmetatable({[1] = 1, [3] = 3}, mt)", "{\"1\":1,\"3\":3}");
    /* a __pairs that loops forever must not be used */
    eval(L, "return setmetatable({x = 1}, {__pairs = function() while true do end end})");
    {
        json_t *j = NULL;
        const char *err;
        assert_int_equal(codec_to_json(L, -1, 0, &j, &err), 0);
        assert_int_equal(json_integer_value(json_object_get(j, "x")), 1);
        json_decref(j);
        lua_pop(L, 1);
    }
}

static void test_size_cap(void **state)
{
    lua_State *L = *state;
    const char *err;
    char *s;
    clock_t t0;

    /* "abc" costs 5: fits in 5, not in 4 */
    s = encode_max(L, "return 'abc'", 5, &err);
    assert_non_null(s);
    free(s);
    expect_error(L, "return 'abc'", 4, CODEC_ERR_TOO_LARGE);
    expect_error(L, "return string.rep('x', 1000)", 999, CODEC_ERR_TOO_LARGE);
    /* escapes count: 100 NULs print as 600 bytes */
    expect_error(L, "return string.rep('\\0', 100)", 300, CODEC_ERR_TOO_LARGE);
    expect_error(L, "return {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}", 10, CODEC_ERR_TOO_LARGE);
    expect_error(L, "return {key = 'value'}", 10, CODEC_ERR_TOO_LARGE);
    /* keys are charged as written, escapes included (found by fuzz_codec):
     * 90 control bytes print as 540 */
    expect_error(L, "return {[string.rep('\\1', 90)] = 1}", 100, CODEC_ERR_TOO_LARGE);
    /* the estimate is an upper bound: one byte below the real length fails */
    {
        static const char *const cases[] = {
            "return {['\"k\"'] = 1, ['\\1\\2'] = '\\31'}",
            "return {['a\\\\b'] = {['\\0'] = true}}",
            "return {[string.rep('\"', 50)] = string.rep('\\\\', 50)}",
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char *out = encode_max(L, cases[i], 0, &err);
            size_t n;

            assert_non_null(out);
            n = strlen(out);
            free(out);
            expect_error(L, cases[i], n - 1, CODEC_ERR_TOO_LARGE);
        }
    }
    /* fails early: a million entries against a tiny cap is quick */
    eval(L, "local t = {} for i = 1, 1000000 do t[i] = i end big = t return true");
    lua_pop(L, 1);
    t0 = clock();
    expect_error(L, "return big", 1000, CODEC_ERR_TOO_LARGE);
    assert_true((double)(clock() - t0) / CLOCKS_PER_SEC < 0.2);
    eval(L, "big = nil return true");
    lua_pop(L, 1);
}

static void test_million(void **state)
{
    lua_State *L = *state;
    json_t *j = NULL;
    const char *err;
    clock_t t0;
    double secs;

    eval(L, "local t = {} for i = 1, 1000000 do t[i] = i * 0.5 end return t");
    t0 = clock();
    assert_int_equal(codec_to_json(L, -1, 0, &j, &err), 0);
    secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    lua_pop(L, 1);
    assert_true(json_is_array(j));
    assert_int_equal(json_array_size(j), 1000000);
    assert_true(json_real_value(json_array_get(j, 999999)) == 500000.0);
    json_decref(j);
    /* generous even for the sanitizer build */
    assert_true(secs < 10.0);
}

/* ------------------------------------------------------- JSON -> Lua */

struct push_call {
    const json_t *v;
    int rc, top_inside;
    const char *err;
};

static int push_cf(lua_State *L)
{
    struct push_call *c = lua_touserdata(L, 1);

    lua_pop(L, 1);
    c->rc = codec_push_json(L, c->v, &c->err);
    c->top_inside = lua_gettop(L);
    return c->rc == 0 ? 1 : 0;
}

/* Push the Lua form of the JSON text, decoded in protected context. */
static int push_text(lua_State *L, const char *text, const char **err)
{
    struct push_call c = {NULL, -1, -1, NULL};
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);

    if (v == NULL)
        fail_msg("bad test JSON %s: %s", text, je.text);
    c.v = v;
    lua_pushcfunction(L, push_cf);
    lua_pushlightuserdata(L, &c);
    assert_int_equal(lua_pcall(L, 1, 1, 0), LUA_OK);
    json_decref(v);
    *err = c.err;
    if (c.rc < 0) {
        assert_int_equal(c.top_inside, 0); /* nothing pushed */
        lua_pop(L, 1);
    } else {
        assert_int_equal(c.top_inside, 1);
    }
    return c.rc;
}

/* Push the JSON, then run check (a chunk receiving it as ...) which must
 * return true. */
static void check_push(lua_State *L, const char *text, const char *check)
{
    const char *err;
    int top = lua_gettop(L);

    if (push_text(L, text, &err) < 0)
        fail_msg("%s: %s", text, err);
    if (luaL_loadstring(L, check) != LUA_OK)
        fail_msg("%s", lua_tostring(L, -1));
    lua_insert(L, -2);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK)
        fail_msg("%s: %s", check, lua_tostring(L, -1));
    if (!lua_toboolean(L, -1))
        fail_msg("%s: check failed: %s", text, check);
    lua_pop(L, 1);
    assert_int_equal(lua_gettop(L), top);
}

static void test_push(void **state)
{
    lua_State *L = *state;

    check_push(L, "null", "return select('#', ...) == 1 and ... == nil");
    check_push(L, "3", "local v = ... return math.type(v) == 'integer' and v == 3");
    check_push(L, "3.0", "local v = ... return math.type(v) == 'float' and v == 3");
    check_push(L, "-0.0", "local v = ... return 1 / v == -1 / 0");
    check_push(L, "9223372036854775807", "return ... == math.maxinteger");
    check_push(L, "-9223372036854775808", "return ... == math.mininteger");
    check_push(L, "\"a\\u0000b\"", "local v = ... return v == 'a\\0b' and #v == 3");
    check_push(L, "[true, false]", "local t = ... return t[1] == true and t[2] == false");
    check_push(L, "[]", "local t = ... return type(t) == 'table' and next(t) == nil");
    check_push(L, "{}", "local t = ... return type(t) == 'table' and next(t) == nil");
    check_push(L, "[1, null, 3]",
               "local t = ... return t[1] == 1 and t[2] == nil and t[3] == 3 and "
               "rawlen(t) >= 1");
    check_push(L, "[null]", "local t = ... return next(t) == nil");
    check_push(L, "{\"a\": null, \"b\": 1}",
               "local t = ... local n = 0 for _ in pairs(t) do n = n + 1 end "
               "return n == 1 and t.b == 1 and rawget(t, 'a') == nil");
    check_push(L, "{\"1\": \"s\"}", "local t = ... return t['1'] == 's' and t[1] == nil");
    check_push(L, "{\"x\": {\"y\": [1, {\"z\": 2.5}]}}",
               "local t = ... return t.x.y[2].z == 2.5 and math.type(t.x.y[1]) == 'integer'");
}

/* Keys made by hand may hold NUL: pushed with their length. */
static void test_push_nul_key(void **state)
{
    lua_State *L = *state;
    struct push_call c = {NULL, -1, -1, NULL};
    json_t *o = json_object();

    assert_int_equal(json_object_setn_new(o, "a\0b", 3, json_integer(7)), 0);
    c.v = o;
    lua_pushcfunction(L, push_cf);
    lua_pushlightuserdata(L, &c);
    assert_int_equal(lua_pcall(L, 1, 1, 0), LUA_OK);
    json_decref(o);
    assert_int_equal(c.rc, 0);
    lua_pushlstring(L, "a\0b", 3);
    assert_int_equal(lua_rawget(L, -2), LUA_TNUMBER);
    assert_int_equal(lua_tointeger(L, -1), 7);
    lua_pop(L, 2);
}

static char *deep_json(int depth)
{
    char *s = malloc((size_t)depth * 2 + 1);
    int i;

    assert_non_null(s);
    for (i = 0; i < depth; i++) {
        s[i] = '[';
        s[depth * 2 - 1 - i] = ']';
    }
    s[depth * 2] = '\0';
    return s;
}

static void test_push_depth(void **state)
{
    lua_State *L = *state;
    const char *err;
    char *s;
    int top = lua_gettop(L);

    s = deep_json(CODEC_MAX_DEPTH);
    assert_int_equal(push_text(L, s, &err), 0);
    free(s);
    /* walk down: exactly CODEC_MAX_DEPTH tables */
    {
        int d = 0;
        while (lua_type(L, -1) == LUA_TTABLE) {
            d++;
            lua_rawgeti(L, -1, 1);
            lua_remove(L, -2);
        }
        assert_int_equal(d, CODEC_MAX_DEPTH);
        lua_pop(L, 1);
    }
    s = deep_json(CODEC_MAX_DEPTH + 1);
    assert_int_equal(push_text(L, s, &err), -1);
    assert_string_equal(err, "nesting deeper than 100");
    free(s);
    assert_int_equal(lua_gettop(L), top);
}

/* Lua -> JSON -> Lua keeps the integer/float subtype. */
static void test_round_trip(void **state)
{
    lua_State *L = *state;
    const char *err;
    json_t *j = NULL;
    char *text;

    eval(L, "return {i = 3, f = 3.0, big = math.maxinteger, list = {1, 2.5, 'x'}}");
    assert_int_equal(codec_to_json(L, -1, 0, &j, &err), 0);
    lua_pop(L, 1);
    text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    check_push(L, text,
               "local t = ... return math.type(t.i) == 'integer' and math.type(t.f) == 'float' "
               "and t.big == math.maxinteger and t.list[3] == 'x' and t.list[2] == 2.5");
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_scalars, setup, teardown),
        cmocka_unit_test_setup_teardown(test_strings, setup, teardown),
        cmocka_unit_test(test_utf8_agrees_with_jansson),
        cmocka_unit_test(test_utf8_every_byte_at_every_offset),
        cmocka_unit_test(test_utf8_complete),
        cmocka_unit_test(test_string_new),
        cmocka_unit_test_setup_teardown(test_tables, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cycles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_depth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metamethods_never_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_size_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_million, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_nul_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_push_depth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
