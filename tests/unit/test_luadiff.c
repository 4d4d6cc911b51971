/*
 * test_luadiff.c - the worker's Lua library against stock Lua 5.3
 * (tests/diff/luadiff.h): generated programs at fixed seeds, every statement
 * compared with counting on and off; and the statements that once differed
 * from stock, each compared on its own.  LUADIFF_PROGRAMS overrides the count.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tests/diff/luadiff.h"

#define PROGRAMS   200
#define STATEMENTS 60

static void test_generated(void **state)
{
    struct luadiff_stats st = {0};
    const char *env = getenv("LUADIFF_PROGRAMS");
    unsigned long n = env != NULL ? strtoul(env, NULL, 10) : PROGRAMS, seed;
    char report[4096];

    (void)state;
    for (seed = 1; seed <= n; seed++) {
        struct luadiff_rng r;
        luadiff_rng_seed(&r, seed);
        if (luadiff_program(&r, STATEMENTS, &st, report, sizeof report) != 0)
            printf("seed %lu:\n%s\n", seed, report);
    }
    printf("luadiff: %lu programs, %lu statements, %lu compared, %lu heavy, %lu differ\n",
           st.programs, st.statements, st.compared, st.heavy, st.differences);
    assert_int_equal(st.differences, 0);
    assert_true(st.compared > st.statements * 9 / 10);
}

/* Statements that once differed from stock (a wrapper paying before it
 * validated, running __tostring early, an extra C frame, a seed-dependent
 * name), and neighbours that must keep stock's value. */
static void test_listed(void **state)
{
    static const char *const cases[] = {
        "return table.move({}, 1, 1 << 62, 1.5)",
        "return pcall(table.move, {}, 1, 1 << 62, 1.5)",
        "return pcall(table.move, {}, 1, math.maxinteger, 2)",
        "return pcall(table.move, {}, -1, math.maxinteger, 2)",
        "return table.move({1, 2, 3}, 1, 3, 2)",
        "return utf8.len('', -7, math.maxinteger)",
        "return utf8.len('abc', 1, math.maxinteger)",
        "return utf8.len('abc', -2)",
        "return string.format('%y%s', 1, TS('x'))",
        "return string.format('%q%s', {}, TSE(1))",
        "return pcall(string.format, '%123s', TS('x'))",
        "return string.format('%5s|%-3s', TS('ab'), TS(1))",
        "return table.concat(1)",
        "\n\nreturn table.concat({1, {}})",
        "return table.concat(IXE(2))",
        "return pcall(table.concat, IXE(2))",
        "return table.concat(IX(3, 'v'), ',')",
        "return load(RD({}))",
        "return load(RDE(1))",
        "return load(RDE(2))",
        "return xpcall(load, H, RDE(1))",
        "return xpcall(load, H, RD({}))",
        "return coroutine.resume(1)",
        "return pcall(coroutine.resume, 1)",
        "return pcall(table.unpack, {}, 1.5)",
        "return print(TS(1))",
        "return pcall(print, TSE(2))",
        "return xpcall(error, string.upper, {})",
        "return xpcall(xpcall, H, CMP(0), FE(2), 5)",
        "return xpcall(error, function(m) error('x', 2) end, 1)",
        "local n = 0 local function h(m) n = n + 1 error(m) end return n, xpcall(error, h, 'x')",
        "return load('\\27Lua', 'b', 't')",
        "local mt = {__eq = function() LOG[#LOG + 1] = 'eq' return true end}\n"
        "local a, b = setmetatable({1, 2, 3}, mt), setmetatable({}, mt)\n"
        "table.move(a, 1, 3, 2, b) return a[4], b[2], b[3], b[4]",
        "local t = {1, 2, 3, 4, 5} table.move(t, 1, 4, 2) table.move(t, 2, 5, 1) return table.unpack(t)",
        "return pcall(table.insert, setmetatable({}, {__len = function() return math.maxinteger end}), 1, 0)",
        "return pcall(table.remove, setmetatable({}, {__len = function() return math.maxinteger end}), 1)",
        "return pcall(table.insert, LEN(-1), 1, 0), pcall(table.remove, LEN(-1), 0), pcall(table.remove, LEN(-1))",
        "return pcall(table.unpack, {}, math.mininteger, math.maxinteger)",
    };
    struct luadiff_stats st = {0};
    char report[4096];
    size_t i;

    (void)state;
    if (getenv("LUADIFF_STATEMENT") != NULL) {     /* one statement, to look at */
        int rc = luadiff_statement(getenv("LUADIFF_STATEMENT"), &st, report, sizeof report);
        printf("%s\n", rc == 0 ? "same" : report);
        return;
    }
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (luadiff_statement(cases[i], &st, report, sizeof report) != 0)
            printf("%s\n", report);
    printf("luadiff: %zu listed statements, %lu differ\n", i, st.differences);
    assert_int_equal(st.differences, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listed),
        cmocka_unit_test(test_generated),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
