/*
 * fuzz_bindings.c - proto/bindings.c: the bindings value a client sends back
 * is validated by the supervisor (bindings_names) and restored into a fresh
 * worker state (bindings_restore); the worker later exports its globals
 * (bindings_export).
 *
 * The input is the bindings JSON, parsed as rpc_parse() parses request
 * params (JSON_DECODE_ANY | JSON_ALLOW_NUL).  It then travels to the worker
 * as the supervisor sends it: dumped compactly, loaded with JSON_ALLOW_NUL.
 * Lua states as in tests/unit/test_bindings.c: luaL_newstate() +
 * luaL_openlibs(), globals at stack index 1, the baseline (every global name
 * present after openlibs, plus "_ENV" as worker/worker.c adds) at index 2.
 * Checks:
 *  - bindings_names() accepts exactly what bindings_restore() accepts (both
 *    validate whole first), and bindings_names_text() on the input text
 *    accepts exactly the same and gives the same names;
 *  - a rejected value leaves the globals untouched and says "malformed
 *    bindings: ...";
 *  - restore and export leave the stack as it was;
 *  - export(restore(x)) holds exactly the names of x outside the baseline
 *    (every restorable value is plain data, so none is dropped), is
 *    accepted by bindings_names(), and its size is exactly the length of
 *    its compact serialisation; an export bounded by that size succeeds
 *    and one byte less fails with "bindings too large";
 *  - round trip: export(restore(e)) is byte-identical to e for
 *    e = export(restore(x)) (bindings.h: equal data gives byte-equal JSON).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "proto/bindings.h"
#include "worker/bindings_lua.h"
#include "worker/codec.h"
#include "tests/fuzz/fuzz_util.h"

#define GIDX 1
#define BIDX 2

static lua_State *state_new(void)
{
    lua_State *L = luaL_newstate();

    if (L == NULL)
        abort();
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
    lua_pushboolean(L, 1);
    lua_setfield(L, BIDX, "_ENV");
    return L;
}

static size_t count_globals(lua_State *L)
{
    size_t n = 0;

    lua_pushnil(L);
    while (lua_next(L, GIDX) != 0) {
        lua_pop(L, 1);
        n++;
    }
    return n;
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
    c->err = NULL;
    c->rc = bindings_restore(L, GIDX, BIDX, c->b, &c->err);
    CHECK(lua_gettop(L) == 2, "bindings_restore changed the stack: top %d", lua_gettop(L));
    return 0;
}

/* Restore b into L in protected context. */
static int restore(lua_State *L, const json_t *b, const char **err)
{
    struct restore_call c = {b, -1, NULL};
    int status;

    lua_pushcfunction(L, restore_cf);
    lua_pushvalue(L, GIDX);
    lua_pushvalue(L, BIDX);
    lua_pushlightuserdata(L, &c);
    /* restore_cf sees its own stack: globals, baseline, call */
    status = lua_pcall(L, 3, 0, 0);
    CHECK(status == LUA_OK, "bindings_restore raised: %s", lua_tostring(L, -1));
    CHECK(lua_gettop(L) == 2, "stack after restore");
    *err = c.err;
    return c.rc;
}

/* Export L's globals unbounded; returns the array, its text and size. */
static json_t *export_all(lua_State *L, char **text, size_t *size)
{
    json_t *out = NULL;
    const char *err = NULL;

    CHECK(bindings_export(L, GIDX, BIDX, 0, &out, size, &err) == 0, "export failed: %s", err);
    CHECK(lua_gettop(L) == 2 && json_is_array(out), "export stack/out");
    *text = json_dumps(out, JSON_COMPACT);
    CHECK(*text != NULL, "json_dumps of an export failed");
    CHECK(*size == strlen(*text), "export size %zu != serialised %zu", *size, strlen(*text));
    return out;
}

static int name_cmp(const void *a, const void *b)
{
    const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
    size_t lx = json_string_length(x), ly = json_string_length(y);
    int c = memcmp(json_string_value(x), json_string_value(y), lx < ly ? lx : ly);

    return c != 0 ? c : (lx > ly) - (lx < ly);
}

/* The names of x (valid) not in L's baseline, sorted and unique, must be
 * exactly the names of the export e, in that order. */
static void check_names(lua_State *L, const json_t *x, const json_t *e)
{
    size_t n = json_array_size(x), m = 0, u = 0, i;
    const json_t **want = malloc((n + 1) * sizeof *want);

    if (want == NULL)
        abort();
    for (i = 0; i < n; i++) {
        const json_t *name = json_array_get(json_array_get(x, i), 0);

        lua_pushlstring(L, json_string_value(name), json_string_length(name));
        if (lua_rawget(L, BIDX) == LUA_TNIL)
            want[m++] = name;
        lua_pop(L, 1);
    }
    qsort(want, m, sizeof *want, name_cmp);
    for (i = 0; i < m; i++)
        if (u == 0 || name_cmp(&want[u - 1], &want[i]) != 0)
            want[u++] = want[i];
    CHECK(json_array_size(e) == u, "export has %zu names, expected %zu",
          json_array_size(e), u);
    for (i = 0; i < u; i++) {
        const json_t *got = json_array_get(json_array_get(e, i), 0);

        CHECK(json_is_string(got) && name_cmp(&got, &want[i]) == 0,
              "export name %zu differs", i);
    }
    free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *x, *wire, *names, *e1, *e2, *tmp;
    json_error_t je;
    const char *err = NULL, *nerr = NULL;
    char *text, *t1, *t2;
    size_t before, s1, s2;
    lua_State *L1, *L2;
    int rc;

    x = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (x == NULL)
        return 0;
    /* supervisor side */
    names = bindings_names(x, &nerr);
    CHECK(names != NULL || nerr != NULL, "bindings_names failed without err");
    {
        /* the supervisor's reading of large bindings, as text: the same
         * verdict, the same names */
        const char *terr = NULL;
        char *out = NULL;
        size_t olen = 0;
        int trc = bindings_names_text((const char *)data, size, &out, &olen, &terr);

        CHECK((trc == 0) == (names != NULL), "bindings_names %s but bindings_names_text %s",
              names ? "accepted" : "rejected", trc == 0 ? "accepted" : "rejected");
        if (trc == 0) {
            json_t *got = json_loadb(out, olen, JSON_ALLOW_NUL, &je);
            CHECK(got != NULL && json_equal(got, names), "bindings_names_text gave other names");
            json_decref(got);
            free(out);
        } else {
            CHECK(terr != NULL, "bindings_names_text failed without err");
        }
    }
    /* to the worker, as part of the job spec */
    text = json_dumps(x, JSON_COMPACT | JSON_ENCODE_ANY);
    CHECK(text != NULL, "json_dumps failed");
    wire = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    CHECK(wire != NULL && json_equal(wire, x), "bindings changed on the wire: %s", je.text);
    free(text);

    L1 = state_new();
    before = count_globals(L1);
    rc = restore(L1, wire, &err);
    CHECK((rc == 0) == (names != NULL), "bindings_names %s but restore %s (%s)",
          names ? "accepted" : "rejected", rc == 0 ? "accepted" : "rejected",
          rc == 0 ? nerr : err);
    if (rc != 0) {
        CHECK(rc == -1 && err != NULL && strncmp(err, "malformed bindings: ", 20) == 0,
              "restore error \"%s\"", err ? err : "(null)");
        CHECK(count_globals(L1) == before, "a rejected restore set globals");
        goto out;
    }
    CHECK(json_array_size(names) == json_array_size(wire), "bindings_names count");

    e1 = export_all(L1, &t1, &s1);
    check_names(L1, wire, e1);
    tmp = bindings_names(e1, &nerr);
    CHECK(tmp != NULL, "bindings_names rejects an export: %s: %.300s", nerr, t1);
    json_decref(tmp);
    /* the size bound is exact at the estimate */
    {
        json_t *o = NULL;
        size_t sz;

        CHECK(bindings_export(L1, GIDX, BIDX, s1, &o, &sz, &err) == 0,
              "export within its own estimate %zu failed: %s", s1, err);
        json_decref(o);
        o = NULL;
        if (s1 > 1) {
            rc = bindings_export(L1, GIDX, BIDX, s1 - 1, &o, &sz, &err);
            CHECK(rc == -1 && strcmp(err, "bindings too large") == 0,
                  "export bounded below its estimate: rc %d", rc);
            CHECK(lua_gettop(L1) == 2, "stack after a failed export");
        }
    }

    L2 = state_new();
    CHECK(restore(L2, e1, &err) == 0, "restore of an export failed: %s: %.300s", err, t1);
    e2 = export_all(L2, &t2, &s2);
    CHECK(strcmp(t1, t2) == 0, "round trip not stable:\n first  %.400s\n second %.400s", t1, t2);
    CHECK(s1 == s2, "size estimate differs: %zu vs %zu", s1, s2);
    free(t2);
    json_decref(e2);
    lua_close(L2);
    free(t1);
    json_decref(e1);
out:
    lua_close(L1);
    json_decref(names);
    json_decref(wire);
    json_decref(x);
    return 0;
}
