/* test_outq.c - the non-blocking write queue (daemon/outq.c). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/outq.h"

static void pair(int sv[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
}

/* Read everything available from fd into buf; returns the count. */
static size_t drain(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    ssize_t n;

    fcntl(fd, F_SETFL, O_NONBLOCK);
    while (got < cap && (n = read(fd, buf + got, cap - got)) > 0)
        got += (size_t)n;
    return got;
}

static void test_small_writes_flush_in_order(void **state)
{
    struct outq q = { 0 };
    int sv[2];
    char buf[64];
    (void)state;

    pair(sv);
    assert_int_equal(outq_append(&q, "hello ", 6, 1024), 0);
    assert_int_equal(outq_append(&q, "world", 5, 1024), 0);
    assert_false(outq_empty(&q));
    assert_int_equal(outq_flush(&q, sv[0]), OUTQ_DONE);
    assert_true(outq_empty(&q));
    assert_null(q.buf);                         /* drained: memory released */
    assert_int_equal(drain(sv[1], buf, sizeof buf), 11);
    assert_memory_equal(buf, "hello world", 11);
    close(sv[0]);
    close(sv[1]);
}

static void test_full_socket_keeps_the_rest(void **state)
{
    struct outq q = { 0 };
    int sv[2], sndbuf = 4096;
    size_t total = 4u << 20, got = 0;
    char *big = malloc(total), *in = malloc(total);
    enum outq_status st;
    (void)state;

    pair(sv);
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    for (size_t i = 0; i < total; i++)
        big[i] = (char)(i * 7);
    assert_int_equal(outq_append(&q, big, total, total), 0);
    st = outq_flush(&q, sv[0]);
    assert_int_equal(st, OUTQ_AGAIN);           /* the peer has not read yet */
    assert_false(outq_empty(&q));
    while (st == OUTQ_AGAIN) {
        got += drain(sv[1], in + got, total - got);
        st = outq_flush(&q, sv[0]);
    }
    assert_int_equal(st, OUTQ_DONE);
    got += drain(sv[1], in + got, total - got);
    assert_int_equal(got, total);
    assert_memory_equal(in, big, total);
    free(big);
    free(in);
    close(sv[0]);
    close(sv[1]);
}

static void test_bound_counts_unwritten_bytes(void **state)
{
    struct outq q = { 0 };
    (void)state;

    assert_int_equal(outq_append(&q, "12345678", 8, 10), 0);
    assert_int_equal(outq_append(&q, "123", 3, 10), -1);   /* 11 > 10: refused */
    assert_int_equal(q.len - q.pos, 8);                    /* nothing partial */
    assert_int_equal(outq_append(&q, "12", 2, 10), 0);
    assert_int_equal(outq_append(&q, "x", 1, 0), -1);
    assert_int_equal(outq_append(&q, "x", SIZE_MAX, 10), -1);
    outq_free(&q);
}

static void test_peer_gone_is_an_error(void **state)
{
    struct outq q = { 0 };
    int sv[2];
    (void)state;

    signal(SIGPIPE, SIG_IGN);
    pair(sv);
    close(sv[1]);
    assert_int_equal(outq_append(&q, "x", 1, 10), 0);
    assert_int_equal(outq_flush(&q, sv[0]), OUTQ_ERROR);
    assert_true(outq_empty(&q));                /* dropped */
    close(sv[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_writes_flush_in_order),
        cmocka_unit_test(test_full_socket_keeps_the_rest),
        cmocka_unit_test(test_bound_counts_unwritten_bytes),
        cmocka_unit_test(test_peer_gone_is_an_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
