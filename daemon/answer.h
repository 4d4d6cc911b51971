/* Runs in: supervisor */
/*
 * answer.h - what a client is told about an execution: its answer (a result
 * or an error, with output and stats), its live output (execution/output
 * notifications), and its one log line.
 *
 * Contract:
 *  - Nothing here changes an execution's state: exec.c decides, these
 *    functions say.  They write only what belongs to saying it (how much
 *    output has been streamed, the stream timer).
 *  - answer_fail() and answer_result() send at most one answer and log the
 *    execution's one line (answer_log); an execution whose connection is
 *    gone, or that has no request id, is logged and not answered.
 *  - Pointers are borrowed unless a parameter says it is stolen; every
 *    json_t built here is released here.
 *  - CPU time is the kernel's figure for the worker, never the figure the
 *    worker reports about itself.
 */
#ifndef SANDBOXD_ANSWER_H
#define SANDBOXD_ANSWER_H

#include <ev.h>
#include <jansson.h>
#include <stdint.h>

#include "daemon/exec.h"

/* The CPU time of this execution in µs, measured by the supervisor
 * (wproc_cpu_us, or the sample e->cpu_us_seen taken before the worker was
 * killed): for a session chunk, since the chunk began (less
 * e->cpu_base_us, never below 0). */
uint64_t answer_cpu_us(const struct exec *e);

/* The execution's one log line (info), outcome `kind`; wstats (the worker's
 * figures, may be NULL) gives the heap peak; detail (may be NULL) is logged
 * at debug level only, since it may carry the script's data. */
void answer_log(struct exec *e, const char *kind, const json_t *wstats, const char *detail);

/* Live output (stream_output).  answer_output_note: new output was
 * captured, send it soon (a no-op unless e->stream).  answer_flush: send
 * what is pending now, all of it when final, else up to a whole character.
 * answer_stream_cb is the stream timer's callback (t->data: the exec). */
void answer_output_note(struct exec *e);
void answer_flush(struct exec *e, int final);
void answer_stream_cb(struct ev_loop *loop, ev_timer *t, int revents);

/* Answer with error `kind` and the formatted message; data is stolen (may
 * be NULL).  Adds output, output_truncated, stats once the execution has
 * started, and for a session's chunk or snapshot session_closed
 * (!e->keep_open).  Pending live output is flushed first. */
void answer_fail(struct exec *e, enum rpc_kind kind, json_t *data, const json_t *wstats,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Answer from the worker's RESULT frame (d->json, d->raw_value,
 * d->raw_bindings).  0 when answered; -1 when the frame's bindings are
 * malformed, with nothing sent (the caller treats it as a violation). */
int answer_result(struct exec *e, const struct exec_evdata *d);
/* Whether an ERROR frame has a kind a worker may report and a message. */
int answer_error_frame_ok(const json_t *frame);
/* Answer from an ERROR frame that answer_error_frame_ok() accepted. */
void answer_error(struct exec *e, const json_t *frame);
/* Answer for a worker that died before its end frame (d->status, and the
 * SIGSYS hint d->has_syscall, d->syscall). */
void answer_exit(struct exec *e, const struct exec_evdata *d);

#endif
