/* test_exec_table.c - the execution state table (daemon/exec.c's accepts[])
 * held to the diagram in daemon/exec.h: every state and every event,
 * accepted or refused.  Run from the top of the tree (make test-unit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/exec.h"

#define N_STATES (ST_DONE + 1)
#define N_EVENTS (XE_CLOSE + 1)

/* The table as exec.h draws it: marks[ev][st] is 'x' or '.', 0 where the
 * diagram has no row for ev. */
static char marks[N_EVENTS][N_STATES];

static int event_by_name(const char *name)
{
    for (int ev = 0; ev < N_EVENTS; ev++)
        if (strcmp(exec_event_name((enum exec_ev)ev), name) == 0)
            return ev;
    return -1;
}

/* Read the block after " * accepts:" in exec.h: a heading line whose words
 * begin the state names in enum order, then one row per event. */
static void read_diagram(void)
{
    FILE *f = fopen("daemon/exec.h", "r");
    char line[256];
    int in = 0, heading = 0;

    memset(marks, 0, sizeof marks);
    assert_non_null(f);
    while (fgets(line, sizeof line, f)) {
        char *tok, *save;
        int ev, st = 0;

        if (!in) {
            in = strcmp(line, " * accepts:\n") == 0;
            continue;
        }
        if (strcmp(line, " *\n") == 0)
            break;
        assert_true(strncmp(line, " * ", 3) == 0);
        tok = strtok_r(line + 2, " \n", &save);
        if (!heading) {
            for (; tok; tok = strtok_r(NULL, " \n", &save), st++) {
                assert_true(st < N_STATES);
                assert_true(strncmp(exec_state_name((enum exec_state)st), tok, strlen(tok)) == 0);
            }
            assert_int_equal(st, N_STATES);
            heading = 1;
            continue;
        }
        ev = event_by_name(tok);
        if (ev < 0)
            fail_msg("exec.h names an event exec.c does not know: %s", tok);
        assert_int_equal(marks[ev][0], 0);                 /* one row per event */
        for (tok = strtok_r(NULL, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save), st++) {
            assert_true(st < N_STATES);
            assert_true(strcmp(tok, "x") == 0 || strcmp(tok, ".") == 0);
            marks[ev][st] = tok[0];
        }
        assert_int_equal(st, N_STATES);
    }
    fclose(f);
    assert_true(heading);
}

static void test_every_event_has_a_row(void **state)
{
    (void)state;
    read_diagram();
    for (int ev = 0; ev < N_EVENTS; ev++)
        if (!marks[ev][0])
            fail_msg("exec.h's diagram has no row for %s", exec_event_name((enum exec_ev)ev));
}

static void test_table_matches_diagram(void **state)
{
    (void)state;
    read_diagram();
    for (int ev = 0; ev < N_EVENTS; ev++)
        for (int st = 0; st < N_STATES; st++)
            if (exec_accepts((enum exec_state)st, (enum exec_ev)ev) != (marks[ev][st] == 'x'))
                fail_msg("%s in %s: accepts[] says %s, exec.h says %s",
                         exec_event_name((enum exec_ev)ev), exec_state_name((enum exec_state)st),
                         exec_accepts((enum exec_state)st, (enum exec_ev)ev) ? "accepted" : "refused",
                         marks[ev][st] == 'x' ? "accepted" : "refused");
}

/* The invariants the diagram's prose states. */
static void test_done_accepts_nothing_and_every_live_state_hears_a_disconnect(void **state)
{
    (void)state;
    for (int ev = 0; ev < N_EVENTS; ev++)
        assert_false(exec_accepts(ST_DONE, (enum exec_ev)ev));
    for (int st = 0; st < ST_DONE; st++)
        assert_true(exec_accepts((enum exec_state)st, XE_DISCONNECT));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_event_has_a_row),
        cmocka_unit_test(test_table_matches_diagram),
        cmocka_unit_test(test_done_accepts_nothing_and_every_live_state_hears_a_disconnect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
