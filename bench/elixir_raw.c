/*
 * elixir_raw.c - the baseline of bench/elixir_legion.exs: the daemon's own
 * latency for one execute that makes one tool call, seen by a minimal C
 * client (one connection, requests one after another, the tool call
 * answered with a fixed result).
 *
 *   elixir_raw SOCK N REQUEST_LINE     N executions; key=value latencies (timing.h)
 *   elixir_raw SOCK - REQUEST_LINE     one execution per line read on stdin, its
 *                                      latency in us printed as one line
 *
 * REQUEST_LINE is the execute (without its newline, with "id":1); the
 * script passes the same code and tool declaration Sandboxd.Legion sends.
 * The stdin mode lets the script interleave this client with its own,
 * one execution each in turn, so load on the machine hits all alike.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "timing.h"

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            die("write");
        p += w;
        n -= (size_t)w;
    }
}

static char buf[1 << 20];
static size_t have;

/* The next line from fd (NUL-terminated, newline dropped), in buf. */
static char *next_line(int fd, size_t *consumed)
{
    for (;;) {
        char *nl = memchr(buf, '\n', have);
        if (nl) {
            *nl = '\0';
            *consumed = (size_t)(nl - buf) + 1;
            return buf;
        }
        if (have == sizeof buf)
            die("line too long");
        ssize_t r = read(fd, buf + have, sizeof buf - have);
        if (r <= 0)
            die("read");
        have += (size_t)r;
    }
}

static void drop(size_t n)
{
    memmove(buf, buf + n, have - n);
    have -= n;
}

/* One execute on fd, its tool call answered with 3; the latency in us. */
static double one(int fd, const char *req)
{
    double t0 = now_us();

    send_all(fd, req, strlen(req));
    send_all(fd, "\n", 1);
    for (;;) {
        size_t used;
        char *line = next_line(fd, &used);
        json_t *m = json_loads(line, 0, NULL);
        if (!m)
            fprintf(stderr, "elixir_raw: bad JSON: %s\n", line), exit(1);
        if (!json_object_get(m, "method") && !json_object_get(m, "result"))
            fprintf(stderr, "elixir_raw: error answer: %s\n", line), exit(1);
        drop(used);
        if (json_object_get(m, "method")) {
            char out[512];
            int len = snprintf(out, sizeof out, "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"result\":3}\n",
                               json_string_value(json_object_get(m, "id")));
            send_all(fd, out, (size_t)len);
            json_decref(m);
            continue;
        }
        json_decref(m);
        return now_us() - t0;
    }
}

int main(int argc, char **argv)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    long n, i;
    int fd;
    double *lat;

    if (argc != 4)
        return fprintf(stderr, "usage: elixir_raw SOCK N REQUEST_LINE\n"), 2;
    n = strcmp(argv[2], "-") == 0 ? 1 : atol(argv[2]);
    lat = calloc((size_t)n, sizeof *lat);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", argv[1]);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        die("connect");
    if (strcmp(argv[2], "-") == 0) {
        char cmd[64];
        while (fgets(cmd, sizeof cmd, stdin)) {
            printf("%.1f\n", one(fd, argv[3]));
            fflush(stdout);
        }
        return 0;
    }
    for (i = 0; i < n; i++)
        lat[i] = one(fd, argv[3]);
    print_latencies(lat, (size_t)n);
    return 0;
}
