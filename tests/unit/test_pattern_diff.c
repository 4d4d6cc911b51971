/* test_pattern_diff.c - the pattern functions (worker/pattern.c) against
 * the stock string library: a fixed-seed pass of generated cases
 * (pattern_diff.h), counting on and off.  PATTERN_DIFF_CASES overrides the
 * count, PATTERN_DIFF_SEED the seed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/pattern_diff.h"

#define CASES 100000L
#define SEED  0x5eed5eed2026ULL

static void test_agrees_with_stock(void **state)
{
    struct pd d;
    struct pd_src r = {NULL, 0, 0, SEED};
    const char *env = getenv("PATTERN_DIFF_CASES");
    long cases = env != NULL ? atol(env) : CASES;

    (void)state;
    if (getenv("PATTERN_DIFF_SEED") != NULL)
        r.rng = strtoull(getenv("PATTERN_DIFF_SEED"), NULL, 0);
    assert_int_equal(pd_open(&d), 0);
    while (d.cases < cases) {           /* cases compared: the long ones do not count */
        if (pd_case(&d, &r) != 0 && d.failed <= 5)
            pd_report(&d, stdout);
    }
    printf("pattern differential: %ld cases, %ld passed, %ld failed, %ld too long (seed %#llx)\n",
           d.cases, d.cases - d.failed, d.failed, d.long_cases, (unsigned long long)SEED);
    assert_true(d.paid > 0);            /* counting on charged its steps */
    assert_true(d.long_cases <= cases / 100);   /* few are left out */
    pd_close(&d);
    assert_int_equal(d.failed, 0);
}

/* Raw bytes as subject, pattern and replacement (what the fuzz target's odd
 * inputs are): 20,000 cases from the same seed. */
static void test_raw_bytes_agree(void **state)
{
    struct pd d;
    struct pd_src r = {NULL, 0, 0, SEED};
    static const char bytes[] = "ab()%[]^$.*+-?1fb\xff";
    uint8_t buf[48];

    (void)state;
    assert_int_equal(pd_open(&d), 0);
    for (long i = 0; i < 20000; i++) {
        size_t n = 2 + pd_pick(&r, sizeof buf - 2);

        for (size_t j = 0; j < n; j++)
            buf[j] = (uint8_t)(bytes[pd_pick(&r, sizeof bytes - 1)] ^
                               (pd_pick(&r, 16) == 0 ? pd_pick(&r, 256) : 0));
        buf[0] = (uint8_t)pd_pick(&r, 256);
        buf[1] = (uint8_t)pd_pick(&r, 16);
        if (pd_raw(&d, buf, n) != 0 && d.failed <= 5)
            pd_report(&d, stdout);
    }
    printf("pattern differential, raw bytes: %ld cases, %ld passed, %ld failed, %ld too long\n",
           d.cases, d.cases - d.failed, d.failed, d.long_cases);
    pd_close(&d);
    assert_int_equal(d.failed, 0);
}

/* The bills docs/protocol.md and charge.h let a reader compute. */
static void test_documented_bills(void **state)
{
    static const struct {
        const char *code;
        uint64_t steps;
    } bills[] = {
        {"return mine_on.find('aab', 'a+b')", 7},     /* the example in protocol.md */
        {"return mine_on.find('a', '()')", 4},        /* 2 bytes, '()', the end */
        {"return mine_on.find('xyz', '%d')", 2 + 4},  /* 2 bytes, 4 positions */
        {"return mine_on.find('xyz', 'y')", 0},       /* plain: 3 bytes / 64 */
        {"return mine_on.gsub('aab', '', '-')", 7},   /* n stops at #s + 1 tries */
        /* 4 bytes, %b and the 2 characters it passes, the end */
        {"return mine_on.match('(x)', '%b()')", 4 + 1 + 2 + 1},
        /* 3 bytes, a-, '$' tried at 4 positions, the 2nd and 3rd 'a' */
        {"return mine_on.match('aaa', 'a-$')", 3 + 1 + 4 + 2},
        /* a set with no ']': the 101 bytes scanned for one, the item */
        {"return pcall(mine_on.find, 'a', '[' .. ('x'):rep(100))", 101 + 1},
    };
    struct pd d;

    (void)state;
    assert_int_equal(pd_open(&d), 0);
    for (size_t i = 0; i < sizeof bills / sizeof bills[0]; i++) {
        uint64_t before = d.paid;

        assert_int_equal(luaL_dostring(d.L, bills[i].code), LUA_OK);
        if (d.paid - before != bills[i].steps)
            printf("%s: %llu steps\n", bills[i].code, (unsigned long long)(d.paid - before));
        assert_int_equal(d.paid - before, bills[i].steps);
        lua_settop(d.L, 0);
    }
    pd_close(&d);
}

/* The generator reaches what it is for: matches, captures, each error. */
static void test_cases_reach_every_outcome(void **state)
{
    static const char *const want[] = {
        "malformed pattern (ends with '%')", "malformed pattern (missing ']')",
        "missing '[' after '%f' in pattern", "malformed pattern (missing arguments to '%b')",
        "invalid capture index %", "invalid pattern capture", "unfinished capture",
        "too many captures", "pattern too complex", "invalid use of '%' in replacement string",
        "invalid replacement value (a table)", "string/function/table expected",
        "number has no integer representation", "ok 2|s", "ok 4|integer:",
    };
    int seen[sizeof want / sizeof want[0]] = {0};
    struct pd d;
    struct pd_src r = {NULL, 0, 0, SEED};

    (void)state;
    assert_int_equal(pd_open(&d), 0);
    for (long i = 0; i < 20000; i++) {
        pd_case(&d, &r);
        for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
            seen[k] += strstr(d.got[0], want[k]) != NULL;
    }
    pd_close(&d);
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        if (seen[k] == 0)
            printf("never seen: %s\n", want[k]);
        assert_int_not_equal(seen[k], 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agrees_with_stock),
        cmocka_unit_test(test_raw_bytes_agree),
        cmocka_unit_test(test_documented_bills),
        cmocka_unit_test(test_cases_reach_every_outcome),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
