/* Runs in: supervisor, zygote */
/*
 * main.c - sandboxd: command line, configuration, signals, and the loop.
 *
 *   sandboxd [-c CONFIG] [-s SOCKET_PATH] [--check-config] [--version] [--help]
 *
 * The process stays in the foreground and logs to stderr.  Before any
 * client I/O it starts the zygote (the same binary run as `--zygote`), which
 * forks every worker.  Signals are loop events (ev_signal): SIGCHLD reaps,
 * SIGHUP reloads the config file, SIGTERM/SIGINT stop gracefully.
 *
 * A daemon started from a terminal (make run) stops when that terminal goes
 * away: a SIGHUP that finds the controlling terminal gone is a hangup, not a
 * reload request (see terminal_gone).  A service has no controlling terminal
 * and SIGHUP always reloads.  SIGINT and SIGHUP ignored at start (nohup)
 * stay ignored.  The zygote and the workers are in a session of
 * their own and never get the terminal's signals (daemon/spawn.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/conn.h"
#include "daemon/exec.h"
#include "common/log.h"
#include "daemon/notify.h"
#include "daemon/sched.h"
#include "daemon/server.h"
#include "daemon/sup.h"
#include "daemon/wproc.h"
#include "daemon/spawn.h"
#include "proto/mutant.h"
#include "worker/zygote.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sandboxd [-c CONFIG] [-s SOCKET_PATH] [--check-config] [--version] [--help]\n"
            "\n"
            "Run untrusted Lua 5.3 for agent frameworks over JSON-RPC 2.0 on a Unix socket.\n"
            "\n"
            "  -c, --config FILE     read FILE (default: built-in defaults, see sandboxd.conf)\n"
            "  -s, --socket PATH     listen on PATH (overrides the config's socket)\n"
            "      --check-config    validate the configuration, print \"configuration OK\", exit\n"
            "      --version         print the version and exit\n"
            "  -h, --help            this text\n"
            "\n"
            "Signals: SIGTERM/SIGINT stop gracefully, SIGHUP reloads CONFIG.\n");
}

static void print_config_error(void *ctx, const char *file, int line, const char *msg)
{
    (void)ctx;
    if (line > 0)
        fprintf(stderr, "%s:%d: %s\n", file, line, msg);
    else
        fprintf(stderr, "%s: %s\n", file, msg);
}

static void log_config_error(void *ctx, const char *file, int line, const char *msg)
{
    (void)ctx;
    log_err("%s:%d: %s", file, line, msg);
}

/* ------------------------------------------------------------------ */
/* signals                                                             */

static void sigchld_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)loop; (void)revents;
    sched_reap(w->data);
}

static void reload(struct sup *s)
{
    struct config next;

    if (!s->config_path) {
        log_notice("SIGHUP: no config file (built-in defaults); nothing to reload");
        return;
    }
    notify_reloading();         /* RELOADING=1 + MONOTONIC_USEC */
    config_defaults(&next);
    if (config_load(&next, s->config_path, log_config_error, NULL) != 0) {
        log_err("SIGHUP: %s has errors; keeping the running configuration", s->config_path);
        config_free(&next);
        notify_send("READY=1");
        return;
    }
    /* The socket and worker identity are fixed at start; the rest applies to
     * new requests.  Running executions keep the limits they started with. */
    config_free(&s->cfg);
    s->cfg = next;
    log_set_level(s->cfg.log_level);
    log_notice("SIGHUP: configuration reloaded from %s", s->config_path);
    notify_send("READY=1");
    sched_pump(s);
}

/* Whether this process has lost the controlling terminal it had: the
 * kernel detaches a session from its terminal on hangup (the window closed,
 * the ssh connection dropped) before it sends SIGHUP, and /dev/tty then
 * opens for no one (ENXIO).  had_tty is decided once, at start. */
static int had_tty;

static int has_tty(void)
{
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);

    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

static int terminal_gone(void)
{
    return had_tty && !has_tty();
}

static void stop_cb(struct ev_loop *loop, ev_signal *w, int revents);

static void sighup_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
    struct sup *s = w->data;

    if (terminal_gone()) {
        log_notice("SIGHUP: the controlling terminal is gone; stopping");
        stop_cb(loop, &s->sig_term, revents);
        return;
    }
    reload(s);
}

static int open_execs(struct sup *s)
{
    return list_empty(&s->workers) && s->queued == 0 && s->n_starting == 0 ? 0 : 1;
}

/* Answer everything still open with `cancelled` and kill every worker. */
static void abort_all(struct sup *s, const char *why)
{
    struct list_head *cp, *ct, *ep, *et, *wp, *wt;

    list_for_each_safe(cp, ct, &s->conns) {
        struct conn *c = list_entry(cp, struct conn, node);
        list_for_each_safe(ep, et, &c->execs)
            exec_abort(list_entry(ep, struct exec, conn_node), why);
    }
    list_for_each_safe(wp, wt, &s->workers)
        wproc_kill(list_entry(wp, struct wproc, node));
}

static void grace_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct sup *s = t->data;
    (void)revents;

    if (ev_now(loop) - s->grace_start >= (double)s->cfg.shutdown_grace_ms / 1e3)
        abort_all(s, "the daemon is shutting down");
    if (!open_execs(s)) {
        ev_break(loop, EVBREAK_ALL);
        return;
    }
    ev_timer_set(t, 0.02, 0.);
    ev_timer_start(loop, t);
}

static void stop_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
    struct sup *s = w->data;
    struct list_head *cp, *ct, *ep, *et;
    (void)revents;

    if (s->stopping) {
        log_notice("second stop signal: ending now");
        abort_all(s, "the daemon is shutting down");
        ev_break(loop, EVBREAK_ALL);
        return;
    }
    s->stopping = 1;
    notify_send("STOPPING=1");
    log_notice("stopping: no new connections; %u ms for running executions",
               s->cfg.shutdown_grace_ms);
    server_close(s);
    /* work that has not started (queued, or waiting for its worker) will
     * not get one any more: answered now, not after the grace */
    list_for_each_safe(cp, ct, &s->conns) {
        struct conn *c = list_entry(cp, struct conn, node);
        list_for_each_safe(ep, et, &c->execs) {
            struct exec *e = list_entry(ep, struct exec, conn_node);
            if (e->state == ST_QUEUED || e->state == ST_STARTING ||
                e->state == ST_IDLE)        /* idle: a session between chunks */
                exec_abort(e, "the daemon is shutting down");
        }
    }
    sched_pump(s);              /* with `stopping` set, this ends the idle pool */
    s->grace_start = ev_now(loop);
    ev_timer_init(&s->grace, grace_cb, 0., 0.);
    s->grace.data = s;
    grace_cb(loop, &s->grace, 0);
}

/* ------------------------------------------------------------------ */
/* start and stop                                                      */

/* Best effort: give each connection's answers a moment to leave. */
static void flush_connections(struct sup *s)
{
    struct list_head *cp, *ct;

    for (int round = 0; round < 50; round++) {
        int waiting = 0;
        ev_run(s->loop, EVRUN_NOWAIT);
        list_for_each_safe(cp, ct, &s->conns) {
            struct conn *c = list_entry(cp, struct conn, node);
            if (!outq_empty(&c->out))
                waiting = 1;
        }
        if (!waiting)
            break;
        usleep(2000);
    }
}

static void teardown(struct sup *s)
{
    struct list_head *cp, *ct;

    abort_all(s, "the daemon is shutting down");
    flush_connections(s);
    spawn_stop(s);
    while (!list_empty(&s->workers)) {          /* every worker is SIGKILLed */
        struct wproc *w = list_first(&s->workers, struct wproc, node);
        int status = 0;
        wproc_kill(w);
        if (waitpid(w->pid, &status, 0) < 0 && errno != EINTR)
            status = 0;
        wproc_exited(w, status, 0);
    }
    list_for_each_safe(cp, ct, &s->conns)
        conn_close(list_entry(cp, struct conn, node));
    server_close(s);
    free(s->socket_path);
    config_free(&s->cfg);
    ev_loop_destroy(s->loop);
}

/* The systemd watchdog (WatchdogSec=): WATCHDOG=1 every half interval
 * from the loop itself, so a stuck loop stops the pings, and only while
 * workers can be started (sched_supply_up), so systemd restarts a daemon
 * that answers ping but cannot run a chunk.  While they cannot, the health
 * is looked at again every WATCHDOG_RECHECK_S at most, so the first ping
 * after it heals is not a whole interval late. */
#define WATCHDOG_RECHECK_S 1.0

struct watchdog {
    ev_timer    timer;
    struct sup *s;
    double      interval;       /* s: half of WATCHDOG_USEC */
    int         withheld;       /* the last look found the daemon unable to serve */
};

static void watchdog_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct watchdog *wd = t->data;
    (void)revents;

    /* (the mutant pings whether or not workers can be started) */
    if (MUTANT(WATCHDOG_HEALTH) || sched_supply_up(wd->s)) {
        if (wd->withheld)
            log_notice("workers can be started again: WATCHDOG=1 resumes");
        notify_send("WATCHDOG=1");
        wd->withheld = 0;
        t->repeat = wd->interval;
    } else {
        if (!wd->withheld)
            log_err("workers cannot be started: WATCHDOG=1 withheld until they can (systemd "
                    "restarts the daemon after WatchdogSec without one)");
        wd->withheld = 1;
        t->repeat = wd->interval < WATCHDOG_RECHECK_S ? wd->interval : WATCHDOG_RECHECK_S;
    }
    ev_timer_again(loop, t);
}

/* Each client connection and each worker channel is a descriptor: take the
 * whole hard limit, not the usual soft 1024. */
static void raise_fd_limit(void)
{
    struct rlimit r;

    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &r) != 0)
            log_warn("could not raise RLIMIT_NOFILE: %s", strerror(errno));
    }
}

/* SIGINT or SIGHUP ignored when the daemon was started (nohup, a shell's
 * background job, scripts/run) stays ignored.  It must be asked before the
 * loop watches it: the loop blocks what it watches and reads it from a
 * signalfd, and a blocked signal is queued even when its action is to
 * ignore it. */
static int ignored_at_start(int sig)
{
    struct sigaction sa;

    return sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
}

static void signal_watch(struct sup *s, ev_signal *w, void (*cb)(struct ev_loop *, ev_signal *, int),
                         int sig)
{
    ev_signal_init(w, cb, sig);
    w->data = s;
    ev_signal_start(s->loop, w);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "config", required_argument, NULL, 'c' },
        { "socket", required_argument, NULL, 's' },
        { "check-config", no_argument, NULL, 'C' },
        { "version", no_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct sup sup = { 0 }, *s = &sup;
    struct watchdog watchdog;   /* lives as long as the loop runs */
    unsigned long long wd_usec;
    int ch, check_only = 0;

    log_init();
    if (argc > 1 && strcmp(argv[1], "--zygote") == 0)
        zygote_main(argc, argv);
    while ((ch = getopt_long(argc, argv, "c:s:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'c': s->config_path = optarg; break;
        case 's': s->socket_override = optarg; break;
        case 'C': check_only = 1; break;
        case 'V': printf("sandboxd %s (protocol %s)\n", SANDBOXD_VERSION, SANDBOXD_PROTOCOL_VERSION); return 0;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "sandboxd: unexpected argument '%s' (options only; the socket is -s PATH)\n\n",
                argv[optind]);
        usage(stderr);
        return 2;
    }
    config_defaults(&s->cfg);
    if (s->config_path && config_load(&s->cfg, s->config_path, print_config_error, NULL) != 0) {
        config_free(&s->cfg);
        return 1;
    }
    if (check_only) {
        printf("configuration OK\n");
        config_free(&s->cfg);
        return 0;
    }
    log_set_level(s->cfg.log_level);
    /* The zygote runs this very executable, even if the file on disk has
     * been replaced by an upgrade since we started. */
    s->self_exe = "/proc/self/exe";
    signal(SIGPIPE, SIG_IGN);
    had_tty = has_tty();
    raise_fd_limit();
    s->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_SIGNALFD);
    s->listen_fd = -1;
    list_init(&s->idle);
    list_init(&s->starting);
    list_init(&s->rr);
    list_init(&s->workers);
    list_init(&s->conns);
    list_init(&s->doomed);
    sched_init(s);
    spawn_init(s);
    /* SIGCHLD is watched before the zygote exists, so no exit is missed. */
    signal_watch(s, &s->sig_chld, sigchld_cb, SIGCHLD);
    signal_watch(s, &s->sig_term, stop_cb, SIGTERM);
    if (!ignored_at_start(SIGINT))
        signal_watch(s, &s->sig_int, stop_cb, SIGINT);
    if (!ignored_at_start(SIGHUP))
        signal_watch(s, &s->sig_hup, sighup_cb, SIGHUP);
    if (spawn_start(s) < 0 ||
        server_listen(s, s->socket_override ? s->socket_override : s->cfg.socket) < 0) {
        teardown(s);
        return 1;
    }
    log_notice("sandboxd %s listening on %s (max_workers %u, pool %u)", SANDBOXD_VERSION,
               s->socket_path, s->cfg.max_workers, s->cfg.pool_size);
    sched_pump(s);              /* fill the warm pool */
    notify_send("READY=1");
    if ((wd_usec = notify_watchdog_usec()) > 0) {       /* ping at half the interval */
        watchdog.s = s;
        watchdog.interval = (double)wd_usec / 2e6;
        watchdog.withheld = 0;
        ev_timer_init(&watchdog.timer, watchdog_cb, 0., watchdog.interval);
        watchdog.timer.data = &watchdog;
        ev_timer_again(s->loop, &watchdog.timer);
        notify_send("WATCHDOG=1");
        log_info("systemd watchdog: WATCHDOG=1 every %.3f s while workers can be started",
                 watchdog.interval);
    }
    ev_run(s->loop, 0);
    if (wd_usec > 0)
        ev_timer_stop(s->loop, &watchdog.timer);
    teardown(s);
    log_notice("stopped");
    return 0;
}
