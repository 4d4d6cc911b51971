/*
 * test_look.c - the look at the channel before a sleep, on both sides:
 * the supervisor's bound (sched_spin_hint, daemon/sched.c) and the
 * worker's window (worker/look.c).
 *
 * Each test states what the bound or window is for given counts or a given
 * wait, with no clock that a loaded machine could move: the waits are made
 * long (a second) where a branch depends on them.  How much CPU a look
 * costs is tests/integration/test_spin.py's concern.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "daemon/sched.h"
#include "daemon/sup.h"
#include "worker/look.h"

#define SPIN_US 10000u

/* A supervisor on ncpu CPUs with procs worker processes, of which idle
 * wait in the pool and killed are killed and not reaped yet. */
static unsigned hint(unsigned ncpu, unsigned procs, unsigned idle, unsigned killed)
{
    static struct sup s;

    memset(&s, 0, sizeof s);
    s.cfg.tool_spin_us = SPIN_US;
    s.ncpu = ncpu;
    s.procs = procs;
    s.n_idle = idle;
    s.n_killed = killed;
    return sched_spin_hint(&s);
}

static void test_looks_while_a_cpu_is_free(void **state)
{
    (void)state;
    assert_int_equal(hint(2, 1, 0, 0), SPIN_US);
    assert_int_equal(hint(4, 3, 0, 0), SPIN_US);
}

static void test_no_look_when_every_cpu_has_work(void **state)
{
    (void)state;
    assert_int_equal(hint(1, 1, 0, 0), 0);
    assert_int_equal(hint(2, 2, 0, 0), 0);
    assert_int_equal(hint(2, 3, 0, 0), 0);
    /* idle pooled workers are not busy; the others are */
    assert_int_equal(hint(2, 3, 2, 0), SPIN_US);
    assert_int_equal(hint(2, 3, 1, 0), 0);
}

/* After an answer the worker is killed, and the next job may start on a
 * pooled worker before the reap: the killed one is not busy. */
static void test_a_killed_worker_is_not_busy(void **state)
{
    (void)state;
    assert_int_equal(hint(2, 2, 0, 1), SPIN_US);
    assert_int_equal(hint(2, 3, 0, 2), SPIN_US);
    assert_int_equal(hint(2, 3, 0, 1), 0);
}

static uint64_t ago_ns(uint64_t ns)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec - ns;
}

/* A frame that came a second after the wait began (far past the bound) is
 * a slow peer: the window halves each time, then is none. */
static void test_a_slow_peer_shrinks_the_window(void **state)
{
    struct look l;
    uint64_t want = (uint64_t)SPIN_US * 1000u;
    int n;
    (void)state;

    look_init(&l, SPIN_US);
    assert_int_equal(l.max_ns, want);
    assert_int_equal(l.ns, want);
    for (n = 1; n <= 4; n++) {
        look_end(&l, ago_ns(1000000000u));
        assert_int_equal(l.ns, want >> n);
    }
    look_end(&l, ago_ns(1000000000u));
    assert_int_equal(l.ns, 0);
    assert_int_equal(l.max_ns, want);       /* the bound stays */
    look_end(&l, ago_ns(1000000000u));
    assert_int_equal(l.ns, 0);
}

static void test_a_new_bound_clamps_the_window(void **state)
{
    struct look l;
    (void)state;

    look_init(&l, SPIN_US);
    look_bound(&l, 0);                      /* every CPU has work now */
    assert_int_equal(l.max_ns, 0);
    assert_int_equal(l.ns, 0);
    assert_int_equal(look_begin(&l, -1), 0);   /* no look at all */
    look_bound(&l, -5);
    assert_int_equal(l.max_ns, 0);
    look_bound(&l, 1000000000);             /* clamped to CHAN_SPIN_US_MAX */
    assert_int_equal(l.max_ns, (uint64_t)SPIN_US * 1000u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_looks_while_a_cpu_is_free),
        cmocka_unit_test(test_no_look_when_every_cpu_has_work),
        cmocka_unit_test(test_a_killed_worker_is_not_busy),
        cmocka_unit_test(test_a_slow_peer_shrinks_the_window),
        cmocka_unit_test(test_a_new_bound_clamps_the_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
