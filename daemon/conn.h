/* Runs in: supervisor */
/*
 * conn.h - one client connection: bounded NDJSON input, a write queue,
 * JSON-RPC dispatch, and the executions it started.
 *
 * Contract:
 *  - Input is framed by proto/ndjson with max_message_bytes per line; an
 *    over-long line is answered with message_too_large and skipped.
 *  - conn_send() queues one message; it never blocks.  Every answer the
 *    limits allow is queued whole.  A peer is disconnected as one that does
 *    not read only when more than conn_backlog_bound() bytes wait for it AND
 *    it has taken no byte for CONN_WRITE_STALL seconds, or, whatever waits,
 *    when it has taken no byte for write_idle_timeout_ms while answers wait
 *    (one log line each).  All connections'
 *    queues together stay within max_backlog_bytes: past it, the connection
 *    with the largest queue is closed (its queue freed at once).
 *  - conn_fail() stops all I/O at once and closes the connection at the
 *    start of the next loop iteration, so no caller ever sees a connection
 *    (or an execution it owns) freed under its feet.  conn_close() does it
 *    now: it cancels every execution the connection started (workers are
 *    killed, nothing is answered) and frees the connection; only the
 *    deferred closer and shutdown call it.
 */
#ifndef SANDBOXD_CONN_H
#define SANDBOXD_CONN_H

#include <ev.h>
#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/list.h"
#include "daemon/outq.h"
#include "proto/jsonpass.h"
#include "proto/jsonrpc.h"
#include "proto/ndjson.h"

struct sup;

#define CONN_MIN_BACKLOG (64u * 1024 * 1024)
#define CONN_WRITE_STALL 5.0    /* seconds without progress over the bound */

struct conn {
    struct sup *sup;
    struct list_head node;      /* in sup->conns */
    struct list_head rr_node;   /* in sup->rr while it has queued executions */
    struct list_head doomed_node; /* in sup->doomed once conn_fail() was called */
    int    fd;
    ev_io  rio, wio;
    ev_timer hup;               /* half-closed: watch for a full close */
    struct ndjson_reader rd;
    size_t in_alloc;            /* rd's allocation, as counted in sup->input_bytes */
    struct outq out;            /* answers not yet written */
    size_t out_acct;            /* out's pending bytes, as counted in sup->output_bytes */
    ev_tstamp out_progress;     /* when the peer last took bytes (or the queue filled) */
    ev_timer stall;             /* runs while the queue is over its bound */
    ev_timer widle;             /* runs while answers wait: write_idle_timeout_ms */
    struct list_head execs;     /* every live struct exec it started */
    struct list_head queue;     /* its QUEUED executions, FIFO */
    uint64_t tool_seq;          /* for daemon-chosen tool/call ids */
    uint64_t id;                /* for logs */
    pid_t  peer_pid;
    uid_t  peer_uid;
    gid_t  peer_gid;
    int    closing;             /* no more input; close once the queue is flushed */
    int    eof;                 /* the peer finished sending (read returned 0) */
    int    lingering;           /* our side is shut down; draining until EOF */
};

/* Take ownership of an accepted, non-blocking fd.  NULL on allocation failure
 * (the fd is closed). */
struct conn *conn_new(struct sup *sup, int fd);
void conn_close(struct conn *c);
void conn_fail(struct conn *c);
/* Queue msg (borrowed).  Returns 0, or -1 if the connection was closed. */
int  conn_send(struct conn *c, const json_t *msg);
/* The same with raw JSON (validated, one line) in place of jp_token(i). */
int  conn_send_spliced(struct conn *c, const json_t *msg, const struct jp_splice *sp, size_t nsp);
/* Queue an error reply; data stolen (may be NULL). */
void conn_send_error(struct conn *c, json_t *id, enum rpc_kind kind, json_t *data,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Close if input has ended, nothing is in flight and all is written. */
void conn_maybe_finish(struct conn *c);

#endif
