/*
 * seccomp.c - the worker's syscall allowlist (x86_64).
 *
 * The filter is built once, in the zygote, with libseccomp and exported as a
 * raw BPF program; each worker installs that program with one prctl() as the
 * last step of contain_worker().  Calls from another ABI (i386 `int 0x80`,
 * x32 numbers) take the bad-arch action, kill-process; no other
 * architecture is added.
 *
 * The default action (any x86_64 call not listed below) is SECCOMP_RET_TRAP:
 * the call is not executed and the kernel sends SIGSYS with the syscall
 * number in si_syscall.  The worker's SIGSYS handler (policy/contain.c,
 * installed just before the filter) writes one fixed-size CHAN_SYSCALL frame
 * on the channel and then makes a call this filter answers with
 * SCMP_ACT_KILL_PROCESS, so the worker still dies by SIGSYS and the
 * supervisor learns which call it was (as a hint: the process may have been
 * compromised).  The guarantee that a forbidden call ends the process does
 * not depend on the handler behaving:
 *  - the trapped call never runs, and the handler is fixed at containment
 *    (rt_sigaction is kill-process, so it cannot be replaced);
 *  - rt_sigreturn is kill-process: no handler in the worker ever returns, so
 *    execution can never resume after a forbidden call (and sigreturn-
 *    oriented programming has nothing to use);
 *  - SIGSYS is blocked while the handler runs and SA_RESETHAND resets it to
 *    the default action, so a second trap inside the handler kills at once
 *    (the kernel also forces SIG_DFL for a trap while SIGSYS is blocked);
 *  - a handler that cannot run (bad stack) means SIGSEGV, also a death.
 * See seccomp_policy_prepare() and docs/security.md for the trade-off.
 *
 * The allowlist, and why each entry is there:
 *
 *   read, write       the channel: the job, tool results, output and end
 *                     frames.  Only on chan_fd (argument 0 == chan_fd), so a
 *                     memory-corruption exploit cannot use fds 0-2 either.
 *   poll              a worker waiting for a tool answer or a session's next
 *                     chunk looks at the channel before it sleeps in read
 *                     (worker/look.c).  Only
 *                     with one descriptor and a zero timeout: it can learn
 *                     whether a descriptor it holds is ready, never wait.
 *   brk               glibc's main arena grows and trims with brk.
 *   mmap              glibc malloc serves chunks >= M_MMAP_THRESHOLD (and the
 *                     fallback when brk fails) with
 *                     mmap(NULL, n, PROT_READ|PROT_WRITE,
 *                          MAP_PRIVATE|MAP_ANONYMOUS, -1, 0).
 *                     Allowed only without PROT_EXEC, and only with
 *                     MAP_PRIVATE and MAP_ANONYMOUS set and no other flag but
 *                     MAP_NORESERVE: no file or shared mappings, no MAP_FIXED.
 *   munmap            freeing mmapped chunks.
 *   mremap            realloc() of an mmapped chunk (luaL_Buffer and table
 *                     growth); flags within MREMAP_MAYMOVE, so no
 *                     MREMAP_FIXED/DONTUNMAP (which could move pages over
 *                     other mappings).
 *   madvise           glibc trimming: advice MADV_DONTNEED or MADV_FREE only.
 *   clock_gettime,    os.clock() and table.sort's pivot seed (clock(), which
 *   clock_getres      is a real CLOCK_PROCESS_CPUTIME_ID syscall), and the
 *                     vDSO fallback on hosts whose clocksource has none.
 *                     Clock id in {REALTIME, MONOTONIC, PROCESS_CPUTIME_ID,
 *                     THREAD_CPUTIME_ID, MONOTONIC_RAW, REALTIME_COARSE,
 *                     MONOTONIC_COARSE, BOOTTIME}: no dynamic (negative) ids,
 *                     which name other processes' CPU clocks.
 *   gettimeofday,     os.time()/time() when the vDSO is unusable; they take
 *   time              no clock id and only write to caller memory.
 *   setpriority       the job's priority, which the worker applies to itself
 *                     when it takes the job (a supervisor without
 *                     CAP_SYS_NICE cannot renice a worker of another uid).
 *                     Only PRIO_PROCESS of itself (who == 0), and only to a
 *                     nice value from the zygote's own at prepare time (the
 *                     daemon's; 0 if negative) to 19: a worker can lower its
 *                     priority, never raise it above the daemon's, nor touch
 *                     another process.
 *   exit_group, exit  termination (_exit).
 *   restart_syscall   the kernel's continuation of an allowed call that a
 *                     stop interrupted (SIGSTOP/SIGCONT, a cgroup freeze, a
 *                     ptrace interrupt): a poll that finds nothing ready
 *                     while a stop is pending returns into it.  It runs only
 *                     what the kernel saved for the interrupted call (else
 *                     it fails with EINTR), so it adds no call of its own.
 *
 * Kill-process at once (no report, see above): rt_sigreturn and
 * rt_sigaction.  No handler in the worker returns, and the SIGSYS handler
 * ends with rt_sigaction(SIGSYS, NULL, NULL) - a no-op query if it were
 * ever allowed - to die by this rule.
 *
 * Deliberately absent (each traps, is reported, and kills): openat/open, socket, connect, clone,
 * clone3, fork, vfork, execve, execveat, ptrace, prctl, mprotect, kill,
 * tgkill, ioctl, getpid, getrandom, futex, rt_sigprocmask, sigaltstack,
 * fstat.  getpid is not needed: neither Lua nor the worker calls it after
 * the filter (and glibc does not cache it, so a stray call would be a real
 * syscall we want to see).  abort() would need rt_sigprocmask/tgkill; dying
 * by SIGSYS instead is an acceptable crash.  stdio must not be used after
 * the filter (its first write calls fstat).
 *
 * The audit build (SANDBOXD_SYSCALL_AUDIT=1: make test-audit only, never
 * installed) lets rt_sigreturn through, so that its SIGSYS handler
 * (sigsys_audit in policy/contain.c) can fail the refused call with ENOSYS
 * and return: a suite's chunks run on and every call outside the list is
 * reported (docs/security.md, "The syscall audit").  Nothing else differs.
 *
 * Sanitizer builds (SANDBOXD_SANITIZE=1) add the few calls the ASan/UBSan
 * runtime makes on its allocation and noreturn paths (mmap MAP_FIXED,
 * madvise NOHUGEPAGE/DONTDUMP, sigaltstack query); see sanitizer_rules().
 */
#include "policy/seccomp.h"
#include "proto/mutant.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/resource.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef SANDBOXD_SANITIZE
#define SANDBOXD_SANITIZE 0
#endif
#ifndef SANDBOXD_SYSCALL_AUDIT
#define SANDBOXD_SYSCALL_AUDIT 0    /* 1 only in make test-audit's build */
#endif

/* libseccomp returns negative errno values; keep the first failure. */
#define TRY(expr)                 \
    do {                          \
        rc = (expr);              \
        if (rc < 0)               \
            return rc;            \
    } while (0)

/* Argument n of the call equal to a: what SCMP_An(SCMP_CMP_EQ, a) builds,
 * with every field named.  libseccomp's macro leaves datum_b to implicit
 * zeroing, which -Wmissing-field-initializers (clang's -Wextra) rejects. */
#define ARG_EQ(n, a)                                                     \
    ((struct scmp_arg_cmp){ .arg = (n), .op = SCMP_CMP_EQ,               \
                            .datum_a = (scmp_datum_t)(a), .datum_b = 0 })

/* The clock ids a worker may read (see the header comment). */
static const int allowed_clocks[] = {
    CLOCK_REALTIME,         CLOCK_MONOTONIC,       CLOCK_PROCESS_CPUTIME_ID,
    CLOCK_THREAD_CPUTIME_ID, CLOCK_MONOTONIC_RAW,  CLOCK_REALTIME_COARSE,
    CLOCK_MONOTONIC_COARSE, CLOCK_BOOTTIME,
};

/* mmap flags: MAP_PRIVATE|MAP_ANONYMOUS must be set; only the bits in
 * MMAP_OPTIONAL may also be set.  One masked comparison expresses both. */
#define MMAP_REQUIRED ((uint64_t)(MAP_PRIVATE | MAP_ANONYMOUS))
#if SANDBOXD_SANITIZE
/* Sanitizer-only: the ASan allocator maps its reserved regions in place
 * (see sanitizer_rules()). */
#define MMAP_OPTIONAL ((uint64_t)(MAP_NORESERVE | MAP_FIXED))
#else
#define MMAP_OPTIONAL ((uint64_t)MAP_NORESERVE)
#endif

static int allow(scmp_filter_ctx ctx, int nr)
{
    return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
}

static int allow1(scmp_filter_ctx ctx, int nr, struct scmp_arg_cmp cmp)
{
    return seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, nr, 1, cmp);
}

static int allow2(scmp_filter_ctx ctx, int nr, struct scmp_arg_cmp a,
                  struct scmp_arg_cmp b)
{
    return seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, nr, 2, a, b);
}

/* read/write: the channel only. */
static int channel_rules(scmp_filter_ctx ctx, int chan_fd)
{
    int rc;
    /* the job frame and tool results */
    TRY(allow1(ctx, SCMP_SYS(read), ARG_EQ(0, (scmp_datum_t)chan_fd)));
    /* output, tool calls, the end frame */
    TRY(allow1(ctx, SCMP_SYS(write), ARG_EQ(0, (scmp_datum_t)chan_fd)));
    /* a look at the channel before a wait: one descriptor, no wait */
    if (MUTANT(POLL_NOWAIT))
        TRY(allow1(ctx, SCMP_SYS(poll), ARG_EQ(1, 1)));    /* mutant: may wait */
    else
        TRY(allow2(ctx, SCMP_SYS(poll), ARG_EQ(1, 1), ARG_EQ(2, 0)));
    return 0;
}

/* The allocator: brk, anonymous private non-executable mmap, munmap,
 * mremap without FIXED, madvise DONTNEED/FREE. */
static int memory_rules(scmp_filter_ctx ctx)
{
    int rc;
    TRY(allow(ctx, SCMP_SYS(brk)));           /* main arena growth/trim */
    /* large chunks: anonymous, private, never executable */
    TRY(allow2(ctx, SCMP_SYS(mmap),
               SCMP_A2(SCMP_CMP_MASKED_EQ, (scmp_datum_t)PROT_EXEC, 0),
               SCMP_A3(SCMP_CMP_MASKED_EQ, ~(scmp_datum_t)MMAP_OPTIONAL,
                       (scmp_datum_t)MMAP_REQUIRED)));
    TRY(allow(ctx, SCMP_SYS(munmap)));        /* free() of mmapped chunks */
    /* realloc() of mmapped chunks; MAYMOVE only, no FIXED/DONTUNMAP */
    TRY(allow1(ctx, SCMP_SYS(mremap),
               SCMP_A3(SCMP_CMP_MASKED_EQ, ~(scmp_datum_t)MREMAP_MAYMOVE, 0)));
    /* glibc trimming */
    TRY(allow1(ctx, SCMP_SYS(madvise), ARG_EQ(2, MADV_DONTNEED)));
    TRY(allow1(ctx, SCMP_SYS(madvise), ARG_EQ(2, MADV_FREE)));
    return 0;
}

/* Clocks: a fixed set of clock ids; time and gettimeofday take none. */
static int clock_rules(scmp_filter_ctx ctx)
{
    int rc;
    for (size_t i = 0; i < sizeof allowed_clocks / sizeof allowed_clocks[0]; i++) {
        struct scmp_arg_cmp id = ARG_EQ(0, (scmp_datum_t)allowed_clocks[i]);
        TRY(allow1(ctx, SCMP_SYS(clock_gettime), id)); /* os.clock, sort seed */
        TRY(allow1(ctx, SCMP_SYS(clock_getres), id));  /* harmless twin */
    }
    TRY(allow(ctx, SCMP_SYS(gettimeofday)));  /* vDSO fallback */
    TRY(allow(ctx, SCMP_SYS(time)));          /* os.time(), vDSO fallback */
    return 0;
}

/* setrlimit(RLIMIT_AS / RLIMIT_CPU) on itself: the worker lowers its own
 * kernel backstops once it knows its job (prlimit from the supervisor needs
 * CAP_SYS_RESOURCE once the worker runs under another uid).  Lowering is
 * always allowed; raising is bounded by the hard limits contain_worker set.
 * pid must be 0 (self) and old_limit NULL. */
static int rlimit_rules(scmp_filter_ctx ctx)
{
    static const int resources[] = { RLIMIT_AS, RLIMIT_CPU };
    int rc;

    for (size_t i = 0; i < sizeof resources / sizeof resources[0]; i++)
        TRY(seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 3,
                                   ARG_EQ(0, 0),
                                   ARG_EQ(1, (scmp_datum_t)resources[i]),
                                   ARG_EQ(3, 0)));
    return 0;
}

/* setpriority(PRIO_PROCESS, 0, nice) for each nice in [the caller's nice
 * value now (at least 0), 19], one exact rule each.  The comparisons are on
 * the whole 64-bit registers, while the kernel reads ints: a value with high
 * bits set is refused here whatever its low half says, so nothing passes
 * that the kernel would read as another target or a value out of range. */
static int nice_rules(scmp_filter_ctx ctx)
{
    int rc, base;

    base = getpriority(PRIO_PROCESS, 0);
    if (base < 0)               /* -1 is a nice value too, or an error: 0 */
        base = 0;
    if (MUTANT(NICE_UNPINNED))  /* the mutant: any target, any value */
        return allow(ctx, SCMP_SYS(setpriority));
    for (int nice = base; nice <= 19; nice++)
        TRY(seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, SCMP_SYS(setpriority), 3,
                                   ARG_EQ(0, PRIO_PROCESS), ARG_EQ(1, 0), ARG_EQ(2, nice)));
    return 0;
}

/* Termination. */
static int exit_rules(scmp_filter_ctx ctx)
{
    int rc;
    TRY(allow(ctx, SCMP_SYS(exit_group)));    /* _exit() */
    TRY(allow(ctx, SCMP_SYS(exit)));          /* thread exit, for completeness */
    if (!MUTANT(RESTART_SYSCALL))   /* the mutant: a stop during a look kills the worker */
        TRY(allow(ctx, SCMP_SYS(restart_syscall)));   /* an interrupted call goes on */
    return 0;
}

/* Signal plumbing the SIGSYS report depends on: kill-process, not trap.
 * rt_sigreturn: no worker handler returns, so a forbidden call can never
 * be resumed (and no SROP).  rt_sigaction: the handler cannot be replaced;
 * the handler's own last call is rt_sigaction(SIGSYS, NULL, NULL). */
static int kill_rules(scmp_filter_ctx ctx)
{
    int rc;
    /* the audit build (policy/contain.c, sigsys_audit): the handler returns */
    TRY(seccomp_rule_add(ctx, SANDBOXD_SYSCALL_AUDIT ? SCMP_ACT_ALLOW : SCMP_ACT_KILL_PROCESS,
                         SCMP_SYS(rt_sigreturn), 0));
    TRY(seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(rt_sigaction), 0));
    return 0;
}

#if SANDBOXD_SANITIZE
/* Sanitizer-only entries, found by running Lua and the unit-test children
 * under the filter with strace (GCC 12 libasan, Debian 12):
 *  - mmap with MAP_FIXED (in MMAP_OPTIONAL above): the ASan allocator maps
 *    its size-class regions in place, and re-maps large shadow ranges with
 *    MAP_FIXED|MAP_NORESERVE when it clears them;
 *  - madvise MADV_NOHUGEPAGE and MADV_DONTDUMP: applied to every shadow
 *    range it re-maps (no_huge_pages_for_shadow, use_madv_dontdump);
 *  - sigaltstack(NULL, &old): __asan_handle_no_return, run before every
 *    noreturn call (_exit, longjmp out of a Lua error), asks whether it is on
 *    the alternate stack.  Only the query form: argument 0 must be NULL.
 * Reports are not allowed for: an ASan/UBSan report's first write(2) kills
 * the worker with SIGSYS (its fd 2 is /dev/null anyway), which the
 * supervisor already treats as a crash. */
static int sanitizer_rules(scmp_filter_ctx ctx)
{
    int rc;
    /* sanitizer-only: shadow re-mapping */
    TRY(allow1(ctx, SCMP_SYS(madvise), ARG_EQ(2, MADV_NOHUGEPAGE)));
    TRY(allow1(ctx, SCMP_SYS(madvise), ARG_EQ(2, MADV_DONTDUMP)));
    /* sanitizer-only: __asan_handle_no_return's query, never a set */
    TRY(allow1(ctx, SCMP_SYS(sigaltstack), ARG_EQ(0, 0)));
    return 0;
}
#endif

/* Export the compiled filter into a malloc'd sock_filter array.  libseccomp
 * 2.5.4 can only write it to an fd, so go through a memfd. */
static int export_filter(scmp_filter_ctx ctx, struct sock_fprog *out)
{
    int rc = -1, fd = -1;
    struct sock_filter *insns = NULL;
    struct stat st;

    fd = memfd_create("sandboxd-seccomp", MFD_CLOEXEC);
    if (fd < 0)
        goto out;
    int erc = seccomp_export_bpf(ctx, fd);
    if (erc < 0) {
        errno = -erc;
        goto out;
    }
    if (fstat(fd, &st) < 0)
        goto out;
    size_t size = (size_t)st.st_size;
    size_t n = size / sizeof *insns;
    if (n == 0 || n > BPF_MAXINSNS || size % sizeof *insns != 0) {
        errno = E2BIG;
        goto out;
    }
    insns = malloc(size);
    if (!insns)
        goto out;
    ssize_t got = pread(fd, insns, size, 0);
    if (got != (ssize_t)size) {
        if (got >= 0)
            errno = EIO;
        goto out;
    }
    out->len = (unsigned short)n;
    out->filter = insns;
    insns = NULL;
    rc = 0;
out:
    free(insns);
    if (fd >= 0) {
        int saved = errno;
        close(fd);
        errno = saved;
    }
    return rc;
}

static int add_rules(scmp_filter_ctx ctx, int chan_fd)
{
    int rc;
    TRY(seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS));
    TRY(channel_rules(ctx, chan_fd));
    TRY(memory_rules(ctx));
    TRY(clock_rules(ctx));
    TRY(rlimit_rules(ctx));
    TRY(nice_rules(ctx));
    TRY(exit_rules(ctx));
    TRY(kill_rules(ctx));
#if SANDBOXD_SANITIZE
    TRY(sanitizer_rules(ctx));
#endif
    return 0;
}

int seccomp_policy_prepare(int chan_fd, struct sock_fprog *out)
{
    int rc = -1;
    scmp_filter_ctx ctx = NULL;

    if (chan_fd < 0 || !out) {
        errno = EINVAL;
        return -1;
    }
    out->len = 0;
    out->filter = NULL;
    /* TRAP, not KILL_PROCESS: the SIGSYS handler reports the number, then
     * dies by kill_rules() (see the header comment). */
    ctx = seccomp_init(SCMP_ACT_TRAP);
    if (!ctx) {
        errno = ENOMEM;
        goto out;
    }
    int arc = add_rules(ctx, chan_fd);
    if (arc < 0) {
        errno = -arc;
        goto out;
    }
    rc = export_filter(ctx, out);
out:
    if (ctx) {
        int saved = errno;
        seccomp_release(ctx);
        errno = saved;
    }
    return rc;
}

int seccomp_policy_install(const struct sock_fprog *prog)
{
    if (!prog || !prog->filter || prog->len == 0) {
        errno = EINVAL;
        return -1;
    }
    /* The kernel takes a non-const pointer but does not write through it. */
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, (unsigned long)prog, 0, 0) == 0 ? 0 : -1;
}

void seccomp_policy_free(struct sock_fprog *prog)
{
    if (!prog)
        return;
    free(prog->filter);
    prog->filter = NULL;
    prog->len = 0;
}

int seccomp_syscall_name(long nr, char *buf, size_t len)
{
    char *name;

    if (!buf || len == 0)
        return -1;
    buf[0] = '\0';
    if (nr < 0 || nr > INT_MAX)
        return -1;
    name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, (int)nr);
    if (!name)
        return -1;
    snprintf(buf, len, "%s", name);
    free(name);
    return 0;
}
