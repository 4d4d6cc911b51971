/* Runs in: sandboxctl */
/*
 * toolrun.h - one tool command answering one tool/call.
 *
 * The command runs as `/bin/sh -c COMMAND` in its own process group, with
 * the call's args (a JSON array, one line) on stdin, SANDBOXCTL_TOOL and
 * SANDBOXCTL_FUNCTION in its environment, and its stdout and stderr
 * captured.  All three pipes are non-blocking and driven by the caller's
 * poll() loop, so the client keeps serving the socket and signals while a
 * command runs.  The run is complete once the process is reaped and both
 * output pipes reached end of file.
 *
 * The answer (ctl_run_reply):
 *  - exit 0 and stdout one JSON value (any type) -> that value is the result;
 *    the command's stderr is copied to sandboxctl's stderr;
 *  - exit 0 and stdout not JSON (or empty) -> error "tool command output is
 *    not JSON: ...";
 *  - exit CTL_TOOL_ABORT_STATUS -> error with data.abort = true, which ends
 *    the whole execution (tool_aborted);
 *  - any other non-zero exit, or a signal -> error whose message is the
 *    command's stderr (trimmed), or "tool command exited with status N" /
 *    "tool command killed by signal N" when stderr is empty.
 *  Errors carry code CTL_TOOL_ERROR_CODE; the Lua code sees
 *  "NAME.FUNC: <message>".
 *
 * Bounds: stdout beyond CTL_TOOL_STDOUT_MAX kills the command and is an
 * error; stderr beyond CTL_TOOL_STDERR_MAX is read and dropped.
 */
#ifndef SANDBOXCTL_TOOLRUN_H
#define SANDBOXCTL_TOOLRUN_H

#include <jansson.h>
#include <poll.h>
#include <stddef.h>
#include <sys/types.h>

#include "client/tools.h"

#define CTL_TOOL_ERROR_CODE   (-32000)
#define CTL_TOOL_ABORT_STATUS 99
#define CTL_TOOL_STDOUT_MAX   ((size_t)16 << 20)
#define CTL_TOOL_STDERR_MAX   ((size_t)64 << 10)

struct ctl_obuf {
    char  *p;       /* owned */
    size_t len, cap, max;
    int    over;    /* more than max bytes arrived */
};

struct ctl_run {
    const struct ctl_handler *h;    /* borrowed */
    json_t *call_id;                /* owned: id of the tool/call request */
    pid_t   pid;                    /* 0 once reaped */
    int     status;                 /* wait status, valid once reaped */
    int     fd_in, fd_out, fd_err;  /* -1 once closed */
    char   *in;                     /* owned: args JSON + "\n" */
    size_t  in_len, in_off;
    struct ctl_obuf out, err;
};

/* Start h's command for a call with this id (borrowed; a reference is
 * taken) and args (borrowed).  -1 with errno if it could not be started,
 * with nothing left to clean up. */
int ctl_run_start(struct ctl_run *r, const struct ctl_handler *h, json_t *call_id,
                  const json_t *args);

/* Fill p[0..2] for the command's stdin, stdout and stderr; closed ones get
 * fd -1, which poll() ignores. */
void ctl_run_pollfds(const struct ctl_run *r, struct pollfd p[3]);
/* Move bytes after poll() reported p[0..2]. */
void ctl_run_io(struct ctl_run *r, const struct pollfd p[3]);
/* Reap the process if it has exited (call on SIGCHLD; never blocks). */
void ctl_run_reap(struct ctl_run *r);
int  ctl_run_done(const struct ctl_run *r);

/* The JSON-RPC response for the call (new reference; NULL when out of
 * memory).  Only once ctl_run_done(). */
json_t *ctl_run_reply(const struct ctl_run *r);

/* Kill the process group if it still runs, reap it, and release
 * everything.  Safe on a finished run; leaves r unusable until restarted. */
void ctl_run_end(struct ctl_run *r);

#endif
