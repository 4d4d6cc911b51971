/* Unit tests for daemon/metrics.c: counting, bucket boundaries, and the
 * gauges passed through to the text.  The format itself is checked by an
 * exposition parser in tests/integration/test_metrics.py. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/metrics.h"

/* The value of the sample line that starts with `series ` in the text of
 * a fresh render; -1 when there is none. */
static double sample(const struct metrics_now *now, const char *series)
{
    char *text = metrics_render(now), *p;
    size_t n = strlen(series);
    double v = -1;

    assert_non_null(text);
    for (p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ') {
            v = strtod(p + n + 1, NULL);
            break;
        }
    }
    free(text);
    return v;
}

static const struct metrics_now zero;

static void test_kinds_counted_and_unknown_is_other(void **state)
{
    (void)state;
    double ok = sample(&zero, "sandboxd_executions_total{kind=\"ok\"}");
    double other = sample(&zero, "sandboxd_executions_total{kind=\"other\"}");
    double busy = sample(&zero, "sandboxd_executions_total{kind=\"busy\"}");

    assert_true(ok >= 0 && other >= 0 && busy >= 0);
    metrics_exec_end("ok", 1, 0.01, 0.0);
    metrics_exec_end("no-such-kind", 1, 0.01, 0.0);
    metrics_exec_end(NULL, 0, 0, 0);
    metrics_exec_end("busy", 0, 0, 0);
    assert_true(sample(&zero, "sandboxd_executions_total{kind=\"ok\"}") == ok + 1);
    assert_true(sample(&zero, "sandboxd_executions_total{kind=\"other\"}") == other + 2);
    assert_true(sample(&zero, "sandboxd_executions_total{kind=\"busy\"}") == busy + 1);
}

/* le is "less than or equal": a value on a bound is in that bucket; a
 * negative or NaN time (a clock step) counts as 0; only started executions
 * are observed. */
static void test_bucket_bounds(void **state)
{
    (void)state;
    const char *b1 = "sandboxd_execution_duration_seconds_bucket{le=\"0.001\"}";
    const char *b2 = "sandboxd_execution_duration_seconds_bucket{le=\"0.0025\"}";
    const char *inf = "sandboxd_execution_duration_seconds_bucket{le=\"+Inf\"}";
    const char *cnt = "sandboxd_execution_duration_seconds_count";
    const char *w0 = "sandboxd_queue_wait_seconds_bucket{le=\"0.0001\"}";
    double v1 = sample(&zero, b1), v2 = sample(&zero, b2), vi = sample(&zero, inf);
    double vc = sample(&zero, cnt), vw = sample(&zero, w0);

    metrics_exec_end("ok", 1, 0.001, -1.0);          /* on the bound; wait < 0 */
    assert_true(sample(&zero, b1) == v1 + 1);
    assert_true(sample(&zero, w0) == vw + 1);
    metrics_exec_end("ok", 1, 0.0011, NAN);          /* just above */
    assert_true(sample(&zero, b1) == v1 + 1);
    assert_true(sample(&zero, b2) == v2 + 2);
    assert_true(sample(&zero, w0) == vw + 2);
    metrics_exec_end("timeout", 1, 1e6, 0.0);        /* above every bound */
    assert_true(sample(&zero, inf) == vi + 3);
    assert_true(sample(&zero, "sandboxd_execution_duration_seconds_bucket{le=\"600\"}") <
                sample(&zero, inf));
    metrics_exec_end("busy", 0, 5.0, 5.0);           /* never started: not observed */
    assert_true(sample(&zero, cnt) == vc + 3);
    assert_true(sample(&zero, inf) == sample(&zero, cnt));
}

static void test_gauges_and_counters_passed_through(void **state)
{
    (void)state;
    const struct metrics_now now = {
        .workers_started = 12345678901ULL, .workers = 7, .idle_workers = 3, .queued = 2,
        .connections = 5, .sessions = 4, .input_buffer_bytes = 1u << 20,
        .output_buffer_bytes = 4096,
    };
    double tc = sample(&now, "sandboxd_tool_calls_total");
    double zr = sample(&now, "sandboxd_zygote_restarts_total");
    double rp = sample(&now, "sandboxd_refused_peers_total");
    double hs = sample(&now, "sandboxd_handovers_lost_total{reason=\"stuck\"}");
    double hd = sample(&now, "sandboxd_handovers_lost_total{reason=\"died\"}");

    assert_true(sample(&now, "sandboxd_workers_started_total") == 12345678901.0);
    assert_true(sample(&now, "sandboxd_workers") == 7);
    assert_true(sample(&now, "sandboxd_idle_workers") == 3);
    assert_true(sample(&now, "sandboxd_queued_executions") == 2);
    assert_true(sample(&now, "sandboxd_connections") == 5);
    assert_true(sample(&now, "sandboxd_sessions") == 4);
    assert_true(sample(&now, "sandboxd_input_buffer_bytes") == 1048576);
    assert_true(sample(&now, "sandboxd_output_buffer_bytes") == 4096);
    assert_true(sample(&now, "process_resident_memory_bytes") > 0);
    metrics_tool_call();
    metrics_zygote_restart();
    metrics_refused_peer();
    metrics_refused_peer();
    metrics_handover_lost("stuck");
    metrics_handover_lost("died");
    metrics_handover_lost("died");
    assert_true(sample(&now, "sandboxd_handovers_lost_total{reason=\"stuck\"}") == hs + 1);
    assert_true(sample(&now, "sandboxd_handovers_lost_total{reason=\"died\"}") == hd + 2);
    assert_true(sample(&now, "sandboxd_tool_calls_total") == tc + 1);
    assert_true(sample(&now, "sandboxd_zygote_restarts_total") == zr + 1);
    assert_true(sample(&now, "sandboxd_refused_peers_total") == rp + 2);
}

static void test_every_line_ends_and_families_are_typed(void **state)
{
    (void)state;
    char *text = metrics_render(&zero);
    size_t len;

    assert_non_null(text);
    len = strlen(text);
    assert_true(len > 0 && text[len - 1] == '\n');
    assert_null(strstr(text, "\n\n"));
    assert_non_null(strstr(text, "# TYPE sandboxd_executions_total counter\n"));
    assert_non_null(strstr(text, "# TYPE sandboxd_execution_duration_seconds histogram\n"));
    assert_non_null(strstr(text, "# TYPE sandboxd_workers gauge\n"));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds_counted_and_unknown_is_other),
        cmocka_unit_test(test_bucket_bounds),
        cmocka_unit_test(test_gauges_and_counters_passed_through),
        cmocka_unit_test(test_every_line_ends_and_families_are_typed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
