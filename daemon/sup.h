/* Runs in: supervisor */
/*
 * sup.h - the supervisor context: the one object that owns everything the
 * daemon holds (the loop, the config, the listener, the zygotes, every
 * connection, execution and worker process).
 *
 * The rule: state lives here, reached through a struct sup or what it owns.
 * A file-scope or function-static variable that is not const is allowed only
 * for state that belongs to the process rather than to the daemon's work,
 * and these are all of them in the supervisor's code:
 *   common/log.c      threshold, to_journal: the log level and whether
 *                     stderr is the journal (the zygote has its own)
 *   daemon/metrics.c  reg: the counters and histograms, which only grow with
 *                     the process (gauges are read from struct sup at scrape time)
 *   daemon/main.c     had_tty: whether the daemon began with a terminal
 *   daemon/spawn.c    zygote_env()'s env and buf: the block passed to execve
 *   proto/jsonrpc.c   budget_on, budget_left, budget_hit, installed: the
 *                     parse budget, because jansson's allocator is per process
 *   proto/jsonpass.c  nonce: the splice tokens' random part, per process
 *   common/trace.c    trace_t: the stamps, in bench builds (make trace) only
 * Tables of names, keys and bounds are static const.  A new mutable one is
 * named here, with its reason (docs/hacking.md, "Globals").
 *
 * Counting rules (the scheduler's invariants, kept by sched.c, wproc.c and
 * exec.c; every decrement goes through sup_count_down):
 *   procs      = live worker processes + spawn requests not yet answered;
 *                never above cfg.max_workers.
 *   n_idle     = workers in the warm pool, not yet given a job.
 *   pending    = spawn requests the zygotes have not answered (all shards).
 *   n_killed   = workers killed and not yet reaped (still in procs).
 *   n_starting = executions in STARTING, each waiting for the next worker.
 *   queued     = executions in QUEUED, across all connections.
 */
#ifndef SANDBOXD_SUP_H
#define SANDBOXD_SUP_H

#include <ev.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/list.h"
#include "policy/config.h"
#include "policy/probe.h"

/* A shard: one zygote and the workers it forked.  With more than one
 * shard, each zygote (and so each of its workers) is pinned to one CPU. */
#define SHARDS_MAX 64
struct zygote {
    struct sup *sup;
    unsigned shard;               /* its index in sup->zyg */
    int      cpu;                 /* the CPU it is pinned to; -1: not pinned */
    pid_t    pid;                 /* 0: not running */
    int      fd;
    unsigned pending;             /* its spawn requests not yet answered */
    int     *held;                /* owned: a descriptor held per pending request */
    unsigned n_held, cap_held;    /* (spawn.c: where its hand-over will land) */
    ev_io    io;
    ev_tstamp started;
    ev_tstamp progress;           /* last hand-over, or the first unanswered request */
    ev_timer watch;               /* a zygote that answers no request is killed */
};

struct sup {
    struct ev_loop *loop;
    struct config   cfg;          /* current config; reload replaces it */
    const char     *config_path;  /* borrowed from argv; NULL: built-in defaults */
    const char     *socket_override; /* -s, borrowed from argv */
    const char     *self_exe;     /* for exec'ing the zygote */

    /* listener */
    int      listen_fd;
    int      socket_owned;        /* we created the file: unlink at exit */
    dev_t    socket_dev;          /* ... and it is this file (lstat after bind): */
    ino_t    socket_ino;          /* another one at the path now is left alone */
    char    *socket_path;         /* owned */
    ev_io    accept_io;
    ev_timer accept_pause;
    unsigned accept_pauses;       /* pauses for want of descriptors, in a row */
    unsigned accept_quiet;        /* of them, not logged since the last report */
    ev_tstamp accept_logged;      /* when one was last logged */

    /* the zygotes: one per shard (spawn.h) */
    struct worker_layers layers;
    struct zygote zyg[SHARDS_MAX];
    unsigned n_shards;            /* zygotes in zyg[], fixed at start (>= 1) */

    /* the supply of workers (sched.c, sched_supply_failed) */
    unsigned supply_fails;        /* failures to get a worker in a row; 0: healthy */
    ev_tstamp supply_hold;        /* no spawn request (or zygote start) before this */
    ev_tstamp supply_since;       /* the first failure of the streak (health) */
    ev_tstamp zygote_failed_at;   /* the last failure while no zygote ran: only a
                                   * worker handed over after it proves the supply */
    ev_timer supply_timer;        /* fires at supply_hold */
    char     supply_why[160];     /* the last failure, for logs and answers */
    ev_tstamp supply_logged;      /* when a failure was last logged */
    unsigned supply_quiet;        /* failures not logged since then */
    ev_timer pool_check;          /* the warm pool's liveness check */

    /* scheduling (see header comment) */
    unsigned procs, pending, queued;
    unsigned n_idle, n_starting;
    unsigned n_killed;
    unsigned ncpu;                /* CPUs this process may run on (>= 1) */
    int      nice;                /* this process's nice value at start: workers run at
                                   * or below it (priority_nice) */
    pid_t    reaped_unknown[64]; /* exited before the zygote's hand-over was read */
    int      reaped_status[64];
    unsigned reaped_next;
    struct list_head idle;        /* struct wproc, warm pool */
    struct list_head starting;    /* struct exec, FIFO */
    struct list_head rr;          /* struct conn with queued executions, round-robin */
    struct list_head workers;     /* every struct wproc not yet reaped */
    struct list_head conns;       /* every struct conn */
    struct list_head doomed;      /* struct conn closing at the next iteration */
    ev_prepare doomed_prep;
    uint64_t next_conn_id;
    unsigned n_conns;             /* open client connections */
    struct list_head refused;     /* lingering refused connections (refuse.c) */
    unsigned n_refused;
    size_t   input_bytes;         /* their input buffers, allocated (describe) */
    size_t   output_bytes;        /* their answers queued, not yet written */

    unsigned n_sessions;          /* open sessions (OP_SESSION execs not yet
                                   * freed), each holding or awaiting a worker;
                                   * <= cfg.max_sessions when opened */
    uint64_t sessions_opened;     /* session/open requests accepted so far */
    uint64_t next_exec_seq;
    uint64_t workers_started;     /* workers handed over by the zygote (describe) */
    int      stopping;
    ev_timer grace;
    ev_tstamp grace_start;
    ev_signal sig_chld, sig_term, sig_int, sig_hup;
};

/* Decrement one of the counters above.  They only ever count list members
 * or requests that exist, so a decrement at zero is a bookkeeping bug: it is
 * logged and the counter stays at zero instead of wrapping to UINT_MAX (a
 * wrapped `queued` made the scheduler pop an empty queue). */
void sup_count_down(unsigned *counter, const char *name);

/* After a message or answer of at least SUP_TRIM_BYTES is handled, the
 * heap is trimmed (malloc_trim): the pages its tree and copies took go back
 * to the kernel at once instead of staying in the free lists. */
#define SUP_TRIM_BYTES ((size_t)1 << 20)
void sup_trim(void);

/* The release (the top-level file VERSION, which the Makefile gives as
 * -DSANDBOXD_VERSION) and the protocol this daemon speaks, as --version and
 * describe report them: protocol_version is the major version, an integer,
 * and protocol the whole "major.minor" (docs/protocol.md, 3.6). */
#ifndef SANDBOXD_VERSION
#error "SANDBOXD_VERSION comes from the file VERSION: build with make"
#endif
#define SANDBOXD_PROTOCOL         1
#define SANDBOXD_PROTOCOL_VERSION "1.2"

#endif
