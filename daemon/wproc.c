/*
 * wproc.c - the supervisor's side of one worker: channel I/O and reap.
 * See wproc.h.  Nothing a worker sends is trusted: frames are bounded by
 * proto/chan, JSON payloads must parse to objects, and the execution's
 * state decides whether a frame is allowed at all (exec.c).
 */
#include "daemon/wproc.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/exec.h"
#include "common/log.h"
#include "daemon/sched.h"
#include "daemon/sup.h"
#include "common/trace.h"
#include "policy/seccomp.h"     /* containment: seccomp_syscall_name */
#include "proto/chan.h"          /* WORKER_EXIT_SETUP */
#include "proto/jsonrpc.h"
#include "proto/mutant.h"

static void wproc_read_cb(struct ev_loop *loop, ev_io *io, int revents);
static void wproc_write_cb(struct ev_loop *loop, ev_io *io, int revents);

/* Room in a frame for what no limit names: the envelope, stats, the error
 * frame's message and traceback (TEXT_MAX each in the worker, escaped at
 * most six-fold), a tool call's tool and function names. */
#define FRAME_SLACK ((size_t)1 << 20)

static size_t sat_add(size_t a, uint64_t b)
{
    return b > SIZE_MAX - a ? SIZE_MAX : a + (size_t)b;
}

/*
 * The largest frame a worker may send for limits lim: the sum of every part
 * any frame type can carry.  CHAN_RESULT is the largest: the value (at most
 * max_message_bytes, the job's max_result_bytes), the bindings (at most
 * max_bindings_bytes) and binding_names (every name is also in the bindings:
 * at most max_bindings_bytes again).  CHAN_TOOL_CALL carries args up to
 * max_result_bytes, CHAN_ERROR only bounded text; CHAN_OUTPUT and
 * CHAN_SYSCALL have their own fixed bounds (proto/chan.h).
 */
static size_t max_frame(const struct sup *s, const struct limits *lim)
{
    size_t n = sat_add(FRAME_SLACK, s->cfg.max_message_bytes);

    n = sat_add(n, lim->max_bindings_bytes);            /* bindings */
    if (!MUTANT(FRAME_BOUND))
        n = sat_add(n, lim->max_bindings_bytes);        /* binding_names */
    return n;
}

struct wproc *wproc_new(struct sup *s, pid_t pid, int fd)
{
    struct wproc *w = calloc(1, sizeof *w);

    if (!w)
        return NULL;
    w->sup = s;
    w->pid = pid;
    w->born = ev_now(s->loop);
    w->fd = fd;
    chan_reader_init(&w->rd, max_frame(s, &s->cfg.ceilings), 1);
    list_init(&w->pool_node);
    list_add_tail(&s->workers, &w->node);
    ev_io_init(&w->rio, wproc_read_cb, fd, EV_READ);
    w->rio.data = w;
    ev_io_init(&w->wio, wproc_write_cb, fd, EV_WRITE);
    w->wio.data = w;
    ev_io_start(s->loop, &w->rio);
    return w;
}

/* A process's CPU clock (CPUCLOCK_SCHED of MAKE_PROCESS_CPUCLOCK in the
 * kernel's posix-timers ABI): what glibc's clock_getcpuclockid returns,
 * without the clock_getres probe it makes first (clock_gettime fails the
 * same way for a pid that is gone). */
static clockid_t cpu_clock(pid_t pid)
{
    return (clockid_t)((~(unsigned)pid << 3) | 2u);
}

uint64_t wproc_cpu_us(const struct wproc *w, uint64_t seen)
{
    struct timespec ts;

    if (w && w->reaped)
        return w->cpu_us_final;
    if (!w || w->killed || clock_gettime(cpu_clock(w->pid), &ts) != 0)
        return seen;
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

struct wproc *wproc_find(struct sup *s, pid_t pid)
{
    struct list_head *pos, *tmp;

    list_for_each_safe(pos, tmp, &s->workers) {
        struct wproc *w = list_entry(pos, struct wproc, node);
        if (w->pid == pid)
            return w;
    }
    return NULL;
}

void wproc_apply_limits(struct wproc *w, const struct limits *lim)
{
    w->rd.max_payload = max_frame(w->sup, lim);     /* nothing is held before the job */
    /* RLIMIT_AS and RLIMIT_CPU are lowered by the worker itself (see the job's
     * rlimit_* fields): prlimit on a worker that runs under another uid would
     * need CAP_SYS_RESOURCE.  The priority too (the job's nice field): setting
     * the nice value of a process of another uid, even raising it, needs
     * CAP_SYS_NICE, which a container's daemon often lacks, while a process
     * may always raise its own.  This call is for the other direction: with
     * CAP_SYS_NICE the pool waits at nice 19 (worker/zygote.c), and only the
     * supervisor may lower a worker from there to its job's value.  Without
     * the capability it fails (EPERM) and the worker's own call applies;
     * it succeeds for workers in a user namespace the daemon made, whose
     * owner holds every capability over them. */
    if (setpriority(PRIO_PROCESS, (id_t)w->pid, priority_nice(lim->priority, w->sup->nice)) != 0)
        log_debug("worker %d: setpriority: %s (the worker sets its own)", (int)w->pid,
                  strerror(errno));
}

static void wproc_flush(struct wproc *w)
{
    enum outq_status st = outq_flush(&w->out, w->fd);

    if (st == OUTQ_AGAIN) {
        ev_io_start(w->sup->loop, &w->wio);
        return;
    }
    if (st == OUTQ_ERROR)
        w->lost = 1;        /* the queue was dropped unwritten */
    /* done, or the worker is gone (its reap will tell) */
    ev_io_stop(w->sup->loop, &w->wio);
}

static void wproc_write_cb(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop; (void)revents;
    wproc_flush(io->data);
}

int wproc_send_json(struct wproc *w, uint32_t type, const json_t *payload)
{
    return wproc_send_spliced(w, type, payload, NULL, 0);
}

int wproc_send_spliced(struct wproc *w, uint32_t type, const json_t *payload,
                       const struct jp_splice *sp, size_t nsp)
{
    size_t bound = type == CHAN_JOB ? CHAN_JOB_MAX : CHAN_TOOL_RESULT_MAX, tlen, flen;
    unsigned char *frame;
    char *text;
    int rc;

    if (w->fd < 0 || w->killed)
        return -1;
    if (!(text = nsp ? jp_dump_spliced(payload, sp, nsp, &tlen)
                     : json_dumps(payload, JSON_COMPACT | JSON_ENCODE_ANY)))
        return -1;
    /* Re-encoding can grow a payload (0.1 prints as 0.10000000000000001):
     * judge what is sent, not what was received. */
    tlen = strlen(text);
    if (tlen > bound) {
        free(text);
        return -2;
    }
    frame = chan_frame_new(type, text, tlen, &flen);
    free(text);
    if (!frame)
        return -1;
    /* a worker holds at most one job and one tool answer at a time */
    rc = outq_append(&w->out, frame, flen, SIZE_MAX / 2);
    free(frame);
    if (rc < 0)
        return -1;
    wproc_flush(w);
    return 0;
}

void wproc_kill(struct wproc *w)
{
    if (w->killed)
        return;
    w->killed = 1;
    ev_io_stop(w->sup->loop, &w->rio);
    ev_io_stop(w->sup->loop, &w->wio);
    if (w->reaped)              /* killed by its own end frame, read at the reap:
                                 * its pid may be another process's already */
        return;
    w->sup->n_killed++;         /* counted down at the reap (wproc_exited) */
    kill(-w->pid, SIGKILL);
    kill(w->pid, SIGKILL);
}

void wproc_violation(struct wproc *w, const char *why)
{
    struct exec *e = w->exec;
    struct exec_evdata d = { .why = why };

    log_warn("worker %d: protocol violation: %s", (int)w->pid, why);
    wproc_kill(w);
    if (e)
        exec_event(e, XE_BAD, &d);
}

/* Containment: the worker's SIGSYS handler reports the number of
 * the forbidden call just before the worker dies by SIGSYS.  It comes from
 * a possibly compromised process, so it is a hint: kept (first one only)
 * and logged, never an event; exec.c uses it only if the worker really died
 * by SIGSYS.  The reader has already checked the exact payload size. */
static void wproc_syscall(struct wproc *w, const unsigned char *payload, size_t len)
{
    struct chan_syscall r;
    char name[64];

    if (w->has_syscall || len != sizeof r)
        return;
    memcpy(&r, payload, sizeof r);
    w->has_syscall = 1;
    w->syscall = r.nr;
    if (seccomp_syscall_name(r.nr, name, sizeof name) < 0)
        snprintf(name, sizeof name, "unknown");
    log_warn("worker %d: forbidden system call %ld (%s), as reported by the worker",
             (int)w->pid, (long)r.nr, name);
}

#define DENSE_TEXT "holds more values than the daemon passes on for its size " \
                   "(many small tables: each costs the daemon about 136 bytes to parse)"

/* A frame whose parse would exceed its memory budget (rpc_loadb_bounded)
 * may still come from a legitimate chunk: `local t = {} ... r[i] = t` for
 * millions of i encodes millions of `[]`.  A result becomes the chunk's
 * runtime_error, a tool call a tool error the chunk can catch; anything
 * else is left to the caller as a violation (returns 0). */
static int wproc_too_dense(struct wproc *w, enum exec_ev ev)
{
    struct exec *e = w->exec;
    struct exec_evdata d = { 0 };
    json_t *j;

    if (ev == XE_RESULT) {
        j = json_pack("{s:s,s:s}", "kind", "runtime_error", "message",
                      "cannot return the value: it " DENSE_TEXT);
        if (!j) {
            wproc_violation(w, "out of memory");
            return 1;
        }
        d.json = j;
        exec_event(e, XE_ERROR, &d);
        json_decref(j);
        return 1;
    }
    if (ev == XE_TOOL_CALL && e->state == ST_RUNNING && e->op == OP_EXECUTE) {
        j = json_pack("{s:b,s:s}", "ok", 0, "message", "the call's arguments " DENSE_TEXT);
        if (!j || wproc_send_json(w, CHAN_TOOL_RESULT, j) < 0)
            wproc_violation(w, "could not answer a tool call");
        json_decref(j);
        return 1;
    }
    return 0;
}

/*
 * A large CHAN_RESULT or CHAN_TOOL_CALL: validated without a tree
 * (proto/jsonpass), what only passes on to the client kept as text in d (a
 * result's value and bindings, a call's args), the rest built under the
 * frame's budget.  A result's binding_names is dropped: the supervisor
 * derives the names itself (rpc_envelope_new, proto/jsonrpc.h).  NULL when
 * invalid or (*dense) over the budget.
 */
static json_t *frame_envelope(const char *p, size_t len, enum exec_ev ev, struct exec_evdata *d,
                              int *dense)
{
    size_t budget = rpc_tree_budget(len);
    struct jp_span v = jp_trim(p, len), names;
    const struct rpc_keep call[] = { { "args", '[', 0, &d->raw } };
    const struct rpc_keep result[] = {
        { "value", 0, 0, &d->raw_value },
        { "bindings", '[', 0, &d->raw_bindings },
        { "binding_names", 0, 1, &names },      /* dropped: the supervisor derives them */
    };
    json_t *obj;

    if (jp_validate(p, len, JP_CHUNK) < 0 || v.p[0] != '{')
        return NULL;
    obj = ev == XE_TOOL_CALL ? rpc_envelope_new(v, call, 1, &budget, dense)
                             : rpc_envelope_new(v, result, 3, &budget, dense);
    if (!obj)
        d->raw = d->raw_value = d->raw_bindings = (struct jp_span){ NULL, 0 };
    return obj;
}

/* Turn one frame into an event of the attached execution. */
static void wproc_frame(struct wproc *w, uint32_t type, const unsigned char *payload, size_t len)
{
    struct exec_evdata d = { .payload = payload, .len = len };
    json_t *j = NULL;
    json_error_t jerr;
    enum exec_ev ev;

    w->spoke = 1;
    if (type == CHAN_SYSCALL) {     /* containment: see wproc_syscall() */
        wproc_syscall(w, payload, len);
        return;
    }
    if (!w->exec) {
        wproc_violation(w, "frame from a worker without a job");
        return;
    }
    switch (type) {
    case CHAN_OUTPUT:    ev = XE_OUTPUT; break;
    case CHAN_TOOL_CALL: ev = XE_TOOL_CALL; break;
    case CHAN_RESULT:    ev = XE_RESULT; TRACE(TR_END_READ); break;
    case CHAN_ERROR:     ev = XE_ERROR; TRACE(TR_END_READ); break;
    default:
        wproc_violation(w, "unknown frame type");
        return;
    }
    if (ev != XE_OUTPUT) {
        int dense = 0;

        /* (the mutant: every frame becomes a tree) */
        if (!MUTANT(PASS_THROUGH) && (ev == XE_RESULT || ev == XE_TOOL_CALL) && len > RPC_PASS_MIN)
            j = frame_envelope((const char *)payload, len, ev, &d, &dense);
        else
            j = rpc_loadb_bounded((const char *)payload, len, JSON_ALLOW_NUL, &jerr, &dense);
        if (dense && wproc_too_dense(w, ev))
            return;
        if (!json_is_object(j)) {
            json_decref(j);
            wproc_violation(w, "frame payload is not a JSON object");
            return;
        }
        d.json = j;
    }
    exec_event(w->exec, ev, &d);
    json_decref(j);
}

/* Read what is available now, at most `budget` bytes, and pass on every
 * complete frame.  Returns 1 at EOF (or once the worker is killed). */
static int wproc_drain(struct wproc *w, size_t budget)
{
    unsigned char buf[65536];
    const unsigned char *payload;
    uint32_t type;
    size_t len;

    for (;;) {
        ssize_t n;
        if (budget == 0)
            return 0;
        n = read(w->fd, buf, budget < sizeof buf ? budget : sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == ECONNRESET)
            w->lost = 1;    /* it closed its end with bytes unread (unix(7) streams) */
        if (n < 0)
            return errno == EAGAIN ? 0 : 1;
        if (n == 0)
            return 1;
        budget -= (size_t)n;
        if (chan_reader_feed(&w->rd, buf, (size_t)n) < 0) {
            wproc_violation(w, "out of memory reading the channel");
            return 1;
        }
        for (;;) {
            enum chan_status st = chan_reader_next(&w->rd, &type, &payload, &len);
            if (st == CHAN_AGAIN)
                break;
            if (st == CHAN_BAD) {
                wproc_violation(w, "malformed or oversized frame");
                return 1;
            }
            wproc_frame(w, type, payload, len);
            if (len >= SUP_TRIM_BYTES)
                sup_trim();
            if (w->killed)
                return 1;
        }
        /* A short read took everything the socket held; the (level-
         * triggered) watcher fires again for more.  Saves a read per event
         * that would only say EAGAIN. */
        if ((size_t)n < sizeof buf)
            return 0;
    }
}

static void wproc_read_cb(struct ev_loop *loop, ev_io *io, int revents)
{
    struct wproc *w = io->data;
    (void)revents;

    if (wproc_drain(w, SIZE_MAX))
        ev_io_stop(loop, &w->rio);   /* EOF: the reap will follow */
}

void wproc_catch_up(struct wproc *w)
{
    int avail = 0;

    if (w->killed || w->fd < 0 || ioctl(w->fd, FIONREAD, &avail) != 0 || avail <= 0)
        return;
    if (wproc_drain(w, (size_t)avail))
        ev_io_stop(w->sup->loop, &w->rio);
}

char wproc_state(pid_t pid)
{
    char path[32], buf[512], *p;
    ssize_t n;
    int fd;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    if (!(p = strrchr(buf, ')')) || p[1] != ' ')
        return 0;
    return p[2];
}

/* A worker's job is a few frames at most (the job, nothing else until it
 * speaks): it took them when the supervisor holds none unwritten and the
 * socket holds none unread.  For a unix(7) stream socket, SIOCOUTQ counts
 * the memory of the sent buffers the peer has not finished reading (not
 * bytes, but 0 exactly when all is read, and smaller when a buffer is). */
enum wproc_take wproc_job_look(struct wproc *w)
{
    size_t outq;
    int sockq = 0;
    uint64_t cpu;
    char st;

    if (w->spoke || w->killed || w->fd < 0 || ioctl(w->fd, SIOCOUTQ, &sockq) != 0)
        return WT_TAKEN;
    outq = outq_pending(&w->out);
    if (outq == 0 && sockq <= 0) {
        /* Read, or thrown away: a worker that closes its end (it exits)
         * frees what it left unread.  The close is marked on this end
         * first (a hang-up), so a socket that shows none was read from. */
        struct pollfd p = { .fd = w->fd, .events = POLLIN | POLLRDHUP };
        if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)))
            return WT_MOVING;   /* it is gone: its reap tells (wproc_untaken) */
        return WT_TAKEN;
    }
    cpu = wproc_cpu_us(w, 0);
    st = wproc_state(w->pid);
    if (MUTANT(HANDOVER_LOOK))
        return WT_MOVING;       /* mutant: a worker that does not take its job is waited for */
    if (!w->looked || outq < w->look_outq || (outq == w->look_outq && sockq < w->look_sockq) ||
        cpu != w->look_cpu || st == 'R' || st == 'Z' || st == 'X' || st == 0) {
        w->looked = 1;
        w->look_outq = outq;
        w->look_sockq = sockq;
        w->look_cpu = cpu;
        return WT_MOVING;
    }
    return WT_STILL;
}

int wproc_untaken(const struct wproc *w)
{
    if (MUTANT(HANDOVER_DEATH))
        return 0;               /* mutant: a death before the job is the job's crash */
    return !w->spoke && (w->lost || !outq_empty(&w->out));
}

void wproc_exited(struct wproc *w, int status, uint64_t cpu_us)
{
    struct sup *s = w->sup;
    struct exec *e;
    struct exec_evdata d = { .status = status, .w = w };
    int pooled, untaken;

    /* killed before now: counted in n_killed; the drain below may still
     * kill it (its end frame finishes the execution), uncounted */
    if (w->killed)
        sup_count_down(&s->n_killed, "n_killed");
    w->reaped = 1;
    w->cpu_us_final = cpu_us;
    if (!w->killed && w->fd >= 0)
        wproc_drain(w, SIZE_MAX); /* an end frame may still sit in the socket */
    untaken = d.untaken = !w->killed && w->exec && wproc_untaken(w);
    d.has_syscall = w->has_syscall;  /* containment: the SIGSYS report, if any */
    d.syscall = w->syscall;
    ev_io_stop(s->loop, &w->rio);
    ev_io_stop(s->loop, &w->wio);
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    list_del(&w->node);
    if ((pooled = list_linked(&w->pool_node))) {
        list_del(&w->pool_node);
        sup_count_down(&s->n_idle, "n_idle");
    }
    sup_count_down(&s->procs, "procs");
    e = w->exec;
    if (e) {
        e->w = NULL;
        w->exec = NULL;
        if (cpu_us || !e->cpu_us_seen)  /* the rusage is the final word */
            e->cpu_us_seen = cpu_us;
        exec_event(e, XE_EXIT, &d);
    }
    /* A worker that died on its own before doing a job (in the pool, in its
     * set-up, or handed a job it never read) is a failure of the supply:
     * without the back-off, a set-up that always fails refilled the pool as
     * fast as the zygote could fork. */
    if (!w->killed && !s->stopping &&
        (pooled || untaken || (WIFEXITED(status) && WEXITSTATUS(status) == WORKER_EXIT_SETUP)))
        sched_supply_failed(s, "worker %d died before its job (status 0x%x)", (int)w->pid,
                            status);
    chan_reader_free(&w->rd);
    outq_free(&w->out);
    free(w);
}
