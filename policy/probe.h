/* Runs in: supervisor */
/*
 * probe.h - the worker identity and containment layers, decided at start-up
 * by trying them in throwaway children.
 *
 * Called only in the supervisor, before the first zygote starts: the layers
 * are passed to every zygote as argv (daemon/spawn.c).
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
 * The active layers are logged once.
 *
 * Ownership: the caller's struct worker_layers holds the result (strings,
 * as the zygote's argv wants them); nothing is allocated.
 */
#ifndef SANDBOXD_PROBE_H
#define SANDBOXD_PROBE_H

#include <limits.h>

#include "policy/config.h"

/* The worker identity and containment layers, decided once. */
struct worker_layers {
    int  decided;
    char uid[16], gid[16], ns[16];  /* "" uid: no privilege drop */
    char chroot[PATH_MAX];          /* "" : no chroot */
};

/* Where the probe's lines go: the supervisor passes its log_msg, so this
 * module depends on nothing above policy/. */
typedef void probe_log_fn(enum log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Decide *l from cfg's [worker] user, group and chroot, unless l->decided
 * already.  0, or -1 after logging why: the daemon refuses to start. */
int probe_layers(const struct config *cfg, struct worker_layers *l, probe_log_fn *say);

#endif
