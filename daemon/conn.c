/*
 * conn.c - one client connection.  See conn.h.
 *
 * Reading: each readable event reads at most CONN_READ_BURST bytes, so one
 * chatty client cannot monopolise the loop, then handles every complete
 * line.  Writing: messages are appended to a per-connection queue and
 * flushed without blocking; the write watcher runs only while bytes wait.
 */
#include "daemon/conn.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/exec.h"
#include "common/log.h"
#include "daemon/methods.h"
#include "daemon/sup.h"
#include "common/trace.h"
#include "proto/jsonrpc.h"
#include "proto/mutant.h"

#define CONN_READ_BURST (256u * 1024)
#define CONN_LINGER     2.0     /* seconds a departing peer gets to see our EOF */

static void conn_read_cb(struct ev_loop *loop, ev_io *io, int revents);
static void conn_write_cb(struct ev_loop *loop, ev_io *io, int revents);
static void stall_cb(struct ev_loop *loop, ev_timer *t, int revents);
static void widle_cb(struct ev_loop *loop, ev_timer *t, int revents);

struct conn *conn_new(struct sup *s, int fd)
{
    struct conn *c = calloc(1, sizeof *c);

    if (!c) {
        close(fd);
        return NULL;
    }
    c->sup = s;
    c->fd = fd;
    c->id = ++s->next_conn_id;
    ndjson_init(&c->rd, s->cfg.max_message_bytes);
    list_init(&c->execs);
    list_init(&c->queue);
    list_init(&c->rr_node);
    list_init(&c->doomed_node);
    list_add_tail(&s->conns, &c->node);
    s->n_conns++;
    ev_io_init(&c->rio, conn_read_cb, fd, EV_READ);
    c->rio.data = c;
    ev_io_init(&c->wio, conn_write_cb, fd, EV_WRITE);
    c->wio.data = c;
    ev_timer_init(&c->hup, NULL, 0., 0.);
    ev_timer_init(&c->stall, stall_cb, 0., 0.);
    c->stall.data = c;
    ev_timer_init(&c->widle, widle_cb, 0., 0.);
    c->widle.data = c;
    ev_io_start(s->loop, &c->rio);
    return c;
}

/* Keep sup->output_bytes equal to the sum of the queues' pending bytes. */
static void account_output(struct conn *c)
{
    size_t now = outq_pending(&c->out);

    c->sup->output_bytes -= c->out_acct;
    c->sup->output_bytes += now;
    c->out_acct = now;
}

/*
 * One connection's queue may hold more than any one answer (several
 * executions end at once) without its peer being at fault; past this bound
 * the peer must keep taking bytes.  The bound admits the largest answer the
 * limits allow (config_answer_max), so a reading peer is never dropped for
 * the size of one answer.
 */
static size_t conn_backlog_bound(const struct sup *s)
{
    size_t one = config_answer_max(&s->cfg);

    if (MUTANT(BACKLOG_BOUND))
        return CONN_MIN_BACKLOG;        /* mutant: a fixed 64 MiB */
    return one > CONN_MIN_BACKLOG ? one : CONN_MIN_BACKLOG;
}

static void conn_flush(struct conn *c);

/* The time a peer's progress is seen: the clock's, not the iteration's. */
static ev_tstamp progress_stamp(const struct conn *c)
{
    if (MUTANT(STALL_CLOCK))
        return ev_now(c->sup->loop);    /* mutant: when the loop's iteration began */
    return ev_time();
}

/*
 * The peer's progress is stamped with the time it is seen (ev_time(), not
 * the loop's cached ev_now(): serialising a 96 MiB answer, or a busy
 * iteration before it, can take seconds that are the daemon's, not the
 * peer's).  Before a timer judges a peer, the daemon writes what the
 * socket takes now: a peer whose socket drained while the daemon was busy
 * elsewhere (or while this timer was due ahead of the write watcher) has
 * taken bytes, and its clock restarts.  Returns whether the connection is
 * still open with answers waiting.
 */
static int peer_still_waited_for(struct conn *c)
{
    if (c->fd < 0 || list_linked(&c->doomed_node) || outq_empty(&c->out))
        return 0;
    if (MUTANT(STALL_CLOCK))
        return 1;                       /* mutant: judged on the last write seen */
    conn_flush(c);
    return c->fd >= 0 && !list_linked(&c->doomed_node) && !outq_empty(&c->out);
}

/* Over its bound, a queue gets CONN_WRITE_STALL seconds from the peer's
 * last progress: a peer that takes bytes meanwhile is reading. */
static void stall_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct conn *c = t->data;
    ev_tstamp idle;
    (void)revents;

    if (!peer_still_waited_for(c) || outq_pending(&c->out) <= conn_backlog_bound(c->sup))
        return;
    idle = ev_now(loop) - c->out_progress;
    if (idle >= CONN_WRITE_STALL) {
        log_warn("conn=%llu: peer does not read its answers (%zu bytes wait, none taken for "
                 "%.0f s); disconnecting", (unsigned long long)c->id, outq_pending(&c->out), idle);
        conn_fail(c);
        return;
    }
    ev_timer_set(t, CONN_WRITE_STALL - idle + 0.01, 0.);
    ev_timer_start(loop, t);
}

/*
 * A peer that takes no byte for write_idle_timeout_ms while answers wait
 * for it is gone or stuck, however little waits: without this, a client
 * that stops reading holds its backlog (up to the largest answer the limits
 * allow, times what it asked for) until it closes.  The clock runs from the
 * peer's last progress (or from when the queue filled); the timer runs
 * while bytes wait (widle_arm) and re-arms for what is left.
 */
static double write_idle(const struct conn *c)
{
    return (double)c->sup->cfg.write_idle_timeout_ms / 1e3;
}

static void widle_arm(struct conn *c)
{
    double left = write_idle(c) - (ev_now(c->sup->loop) - c->out_progress);

    if (MUTANT(WRITE_IDLE))
        return;                         /* mutant: a peer may stop reading forever */
    if (ev_is_active(&c->widle))
        return;
    ev_timer_set(&c->widle, left > 0 ? left + 0.01 : 0., 0.);
    ev_timer_start(c->sup->loop, &c->widle);
}

static void widle_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct conn *c = t->data;
    ev_tstamp idle;
    (void)revents;

    if (!peer_still_waited_for(c))
        return;
    idle = ev_now(loop) - c->out_progress;
    if (idle >= write_idle(c)) {
        log_warn("conn=%llu: peer took no byte for %.1f s while %zu bytes of answers wait "
                 "(write_idle_timeout_ms %u); disconnecting", (unsigned long long)c->id, idle,
                 outq_pending(&c->out), c->sup->cfg.write_idle_timeout_ms);
        conn_fail(c);
        return;
    }
    widle_arm(c);
}

/*
 * Over max_backlog_bytes: the connection with the largest queue (the oldest
 * of equals) is closed and its queue freed at once, until the total fits.
 * Its peer is the one pinning the most memory; one answer alone always fits
 * (config.c keeps max_backlog_bytes >= config_answer_max).
 */
static void shed_output(struct sup *s)
{
    if (MUTANT(BACKLOG_TOTAL))
        return;                         /* mutant: no total bound */
    while (s->output_bytes > s->cfg.max_backlog_bytes) {
        struct conn *victim = NULL;
        struct list_head *pos, *tmp;

        list_for_each_safe(pos, tmp, &s->conns) {
            struct conn *o = list_entry(pos, struct conn, node);
            if (!list_linked(&o->doomed_node) && o->out_acct > 0 &&
                (!victim || o->out_acct > victim->out_acct))
                victim = o;
        }
        if (!victim)
            return;
        log_warn("conn=%llu: answers waiting for all connections hold %zu bytes, above "
                 "max_backlog_bytes %zu; closing the connection with the most (%zu bytes)",
                 (unsigned long long)victim->id, s->output_bytes, s->cfg.max_backlog_bytes,
                 victim->out_acct);
        conn_fail(victim);
        outq_free(&victim->out);
        account_output(victim);
    }
}

/* Keep sup->input_bytes equal to the sum of the readers' allocations. */
static void account_input(struct conn *c)
{
    size_t now = ndjson_allocated(&c->rd);

    c->sup->input_bytes -= c->in_alloc;
    c->sup->input_bytes += now;
    c->in_alloc = now;
}

/* The id of a line refused before it is classified (rpc_scan_id), or
 * NULL: the refusal then carries null. */
static json_t *refused_id(const char *line, size_t len)
{
    if (MUTANT(REFUSED_ID))
        return NULL;                    /* mutant: every refusal says null */
    return rpc_scan_id(line, len);
}

/*
 * Over max_input_bytes: the connection with the largest input buffer (the
 * oldest of equals) gets one `busy` error and is closed, its buffer freed
 * at once, until the total fits again.  Complete lines are handled as they
 * arrive, so what the budget holds is unfinished messages: the connection
 * that pins the most is the one most likely trickling or stalling a huge
 * line on purpose.  Called only after a read's lines have all been handled
 * (no line pointer into any reader is live).
 */
static void shed_input(struct sup *s)
{
    if (MUTANT(INPUT_BUDGET))
        return;                         /* mutant: no budget */
    while (s->input_bytes > s->cfg.max_input_bytes) {
        struct conn *victim = NULL;
        json_t *id;
        struct list_head *pos, *tmp;

        list_for_each_safe(pos, tmp, &s->conns) {
            struct conn *o = list_entry(pos, struct conn, node);
            if (!list_linked(&o->doomed_node) && o->in_alloc > 0 &&
                (!victim || o->in_alloc > victim->in_alloc))
                victim = o;
        }
        if (!victim)
            return;
        log_warn("conn=%llu: input buffers hold %zu bytes, above max_input_bytes %zu; "
                 "closing the connection with the largest (%zu bytes)",
                 (unsigned long long)victim->id, s->input_bytes, s->cfg.max_input_bytes,
                 victim->in_alloc);
        /* every complete line is handled: what is held is the unfinished
         * message, whose id a client waiting for it gets if it is there */
        id = refused_id(inbuf_data(&victim->rd.in), ndjson_pending(&victim->rd));
        conn_send_error(victim, id, RPC_E_BUSY,
                        json_pack("{s:I}", "max_input_bytes", (json_int_t)s->cfg.max_input_bytes),
                        "the daemon's input buffers are full (max_input_bytes) and this "
                        "connection holds the largest unfinished message");
        json_decref(id);
        conn_fail(victim);
        ndjson_free(&victim->rd);
        account_input(victim);
    }
}

static void conn_free(struct conn *c)
{
    ndjson_free(&c->rd);
    account_input(c);
    outq_free(&c->out);
    account_output(c);
    free(c);
}

void conn_close(struct conn *c)
{
    if (c->fd < 0)
        return;
    log_debug("conn=%llu closed", (unsigned long long)c->id);
    exec_detach_all(c);
    ev_io_stop(c->sup->loop, &c->rio);
    ev_io_stop(c->sup->loop, &c->wio);
    ev_timer_stop(c->sup->loop, &c->hup);
    ev_timer_stop(c->sup->loop, &c->stall);
    ev_timer_stop(c->sup->loop, &c->widle);
    close(c->fd);
    c->fd = -1;
    list_del(&c->node);
    c->sup->n_conns--;
    list_del(&c->rr_node);
    list_del(&c->doomed_node);
    conn_free(c);
}

static void doomed_cb(struct ev_loop *loop, ev_prepare *p, int revents)
{
    struct sup *s = p->data;
    (void)revents;

    while (!list_empty(&s->doomed))
        conn_close(list_first(&s->doomed, struct conn, doomed_node));
    ev_prepare_stop(loop, p);
}

/* Closing is deferred to the next loop iteration, so no caller ever sees a
 * connection (or an execution it owned) vanish under its feet. */
void conn_fail(struct conn *c)
{
    struct sup *s = c->sup;

    if (c->fd < 0 || list_linked(&c->doomed_node))
        return;
    ev_io_stop(s->loop, &c->rio);
    ev_io_stop(s->loop, &c->wio);
    ev_timer_stop(s->loop, &c->hup);
    ev_timer_stop(s->loop, &c->stall);
    ev_timer_stop(s->loop, &c->widle);
    c->closing = 1;
    list_add_tail(&s->doomed, &c->doomed_node);
    if (!ev_is_active(&s->doomed_prep)) {
        ev_prepare_init(&s->doomed_prep, doomed_cb);
        s->doomed_prep.data = s;
        ev_prepare_start(s->loop, &s->doomed_prep);
    }
}

/* Write as much as the socket takes now. */
static void conn_flush(struct conn *c)
{
    size_t before = outq_pending(&c->out), cap = c->out.cap;
    enum outq_status st = outq_flush(&c->out, c->fd);

    if (st != OUTQ_AGAIN && cap >= SUP_TRIM_BYTES)
        sup_trim();                     /* a large answer's buffer is gone */
    if (outq_pending(&c->out) < before)
        c->out_progress = progress_stamp(c);    /* seen now (peer_still_waited_for) */
    account_output(c);
    switch (st) {
    case OUTQ_AGAIN:
        ev_io_start(c->sup->loop, &c->wio);
        widle_arm(c);
        return;
    case OUTQ_ERROR:
        conn_fail(c);
        return;
    case OUTQ_DONE:
        break;
    }
    ev_io_stop(c->sup->loop, &c->wio);
    ev_timer_stop(c->sup->loop, &c->widle);
    conn_maybe_finish(c);
}

static void linger_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop; (void)revents;
    conn_fail(t->data);
}

/* A connection whose input has ended closes once every execution it
 * started has been answered and the answers have left. */
void conn_maybe_finish(struct conn *c)
{
    if (!c->closing || !outq_empty(&c->out) || !list_empty(&c->execs) ||
        list_linked(&c->doomed_node))
        return;
    if (c->eof) {
        conn_fail(c);
        return;
    }
    /* We stop first while the peer may still be sending (a refused peer).
     * Closing a socket with unread input resets the stream, and the peer
     * could lose our last answer; so end our side, drop whatever still
     * arrives, and close at its EOF or after CONN_LINGER seconds. */
    if (!c->lingering) {
        c->lingering = 1;
        shutdown(c->fd, SHUT_WR);
        ev_io_start(c->sup->loop, &c->rio);
        ev_timer_stop(c->sup->loop, &c->hup);
        ev_timer_init(&c->hup, linger_cb, CONN_LINGER, 0.);
        c->hup.data = c;
        ev_timer_start(c->sup->loop, &c->hup);
    }
}

/* While half-closed with work in flight, watch for the peer going away
 * entirely (POLLHUP), which cancels its executions like any close. */
static void hup_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct conn *c = t->data;
    struct pollfd p = { .fd = c->fd, .events = POLLOUT };
    (void)loop; (void)revents;

    if (c->fd < 0)
        return;
    if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)))
        conn_fail(c);
    else
        conn_maybe_finish(c);
}

/* read() returned 0.  A peer that only shut down its writing side (as
 * `socat` does after sending) still gets its answers; a peer that closed the
 * socket, or died, gets its executions cancelled. */
static void conn_eof(struct conn *c)
{
    struct pollfd p = { .fd = c->fd, .events = POLLOUT };

    if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR))) {
        conn_fail(c);
        return;
    }
    c->closing = 1;
    c->eof = 1;
    ev_io_stop(c->sup->loop, &c->rio);
    exec_end_sessions(c);       /* no chunk can come any more */
    ev_timer_init(&c->hup, hup_cb, 0.1, 0.1);
    c->hup.data = c;
    ev_timer_start(c->sup->loop, &c->hup);
    conn_maybe_finish(c);
}

static void conn_write_cb(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop; (void)revents;
    conn_flush(io->data);
}

int conn_send(struct conn *c, const json_t *msg)
{
    return conn_send_spliced(c, msg, NULL, 0);
}

/* One NDJSON line: msg with sp[i] in place of jp_token(i). */
static char *dump_line(const json_t *msg, const struct jp_splice *sp, size_t nsp, size_t *len)
{
    char *text, *line;

    if (!nsp)
        return rpc_dump_line(msg, len);
    if (!(text = jp_dump_spliced(msg, sp, nsp, len)))
        return NULL;
    if (!(line = realloc(text, *len + 2))) {
        free(text);
        return NULL;
    }
    line[(*len)++] = '\n';
    line[*len] = '\0';
    return line;
}

int conn_send_spliced(struct conn *c, const json_t *msg, const struct jp_splice *sp, size_t nsp)
{
    size_t len;
    char *line;
    int rc;

    if (c->fd < 0 || list_linked(&c->doomed_node))
        return -1;
    if (!(line = dump_line(msg, sp, nsp, &len)))
        return 0;               /* cannot serialise: drop it, keep the connection */
    TRACE(TR_ANSWER);
    if (outq_empty(&c->out))
        c->out_progress = progress_stamp(c);    /* the peer's clock starts now, not
                                                 * when the loop's iteration did */
    rc = outq_append(&c->out, line, len, SIZE_MAX);
    free(line);
    if (rc < 0) {
        log_warn("conn=%llu: out of memory queueing an answer; disconnecting",
                 (unsigned long long)c->id);
        conn_fail(c);
        return -1;
    }
    account_output(c);
    if (!ev_is_active(&c->wio))
        conn_flush(c);
    if (outq_pending(&c->out) > conn_backlog_bound(c->sup) && !ev_is_active(&c->stall) &&
        !list_linked(&c->doomed_node)) {
        if (MUTANT(BACKLOG_BOUND)) {    /* mutant: over the bound is enough */
            log_warn("conn=%llu: peer does not read its answers; disconnecting",
                     (unsigned long long)c->id);
            conn_fail(c);
        } else {
            ev_timer_set(&c->stall, 0., 0.);
            ev_timer_start(c->sup->loop, &c->stall);    /* judged at once: stall_cb */
        }
    }
    shed_output(c->sup);
    return list_linked(&c->doomed_node) ? -1 : 0;
}

void conn_send_error(struct conn *c, json_t *id, enum rpc_kind kind, json_t *data,
                     const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    json_t *reply;
    int code = rpc_kind_code(rpc_kind_name(kind));

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* docs/protocol.md §7: every kind from syntax_error on carries output. */
    if ((code <= -32001 && code >= -32099) || code == -32800) {
        if (!data)
            data = json_object();
        if (!json_object_get(data, "output"))
            json_object_set_new(data, "output", json_string(""));
        if (!json_object_get(data, "output_truncated"))
            json_object_set_new(data, "output_truncated", json_false());
    }
    reply = rpc_error_new(id, kind, msg, data);
    if (reply)
        conn_send(c, reply);
    json_decref(reply);
}

static void conn_handle_line(struct conn *c, const char *line, size_t len)
{
    struct rpc_msg m;

    json_t *id;

    rpc_parse(line, len, &m);
    TRACE(TR_PARSED);
    switch (m.type) {
    case RPC_PARSE_ERROR:
        /* a client waiting for its id gets it whenever it can be read */
        id = refused_id(line, len);
        if (m.too_dense)
            conn_send_error(c, id, RPC_E_MESSAGE_TOO_LARGE, NULL,
                            "%s (at most %d bytes of memory per byte, plus %zu)", m.why,
                            RPC_TREE_FACTOR, RPC_TREE_FLOOR);
        else
            conn_send_error(c, id, RPC_E_PARSE_ERROR, NULL, "parse error: %s",
                            m.why ? m.why : "invalid JSON");
        json_decref(id);
        break;
    case RPC_INVALID:
        /* A malformed answer to a pending tool call still ends the wait: the
         * chunk sees a tool error instead of hanging until its timeout. */
        if (json_is_string(m.id) && json_is_object(m.root) &&
            !json_object_get(m.root, "method")) {
            json_t *err = json_pack("{s:i,s:s}", "code", -32600, "message",
                                    "the client's answer was not a valid JSON-RPC response");
            int routed = err && exec_tool_response(c, m.id, NULL, err, NULL);
            json_decref(err);
            if (routed)
                break;
        }
        conn_send_error(c, m.id, RPC_E_INVALID_REQUEST, NULL, "invalid request: %s",
                        m.why ? m.why : "not a JSON-RPC 2.0 message");
        break;
    case RPC_REQUEST:
        methods_request(c, &m);
        break;
    case RPC_NOTIFICATION:
        methods_notification(c, &m);
        break;
    case RPC_RESPONSE:
        exec_tool_response(c, m.id, m.result, m.error, m.raw_result.p ? &m.raw_result : NULL);
        break;
    }
    rpc_msg_clear(&m);
}

static void conn_read_cb(struct ev_loop *loop, ev_io *io, int revents)
{
    struct conn *c = io->data;
    char buf[65536];
    size_t total = 0, largest = 0;
    (void)loop; (void)revents;

    if (c->lingering) {         /* drop what a departing peer still sends */
        ssize_t n = read(c->fd, buf, sizeof buf);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            conn_fail(c);
        return;
    }
    while (!c->closing && total < CONN_READ_BURST) {
        const char *line;
        size_t len;
        enum ndjson_status st;
        ssize_t n = read(c->fd, buf, sizeof buf);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n == 0) {
            conn_eof(c);
            break;
        }
        if (n < 0) {
            conn_fail(c);
            break;
        }
        total += (size_t)n;
        TRACE(TR_READ);
        if (ndjson_feed(&c->rd, buf, (size_t)n) < 0) {
            conn_fail(c);
            break;
        }
        while (!c->closing &&
               (st = ndjson_next(&c->rd, &line, &len)) != NDJSON_AGAIN) {
            if (st == NDJSON_TOO_LONG) {
                json_t *id;
                ndjson_too_long_head(&c->rd, &line, &len);
                id = refused_id(line, len);
                conn_send_error(c, id, RPC_E_MESSAGE_TOO_LARGE, NULL,
                                "message longer than %zu bytes", c->sup->cfg.max_message_bytes);
                json_decref(id);
                len = 0;
            } else
                conn_handle_line(c, line, len);
            if (len > largest)
                largest = len;
        }
        if ((size_t)n < sizeof buf)
            break;              /* drained; the watcher fires again for more */
    }
    /* every line read is handled: a large message's buffer goes back now,
     * not when the connection ends */
    if (!MUTANT(BUFFER_RELEASE))
        ndjson_shrink(&c->rd);
    account_input(c);
    shed_input(c->sup);
    if (largest >= SUP_TRIM_BYTES)
        sup_trim();
}
