/* Runs in: supervisor */
/*
 * wproc.h - a worker process seen from the supervisor: its channel, its
 * pid, and its reap.
 *
 * Contract:
 *  - wproc_new() takes ownership of the channel fd handed over by the zygote.
 *    The wproc lives until the process is reaped (wproc_exited), whatever
 *    happens to its execution.
 *  - Frames are read non-blocking and bounded (proto/chan.h); each becomes
 *    an event of the attached execution.  A frame from a pooled worker, a bad
 *    frame, or a malformed JSON payload is a protocol violation: the worker is
 *    killed and its execution answered with `crashed`.
 *  - wproc_kill() sends SIGKILL to the worker's process group and pid and
 *    stops reading; the reap still follows.
 *  - Whether a worker took its first job (the hand-over, exec.h) is asked
 *    of the kernel, never of the worker: wproc_job_look() while it lives,
 *    wproc_untaken() once it is gone.  Nothing is sent to it for this.
 */
#ifndef SANDBOXD_WPROC_H
#define SANDBOXD_WPROC_H

#include <ev.h>
#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/list.h"
#include "daemon/outq.h"
#include "policy/config.h"
#include "proto/chan.h"
#include "proto/jsonpass.h"

struct sup;
struct exec;

struct wproc {
    struct sup *sup;
    struct list_head node;      /* in sup->workers until reaped */
    struct list_head pool_node; /* in sup->idle while pooled */
    pid_t  pid;
    unsigned shard;             /* the zygote that forked it (sup->zyg[shard]) */
    ev_tstamp born;             /* when its hand-over was read */
    int    fd;                  /* channel, non-blocking; -1 once closed */
    ev_io  rio, wio;
    struct chan_reader rd;
    struct outq out;            /* frames not yet written to the worker */
    struct exec *exec;          /* NULL while pooled or after its execution ended */
    int    killed;
    int    spoke;               /* a frame has come from it */
    int    lost;                /* bytes sent to it were never read: it closed its end
                                 * with some unread (ECONNRESET), or a write found it gone */
    /* wproc_job_look()'s last sample: frames not yet written, the socket's
     * unread bytes (SIOCOUTQ), its CPU time; looked once one was taken */
    int    looked;
    size_t look_outq;
    int    look_sockq;
    uint64_t look_cpu;
    int    reaped;              /* wproc_exited() is running: cpu_us_final is set */
    uint64_t cpu_us_final;      /* its rusage (user + system) from the reap */
    /* containment: the first CHAN_SYSCALL report (a hint), if any */
    int    has_syscall;
    long   syscall;
};

struct wproc *wproc_new(struct sup *s, pid_t pid, int fd);
/* The job's frame bound (every part a frame may carry under lim) and its
 * priority, applied from outside (setpriority), which needs CAP_SYS_NICE
 * for a worker of another uid: without it the call fails and the worker's
 * own setpriority (it may raise its own nice value) applies it.  The worker
 * sets its own RLIMIT_AS/RLIMIT_CPU and nice value from the job
 * (worker/worker.c apply_rlimits). */
void wproc_apply_limits(struct wproc *w, const struct limits *lim);
/* Queue one frame with a JSON payload (borrowed).  0; -2 when the encoded
 * payload is above what the worker reads for that type (CHAN_JOB_MAX,
 * CHAN_TOOL_RESULT_MAX; nothing is queued); -1 on other failures. */
int  wproc_send_json(struct wproc *w, uint32_t type, const json_t *payload);
/* The same with raw JSON in place of jp_token(i) (proto/jsonpass.h). */
int  wproc_send_spliced(struct wproc *w, uint32_t type, const json_t *payload,
                        const struct jp_splice *sp, size_t nsp);
void wproc_kill(struct wproc *w);
/* Pass on the frames already waiting in the channel (what FIONREAD counts
 * now: bounded, never blocks), so a verdict of the supervisor's own (a
 * deadline, a cancel) does not overtake what the worker sent before it.
 * The frames may end the execution. */
void wproc_catch_up(struct wproc *w);
/* Kill for a protocol violation and tell its execution (XE_BAD). */
void wproc_violation(struct wproc *w, const char *why);
/* The process exited (cpu_us from its rusage): drain what it sent, detach,
 * release.  Frees w. */
void wproc_exited(struct wproc *w, int status, uint64_t cpu_us);
/* The worker's CPU time in µs as the kernel counts it, measured here, never
 * the figure a worker reports about itself: its rusage once reaped (an end
 * frame may be read only at the reap), else its CPU clock while it lives;
 * `seen`, the caller's last sample, when w is NULL, killed or gone. */
uint64_t wproc_cpu_us(const struct wproc *w, uint64_t seen);
/* Has w taken the job it was handed, its first frame (exec.h, "the
 * hand-over")?  WT_TAKEN: it read every byte sent to it, or has sent a
 * frame, or cannot be asked (killed, channel closed, the ioctl refused: no
 * verdict on ignorance).  WT_MOVING: not yet, but it shows life since the
 * last look (it read some, used CPU, is runnable), or this is the first
 * look, which only takes a sample; or it has closed its end or exited,
 * and its reap will tell (wproc_untaken).
 * WT_STILL: not yet, and since the last look it read nothing, used no CPU
 * and is not runnable: stopped (SIGSTOP, a tracer), frozen (a cgroup
 * freezer), or asleep on something other than its channel.  Costs an
 * ioctl and a poll, or an ioctl, a CPU clock read and a read of
 * /proc/PID/stat; never blocks. */
enum wproc_take { WT_TAKEN, WT_MOVING, WT_STILL };
enum wproc_take wproc_job_look(struct wproc *w);
/* After its exit: did w leave its job unread (never spoke, and bytes sent
 * to it were never read or never written)?  Then nothing of the job ran. */
int wproc_untaken(const struct wproc *w);
/* The state letter of /proc/PID/stat (R, S, D, T, t, Z, ...), or 0 when
 * it cannot be read (no /proc, the process is gone). */
char wproc_state(pid_t pid);
/* Find a live worker by pid; NULL if unknown. */
struct wproc *wproc_find(struct sup *s, pid_t pid);

#endif
