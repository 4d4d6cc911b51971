/* Runs in: sandboxctl */
/*
 * connection.h - one connection to sandboxd and the requests it carries.
 *
 * ctl_conn_call() sends the request and runs a poll() loop until its
 * answer arrives, meanwhile:
 *  - answering the daemon's tool/call requests from the tool handlers (one
 *    command at a time; further calls wait in a queue), and replying
 *    method_not_found to any other request;
 *  - printing every frame with "> " / "< " on stderr when verbose;
 *  - on the first SIGINT: killing a running tool command and sending
 *    $/cancelRequest for the request, then still waiting for the answer
 *    (which is normally the error `cancelled`); on the second: returning
 *    CTL_EXIT_INTERRUPT at once.
 * SIGINT and SIGCHLD are blocked from ctl_conn_open() on and read
 * through a signalfd; SIGPIPE is ignored.
 *
 * Protocol errors are reported on stderr with what arrived, and returned as
 * CTL_EXIT_PROTOCOL: invalid JSON, a message that is not JSON-RPC 2.0, a
 * response to another id, a line over CTL_MAX_LINE bytes, end of file or a
 * reset before the answer.  A response whose id is null and that carries an
 * error is taken as the answer: it is how a daemon answers a request it
 * could not read (too large, forbidden peer).
 */
#ifndef SANDBOXCTL_CONNECTION_H
#define SANDBOXCTL_CONNECTION_H

#include <jansson.h>
#include <stddef.h>

#include "client/toolrun.h"
#include "client/tools.h"
#include "proto/jsonrpc.h"
#include "proto/ndjson.h"

/* Longest message accepted from the daemon: results and bindings can be
 * large, and this is a debugging tool, so the bound is generous. */
#define CTL_MAX_LINE ((size_t)256 << 20)

struct ctl_conn {
    int fd;                         /* the connection */
    int sigfd;                      /* signalfd for SIGINT, SIGCHLD */
    int verbose;
    const char *path;               /* borrowed: socket path, for messages */
    const struct ctl_tools *tools;  /* borrowed */
    struct ndjson_reader rd;
    char  *out;                     /* owned: bytes not yet written */
    size_t out_len, out_off, out_cap;
    int    write_closed;            /* the daemon stopped reading */
    json_t *id;                     /* owned: id of our request */
    unsigned interrupts;
    int    running;                 /* run holds a live tool command */
    struct ctl_run run;
    json_t *queue;                  /* owned array: tool/call requests waiting */
    json_t *answer;                 /* owned: the response object, once it arrived */
    char  *answer_line;             /* owned: the response as received */
    size_t answer_len;
    int    answered;
    json_int_t seq;                 /* id of the last request sent */
    int    stream_output;           /* print execution/output notifications on stderr */
    int    streamed;                /* some were printed for the current request */
    int    answer_within_ms;        /* > 0: ctl_conn_call gives up on an answer
                                     * this late (health); 0: it waits */
};

/* Connect to path.  On failure prints which path and why, and returns
 * CTL_EXIT_NOCONNECT (or CTL_EXIT_SOFTWARE); 0 on success. */
int ctl_conn_open(struct ctl_conn *s, const char *path, int verbose,
                  const struct ctl_tools *tools);

/* Send {method, params (stolen; may be NULL)} with the next id (1, 2, ...)
 * and wait for the answer, which is then in s->answer (an object holding
 * "result" or "error") and, verbatim, in s->answer_line.  May be called
 * again on the same connection (a session's chunks); each call forgets the
 * previous answer.  With s->stream_output, the text of every
 * execution/output notification of this request goes to stderr as it
 * arrives (and s->streamed is set).  With s->answer_within_ms, no answer
 * within that many milliseconds of the call is CTL_EXIT_PROTOCOL ("no
 * answer").  Returns 0, or an exit status after printing why. */
int ctl_conn_call(struct ctl_conn *s, const char *method, json_t *params);

void ctl_conn_close(struct ctl_conn *s);

#endif
