/*
 * sched.c - admission, round-robin queueing, worker hand-out, warm pool
 * (and its liveness), the supply of workers (back-off after failures), and
 * reaping.  See sched.h and the counting rules in sup.h.
 */
#include "daemon/sched.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/conn.h"
#include "daemon/exec.h"
#include "common/log.h"
#include "daemon/sup.h"
#include "common/trace.h"
#include "daemon/wproc.h"
#include "daemon/spawn.h"
#include "proto/mutant.h"

/* The number of worker processes there may be: max_workers, except that
 * one worker beyond the open sessions is always the executions'.  A reload
 * that lowers max_workers under the sessions would otherwise leave every
 * execute queued, with no clock, until a session closes; session/open keeps
 * sessions below max_workers, so this matters only after such a reload. */
static unsigned worker_bound(const struct sup *s)
{
    unsigned max = s->cfg.max_workers;

    if (!MUTANT(SESSION_SLOT) && max < s->n_sessions + 1)
        max = s->n_sessions + 1;
    return max;
}

/* Can one more execution hold a slot?  A slot is held from XE_START until
 * the execution is answered: by each execution that waits for a worker
 * (STARTING) and each worker given to an execution not answered yet
 * (running, waiting for a tool, a session's).  Not by a pooled or pending
 * worker (they serve the starting ones first), nor by a worker killed after
 * its answer and not reaped yet: once an answer is sent its slot is free,
 * so capacity is exactly max_workers executions plus max_queue waiting.
 * The process bound stays exact on its own: spawn() never asks for more
 * than max_workers processes, so an execution admitted into a slot whose
 * worker is still exiting waits for that reap (in STARTING, on its clock).
 * Counting STARTING executions also keeps sched_pump() from moving the
 * whole queue to STARTING in one pass, which would bypass the round-robin
 * and max_queue. */
static unsigned slots_held(const struct sup *s)
{
    unsigned free_procs = s->n_idle + s->pending + s->n_killed;
    unsigned busy = s->procs > free_procs ? s->procs - free_procs : 0;

    if (MUTANT(SLOT_REAP))
        busy += s->n_killed;        /* mutant: an answered worker holds its slot until its reap */
    return busy + s->n_starting;
}

static int has_capacity(const struct sup *s)
{
    return slots_held(s) < worker_bound(s);
}

unsigned sched_spin_hint(const struct sup *s)
{
    /* procs counts the idle, the pending and the killed too (sup.h); a
     * killed worker's exit is short, and after an answer the next job may
     * start before its reap */
    unsigned other = s->n_idle + s->pending + s->n_killed;
    unsigned busy;

    if (MUTANT(SPIN_KILLED))
        other -= s->n_killed;           /* mutant: a killed worker is busy until its reap */
    busy = s->procs > other ? s->procs - other : 0;

    if (MUTANT(SPIN_BUSY))
        busy = 0;                       /* mutant: looks even when every CPU has work */
    return busy < s->ncpu ? s->cfg.tool_spin_us : 0;
}

static void rr_enqueue(struct exec *e)
{
    struct conn *c = e->conn;
    struct sup *s = e->sup;

    list_add_tail(&c->queue, &e->q_node);
    s->queued++;
    if (!list_linked(&c->rr_node))
        list_add_tail(&s->rr, &c->rr_node);
}

void sched_unqueue(struct exec *e)
{
    struct conn *c = e->conn;

    if (!list_linked(&e->q_node))
        return;         /* never queued: nothing to take out, nothing to count */
    list_del(&e->q_node);
    sup_count_down(&e->sup->queued, "queued");
    if (c && list_empty(&c->queue))
        list_del(&c->rr_node);
}

/* The next queued execution, taking connections in turn. */
static struct exec *rr_pop(struct sup *s)
{
    struct conn *c = list_first(&s->rr, struct conn, rr_node);
    struct exec *e = list_first(&c->queue, struct exec, q_node);

    sched_unqueue(e);
    if (!list_empty(&c->queue)) {           /* to the back of the line */
        list_del(&c->rr_node);
        list_add_tail(&s->rr, &c->rr_node);
    }
    return e;
}


/* ------------------------------------------------------------------ */
/* the warm pool: only live, running workers get a job                 */

/* Is pooled worker w fit for a job?  Not if it has exited (its reap may
 * not have run yet) or is stopped (SIGSTOP, SIGTSTP, a tracer): its
 * execution would wait for nothing until the deadline.  waitid() with
 * WNOWAIT asks the kernel about the child without reaping it or taking its
 * stop report; the state in /proc/PID/stat also covers a tracing stop that
 * the parent is not told about. */
static int worker_usable(const struct wproc *w)
{
    siginfo_t si;
    char st;

    if (MUTANT(POOL_LIVENESS))
        return 1;                       /* mutant: every pooled worker is taken */
    if (w->killed)
        return 0;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)w->pid, &si, WEXITED | WSTOPPED | WNOHANG | WNOWAIT) == 0 &&
        si.si_pid == w->pid)
        return 0;
    st = wproc_state(w->pid);
    return st == 0 || !strchr("TtZXx", st);   /* no /proc: waitid's answer is all there is */
}

/* Take w out of the pool for good: it is killed, its reap follows. */
static void pool_discard(struct sup *s, struct wproc *w, const char *why)
{
    list_del(&w->pool_node);
    sup_count_down(&s->n_idle, "n_idle");
    log_warn("pooled worker %d %s; replacing it", (int)w->pid, why);
    wproc_kill(w);
}

/* Can worker w say whether workers can be started now?  Not if it was
 * handed over before the zygote last died or failed to start: it outlives
 * that zygote and says nothing about the next one (the pool would end
 * every streak while no zygote runs).  Any other failure (a spawn the
 * zygote failed, a hand-over lost for want of a descriptor, a worker dead
 * in its set-up or in the pool) is about one attempt, which any worker
 * that lives through its set-up or does its job answers. */
static int fresh(const struct sup *s, const struct wproc *w)
{
    if (MUTANT(SUPPLY_FRESH))
        return 1;                       /* mutant: any live pooled worker ends a streak */
    return w->born > s->zygote_failed_at;
}

static int fresh_in_pool(const struct sup *s)
{
    const struct list_head *pos;

    for (pos = s->idle.next; pos != &s->idle; pos = pos->next)
        if (fresh(s, list_entry(pos, struct wproc, pool_node)))
            return 1;
    return 0;
}

/* Every POOL_CHECK_INTERVAL while the pool holds workers: a stopped or
 * dead one is found within that time even when no job comes, and a fresh
 * one alive SUPPLY_PROVEN_S after its hand-over (through its set-up) ends
 * a streak of failures. */
static void pool_check_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct sup *s = t->data;
    struct list_head *pos, *tmp;
    int replaced = 0;
    (void)revents;

    list_for_each_safe(pos, tmp, &s->idle) {
        struct wproc *w = list_entry(pos, struct wproc, pool_node);
        if (!worker_usable(w)) {
            pool_discard(s, w, "is stopped or dead");
            replaced = 1;
        } else if (s->supply_fails > 0 && ev_now(loop) - w->born >= SUPPLY_PROVEN_S) {
            sched_supply_ok(s, w);  /* it lived through its set-up */
        }
    }
    if (list_empty(&s->idle))
        ev_timer_stop(loop, t);
    if (replaced)
        sched_pump(s);
}

/* ------------------------------------------------------------------ */
/* the supply of workers: back-off after failures                      */

/* Delay before the next attempt after n failures in a row: the first
 * retry is immediate, then 50 ms doubling up to SUPPLY_BACKOFF_MAX. */
static double supply_backoff(unsigned n)
{
    double d = SUPPLY_BACKOFF_MIN;

    if (n <= 1)
        return 0;
    for (unsigned i = 2; i < n && d < SUPPLY_BACKOFF_MAX; i++)
        d *= 2;
    return d < SUPPLY_BACKOFF_MAX ? d : SUPPLY_BACKOFF_MAX;
}

/* The attempt the back-off held: start the zygote if there is none, then
 * ask for what is missing (sched_pump). */
static void supply_timer_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct sup *s = t->data;
    (void)loop; (void)revents;

    if (s->stopping)
        return;
    if (!spawn_running(s) && spawn_start(s) < 0) {
        sched_supply_failed(s, "could not start the zygote");
        return;
    }
    sched_pump(s);
}

static void supply_arm(struct sup *s, double delay)
{
    ev_timer_stop(s->loop, &s->supply_timer);
    ev_timer_set(&s->supply_timer, delay > 0 ? delay : 0., 0.);
    ev_timer_start(s->loop, &s->supply_timer);
}

/* Workers cannot be had now: the answer for executions that wait for one. */
static int supply_down(const struct sup *s)
{
    return s->supply_fails >= SUPPLY_FAIL_LIMIT;
}

int sched_supply_up(const struct sup *s)
{
    return !supply_down(s);
}

double sched_supply_down_since(const struct sup *s)
{
    return supply_down(s) ? s->supply_since : 0.;
}

static void fail_waiting(struct sup *s)
{
    double retry = s->supply_hold - ev_now(s->loop);

    while (s->n_starting > s->pending + s->n_idle && !list_empty(&s->starting)) {
        struct exec *e = list_entry(s->starting.prev, struct exec, q_node);
        exec_no_worker(e, s->supply_why, retry > 0 ? retry : 0);
    }
}

void sched_supply_failed(struct sup *s, const char *fmt, ...)
{
    va_list ap;
    double delay;

    va_start(ap, fmt);
    vsnprintf(s->supply_why, sizeof s->supply_why, fmt, ap);
    va_end(ap);
    if (s->supply_fails == 0)
        s->supply_since = ev_now(s->loop);
    if (s->supply_fails < UINT_MAX)
        s->supply_fails++;
    if (!spawn_running(s))
        s->zygote_failed_at = ev_now(s->loop);
    delay = supply_backoff(s->supply_fails);
    if (MUTANT(SUPPLY_BACKOFF))
        delay = 0;                      /* mutant: retry at once, forever */
    s->supply_hold = ev_now(s->loop) + delay;
    /* From SUPPLY_FAIL_LIMIT in a row every failure is logged (the back-off
     * bounds those); short streaks between successes (descriptors that come
     * and go) once a second at most, with the count of those not logged. */
    if (supply_down(s) || ev_now(s->loop) - s->supply_logged >= 1.0) {
        log_err("%s; next attempt in %.0f ms (%u failures in a row, %u not logged since the last "
                "report)", s->supply_why, delay * 1e3, s->supply_fails, s->supply_quiet);
        s->supply_logged = ev_now(s->loop);
        s->supply_quiet = 0;
    } else {
        s->supply_quiet++;
    }
    if (supply_down(s))
        fail_waiting(s);
    if (s->stopping)
        return;
    supply_arm(s, delay);
}

void sched_supply_ok(struct sup *s, const struct wproc *w)
{
    if (s->supply_fails == 0 || !w || !fresh(s, w))
        return;
    if (supply_down(s))     /* executions were being refused: say it ended */
        log_notice("workers start again (after %u failures in a row)", s->supply_fails);
    s->supply_fails = 0;
    s->supply_hold = 0;
    /* What the back-off held is due now, not cancelled: a zygote that died
     * during the hold is started by this timer and nothing else, and the
     * pool waits for it to refill (run from the loop: the caller may be
     * walking the pool). */
    if (MUTANT(SUPPLY_RESUME))
        ev_timer_stop(s->loop, &s->supply_timer);   /* mutant: the held restart is lost */
    else if (!s->stopping)
        supply_arm(s, 0.);
}

void sched_init(struct sup *s)
{
    cpu_set_t set;      /* workers inherit the supervisor's CPUs (taskset, cpusets) */

    ev_timer_init(&s->supply_timer, supply_timer_cb, 0., 0.);
    s->supply_timer.data = s;
    ev_timer_init(&s->pool_check, pool_check_cb, POOL_CHECK_INTERVAL, POOL_CHECK_INTERVAL);
    s->pool_check.data = s;
    s->ncpu = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0
                  ? (unsigned)CPU_COUNT(&set) : 1;
    errno = 0;          /* -1 is a nice value too: only errno tells a failure */
    s->nice = getpriority(PRIO_PROCESS, 0);
    if (errno != 0)
        s->nice = 0;
}

/* ------------------------------------------------------------------ */
/* shards (spawn.h): which zygote to ask, which pooled worker to take  */

/* Per shard: its busy workers (given a job, not killed), and its pooled
 * workers with its unanswered spawn requests. */
static void shard_counts(const struct sup *s, unsigned busy[], unsigned ready[])
{
    const struct list_head *pos;

    for (unsigned i = 0; i < s->n_shards; i++) {
        busy[i] = 0;
        ready[i] = s->zyg[i].pending;
    }
    for (pos = s->workers.next; pos != &s->workers; pos = pos->next) {
        const struct wproc *w = list_entry(pos, struct wproc, node);
        if (w->shard >= s->n_shards || w->killed)
            continue;
        if (list_linked(&w->pool_node))
            ready[w->shard]++;
        else
            busy[w->shard]++;
    }
}

/* The running zygote to ask for the next worker: the shard with the fewest
 * pooled and coming workers, then the fewest busy ones, so the pool holds
 * workers on every CPU.  NULL if none runs. */
static struct zygote *shard_to_ask(struct sup *s)
{
    unsigned busy[SHARDS_MAX], ready[SHARDS_MAX];
    struct zygote *best = NULL;

    if (s->n_shards == 1)
        return s->zyg[0].pid > 0 ? &s->zyg[0] : NULL;
    shard_counts(s, busy, ready);
    for (unsigned i = 0; i < s->n_shards; i++) {
        struct zygote *z = &s->zyg[i];
        if (z->pid <= 0 || z->fd < 0)
            continue;
        if (!best || ready[i] < ready[best->shard] ||
            (ready[i] == ready[best->shard] && busy[i] < busy[best->shard]))
            best = z;
    }
    return best;
}

/* The pooled worker to give the next job: the oldest one on the CPU with
 * the fewest busy workers (an idle CPU first).  When every CPU has one, the
 * job's worker is unpinned (any CPU the supervisor may run on): a pinned
 * worker cannot leave a crowded CPU for one that frees up, and a CPU-bound
 * job would get a smaller share of a CPU than its budget assumes.  So at
 * most one busy worker per CPU is pinned. */
static struct wproc *pool_pick(struct sup *s)
{
    unsigned busy[SHARDS_MAX], ready[SHARDS_MAX];
    struct wproc *best = NULL;
    struct list_head *pos;
    cpu_set_t all;

    if (s->n_shards == 1)
        return list_first(&s->idle, struct wproc, pool_node);
    shard_counts(s, busy, ready);
    for (pos = s->idle.next; pos != &s->idle; pos = pos->next) {
        struct wproc *w = list_entry(pos, struct wproc, pool_node);
        if (!best || busy[w->shard] < busy[best->shard])
            best = w;
    }
    if (busy[best->shard] > 0 && !MUTANT(SHARD_PINNED) &&
        sched_getaffinity(0, sizeof all, &all) == 0)
        (void)sched_setaffinity(best->pid, sizeof all, &all);   /* if refused: stays pinned */
    return best;
}

/* Ask the zygotes for up to n workers.  Nothing is asked during a back-off;
 * after one, a single request probes the supply before more are sent. */
static void spawn(struct sup *s, unsigned n)
{
    if (s->supply_fails > 0) {
        if (ev_now(s->loop) < s->supply_hold || s->pending > 0)
            return;
        n = n > 0 ? 1 : 0;
    }
    while (n-- > 0 && s->procs < worker_bound(s)) {
        struct zygote *z = shard_to_ask(s);
        if (!z)
            break;
        if (spawn_request(z) < 0) {
            /* no descriptor for its hand-over: no worker can be had now */
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
                sched_supply_failed(s, "no descriptor for a worker's channel: %s",
                                    strerror(errno));
            break;
        }
        s->pending++;
        s->procs++;
    }
}

/* While failures are not yet disproved and no pooled worker can (fresh),
 * one more worker probes the supply (pool_check_cb), even when no
 * execution and no pool place wants one: otherwise an idle daemon, whose
 * pool outlived the zygote, would say forever that workers cannot be
 * started.  Where every process is taken, the oldest pooled worker makes
 * room. */
static void probe(struct sup *s)
{
    if (MUTANT(SUPPLY_PROBE))
        return;     /* mutant: an idle daemon never finds out that workers start again */
    if (s->supply_fails == 0 || s->pending > 0 || ev_now(s->loop) < s->supply_hold ||
        fresh_in_pool(s))
        return;
    if (s->procs < worker_bound(s)) {
        spawn(s, 1);
    } else if (s->n_killed == 0 && !list_empty(&s->idle)) {   /* else a reap comes */
        struct wproc *w = list_first(&s->idle, struct wproc, pool_node);
        list_del(&w->pool_node);
        sup_count_down(&s->n_idle, "n_idle");
        wproc_kill(w);
    }
}

void sched_pump(struct sup *s)
{
    unsigned spare, have, keep;

    /* A zygote runs, or its start is due: after a death during the
     * back-off, the supply timer is what starts it. */
    if (!MUTANT(SUPPLY_RESUME) && !s->stopping && !spawn_running(s) &&
        !ev_is_active(&s->supply_timer))
        supply_arm(s, s->supply_hold - ev_now(s->loop));
    for (;;) {
        /* hand idle workers to executions that wait for one */
        while (!list_empty(&s->starting) && !list_empty(&s->idle)) {
            struct exec *e = list_first(&s->starting, struct exec, q_node);
            struct wproc *w = pool_pick(s);
            struct exec_evdata d = { .w = w };
            if (!worker_usable(w)) {
                pool_discard(s, w, "is stopped or dead");
                continue;
            }
            list_del(&w->pool_node);
            sup_count_down(&s->n_idle, "n_idle");
            exec_event(e, XE_WORKER, &d);
        }
        if (s->queued == 0 || !has_capacity(s))
            break;
        exec_event(rr_pop(s), XE_START, NULL);
    }
    /* while workers cannot be started, those admitted now are answered now */
    if (supply_down(s) && ev_now(s->loop) < s->supply_hold)
        fail_waiting(s);
    /* ask the zygote for the workers that executions still wait for */
    if (s->n_starting > s->pending)
        spawn(s, s->n_starting - s->pending);
    /* workers nobody waits for any more (their execution was cancelled, or
     * pool_size shrank on reload) are not kept beyond the pool size, and
     * the probe's one more */
    keep = s->stopping ? 0 : s->cfg.pool_size + (s->supply_fails > 0);
    while (s->n_idle > keep && list_empty(&s->starting)) {
        struct wproc *w = list_first(&s->idle, struct wproc, pool_node);
        list_del(&w->pool_node);
        sup_count_down(&s->n_idle, "n_idle");
        wproc_kill(w);
    }
    /* then keep the warm pool full */
    if (s->stopping)
        return;
    spare = s->pending > s->n_starting ? s->pending - s->n_starting : 0;
    have = s->n_idle + spare;
    if (have < s->cfg.pool_size)
        spawn(s, s->cfg.pool_size - have);
    probe(s);
}

void sched_submit(struct exec *e)
{
    struct sup *s = e->sup;
    double retry = s->supply_hold - ev_now(s->loop);

    if (s->stopping) {          /* refused at once, never queued */
        exec_refuse(e, RPC_E_CANCELLED, NULL, "the daemon is shutting down");
        return;
    }
    /* until the next attempt, at once, unless a pooled or pending worker
     * is there for it */
    if (supply_down(s) && retry > 0 && s->n_idle + s->pending <= s->n_starting) {
        exec_no_worker(e, s->supply_why, retry);
        return;
    }
    if (s->queued == 0 && has_capacity(s)) {
        exec_event(e, XE_START, NULL);
        sched_pump(s);
        return;
    }
    if (s->queued >= s->cfg.max_queue) {
        exec_refuse(e, RPC_E_BUSY, NULL, "all %u workers are busy and %u executions are queued",
                    s->cfg.max_workers, s->queued);
        return;
    }
    rr_enqueue(e);
    sched_pump(s);
}

void sched_worker_arrived(struct sup *s, unsigned shard, pid_t pid, int fd, int err)
{
    struct wproc *w;
    unsigned i;

    sup_count_down(&s->pending, "pending");
    if (fd < 0) {
        sup_count_down(&s->procs, "procs");
        sched_supply_failed(s, "the zygote could not start a worker: %s",
                            err > 0 ? strerror(err) : "no channel received");
        sched_pump(s);
        return;
    }
    /* It may have died before its hand-over was read. */
    for (i = 0; i < sizeof s->reaped_unknown / sizeof s->reaped_unknown[0]; i++) {
        if (s->reaped_unknown[i] == pid) {
            s->reaped_unknown[i] = 0;
            close(fd);
            sup_count_down(&s->procs, "procs");
            sched_supply_failed(s, "worker %d died during set-up (status 0x%x)", (int)pid,
                                s->reaped_status[i]);
            sched_pump(s);
            return;
        }
    }
    if (!(w = wproc_new(s, pid, fd))) {
        /* never a wproc, so its reap will not count it down: do it now */
        kill(pid, SIGKILL);
        close(fd);
        sup_count_down(&s->procs, "procs");
        sched_supply_failed(s, "out of memory for worker %d", (int)pid);
        sched_pump(s);
        return;
    }
    w->shard = shard;
    /* the streak ends when a worker has done a job or is found alive in the
     * pool, not here: one that dies in its set-up is no success */
    list_add_tail(&s->idle, &w->pool_node);
    s->n_idle++;
    s->workers_started++;
    if (!ev_is_active(&s->pool_check))
        ev_timer_again(s->loop, &s->pool_check);
    sched_pump(s);
}

void sched_reap(struct sup *s)
{
    int status;
    pid_t pid;
    struct rusage ru;
    struct zygote *z;

    spawn_poll(s);     /* hand-overs first, so every reaped pid is known */
    while ((pid = wait4(-1, &status, WNOHANG | WUNTRACED, &ru)) > 0) {
        struct wproc *w;
        if (WIFSTOPPED(status)) {
            /* a stop report, not an exit: a pooled worker is replaced now
             * (a running one is left to its execution's clocks) */
            if (!MUTANT(POOL_LIVENESS) && (w = wproc_find(s, pid)) && list_linked(&w->pool_node))
                pool_discard(s, w, "was stopped");
            continue;
        }
        if ((z = spawn_find(s, pid))) {
            spawn_zygote_died(z, status);
            continue;
        }
        if ((w = wproc_find(s, pid))) {
            TRACE(TR_REAP);
            uint64_t cpu = (uint64_t)ru.ru_utime.tv_sec * 1000000u + (uint64_t)ru.ru_utime.tv_usec +
                           (uint64_t)ru.ru_stime.tv_sec * 1000000u + (uint64_t)ru.ru_stime.tv_usec;
            wproc_exited(w, status, cpu);
            continue;
        }
        s->reaped_unknown[s->reaped_next] = pid;
        s->reaped_status[s->reaped_next] = status;
        s->reaped_next = (s->reaped_next + 1) % (sizeof s->reaped_unknown / sizeof(pid_t));
    }
    sched_pump(s);
}
