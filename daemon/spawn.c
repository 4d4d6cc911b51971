/*
 * spawn.c - see spawn.h: the supervisor's handle on the zygote (start,
 * request, poll, restart).  The zygote process itself is worker/zygote.c;
 * the start-up probe of the worker layers, policy/probe.c.
 */
#include "daemon/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <malloc.h>

#include "common/log.h"
#include "daemon/metrics.h"
#include "daemon/sched.h"
#include "daemon/sup.h"
#include "policy/probe.h"
#include "proto/chan.h"
#include "proto/mutant.h"

extern char **environ;


/* ------------------------------------------------------------------ */
/* supervisor side                                                     */

static void zygote_watch_cb(struct ev_loop *loop, ev_timer *t, int revents);
static void zygote_poll(struct zygote *z);

static void zygote_io_cb(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop; (void)revents;
    zygote_poll(io->data);
}

/* Containment: the zygote's (and so every worker's) environment block.
 * Nothing of the daemon's environment - it may hold secrets - is passed on:
 * only LD_BIND_NOW and GLIBC_TUNABLES (both set by spawn_start) and, in
 * sanitizer builds, the sanitizer option variables. */
static char **zygote_env(void)
{
    static const char *const keep[] = { "LD_BIND_NOW", "GLIBC_TUNABLES",
#if SANDBOXD_SANITIZE
        "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
#endif
    };
    static char *env[sizeof keep / sizeof keep[0] + 1];
    static char buf[4096];
    size_t n = 0, used = 0;

    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        const char *v = getenv(keep[i]);
        int len;
        if (!v)
            continue;
        len = snprintf(buf + used, sizeof buf - used, "%s=%s", keep[i], v);
        if (len < 0 || (size_t)len >= sizeof buf - used)
            break;
        env[n++] = buf + used;
        used += (size_t)len + 1;
    }
    env[n] = NULL;
    return env;
}

void spawn_init(struct sup *s)
{
    cpu_set_t set;
    unsigned want = s->cfg.shards ? s->cfg.shards : 1, n = 0;

    if (sched_getaffinity(0, sizeof set, &set) != 0)
        want = 1;
    for (int cpu = 0; cpu < CPU_SETSIZE && want > 1 && n < want && n < SHARDS_MAX; cpu++)
        if (CPU_ISSET(cpu, &set))
            s->zyg[n++].cpu = cpu;
    if (n < 2)                  /* one shard (or one CPU): nothing is pinned */
        n = 1, s->zyg[0].cpu = -1;
    s->n_shards = n;
    for (unsigned i = 0; i < n; i++) {
        s->zyg[i].sup = s;
        s->zyg[i].shard = i;
        s->zyg[i].fd = -1;
        ev_timer_init(&s->zyg[i].watch, zygote_watch_cb, 0., 1.);
        s->zyg[i].watch.data = &s->zyg[i];
    }
}

static int zygote_start(struct zygote *z)
{
    struct sup *s = z->sup;
    int sv[2];
    pid_t pid;
    char fdbuf[16], ppid[16];

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        log_err("zygote: socketpair: %s", strerror(errno));
        return -1;
    }
    snprintf(fdbuf, sizeof fdbuf, "%d", sv[1]);
    snprintf(ppid, sizeof ppid, "%d", (int)getpid());
    pid = fork();
    if (pid < 0) {
        log_err("zygote: fork: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    if (pid == 0) {
        sigset_t none;
        char *argv[] = { (char *)"sandboxd", (char *)"--zygote", fdbuf, ppid,
                         s->layers.uid, s->layers.gid, s->layers.chroot, s->layers.ns, NULL };
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);   /* libev blocks what it watches */
        /* A session of its own, without a controlling terminal: the
         * terminal's SIGINT, SIGQUIT and SIGHUP (Ctrl-C, a closed window)
         * reach the supervisor only, which decides; the workers it forks
         * stay in this session. */
        if (!MUTANT(ZYGOTE_SESSION))
            setsid();
        /* A shard's zygote and every worker it forks stay on its CPU; if
         * the CPU cannot be had (a cpuset changed), the shard runs
         * unpinned rather than not at all. */
        if (z->cpu >= 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(z->cpu, &one);
            (void)sched_setaffinity(0, sizeof one, &one);
        }
        /* Performance: resolve every shared-library symbol once,
         * when the zygote is loaded; with lazy binding each fresh worker
         * resolved the PLT entries it used again (~20 us per worker). */
        setenv("LD_BIND_NOW", "1", 1);
        /* Performance: no per-thread cache of freed blocks in malloc
         * (tcache), in the zygote and so in every worker.  The zygote's
         * cache holds blocks scattered over its heap's pages, and a
         * worker's first requests took them: each a write to a page shared
         * with the zygote, so a copy-on-write fault, whose TLB flush is the
         * dearest part of a worker on a VM.  Without the cache, what the
         * zygote freed coalesces when it trims (worker/zygote.c) and a
         * worker's small requests are carved side by side from a few
         * blocks: a trivial execution's heap copy-on-write faults fell
         * from 17 to 7 (all of them from 24 to 14).  A value the daemon
         * was started with never reaches the zygote. */
        setenv("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0", 1);
        if (fcntl(sv[1], F_SETFD, 0) == 0)
            execve(s->self_exe, argv, zygote_env());
        _exit(127);
    }
    close(sv[1]);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    z->pid = pid;
    z->fd = sv[0];
    z->started = ev_time();
    ev_io_init(&z->io, zygote_io_cb, sv[0], EV_READ);
    z->io.data = z;
    ev_io_start(s->loop, &z->io);
    log_debug("zygote %d started (shard %u, CPU %d)", (int)pid, z->shard, z->cpu);
    return 0;
}

int spawn_start(struct sup *s)
{
    int rc = 0;

    /* containment: refuse rather than run workers as root */
    if (probe_layers(&s->cfg, &s->layers, log_msg) < 0)
        return -1;
    for (unsigned i = 0; i < s->n_shards; i++)
        if (s->zyg[i].pid <= 0 && zygote_start(&s->zyg[i]) < 0)
            rc = -1;
    return rc;
}

int spawn_running(const struct sup *s)
{
    for (unsigned i = 0; i < s->n_shards; i++)
        if (s->zyg[i].pid <= 0)
            return 0;
    return 1;
}

struct zygote *spawn_find(struct sup *s, pid_t pid)
{
    for (unsigned i = 0; i < s->n_shards; i++)
        if (s->zyg[i].pid > 0 && s->zyg[i].pid == pid)
            return &s->zyg[i];
    return NULL;
}

/* A zygote that leaves requests unanswered for ZYGOTE_STALL_S (stopped,
 * or stuck) is killed; its reap restarts it under the supply back-off. */
static void zygote_watch_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct zygote *z = t->data;
    (void)revents;

    if (z->pending == 0 || z->pid <= 0) {
        ev_timer_stop(loop, t);
        return;
    }
    if (ev_now(loop) - z->progress < ZYGOTE_STALL_S)
        return;
    log_err("zygote %d answered no spawn request for %.0f s; killing it", (int)z->pid,
            ev_now(loop) - z->progress);
    kill(z->pid, SIGKILL);
    ev_timer_stop(loop, t);
}

/* A descriptor for every hand-over in flight.  A hand-over carries the
 * supervisor's end of the new worker's channel, which recvmsg puts in a
 * new descriptor; with none free the kernel drops it (MSG_CTRUNC), and the
 * worker the zygote forked for it is lost.  Out of descriptors, every
 * request sent since the last hand-over that fit was lost so, in bursts.
 * So a request holds one descriptor (a duplicate of the zygote's socket)
 * from its send until its hand-over is read: zygote_poll closes one just
 * before each recvmsg, and takes it again if nothing came.  The loop is
 * single-threaded, so nothing else can take it in between.  Without a
 * descriptor to hold, no worker is asked for. */
static int hold_fd(struct zygote *z)
{
    int fd;

    if (MUTANT(SPAWN_HOLD))
        return 0;                       /* mutant: hand-overs land where they can */
    if (z->n_held == z->cap_held) {
        unsigned cap = z->cap_held ? 2 * z->cap_held : 16;
        int *p = realloc(z->held, cap * sizeof *p);
        if (!p) {
            errno = ENOMEM;
            return -1;
        }
        z->held = p;
        z->cap_held = cap;
    }
    if ((fd = fcntl(z->fd, F_DUPFD_CLOEXEC, 0)) < 0)
        return -1;
    z->held[z->n_held++] = fd;
    return 0;
}

/* Give up one held descriptor (if any): 1 if one was. */
static int release_fd(struct zygote *z)
{
    if (z->n_held == 0)
        return 0;
    close(z->held[--z->n_held]);
    return 1;
}

int spawn_request(struct zygote *z)
{
    struct sup *s = z->sup;
    char c = 'S';

    if (z->fd < 0) {
        errno = ESRCH;
        return -1;
    }
    if (hold_fd(z) < 0)
        return -1;
    if (send(z->fd, &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1) {
        int err = errno;
        release_fd(z);
        errno = err;
        return -1;
    }
    if (z->pending == 0)
        z->progress = ev_now(s->loop);
    z->pending++;
    if (!ev_is_active(&z->watch))
        ev_timer_again(s->loop, &z->watch);
    return 0;
}

static void zygote_poll(struct zygote *z)
{
    struct sup *s = z->sup;

    for (;;) {
        struct zyg_msg m;
        struct iovec iov = { &m, sizeof m };
        union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
                             .msg_control = u.buf, .msg_controllen = sizeof u.buf };
        struct cmsghdr *cm;
        int fd = -1, held;
        ssize_t n;

        if (z->fd < 0)
            return;
        held = release_fd(z);           /* where this hand-over lands */
        n = recvmsg(z->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n <= 0 && held) {
            int err = errno;
            (void)hold_fd(z);           /* nothing came: the place is kept */
            errno = err;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN)
                ev_io_stop(s->loop, &z->io);   /* dying; the reap follows */
            return;
        }
        z->progress = ev_now(s->loop);
        sup_count_down(&z->pending, "zygote pending");
        cm = CMSG_FIRSTHDR(&mh);
        if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
            cm->cmsg_len == CMSG_LEN(sizeof(int)))
            memcpy(&fd, CMSG_DATA(cm), sizeof fd);
        if (n != (ssize_t)sizeof m || m.err != 0 || m.pid <= 0 || fd < 0) {
            /* MSG_CTRUNC: the channel did not fit, the supervisor is out of
             * descriptors (the worker, its peer gone, exits; its reap is
             * an unknown pid); hold_fd makes that happen only where a
             * descriptor was taken from under a request */
            int err = n != (ssize_t)sizeof m ? EPROTO : m.err > 0 ? m.err :
                      (mh.msg_flags & MSG_CTRUNC) ? EMFILE : 0;
            if (fd >= 0)
                close(fd);
            sched_worker_arrived(s, z->shard, n == (ssize_t)sizeof m ? m.pid : 0, -1, err);
            continue;
        }
        fcntl(fd, F_SETFL, O_NONBLOCK);
        sched_worker_arrived(s, z->shard, m.pid, fd, 0);
    }
}

void spawn_poll(struct sup *s)
{
    for (unsigned i = 0; i < s->n_shards; i++)
        zygote_poll(&s->zyg[i]);
}

static void zygote_close(struct zygote *z)
{
    while (release_fd(z))
        ;
    if (z->fd >= 0) {
        ev_io_stop(z->sup->loop, &z->io);
        close(z->fd);
    }
    z->fd = -1;
}

void spawn_zygote_died(struct zygote *z, int status)
{
    struct sup *s = z->sup;

    zygote_poll(z);            /* hand-overs it sent before dying still count */
    zygote_close(z);
    /* children reaped before their hand-over was read: that hand-over will
     * never come now, and a reused pid must not match a stale entry; unless
     * another shard's zygote still owes hand-overs, which may be theirs */
    if (s->pending <= z->pending)
        memset(s->reaped_unknown, 0, sizeof s->reaped_unknown);
    ev_timer_stop(s->loop, &z->watch);
    z->pid = 0;
    /* its unanswered requests are no processes and no pending spawns now */
    s->procs = s->procs > z->pending ? s->procs - z->pending : 0;
    s->pending = s->pending > z->pending ? s->pending - z->pending : 0;
    z->pending = 0;
    if (s->stopping)
        return;
    if (WIFSIGNALED(status))
        sched_supply_failed(s, "the zygote died (signal %d, %s)", WTERMSIG(status),
                            strsignal(WTERMSIG(status)));
    else
        sched_supply_failed(s, "the zygote died (exit status %d)",
                            WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    metrics_zygote_restart();
    /* the first death in a row is restarted at once; later ones when the
     * back-off ends (the supply timer starts it) */
    if (s->supply_fails <= 1 && spawn_start(s) < 0)
        sched_supply_failed(s, "could not start the zygote");
}

void spawn_stop(struct sup *s)
{
    for (unsigned i = 0; i < s->n_shards; i++) {
        struct zygote *z = &s->zyg[i];
        zygote_close(z);
        free(z->held);
        z->held = NULL;
        z->cap_held = 0;
        if (z->pid > 0) {
            kill(z->pid, SIGKILL);
            waitpid(z->pid, NULL, 0);
        }
        z->pid = 0;
    }
}
