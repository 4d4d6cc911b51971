/*
 * test_bindings.c - proto/bindings.c against a real Lua state: exact round
 * trips (integer vs float, -0.0, NaN, inf, NUL, invalid UTF-8, typed keys),
 * cycles, depth, metamethods that raise, the baseline filter, size caps and
 * many malformed inputs.
 *
 * Each state keeps its globals table at stack index 1 and the baseline (the
 * names present after luaL_openlibs) at index 2.
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

#include "proto/bindings.h"
#include "worker/bindings_lua.h"
#include "worker/codec.h"

#define GIDX 1
#define BIDX 2

static lua_State *state_new(void)
{
    lua_State *L = luaL_newstate();

    assert_non_null(L);
    luaL_openlibs(L);
    lua_pushglobaltable(L);
    lua_newtable(L);
    lua_pushnil(L);
    while (lua_next(L, GIDX) != 0) {
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_pushboolean(L, 1);
        lua_rawset(L, BIDX);
    }
    return L;
}

static int setup(void **state)
{
    *state = state_new();
    return 0;
}

static int teardown(void **state)
{
    lua_close(*state);
    return 0;
}

static void run(lua_State *L, const char *code)
{
    if (luaL_loadstring(L, code) != LUA_OK || lua_pcall(L, 0, 0, 0) != LUA_OK)
        fail_msg("lua: %s", lua_tostring(L, -1));
}

/* code must return true */
static void check(lua_State *L, const char *code)
{
    if (luaL_loadstring(L, code) != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK)
        fail_msg("lua: %s", lua_tostring(L, -1));
    if (!lua_toboolean(L, -1))
        fail_msg("check failed: %s", code);
    lua_pop(L, 1);
}

/* Export with the stack checked; the compact JSON text (caller frees) or
 * NULL with *err. */
static char *export_text(lua_State *L, size_t max, size_t *size, const char **err)
{
    json_t *b = NULL;
    size_t sz = 0;
    int top = lua_gettop(L);
    char *s;

    *err = NULL;
    if (bindings_export(L, GIDX, BIDX, max, &b, &sz, err) < 0) {
        assert_int_equal(lua_gettop(L), top);
        assert_non_null(*err);
        return NULL;
    }
    assert_int_equal(lua_gettop(L), top);
    s = json_dumps(b, JSON_COMPACT);
    assert_non_null(s);
    json_decref(b);
    if (sz != strlen(s))                /* the size is exact, for every export */
        fail_msg("export size %zu, text %zu bytes: %.300s", sz, strlen(s), s);
    if (size != NULL)
        *size = sz;
    return s;
}

static char *export_ok(lua_State *L)
{
    const char *err;
    char *s = export_text(L, 0, NULL, &err);

    if (s == NULL)
        fail_msg("export: %s", err);
    return s;
}

static json_t *load(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);

    if (j == NULL)
        fail_msg("bad JSON %s: %s", text, je.text);
    return j;
}

struct restore_call {
    const json_t *b;
    int rc;
    const char *err;
};

static int restore_cf(lua_State *L)
{
    struct restore_call *c = lua_touserdata(L, 3);

    lua_pop(L, 1);
    c->rc = bindings_restore(L, GIDX, BIDX, c->b, &c->err);
    if (lua_gettop(L) != 2)
        c->rc = 99; /* the stack must be as it was */
    return 0;
}

/* Restore the bindings text into L in protected context. */
static int restore_text(lua_State *L, const char *text, const char **err)
{
    struct restore_call c = {NULL, -1, NULL};
    json_t *b = load(text);
    int top = lua_gettop(L);

    c.b = b;
    lua_pushcfunction(L, restore_cf);
    lua_pushvalue(L, GIDX);
    lua_pushvalue(L, BIDX);
    lua_pushlightuserdata(L, &c);
    if (lua_pcall(L, 3, 0, 0) != LUA_OK)
        fail_msg("restore raised: %s", lua_tostring(L, -1));
    json_decref(b);
    assert_int_equal(lua_gettop(L), top);
    assert_int_not_equal(c.rc, 99);
    *err = c.err;
    return c.rc;
}

/* Export from L, reload the text into a fresh state, export again: the two
 * texts must be equal.  Returns the fresh state for further checks. */
static lua_State *round_trip(lua_State *L, char **text)
{
    lua_State *L2 = state_new();
    const char *err;
    char *again;

    *text = export_ok(L);
    if (restore_text(L2, *text, &err) != 0)
        fail_msg("restore: %s", err);
    again = export_ok(L2);
    if (strcmp(*text, again) != 0)
        fail_msg("round trip differs:\n%s\n%s", *text, again);
    free(again);
    return L2;
}

static void expect_export(lua_State *L, const char *want)
{
    char *s = export_ok(L);

    if (strcmp(s, want) != 0)
        fail_msg("got  %s\nwant %s", s, want);
    free(s);
}

static void test_export_basic(void **state)
{
    lua_State *L = *state;
    const char *err;
    size_t size;
    char *s;

    expect_export(L, "[]");
    run(L, "i = 3 f = 3.0 s = 'hi' b = true no = false fn = print\n"
           "co = coroutine.create(print) u = io.stdout z = nil\n"
           "_G[1] = 2 _G[true] = 1 _G['\\xff'] = 1 _G[{}] = 1");
    s = export_text(L, 0, &size, &err);
    assert_non_null(s);
    assert_string_equal(
        s, "[[\"b\",true],[\"f\",[\"f\",\"0x1.8p+1\"]],[\"i\",3],[\"no\",false],[\"s\",\"hi\"]]");
    /* the approximate size does not undercount, nor wildly overcount */
    assert_true(size >= strlen(s));
    assert_true(size <= 2 * strlen(s) + 64);
    free(s);
}

static void test_name_order(void **state)
{
    lua_State *L = *state;
    const char *err;
    json_t *b, *names;
    char *s;

    run(L, "b = 1 ab = 2 a = 3 B = 4 _G['a\\0'] = 5 _G['\\xc3\\xa9'] = 6");
    s = export_ok(L);
    assert_string_equal(s, "[[\"B\",4],[\"a\",3],[\"a\\u0000\",5],[\"ab\",2],[\"b\",1],"
                           "[\"\xc3\xa9\",6]]");
    b = load(s);
    names = bindings_names(b, &err);
    assert_non_null(names);
    free(s);
    s = json_dumps(names, JSON_COMPACT);
    assert_string_equal(s, "[\"B\",\"a\",\"a\\u0000\",\"ab\",\"b\",\"\xc3\xa9\"]");
    free(s);
    json_decref(names);
    json_decref(b);
    b = load("[]");
    names = bindings_names(b, &err);
    assert_non_null(names);
    assert_int_equal(json_array_size(names), 0);
    json_decref(names);
    json_decref(b);
}

static void test_floats_exact(void **state)
{
    lua_State *L = *state, *L2;
    char *s;

    run(L, "nz = -0.0 pz = 0.0 nan = 0/0 pnan = -(0/0) pinf = 1/0 ninf = -1/0\n"
           "tiny = 2^-1074 big = 2^1023 * 1.5 pi = math.pi i = 3 f = 3.0\n"
           "fi = 2^53 maxi = math.maxinteger mini = math.mininteger");
    L2 = round_trip(L, &s);
    assert_non_null(strstr(s, "[\"nz\",[\"f\",\"-0x0p+0\"]]"));
    assert_non_null(strstr(s, "[\"pz\",[\"f\",\"0x0p+0\"]]"));
    assert_non_null(strstr(s, "[\"pinf\",[\"f\",\"inf\"]]"));
    assert_non_null(strstr(s, "[\"ninf\",[\"f\",\"-inf\"]]"));
    assert_non_null(strstr(s, "[\"maxi\",9223372036854775807]"));
    assert_non_null(strstr(s, "[\"mini\",-9223372036854775808]"));
    free(s);
    check(L2, "return 1 / nz == -1 / 0 and 1 / pz == 1 / 0 and math.type(nz) == 'float'");
    check(L2, "return nan ~= nan and pnan ~= pnan and math.type(nan) == 'float'");
    /* the sign of NaN survives (the equal re-export shows it too) */
    check(L2, "return string.pack('<d', pnan):byte(8) ~= string.pack('<d', nan):byte(8)");
    check(L2, "return pinf == 1/0 and ninf == -1/0");
    check(L2, "return tiny == 2^-1074 and tiny > 0 and big == 2^1023 * 1.5 and pi == math.pi");
    check(L2, "return math.type(i) == 'integer' and i == 3 and math.type(f) == 'float' and f == 3");
    check(L2, "return math.type(fi) == 'float' and fi == 2^53");
    check(L2, "return maxi == math.maxinteger and mini == math.mininteger");
    lua_close(L2);
}

static void test_strings_exact(void **state)
{
    lua_State *L = *state, *L2;
    char *s;

    run(L, "nul = 'a\\0b' b1 = '\\xff' b2 = '\\xff\\xfe' b3 = '\\xff\\xfe\\xfd'\n"
           "b4 = '\\xff\\0\\1\\2' over = '\\xc0\\x80' sur = '\\xed\\xa0\\x80'\n"
           "empty = '' emoji = '\\xf0\\x9f\\x98\\x80' ctl = '\\1\\n\"\\\\'");
    L2 = round_trip(L, &s);
    assert_non_null(strstr(s, "[\"b1\",[\"b\",\"/w==\"]]"));
    assert_non_null(strstr(s, "[\"b2\",[\"b\",\"//4=\"]]"));
    assert_non_null(strstr(s, "[\"b3\",[\"b\",\"//79\"]]"));
    assert_non_null(strstr(s, "[\"b4\",[\"b\",\"/wABAg==\"]]"));
    assert_non_null(strstr(s, "[\"over\",[\"b\",\"wIA=\"]]"));
    assert_non_null(strstr(s, "[\"nul\",\"a\\u0000b\"]"));
    free(s);
    check(L2, "return nul == 'a\\0b' and #nul == 3 and b1 == '\\xff' and b2 == '\\xff\\xfe'");
    check(L2, "return b3 == '\\xff\\xfe\\xfd' and b4 == '\\xff\\0\\1\\2'");
    check(L2, "return over == '\\xc0\\x80' and sur == '\\xed\\xa0\\x80' and empty == ''");
    check(L2, "return emoji == '\\xf0\\x9f\\x98\\x80' and ctl == '\\1\\n\"\\\\'");
    lua_close(L2);
}

static void test_tables_exact(void **state)
{
    lua_State *L = *state, *L2;
    char *s;

    run(L, "t = {1, 2.0, 'x', [true] = 'T', [false] = 'F', [1.5] = 'h', ['\\xff'] = 'bad',\n"
           "     nested = {a = {b = {c = math.maxinteger}}}, [-1] = math.mininteger,\n"
           "     [''] = 0, [2^63] = 'huge', [1/0] = 'inf', f = print, [print] = 1,\n"
           "     [{}] = 'tablekey', co = coroutine.create(print)}");
    L2 = round_trip(L, &s);
    assert_string_equal(
        s, "[[\"t\",[\"t\",[[false,\"F\"],[true,\"T\"],[-1,-9223372036854775808],[1,1],"
           "[2,[\"f\",\"0x1p+1\"]],[3,\"x\"],[[\"f\",\"0x1.8p+0\"],\"h\"],"
           "[[\"f\",\"0x1p+63\"],\"huge\"],[[\"f\",\"inf\"],\"inf\"],[\"\",0],"
           "[\"nested\",[\"t\",[[\"a\",[\"t\",[[\"b\",[\"t\",[[\"c\",9223372036854775807]]]]]]]]]],"
           "[[\"b\",\"/w==\"],\"bad\"]]]]]");
    free(s);
    check(L2, "return t[1] == 1 and math.type(t[2]) == 'float' and t[3] == 'x' and #t == 3");
    check(L2, "return t[true] == 'T' and t[false] == 'F' and t[1.5] == 'h'");
    check(L2, "return t['\\xff'] == 'bad' and t[-1] == math.mininteger and t[''] == 0");
    check(L2, "return t[2^63] == 'huge' and t[1/0] == 'inf'");
    check(L2, "return t.nested.a.b.c == math.maxinteger");
    check(L2, "local n = 0 for _ in pairs(t) do n = n + 1 end return n == 12");
    lua_close(L2);
}

static void test_cycles(void **state)
{
    lua_State *L = *state;

    run(L, "cyclic = {} cyclic.self = cyclic\n"
           "a = {} b = {a = a, n = 1} a.b = b\n"
           "k = {} k[k] = 1 k.x = 2\n"
           "l = {1} l[2] = l\n"
           "g = _G h = {_G, 1}");
    expect_export(L, "[[\"a\",[\"t\",[[\"b\",[\"t\",[[\"n\",1]]]]]]],"
                     "[\"b\",[\"t\",[[\"a\",[\"t\",[]]],[\"n\",1]]]],"
                     "[\"cyclic\",[\"t\",[]]],[\"h\",[\"t\",[[2,1]]]],"
                     "[\"k\",[\"t\",[[\"x\",2]]]],"
                     "[\"l\",[\"t\",[[1,1]]]]]");
}

/* A chain of n tables t[1][1]...: count how many survive export. */
static int chain_depth(const char *text)
{
    const char *p = text;
    int n = 0;

    while ((p = strstr(p, "[\"t\",")) != NULL) {
        n++;
        p++;
    }
    return n;
}

static void test_depth(void **state)
{
    lua_State *L = *state, *L2;
    char code[200], *s;

    snprintf(code, sizeof code,
             "deep = {} local cur = deep for i = 2, %d do cur[1] = {} cur = cur[1] end",
             CODEC_MAX_DEPTH);
    run(L, code);
    L2 = round_trip(L, &s);
    assert_int_equal(chain_depth(s), CODEC_MAX_DEPTH);
    free(s);
    lua_close(L2);

    /* one more: the too-deep entry is dropped, the rest is kept */
    snprintf(code, sizeof code,
             "deep = {} local cur = deep for i = 2, %d do cur[1] = {} cur = cur[1] end",
             CODEC_MAX_DEPTH + 1);
    run(L, code);
    s = export_ok(L);
    assert_int_equal(chain_depth(s), CODEC_MAX_DEPTH);
    assert_non_null(strstr(s, "[1,[\"t\",[]]]"));
    free(s);
}

static void test_metamethods_never_run(void **state)
{
    lua_State *L = *state, *L2;
    const char *err;
    char *s;

    run(L, "local boom = function() error('metamethod ran') end\n"
           "mt = {__index = boom, __newindex = boom, __pairs = boom, __len = boom,\n"
           "      __eq = boom, __lt = boom, __le = boom, __tostring = boom,\n"
           "      __call = boom, __gc = nil, __metatable = 'locked'}\n"
           "t = setmetatable({x = setmetatable({1}, mt)}, mt)\n"
           "loop = setmetatable({y = 1}, {__pairs = function() while true do end end})");
    L2 = round_trip(L, &s);
    assert_non_null(strstr(s, "[\"t\",[\"t\",[[\"x\",[\"t\",[[1,1]]]]]]]"));
    assert_non_null(strstr(s, "[\"loop\",[\"t\",[[\"y\",1]]]]"));
    /* the globals of the target state refuse writes and reads by metamethod */
    run(L2, "setmetatable(_G, {__newindex = function() error('newindex ran') end,\n"
            "                  __index = function() error('index ran') end})");
    assert_int_equal(restore_text(L2, s, &err), 0);
    free(s);
    check(L2, "return rawget(_G, 't').x[1] == 1");
    /* export of a globals table with those metamethods */
    s = export_ok(L2);
    assert_non_null(strstr(s, "[\"loop\",[\"t\",[[\"y\",1]]]]"));
    free(s);
    lua_close(L2);
}

static void test_baseline(void **state)
{
    lua_State *L = *state;
    const char *err;

    run(L, "string = 5 math.helper = 1 _G._G = 7 x = 1");
    expect_export(L, "[[\"x\",1]]");
    lua_close(L);
    *state = L = state_new();
    assert_int_equal(restore_text(L, "[[\"_G\",1],[\"math\",{\"pi\":3}],[\"string\",5],"
                                     "[\"table\",[\"t\",[]]],[\"x\",1]]",
                                     &err), -1); /* objects are malformed */
    assert_int_equal(restore_text(L, "[[\"_G\",1],[\"string\",5],[\"table\",[\"t\",[]]],"
                                     "[\"x\",1]]", &err), 0);
    check(L, "return type(string) == 'table' and string.rep('a', 2) == 'aa'");
    check(L, "return type(table.concat) == 'function' and _G == rawget(_G, '_G') and x == 1");
}

static void test_size_cap(void **state)
{
    lua_State *L = *state;
    const char *err;
    size_t size;
    char *s;

    run(L, "big = string.rep('x', 1000)");
    assert_null(export_text(L, 500, NULL, &err));
    assert_string_equal(err, "bindings too large");
    s = export_text(L, 0, &size, &err);
    assert_non_null(s);
    assert_true(size >= 1000);
    free(s);
    s = export_text(L, size, NULL, &err);
    assert_non_null(s);
    free(s);
    assert_null(export_text(L, size - 1, NULL, &err));
    /* nested: the cap is hit inside a table */
    run(L, "big = nil t = {{{string.rep('\\xff', 300)}}}");
    assert_null(export_text(L, 300, NULL, &err));
    assert_string_equal(err, "bindings too large");
}

/* The counted size is the text's length, for every kind of value (each
 * escape jansson writes, integers of every length and sign, floats, "b"
 * strings, dropped entries, empty and nested tables), so the cap holds at
 * the exact byte: max_bindings_bytes of the text's length passes, one less
 * is refused. */
static void test_size_exact(void **state)
{
    lua_State *L = *state;
    const char *err;
    size_t size;
    char *s;

    run(L, "a = 'q\"b\\\\c/\\b\\f\\n\\r\\t\\0\\1\\31\\127\\u{E9}' "
           "b = {math.mininteger, math.maxinteger, -1, 0, 9, 10, -10, 99, 100, 123456789} "
           "c = {1.5, -0.0, 1/0, -1/0, 0/0, 2^-1074} d = '\\xff\\xfe' e = {[true] = false, "
           "[false] = true, [2.5] = 'x', ['\\xff'] = {}, f = print, [print] = 1} "
           "g = {{{}}} h = true i = false");
    s = export_text(L, 0, &size, &err);
    assert_non_null(s);
    assert_int_equal(size, strlen(s));
    free(s);
    s = export_text(L, size, NULL, &err);
    assert_non_null(s);
    free(s);
    assert_null(export_text(L, size - 1, NULL, &err));
    assert_string_equal(err, "bindings too large");
    /* 300,000 small integers: about 4 MB, where 21 bytes an integer made 14 */
    run(L, "a, b, c, d, e, g, h, i = nil t = {} for i = 1, 300000 do t[i] = i % 100 end");
    s = export_text(L, 0, &size, &err);
    assert_non_null(s);
    assert_true(size < 4000000);
    free(s);
}

static void test_million(void **state)
{
    lua_State *L = *state, *L2;
    clock_t t0 = clock();
    char *s;

    run(L, "big = {} for i = 1, 1000000 do big[i] = i end");
    L2 = round_trip(L, &s);
    check(L2, "return #big == 1000000 and big[1000000] == 1000000 and "
              "math.type(big[7]) == 'integer'");
    free(s);
    lua_close(L2);
    /* generous even for the sanitizer build */
    assert_true((double)(clock() - t0) / CLOCKS_PER_SEC < 30.0);
}

/* Each of these must be refused by restore (without setting "ok", which a
 * lenient reader would set first) and by bindings_names. */
static const char *const malformed[] = {
    /* top level */
    "{}", "\"x\"", "1", "null", "[1]", "[[]]", "[[\"a\"]]", "[[\"a\",1,2]]", "[[1,1]]",
    "[[null,1]]", "[{\"a\":1}]", "[[\"ok\",1],[\"a\"]]",
    /* plain values */
    "[[\"ok\",1],[\"a\",null]]", "[[\"ok\",1],[\"a\",1.5]]", "[[\"ok\",1],[\"a\",{}]]",
    /* tagged values: shape and tag */
    "[[\"ok\",1],[\"a\",[]]]", "[[\"ok\",1],[\"a\",[\"b\"]]]",
    "[[\"ok\",1],[\"a\",[\"b\",\"AA==\",1]]]", "[[\"ok\",1],[\"a\",[\"x\",\"y\"]]]",
    "[[\"ok\",1],[\"a\",[\"bb\",\"AA==\"]]]", "[[\"ok\",1],[\"a\",[\"\",\"AA==\"]]]",
    "[[\"ok\",1],[\"a\",[1,\"AA==\"]]]", "[[\"ok\",1],[\"a\",[\"B\",\"AA==\"]]]",
    "[[\"ok\",1],[\"a\",[\"b\",1]]]", "[[\"ok\",1],[\"a\",[\"f\",1.5]]]",
    "[[\"ok\",1],[\"a\",[\"t\",{}]]]", "[[\"ok\",1],[\"a\",[\"t\",\"x\"]]]",
    /* base64 */
    "[[\"ok\",1],[\"a\",[\"b\",\"QQ\"]]]", "[[\"ok\",1],[\"a\",[\"b\",\"QR==\"]]]",
    "[[\"ok\",1],[\"a\",[\"b\",\"QUJ=\"]]]",
    "[[\"ok\",1],[\"a\",[\"b\",\"Q===\"]]]", "[[\"ok\",1],[\"a\",[\"b\",\"====\"]]]",
    "[[\"ok\",1],[\"a\",[\"b\",\"QQ==QQ==\"]]]", "[[\"ok\",1],[\"a\",[\"b\",\"Q Q=\"]]]",
    "[[\"ok\",1],[\"a\",[\"b\",\"QQ=\\n\"]]]", "[[\"ok\",1],[\"a\",[\"b\",\"QQ-_\"]]]",
    "[[\"ok\",1],[\"a\",[\"b\",\"QQ\\u0000=\"]]]", "[[\"ok\",1],[\"a\",[\"b\",\"A\"]]]",
    /* hex floats */
    "[[\"ok\",1],[\"a\",[\"f\",\"1.5\"]]]", "[[\"ok\",1],[\"a\",[\"f\",\"0X1P+0\"]]]",
    "[[\"ok\",1],[\"a\",[\"f\",\"0x1p0\"]]]", "[[\"ok\",1],[\"a\",[\"f\",\"0x1p+\"]]]",
    "[[\"ok\",1],[\"a\",[\"f\",\"0x1.p+0\"]]]", "[[\"ok\",1],[\"a\",[\"f\",\"0x.8p+0\"]]]",
    "[[\"ok\",1],[\"a\",[\"f\",\" 0x1p+0\"]]]", "[[\"ok\",1],[\"a\",[\"f\",\"0x1p+0 \"]]]",
    "[[\"ok\",1],[\"a\",[\"f\",\"+0x1p+0\"]]]", "[[\"ok\",1],[\"a\",[\"f\",\"--0x1p+0\"]]]",
    "[[\"ok\",1],[\"a\",[\"f\",\"infinity\"]]]", "[[\"ok\",1],[\"a\",[\"f\",\"Inf\"]]]",
    "[[\"ok\",1],[\"a\",[\"f\",\"nan(1)\"]]]", "[[\"ok\",1],[\"a\",[\"f\",\"\"]]]",
    "[[\"ok\",1],[\"a\",[\"f\",\"0x1p+99999\"]]]", "[[\"ok\",1],[\"a\",[\"f\",\"0x1p+0\\u0000\"]]]",
    "[[\"ok\",1],[\"a\",[\"f\",\"0xgp+0\"]]]",
    /* tables */
    "[[\"ok\",1],[\"a\",[\"t\",[1]]]]", "[[\"ok\",1],[\"a\",[\"t\",[[1]]]]]",
    "[[\"ok\",1],[\"a\",[\"t\",[[1,2,3]]]]]", "[[\"ok\",1],[\"a\",[\"t\",[[null,1]]]]]",
    "[[\"ok\",1],[\"a\",[\"t\",[[1,null]]]]]", "[[\"ok\",1],[\"a\",[\"t\",[[1.5,1]]]]]",
    "[[\"ok\",1],[\"a\",[\"t\",[[[\"t\",[]],1]]]]]",
    "[[\"ok\",1],[\"a\",[\"t\",[[[\"f\",\"nan\"],1]]]]]",
    "[[\"ok\",1],[\"a\",[\"t\",[[[\"f\",\"-nan\"],1]]]]]",
    "[[\"ok\",1],[\"a\",[\"t\",[[1,[\"t\",[[2,[\"q\",1]]]]]]]]]",
};

/* bindings_names_text() refuses text as bindings_names() does, with the
 * same message (want; NULL: any "malformed bindings: ..."). */
static void expect_text_refused(const char *text, const char *want)
{
    const char *err = NULL;
    char *out = NULL;
    size_t len;

    if (bindings_names_text(text, strlen(text), &out, &len, &err) == 0)
        fail_msg("bindings_names_text accepted %s as %.*s", text, (int)len, out);
    if (err == NULL || strncmp(err, "malformed bindings: ", 20) != 0 ||
        (want && strcmp(err, want) != 0))
        fail_msg("%s: bindings_names_text says \"%s\", bindings_names \"%s\"", text,
                 err ? err : "(null)", want ? want : "(any)");
}

/* bindings_names_text() accepts text and gives the names bindings_names()
 * gives, as JSON that reads the same. */
static void expect_text_names(const char *text)
{
    json_t *b = load(text), *want, *got;
    const char *err = NULL;
    json_error_t je;
    char *out = NULL;
    size_t len;

    want = bindings_names(b, &err);
    if (want == NULL)
        fail_msg("bindings_names refused %s: %s", text, err);
    if (bindings_names_text(text, strlen(text), &out, &len, &err) != 0)
        fail_msg("bindings_names_text refused %s: %s", text, err);
    got = json_loadb(out, len, JSON_ALLOW_NUL, &je);
    if (!got || !json_equal(got, want))
        fail_msg("%s: names %.*s", text, (int)len, out);
    free(out);
    json_decref(got);
    json_decref(want);
    json_decref(b);
}

static void expect_malformed(const char *text)
{
    lua_State *L = state_new();
    const char *err = NULL;
    json_t *b;

    if (restore_text(L, text, &err) != -1)
        fail_msg("restore accepted %s", text);
    if (err == NULL || strncmp(err, "malformed bindings: ", 20) != 0)
        fail_msg("%s: err %s", text, err ? err : "(null)");
    check(L, "return rawget(_G, 'ok') == nil");
    lua_close(L);
    b = load(text);
    err = NULL;
    if (bindings_names(b, &err) != NULL)
        fail_msg("bindings_names accepted %s", text);
    assert_non_null(err);
    json_decref(b);
    expect_text_refused(text, err);
}

/* Nested tables from stored JSON: depth d as ["t",[[1, ...]]]. */
static char *deep_bindings(int d)
{
    size_t cap = (size_t)d * 16 + 32, o = 0;
    char *s = malloc(cap);
    int i;

    assert_non_null(s);
    o += (size_t)sprintf(s + o, "[[\"a\",");
    for (i = 0; i < d; i++)
        o += (size_t)sprintf(s + o, "[\"t\",[[1,");
    o += (size_t)sprintf(s + o, "0");
    for (i = 0; i < d; i++)
        o += (size_t)sprintf(s + o, "]]]");
    sprintf(s + o, "]]");
    return s;
}

static void test_malformed(void **state)
{
    size_t i;
    char *s;

    (void)state;
    for (i = 0; i < sizeof malformed / sizeof malformed[0]; i++)
        expect_malformed(malformed[i]);
    s = deep_bindings(CODEC_MAX_DEPTH + 1);
    expect_malformed(s);
    free(s);
}

/* The error names the fault. */
static void test_malformed_messages(void **state)
{
    static const struct {
        const char *text, *err;
    } cases[] = {
        {"{}", "not an array of [name, value] pairs"},
        {"[[\"a\",1,2]]", "not an array of [name, value] pairs"},
        {"[[\"a\",null]]", "null, a bare real or an object"},
        {"[[\"a\",[\"b\"]]]", "not [tag, string or array]"},
        {"[[\"a\",[\"q\",\"x\"]]]", "unknown tag"},
        {"[[\"a\",[\"b\",\"QR==\"]]]", "invalid base64"},
        {"[[\"a\",[\"f\",\"1.5\"]]]", "invalid hex float"},
        {"[[\"a\",[\"t\",[[1]]]]]", "table entry is not a [key, value] pair"},
        {"[[\"a\",[\"t\",[[[\"f\",\"nan\"],1]]]]]", "table key is a table or NaN"},
    };
    lua_State *L = *state;
    const char *err;
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(restore_text(L, cases[i].text, &err), -1);
        if (strstr(err, cases[i].err) == NULL)
            fail_msg("%s: got \"%s\", want \"%s\"", cases[i].text, err, cases[i].err);
        expect_text_refused(cases[i].text, err);
    }
    {
        char *s = deep_bindings(CODEC_MAX_DEPTH + 1);
        assert_int_equal(restore_text(L, s, &err), -1);
        assert_string_equal(err, "malformed bindings: tables nested deeper than 100");
        expect_text_refused(s, err);
        free(s);
    }
}

static void test_valid_edges(void **state)
{
    lua_State *L = *state;
    const char *err;
    char *s;

    assert_int_equal(restore_text(L, "[]", &err), 0);
    assert_int_equal(restore_text(L, "[[\"e\",[\"b\",\"\"]],[\"n\",[\"f\",\"-nan\"]],"
                                     "[\"t\",[\"t\",[]]],[\"d\",1],[\"d\",2]]", &err), 0);
    check(L, "return e == '' and n ~= n and type(t) == 'table' and next(t) == nil and d == 2");
    /* a denormal and a long fraction parse */
    assert_int_equal(restore_text(L, "[[\"x\",[\"f\",\"0x0.0000000000001p-1022\"]],"
                                     "[\"y\",[\"f\",\"-0x1.fffffffffffffp+1023\"]]]", &err), 0);
    check(L, "return x == 2^-1074 and y == -((2 - 2^-52) * 2^1023)");
    s = deep_bindings(CODEC_MAX_DEPTH);
    assert_int_equal(restore_text(L, s, &err), 0);
    expect_text_names(s);
    free(s);
    check(L, "local d, t = 0, a while type(t) == 'table' do d = d + 1 t = t[1] end "
             "return d == 100 and t == 0");
}

/* bindings_names_text() reads what bindings_names() reads: escapes (a tag
 * written "\u0074"), blanks, NUL in names, every scalar and tag, keys of
 * every kind, and the names come back as written. */
static void test_names_text(void **state)
{
    static const char *const ok[] = {
        "[]", " [ ] ", "[[\"a\",1]]", "[[\"a\",-12],[\"b\",true],[\"c\",false],[\"d\",\"x\"]]",
        "[ [ \"a\" , [ \"t\" , [ [ 1 , 2 ] , [ \"k\" , [\"b\",\"QQ==\"] ] ] ] ] ]",
        "[[\"\\u0061\\u0000b\",[\"\\u0074\",[[true,1],[[\"f\",\"0x1p+0\"],2],[[\"b\",\"\"],3]]]]]",
        "[[\"e\",[\"b\",\"\"]],[\"n\",[\"f\",\"-nan\"]],[\"t\",[\"t\",[]]],[\"d\",1],[\"d\",2]]",
        "[[\"\\u00e9t\\u00e9\",[\"f\",\"inf\"]],[\"x\",[\"t\",[[1,[\"t\",[[2,\"y\"]]]]]]]]",
        "[[\"big\",9223372036854775807],[\"small\",-9223372036854775808]]",
    };
    static const char *const bad[] = {
        "[[\"a\",1e3]]", "[[\"a\",1E3]]", "[[\"a\",-0.0]]", "[[\"a\",[\"\\u0074x\",[]]]]",
        "[[\"a\",[\"t\",[]],3]]", "[[\"a\",[\"\\u0062\",\"QQ\"]]]",
        "[[\"a\",[[\"t\",[]],1]]]", "[[\"a\",[\"t\",[[true,1,2]]]]]",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof ok / sizeof ok[0]; i++)
        expect_text_names(ok[i]);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_malformed(bad[i]);
    {
        /* jansson takes one NUL right after a bare token ("46\0]" is [46]);
         * the text reader reads what jansson reads */
        static const char nul[] = "[[\"a\",[\"t\",[[1,46\0],[true\0,2]]]],[\"b\",-7\0]]";
        const char *err = NULL;
        json_error_t je;
        json_t *b = json_loadb(nul, sizeof nul - 1, JSON_ALLOW_NUL, &je), *got;
        char *out = NULL;
        size_t len;

        assert_non_null(b);
        assert_non_null(got = bindings_names(b, &err));
        json_decref(got);
        assert_int_equal(bindings_names_text(nul, sizeof nul - 1, &out, &len, &err), 0);
        got = json_loadb(out, len, 0, &je);
        assert_true(json_is_array(got) && json_array_size(got) == 2);
        json_decref(got);
        free(out);
        json_decref(b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_export_basic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_name_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_floats_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_strings_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tables_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cycles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_depth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metamethods_never_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_baseline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_size_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_size_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_million, setup, teardown),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test_setup_teardown(test_malformed_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_valid_edges, setup, teardown),
        cmocka_unit_test(test_names_text),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
