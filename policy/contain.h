/*
 * contain.h - confine a freshly forked worker, in a fixed order, seccomp last.
 *
 * contain_worker() runs in the new worker process (forked by the zygote with
 * CLONE_PARENT, so its parent is the supervisor) and performs, in order:
 *   1. setpgid(0, 0); PR_SET_PDEATHSIG(SIGKILL); exit if the parent is not
 *      opts->supervisor (it died before the prctl took effect);
 *   2. the channel moved to fd 3 (WORKER_CHAN_FD); fds 0-2 on /dev/null;
 *      every other fd closed (close_range);
 *   3. the environment cleared (clearenv; the zygote already emptied it);
 *   4. rlimits: CORE 0, FSIZE 0, NOFILE 4, NPROC untouched (per-uid),
 *      STACK 8 MiB; RLIMIT_AS is set per job by the supervisor;
 *   5. when opts->drop_privs (root, with a worker user): chroot(opts->chroot_dir)
 *      and chdir("/") if chroot_dir is set, unshare(CLONE_NEWNET|CLONE_NEWIPC|
 *      CLONE_NEWNS) where permitted (EPERM/EINVAL/ENOSYS are ignored, other
 *      errors fail), setgroups(0)/setresgid/setresuid, then a check that the
 *      ids stuck and setuid(0) fails; uid or gid 0 is refused (EINVAL);
 *   6. PR_SET_DUMPABLE 0, PR_SET_NO_NEW_PRIVS 1;
 *   7. glibc warm-up: TZ=:/etc/localtime (the only environment variable: with
 *      TZ unset glibc reopens the zone file on every mktime/strftime %Z),
 *      tzset, localtime_r, gmtime_r, clock(), strftime, one large (mmap) and
 *      one small malloc/free;
 *   8. seccomp_policy_install(opts->filter) unless opts->no_seccomp.
 * rlimits are only ever lowered (soft and hard, never above the old value).
 * Returns 0, or -1 with errno set (the caller _exits with WORKER_EXIT_SETUP);
 * nothing is printed (fds 0-2 are /dev/null from step 2).  ESRCH: the parent
 * is not opts->supervisor.
 */
#ifndef SANDBOXD_CONTAIN_H
#define SANDBOXD_CONTAIN_H

#include <linux/filter.h>
#include <sys/types.h>

struct contain_opts {
    pid_t supervisor;                  /* expected parent */
    int   devnull;                     /* open O_RDWR on /dev/null */
    const struct sock_fprog *filter;   /* prepared by seccomp_policy_prepare */
    int   no_seccomp;                  /* test/debug builds only */
    int   drop_privs;                  /* 1 when running as root with a worker user */
    uid_t uid;
    gid_t gid;
    const char *chroot_dir;            /* NULL: no chroot */
};

int contain_worker(int chan_fd, const struct contain_opts *opts);

#endif
