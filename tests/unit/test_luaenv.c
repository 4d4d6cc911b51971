/*
 * test_luaenv.c - the counting allocator of worker/luaenv.c, called directly
 * through lua_getallocf(): the type tag in osize, shrinks that never fail,
 * and the string cap against the heap cap.  (The Lua-level behaviour of the
 * limits is in test_worker.c and the attack corpus.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <lua.h>

#include "worker/luaenv.h"

struct fixture {
    struct luaenv *e;
    lua_Alloc f;
    void *ud;
};

static int setup(void **state)
{
    struct fixture *x = calloc(1, sizeof *x);

    assert_non_null(x);
    x->e = luaenv_new();
    assert_non_null(x->e);
    x->f = lua_getallocf(luaenv_state(x->e), &x->ud);
    assert_ptr_equal(x->ud, x->e);
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *x = *state;

    luaenv_free(x->e);
    free(x);
    return 0;
}

/* Caps relative to what the state already holds: `room` bytes of heap. */
static void apply(struct fixture *x, size_t room)
{
    struct luaenv_limits lim = { .max_heap = room ? x->e->used + room : 0, .output_fd = -1 };

    luaenv_apply(x->e, &lim);
}

/* For a new block (ptr NULL) osize is a type tag, not a size: the block is
 * charged its full nsize whatever the tag, and a free gives back exactly
 * what was charged. */
static void test_type_tag_is_not_a_size(void **state)
{
    struct fixture *x = *state;
    static const int tags[] = { LUA_TSTRING, LUA_TTABLE, LUA_TFUNCTION, LUA_TUSERDATA,
                                LUA_TTHREAD };
    size_t base;

    apply(x, 0);
    base = x->e->used;
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
        void *p = x->f(x->ud, NULL, (size_t)tags[i], 100);

        assert_non_null(p);
        assert_int_equal(x->e->used, base + 100);
        p = x->f(x->ud, p, 100, 300);           /* growth: old size is osize now */
        assert_non_null(p);
        assert_int_equal(x->e->used, base + 300);
        assert_null(x->f(x->ud, p, 300, 0));
        assert_int_equal(x->e->used, base);
    }
}

/* At the cap, growth is refused (the old block stays valid and counted) and
 * a shrink or a free still succeeds: Lua assumes they cannot fail. */
static void test_shrink_never_fails_at_cap(void **state)
{
    struct fixture *x = *state;
    size_t base;
    char *p, *q;

    apply(x, 1000);
    base = x->e->used;
    p = x->f(x->ud, NULL, LUA_TUSERDATA, 1000);  /* exactly the room */
    assert_non_null(p);
    memset(p, 'a', 1000);
    assert_int_equal(x->e->used, base + 1000);
    assert_null(x->f(x->ud, NULL, LUA_TTABLE, 1));
    assert_int_equal(x->e->last_refusal, LUAENV_REFUSED_HEAP);
    assert_null(x->f(x->ud, p, 1000, 1001));
    assert_int_equal(x->e->used, base + 1000);
    assert_int_equal(p[999], 'a');              /* untouched by the refusal */
    q = x->f(x->ud, p, 1000, 10);
    assert_non_null(q);
    assert_int_equal(q[9], 'a');
    assert_int_equal(x->e->used, base + 10);
    q = x->f(x->ud, q, 10, 1000);               /* the room is back */
    assert_non_null(q);
    assert_null(x->f(x->ud, q, 1000, 0));
    assert_int_equal(x->e->used, base);
    assert_true(x->e->peak >= base + 1000);
}

/* A new string longer than the string cap (half the heap cap here) is
 * refused as a string; the same size as another type is within the heap
 * and succeeds; past the heap it is refused as heap.  Only new strings are
 * judged by the string cap: growing a non-string block is a heap matter. */
static void test_string_cap_versus_heap(void **state)
{
    struct fixture *x = *state;
    size_t room = 1 << 20, half, over;
    void *p;

    apply(x, room);
    half = luaenv_string_cap(x->e);
    assert_true(half <= (x->e->used + room) / 2);
    over = half + 4096;                         /* past the cap and its slack */
    x->e->last_refusal = LUAENV_REFUSED_NONE;
    assert_null(x->f(x->ud, NULL, LUA_TSTRING, over));
    assert_int_equal(x->e->last_refusal, LUAENV_REFUSED_STRING);
    p = x->f(x->ud, NULL, LUA_TSTRING, half - 4096);
    assert_non_null(p);
    x->f(x->ud, p, half - 4096, 0);
    p = x->f(x->ud, NULL, LUA_TTABLE, over);
    assert_non_null(p);
    x->f(x->ud, p, over, 0);
    x->e->last_refusal = LUAENV_REFUSED_NONE;
    assert_null(x->f(x->ud, NULL, LUA_TTABLE, room + 1));
    assert_int_equal(x->e->last_refusal, LUAENV_REFUSED_HEAP);
}

/* Without a heap cap the string cap is the fixed maximum. */
static void test_string_cap_without_heap_cap(void **state)
{
    struct fixture *x = *state;

    apply(x, 0);
    assert_int_equal(luaenv_string_cap(x->e), LUAENV_STRING_CAP_MAX);
}

/* The string cap is exact: a new string block is header + length + 1 bytes
 * (the header measured at luaenv_new), and a length of the cap is allowed,
 * one byte more refused. */
static void test_string_cap_exact(void **state)
{
    struct fixture *x = *state;
    size_t cap, h = x->e->string_header;
    void *p;

    apply(x, 1 << 20);
    cap = luaenv_string_cap(x->e);
    assert_true(h >= 16 && h <= 64);
    p = x->f(x->ud, NULL, LUA_TSTRING, h + cap + 1);
    assert_non_null(p);
    x->f(x->ud, p, h + cap + 1, 0);
    x->e->last_refusal = LUAENV_REFUSED_NONE;
    assert_null(x->f(x->ud, NULL, LUA_TSTRING, h + cap + 2));
    assert_int_equal(x->e->last_refusal, LUAENV_REFUSED_STRING);
    assert_int_equal(luaenv_fatal(x->e), LUAENV_FATAL_NONE);
}

/* The core retries a refused request once, after an emergency collection,
 * with the same arguments.  A heap refusal of that retry is final: the fatal
 * flag is set there (lua_checkstack would swallow the error).  A first
 * refusal, or a retry that is not the same request, is not. */
static void test_refused_retry_is_final(void **state)
{
    struct fixture *x = *state;
    size_t big;

    apply(x, 1000);
    assert_null(x->f(x->ud, NULL, LUA_TTABLE, 2000));
    assert_int_equal(luaenv_fatal(x->e), LUAENV_FATAL_NONE);
    assert_null(x->f(x->ud, NULL, LUA_TTABLE, 3000));     /* another request */
    assert_int_equal(luaenv_fatal(x->e), LUAENV_FATAL_NONE);
    x->f(x->ud, NULL, 0, 0);                                /* frees do not disarm */
    assert_null(x->f(x->ud, NULL, LUA_TTABLE, 3000));     /* its retry */
    assert_int_equal(luaenv_fatal(x->e), LUAENV_FATAL_MEMORY);

    apply(x, 1000);                                         /* a string refusal stays catchable */
    big = luaenv_string_cap(x->e) + 100;
    assert_null(x->f(x->ud, NULL, LUA_TSTRING, big));
    assert_null(x->f(x->ud, NULL, LUA_TSTRING, big));
    assert_int_equal(x->e->last_refusal, LUAENV_REFUSED_STRING);
    assert_int_equal(luaenv_fatal(x->e), LUAENV_FATAL_NONE);
}

/* A heap refusal of the retry ends the chunk: the emergency collection
 * behind it is never billed, whatever the credit. */
static void test_final_refusal_not_billed(void **state)
{
    struct fixture *x = *state;
    struct luaenv_limits lim = { .max_heap = x->e->used + 1000, .max_reductions = 1000000,
                                 .output_fd = -1 };

    luaenv_apply(x->e, &lim);
    x->e->gc_credit = 0;
    assert_null(x->f(x->ud, NULL, LUA_TTABLE, 100000));
    assert_null(x->f(x->ud, NULL, LUA_TTABLE, 100000));
    assert_int_equal(luaenv_fatal(x->e), LUAENV_FATAL_MEMORY);
    assert_int_equal(x->e->reductions, 0);
}

/* A retry that fits after the emergency collection: free while the credit
 * (GC_CREDIT_PER_BYTE = 4 bytes of collection per byte allocated) pays for
 * the heap collected; when it does not, the heap is too close to its cap
 * for the collector to make room: memory_limit, never a bill. */
static void test_needed_collection_paid_by_credit(void **state)
{
    struct fixture *x = *state;
    struct luaenv_limits lim = { .max_heap = x->e->used + 100000, .max_reductions = 1000000,
                                 .output_fd = -1 };
    size_t heap;
    void *fill, *p;

    luaenv_apply(x->e, &lim);
    assert_int_equal(x->e->gc_credit, 2 * lim.max_heap);    /* a chunk starts with two heaps */
    fill = x->f(x->ud, NULL, LUA_TUSERDATA, 70000);
    assert_non_null(fill);
    x->e->gc_credit = 0;
    p = x->f(x->ud, NULL, LUA_TTABLE, 15000);               /* earns 60000 */
    assert_non_null(p);
    assert_int_equal(x->e->gc_credit, 60000);
    heap = x->e->used;
    x->e->gc_credit = heap;                                 /* exactly one collection */
    assert_null(x->f(x->ud, NULL, LUA_TTABLE, 20000));
    x->f(x->ud, p, 15000, 0);                               /* the collection frees */
    p = x->f(x->ud, NULL, LUA_TTABLE, 20000);               /* the retry fits */
    assert_non_null(p);
    assert_int_equal(luaenv_fatal(x->e), LUAENV_FATAL_NONE);
    assert_int_equal(x->e->gc_credit, 4 * 20000);
    assert_int_equal(x->e->reductions, 0);

    x->e->gc_credit = 0;                                    /* unpaid: memory, not reductions */
    assert_null(x->f(x->ud, NULL, LUA_TTABLE, 20000));
    x->f(x->ud, p, 20000, 0);
    assert_null(x->f(x->ud, NULL, LUA_TTABLE, 20000));
    assert_int_equal(luaenv_fatal(x->e), LUAENV_FATAL_MEMORY);
    assert_int_equal(x->e->reductions, 0);
    x->f(x->ud, fill, 70000, 0);
}

/* A string refusal the chunk catches and goes on from: the emergency
 * collection behind it (and the one luaenv_catch runs for dead buffers) is
 * billed by what the credit does not pay, one reduction per 4 bytes; the
 * end of the chunk (luaenv_catch_end) settles nothing. */
static void test_caught_refusal_billed(void **state)
{
    struct fixture *x = *state;
    struct luaenv_limits lim = { .max_heap = x->e->used + 1000, .max_reductions = 1000000,
                                 .output_fd = -1 };
    lua_State *L = luaenv_state(x->e);
    size_t heap, big;

    luaenv_apply(x->e, &lim);
    heap = x->e->used;
    big = luaenv_string_cap(x->e) + 100;
    assert_null(x->f(x->ud, NULL, LUA_TSTRING, big));
    assert_null(x->f(x->ud, NULL, LUA_TSTRING, big));
    assert_int_equal(x->e->reductions, 0);                  /* nothing at the refusal */
    lua_pushliteral(L, "not enough memory");
    assert_int_equal(luaenv_catch_end(L, LUA_ERRMEM), LUAENV_CAUGHT_STRING);
    assert_string_equal(lua_tostring(L, -1), "resulting string too large");
    lua_pop(L, 1);
    assert_int_equal(x->e->reductions, 0);

    x->e->gc_credit = 0;
    assert_null(x->f(x->ud, NULL, LUA_TSTRING, big));
    assert_null(x->f(x->ud, NULL, LUA_TSTRING, big));
    lua_pushliteral(L, "not enough memory");
    assert_int_equal(luaenv_catch(L, LUA_ERRMEM), LUAENV_CAUGHT_STRING);
    lua_pop(L, 1);
    assert_true(x->e->reductions >= heap / 4 + heap / 4 - 64);  /* two collections */
    assert_int_equal(luaenv_fatal(x->e), LUAENV_FATAL_NONE);

    lim.max_reductions = heap / 4 - 1;                      /* one collection spends it */
    luaenv_apply(x->e, &lim);
    x->e->gc_credit = 0;
    assert_null(x->f(x->ud, NULL, LUA_TSTRING, big));
    assert_null(x->f(x->ud, NULL, LUA_TSTRING, big));
    lua_pushliteral(L, "not enough memory");
    assert_int_equal(luaenv_catch(L, LUA_ERRMEM), LUAENV_CAUGHT_FATAL);
    lua_pop(L, 1);
    assert_int_equal(luaenv_fatal(x->e), LUAENV_FATAL_REDUCTIONS);

    lim.max_reductions = 0;                                 /* no budget: nothing billed */
    luaenv_apply(x->e, &lim);
    x->e->gc_credit = 0;
    assert_null(x->f(x->ud, NULL, LUA_TSTRING, big));
    assert_null(x->f(x->ud, NULL, LUA_TSTRING, big));
    lua_pushliteral(L, "not enough memory");
    assert_int_equal(luaenv_catch(L, LUA_ERRMEM), LUAENV_CAUGHT_STRING);
    lua_pop(L, 1);
    assert_int_equal(x->e->reductions, 0);
}

/* While the chunk runs, a new string costs one reduction per 64 bytes of
 * its length (charge.h), as it is allocated; a string that spends the
 * budget is refused with the reductions limit set.  Before luaenv_start
 * and inside host code nothing is charged. */
static void test_string_charged(void **state)
{
    struct fixture *x = *state;
    struct luaenv_limits lim = { .max_reductions = 100, .output_fd = -1 };
    size_t h = x->e->string_header;
    void *p;
    int was;

    luaenv_apply(x->e, &lim);
    p = x->f(x->ud, NULL, LUA_TSTRING, h + 640 + 1);
    assert_non_null(p);
    x->f(x->ud, p, h + 641, 0);
    assert_int_equal(x->e->reductions, 0);                  /* not started */
    luaenv_start(x->e);
    p = x->f(x->ud, NULL, LUA_TSTRING, h + 640 + 1);
    assert_non_null(p);
    x->f(x->ud, p, h + 641, 0);
    assert_int_equal(x->e->reductions, 10);
    p = x->f(x->ud, NULL, LUA_TSTRING, h + 63 + 1);         /* short of a unit */
    x->f(x->ud, p, h + 64, 0);
    p = x->f(x->ud, NULL, LUA_TTABLE, 6400);                /* not a string */
    x->f(x->ud, p, 6400, 0);
    assert_int_equal(x->e->reductions, 10);
    was = luaenv_host_begin(luaenv_state(x->e));
    p = x->f(x->ud, NULL, LUA_TSTRING, h + 64000 + 1);
    assert_non_null(p);
    x->f(x->ud, p, h + 64001, 0);
    luaenv_host_end(luaenv_state(x->e), was);
    assert_int_equal(x->e->reductions, 10);
    assert_null(x->f(x->ud, NULL, LUA_TSTRING, h + 64 * 91 + 1));
    assert_int_equal(x->e->last_refusal, LUAENV_REFUSED_BUDGET);
    assert_int_equal(luaenv_fatal(x->e), LUAENV_FATAL_REDUCTIONS);
    luaenv_finish(x->e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_type_tag_is_not_a_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shrink_never_fails_at_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_string_cap_versus_heap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_string_cap_without_heap_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_string_cap_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_retry_is_final, setup, teardown),
        cmocka_unit_test_setup_teardown(test_final_refusal_not_billed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_needed_collection_paid_by_credit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_caught_refusal_billed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_string_charged, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
