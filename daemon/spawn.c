/*
 * spawn.c - see spawn.h: the supervisor's handle on the zygote (start,
 * request, poll, restart) and the start-up probe of the worker layers.  The
 * zygote process itself is worker/zygote.c.
 */
#include "daemon/spawn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <malloc.h>

#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/sched.h"
#include "daemon/sup.h"
#include "policy/contain.h"
#include "policy/seccomp.h"
#include "proto/chan.h"

extern char **environ;


/* ------------------------------------------------------------------ */
/* supervisor side                                                     */

static void zygote_watch_cb(struct ev_loop *loop, ev_timer *t, int revents);

static void zygote_io_cb(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop; (void)revents;
    spawn_poll(io->data);
}

/* ---- worker identity and containment layers ----
 *
 * Decided once, at the first spawn_start (like the socket, the worker
 * identity is fixed at start; a SIGHUP does not change it), and reused for
 * every zygote restart.  As root:
 *  - [worker] user (and group) must resolve to non-root ids, else the daemon
 *    refuses to start: workers never run as root silently;
 *  - [worker] chroot, if set, is created when missing (root-owned, 0555) and
 *    must be a root-owned directory that is empty, not group/other-writable,
 *    reached through root-owned ancestors that others cannot rename (not
 *    writable by group/other, or sticky); else the daemon refuses to start;
 *  - a throwaway child runs the worker's own drop (contain_drop_privileges)
 *    once per namespace type to learn which ones this host permits, then all
 *    of them together, and checks that "/" is not writable afterwards; a
 *    failing drop refuses to start.  Workers get exactly the namespaces that
 *    passed (an unshare failure in a worker is then fatal to that worker).
 * The active layers are logged once. */

static const struct { int flag; const char *name; } ns_names[] = {
    { CLONE_NEWNET, "net" }, { CLONE_NEWIPC, "ipc" },
    { CLONE_NEWNS, "mnt" }, { CLONE_NEWUTS, "uts" },
};

#define PROBE_ROOT_WRITABLE 250     /* probe exit: "/" writable after the drop */
/* a probe child's exit status for a failure: errno, kept below the codes above */
#define PROBE_ERRNO() (errno > 0 && errno < PROBE_ROOT_WRITABLE ? errno : EPERM)

/* The verdict of a probe child: its exit status, or an errno-like value
 * when it could not be waited for or did not exit normally. */
static int probe_reap(pid_t pid)
{
    int status;

    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return errno;
    }
    if (!WIFEXITED(status))
        return EINTR;
    return WEXITSTATUS(status);
}

/* Run contain_drop_privileges() with these namespaces in a child; 0, or the
 * errno it failed with (PROBE_ROOT_WRITABLE: the drop "worked" but the root
 * is writable). */
static int probe_drop(uid_t uid, gid_t gid, const char *chroot_dir, int ns)
{
    struct contain_opts o = { .drop_privs = 1, .uid = uid, .gid = gid,
                              .chroot_dir = chroot_dir, .unshare_flags = ns };
    pid_t pid = fork();

    if (pid < 0)
        return errno;
    if (pid == 0) {
        if (contain_drop_privileges(&o) < 0)
            _exit(PROBE_ERRNO());
        _exit(access("/", W_OK) == 0 ? PROBE_ROOT_WRITABLE : 0);
    }
    return probe_reap(pid);
}

static const char *probe_error(int err)
{
    return err == PROBE_ROOT_WRITABLE ? "the chroot is writable by the worker user"
                                      : strerror(err);
}

/* Not writable by group/other, or sticky (others cannot rename entries). */
static int safe_dir_mode(const struct stat *st)
{
    return st->st_uid == 0 && S_ISDIR(st->st_mode) &&
           ((st->st_mode & (S_IWGRP | S_IWOTH)) == 0 || (st->st_mode & S_ISVTX));
}

/* Create (if missing) and check the empty chroot directory; the resolved
 * path goes into out.  0, or -1 after logging why. */
static int prepare_chroot(const char *path, char *out, size_t outlen)
{
    struct stat st;
    char real[PATH_MAX], up[PATH_MAX];
    DIR *d;
    struct dirent *de;
    int entries = 0;

    if (lstat(path, &st) < 0 && errno == ENOENT) {
        if (mkdir(path, 0555) < 0) {
            log_err("worker chroot '%s': cannot create it: %s", path, strerror(errno));
            return -1;
        }
        if (chown(path, 0, 0) < 0 || chmod(path, 0555) < 0) {
            log_err("worker chroot '%s': %s", path, strerror(errno));
            return -1;
        }
        log_notice("created the empty worker chroot %s (root, 0555)", path);
    }
    errno = 0;
    if (!realpath(path, real) || strlen(real) >= outlen) {
        log_err("worker chroot '%s': %s", path, strerror(errno ? errno : ENAMETOOLONG));
        return -1;
    }
    if (lstat(real, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
        (st.st_mode & (S_IWGRP | S_IWOTH))) {
        log_err("worker chroot '%s' must be a directory owned by root and not writable "
                "by group or others", real);
        return -1;
    }
    if (!(d = opendir(real))) {
        log_err("worker chroot '%s': %s", real, strerror(errno));
        return -1;
    }
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            entries++;
    closedir(d);
    if (entries) {
        log_err("worker chroot '%s' is not empty", real);
        return -1;
    }
    /* every ancestor: root-owned, and others cannot swap the path under us */
    snprintf(up, sizeof up, "%s", real);
    for (char *slash = strrchr(up, '/'); slash; slash = strrchr(up, '/')) {
        *slash = '\0';
        const char *dir = up[0] ? up : "/";
        if (lstat(dir, &st) < 0 || !safe_dir_mode(&st)) {
            log_err("worker chroot '%s': ancestor %s must be owned by root and not "
                    "writable by group or others (or sticky)", real, dir);
            return -1;
        }
        if (!up[0])
            break;
    }
    snprintf(out, outlen, "%s", real);
    return 0;
}

/* Without root: enter a user namespace and confine as a worker would, in a
 * throwaway child; 0, or the errno it failed with (PROBE_ROOT_WRITABLE:
 * the new root is writable or not empty). */
static int probe_userns(void)
{
    struct contain_opts o = { .userns = 1, .chroot_dir = CONTAIN_USERNS_ROOT };
    uid_t uid = getuid();
    gid_t gid = getgid();
    pid_t pid = fork();

    if (pid < 0)
        return errno;
    if (pid == 0) {
        DIR *d;
        struct dirent *de;
        int entries = 0;

        if (contain_enter_userns(uid, gid) < 0 || contain_userns_confine(&o) < 0)
            _exit(PROBE_ERRNO());
        if ((d = opendir("/")) != NULL) {
            while ((de = readdir(d)) != NULL)
                entries += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
            closedir(d);
        }
        _exit(access("/", W_OK) == 0 || entries != 0 ? PROBE_ROOT_WRITABLE : 0);
    }
    return probe_reap(pid);
}

/* Not root: workers keep the daemon's uid; a user namespace, where the host
 * permits one, still gives them an empty root and their own net, ipc, mount
 * and uts namespaces (docs/security.md 3.6). */
static void decide_userns(struct worker_layers *l)
{
    int err = probe_userns();

    if (err == 0) {
        snprintf(l->ns, sizeof l->ns, "%d", CLONE_NEWUSER | CONTAIN_NS_ALL);
        log_notice("containment: not root: workers run as uid %u in their own user namespace "
                   "(uid 0 there, no capabilities), chroot to an empty read-only tmpfs, "
                   "namespaces user+net+ipc+mnt+uts; also one fresh process per execution, "
                   "fds closed, rlimits, no_new_privs, non-dumpable, seccomp allowlist",
                   (unsigned)geteuid());
        return;
    }
    log_notice("containment: not root, so workers keep uid %u: no uid drop, chroot or "
               "namespaces (user namespaces not available here: %s); active: one fresh "
               "process per execution, fds closed, rlimits, no_new_privs, non-dumpable, "
               "seccomp allowlist", (unsigned)geteuid(),
               err == PROBE_ROOT_WRITABLE ? "the empty root was writable or not empty"
                                          : strerror(err));
}

/* Decide the worker identity and layers (once).  0, or -1: refuse to start. */
static int decide_layers(struct sup *s)
{
    struct worker_layers *l = &s->layers;
    const struct passwd *pw;
    const struct group *gr;
    uid_t uid;
    gid_t gid;
    int ns = 0, err;
    char names[64] = "";

    if (l->decided)
        return 0;
    if (geteuid() != 0) {
        decide_userns(l);
        l->decided = 1;
        return 0;
    }
    if (!s->cfg.worker_user || !*s->cfg.worker_user) {
        log_err("running as root with no [worker] user: refusing to run workers as root");
        return -1;
    }
    if (!(pw = getpwnam(s->cfg.worker_user))) {
        log_err("[worker] user '%s' does not exist: refusing to run workers as root",
                s->cfg.worker_user);
        return -1;
    }
    uid = pw->pw_uid;
    gid = pw->pw_gid;
    if (s->cfg.worker_group && *s->cfg.worker_group) {
        if (!(gr = getgrnam(s->cfg.worker_group))) {
            log_err("[worker] group '%s' does not exist: refusing to run workers as root",
                    s->cfg.worker_group);
            return -1;
        }
        gid = gr->gr_gid;
    }
    if (uid == 0 || gid == 0) {
        log_err("[worker] user/group resolve to uid %u gid %u: workers must not run as root "
                "or in group 0", (unsigned)uid, (unsigned)gid);
        return -1;
    }
    if (s->cfg.worker_chroot && *s->cfg.worker_chroot &&
        prepare_chroot(s->cfg.worker_chroot, l->chroot, sizeof l->chroot) < 0)
        return -1;
    if ((err = probe_drop(uid, gid, l->chroot[0] ? l->chroot : NULL, 0)) != 0) {
        log_err("workers cannot drop to uid %u gid %u%s%s: %s; refusing to start",
                (unsigned)uid, (unsigned)gid, l->chroot[0] ? " in chroot " : "",
                l->chroot, probe_error(err));
        return -1;
    }
    for (size_t i = 0; i < sizeof ns_names / sizeof ns_names[0]; i++) {
        err = probe_drop(uid, gid, l->chroot[0] ? l->chroot : NULL, ns_names[i].flag);
        if (err == 0) {
            ns |= ns_names[i].flag;
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                     names[0] ? "+" : "", ns_names[i].name);
        } else {
            log_warn("containment: %s namespace not permitted here (%s); workers share "
                     "the daemon's", ns_names[i].name, probe_error(err));
        }
    }
    if (ns && (err = probe_drop(uid, gid, l->chroot[0] ? l->chroot : NULL, ns)) != 0) {
        log_warn("containment: namespaces %s together fail (%s); workers get none",
                 names, probe_error(err));
        ns = 0;
        names[0] = '\0';
    }
    snprintf(l->uid, sizeof l->uid, "%u", (unsigned)uid);
    snprintf(l->gid, sizeof l->gid, "%u", (unsigned)gid);
    snprintf(l->ns, sizeof l->ns, "%d", ns);
    if (!l->chroot[0])
        log_warn("containment: [worker] chroot is empty: workers see the daemon's file system "
                 "(seccomp still forbids every file call)");
    log_notice("containment: workers run as uid %u (%s) gid %u, chroot %s, namespaces %s; "
               "also one fresh process per execution, fds closed, rlimits, no_new_privs, "
               "non-dumpable, seccomp allowlist",
               (unsigned)uid, s->cfg.worker_user, (unsigned)gid,
               l->chroot[0] ? l->chroot : "none", names[0] ? names : "none");
    l->decided = 1;
    return 0;
}

/* Containment: the zygote's (and so every worker's) environment block.
 * Nothing of the daemon's environment - it may hold secrets - is passed on:
 * only LD_BIND_NOW (see spawn_start) and, in sanitizer builds, the
 * sanitizer option variables. */
static char **zygote_env(void)
{
    static const char *const keep[] = { "LD_BIND_NOW",
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

int spawn_start(struct sup *s)
{
    int sv[2];
    pid_t pid;
    char fdbuf[16], ppid[16];

    if (decide_layers(s) < 0)       /* containment: refuse rather than run as root */
        return -1;
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
#if !defined(MUTATE_ZYGOTE_SESSION)
        setsid();
#endif
        /* Performance: resolve every shared-library symbol once,
         * when the zygote is loaded; with lazy binding each fresh worker
         * resolved the PLT entries it used again (~20 us per worker). */
        setenv("LD_BIND_NOW", "1", 1);
        if (fcntl(sv[1], F_SETFD, 0) == 0)
            execve(s->self_exe, argv, zygote_env());
        _exit(127);
    }
    close(sv[1]);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    s->zygote_pid = pid;
    s->zygote_fd = sv[0];
    s->zygote_started = ev_time();
    ev_timer_init(&s->zygote_watch, zygote_watch_cb, 0., 1.);
    s->zygote_watch.data = s;
    ev_io_init(&s->zygote_io, zygote_io_cb, sv[0], EV_READ);
    s->zygote_io.data = s;
    ev_io_start(s->loop, &s->zygote_io);
    log_debug("zygote %d started", (int)pid);
    return 0;
}

/* A zygote that leaves requests unanswered for ZYGOTE_STALL_S (stopped,
 * or stuck) is killed; its reap restarts it under the supply back-off. */
static void zygote_watch_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct sup *s = t->data;
    (void)revents;

    if (s->pending == 0 || s->zygote_pid <= 0) {
        ev_timer_stop(loop, t);
        return;
    }
    if (ev_now(loop) - s->zygote_progress < ZYGOTE_STALL_S)
        return;
    log_err("zygote %d answered no spawn request for %.0f s; killing it", (int)s->zygote_pid,
            ev_now(loop) - s->zygote_progress);
    kill(s->zygote_pid, SIGKILL);
    ev_timer_stop(loop, t);
}

int spawn_request(struct sup *s)
{
    char c = 'S';

    if (s->zygote_fd < 0)
        return -1;
    if (send(s->zygote_fd, &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1)
        return -1;
    if (s->pending == 0)
        s->zygote_progress = ev_now(s->loop);
    if (!ev_is_active(&s->zygote_watch))
        ev_timer_again(s->loop, &s->zygote_watch);
    return 0;
}

void spawn_poll(struct sup *s)
{
    for (;;) {
        struct zyg_msg m;
        struct iovec iov = { &m, sizeof m };
        union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
                             .msg_control = u.buf, .msg_controllen = sizeof u.buf };
        struct cmsghdr *cm;
        int fd = -1;
        ssize_t n;

        if (s->zygote_fd < 0)
            return;
        n = recvmsg(s->zygote_fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN)
                ev_io_stop(s->loop, &s->zygote_io);   /* dying; the reap follows */
            return;
        }
        s->zygote_progress = ev_now(s->loop);
        cm = CMSG_FIRSTHDR(&mh);
        if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
            cm->cmsg_len == CMSG_LEN(sizeof(int)))
            memcpy(&fd, CMSG_DATA(cm), sizeof fd);
        if (n != (ssize_t)sizeof m || m.err != 0 || m.pid <= 0 || fd < 0) {
            /* MSG_CTRUNC: the channel did not fit, the supervisor is out of
             * descriptors (the worker, its peer gone, exits; its reap is
             * an unknown pid) */
            int err = n != (ssize_t)sizeof m ? EPROTO : m.err > 0 ? m.err :
                      (mh.msg_flags & MSG_CTRUNC) ? EMFILE : 0;
            if (fd >= 0)
                close(fd);
            sched_worker_arrived(s, n == (ssize_t)sizeof m ? m.pid : 0, -1, err);
            continue;
        }
        fcntl(fd, F_SETFL, O_NONBLOCK);
        sched_worker_arrived(s, m.pid, fd, 0);
    }
}

static void zygote_close(struct sup *s)
{
    if (s->zygote_fd >= 0) {
        ev_io_stop(s->loop, &s->zygote_io);
        close(s->zygote_fd);
    }
    s->zygote_fd = -1;
}

void spawn_zygote_died(struct sup *s, int status)
{
    spawn_poll(s);             /* hand-overs it sent before dying still count */
    zygote_close(s);
    /* children reaped before their hand-over was read: that hand-over will
     * never come now, and a reused pid must not match a stale entry */
    memset(s->reaped_unknown, 0, sizeof s->reaped_unknown);
    ev_timer_stop(s->loop, &s->zygote_watch);
    s->zygote_pid = 0;
    s->procs = s->procs > s->pending ? s->procs - s->pending : 0;
    s->pending = 0;
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
    zygote_close(s);
    if (s->zygote_pid > 0) {
        kill(s->zygote_pid, SIGKILL);
        waitpid(s->zygote_pid, NULL, 0);
    }
    s->zygote_pid = 0;
}
