/* Runs in: supervisor, zygote, worker */
/*
 * seccomp.h - the worker's syscall allowlist, compiled once, installed cheaply.
 *
 * Contract:
 *  - seccomp_policy_prepare() builds the allowlist with libseccomp (default
 *    action kill-process, other architectures killed, read/write only on
 *    chan_fd, mmap without PROT_EXEC, a fixed set of clock ids, ...) and
 *    exports it as a BPF program the caller owns (free with
 *    seccomp_policy_free).  Runs once, in the zygote.
 *  - seccomp_policy_install() loads a prepared program into the calling
 *    process with prctl(PR_SET_SECCOMP); no_new_privs must already be set.
 *    It makes no allocation.  Returns 0 or -1 with errno set.
 *  - The list itself and the reason for each entry are documented in
 *    policy/seccomp.c and docs/security.md.
 *  - A forbidden x86_64 call traps (SIGSYS with the number); the worker's
 *    handler (policy/contain.c) reports it with a CHAN_SYSCALL frame and
 *    dies by a kill-process rule.  Other ABIs, rt_sigreturn and rt_sigaction
 *    kill the process at once, without a report.  (The audit build,
 *    SANDBOXD_SYSCALL_AUDIT=1, allows rt_sigreturn: see seccomp.c.)
 *  - seccomp_syscall_name() names an x86_64 syscall number (for logs and
 *    error data) into buf; 0, or -1 when the number is unknown (buf "").
 */
#ifndef SANDBOXD_SECCOMP_H
#define SANDBOXD_SECCOMP_H

#include <linux/filter.h>
#include <stddef.h>

int  seccomp_policy_prepare(int chan_fd, struct sock_fprog *out);
int  seccomp_policy_install(const struct sock_fprog *prog);
void seccomp_policy_free(struct sock_fprog *prog);
int  seccomp_syscall_name(long nr, char *buf, size_t len);

#endif
