/* Runs in: zygote */
/*
 * zygote.h - the zygote process.
 *
 * Called only by main() of the sandboxd binary when it was exec'd as
 * `sandboxd --zygote FD PPID UID GID CHROOT NSFLAGS` (daemon/spawn.c builds
 * that argv).  The zygote builds the sandbox Lua state and the seccomp BPF
 * program once, then answers each one-byte spawn request on FD
 * (SOCK_SEQPACKET) by forking a worker with CLONE_PARENT, so the worker is
 * the supervisor's child, and sending back one struct zyg_msg (proto/chan.h)
 * with the supervisor's end of the worker channel attached (SCM_RIGHTS) when
 * pid > 0.
 */
#ifndef SANDBOXD_WORKER_ZYGOTE_H
#define SANDBOXD_WORKER_ZYGOTE_H

/* The zygote process itself: argv as built by spawn_start.  Never returns. */
void zygote_main(int argc, char **argv) __attribute__((noreturn));

#endif
