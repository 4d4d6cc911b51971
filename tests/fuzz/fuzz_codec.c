/*
 * fuzz_codec.c - worker/codec.c: JSON from the outside (a tool result sent by
 * the client, read by the worker) pushed into Lua, and Lua values encoded
 * back to JSON (results, tool arguments).
 *
 * The whole input is parsed by jansson with JSON_DECODE_ANY | JSON_ALLOW_NUL
 * (the worker loads the TOOL_RESULT object with JSON_ALLOW_NUL and pushes
 * its "value" member, which may be any JSON value; DECODE_ANY lets the
 * fuzzer reach every kind of value directly).  Lua state as in
 * tests/unit/test_codec.c: luaL_newstate() + luaL_openlibs(), created once.
 * Checks:
 *  - codec_push_json() (run under lua_pcall, as the contract requires)
 *    fails exactly when containers nest deeper than CODEC_MAX_DEPTH, with
 *    the depth message, and leaves the stack as it was;
 *  - codec_to_json() of what was pushed, unbounded, succeeds (no cycle,
 *    depth within the limit), leaves the stack as it was, and its output
 *    reads back with jansson;
 *  - converting that output again (JSON -> Lua -> JSON) gives an equal value
 *    (the mapping is idempotent after one pass);
 *  - with a byte bound, codec_to_json() either fails with
 *    CODEC_ERR_TOO_LARGE or produces output whose compact serialisation is
 *    within the bound (the contract's size estimate counts escapes and
 *    replacements, so it should not undercount).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "proto/utf8.h"
#include "worker/codec.h"
#include "tests/fuzz/fuzz_util.h"

#define DUMP_FLAGS (JSON_COMPACT | JSON_ENCODE_ANY)
#define LOAD_FLAGS (JSON_DECODE_ANY | JSON_ALLOW_NUL)

static lua_State *L;

struct push_call {
    const json_t *v;
    int rc;
    const char *err;
};

/* Runs under lua_pcall: argument 1 is the push_call. */
static int push_cf(lua_State *Ls)
{
    struct push_call *c = lua_touserdata(Ls, 1);

    lua_pop(Ls, 1);
    c->err = NULL;
    c->rc = codec_push_json(Ls, c->v, &c->err);
    CHECK(lua_gettop(Ls) == (c->rc == 0 ? 1 : 0), "codec_push_json stack: rc %d top %d",
          c->rc, lua_gettop(Ls));
    CHECK(c->rc == 0 || c->err != NULL, "failure without err");
    return c->rc == 0 ? 1 : 0;
}

/* Push v in protected context; returns codec_push_json's rc. */
static int push(const json_t *v, const char **err)
{
    struct push_call c = {v, -1, NULL};
    int top = lua_gettop(L), status;

    lua_pushcfunction(L, push_cf);
    lua_pushlightuserdata(L, &c);
    status = lua_pcall(L, 1, 1, 0);
    CHECK(status == LUA_OK, "push raised: %s", lua_tostring(L, -1));
    if (c.rc != 0) {
        lua_settop(L, top);
        *err = c.err;
        return -1;
    }
    return 0;
}

/* Nesting of containers: a scalar is 0, [] is 1. */
static int depth_of(const json_t *v)
{
    int d = 0, x;
    size_t i;
    const char *k;
    json_t *e;

    if (json_is_array(v)) {
        json_array_foreach(v, i, e) {
            x = depth_of(e);
            d = x > d ? x : d;
        }
        return d + 1;
    }
    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, e) {
            x = depth_of(e);
            d = x > d ? x : d;
        }
        return d + 1;
    }
    return 0;
}

static char *dump(const json_t *v, size_t *len)
{
    char *s = json_dumps(v, DUMP_FLAGS);

    CHECK(s != NULL, "json_dumps failed");
    *len = strlen(s);
    return s;
}

/* Encode the Lua value on top with bound max; check the contract. */
static void encode_bounded(size_t max)
{
    int top = lua_gettop(L);
    json_t *out = NULL;
    const char *err = NULL;
    size_t len;
    char *s;

    if (codec_to_json(L, -1, max, &out, &err) != 0) {
        CHECK(lua_gettop(L) == top, "stack changed on failure");
        CHECK(err != NULL && strcmp(err, CODEC_ERR_TOO_LARGE) == 0,
              "bounded encode failed with \"%s\"", err ? err : "(null)");
        return;
    }
    CHECK(lua_gettop(L) == top, "stack changed");
    s = dump(out, &len);
    CHECK(len <= max, "encoded %zu bytes within a bound of %zu: %.300s", len, max, s);
    free(s);
    json_decref(out);
}

/* utf8_complete (streamed output is cut there): the cut removes at
 * most 3 bytes; well-formed text stays well-formed and loses only the start
 * of one character; the cut never lands inside a character. */
static void check_utf8_complete(const char *s, size_t len)
{
    size_t k = utf8_complete(s, len);

    CHECK(k <= len && len - k <= 3, "cut %zu of %zu", k, len);
    if (k < len)
        CHECK(((unsigned char)s[k] & 0xC0) == 0xC0, "cut before byte 0x%02x",
              (unsigned char)s[k]);
    for (size_t i = k + 1; i < len; i++)
        CHECK(((unsigned char)s[i] & 0xC0) == 0x80, "the cut tail holds a lead byte");
    if (utf8_valid(s, len)) {
        CHECK(utf8_valid(s, k), "a well-formed text cut into a malformed one");
        CHECK(k == len, "a well-formed text was cut");
    }
    if (k < len && utf8_valid(s, k))
        CHECK(!utf8_valid(s, len), "cut a complete character");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *in, *y, *y2;
    json_error_t je;
    const char *err = NULL;
    char *ys, *back_s;
    size_t ylen, blen;
    int top;

    check_utf8_complete((const char *)data, size);
    if (L == NULL) {
        L = luaL_newstate();
        if (L == NULL)
            abort();
        luaL_openlibs(L);
    }
    lua_settop(L, 0);
    in = json_loadb((const char *)data, size, LOAD_FLAGS, &je);
    if (in == NULL)
        return 0;

    if (push(in, &err) != 0) {
        CHECK(depth_of(in) > CODEC_MAX_DEPTH, "push failed (%s) at depth %d", err,
              depth_of(in));
        CHECK(strcmp(err, "nesting deeper than 100") == 0, "push error \"%s\"", err);
        CHECK(lua_gettop(L) == 0, "stack after failed push");
        json_decref(in);
        return 0;
    }
    CHECK(depth_of(in) <= CODEC_MAX_DEPTH, "push accepted depth %d", depth_of(in));
    top = lua_gettop(L);
    CHECK(top == 1, "push left %d values", top);

    y = NULL;
    CHECK(codec_to_json(L, -1, 0, &y, &err) == 0, "unbounded encode failed: %s", err);
    CHECK(lua_gettop(L) == top && y != NULL, "encode stack/out");
    ys = dump(y, &ylen);
    {
        json_t *back = json_loadb(ys, ylen, LOAD_FLAGS, &je);

        CHECK(back != NULL, "encoded JSON unreadable: %s: %.300s", je.text, ys);
        CHECK(json_equal(back, y), "encoded JSON changed when read back");
        json_decref(back);
    }

    /* bounded encodes of the same value */
    encode_bounded(ylen);
    encode_bounded(ylen * 2 + 8);
    if (ylen > 1)
        encode_bounded(ylen - 1);
    encode_bounded(ylen / 2 + 1);
    encode_bounded(1 + data[0] % 64);

    /* a second pass is a fixed point */
    lua_settop(L, 0);
    CHECK(push(y, &err) == 0, "push of encoded value failed: %s", err);
    y2 = NULL;
    CHECK(codec_to_json(L, -1, 0, &y2, &err) == 0, "second encode failed: %s", err);
    if (!json_equal(y, y2)) {
        back_s = dump(y2, &blen);
        CHECK(0, "JSON->Lua->JSON not stable:\n first  %.300s\n second %.300s", ys, back_s);
    }
    lua_settop(L, 0);
    json_decref(y2);
    json_decref(y);
    free(ys);
    json_decref(in);
    return 0;
}
