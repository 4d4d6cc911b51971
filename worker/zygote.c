/*
 * zygote.c - the zygote process: forks one confined worker per request.
 *
 * Runs only in the zygote (exec'd as `sandboxd --zygote ...` by the
 * supervisor's daemon/spawn.c) and, for the child side of each fork, in the
 * worker until contain_worker() and worker_run() take over.  It never sees
 * client bytes; the message it sends back is proto/chan.h's struct zyg_msg.
 */
#include "worker/zygote.h"

#include <errno.h>
#include <fcntl.h>
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
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <malloc.h>

#include "common/log.h"
#include "worker/worker.h"
#include "policy/contain.h"
#include "policy/seccomp.h"
#include "proto/chan.h"
#include "proto/jsonpass.h"

extern char **environ;

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

/* Performance: with CAP_SYS_NICE (a root daemon), the zygote and
 * the workers it forks run at nice 19 until the supervisor gives a worker its
 * job and sets the job's priority (wproc_apply_limits; lowering the nice
 * value needs that capability).  Forking and confining pool workers then
 * yields the CPU to running executions and to the supervisor instead of
 * delaying them: on 2 cores it took sequential latency p50 from ~320 us to
 * ~250 us.  Without the capability nothing changes.  The capability that
 * counts is the supervisor's, in the initial user namespace, so this is
 * asked before the zygote enters one of its own (where it holds every
 * capability, but only over that namespace). */
static int may_lower_priority(void)
{
    struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

    memset(data, 0, sizeof data);
    return syscall(SYS_capget, &hdr, data) == 0 &&
           (data[CAP_TO_INDEX(CAP_SYS_NICE)].effective & CAP_TO_MASK(CAP_SYS_NICE));
}

/* Containment: clearenv() only drops the pointers; the strings stay in the
 * environment block every worker inherits (/proc/PID/environ), so they are
 * wiped first (zygote_env() already passed nothing secret).  The block
 * holds one string per entry of environ, right after argv's last string;
 * it is wiped where it lies because glibc points environ's GLIBC_TUNABLES
 * entry at a copy it made, which is wiped as well. */
static void wipe_environment(int argc, char **argv)
{
    char *p = argv[argc - 1] + strlen(argv[argc - 1]) + 1;
    size_t n = 0;

    for (char **e = environ; e && *e; e++)
        n++;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(p);
        memset(p, 0, len);
        p += len + 1;
    }
    for (char **e = environ; e && *e; e++)
        memset(*e, 0, strlen(*e));
    clearenv();
}

void zygote_main(int argc, char **argv)
{
    struct contain_opts opts = { 0 };
    struct sock_fprog prog = { 0 };
    struct luaenv *env;
    int zfd, lower_prio;

    if (argc < 8)
        _exit(2);
    zfd = atoi(argv[2]);
    opts.supervisor = (pid_t)atoi(argv[3]);
    prctl(PR_SET_NAME, "sandboxd-zygote", 0, 0, 0);
    if (contain_die_with(opts.supervisor) < 0)
        _exit(1);
    lower_prio = may_lower_priority();      /* before any user namespace */
    if (argv[4][0]) {
        opts.drop_privs = 1;
        opts.uid = (uid_t)strtoul(argv[4], NULL, 10);
        opts.gid = (gid_t)strtoul(argv[5], NULL, 10);
        opts.chroot_dir = argv[6][0] ? argv[6] : NULL;
        opts.unshare_flags = (int)strtol(argv[7], NULL, 10) & CONTAIN_NS_ALL;
        /* Root without CAP_SYS_ADMIN: the start-up probe found the
         * namespaces only through a user namespace (contain.h).  A
         * failure now would leave workers with fewer layers than the log
         * announced. */
        if (strtol(argv[7], NULL, 10) & CLONE_NEWUSER) {
            if (contain_enter_userns_mapped(opts.unshare_flags, opts.uid, opts.gid) < 0) {
                log_err("zygote: cannot enter the namespaces the start-up probe entered: %s",
                        strerror(errno));
                _exit(1);
            }
            opts.unshare_flags = 0;
        }
    } else if (strtol(argv[7], NULL, 10) & CLONE_NEWUSER) {
        /* Not root, and the supervisor's probe found user namespaces work:
         * enter them once here; every worker is born inside.  A failure now
         * would leave workers with fewer layers than the log announced. */
        if (contain_enter_userns(getuid(), getgid()) < 0) {
            log_err("zygote: cannot enter the user namespace the start-up probe entered: %s",
                    strerror(errno));
            _exit(1);
        }
        opts.userns = 1;
        opts.chroot_dir = CONTAIN_USERNS_ROOT;
        /* new credentials (another user namespace): die with the
         * supervisor still, whatever the kernel made of the old setting */
        if (contain_die_with(opts.supervisor) < 0)
            _exit(1);
    }
    /* Performance: a new network namespace costs ~370 us to make
     * and more to tear down (kernel workqueue), per worker: it capped the
     * daemon at ~1,100 executions/s.  So the zygote unshares the namespaces
     * once and every worker inherits that one set: none is the host's, and
     * workers cannot use them to reach each other (seccomp forbids socket,
     * SysV/POSIX IPC, mount and sethostname calls; workers have no caps).
     * If this fails, each worker tries itself, as before. */
    if (opts.unshare_flags && unshare(opts.unshare_flags) == 0)
        opts.unshare_flags = 0;
    wipe_environment(argc, argv);
    /* Performance: glibc's one-time work (the time zone, malloc's large
     * blocks) once here, not in each worker (contain.h). */
    if (contain_warm_up() < 0) {
        log_err("zygote: glibc warm-up: %s", strerror(errno));
        _exit(1);
    }
    /* jansson seeds its hash function from /dev/urandom on first use; do it
     * here, where open() is still allowed, not in a worker under seccomp. */
    json_object_seed(0);
    jp_init();                  /* getrandom, which a worker may not call */
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
    if (lower_prio)
        (void)setpriority(PRIO_PROCESS, 0, 19);
    /* Performance: consolidate the small blocks freed while the
     * state was built, once, here.  Otherwise the first large malloc in each
     * worker (contain.c's warm-up) walks and rewrites them all: ~7% of a
     * worker's CPU time, in copy-on-write faults mostly. */
    malloc_trim(0);
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
