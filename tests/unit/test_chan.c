/*
 * test_chan.c - the supervisor<->worker frame reader and blocking helpers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "proto/chan.h"

/* Header bytes for type/len, as the peer would write them. */
static void put_header(unsigned char *out, uint32_t type, uint32_t len)
{
    struct chan_header h = { type, len };

    memcpy(out, &h, sizeof h);
}

/* Append a frame to a growing byte string. */
static void add_frame(unsigned char **s, size_t *n, uint32_t type, const char *payload, size_t len)
{
    size_t flen;
    unsigned char *f = chan_frame_new(type, payload, len, &flen);

    assert_non_null(f);
    *s = realloc(*s, *n + flen);
    assert_non_null(*s);
    memcpy(*s + *n, f, flen);
    *n += flen;
    free(f);
}

static void test_frame_new_layout(void **state)
{
    unsigned char *f;
    size_t n = 0;
    struct chan_header h;

    (void)state;
    f = chan_frame_new(CHAN_RESULT, "{}", 2, &n);
    assert_non_null(f);
    assert_int_equal(n, CHAN_HEADER_SIZE + 2);
    memcpy(&h, f, sizeof h);
    assert_int_equal(h.type, CHAN_RESULT);
    assert_int_equal(h.len, 2);
    assert_memory_equal(f + CHAN_HEADER_SIZE, "{}", 2);
    free(f);

    f = chan_frame_new(CHAN_OUTPUT, NULL, 0, &n);
    assert_non_null(f);
    assert_int_equal(n, CHAN_HEADER_SIZE);
    free(f);

#if SIZE_MAX > UINT32_MAX
    /* the payload is never read: the length is refused first */
    assert_null(chan_frame_new(CHAN_OUTPUT, "x", (size_t)UINT32_MAX + 1, &n));
#endif
}

/* A stream of frames, fed in chunks of `chunk` bytes, gives the same frames
 * back in order, whatever the chunking. */
static void round_trip(size_t chunk)
{
    static const struct { uint32_t type; const char *p; size_t n; } frames[] = {
        { CHAN_OUTPUT, "hello\n", 6 },
        { CHAN_OUTPUT, "", 0 },
        { CHAN_TOOL_CALL, "{\"tool\":\"W\"}", 12 },
        { CHAN_OUTPUT, "a\0b", 3 },
        { CHAN_ERROR, "{\"kind\":\"x\"}", 12 },
        { CHAN_RESULT, "", 0 },
    };
    unsigned char *s = NULL;
    size_t n = 0, off, k, i = 0, nframes = sizeof frames / sizeof frames[0];
    struct chan_reader rd;
    uint32_t type;
    const unsigned char *p;
    size_t len;
    enum chan_status st;

    for (k = 0; k < nframes; k++)
        add_frame(&s, &n, frames[k].type, frames[k].p, frames[k].n);
    chan_reader_init(&rd, 100, 1);
    for (off = 0; off < n; off += k) {
        k = n - off < chunk ? n - off : chunk;
        assert_int_equal(chan_reader_feed(&rd, s + off, k), 0);
        while ((st = chan_reader_next(&rd, &type, &p, &len)) == CHAN_FRAME) {
            assert_true(i < nframes);
            assert_int_equal(type, frames[i].type);
            assert_int_equal(len, frames[i].n);
            if (len)
                assert_memory_equal(p, frames[i].p, len);
            i++;
        }
        assert_int_equal(st, CHAN_AGAIN);
        assert_int_equal(type, 0);
        assert_null(p);
    }
    assert_int_equal(i, nframes);
    chan_reader_free(&rd);
    free(s);
}

static void test_reader_round_trip(void **state)
{
    (void)state;
    round_trip(SIZE_MAX);
    round_trip(5);
    round_trip(1);
}

static void test_reader_supervisor_to_worker(void **state)
{
    struct chan_reader rd;
    unsigned char *s = NULL;
    size_t n = 0, len;
    uint32_t type;
    const unsigned char *p;

    (void)state;
    add_frame(&s, &n, CHAN_JOB, "{\"op\":\"check\"}", 14);
    add_frame(&s, &n, CHAN_TOOL_RESULT, "{\"ok\":true}", 11);
    chan_reader_init(&rd, 64, 0);
    assert_int_equal(chan_reader_feed(&rd, s, n), 0);
    assert_int_equal(chan_reader_next(&rd, &type, &p, &len), CHAN_FRAME);
    assert_int_equal(type, CHAN_JOB);
    assert_int_equal(chan_reader_next(&rd, &type, &p, &len), CHAN_FRAME);
    assert_int_equal(type, CHAN_TOOL_RESULT);
    assert_int_equal(len, 11);
    assert_int_equal(chan_reader_next(&rd, &type, &p, &len), CHAN_AGAIN);
    chan_reader_free(&rd);
    free(s);
}

/* After one bad header: CHAN_BAD forever, even if valid frames follow. */
static void expect_poisoned(int from_worker, uint32_t type, uint32_t flen, size_t max_payload)
{
    struct chan_reader rd;
    unsigned char hdr[CHAN_HEADER_SIZE];
    unsigned char *good = NULL;
    size_t n = 0, len, i, held;
    uint32_t t;
    const unsigned char *p;

    put_header(hdr, type, flen);
    add_frame(&good, &n, from_worker ? CHAN_RESULT : CHAN_JOB, "{}", 2);
    chan_reader_init(&rd, max_payload, from_worker);
    /* the header alone decides; no payload byte has been fed */
    assert_int_equal(chan_reader_feed(&rd, hdr, sizeof hdr), 0);
    assert_int_equal(chan_reader_next(&rd, &t, &p, &len), CHAN_BAD);
    assert_true(rd.bad);
    held = rd.in.len;
    for (i = 0; i < 3; i++) {
        assert_int_equal(chan_reader_feed(&rd, good, n), 0);
        assert_int_equal(rd.in.len, held);     /* dropped, not stored */
        assert_int_equal(chan_reader_next(&rd, &t, &p, &len), CHAN_BAD);
        assert_null(p);
    }
    chan_reader_free(&rd);
    free(good);
}

static void test_wrong_direction_and_unknown_types(void **state)
{
    static const uint32_t to_worker[] = { CHAN_JOB, CHAN_TOOL_RESULT };
    static const uint32_t from_worker[] = { CHAN_OUTPUT, CHAN_TOOL_CALL, CHAN_RESULT, CHAN_ERROR };
    static const uint32_t unknown[] = { 0, 3, 15, 20, 0xffffffffu };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof to_worker / sizeof to_worker[0]; i++)
        expect_poisoned(1, to_worker[i], 2, 100);
    for (i = 0; i < sizeof from_worker / sizeof from_worker[0]; i++)
        expect_poisoned(0, from_worker[i], 2, 100);
    for (i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        expect_poisoned(1, unknown[i], 0, 100);
        expect_poisoned(0, unknown[i], 0, 100);
    }
}

static void test_oversized_frames(void **state)
{
    struct chan_reader rd;
    unsigned char hdr[CHAN_HEADER_SIZE];
    uint32_t t;
    const unsigned char *p;
    size_t len;

    (void)state;
    expect_poisoned(1, CHAN_RESULT, 101, 100);
    expect_poisoned(1, CHAN_TOOL_CALL, 0xffffffffu, 100);
    expect_poisoned(0, CHAN_JOB, 101, 100);
    expect_poisoned(1, CHAN_OUTPUT, CHAN_OUTPUT_MAX + 1, 1u << 20);
    expect_poisoned(1, CHAN_OUTPUT, 0xffffffffu, SIZE_MAX);

    /* at the bound: accepted and waiting for the payload */
    chan_reader_init(&rd, 100, 1);
    put_header(hdr, CHAN_ERROR, 100);
    assert_int_equal(chan_reader_feed(&rd, hdr, sizeof hdr), 0);
    assert_int_equal(chan_reader_next(&rd, &t, &p, &len), CHAN_AGAIN);
    chan_reader_free(&rd);

    /* OUTPUT has its own bound, above a smaller max_payload */
    chan_reader_init(&rd, 100, 1);
    put_header(hdr, CHAN_OUTPUT, CHAN_OUTPUT_MAX);
    assert_int_equal(chan_reader_feed(&rd, hdr, sizeof hdr), 0);
    assert_int_equal(chan_reader_next(&rd, &t, &p, &len), CHAN_AGAIN);
    chan_reader_free(&rd);
}

/* A header and a large payload in one feed: the payload is not stored. */
static void test_oversized_not_buffered(void **state)
{
    struct chan_reader rd;
    size_t n = CHAN_HEADER_SIZE + (1u << 20), len;
    unsigned char *s = calloc(1, n);
    uint32_t t;
    const unsigned char *p;

    (void)state;
    assert_non_null(s);
    put_header(s, CHAN_RESULT, 1u << 20);
    chan_reader_init(&rd, 1000, 1);
    assert_int_equal(chan_reader_feed(&rd, s, n), 0);
    assert_true(rd.in.cap <= 256);
    assert_int_equal(chan_reader_next(&rd, &t, &p, &len), CHAN_BAD);
    chan_reader_free(&rd);
    free(s);
}

/* A good frame before a bad one is still delivered. */
static void test_good_then_bad(void **state)
{
    struct chan_reader rd;
    unsigned char *s = NULL;
    size_t n = 0, len;
    uint32_t t;
    const unsigned char *p;

    (void)state;
    add_frame(&s, &n, CHAN_OUTPUT, "x", 1);
    add_frame(&s, &n, CHAN_JOB, "{}", 2);
    chan_reader_init(&rd, 100, 1);
    assert_int_equal(chan_reader_feed(&rd, s, n), 0);
    assert_int_equal(chan_reader_next(&rd, &t, &p, &len), CHAN_FRAME);
    assert_int_equal(t, CHAN_OUTPUT);
    assert_int_equal(chan_reader_next(&rd, &t, &p, &len), CHAN_BAD);
    assert_true(rd.bad);
    /* poisoned: a valid frame fed now is dropped, not delivered */
    n = rd.in.len;
    assert_int_equal(chan_reader_feed(&rd, s, CHAN_HEADER_SIZE + 1), 0);
    assert_int_equal(rd.in.len, n);
    assert_int_equal(chan_reader_next(&rd, &t, &p, &len), CHAN_BAD);
    chan_reader_free(&rd);
    free(s);
}

/* Consumed frames are reclaimed: many frames through a small buffer. */
static void test_reader_compaction(void **state)
{
    struct chan_reader rd;
    unsigned char *s = NULL;
    size_t n = 0, len, i, got = 0;
    uint32_t t;
    const unsigned char *p;

    (void)state;
    add_frame(&s, &n, CHAN_OUTPUT, "0123456789", 10);
    chan_reader_init(&rd, 100, 1);
    /* part of a frame is always held, so the buffer never simply empties */
    assert_int_equal(chan_reader_feed(&rd, s, 7), 0);
    for (i = 0; i < 100000; i++) {
        assert_int_equal(chan_reader_feed(&rd, s + 7, n - 7), 0);
        assert_int_equal(chan_reader_feed(&rd, s, 7), 0);
        while (chan_reader_next(&rd, &t, &p, &len) == CHAN_FRAME) {
            assert_memory_equal(p, "0123456789", 10);
            got++;
        }
        assert_true(rd.in.cap <= 256);
    }
    assert_int_equal(got, 100000);
    chan_reader_free(&rd);
    free(s);
}

/* ------------------------------------------------------------------------
 * Blocking helpers over a socketpair
 * --------------------------------------------------------------------- */

static void pair(int sv[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
}

static void test_send_recv_small(void **state)
{
    int sv[2];
    uint32_t t;
    char *p;
    size_t len;

    (void)state;
    pair(sv);
    assert_int_equal(chan_send(sv[0], CHAN_JOB, "{\"op\":\"check\"}", 14), 0);
    assert_int_equal(chan_send(sv[0], CHAN_TOOL_RESULT, NULL, 0), 0);
    assert_int_equal(chan_recv(sv[1], &t, &p, &len, 100), 0);
    assert_int_equal(t, CHAN_JOB);
    assert_int_equal(len, 14);
    assert_string_equal(p, "{\"op\":\"check\"}");     /* NUL-terminated */
    free(p);
    assert_int_equal(chan_recv(sv[1], &t, &p, &len, 100), 0);
    assert_int_equal(t, CHAN_TOOL_RESULT);
    assert_int_equal(len, 0);
    assert_non_null(p);
    assert_int_equal(p[0], '\0');
    free(p);
    /* clean EOF between frames */
    close(sv[0]);
    errno = EINVAL;
    assert_int_equal(chan_recv(sv[1], &t, &p, &len, 100), -1);
    assert_int_equal(errno, 0);
    assert_null(p);
    close(sv[1]);
}

/* Larger than the socket buffer: a child sends, so both sides see short
 * writes and reads. */
static void test_send_recv_large(void **state)
{
    size_t n = 4u << 20, len, i;
    char *big = malloc(n);
    int sv[2], status;
    uint32_t t;
    char *p;
    pid_t pid;

    (void)state;
    assert_non_null(big);
    for (i = 0; i < n; i++)
        big[i] = (char)(i * 7);
    pair(sv);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(sv[1]);
        _exit(chan_send(sv[0], CHAN_RESULT, big, n) == 0
              && chan_send(sv[0], CHAN_ERROR, "e", 1) == 0 ? 0 : 1);
    }
    close(sv[0]);
    assert_int_equal(chan_recv(sv[1], &t, &p, &len, n), 0);
    assert_int_equal(t, CHAN_RESULT);
    assert_int_equal(len, n);
    assert_memory_equal(p, big, n);
    free(p);
    assert_int_equal(chan_recv(sv[1], &t, &p, &len, n), 0);
    assert_int_equal(t, CHAN_ERROR);
    free(p);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(sv[1]);
    free(big);
}

/* A frame written one byte at a time arrives whole. */
static void test_recv_byte_by_byte(void **state)
{
    unsigned char *f;
    size_t flen, len, i;
    int sv[2], status;
    uint32_t t;
    char *p;
    pid_t pid;

    (void)state;
    f = chan_frame_new(CHAN_TOOL_RESULT, "{\"ok\":false}", 12, &flen);
    assert_non_null(f);
    pair(sv);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        for (i = 0; i < flen; i++) {
            if (write(sv[0], f + i, 1) != 1)
                _exit(1);
            usleep(500);
        }
        _exit(0);
    }
    close(sv[0]);
    assert_int_equal(chan_recv(sv[1], &t, &p, &len, 100), 0);
    assert_int_equal(t, CHAN_TOOL_RESULT);
    assert_string_equal(p, "{\"ok\":false}");
    free(p);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(sv[1]);
    free(f);
}

/* The length is refused from the header: the payload is never waited for
 * (the writer has shut down, so a read would see EOF) nor allocated. */
static void expect_recv_refused(uint32_t flen, size_t max_payload)
{
    unsigned char hdr[CHAN_HEADER_SIZE];
    int sv[2];
    uint32_t t;
    char *p = (char *)1;
    size_t len;

    pair(sv);
    put_header(hdr, CHAN_JOB, flen);
    assert_int_equal(write(sv[0], hdr, sizeof hdr), (ssize_t)sizeof hdr);
    assert_int_equal(shutdown(sv[0], SHUT_WR), 0);
    assert_int_equal(chan_recv(sv[1], &t, &p, &len, max_payload), -1);
    assert_int_equal(errno, EMSGSIZE);
    assert_null(p);
    close(sv[0]);
    close(sv[1]);
}

static void test_recv_oversized(void **state)
{
    (void)state;
    expect_recv_refused(0xffffffffu, 1000);
    expect_recv_refused(1001, 1000);
    expect_recv_refused(1, 0);
}

static void test_recv_truncated(void **state)
{
    unsigned char hdr[CHAN_HEADER_SIZE];
    int sv[2];
    uint32_t t;
    char *p;
    size_t len;

    (void)state;
    /* header promises 10 bytes, 3 come, then EOF */
    pair(sv);
    put_header(hdr, CHAN_JOB, 10);
    assert_int_equal(write(sv[0], hdr, sizeof hdr), (ssize_t)sizeof hdr);
    assert_int_equal(write(sv[0], "abc", 3), 3);
    close(sv[0]);
    assert_int_equal(chan_recv(sv[1], &t, &p, &len, 100), -1);
    assert_int_equal(errno, EPROTO);
    assert_null(p);
    close(sv[1]);

    /* half a header, then EOF */
    pair(sv);
    assert_int_equal(write(sv[0], hdr, 3), 3);
    close(sv[0]);
    assert_int_equal(chan_recv(sv[1], &t, &p, &len, 100), -1);
    assert_int_equal(errno, EPROTO);
    close(sv[1]);
}

static void test_send_errors(void **state)
{
    int sv[2];

    (void)state;
    pair(sv);
#if SIZE_MAX > UINT32_MAX
    assert_int_equal(chan_send(sv[0], CHAN_OUTPUT, "x", (size_t)UINT32_MAX + 1), -1);
    assert_int_equal(errno, EMSGSIZE);
#endif
    close(sv[1]);
    /* SIGPIPE is ignored by main(): the error is reported instead */
    assert_int_equal(chan_send(sv[0], CHAN_OUTPUT, "x", 1), -1);
    assert_int_equal(errno, EPIPE);
    assert_int_equal(chan_send(sv[0], CHAN_OUTPUT, NULL, 0), -1);
    close(sv[0]);
}

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

/* A signal without SA_RESTART interrupts the blocking read: chan_recv
 * retries instead of failing. */
static void test_recv_retries_after_eintr(void **state)
{
    struct sigaction sa, old;
    struct itimerval it = { { 0, 20000 }, { 0, 20000 } }, off = { { 0, 0 }, { 0, 0 } };
    int sv[2], status;
    uint32_t t;
    char *p;
    size_t len;
    pid_t pid;

    (void)state;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
    pair(sv);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        unsigned char hdr[CHAN_HEADER_SIZE];

        put_header(hdr, CHAN_JOB, 2);
        usleep(150000);
        if (write(sv[0], hdr, 4) != 4)
            _exit(1);
        usleep(150000);
        if (write(sv[0], hdr + 4, 4) != 4 || write(sv[0], "{}", 2) != 2)
            _exit(1);
        _exit(0);
    }
    close(sv[0]);
    alarms = 0;
    assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
    assert_int_equal(chan_recv(sv[1], &t, &p, &len, 100), 0);
    assert_int_equal(setitimer(ITIMER_REAL, &off, NULL), 0);
    assert_true(alarms > 0);
    assert_int_equal(t, CHAN_JOB);
    assert_string_equal(p, "{}");
    free(p);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    sigaction(SIGALRM, &old, NULL);
    close(sv[1]);
}

/* The two halves together: chan_send on one end, the reader fed from a
 * non-blocking read on the other. */
static void test_send_into_reader(void **state)
{
    int sv[2];
    struct chan_reader rd;
    unsigned char buf[3];
    ssize_t r;
    uint32_t t;
    const unsigned char *p;
    size_t len;
    int frames = 0;

    (void)state;
    pair(sv);
    assert_int_equal(chan_send(sv[0], CHAN_TOOL_CALL, "{\"tool\":\"W\",\"args\":[]}", 22), 0);
    assert_int_equal(chan_send(sv[0], CHAN_RESULT, "{}", 2), 0);
    close(sv[0]);
    chan_reader_init(&rd, 64, 1);
    while ((r = read(sv[1], buf, sizeof buf)) > 0) {
        assert_int_equal(chan_reader_feed(&rd, buf, (size_t)r), 0);
        while (chan_reader_next(&rd, &t, &p, &len) == CHAN_FRAME) {
            assert_int_equal(t, frames == 0 ? CHAN_TOOL_CALL : CHAN_RESULT);
            frames++;
        }
    }
    assert_int_equal(frames, 2);
    chan_reader_free(&rd);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_new_layout),
        cmocka_unit_test(test_reader_round_trip),
        cmocka_unit_test(test_reader_supervisor_to_worker),
        cmocka_unit_test(test_wrong_direction_and_unknown_types),
        cmocka_unit_test(test_oversized_frames),
        cmocka_unit_test(test_oversized_not_buffered),
        cmocka_unit_test(test_good_then_bad),
        cmocka_unit_test(test_reader_compaction),
        cmocka_unit_test(test_send_recv_small),
        cmocka_unit_test(test_send_recv_large),
        cmocka_unit_test(test_recv_byte_by_byte),
        cmocka_unit_test(test_recv_oversized),
        cmocka_unit_test(test_recv_truncated),
        cmocka_unit_test(test_send_errors),
        cmocka_unit_test(test_recv_retries_after_eintr),
        cmocka_unit_test(test_send_into_reader),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
