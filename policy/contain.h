/* Runs in: supervisor, zygote, worker */
/*
 * contain.h - confine a freshly forked worker, in a fixed order, seccomp last.
 *
 * contain_worker() runs in the new worker process (forked by the zygote with
 * CLONE_PARENT, so its parent is the supervisor) and performs, in order:
 *   1. setpgid(0, 0); PR_SET_PDEATHSIG(SIGKILL); exit if the parent is not
 *      opts->supervisor (it died before the prctl took effect);
 *   2. the channel moved to fd 3 (WORKER_CHAN_FD); fds 0-2 on /dev/null;
 *      every other fd closed (close_range);
 *   3. the environment cleared (clearenv; the zygote already emptied it),
 *      unless it is exactly step 5's TZ and nothing else (see
 *      contain_warm_up: steps 3 and 5 are then done already);
 *   4. rlimits: CORE 0, FSIZE 0, NOFILE 4, NPROC untouched (per-uid),
 *      STACK 8 MiB; RLIMIT_AS and RLIMIT_CPU come with each job (below);
 *   5. glibc warm-up: TZ=:/etc/localtime (the only environment variable: with
 *      TZ unset glibc reopens the zone file on every mktime/strftime %Z),
 *      tzset, localtime_r, gmtime_r, clock(), strftime, one large (mmap) and
 *      one small malloc/free; before step 6, so the zone file is read from
 *      the real root, not the empty chroot;
 *   6. when opts->drop_privs (root, with a worker user):
 *      unshare(opts->unshare_flags) if non-zero (a subset of CONTAIN_NS_ALL,
 *      the namespaces the supervisor's start-up probe found permitted; any
 *      failure fails), chroot(opts->chroot_dir) and chdir("/") if chroot_dir
 *      is set, setgroups(0)/setresgid/setresuid, then a check that the ids
 *      stuck and setuid(0) fails, then every capability set emptied and
 *      checked (the uid change alone does not empty them in a user
 *      namespace whose root is unmapped); uid or gid 0 is refused (EINVAL);
 *      Without root, when opts->userns (the zygote entered a user namespace
 *      with contain_enter_userns): chroot(opts->chroot_dir), chdir("/"),
 *      and every capability dropped and checked (contain_userns_confine);
 *      with neither, every capability dropped and checked all the same (a
 *      daemon that is not root may hold some: a container's ambient set);
 *      then PR_SET_PDEATHSIG(SIGKILL) again and the parent checked again
 *      (contain_die_with): changing credentials clears the parent-death
 *      signal, so step 1's would be gone after a uid/gid drop;
 *   7. PR_SET_DUMPABLE 0, PR_SET_NO_NEW_PRIVS 1;
 *   8. unless opts->no_seccomp: the SIGSYS report handler (SA_RESETHAND,
 *      every signal blocked while it runs; it writes one CHAN_SYSCALL frame
 *      on WORKER_CHAN_FD and dies by a kill-process rule, see contain.c;
 *      in the audit build, SANDBOXD_SYSCALL_AUDIT=1, it writes the frame and
 *      returns with the call failed by ENOSYS), then
 *      seccomp_policy_install(opts->filter).
 * rlimits are only ever lowered (soft and hard, never above the old value).
 * No RLIMIT_AS/RLIMIT_CPU backstop is set here: the worker sets both (soft
 * and hard) from its job before running any chunk (worker/worker.c), see
 * docs/security.md for why a zygote-time value would be worse.
 * Returns 0, or -1 with errno set (the caller _exits with WORKER_EXIT_SETUP);
 * nothing is printed (fds 0-2 are /dev/null from step 2).  ESRCH: the parent
 * is not opts->supervisor.
 */
#ifndef SANDBOXD_CONTAIN_H
#define SANDBOXD_CONTAIN_H

#include <linux/filter.h>
#include <sched.h>
#include <sys/types.h>

/* The namespaces a worker may be given (step 6).  CLONE_NEWPID is not one:
 * see docs/security.md. */
#define CONTAIN_NS_ALL (CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWNS | CLONE_NEWUTS)

struct contain_opts {
    pid_t supervisor;                  /* expected parent */
    int   devnull;                     /* open O_RDWR on /dev/null */
    const struct sock_fprog *filter;   /* prepared by seccomp_policy_prepare */
    int   no_seccomp;                  /* test/debug builds only */
    int   drop_privs;                  /* 1 when running as root with a worker user */
    uid_t uid;
    gid_t gid;
    const char *chroot_dir;            /* NULL: no chroot */
    int   unshare_flags;               /* drop_privs only: CLONE_NEW* to unshare, 0 none */
    int   userns;                      /* not root: inside contain_enter_userns()'s
                                        * namespaces; chroot_dir is then required */
};

/* Where contain_enter_userns() mounts the empty root (in its own mount
 * namespace only: the host's /tmp is untouched). */
#define CONTAIN_USERNS_ROOT "/tmp"

int contain_worker(int chan_fd, const struct contain_opts *opts);

/* Steps 3 and 5 of contain_worker(), for the zygote to run once: a worker
 * forked from it shares their result (glibc's time zone and malloc state)
 * and finds its environment exactly TZ=:/etc/localtime, so it skips them
 * (a trivial execution's worker: 8 fewer page faults and 3 fewer system
 * calls).  Any other environment, TZ with another value or one variable
 * more, and the worker does both steps itself.  0, or -1 with errno. */
int contain_warm_up(void);

/* PR_SET_PDEATHSIG(SIGKILL), then check that the parent is `supervisor`
 * (ESRCH if not: it died before the prctl).  Call it again after any
 * credential change, which clears the signal.  0, or -1 with errno. */
int contain_die_with(pid_t supervisor);

/* Step 6 alone (namespaces, chroot, uid/gid drop and its verification), for
 * the supervisor's start-up probe in a throwaway child.  0, or -1 with errno. */
int contain_drop_privileges(const struct contain_opts *opts);

/*
 * Without root, the layers a user namespace gives (once, in the zygote, or
 * in the supervisor's start-up probe; the caller must be single-threaded):
 * a new user namespace where uid/gid 0 map to outer_uid/outer_gid (one id
 * each; setgroups denied), new net, ipc, mount and uts namespaces owned by
 * it, every mount made private, and an empty, read-only, 4 KiB tmpfs mounted
 * on CONTAIN_USERNS_ROOT for the workers to chroot into.  0, or -1 with
 * errno (EPERM/EINVAL/ENOSPC where the host forbids user namespaces).
 */
int contain_enter_userns(uid_t outer_uid, gid_t outer_gid);

/*
 * As root without CAP_SYS_ADMIN (a container's usual set), the namespaces
 * through a user namespace instead (once, in the zygote, or in the
 * start-up probe; the caller must be single-threaded): a new user
 * namespace that maps the worker's uid and gid, each to itself and
 * nothing else (written by a helper child that stays outside, with the
 * caller's CAP_SETUID and CAP_SETGID there; mapping root would need
 * CAP_SETFCAP, which containers drop), then unshare(ns), a subset of
 * CONTAIN_NS_ALL; then the caller's capability sets are cut back to what
 * they were before (the new namespace gave it every capability in it): it
 * keeps exactly the privileges it had, and its workers drop them as in
 * step 6, to ids that are the same inside as outside.  0, or -1 with errno
 * (EPERM, ENOSPC, EINVAL where the host or the runtime's seccomp profile
 * forbids user namespaces; the helper's errno when a map cannot be written).
 */
int contain_enter_userns_mapped(int ns, uid_t uid, gid_t gid);

/* Step 6 of the user-namespace case alone: chroot(opts->chroot_dir),
 * chdir("/"), drop every capability and check.  0, or -1 with errno. */
int contain_userns_confine(const struct contain_opts *opts);

#endif
