/* Runs in: supervisor, zygote, worker */
/*
 * chan.h - the typed, length-checked channel between supervisor and worker.
 *
 * One SOCK_STREAM socketpair per worker.  A frame is an 8-byte header
 * (uint32 type, uint32 length, host byte order: both ends are on this
 * machine) followed by `length` payload bytes.  Payloads are JSON text
 * except CHAN_OUTPUT, which is raw bytes printed by the chunk.
 *
 * Direction and meaning (payload schemas: docs/architecture.md):
 *   supervisor -> worker   CHAN_JOB          a job: the first frame, and a
 *                                            session's every later chunk or
 *                                            snapshot, each after the end
 *                                            frame of the one before
 *                          CHAN_TOOL_RESULT  the answer to outstanding tool
 *                                            call "call" (calls are numbered
 *                                            1, 2, ... per job; under
 *                                            parallel() several are out)
 *   worker -> supervisor   CHAN_OUTPUT       bytes printed (raw, <= CHAN_OUTPUT_MAX)
 *                          CHAN_TOOL_CALL    {"tool","function","args"}
 *                          CHAN_RESULT       success; ends the job
 *                          CHAN_ERROR        failure; ends the job
 *                          CHAN_SYSCALL      (containment) sent by the
 *                                            worker's SIGSYS handler just before
 *                                            it dies: the forbidden syscall's
 *                                            number; a hint, never trusted
 *
 * Contract: the decoder trusts nothing.  An unknown type, a length above the
 * per-type bound given by the reader's owner, or a frame in the wrong
 * direction is reported as CHAN_BAD, after which the reader is poisoned (the
 * owner kills the worker).  The supervisor side never blocks: it feeds bytes
 * from a non-blocking fd.  The worker side uses the blocking helpers.
 */
#ifndef SANDBOXD_CHAN_H
#define SANDBOXD_CHAN_H

#include <stddef.h>
#include <stdint.h>

#include "proto/inbuf.h"

enum chan_type {
    CHAN_JOB = 1,
    CHAN_TOOL_RESULT = 2,
    CHAN_OUTPUT = 16,
    CHAN_TOOL_CALL = 17,
    CHAN_RESULT = 18,
    CHAN_ERROR = 19,
    CHAN_SYSCALL = 31,      /* containment: fixed payload struct chan_syscall */
};

#define CHAN_HEADER_SIZE 8
#define CHAN_OUTPUT_MAX  65536u   /* largest single CHAN_OUTPUT payload */
/* The largest CHAN_JOB and CHAN_TOOL_RESULT payloads the worker reads (it
 * must bound them before it knows any limit).  The supervisor refuses to
 * queue a larger one rather than have the worker die on it. */
#define CHAN_JOB_MAX          ((size_t)64 << 20)
#define CHAN_TOOL_RESULT_MAX  ((size_t)64 << 20)

struct chan_header {
    uint32_t type;
    uint32_t len;
};

/* Containment: the CHAN_SYSCALL payload, exactly this size.  Built
 * by an async-signal-safe handler in policy/contain.c; the supervisor only
 * logs it and puts it in the `crashed` error's data when the worker did die
 * by SIGSYS. */
struct chan_syscall {
    int32_t  nr;        /* si_syscall, or -1 if the SIGSYS was not from seccomp */
    uint32_t arch;      /* si_arch (AUDIT_ARCH_X86_64) */
};
#define CHAN_SYSCALL_SIZE 8u
/* The longest look at the channel a worker takes for a tool answer before it
 * sleeps: the job's limits.tool_spin_us and each TOOL_RESULT's "spin_us"
 * (worker/calls.c), in microseconds. */
#define CHAN_SPIN_US_MAX 10000u

/* The worker's end of its channel, where contain_worker() moves it. */
#define WORKER_CHAN_FD      3
/* A worker's exit status, which the supervisor reads when it reaps it. */
#define WORKER_EXIT_OK      0
#define WORKER_EXIT_SETUP   120  /* containment failed before any job ran */
#define WORKER_EXIT_PROTO   121  /* the channel failed (a job or tool answer
                                  * missing or malformed, a frame not sent),
                                  * or memory outside Lua ran out */
#define WORKER_EXIT_PANIC   122  /* an error escaped every protected call (LUAENV_EXIT_PANIC) */

/* The zygote's hand-over of one worker to the supervisor, one message on
 * the zygote socket (SOCK_SEQPACKET), with the supervisor's end of the
 * worker's channel attached (SCM_RIGHTS) when pid > 0. */
struct zyg_msg {
    int32_t pid;                /* > 0: the worker; 0: none, err says why */
    int32_t err;                /* errno of the failed step, else 0 */
};

enum chan_status {
    CHAN_AGAIN = 0,     /* need more bytes */
    CHAN_FRAME,         /* a whole frame is available */
    CHAN_BAD,           /* protocol violation: poisoned */
};

/* Incremental reader for the supervisor side. */
struct chan_reader {
    struct inbuf in;        /* owned; the held bytes */
    size_t max_payload;     /* bound for any frame except CHAN_OUTPUT */
    int    from_worker;     /* 1: accept worker->supervisor types only */
    int    bad;
};

void chan_reader_init(struct chan_reader *rd, size_t max_payload, int from_worker);
void chan_reader_free(struct chan_reader *rd);
/* Append bytes; -1 on allocation failure (the owner treats it as CHAN_BAD).
 * The header of the next frame is judged as soon as its 8 bytes are held,
 * before any payload byte is stored, so an oversized length never grows
 * the buffer.  Bounds: CHAN_OUTPUT <= CHAN_OUTPUT_MAX, CHAN_SYSCALL exactly
 * CHAN_SYSCALL_SIZE, any other allowed type <= max_payload.  from_worker = 1
 * allows OUTPUT, TOOL_CALL, RESULT, ERROR, SYSCALL; from_worker = 0 allows
 * JOB, TOOL_RESULT.  A poisoned reader drops
 * what it is fed and returns 0. */
int  chan_reader_feed(struct chan_reader *rd, const void *data, size_t n);
/* On CHAN_FRAME, *type, *payload (borrowed, valid until the next feed) and
 * *len describe the frame, and it is consumed.  Otherwise they are set to
 * 0 / NULL / 0.  Once CHAN_BAD is returned it is returned forever. */
enum chan_status chan_reader_next(struct chan_reader *rd, uint32_t *type,
                                  const unsigned char **payload, size_t *len);

/* Encode header+payload into a new malloc'd buffer (caller owns); NULL on
 * allocation failure or len > UINT32_MAX. */
unsigned char *chan_frame_new(uint32_t type, const void *payload, size_t len, size_t *out_len);

/* Blocking helpers for the worker (and tests).  Return 0 on success, -1 on
 * EOF, I/O error, or a frame whose length exceeds max_payload (nothing is
 * allocated for it).  chan_recv() returns a malloc'd, NUL-terminated payload
 * the caller owns.  They retry after EINTR and short reads/writes and use
 * only read(2)/write(2) (the worker's seccomp filter allows no other call
 * on the channel).  chan_recv() does not check the type: its caller does.
 * errno after chan_recv() fails: 0 = EOF before a frame, EPROTO = EOF
 * inside a frame, EMSGSIZE = too long (stream unusable), else from read(2)
 * or malloc.  chan_send() with len > UINT32_MAX fails with EMSGSIZE; to a
 * closed peer it raises SIGPIPE unless that is ignored (then EPIPE). */
int chan_send(int fd, uint32_t type, const void *payload, size_t len);
int chan_recv(int fd, uint32_t *type, char **payload, size_t *len, size_t max_payload);

#endif
