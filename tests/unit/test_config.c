/*
 * test_config.c - policy/config.c: sandboxd.conf parsing, the sample file,
 * limits_resolve(), limits_to_json(), priorities.
 *
 * Config text is written to a temporary file and loaded; errors are
 * collected with their line numbers and checked one by one.
 * The sample file is found through $SANDBOXD_SAMPLE_CONF, else relative to
 * this source file (the tests run from the repository root).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/config.h"

#define MAX_ERRS 32

struct errs {
    int n;
    int line[MAX_ERRS];
    char msg[MAX_ERRS][512];
    char file[MAX_ERRS][256];
};

static void collect(void *ctx, const char *file, int line, const char *msg)
{
    struct errs *e = ctx;

    if (e->n < MAX_ERRS) {
        e->line[e->n] = line;
        snprintf(e->msg[e->n], sizeof e->msg[0], "%s", msg);
        snprintf(e->file[e->n], sizeof e->file[0], "%s", file);
    }
    e->n++;
}

/* Writes text to a fresh temporary file; returns its malloc'd path. */
static char *write_temp(const char *text)
{
    const char *dir = getenv("TMPDIR");
    char *path;
    int fd;

    assert_true(asprintf(&path, "%s/test_config.XXXXXX", dir && *dir ? dir : "/tmp") > 0);
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

/* Loads text over a config from config_defaults(); returns the error count
 * (also in e->n) and checks that every error names the file. */
static int load_text(struct config *c, const char *text, struct errs *e)
{
    char *path = write_temp(text);
    int n;

    memset(e, 0, sizeof *e);
    n = config_load(c, path, collect, e);
    assert_int_equal(n, e->n);
    for (int i = 0; i < e->n && i < MAX_ERRS; i++)
        assert_string_equal(e->file[i], path);
    unlink(path);
    free(path);
    return n;
}

/* Asserts that error i is on line and its message contains needle. */
static void expect_err(const struct errs *e, int i, int line, const char *needle)
{
    assert_true(i < e->n);
    if (e->line[i] != line || !strstr(e->msg[i], needle))
        fail_msg("error %d: want line %d containing \"%s\", got line %d \"%s\"", i, line,
                 needle, e->line[i], e->msg[i]);
}

/* Loads text that must hold exactly one error, on line, containing needle. */
static void expect_one_error(const char *text, int line, const char *needle)
{
    struct config c;
    struct errs e;

    config_defaults(&c);
    if (load_text(&c, text, &e) != 1)
        fail_msg("want 1 error for \"%s\", got %d (first: line %d \"%s\")", text, e.n,
                 e.line[0], e.n ? e.msg[0] : "");
    expect_err(&e, 0, line, needle);
    config_free(&c);
}

static void assert_limits_equal(const struct limits *a, const struct limits *b)
{
    assert_true(a->timeout_ms == b->timeout_ms);
    assert_true(a->max_heap == b->max_heap);
    assert_true(a->max_reductions == b->max_reductions);
    assert_true(a->cpu_ms == b->cpu_ms);
    assert_int_equal(a->priority, b->priority);
    assert_true(a->max_output_bytes == b->max_output_bytes);
    assert_true(a->max_bindings_bytes == b->max_bindings_bytes);
    assert_true(a->max_tool_calls == b->max_tool_calls);
}

static void assert_opt_string_equal(const char *a, const char *b)
{
    if (!a || !b)
        assert_ptr_equal(a, b);
    else
        assert_string_equal(a, b);
}

static void assert_config_equal(const struct config *a, const struct config *b)
{
    assert_opt_string_equal(a->socket, b->socket);
    assert_int_equal(a->socket_mode, b->socket_mode);
    assert_opt_string_equal(a->socket_group, b->socket_group);
    assert_int_equal(a->n_allow_uids, b->n_allow_uids);
    for (size_t i = 0; i < a->n_allow_uids; i++)
        assert_int_equal(a->allow_uids[i], b->allow_uids[i]);
    assert_int_equal(a->n_allow_gids, b->n_allow_gids);
    for (size_t i = 0; i < a->n_allow_gids; i++)
        assert_int_equal(a->allow_gids[i], b->allow_gids[i]);
    assert_int_equal(a->max_workers, b->max_workers);
    assert_int_equal(a->max_queue, b->max_queue);
    assert_int_equal(a->max_connections, b->max_connections);
    assert_int_equal(a->pool_size, b->pool_size);
    assert_int_equal(a->max_message_bytes, b->max_message_bytes);
    assert_int_equal(a->max_backlog_bytes, b->max_backlog_bytes);
    assert_int_equal(a->max_code_bytes, b->max_code_bytes);
    assert_int_equal(a->log_level, b->log_level);
    assert_int_equal(a->shutdown_grace_ms, b->shutdown_grace_ms);
    assert_int_equal(a->max_input_bytes, b->max_input_bytes);
    assert_int_equal(a->max_parallel_calls, b->max_parallel_calls);
    assert_int_equal(a->max_sessions, b->max_sessions);
    assert_int_equal(a->max_sessions_per_connection, b->max_sessions_per_connection);
    assert_int_equal(a->session_idle_timeout_ms, b->session_idle_timeout_ms);
    assert_int_equal(a->tool_spin_us, b->tool_spin_us);
    assert_int_equal(a->shards, b->shards);
    assert_int_equal(a->write_idle_timeout_ms, b->write_idle_timeout_ms);
    assert_opt_string_equal(a->worker_user, b->worker_user);
    assert_opt_string_equal(a->worker_group, b->worker_group);
    assert_opt_string_equal(a->worker_chroot, b->worker_chroot);
    assert_limits_equal(&a->defaults, &b->defaults);
    assert_limits_equal(&a->ceilings, &b->ceilings);
}

/* ------------------------------------------------------------------ */
/* Defaults and the sample file                                        */

static void test_builtin_defaults(void **state)
{
    struct config c;

    (void)state;
    config_defaults(&c);
    assert_string_equal(c.socket, "/run/sandboxd/sandboxd.sock");
    assert_int_equal(c.socket_mode, 0660);
    assert_null(c.socket_group);
    assert_int_equal(c.n_allow_uids, 0);
    assert_int_equal(c.n_allow_gids, 0);
    assert_int_equal(c.max_workers, 16);
    assert_int_equal(c.max_queue, 256);
    assert_int_equal(c.max_connections, 1024);
    assert_int_equal(c.pool_size, 4);
    assert_int_equal(c.max_message_bytes, 16777216);
    assert_int_equal(c.max_input_bytes, 1073741824);
    assert_int_equal(c.max_backlog_bytes, 1073741824);
    assert_int_equal(c.max_code_bytes, 65536);
    assert_int_equal(c.log_level, LOG_LVL_INFO);
    assert_int_equal(c.shutdown_grace_ms, 5000);
    assert_int_equal(c.max_parallel_calls, 16);
    assert_int_equal(c.max_sessions, 8);
    assert_int_equal(c.max_sessions_per_connection, 4);
    assert_int_equal(c.session_idle_timeout_ms, 300000);
    assert_int_equal(c.tool_spin_us, 200);
    assert_int_equal(c.shards, 1);
    assert_int_equal(c.write_idle_timeout_ms, 60000);
    assert_string_equal(c.worker_user, "nobody");
    assert_string_equal(c.worker_group, "nogroup");
    assert_string_equal(c.worker_chroot, "/var/empty");
    assert_limits_equal(&c.defaults, &(struct limits){60000, 256000000, LIMIT_INF, LIMIT_INF,
                                                       PRIO_LOW, 1048576, 10000000, LIMIT_INF});
    assert_limits_equal(&c.ceilings, &(struct limits){600000, 1073741824, LIMIT_INF, LIMIT_INF,
                                                       PRIO_HIGH, 16777216, 16777216, LIMIT_INF});
    config_free(&c);
    assert_null(c.socket);
    config_free(&c); /* a second free is harmless */
}

static void test_sample_file_equals_defaults(void **state)
{
    const char *env = getenv("SANDBOXD_SAMPLE_CONF");
    char path[4096];
    struct config c, d;
    struct errs e = {0};
    const char *slash = strrchr(__FILE__, '/');

    (void)state;
    if (env && *env)
        snprintf(path, sizeof path, "%s", env);
    else
        snprintf(path, sizeof path, "%.*s/../../sandboxd.conf",
                 slash ? (int)(slash - __FILE__) : 1, slash ? __FILE__ : ".");
    config_defaults(&d);
    memset(&c, 0, sizeof c);
    /* Start from something that differs, to see the load replace it. */
    config_defaults(&c);
    c.max_workers = 3;
    int n = config_load(&c, path, collect, &e);
    if (n)
        fail_msg("%s: %d errors, first line %d: %s", path, n, e.line[0], e.msg[0]);
    assert_config_equal(&c, &d);
    config_free(&c);
    config_free(&d);
}

/* ------------------------------------------------------------------ */
/* Every key                                                            */

static const char all_keys[] =
    "# every key, none at its default\n"
    "[daemon]\n"
    "socket = /tmp/s.sock\n"
    "socket_mode = 0600\n"
    "socket_group = root\n"
    "allow_uids = 1000 root\t2000\n"
    "allow_gids = root 7\n"
    "max_workers = 8\n"
    "max_queue = 0\n"
    "max_connections = 3\n"
    "pool_size = 8\n"
    "max_message_bytes = 2K\n"
    "max_input_bytes = 3K\n"
    "max_code_bytes = 100\n"
    "log_level = debug\n"
    "shutdown_grace_ms = 0\n"
    "max_parallel_calls = 3\n"
    "max_sessions = 0\n"
    "max_sessions_per_connection = 3\n"
    "session_idle_timeout_ms = 1500\n"
    "tool_spin_us = 10000\n"
    "shards = 3\n"
    "write_idle_timeout_ms = 2500\n"
    "[worker]\n"
    "user = root\n"
    "group = root\n"
    "chroot =\n"
    "[defaults]\n"
    "timeout_ms = infinity\n"
    "max_heap = 2m\n"
    "max_reductions = 1000000\n"
    "cpu_ms = 5000\n"
    "priority = normal\n"
    "max_output_bytes = 0\n"
    "max_bindings_bytes = 3k\n"
    "max_tool_calls = 100\n"
    "[ceilings]\n"
    "timeout_ms = infinity\n"
    "max_heap = 2G\n"
    "max_reductions = 2000000\n"
    "cpu_ms = infinity\n"
    "priority = normal\n"
    "max_output_bytes = 1G\n"
    "max_bindings_bytes = 4M\n"
    "max_tool_calls = 1000\n";

static void test_every_key(void **state)
{
    struct config c;
    struct errs e;

    (void)state;
    config_defaults(&c);
    assert_int_equal(load_text(&c, all_keys, &e), 0);
    assert_string_equal(c.socket, "/tmp/s.sock");
    assert_int_equal(c.socket_mode, 0600);
    assert_string_equal(c.socket_group, "root");
    assert_int_equal(c.n_allow_uids, 3);
    assert_int_equal(c.allow_uids[0], 1000);
    assert_int_equal(c.allow_uids[1], 0);
    assert_int_equal(c.allow_uids[2], 2000);
    assert_int_equal(c.n_allow_gids, 2);
    assert_int_equal(c.allow_gids[0], 0);
    assert_int_equal(c.allow_gids[1], 7);
    assert_int_equal(c.max_workers, 8);
    assert_int_equal(c.max_queue, 0);
    assert_int_equal(c.max_connections, 3);
    assert_int_equal(c.pool_size, 8);
    assert_int_equal(c.max_message_bytes, 2048);
    assert_int_equal(c.max_input_bytes, 3072);
    assert_int_equal(c.max_code_bytes, 100);
    assert_int_equal(c.log_level, LOG_LVL_DEBUG);
    assert_int_equal(c.shutdown_grace_ms, 0);
    assert_int_equal(c.max_parallel_calls, 3);
    assert_int_equal(c.max_sessions, 0);
    assert_int_equal(c.max_sessions_per_connection, 3);
    assert_int_equal(c.session_idle_timeout_ms, 1500);
    assert_int_equal(c.tool_spin_us, 10000);
    assert_int_equal(c.shards, 3);
    assert_int_equal(c.write_idle_timeout_ms, 2500);
    assert_string_equal(c.worker_user, "root");
    assert_string_equal(c.worker_group, "root");
    assert_null(c.worker_chroot);
    assert_limits_equal(&c.defaults, &(struct limits){LIMIT_INF, 2097152, 1000000, 5000,
                                                       PRIO_NORMAL, 0, 3072, 100});
    assert_limits_equal(&c.ceilings, &(struct limits){LIMIT_INF, 2147483648ULL, 2000000,
                                                       LIMIT_INF, PRIO_NORMAL,
                                                       1073741824ULL, 4194304, 1000});
    config_free(&c);
}

static void test_value_forms(void **state)
{
    struct config c;
    struct errs e;

    (void)state;
    config_defaults(&c);
    assert_int_equal(load_text(&c,
                               "\xEF\xBB\xBF; a BOM, then a ';' comment\r\n"
                               "  [daemon]   # an indented header, CRLF lines\r\n"
                               "\tmax_workers=   5   # trailing comment\r\n"
                               "    max_queue = 7 ; another\r\n"
                               "socket_mode = 660\r\n"
                               "socket_group = 4242\n"
                               "allow_uids =\n"
                               "max_message_bytes = 63m\n"
                               "log_level = error\n"
                               "[worker]\n"
                               "chroot = /srv/jail\n"
                               "[defaults]\n"
                               "max_heap = 1024\n",
                               &e),
                     0);
    assert_int_equal(c.max_workers, 5);
    assert_int_equal(c.max_queue, 7);
    assert_int_equal(c.socket_mode, 0660);
    assert_string_equal(c.socket_group, "4242");
    assert_int_equal(c.n_allow_uids, 0);
    assert_null(c.allow_uids);
    assert_int_equal(c.max_message_bytes, 66060288);
    assert_int_equal(c.log_level, LOG_LVL_ERROR);
    assert_string_equal(c.worker_chroot, "/srv/jail");
    assert_true(c.defaults.max_heap == 1024);
    assert_int_equal(c.pool_size, 4); /* built-in pool_size <= max_workers 5: kept */
    config_free(&c);
}

static void test_log_levels_and_priorities(void **state)
{
    static const char *const levels[] = {"error", "warning", "notice", "info", "debug"};
    static const char *const prios[] = {"low", "normal", "high"};
    char text[128];
    struct config c;
    struct errs e;

    (void)state;
    for (int i = 0; i < 5; i++) {
        snprintf(text, sizeof text, "[daemon]\nlog_level = %s\n", levels[i]);
        config_defaults(&c);
        assert_int_equal(load_text(&c, text, &e), 0);
        assert_int_equal(c.log_level, i);
        config_free(&c);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(text, sizeof text, "[defaults]\npriority = %s\n", prios[i]);
        config_defaults(&c);
        assert_int_equal(load_text(&c, text, &e), 0);
        assert_int_equal(c.defaults.priority, i);
        config_free(&c);
    }
}

static void test_builtin_pool_size_is_clamped(void **state)
{
    struct config c;
    struct errs e;

    (void)state;
    config_defaults(&c);
    assert_int_equal(load_text(&c, "[daemon]\nmax_workers = 2\n", &e), 0);
    assert_int_equal(c.max_workers, 2);
    assert_int_equal(c.pool_size, 2);
    config_free(&c);
}

/* A load is built-in defaults plus the file: a reload forgets removed keys. */
static void test_reload_starts_from_defaults(void **state)
{
    struct config c;
    struct errs e;

    (void)state;
    config_defaults(&c);
    assert_int_equal(load_text(&c, "[daemon]\nmax_workers = 8\n", &e), 0);
    assert_int_equal(c.max_workers, 8);
    assert_int_equal(load_text(&c, "[daemon]\nmax_queue = 9\n", &e), 0);
    assert_int_equal(c.max_workers, 16);
    assert_int_equal(c.max_queue, 9);
    config_free(&c);
}

static void test_failed_load_keeps_config(void **state)
{
    struct config c;
    struct errs e;

    (void)state;
    config_defaults(&c);
    assert_int_equal(load_text(&c, "[daemon]\nmax_workers = 8\n", &e), 0);
    assert_int_equal(load_text(&c, "[daemon]\nmax_workers = 3\nmax_queue = x\n", &e), 1);
    assert_int_equal(c.max_workers, 8);
    assert_string_equal(c.socket, "/run/sandboxd/sandboxd.sock");
    config_free(&c);
}

static void test_missing_file(void **state)
{
    struct config c;
    struct errs e = {0};

    (void)state;
    config_defaults(&c);
    assert_int_equal(config_load(&c, "/nonexistent/sandboxd.conf", collect, &e), 1);
    assert_int_equal(e.n, 1);
    expect_err(&e, 0, 0, "No such file");
    assert_string_equal(e.file[0], "/nonexistent/sandboxd.conf");
    /* A directory opens but cannot be read: still one error, line 0. */
    memset(&e, 0, sizeof e);
    assert_int_equal(config_load(&c, "/", collect, &e), 1);
    expect_err(&e, 0, 0, "cannot read");
    /* No callback: errors are still counted. */
    assert_int_equal(config_load(&c, "/nonexistent/x", NULL, NULL), 1);
    assert_int_equal(c.max_workers, 16);
    config_free(&c);
}

/* ------------------------------------------------------------------ */
/* Errors, each with its line                                           */

static void test_structure_errors(void **state)
{
    (void)state;
    expect_one_error("[daemon]\n[bogus]\nmax_workers = 1\nx = 2\n", 2, "unknown section [bogus]");
    expect_one_error("[daemon]\n\nfoo = 1\n", 3, "unknown key 'foo' in [daemon]");
    expect_one_error("[worker]\nsocket = /x\n", 2, "unknown key 'socket' in [worker]");
    expect_one_error("[ceilings]\ntimeout = 5\n", 2, "unknown key 'timeout' in [ceilings]");
    expect_one_error("max_workers = 2\n[daemon]\n", 1, "key 'max_workers' outside any section");
    expect_one_error("[daemon]\nmax_workers\n", 2, "expected 'key = value'");
    expect_one_error("# c\n[daemon\n", 2, "expected '[section]'");
    expect_one_error("[daemon] junk\n", 1, "expected '[section]'");
    expect_one_error("[daemon]\nmax_workers = 2\n\nmax_workers = 3\n", 4,
                     "'max_workers' in [daemon] is already set at line 2");
    expect_one_error("[defaults]\npriority = low\n[defaults]\npriority = low\n", 4,
                     "already set at line 2");
}

static void test_long_and_nul_lines(void **state)
{
    char text[512];

    (void)state;
    snprintf(text, sizeof text, "[daemon]\nsocket = /%0300d\nmax_workers = 2\n", 0);
    expect_one_error(text, 2, "line too long");
    /* A long comment is fine. */
    struct config c;
    struct errs e;
    snprintf(text, sizeof text, "# %0300d\n[daemon]\nmax_workers = 2\n", 0);
    config_defaults(&c);
    assert_int_equal(load_text(&c, text, &e), 0);
    assert_int_equal(c.max_workers, 2);
    config_free(&c);
    /* An embedded NUL byte. */
    char *path = write_temp("");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    static const char nul_text[] = "[daemon]\nmax_\0workers = 2\n";
    assert_int_equal(fwrite(nul_text, 1, sizeof nul_text - 1, f), sizeof nul_text - 1);
    fclose(f);
    memset(&e, 0, sizeof e);
    config_defaults(&c);
    assert_int_equal(config_load(&c, path, collect, &e), 1);
    expect_err(&e, 0, 2, "NUL");
    unlink(path);
    free(path);
    config_free(&c);
}

static void test_number_errors(void **state)
{
    (void)state;
    expect_one_error("[daemon]\nmax_workers = abc\n", 2, "bad value for max_workers: 'abc'");
    expect_one_error("[daemon]\nmax_workers =\n", 2, "bad value for max_workers: '' (empty");
    expect_one_error("[daemon]\nmax_workers = 0\n", 2, "out of range: from 1 to 4096");
    expect_one_error("[daemon]\nmax_queue = -1\n", 2, "bad value for max_queue: '-1'");
    expect_one_error("[daemon]\nmax_connections = 0\n", 2, "max_connections");
    expect_one_error("[daemon]\nmax_queue = +1\n", 2, "bad value for max_queue: '+1'");
    expect_one_error("[daemon]\nmax_queue = 1.5\n", 2, "bad value for max_queue");
    expect_one_error("[daemon]\nmax_queue = 4K\n", 2, "bad value for max_queue: '4K'");
    expect_one_error("[daemon]\nmax_queue = 4294967296\n", 2, "too large");
    expect_one_error("[daemon]\nshutdown_grace_ms = 0x10\n", 2, "bad value for shutdown_grace_ms");
    expect_one_error("[daemon]\nmax_message_bytes = 16MB\n", 2,
                     "bad value for max_message_bytes: '16MB'");
    expect_one_error("[daemon]\nmax_message_bytes = 16X\n", 2, "K, M or G suffix");
    expect_one_error("[daemon]\nmax_message_bytes = 0\n", 2, "from 128 to 66060288");
    expect_one_error("[daemon]\nmax_code_bytes = 1 K\n", 2, "bad value for max_code_bytes");
    expect_one_error("[defaults]\nmax_heap = 99999999999999999999G\n", 2,
                     "bad value for max_heap: '99999999999999999999G' (too large");
    expect_one_error("[defaults]\nmax_heap = 99999999999G\n", 2, "too large");
    expect_one_error("[ceilings]\nmax_heap = 9223372036854775808\n", 2, "too large");
    expect_one_error("[ceilings]\nmax_heap = 18446744073709551615\n", 2, "too large");
    expect_one_error("[defaults]\nmax_heap = 0\n", 2, "ambiguous");
    expect_one_error("[defaults]\nmax_heap = -5\n", 2, "bad value for max_heap: '-5'");
    expect_one_error("[defaults]\ntimeout_ms = 5K\n", 2, "bad value for timeout_ms: '5K'");
    expect_one_error("[defaults]\ncpu_ms = Infinity\n", 2, "bad value for cpu_ms");
    expect_one_error("[defaults]\npriority = urgent\n", 2, "bad value for priority: 'urgent'");
    expect_one_error("[daemon]\nlog_level = verbose\n", 2, "bad value for log_level: 'verbose'");
}

/* Every number's range is what the daemon can serve: each bound is
 * accepted and one past it is an error naming the key, the range and the
 * line (max_parallel_calls = 4294967295 once checked OK and then made every
 * execute "out of memory"). */
static void test_ranges(void **state)
{
    static const struct {
        const char *section, *key, *ok, *bad, *why;
    } cases[] = {
        {"daemon", "max_workers", "4096", "4097", "from 1 to 4096"},
        {"daemon", "pool_size", "0", "4097", "from 0 to 4096"},
        {"daemon", "max_queue", "65536", "65537", "from 0 to 65536"},
        {"daemon", "max_connections", "1048576", "1048577", "from 1 to 1048576"},
        {"daemon", "max_message_bytes", "128", "127", "from 128 to 66060288"},
        {"daemon", "max_message_bytes", "63M", "66060289", "from 128 to 66060288"},
        {"daemon", "max_code_bytes", "63M", "64M", "from 1 to 66060288"},
        {"daemon", "shutdown_grace_ms", "86400000", "86400001", "from 0 to 86400000"},
        {"daemon", "max_parallel_calls", "1024", "4294967295", "from 1 to 1024"},
        {"daemon", "max_parallel_calls", "1", "0", "from 1 to 1024"},
        {"daemon", "max_sessions", "4096", "4097", "from 0 to 4096"},
        {"daemon", "max_sessions_per_connection", "4096", "0", "from 1 to 4096"},
        {"daemon", "session_idle_timeout_ms", "86400000", "4294967295", "from 1 to 86400000"},
        {"daemon", "write_idle_timeout_ms", "1000", "999", "from 1000 to 86400000"},
        {"daemon", "write_idle_timeout_ms", "86400000", "86400001", "from 1000 to 86400000"},
        {"daemon", "tool_spin_us", "10000", "10001", "from 0 to 10000"},
        {"daemon", "shards", "64", "65", "from 1 to 64"},
        {"daemon", "shards", "1", "0", "from 1 to 64"},
        {"ceilings", "max_output_bytes", "1G", "1073741825", "from 0 to 1073741824"},
        {"ceilings", "max_bindings_bytes", "1G", "9223372036854775807", "from 0 to 1073741824"},
    };
    char text[256], want[256];
    struct config c;
    struct errs e;

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *extra = strcmp(cases[i].key, "pool_size") == 0 ? "max_workers = 4096\n" : "";

        snprintf(text, sizeof text, "[%s]\n%s%s = %s\n", cases[i].section, extra, cases[i].key,
                 cases[i].ok);
        config_defaults(&c);
        if (load_text(&c, text, &e) != 0)
            fail_msg("%s refused: %s", text, e.msg[0]);
        config_free(&c);
        snprintf(text, sizeof text, "\n[%s]\n%s%s = %s\n", cases[i].section, extra,
                 cases[i].key, cases[i].bad);
        snprintf(want, sizeof want, "bad value for %s: '%s' (out of range: %s)", cases[i].key,
                 cases[i].bad, cases[i].why);
        expect_one_error(text, *extra ? 4 : 3, want);
    }
    /* the limits that have no bound but their type's keep it */
    config_defaults(&c);
    assert_int_equal(load_text(&c, "[ceilings]\ntimeout_ms = 9223372036854775807\n"
                                   "max_heap = 9223372036854775807\n"
                                   "max_reductions = 9223372036854775807\n"
                                   "cpu_ms = 9223372036854775807\n"
                                   "max_tool_calls = 9223372036854775807\n"
                                   "[defaults]\nmax_tool_calls = 5\nmax_reductions = 5\n"
                                   "cpu_ms = 5\n", &e), 0);
    config_free(&c);
}

static void test_infinity_where_not_allowed(void **state)
{
    (void)state;
    expect_one_error("[defaults]\nmax_output_bytes = infinity\n", 2,
                     "bad value for max_output_bytes: 'infinity'");
    expect_one_error("[ceilings]\nmax_bindings_bytes = infinity\n", 2,
                     "bad value for max_bindings_bytes: 'infinity'");
    expect_one_error("[daemon]\nmax_message_bytes = infinity\n", 2,
                     "bad value for max_message_bytes");
    expect_one_error("[daemon]\nmax_code_bytes = infinity\n", 2, "bad value for max_code_bytes");
    expect_one_error("[daemon]\nmax_workers = infinity\n", 2, "bad value for max_workers");
    expect_one_error("[daemon]\nshutdown_grace_ms = infinity\n", 2,
                     "bad value for shutdown_grace_ms");
}

static void test_daemon_value_errors(void **state)
{
    char text[256];

    (void)state;
    expect_one_error("[daemon]\nsocket_mode = 0680\n", 2, "bad value for socket_mode: '0680'");
    expect_one_error("[daemon]\nsocket_mode = 0x1ff\n", 2, "bad value for socket_mode");
    expect_one_error("[daemon]\nsocket_mode = 01777\n", 2, "at most 0777");
    expect_one_error("[daemon]\nsocket_mode =\n", 2, "bad value for socket_mode");
    expect_one_error("[daemon]\nsocket =\n", 2, "bad value for socket");
    snprintf(text, sizeof text, "[daemon]\nsocket = /%0120d\n", 0);
    expect_one_error(text, 2, "too long for a Unix socket");
    expect_one_error("[daemon]\nsocket_group = no-such-group-x\n", 2,
                     "unknown group 'no-such-group-x'");
    expect_one_error("[daemon]\nallow_uids = 0 no-such-user-x 5\n", 2,
                     "bad value for allow_uids: '0 no-such-user-x 5' (unknown user 'no-such-user-x')");
    expect_one_error("[daemon]\nallow_gids = no-such-group-x\n", 2,
                     "unknown group 'no-such-group-x'");
    expect_one_error("[daemon]\nallow_uids = 4294967295\n", 2, "out of range");
    expect_one_error("[daemon]\nallow_uids = -1\n", 2, "unknown user '-1'");
    expect_one_error("[worker]\nuser = no-such-user-x\n", 2, "unknown user 'no-such-user-x'");
    expect_one_error("[worker]\ngroup = no-such-group-x\n", 2, "unknown group");
    /* The daemon resolves worker ids by name only: numbers are refused. */
    expect_one_error("[worker]\nuser = 0\n", 2, "bad value for user: '0' (unknown user '0'");
    expect_one_error("[worker]\ngroup = 65534\n", 2, "unknown group '65534'");
    expect_one_error("[worker]\nuser =\n", 2, "bad value for user: '' (empty");
    expect_one_error("[worker]\ngroup =\n", 2, "bad value for group");
    expect_one_error("[worker]\nchroot = var/empty\n", 2, "absolute path");
}

/* tool_spin_us is CPU a worker may spend per tool call: 0..CHAN_SPIN_US_MAX. */
static void test_tool_spin_us(void **state)
{
    struct config c;
    struct errs e;

    (void)state;
    config_defaults(&c);
    assert_int_equal(load_text(&c, "[daemon]\ntool_spin_us = 0\n", &e), 0);
    assert_int_equal(c.tool_spin_us, 0);
    assert_int_equal(load_text(&c, "[daemon]\ntool_spin_us = 10000\n", &e), 0);
    assert_int_equal(c.tool_spin_us, 10000);
    assert_int_equal(load_text(&c, "[daemon]\n", &e), 0);
    assert_int_equal(c.tool_spin_us, 200);         /* a reload starts from the default */
    config_free(&c);
    expect_one_error("[daemon]\ntool_spin_us = 10001\n", 2,
                     "bad value for tool_spin_us: '10001' (out of range: from 0 to 10000)");
    expect_one_error("[daemon]\ntool_spin_us = 4294967295\n", 2, "tool_spin_us");
    expect_one_error("[daemon]\ntool_spin_us = fast\n", 2, "bad value for tool_spin_us: 'fast'");
    expect_one_error("[daemon]\ntool_spin_us = -1\n", 2, "bad value for tool_spin_us: '-1'");
    expect_one_error("[daemon]\ntool_spin_us = 1K\n", 2, "bad value for tool_spin_us: '1K'");
    expect_one_error("[daemon]\ntool_spin_us =\n", 2, "bad value for tool_spin_us");
}

static void test_cross_key_errors(void **state)
{
    (void)state;
    expect_one_error("[daemon]\nmax_workers = 2\npool_size = 3\n", 3,
                     "pool_size 3 is above max_workers 2");
    expect_one_error("[daemon]\npool_size = 17\n", 2, "pool_size 17 is above max_workers 16");
    expect_one_error("[daemon]\nmax_message_bytes = 1K\nmax_input_bytes = 1025\n", 3,
                     "max_input_bytes 1025 is below max_message_bytes 1024 + 2");
    expect_one_error("[daemon]\nmax_input_bytes = 1M\n", 2,
                     "max_input_bytes 1048576 is below max_message_bytes 16777216 + 2");
    /* the built-in budget follows a raised max_message_bytes */
    {
        struct config c;
        struct errs e;

        config_defaults(&c);
        assert_int_equal(load_text(&c, "[daemon]\nmax_message_bytes = 63M\nmax_input_bytes = "
                                       "63M\n", &e), 1);
        assert_int_equal(load_text(&c, "[daemon]\nmax_message_bytes = 63M\n", &e), 0);
        assert_int_equal(c.max_input_bytes, ((size_t)1 << 30));
        assert_int_equal(load_text(&c, "[daemon]\nmax_message_bytes = 63M\nmax_input_bytes = "
                                       "32M\n", &e), 1);
        config_free(&c);
    }
    /* the answer backlog holds the largest answer: 1M + 16M + 12 x 16M + 2 x 16M
     * (the output escaped six-fold, streamed and answered) */
    expect_one_error("[daemon]\nmax_backlog_bytes = 200M\n", 2,
                     "max_backlog_bytes 209715200 is below the largest answer the limits "
                     "allow, 252706816");
    {
        struct config c;
        struct errs e;

        config_defaults(&c);
        assert_int_equal(load_text(&c, "[daemon]\nmax_backlog_bytes = 241M\n", &e), 0);
        assert_int_equal(c.max_backlog_bytes, (size_t)241 << 20);
        config_free(&c);
        config_defaults(&c);
        assert_int_equal(load_text(&c, "[ceilings]\nmax_output_bytes = 1G\n", &e), 0);
        assert_int_equal(c.max_backlog_bytes, ((size_t)12 << 30) + ((size_t)49 << 20));
        config_free(&c);
    }
    expect_one_error("[defaults]\nmax_heap = 2G\n", 2,
                     "[defaults] max_heap 2147483648 is above [ceilings] max_heap 1073741824");
    /* A built-in default above a lowered ceiling: the ceiling's line. */
    expect_one_error("\n[ceilings]\n\ntimeout_ms = 1000\n", 4,
                     "[defaults] timeout_ms 60000 is above [ceilings] timeout_ms 1000");
    expect_one_error("[ceilings]\nmax_reductions = 5\n", 2,
                     "[defaults] max_reductions infinity is above [ceilings] max_reductions 5");
    expect_one_error("[defaults]\ntimeout_ms = infinity\n", 2, "timeout_ms infinity is above");
    expect_one_error("[ceilings]\npriority = normal\n[defaults]\npriority = high\n", 4,
                     "[defaults] priority high is above [ceilings] priority normal");
    /* A refused value is not compared again. */
    expect_one_error("[defaults]\nmax_heap = x\n[ceilings]\nmax_heap = 1\n", 2, "bad value");
}

static void test_every_error_is_reported(void **state)
{
    struct config c;
    struct errs e;

    (void)state;
    config_defaults(&c);
    assert_int_equal(load_text(&c,
                               "[daemon]\n"           /* 1 */
                               "max_workers = x\n"    /* 2 */
                               "nope = 1\n"           /* 3 */
                               "[worker]\n"           /* 4 */
                               "chroot = rel\n"       /* 5 */
                               "[defaults]\n"         /* 6 */
                               "cpu_ms = -1\n"        /* 7 */
                               "max_heap = 2G\n"      /* 8 */
                               "garbage\n"            /* 9 */
                               "[x]\n"                /* 10 */
                               "y = 1\n",             /* 11 */
                               &e),
                     7);
    expect_err(&e, 0, 2, "max_workers");
    expect_err(&e, 1, 3, "unknown key 'nope'");
    expect_err(&e, 2, 5, "chroot");
    expect_err(&e, 3, 7, "cpu_ms");
    expect_err(&e, 4, 9, "expected 'key = value'");
    expect_err(&e, 5, 10, "unknown section [x]");
    expect_err(&e, 6, 8, "max_heap 2147483648 is above");
    config_free(&c);
}

/* ------------------------------------------------------------------ */
/* limits_resolve                                                       */

struct resolve_fixture {
    struct config c;
};

static int setup_config(void **state)
{
    struct resolve_fixture *f = calloc(1, sizeof *f);

    if (!f)
        return -1;
    config_defaults(&f->c);
    *state = f;
    return 0;
}

static int teardown_config(void **state)
{
    struct resolve_fixture *f = *state;

    config_free(&f->c);
    free(f);
    return 0;
}

/* Resolves JSON text against c; returns the code, message in err. */
static int resolve(const struct config *c, const char *json, struct limits *out, char *err,
                   size_t errlen)
{
    json_error_t je;
    json_t *params = json_loads(json, 0, &je);
    int rc;

    if (!params)
        fail_msg("bad test JSON %s: %s", json, je.text);
    err[0] = '\0';
    rc = limits_resolve(&c->defaults, &c->ceilings, params, out, err, errlen);
    json_decref(params);
    return rc;
}

static void expect_resolve_error(const struct config *c, const char *json, int code,
                                 const char *msg)
{
    struct limits out, before;
    char err[256];
    int rc;

    memset(&out, 0xAB, sizeof out);
    before = out;
    rc = resolve(c, json, &out, err, sizeof err);
    if (rc != code || strcmp(err, msg) != 0)
        fail_msg("%s: want %d \"%s\", got %d \"%s\"", json, code, msg, rc, err);
    assert_memory_equal(&out, &before, sizeof out); /* untouched on error */
}

static void test_resolve_defaults(void **state)
{
    struct resolve_fixture *f = *state;
    struct limits out;
    char err[128];

    assert_int_equal(limits_resolve(&f->c.defaults, &f->c.ceilings, NULL, &out, err, sizeof err), 0);
    assert_limits_equal(&out, &f->c.defaults);
    memset(&out, 0, sizeof out);
    assert_int_equal(resolve(&f->c, "{\"code\": \"return 1\", \"limits\": {}}", &out, err,
                             sizeof err),
                     0);
    assert_limits_equal(&out, &f->c.defaults);
}

static void test_resolve_every_key(void **state)
{
    struct resolve_fixture *f = *state;
    struct limits out;
    char err[128];

    assert_int_equal(resolve(&f->c,
                             "{\"timeout_ms\": 600000, \"limits\": {\"max_heap\": 1073741824,"
                             " \"max_reductions\": 123, \"cpu_ms\": 0, \"priority\": \"high\","
                             " \"max_output_bytes\": 0, \"max_bindings_bytes\": 16777216}}",
                             &out, err, sizeof err),
                     0);
    assert_limits_equal(&out, &(struct limits){600000, 1073741824, 123, 0, PRIO_HIGH, 0,
                                               16777216, LIMIT_INF});
    assert_int_equal(resolve(&f->c,
                             "{\"timeout_ms\": 0, \"limits\": {\"max_reductions\": \"infinity\","
                             " \"cpu_ms\": \"infinity\", \"priority\": \"normal\"}}",
                             &out, err, sizeof err),
                     0);
    assert_limits_equal(&out, &(struct limits){0, 256000000, LIMIT_INF, LIMIT_INF, PRIO_NORMAL,
                                               1048576, 10000000, LIMIT_INF});
    /* With infinite ceilings, infinity is accepted for timeout_ms and max_heap. */
    f->c.ceilings.timeout_ms = LIMIT_INF;
    f->c.ceilings.max_heap = LIMIT_INF;
    assert_int_equal(resolve(&f->c,
                             "{\"timeout_ms\": \"infinity\", \"limits\": {\"max_heap\":"
                             " \"infinity\", \"priority\": \"low\"}}",
                             &out, err, sizeof err),
                     0);
    assert_true(out.timeout_ms == LIMIT_INF);
    assert_true(out.max_heap == LIMIT_INF);
    assert_int_equal(out.priority, PRIO_LOW);
}

static void test_resolve_type_errors(void **state)
{
    struct resolve_fixture *f = *state;
    const struct config *c = &f->c;

    expect_resolve_error(c, "[]", EINVAL, "params must be an object");
    expect_resolve_error(c, "{\"timeout_ms\": \"60s\"}", EINVAL,
                         "timeout_ms must be a non-negative integer or \"infinity\"");
    expect_resolve_error(c, "{\"timeout_ms\": -1}", EINVAL,
                         "timeout_ms must be a non-negative integer or \"infinity\"");
    expect_resolve_error(c, "{\"timeout_ms\": 1.0}", EINVAL,
                         "timeout_ms must be a non-negative integer or \"infinity\"");
    expect_resolve_error(c, "{\"timeout_ms\": null}", EINVAL,
                         "timeout_ms must be a non-negative integer or \"infinity\"");
    expect_resolve_error(c, "{\"limits\": [1]}", EINVAL, "limits must be an object");
    expect_resolve_error(c, "{\"limits\": {\"max_heap\": true}}", EINVAL,
                         "limits.max_heap must be a non-negative integer or \"infinity\"");
    expect_resolve_error(c, "{\"limits\": {\"max_heap\": 0}}", EINVAL,
                         "limits.max_heap must not be 0 (ambiguous; use \"infinity\" for no limit)");
    expect_resolve_error(c, "{\"limits\": {\"max_reductions\": -3}}", EINVAL,
                         "limits.max_reductions must be a non-negative integer or \"infinity\"");
    expect_resolve_error(c, "{\"limits\": {\"cpu_ms\": \"inf\"}}", EINVAL,
                         "limits.cpu_ms must be a non-negative integer or \"infinity\"");
    expect_resolve_error(c, "{\"limits\": {\"max_output_bytes\": \"infinity\"}}", EINVAL,
                         "limits.max_output_bytes must be a non-negative integer");
    expect_resolve_error(c, "{\"limits\": {\"max_bindings_bytes\": 1.5}}", EINVAL,
                         "limits.max_bindings_bytes must be a non-negative integer");
    expect_resolve_error(c, "{\"limits\": {\"priority\": \"urgent\"}}", EINVAL,
                         "limits.priority must be \"low\", \"normal\" or \"high\"");
    expect_resolve_error(c, "{\"limits\": {\"priority\": 2}}", EINVAL,
                         "limits.priority must be \"low\", \"normal\" or \"high\"");
    expect_resolve_error(c, "{\"limits\": {\"max_heap\": 5, \"stack\": 1}}", EINVAL,
                         "unknown key limits.stack");
    expect_resolve_error(c, "{\"limits\": {\"timeout_ms\": 5}}", EINVAL,
                         "unknown key limits.timeout_ms (timeout_ms belongs in params)");
}

static void test_resolve_range_errors(void **state)
{
    struct resolve_fixture *f = *state;
    struct config *c = &f->c;

    expect_resolve_error(c, "{\"timeout_ms\": 600001}", ERANGE,
                         "timeout_ms 600001 is above the ceiling 600000");
    expect_resolve_error(c, "{\"timeout_ms\": \"infinity\"}", ERANGE,
                         "timeout_ms \"infinity\" is above the ceiling 600000");
    expect_resolve_error(c, "{\"limits\": {\"max_heap\": 5000000000}}", ERANGE,
                         "limits.max_heap 5000000000 is above the ceiling 1073741824");
    expect_resolve_error(c, "{\"limits\": {\"max_heap\": \"infinity\"}}", ERANGE,
                         "limits.max_heap \"infinity\" is above the ceiling 1073741824");
    expect_resolve_error(c, "{\"limits\": {\"max_output_bytes\": 16777217}}", ERANGE,
                         "limits.max_output_bytes 16777217 is above the ceiling 16777216");
    expect_resolve_error(c, "{\"limits\": {\"max_bindings_bytes\": 9223372036854775807}}", ERANGE,
                         "limits.max_bindings_bytes 9223372036854775807 is above the ceiling "
                         "16777216");
    c->ceilings.max_reductions = 1000;
    c->ceilings.cpu_ms = 50;
    c->ceilings.priority = PRIO_NORMAL;
    expect_resolve_error(c, "{\"limits\": {\"max_reductions\": 1001}}", ERANGE,
                         "limits.max_reductions 1001 is above the ceiling 1000");
    expect_resolve_error(c, "{\"limits\": {\"max_reductions\": \"infinity\"}}", ERANGE,
                         "limits.max_reductions \"infinity\" is above the ceiling 1000");
    expect_resolve_error(c, "{\"limits\": {\"cpu_ms\": 51}}", ERANGE,
                         "limits.cpu_ms 51 is above the ceiling 50");
    expect_resolve_error(c, "{\"limits\": {\"priority\": \"high\"}}", ERANGE,
                         "limits.priority \"high\" is above the ceiling \"normal\"");
    /* A small errbuf is cut, never overrun; NULL is allowed. */
    struct limits out;
    char small[8];
    json_t *p = json_pack("{s:{s:I}}", "limits", "cpu_ms", (json_int_t)51);
    assert_int_equal(limits_resolve(&c->defaults, &c->ceilings, p, &out, small, sizeof small), ERANGE);
    assert_string_equal(small, "limits.");
    assert_int_equal(limits_resolve(&c->defaults, &c->ceilings, p, &out, NULL, 0), ERANGE);
    json_decref(p);
}

/* ------------------------------------------------------------------ */
/* limits_to_json, priorities                                           */

static void test_limits_to_json(void **state)
{
    struct config c;
    json_t *got, *want;

    (void)state;
    config_defaults(&c);
    got = limits_to_json(&c.defaults);
    want = json_pack("{s:I, s:I, s:s, s:s, s:s, s:I, s:I, s:s}", "timeout_ms", (json_int_t)60000,
                     "max_heap", (json_int_t)256000000, "max_reductions", "infinity", "cpu_ms",
                     "infinity", "priority", "low", "max_output_bytes", (json_int_t)1048576,
                     "max_bindings_bytes", (json_int_t)10000000, "max_tool_calls", "infinity");
    assert_non_null(got);
    assert_true(json_equal(got, want));
    json_decref(got);
    json_decref(want);

    got = limits_to_json(&c.ceilings);
    assert_non_null(got);
    assert_string_equal(json_string_value(json_object_get(got, "priority")), "high");
    assert_int_equal(json_integer_value(json_object_get(got, "max_heap")), 1073741824);
    assert_int_equal(json_object_size(got), 8);
    json_decref(got);

    c.defaults.max_heap = (uint64_t)INT64_MAX + 1; /* not a JSON integer */
    assert_null(limits_to_json(&c.defaults));
    config_free(&c);
}

static void test_priorities(void **state)
{
    (void)state;
    assert_string_equal(priority_name(PRIO_LOW), "low");
    assert_string_equal(priority_name(PRIO_NORMAL), "normal");
    assert_string_equal(priority_name(PRIO_HIGH), "high");
    assert_string_equal(priority_name((enum priority)7), "unknown");
    assert_int_equal(priority_nice(PRIO_LOW, 0), 10);
    assert_int_equal(priority_nice(PRIO_NORMAL, 0), 5);
    assert_int_equal(priority_nice(PRIO_HIGH, 0), 0);
    assert_int_equal(priority_nice((enum priority)7, 0), 10);
    /* relative to the daemon's own nice value, at most 19 */
    assert_int_equal(priority_nice(PRIO_HIGH, 12), 12);
    assert_int_equal(priority_nice(PRIO_NORMAL, 12), 17);
    assert_int_equal(priority_nice(PRIO_LOW, 12), 19);
    assert_int_equal(priority_nice(PRIO_HIGH, 19), 19);
    /* a daemon above normal does not raise its workers */
    assert_int_equal(priority_nice(PRIO_HIGH, -5), 0);
    assert_int_equal(priority_nice(PRIO_LOW, -20), 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_defaults),
        cmocka_unit_test(test_sample_file_equals_defaults),
        cmocka_unit_test(test_every_key),
        cmocka_unit_test(test_value_forms),
        cmocka_unit_test(test_log_levels_and_priorities),
        cmocka_unit_test(test_builtin_pool_size_is_clamped),
        cmocka_unit_test(test_reload_starts_from_defaults),
        cmocka_unit_test(test_failed_load_keeps_config),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_structure_errors),
        cmocka_unit_test(test_long_and_nul_lines),
        cmocka_unit_test(test_number_errors),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_infinity_where_not_allowed),
        cmocka_unit_test(test_daemon_value_errors),
        cmocka_unit_test(test_cross_key_errors),
        cmocka_unit_test(test_tool_spin_us),
        cmocka_unit_test(test_every_error_is_reported),
        cmocka_unit_test_setup_teardown(test_resolve_defaults, setup_config, teardown_config),
        cmocka_unit_test_setup_teardown(test_resolve_every_key, setup_config, teardown_config),
        cmocka_unit_test_setup_teardown(test_resolve_type_errors, setup_config, teardown_config),
        cmocka_unit_test_setup_teardown(test_resolve_range_errors, setup_config,
                                        teardown_config),
        cmocka_unit_test(test_limits_to_json),
        cmocka_unit_test(test_priorities),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
