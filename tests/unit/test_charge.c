/*
 * test_charge.c - the library charges of worker/charge.c in a plain
 * state of the stock liblua5.3 (no worker, no sandbox): what is paid, that
 * it is paid before the work where the arguments tell, and that a pay that
 * raises stops the work (the exponential pattern ends at once).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "worker/charge.h"
#include "worker/luaenv.h"

struct fixture {
    lua_State    *L;
    struct charge c;
    uint64_t      paid, calls, limit;
};

static void pay(lua_State *L, void *ud, uint64_t n)
{
    struct fixture *x = ud;

    x->paid += n;
    x->calls++;
    if (x->limit != 0 && x->paid > x->limit)
        luaL_error(L, "spent");
}

static int setup(void **state)
{
    struct fixture *x = calloc(1, sizeof *x);

    assert_non_null(x);
    x->L = luaL_newstate();
    assert_non_null(x->L);
    luaL_openlibs(x->L);
    x->c.pay = pay;
    x->c.ud = x;
    charge_open(x->L, &x->c);
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *x = *state;

    lua_close(x->L);
    free(x);
    return 0;
}

/* Run code; returns the error message or NULL, leaves the first result. */
static const char *run(struct fixture *x, const char *code)
{
    lua_settop(x->L, 0);
    x->paid = x->calls = 0;
    if (luaL_dostring(x->L, code) != LUA_OK)
        return lua_tostring(x->L, -1);
    return NULL;
}

/* The header the sandbox's allocator measures is the one this module
 * measures in a state of its own. */
static void test_string_header(void **state)
{
    struct luaenv *e = luaenv_new();

    (void)state;
    assert_non_null(e);
    assert_int_equal(charge_string_header(), e->string_header);
    assert_true(charge_string_header() >= 16);
    luaenv_free(e);
}

/* Values are paid one each, table values four each, before the work, less
 * a call's free part. */
static void test_values(void **state)
{
    struct fixture *x = *state;

    assert_null(run(x, "return select('#', table.unpack({}, 1, 500))"));
    assert_int_equal(lua_tointeger(x->L, -1), 500);
    assert_int_equal(x->paid, 500 - CHARGE_FREE);
    assert_null(run(x, "return select('#', ('abcdef'):byte(2, -2))"));
    assert_int_equal(x->paid, 0);                   /* 4: free */
    assert_int_equal(x->calls, 0);
    assert_null(run(x, "local t = {1, 2, 3, 4, 5} table.insert(t, 2, 0) return #t"));
    assert_int_equal(x->paid, charge_call(4 * CHARGE_TABLE_VALUE));
    assert_null(run(x, "return #table.move({}, 1, 100, 2)"));
    assert_int_equal(x->paid, charge_call(100 * CHARGE_TABLE_VALUE));
    /* refused by the stock function at once: nothing to pay */
    assert_non_null(run(x, "return table.unpack({}, 1, 1e8)"));
    assert_int_equal(x->paid, 0);
    assert_non_null(run(x, "return table.insert({}, 5, 0)"));
    assert_int_equal(x->paid, 0);
}

/* Paid before the work: a pay that raises stops a call that would move ten
 * million values before it moves one. */
static void test_paid_before(void **state)
{
    struct fixture *x = *state;
    const char *err;

    x->limit = 1000;
    err = run(x, "local t = setmetatable({}, {__len = function() return 10000000 end}) "
                 "table.insert(t, 1, 0)");
    assert_non_null(err);
    assert_non_null(strstr(err, "spent"));
    assert_int_equal(x->calls, 1);
    assert_true(x->paid >= 10000000);
    x->limit = 0;
}

/* Pattern matching is paid as it goes: an exponential pattern (2^22 steps,
 * a fraction of a second when nothing stops it) is stopped within one
 * chunk of steps of the limit. */
static void test_pattern_stops(void **state)
{
    struct fixture *x = *state;
    const char *err;

    x->limit = 10000;
    err = run(x, "local s = string.rep('a', 22) "
                 "return string.find(s, string.rep('a?', 22) .. string.rep('a', 22) .. 'b')");
    assert_non_null(err);
    assert_non_null(strstr(err, "spent"));
    assert_true(x->paid <= 10000 + 4096);
    x->limit = 0;
    assert_null(run(x, "return ('key=value'):match('^(%w+)=(%w+)$')"));
    assert_string_equal(lua_tostring(x->L, -2), "key");
    assert_true(x->paid > 0 && x->paid < 100);
}

/* Bytes handled one at a time: one reduction per CHARGE_EACH_BYTES. */
static void test_each_byte(void **state)
{
    struct fixture *x = *state;

    assert_null(run(x, "return (string.rep('a', 4000)):upper():sub(1, 1)"));
    assert_int_equal(x->paid, charge_call(4000 / CHARGE_EACH_BYTES));
    assert_null(run(x, "return os.date('!%Y-%m-%d', 0)"));
    assert_int_equal(x->paid, charge_call(9 / CHARGE_EACH_BYTES + 3 * CHARGE_DATE_CONVERSION));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_string_header),
        cmocka_unit_test_setup_teardown(test_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_paid_before, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pattern_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_each_byte, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
