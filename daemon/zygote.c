/*
 * zygote.c - see zygote.h.  Two halves: the supervisor's handle (start,
 * request, poll, restart) and zygote_main(), the process itself.
 */
#include "daemon/zygote.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "daemon/log.h"
#include "daemon/sched.h"
#include "daemon/sup.h"
#include "daemon/worker.h"
#include "policy/contain.h"
#include "policy/seccomp.h"

struct zyg_msg {
    int32_t pid;
    int32_t err;
};

/* ------------------------------------------------------------------ */
/* supervisor side                                                     */

static void zygote_io_cb(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop; (void)revents;
    zygote_poll(io->data);
}

/* Resolve [worker] user/group/chroot when we run as root. */
static void worker_identity(const struct sup *s, char *uid, char *gid, size_t n)
{
    struct passwd *pw;
    struct group *gr;

    uid[0] = gid[0] = '\0';
    if (geteuid() != 0 || !s->cfg.worker_user || !*s->cfg.worker_user)
        return;
    if (!(pw = getpwnam(s->cfg.worker_user))) {
        log_warn("worker user '%s' does not exist; workers keep the daemon's uid",
                 s->cfg.worker_user);
        return;
    }
    snprintf(uid, n, "%u", (unsigned)pw->pw_uid);
    snprintf(gid, n, "%u", (unsigned)pw->pw_gid);
    if (s->cfg.worker_group && *s->cfg.worker_group && (gr = getgrnam(s->cfg.worker_group)))
        snprintf(gid, n, "%u", (unsigned)gr->gr_gid);
}

int zygote_start(struct sup *s)
{
    int sv[2];
    pid_t pid;
    char fdbuf[16], ppid[16], uid[16], gid[16];
    const char *chroot_dir = "";
    struct stat st;

    worker_identity(s, uid, gid, sizeof uid);
    if (uid[0] && s->cfg.worker_chroot && *s->cfg.worker_chroot) {
        if (stat(s->cfg.worker_chroot, &st) == 0 && S_ISDIR(st.st_mode))
            chroot_dir = s->cfg.worker_chroot;
        else
            log_warn("worker chroot '%s' is not a directory; workers run without chroot",
                     s->cfg.worker_chroot);
    }
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
                         uid, gid, (char *)chroot_dir, NULL };
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);   /* libev blocks what it watches */
        if (fcntl(sv[1], F_SETFD, 0) == 0)
            execv(s->self_exe, argv);
        _exit(127);
    }
    close(sv[1]);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    s->zygote_pid = pid;
    s->zygote_fd = sv[0];
    s->zygote_started = ev_time();
    ev_io_init(&s->zygote_io, zygote_io_cb, sv[0], EV_READ);
    s->zygote_io.data = s;
    ev_io_start(s->loop, &s->zygote_io);
    log_debug("zygote %d started", (int)pid);
    return 0;
}

int zygote_request(struct sup *s)
{
    char c = 'S';

    if (s->zygote_fd < 0)
        return -1;
    return send(s->zygote_fd, &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1 ? 0 : -1;
}

void zygote_poll(struct sup *s)
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
        cm = CMSG_FIRSTHDR(&mh);
        if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
            cm->cmsg_len == CMSG_LEN(sizeof(int)))
            memcpy(&fd, CMSG_DATA(cm), sizeof fd);
        if (n != (ssize_t)sizeof m || m.err != 0 || m.pid <= 0 || fd < 0) {
            if (fd >= 0)
                close(fd);
            sched_worker_arrived(s, n == (ssize_t)sizeof m ? m.pid : 0, -1);
            continue;
        }
        fcntl(fd, F_SETFL, O_NONBLOCK);
        sched_worker_arrived(s, m.pid, fd);
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

void zygote_died(struct sup *s, int status)
{
    ev_tstamp now = ev_time();

    zygote_close(s);
    s->zygote_pid = 0;
    s->procs -= s->pending;
    s->pending = 0;
    if (s->stopping)
        return;
    log_err("zygote died (status 0x%x); restarting it", status);
    if (now - s->zygote_started > 60)
        s->zygote_restarts = 0;
    if (++s->zygote_restarts > ZYGOTE_MAX_RESTARTS || zygote_start(s) < 0) {
        log_err("zygote keeps failing; executions cannot start until it recovers");
        sched_spawns_lost(s);
        if (s->zygote_restarts > ZYGOTE_MAX_RESTARTS && now - s->zygote_started > 1)
            s->zygote_restarts = ZYGOTE_MAX_RESTARTS;   /* try again on the next death */
    }
}

void zygote_stop(struct sup *s)
{
    zygote_close(s);
    if (s->zygote_pid > 0) {
        kill(s->zygote_pid, SIGKILL);
        waitpid(s->zygote_pid, NULL, 0);
    }
    s->zygote_pid = 0;
}

/* ------------------------------------------------------------------ */
/* the zygote process                                                  */

/* fork() with the supervisor as the parent: the supervisor reaps workers
 * and reads their rusage; the zygote keeps no children.  Raw clone skips
 * glibc's atfork handlers, which is fine in this single-threaded process. */
static pid_t fork_for_parent(void)
{
    return (pid_t)syscall(SYS_clone, (unsigned long)(CLONE_PARENT | SIGCHLD), 0, 0, 0, 0);
}

static void handover(int zfd, pid_t pid, int err, int fd)
{
    struct zyg_msg m = { (int32_t)pid, (int32_t)err };
    struct iovec iov = { &m, sizeof m };
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    struct cmsghdr *cm;

    if (fd >= 0) {
        mh.msg_control = u.buf;
        mh.msg_controllen = sizeof u.buf;
        cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    }
    while (sendmsg(zfd, &mh, MSG_NOSIGNAL) < 0) {
        if (errno != EINTR)
            _exit(1);           /* the supervisor is gone */
    }
}

static void spawn_worker(int zfd, struct luaenv *env, const struct contain_opts *opts)
{
    int sv[2];
    pid_t pid;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        handover(zfd, 0, errno, -1);
        return;
    }
    pid = fork_for_parent();
    if (pid == 0) {
        prctl(PR_SET_NAME, "sandboxd-worker", 0, 0, 0);
        if (contain_worker(sv[1], opts) < 0)
            _exit(WORKER_EXIT_SETUP);
        worker_run(env, WORKER_CHAN_FD);
    }
    close(sv[1]);
    handover(zfd, pid, pid < 0 ? errno : 0, pid < 0 ? -1 : sv[0]);
    close(sv[0]);
}

void zygote_main(int argc, char **argv)
{
    struct contain_opts opts = { 0 };
    struct sock_fprog prog = { 0 };
    struct luaenv *env;
    int zfd;

    if (argc < 7)
        _exit(2);
    zfd = atoi(argv[2]);
    opts.supervisor = (pid_t)atoi(argv[3]);
    prctl(PR_SET_NAME, "sandboxd-zygote", 0, 0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != opts.supervisor)
        _exit(1);
    if (argv[4][0]) {
        opts.drop_privs = 1;
        opts.uid = (uid_t)strtoul(argv[4], NULL, 10);
        opts.gid = (gid_t)strtoul(argv[5], NULL, 10);
        opts.chroot_dir = argv[6][0] ? argv[6] : NULL;
    }
    clearenv();
    /* jansson seeds its hash function from /dev/urandom on first use; do it
     * here, where open() is still allowed, not in a worker under seccomp. */
    json_object_seed(0);
    opts.devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (opts.devnull < 0) {
        log_err("zygote: /dev/null: %s", strerror(errno));
        _exit(1);
    }
    if (!(env = worker_env_new())) {
        log_err("zygote: could not build the Lua environment");
        _exit(1);
    }
    if (seccomp_policy_prepare(WORKER_CHAN_FD, &prog) < 0) {
        log_err("zygote: could not prepare the seccomp filter");
        _exit(1);
    }
    opts.filter = &prog;
    for (;;) {
        char c;
        ssize_t n = recv(zfd, &c, 1, 0);
        if (n == 0)
            _exit(0);           /* the supervisor closed: we are done */
        if (n < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        spawn_worker(zfd, env, &opts);
    }
}
