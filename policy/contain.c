/*
 * contain.c - confine a freshly forked worker (see contain.h for the order).
 *
 * Every step either succeeds or makes contain_worker() return -1; the caller
 * then _exits with WORKER_EXIT_SETUP.  From step 2 on fds 0-2 are /dev/null,
 * so nothing is printed: errno is all a caller (or a test) gets.
 *
 * Nothing here may run after the filter: seccomp_policy_install() is last,
 * and the warm-up before it makes glibc do its one-time work (timezone file,
 * malloc initialisation, first mmap) while open/fstat/... are still allowed.
 */
#include "policy/contain.h"

#include "policy/seccomp.h"
#include "proto/chan.h"
#include "proto/mutant.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define STACK_LIMIT      (8UL << 20)   /* RLIMIT_STACK: 8 MiB */
#define WARM_LARGE_BYTES (256UL << 10) /* above glibc's 128 KiB mmap threshold */
#define WARM_SMALL_BYTES 64UL
#define CLOSE_FALLBACK_MAX 65536U      /* close loop bound without close_range */
#define WORKER_TZ        ":/etc/localtime" /* glibc's default zone, named */
#ifndef SANDBOXD_SYSCALL_AUDIT
#define SANDBOXD_SYSCALL_AUDIT 0
#endif
#if SANDBOXD_SYSCALL_AUDIT
#include <ucontext.h>
#endif
#ifndef SYS_SECCOMP
#define SYS_SECCOMP      1             /* si_code of a seccomp SIGSYS (the
                                          kernel's asm-generic/siginfo.h) */
#endif

/* Die with the supervisor (SIGKILL when the parent exits), and make sure
 * it did not die before the prctl took effect: then the parent is already
 * init or a subreaper, not the supervisor. */
int contain_die_with(pid_t supervisor)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        return -1;
    if (getppid() != supervisor) {
        errno = ESRCH;
        return -1;
    }
    return 0;
}

/* 1. Own process group (the supervisor kills the group), die with the
 *    supervisor. */
static int set_lifetime(pid_t supervisor)
{
    if (setpgid(0, 0) < 0)
        return -1;
    return contain_die_with(supervisor);
}

/* Close every fd >= first.  close_range() where the kernel has it (5.9+);
 * otherwise a loop up to max(RLIMIT_NOFILE hard limit, CLOSE_FALLBACK_MAX)
 * capped at 1<<20 - fds above an rlimit lowered after they were opened are
 * the one thing the fallback can miss. */
static int close_from(unsigned first)
{
    if (close_range(first, ~0U, 0) == 0)
        return 0;
    if (errno != ENOSYS)
        return -1;
    struct rlimit rl;
    rlim_t bound = CLOSE_FALLBACK_MAX;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max > bound)
        bound = rl.rlim_max < (1U << 20) ? rl.rlim_max : (1U << 20);
    for (rlim_t fd = first; fd < bound; fd++)
        (void)close((int)fd);
    return 0;
}

/* 2. The channel on WORKER_CHAN_FD, /dev/null on 0-2, nothing else open.
 *    Any of chan_fd and devnull may start out on 0-3; the moves are ordered
 *    so neither overwrites the other before it has been copied. */
static int arrange_fds(int chan_fd, int devnull)
{
    if (chan_fd < 0 || devnull < 0 || chan_fd == devnull) {
        errno = EBADF;
        return -1;
    }
    if (chan_fd != WORKER_CHAN_FD) {
        if (devnull == WORKER_CHAN_FD) {
            devnull = fcntl(devnull, F_DUPFD_CLOEXEC, WORKER_CHAN_FD + 1);
            if (devnull < 0)
                return -1;
        }
        if (dup2(chan_fd, WORKER_CHAN_FD) < 0)
            return -1;
    }
    for (int fd = 0; fd < WORKER_CHAN_FD; fd++) {
        if (fd != devnull && dup2(devnull, fd) < 0)
            return -1;
    }
    if (MUTANT(NO_CLOSE_FDS))
        return 0;                       /* mutant: fds left open */
    return close_from(WORKER_CHAN_FD + 1);
}

/* Lower both the soft and the hard limit to at most `value`; never raise
 * either (a soft limit already below `value` is kept). */
static int lower_limit(int resource, rlim_t value)
{
    struct rlimit rl;
    if (getrlimit(resource, &rl) < 0)
        return -1;
    if (rl.rlim_cur > value)
        rl.rlim_cur = value;
    if (rl.rlim_max > value)
        rl.rlim_max = value;
    return setrlimit(resource, &rl);
}

/* 4. CORE 0, FSIZE 0, NOFILE 4 (fds 0-3), STACK 8 MiB.  RLIMIT_NPROC is
 *    per-uid and left alone (seccomp blocks fork); RLIMIT_AS and RLIMIT_CPU
 *    are per job: the worker lowers its own from the job's limits
 *    (worker/worker.c apply_rlimits). */
static int set_limits(void)
{
    if (lower_limit(RLIMIT_CORE, 0) < 0 ||
        lower_limit(RLIMIT_FSIZE, 0) < 0 ||
        lower_limit(RLIMIT_NOFILE, WORKER_CHAN_FD + 1) < 0 ||
        lower_limit(RLIMIT_STACK, STACK_LIMIT) < 0)
        return -1;
    return 0;
}

/* New namespaces: exactly opts->unshare_flags, or nothing when it is 0.
 * The supervisor probes at start-up which namespaces this host permits
 * (policy/probe.c) and passes only those, so here any failure is an error:
 * the worker never runs with fewer layers than the start-up log announced. */
static int unshare_namespaces(int flags)
{
    if (flags == 0)
        return 0;
    if (flags & ~CONTAIN_NS_ALL) {
        errno = EINVAL;
        return -1;
    }
    return unshare(flags);
}

static int drop_capabilities(void);

/* The ids are exactly uid/gid (real, effective, saved), there are no
 * supplementary groups, and root cannot be regained. */
static int verify_dropped(uid_t uid, gid_t gid)
{
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
        return -1;
    if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid ||
        sg != gid || getgroups(0, NULL) != 0) {
        errno = EPERM;
        return -1;
    }
    if (setuid(0) == 0 || setgid(0) == 0) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

/* 6. Root only: namespaces, chroot, then drop to uid/gid for good.  A drop
 *    to uid 0 or gid 0 is refused (EINVAL): it would drop nothing.  The new
 *    mount namespace comes first so the chroot happens inside it. */
int contain_drop_privileges(const struct contain_opts *opts)
{
    if (!opts || opts->uid == 0 || opts->gid == 0) {
        errno = EINVAL;
        return -1;
    }
    if (unshare_namespaces(opts->unshare_flags) < 0)
        return -1;
    if (opts->chroot_dir && (chroot(opts->chroot_dir) < 0 || chdir("/") < 0))
        return -1;
    if (setgroups(0, NULL) < 0 ||
        setresgid(opts->gid, opts->gid, opts->gid) < 0 ||
        setresuid(opts->uid, opts->uid, opts->uid) < 0)
        return -1;
    if (verify_dropped(opts->uid, opts->gid) < 0)
        return -1;
    /* Leaving uid 0 empties the capability sets, but only where 0 is the
     * namespace's root: in contain_enter_userns_mapped()'s namespace root
     * is unmapped, and the sets would stay.  So they are emptied here, and
     * checked, whatever the namespace. */
    if (MUTANT(WORKER_CAPS_KEPT))
        return 0;                       /* mutant: capabilities left to the uid change */
    return drop_capabilities();
}

/* ---- without root: a user namespace (see contain.h) ---- */

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    size_t len = strlen(text);
    ssize_t n;

    if (fd < 0)
        return -1;
    n = write(fd, text, len);
    if (close(fd) < 0 || n != (ssize_t)len) {
        if (n >= 0)
            errno = EIO;
        return -1;
    }
    return 0;
}

int contain_enter_userns(uid_t outer_uid, gid_t outer_gid)
{
    char map[64];

    if (unshare(CLONE_NEWUSER) < 0)
        return -1;
    /* setgroups must be denied before an unprivileged gid_map is written */
    if (write_file("/proc/self/setgroups", "deny") < 0)
        return -1;
    snprintf(map, sizeof map, "0 %u 1\n", (unsigned)outer_uid);
    if (write_file("/proc/self/uid_map", map) < 0)
        return -1;
    snprintf(map, sizeof map, "0 %u 1\n", (unsigned)outer_gid);
    if (write_file("/proc/self/gid_map", map) < 0)
        return -1;
    if (unshare(CONTAIN_NS_ALL) < 0)
        return -1;
    /* nothing mounted here reaches the host, nothing from there arrives */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -1;
    return mount("sandboxd-empty", CONTAIN_USERNS_ROOT, "tmpfs",
                 MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                 "size=4k,nr_inodes=1,mode=0555");
}

/* The helper of contain_enter_userns_mapped(): waits until pid has its new
 * user namespace (a byte on go; EOF: it failed), then writes its maps, uid
 * and gid each to itself, from outside.  Exits 0, or with the errno of the
 * failure. */
static void write_worker_maps(pid_t pid, int go, uid_t uid, gid_t gid)
{
    char path[64], map[64], c;

    if (read(go, &c, 1) != 1)
        _exit(ECANCELED);
    snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
    if (write_file(path, map) < 0)
        _exit(errno > 0 && errno < 256 ? errno : EPERM);
    snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
    if (write_file(path, map) < 0)
        _exit(errno > 0 && errno < 256 ? errno : EPERM);
    _exit(0);
}

int contain_enter_userns_mapped(int ns, uid_t uid, gid_t gid)
{
    struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
    struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3];
    pid_t self = getpid(), helper;
    int go[2], rc, err = 0, status;

    if ((ns & ~CONTAIN_NS_ALL) || uid == 0 || gid == 0) {
        errno = EINVAL;
        return -1;
    }
    memset(caps, 0, sizeof caps);
    if (syscall(SYS_capget, &hdr, caps) < 0 || pipe2(go, O_CLOEXEC) < 0)
        return -1;
    helper = fork();
    if (helper < 0) {
        err = errno;
        close(go[0]);
        close(go[1]);
        errno = err;
        return -1;
    }
    if (helper == 0) {
        close(go[1]);
        write_worker_maps(self, go[0], uid, gid);
    }
    close(go[0]);
    rc = unshare(CLONE_NEWUSER);
    err = errno;
    if (rc == 0 && write(go[1], "x", 1) != 1) {
        rc = -1;
        err = errno;
    }
    close(go[1]);                       /* on a failure the helper reads EOF */
    while (waitpid(helper, &status, 0) < 0) {
        if (errno != EINTR) {
            status = -1;
            break;
        }
    }
    if (rc < 0) {
        errno = err;
        return -1;
    }
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        errno = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) ? WEXITSTATUS(status)
                                                                         : EPERM;
        return -1;
    }
    if (ns && unshare(ns) < 0)
        return -1;
    /* back to the sets it had: the namespace gave it all of them */
    if (!MUTANT(USERNS_MAPPED_CAPS) && syscall(SYS_capset, &hdr, caps) < 0)
        return -1;
    return 0;
}

/* Every capability set emptied (effective, permitted, inheritable; with
 * no_new_privs and no execve the bounding and ambient sets cannot refill
 * them), and checked. */
static int drop_capabilities(void)
{
    struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &hdr, data) < 0)
        return -1;
    if (syscall(SYS_capget, &hdr, data) < 0)
        return -1;
    for (size_t i = 0; i < _LINUX_CAPABILITY_U32S_3; i++) {
        if (data[i].effective || data[i].permitted || data[i].inheritable) {
            errno = EPERM;
            return -1;
        }
    }
    return 0;
}

int contain_userns_confine(const struct contain_opts *opts)
{
    if (!opts || !opts->chroot_dir) {
        errno = EINVAL;
        return -1;
    }
    if (MUTANT(USERNS_CONFINE))
        return 0;                       /* mutant: no chroot, caps kept */
    if (chroot(opts->chroot_dir) < 0 || chdir("/") < 0)
        return -1;
    return drop_capabilities();
}

/* 7. No core dumps, no ptrace by the same uid, no /proc/<pid> access by
 *    others; no privilege gain through execve (and required for seccomp). */
static int set_process_flags(void)
{
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        return -1;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    return 0;
}

/* Touch a fresh allocation through a volatile pointer so the compiler cannot
 * elide the malloc/free pair. */
static int warm_alloc(size_t size)
{
    volatile unsigned char *p = malloc(size);
    if (!p)
        return -1;
    p[0] = 1;
    p[size - 1] = 1;
    free((void *)p);
    return 0;
}

/* 5. Make glibc do its one-time work now, before the chroot (step 6) hides
 *    /etc/localtime: the timezone file is read on the first conversion (F16), clock() is a real syscall (F15), and malloc
 *    initialises itself and takes the mmap path for a large block.  The
 *    environment gets exactly one variable, TZ=:/etc/localtime (the zone
 *    glibc uses when TZ is unset), because only a set TZ lets later tzset()
 *    calls - mktime() for os.time{...}, strftime("%Z") - skip the file. */
static int warm_up(void)
{
    struct tm local, utc;
    char buf[128];

    /* With TZ unset, glibc re-opens /etc/localtime on every tzset() (mktime,
     * strftime %Z); with TZ naming the same file it only reads it once. */
    if (setenv("TZ", WORKER_TZ, 1) != 0)
        return -1;
    tzset();
    time_t now = time(NULL);
    if (now == (time_t)-1)
        return -1;
    if (!localtime_r(&now, &local) || !gmtime_r(&now, &utc))
        return -1;
    (void)clock();
    (void)strftime(buf, sizeof buf, "%c %Z", &local);
    if (warm_alloc(WARM_LARGE_BYTES) < 0 || warm_alloc(WARM_SMALL_BYTES) < 0)
        return -1;
    return 0;
}

/* Steps 3 and 5 left exactly TZ=WORKER_TZ, and nothing else, in the
 * environment: in a process forked from one that ran contain_warm_up(), whose
 * memory (glibc's zone, malloc's state) it shares. */
static int warmed_up(void)
{
    if (MUTANT(ENV_TRUSTED))
        return 1;                       /* mutant: any environment passes */
    return environ != NULL && environ[0] != NULL &&
           strcmp(environ[0], "TZ=" WORKER_TZ) == 0 && environ[1] == NULL;
}

int contain_warm_up(void)
{
    if (clearenv() != 0)
        return -1;
    return warm_up();
}

/* 8. The SIGSYS report.  The filter's default action is SECCOMP_RET_TRAP
 *     (policy/seccomp.c): a forbidden call is skipped and SIGSYS arrives
 *     here with its number.  The handler is async-signal-safe and uses no
 *     mutable state: one write(2) of a fixed 16-byte CHAN_SYSCALL frame on
 *     the channel, then rt_sigaction(SIGSYS, NULL, NULL), which the filter
 *     answers with kill-process, so the worker dies by SIGSYS exactly as
 *     with a plain kill-process filter.  It never returns: rt_sigreturn is
 *     kill-process too.  If the process is compromised the report may be a
 *     lie (it could have written any frame itself anyway); the supervisor
 *     treats it as a hint.  Every way the handler can fail still kills:
 *     SIGSYS is blocked inside it and SA_RESETHAND has reset it to the
 *     default action, so a second trap is fatal; exit_group is the last
 *     resort if the kill rule were ever missing. */
#if !SANDBOXD_SYSCALL_AUDIT
static void sigsys_report(int sig, siginfo_t *si, void *uctx)
{
    struct {
        struct chan_header h;
        struct chan_syscall r;
    } f;

    (void)sig; (void)uctx;
    _Static_assert(sizeof f == CHAN_HEADER_SIZE + CHAN_SYSCALL_SIZE, "frame layout");
    f.h.type = CHAN_SYSCALL;
    f.h.len = CHAN_SYSCALL_SIZE;
    f.r.nr = si->si_code == SYS_SECCOMP ? (int32_t)si->si_syscall : -1;
    f.r.arch = si->si_code == SYS_SECCOMP ? (uint32_t)si->si_arch : 0;
    (void)syscall(SYS_write, WORKER_CHAN_FD, &f, sizeof f);
    (void)syscall(SYS_rt_sigaction, SIGSYS, NULL, NULL, sizeof(uint64_t));
    for (;;)
        (void)syscall(SYS_exit_group, 128 + SIGSYS);
}
#else
/* The audit build only (make test-audit, -DSANDBOXD_SYSCALL_AUDIT=1, never
 * installed): the same report, after which the call fails with ENOSYS and
 * the worker goes on, so that one run of every suite's chunks finds every
 * call outside the allowlist instead of the first.  Its filter lets
 * rt_sigreturn through (policy/seccomp.c) so that this handler can return;
 * it stays installed for the next call. */
static void sigsys_audit(int sig, siginfo_t *si, void *uctx)
{
    struct {
        struct chan_header h;
        struct chan_syscall r;
    } f;
    int saved = errno;

    (void)sig;
    f.h.type = CHAN_SYSCALL;
    f.h.len = CHAN_SYSCALL_SIZE;
    f.r.nr = si->si_code == SYS_SECCOMP ? (int32_t)si->si_syscall : -1;
    f.r.arch = si->si_code == SYS_SECCOMP ? (uint32_t)si->si_arch : 0;
    (void)syscall(SYS_write, WORKER_CHAN_FD, &f, sizeof f);
    ((ucontext_t *)uctx)->uc_mcontext.gregs[REG_RAX] = -ENOSYS;
    errno = saved;                      /* the interrupted code's, untouched */
}
#endif

static int install_sigsys_report(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
#if SANDBOXD_SYSCALL_AUDIT
    sa.sa_sigaction = sigsys_audit;
    sa.sa_flags = SA_SIGINFO;
#else
    sa.sa_sigaction = sigsys_report;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
#endif
    if (sigfillset(&sa.sa_mask) < 0)        /* nothing interrupts the report */
        return -1;
    if (sigaction(SIGSYS, &sa, NULL) < 0)
        return -1;
    sigset_t set;                           /* SIGSYS deliverable */
    if (sigemptyset(&set) < 0 || sigaddset(&set, SIGSYS) < 0)
        return -1;
    return sigprocmask(SIG_UNBLOCK, &set, NULL);
}

int contain_worker(int chan_fd, const struct contain_opts *opts)
{
    if (!opts || (!opts->no_seccomp && !opts->filter)) {
        errno = EINVAL;
        return -1;
    }
    if (set_lifetime(opts->supervisor) < 0)                 /* 1 */
        return -1;
    if (arrange_fds(chan_fd, opts->devnull) < 0)            /* 2 */
        return -1;
    int warm = warmed_up();
    if (!warm && clearenv() != 0)                           /* 3 */
        return -1;
    if (set_limits() < 0)                                   /* 4 */
        return -1;
    if (!warm && warm_up() < 0)                             /* 5 */
        return -1;
    if (opts->drop_privs && contain_drop_privileges(opts) < 0) /* 6 */
        return -1;
    if (!opts->drop_privs && opts->userns && contain_userns_confine(opts) < 0)
        return -1;
    /* Neither: a daemon that is not root may still hold capabilities (a
     * container's ambient set); a worker never does. */
    if (!opts->drop_privs && !opts->userns && drop_capabilities() < 0)
        return -1;
    /* A change of uid/gid (or of capabilities beyond a subset) clears the
     * parent-death signal (prctl(2)): set it again now that the ids are
     * final, and check once more that the supervisor is still the parent. */
    if (!MUTANT(PDEATHSIG_REARM) && contain_die_with(opts->supervisor) < 0)
        return -1;
    if (set_process_flags() < 0)                            /* 7 */
        return -1;
    if (MUTANT(NO_SECCOMP))
        return 0;                       /* mutant: no filter */
    if (!opts->no_seccomp && (install_sigsys_report() < 0 ||  /* 8 */
                              seccomp_policy_install(opts->filter) < 0))
        return -1;
    return 0;
}
