/*
 * loadgen.c - the sandboxd benchmark client and the per-execution spawn
 * baselines.  It speaks JSON-RPC 2.0 over NDJSON on a Unix socket with its
 * own small client (one buffer per connection, jansson for the JSON).
 *
 * Every mode prints its figures as "key=value" lines on stdout, which
 * bench/run collects into the report; problems go to stderr with exit 1.
 *
 *   loadgen latency  -s SOCK -n N               sequential execute of `return 1+1`
 *   loadgen tput     -s SOCK -c CONNS -n N      closed loop, one request in flight per connection
 *   loadgen tools    -s SOCK -n CALLS           tool calls inside one execution
 *   loadgen cpu      -s SOCK -n REPEAT -e CODE [-l LIMITS_JSON]   wall and CPU time of one execution
 *   loadgen idle     -s SOCK -c CONNS -p PID    supervisor VmRSS with CONNS idle connections
 *   loadgen workermem -p PID                    private memory of idle pooled workers
 *   loadgen spawn-latency -n N [-b]             posix_spawn lua5.3 -e per execution (-b: in bwrap)
 *   loadgen spawn-tput -c PAR -n N [-b]         the same, PAR processes in flight
 *   loadgen spawn-cpu -n REPEAT -e CODE          stock lua5.3 running CODE
 *   loadgen spawn-mem                           private memory of an idle lua5.3 process
 *   loadgen describe -s SOCK                    describe's "state" figures
 *   loadgen forkfloor -n N                      fork + _exit + wait of this small process
 *   loadgen relay -n N                          a byte relayed worker->supervisor->client->back
 *   loadgen payload -s SOCK -k value|bindings -B BYTES -n N
 *                                               an execute carrying BYTES of payload (below)
 *   loadgen payload-floor -k value|bindings -B BYTES -n N
 *                                               the same bytes: one parse, one dump, the hops
 *   loadgen hog -n SECONDS                      spin on one CPU until killed, the parent dies
 *                                               or SECONDS pass (bench/ab's background load)
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "timing.h"

extern char **environ;

#define LUA_BIN  "/usr/bin/lua5.3"
#define BWRAP    "/usr/bin/bwrap"

/* ------------------------------------------------------------------ */
/* helpers                                                             */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;

    fputs("loadgen: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void raise_nofile(rlim_t want)
{
    struct rlimit r;

    if (getrlimit(RLIMIT_NOFILE, &r) != 0)
        return;
    if (r.rlim_cur >= want)
        return;
    r.rlim_cur = r.rlim_max == RLIM_INFINITY || r.rlim_max >= want ? want : r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur < want)
        die("cannot raise RLIMIT_NOFILE to %lu (hard limit %lu)", (unsigned long)want,
            (unsigned long)r.rlim_max);
}

/* ------------------------------------------------------------------ */
/* the client: one connection, one input buffer                        */

struct cli {
    int    fd;
    char  *buf;
    size_t len, cap;
    int    inflight;     /* tput: requests sent and not answered */
    double t_sent;
};

static int cli_connect(const char *path)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        die("socket: %s", strerror(errno));
    if (strlen(path) >= sizeof a.sun_path)
        die("socket path too long: %s", path);
    strcpy(a.sun_path, path);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        die("connect %s: %s", path, strerror(errno));
    return fd;
}

static void cli_open(struct cli *c, const char *path)
{
    memset(c, 0, sizeof *c);
    c->fd = cli_connect(path);
}

static void cli_close(struct cli *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->buf);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

static void send_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            struct pollfd p = { .fd = fd, .events = POLLOUT };
            poll(&p, 1, -1);
            continue;
        }
        if (w <= 0)
            die("write: %s", w < 0 ? strerror(errno) : "short write");
        s += w;
        n -= (size_t)w;
    }
}

/* Read once into the buffer.  Returns bytes read; dies at EOF. */
static size_t cli_fill(struct cli *c)
{
    ssize_t n;

    if (c->cap - c->len < 65536) {
        c->cap = c->cap ? c->cap * 2 : 131072;
        if (!(c->buf = realloc(c->buf, c->cap)))
            die("out of memory");
    }
    do
        n = read(c->fd, c->buf + c->len, c->cap - c->len);
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        return 0;
    if (n <= 0)
        die("the daemon closed the connection (%s)", n < 0 ? strerror(errno) : "EOF");
    c->len += (size_t)n;
    return (size_t)n;
}

/* Take one complete message from the buffer, or NULL. */
static json_t *cli_take(struct cli *c)
{
    char *nl;
    json_t *j;
    json_error_t err;
    size_t linelen;

    if (c->len == 0 || !(nl = memchr(c->buf, '\n', c->len)))
        return NULL;
    linelen = (size_t)(nl - c->buf);
    if (!(j = json_loadb(c->buf, linelen, 0, &err)))
        die("the daemon sent bad JSON: %s: %.200s", err.text, c->buf);
    memmove(c->buf, nl + 1, c->len - linelen - 1);
    c->len -= linelen + 1;
    return j;
}

/* The next message, blocking. */
static json_t *cli_recv(struct cli *c)
{
    json_t *j;

    while (!(j = cli_take(c)))
        cli_fill(c);
    return j;
}

/* Dies unless msg is a successful response; returns its result. */
static json_t *expect_result(json_t *msg)
{
    json_t *r = json_object_get(msg, "result");

    if (!r) {
        char *s = json_dumps(msg, JSON_COMPACT);
        die("request failed: %.400s", s ? s : "?");
    }
    return r;
}

/* execute `return 1+1` must come back as value 2. */
static void check_two(json_t *msg)
{
    json_t *v = json_object_get(expect_result(msg), "value");

    if (!json_is_integer(v) || json_integer_value(v) != 2)
        die("execute returned the wrong value");
}

static const char *sock_path;
static const char *exec_limits;     /* -l: a limits object for every execute */

static size_t exec_line(char *buf, size_t n, unsigned long id)
{
    if (exec_limits)
        return (size_t)snprintf(buf, n, "{\"jsonrpc\":\"2.0\",\"id\":%lu,\"method\":\"execute\","
                                "\"params\":{\"code\":\"return 1+1\",\"limits\":%s}}\n", id,
                                exec_limits);
    return (size_t)snprintf(buf, n, "{\"jsonrpc\":\"2.0\",\"id\":%lu,\"method\":\"execute\","
                            "\"params\":{\"code\":\"return 1+1\"}}\n", id);
}

/* ------------------------------------------------------------------ */
/* sandboxd scenarios                                                  */

static void m_latency(long n)
{
    struct cli c;
    double *lat = calloc((size_t)n, sizeof *lat), *wall = calloc((size_t)n, sizeof *wall);
    char line[1024];
    long i, warm = n / 10 + 5;

    if (!lat || !wall)
        die("out of memory");
    cli_open(&c, sock_path);
    for (i = -warm; i < n; i++) {
        size_t len = exec_line(line, sizeof line, (unsigned long)(i + warm + 1));
        double t0 = now_us();
        json_t *m;
        send_all(c.fd, line, len);
        m = cli_recv(&c);
        if (i >= 0) {
            lat[i] = now_us() - t0;
            /* the daemon's own view: job start to answer */
            wall[i] = (double)json_integer_value(json_object_get(
                json_object_get(json_object_get(m, "result"), "stats"), "wall_us"));
        }
        check_two(m);
        json_decref(m);
    }
    cli_close(&c);
    print_latencies(lat, (size_t)n);
    qsort(wall, (size_t)n, sizeof *wall, cmp_double);
    printf("wall_p50_us=%.1f\n", pct(wall, (size_t)n, 50));
    free(lat);
    free(wall);
}

static void m_tput(int conns, long n)
{
    struct cli *c = calloc((size_t)conns, sizeof *c);
    struct pollfd *p = calloc((size_t)conns, sizeof *p);
    double *lat = calloc((size_t)n, sizeof *lat);
    long sent = 0, done = 0;
    unsigned long id = 0;
    char line[1024];
    double t0, el;
    int i;

    if (!c || !p || !lat)
        die("out of memory");
    raise_nofile((rlim_t)conns + 64);
    for (i = 0; i < conns; i++) {
        cli_open(&c[i], sock_path);
        fcntl(c[i].fd, F_SETFL, O_NONBLOCK);
        p[i].fd = c[i].fd;
        p[i].events = POLLIN;
    }
    t0 = now_us();
    for (i = 0; i < conns && sent < n; i++, sent++) {
        send_all(c[i].fd, line, exec_line(line, sizeof line, ++id));
        c[i].inflight = 1;
        c[i].t_sent = now_us();
    }
    while (done < n) {
        if (poll(p, (nfds_t)conns, 30000) <= 0)
            die("no answer within 30 s (%ld of %ld done)", done, n);
        for (i = 0; i < conns; i++) {
            json_t *m;
            if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            cli_fill(&c[i]);
            while ((m = cli_take(&c[i]))) {
                double t = now_us();
                check_two(m);
                json_decref(m);
                lat[done++] = t - c[i].t_sent;
                c[i].inflight = 0;
                if (sent < n) {
                    send_all(c[i].fd, line, exec_line(line, sizeof line, ++id));
                    c[i].inflight = 1;
                    c[i].t_sent = now_us();
                    sent++;
                }
            }
        }
    }
    el = now_us() - t0;
    for (i = 0; i < conns; i++)
        cli_close(&c[i]);
    printf("conns=%d\nrate=%.1f\nelapsed_s=%.3f\n", conns, (double)n / (el / 1e6), el / 1e6);
    print_latencies(lat, (size_t)n);
    free(c);
    free(p);
    free(lat);
}

static void m_tools(long calls)
{
    struct cli c;
    char *req;
    json_t *m;
    long seen = 0;
    double t0, el;
    int len;

    cli_open(&c, sock_path);
    len = asprintf(&req,
                   "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"execute\",\"params\":{"
                   "\"code\":\"local s = 0 for i = 1, %ld do s = s + T.f(i) end return s\","
                   "\"tools\":[{\"name\":\"T\",\"functions\":[\"f\"]}],"
                   "\"limits\":%s,\"timeout_ms\":600000}}\n", calls,
                   exec_limits ? exec_limits : "{}");
    if (len < 0)
        die("out of memory");
    t0 = now_us();
    send_all(c.fd, req, (size_t)len);
    for (;;) {
        /* answer every tool call that is buffered in one write */
        char out[65536];
        size_t olen = 0;
        cli_fill(&c);
        while ((m = cli_take(&c))) {
            json_t *id = json_object_get(m, "id");
            if (json_object_get(m, "method")) {
                const char *sid = json_string_value(id);
                if (!sid || strlen(sid) > 200)
                    die("tool/call without a sane string id");
                /* the daemon's ids are plain tokens; escape nothing but check */
                if (strpbrk(sid, "\"\\"))
                    die("tool/call id needs escaping");
                olen += (size_t)snprintf(out + olen, sizeof out - olen,
                                         "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"result\":1}\n", sid);
                seen++;
                json_decref(m);
                if (olen > sizeof out - 512) {
                    send_all(c.fd, out, olen);
                    olen = 0;
                }
                continue;
            }
            el = now_us() - t0;
            {
                json_t *v = json_object_get(expect_result(m), "value");
                if (!json_is_integer(v) || json_integer_value(v) != calls || seen != calls)
                    die("tool scenario: wrong value or call count (%ld calls seen)", seen);
            }
            json_decref(m);
            printf("calls=%ld\nrate=%.1f\nelapsed_s=%.3f\nper_call_us=%.1f\n", calls,
                   (double)calls / (el / 1e6), el / 1e6, el / (double)calls);
            cli_close(&c);
            free(req);
            return;
        }
        if (olen)
            send_all(c.fd, out, olen);
    }
}

/* ------------------------------------------------------------------ */
/* payloads: what a value or a binding set of BYTES costs end to end      */

/* value:    the chunk returns a string of BYTES made in Lua by string.rep
 *           (Lua's part is a memcpy): the worker encodes it, the supervisor
 *           passes it on, the client parses it; 2 hops of the bytes.
 * bindings: the bindings hold one global string of BYTES; each execute
 *           restores them and returns them (`return 1`): the supervisor
 *           passes them in and out, the worker decodes and encodes; 4 hops.
 * The floor of either (payload-floor) is the same bytes through one
 * json_loadb, one json_dumps and as many hops through a socketpair to an
 * echoing child, so the ratio shows what sandboxd adds to the work that
 * must be done once anyway. */
static int payload_bindings;
static long payload_bytes = 1024;

static char *payload_request(unsigned long id, const char *bindings)
{
    char *req;
    int len;

    if (payload_bindings)
        len = asprintf(&req, "{\"jsonrpc\":\"2.0\",\"id\":%lu,\"method\":\"execute\",\"params\":"
                       "{\"code\":\"return 1\",\"bindings\":%s,\"timeout_ms\":600000}}\n",
                       id, bindings);
    else
        len = asprintf(&req, "{\"jsonrpc\":\"2.0\",\"id\":%lu,\"method\":\"execute\",\"params\":"
                       "{\"code\":\"return string.rep('x', %ld)\",\"timeout_ms\":600000}}\n",
                       id, payload_bytes);
    if (len < 0)
        die("out of memory");
    return req;
}

/* The bindings of one global string of payload_bytes, as the daemon made
 * them (its opaque encoding); owned by the caller. */
static char *payload_make_bindings(struct cli *c)
{
    char *req, *b;
    json_t *m;

    if (asprintf(&req, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"execute\",\"params\":"
                 "{\"code\":\"data = string.rep('x', %ld)\",\"timeout_ms\":600000}}\n",
                 payload_bytes) < 0)
        die("out of memory");
    send_all(c->fd, req, strlen(req));
    free(req);
    m = cli_recv(c);
    if (!(b = json_dumps(json_object_get(expect_result(m), "bindings"),
                         JSON_COMPACT | JSON_ENCODE_ANY)))
        die("out of memory");
    json_decref(m);
    return b;
}

static void m_payload(long n)
{
    struct cli c;
    double *lat = calloc((size_t)n, sizeof *lat);
    char *bindings = NULL;
    long i, warm = n / 10 + 2;

    if (!lat)
        die("out of memory");
    cli_open(&c, sock_path);
    if (payload_bindings)
        bindings = payload_make_bindings(&c);
    for (i = -warm; i < n; i++) {
        char *req = payload_request((unsigned long)(i + warm + 1), bindings);
        double t0 = now_us();
        json_t *m, *r;
        send_all(c.fd, req, strlen(req));
        m = cli_recv(&c);
        if (i >= 0)
            lat[i] = now_us() - t0;
        r = expect_result(m);
        if (!payload_bindings &&
            json_string_length(json_object_get(r, "value")) != (size_t)payload_bytes)
            die("payload: the value is not %ld bytes", payload_bytes);
        json_decref(m);
        free(req);
    }
    cli_close(&c);
    free(bindings);
    printf("bytes=%ld\n", payload_bytes);
    print_latencies(lat, (size_t)n);
    free(lat);
}

/* Move len bytes of buf to the echoing child and back: 2 hops.  Writes
 * and reads interleave (poll), as neither side's buffer holds a large
 * payload whole. */
static void floor_round_trip(int fd, char *buf, char *back, size_t len)
{
    size_t sent = 0, got = 0;

    while (got < len) {
        struct pollfd p = { .fd = fd, .events = POLLIN | (sent < len ? POLLOUT : 0) };
        ssize_t r;
        if (poll(&p, 1, -1) < 0 && errno != EINTR)
            die("poll: %s", strerror(errno));
        if ((p.revents & POLLOUT) && sent < len &&
            (r = write(fd, buf + sent, len - sent)) > 0)
            sent += (size_t)r;
        if (p.revents & (POLLIN | POLLHUP)) {
            if ((r = read(fd, back + got, len - got)) <= 0)
                die("payload-floor: the echo child went away");
            got += (size_t)r;
        }
    }
}

static void m_payload_floor(long n)
{
    double *lat = calloc((size_t)n, sizeof *lat);
    int sv[2];
    pid_t pid;
    char *text, *copy, *back;
    size_t len;
    long i, warm = n / 10 + 2;
    json_t *msg;

    if (!lat)
        die("out of memory");
    /* the message a client gets: the payload as a JSON string in a result */
    if (!(copy = malloc((size_t)payload_bytes + 1)))
        die("out of memory");
    memset(copy, 'x', (size_t)payload_bytes);
    copy[payload_bytes] = '\0';
    msg = json_pack("{s:s,s:i,s:{s:s}}", "jsonrpc", "2.0", "id", 1, "result", "value", copy);
    free(copy);
    if (!msg || !(text = json_dumps(msg, JSON_COMPACT)))
        die("out of memory");
    json_decref(msg);
    len = strlen(text);
    if (!(back = malloc(len)))
        die("out of memory");
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
        die("socketpair: %s", strerror(errno));
    if ((pid = fork()) == 0) {
        char *b = malloc(1 << 20);
        ssize_t r;
        close(sv[0]);
        while (b) {
            struct pollfd p = { .fd = sv[1], .events = POLLIN };
            poll(&p, 1, -1);
            if ((r = read(sv[1], b, 1 << 20)) > 0)
                send_all(sv[1], b, (size_t)r);
            else if (r == 0 || errno != EAGAIN)
                break;
        }
        _exit(0);
    }
    close(sv[1]);
    for (i = -warm; i < n; i++) {
        double t0 = now_us();
        json_error_t err;
        json_t *j;
        char *out;
        int hops;
        for (hops = payload_bindings ? 2 : 1; hops > 0; hops--)
            floor_round_trip(sv[0], text, back, len);
        if (!(j = json_loadb(back, len, 0, &err)) || !(out = json_dumps(j, JSON_COMPACT)))
            die("payload-floor: %s", err.text);
        if (i >= 0)
            lat[i] = now_us() - t0;
        json_decref(j);
        free(out);
    }
    close(sv[0]);
    waitpid(pid, NULL, 0);
    printf("bytes=%ld\n", payload_bytes);
    print_latencies(lat, (size_t)n);
    free(text);
    free(back);
    free(lat);
}

/* A chunk in an open session, sequentially: the same `return 1+1` as
 * m_latency, without a fork.  Prints the latencies of the chunks. */
static void m_session_latency(long n)
{
    struct cli c;
    double *lat = calloc((size_t)n, sizeof *lat);
    char line[1024], sid[64];
    const char *s;
    json_t *m;
    long i, warm = n / 10 + 5;

    if (!lat)
        die("out of memory");
    cli_open(&c, sock_path);
    send_all(c.fd, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"session/open\",\"params\":{}}\n",
             strlen("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"session/open\",\"params\":{}}\n"));
    m = cli_recv(&c);
    s = json_string_value(json_object_get(expect_result(m), "session"));
    if (!s || strlen(s) >= sizeof sid || strpbrk(s, "\"\\"))
        die("session/open gave no usable id");
    strcpy(sid, s);
    json_decref(m);
    for (i = -warm; i < n; i++) {
        int len = snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":"
                           "\"execute\",\"params\":{\"session\":\"%s\",\"code\":\"return 1+1\"}}\n",
                           i + warm + 1, sid);
        double t0 = now_us();
        send_all(c.fd, line, (size_t)len);
        m = cli_recv(&c);
        if (i >= 0)
            lat[i] = now_us() - t0;
        check_two(m);
        json_decref(m);
    }
    cli_close(&c);
    print_latencies(lat, (size_t)n);
    free(lat);
}

/* One execution making `calls` tool calls, each answered after delay_ms:
 * under parallel() (par = 1) or one after another.  Prints elapsed_ms. */
static void m_parallel(long calls, long delay_ms, int par)
{
    struct cli c;
    char *req, out[65536];
    struct pending { char id[128]; double due; } *pend = calloc((size_t)calls, sizeof *pend);
    long npend = 0, seen = 0;
    double t0;
    int len;

    if (!pend)
        die("out of memory");
    cli_open(&c, sock_path);
    len = asprintf(&req,
                   "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"execute\",\"params\":{"
                   "\"code\":\"local fs = {} for i = 1, %ld do fs[i] = function() return T.f(i) end end "
                   "local s = 0 %s return s\","
                   "\"tools\":[{\"name\":\"T\",\"functions\":[\"f\"]}],\"timeout_ms\":600000}}\n",
                   calls, par ? "for _, v in ipairs({parallel(table.unpack(fs))}) do s = s + v end"
                              : "for i = 1, #fs do s = s + fs[i]() end");
    if (len < 0)
        die("out of memory");
    t0 = now_us();
    send_all(c.fd, req, (size_t)len);
    for (;;) {
        json_t *m;
        double now = now_us(), next = -1;
        size_t olen = 0;
        long i;
        /* answer what is due */
        for (i = 0; i < npend; ) {
            if (pend[i].due <= now) {
                olen += (size_t)snprintf(out + olen, sizeof out - olen,
                                         "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"result\":1}\n",
                                         pend[i].id);
                pend[i] = pend[--npend];
                continue;
            }
            if (next < 0 || pend[i].due < next)
                next = pend[i].due;
            i++;
        }
        if (olen)
            send_all(c.fd, out, olen);
        while ((m = cli_take(&c))) {
            if (json_object_get(m, "method")) {
                const char *sid = json_string_value(json_object_get(m, "id"));
                if (!sid || strlen(sid) >= sizeof pend[0].id || strpbrk(sid, "\"\\") ||
                    npend >= calls)
                    die("tool/call without a sane id, or too many");
                strcpy(pend[npend].id, sid);
                pend[npend].due = now_us() + (double)delay_ms * 1000.0;
                npend++;
                seen++;
                json_decref(m);
                continue;
            }
            {
                json_t *v = json_object_get(expect_result(m), "value");
                double el = now_us() - t0;
                if (!json_is_integer(v) || json_integer_value(v) != calls || seen != calls)
                    die("parallel scenario: wrong value or call count");
                printf("calls=%ld\ndelay_ms=%ld\nelapsed_ms=%.2f\n", calls, delay_ms, el / 1000.0);
            }
            json_decref(m);
            cli_close(&c);
            free(req);
            free(pend);
            return;
        }
        for (i = 0; i < npend; i++)     /* calls taken just now are due later */
            if (next < 0 || pend[i].due < next)
                next = pend[i].due;
        {
            struct pollfd p = { .fd = c.fd, .events = POLLIN };
            int wait_ms = -1;
            if (next >= 0) {
                double w = (next - now_us()) / 1000.0;
                wait_ms = w <= 0 ? 0 : (int)w + 1;
            }
            if (poll(&p, 1, wait_ms) > 0)
                cli_fill(&c);
        }
    }
}

static void m_cpu(long repeat, const char *code, const char *limits)
{
    struct cli c;
    json_t *params, *req;
    double *t = calloc((size_t)repeat, sizeof *t), *cpu = calloc((size_t)repeat, sizeof *cpu);
    long i;

    if (!t || !cpu)
        die("out of memory");
    cli_open(&c, sock_path);
    params = json_pack("{s:s,s:i}", "code", code, "timeout_ms", 600000);
    if (limits) {
        json_error_t err;
        json_t *l = json_loads(limits, 0, &err);
        if (!json_is_object(l))
            die("bad -l JSON: %s", err.text);
        json_object_set_new(params, "limits", l);
    }
    for (i = 0; i < repeat; i++) {
        char *s;
        json_t *m, *v;
        double t0;
        req = json_pack("{s:s,s:I,s:s,s:O}", "jsonrpc", "2.0", "id", (json_int_t)(i + 1),
                        "method", "execute", "params", params);
        s = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        t0 = now_us();
        send_all(c.fd, s, strlen(s));
        send_all(c.fd, "\n", 1);
        m = cli_recv(&c);
        t[i] = now_us() - t0;
        /* the worker's CPU time: immune to other processes on the machine */
        cpu[i] = (double)json_integer_value(json_object_get(
            json_object_get(expect_result(m), "stats"), "cpu_us"));
        v = json_object_get(expect_result(m), "value");
        if (i == 0) {
            char *vs = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
            printf("value=%s\n", vs ? vs : "?");
            free(vs);
        }
        json_decref(m);
        free(s);
    }
    json_decref(params);
    cli_close(&c);
    print_runs(t, cpu, (size_t)repeat);
    free(t);
    free(cpu);
}

static long proc_status_kib(pid_t pid, const char *key)
{
    char path[64], line[256];
    size_t kl = strlen(key);
    long v = -1;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (!(f = fopen(path, "r")))
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtol(line + kl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static void m_idle(int conns, pid_t pid)
{
    struct cli *c = calloc((size_t)conns, sizeof *c);
    const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
    long before, after, hwm;
    int i;

    if (!c)
        die("out of memory");
    raise_nofile((rlim_t)conns + 64);
    before = proc_status_kib(pid, "VmRSS");
    for (i = 0; i < conns; i++) {
        json_t *m;
        cli_open(&c[i], sock_path);
        /* a round trip on each, so the daemon has accepted and read it */
        send_all(c[i].fd, ping, sizeof ping - 1);
        m = cli_recv(&c[i]);
        expect_result(m);
        json_decref(m);
        free(c[i].buf);      /* our side need not keep buffers */
        c[i].buf = NULL;
        c[i].len = c[i].cap = 0;
    }
    usleep(100000);
    after = proc_status_kib(pid, "VmRSS");
    hwm = proc_status_kib(pid, "VmHWM");
    for (i = 0; i < conns; i++)
        cli_close(&c[i]);
    if (before < 0 || after < 0)
        die("cannot read /proc/%d/status", (int)pid);
    printf("conns=%d\nrss_before_kib=%ld\nrss_kib=%ld\nhwm_kib=%ld\nper_conn_bytes=%.0f\n", conns,
           before, after, hwm, (double)(after - before) * 1024.0 / conns);
    free(c);
}

/* Private_Clean + Private_Dirty of pid, in KiB, or -1. */
static long private_kib(pid_t pid)
{
    char path[64], line[256];
    long v = 0;
    int seen = 0;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
    if (!(f = fopen(path, "r")))
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Private_Clean:", 14) == 0 || strncmp(line, "Private_Dirty:", 14) == 0) {
            v += strtol(line + 14, NULL, 10);
            seen++;
        }
    fclose(f);
    return seen == 2 ? v : -1;
}

/* Idle pooled workers: children of the daemon named sandboxd-worker. */
static void m_workermem(pid_t daemon_pid)
{
    char cpath[64], buf[4096];
    long n = 0, sum = 0, mx = 0, unreadable = 0;
    FILE *f;
    char *tok, *save;

    /* /proc/PID/task/PID/children lists the direct children (the zygote
     * forks workers with CLONE_PARENT, so they are the daemon's) */
    snprintf(cpath, sizeof cpath, "/proc/%d/task/%d/children", (int)daemon_pid, (int)daemon_pid);
    if (!(f = fopen(cpath, "r")))
        die("cannot read %s: %s", cpath, strerror(errno));
    if (!fgets(buf, sizeof buf, f))
        buf[0] = '\0';
    fclose(f);
    for (tok = strtok_r(buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
        pid_t pid = (pid_t)atoi(tok);
        char comm[64] = "";
        char p[64];
        long kib;
        snprintf(p, sizeof p, "/proc/%d/comm", (int)pid);
        if ((f = fopen(p, "r"))) {
            if (!fgets(comm, sizeof comm, f))
                comm[0] = '\0';
            fclose(f);
        }
        if (strncmp(comm, "sandboxd-worker", 15) != 0)
            continue;
        if ((kib = private_kib(pid)) < 0) {
            unreadable++;       /* non-dumpable: only root (CAP_SYS_PTRACE) may read it */
            continue;
        }
        n++;
        sum += kib;
        if (kib > mx)
            mx = kib;
    }
    if (n == 0 && unreadable == 0)
        die("no idle worker found under pid %d", (int)daemon_pid);
    printf("workers=%ld\nunreadable=%ld\nprivate_kib_mean=%.0f\nprivate_kib_max=%ld\n", n,
           unreadable, n ? (double)sum / (double)n : 0.0, mx);
}

/* ------------------------------------------------------------------ */
/* baselines: one fresh lua5.3 process per execution                   */

static int use_bwrap;

static const char *const bwrap_prefix[] = {
    BWRAP, "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
    "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
    "--proc", "/proc", "--dev", "/dev", "--unshare-all", "--die-with-parent",
    "--new-session", "--clearenv", NULL,
};

/* Start lua5.3 -e CODE with stdout on a pipe; returns the pid. */
static pid_t spawn_lua(const char *code, int *out_fd, int in_fd)
{
    const char *argv[64];
    int n = 0, pfd[2], rc;
    pid_t pid;
    posix_spawn_file_actions_t fa;

    if (use_bwrap)
        for (int i = 0; bwrap_prefix[i]; i++)
            argv[n++] = bwrap_prefix[i];
    argv[n++] = LUA_BIN;
    argv[n++] = "-e";
    argv[n++] = code;
    argv[n] = NULL;
    if (pipe2(pfd, O_CLOEXEC) != 0)
        die("pipe: %s", strerror(errno));
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    if (in_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
    rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[1]);
    if (rc != 0)
        die("posix_spawn %s: %s", argv[0], strerror(rc));
    *out_fd = pfd[0];
    return pid;
}

/* Read the child's output to EOF and reap it; dies unless it printed 2. */
static void finish_lua(pid_t pid, int fd)
{
    char buf[64];
    size_t len = 0;
    ssize_t n;
    int st;

    while ((n = read(fd, buf + len, sizeof buf - 1 - len)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0)
            len += (size_t)n;
    buf[len] = '\0';
    close(fd);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || strcmp(buf, "2\n") != 0)
        die("%s run failed (status 0x%x, output %.40s)", use_bwrap ? "bwrap" : "lua5.3", st, buf);
}

static void m_spawn_latency(long n)
{
    double *lat = calloc((size_t)n, sizeof *lat);
    long i, warm = n / 10 + 2;

    if (!lat)
        die("out of memory");
    for (i = -warm; i < n; i++) {
        int fd;
        double t0 = now_us();
        pid_t pid = spawn_lua("print(1+1)", &fd, -1);
        finish_lua(pid, fd);
        if (i >= 0)
            lat[i] = now_us() - t0;
    }
    print_latencies(lat, (size_t)n);
    free(lat);
}

static void m_spawn_tput(int par, long n)
{
    struct pollfd *p = calloc((size_t)par, sizeof *p);
    pid_t *pids = calloc((size_t)par, sizeof *pids);
    char (*out)[16] = calloc((size_t)par, sizeof *out);
    size_t *olen = calloc((size_t)par, sizeof *olen);
    long started = 0, done = 0;
    double t0, el;
    int i;

    if (!p || !pids || !out || !olen)
        die("out of memory");
    raise_nofile((rlim_t)par * 2 + 64);
    t0 = now_us();
    for (i = 0; i < par; i++) {
        p[i].fd = -1;
        p[i].events = POLLIN;
        if (started < n) {
            pids[i] = spawn_lua("print(1+1)", &p[i].fd, -1);
            fcntl(p[i].fd, F_SETFL, O_NONBLOCK);
            started++;
        }
    }
    while (done < n) {
        if (poll(p, (nfds_t)par, 30000) <= 0)
            die("spawned processes hang");
        for (i = 0; i < par; i++) {
            ssize_t r;
            int st;
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            r = read(p[i].fd, out[i] + olen[i], sizeof out[i] - 1 - olen[i]);
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (r > 0) {
                olen[i] += (size_t)r;
                if (olen[i] < sizeof out[i] - 1)
                    continue;
            }
            /* EOF: the process has exited (or closed stdout) */
            close(p[i].fd);
            p[i].fd = -1;
            out[i][olen[i]] = '\0';
            while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR)
                ;
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || strcmp(out[i], "2\n") != 0)
                die("%s run failed (status 0x%x)", use_bwrap ? "bwrap" : "lua5.3", st);
            olen[i] = 0;
            done++;
            if (started < n) {
                pids[i] = spawn_lua("print(1+1)", &p[i].fd, -1);
                fcntl(p[i].fd, F_SETFL, O_NONBLOCK);
                started++;
            }
        }
    }
    el = now_us() - t0;
    printf("par=%d\nrate=%.1f\nelapsed_s=%.3f\n", par, (double)n / (el / 1e6), el / 1e6);
    free(p);
    free(pids);
    free(out);
    free(olen);
}

static void m_spawn_cpu(long repeat, const char *code)
{
    double *t = calloc((size_t)repeat, sizeof *t), *cpu = calloc((size_t)repeat, sizeof *cpu);
    char *wrapped;
    long i;

    if (!t || !cpu || asprintf(&wrapped, "print((function() %s end)())", code) < 0)
        die("out of memory");
    for (i = 0; i < repeat; i++) {
        char buf[256];
        ssize_t n;
        size_t len = 0;
        int fd, st;
        double t0 = now_us();
        pid_t pid = spawn_lua(wrapped, &fd, -1);
        while ((n = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
            len += (size_t)n;
        struct rusage ru;
        close(fd);
        wait4(pid, &st, 0, &ru);
        t[i] = now_us() - t0;
        cpu[i] = (double)ru.ru_utime.tv_sec * 1e6 + (double)ru.ru_utime.tv_usec +
                 (double)ru.ru_stime.tv_sec * 1e6 + (double)ru.ru_stime.tv_usec;
        buf[len] = '\0';
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            die("lua5.3 failed on the cpu script");
        if (i == 0)
            printf("value=%s", buf);
    }
    print_runs(t, cpu, (size_t)repeat);
    free(t);
    free(cpu);
    free(wrapped);
}

/* An idle lua5.3 blocked in io.read(): its private memory. */
static void m_spawn_mem(void)
{
    int in[2], fd;
    pid_t pid;
    long kib = -1;
    int tries;

    if (pipe2(in, O_CLOEXEC) != 0)
        die("pipe: %s", strerror(errno));
    pid = spawn_lua("print(1+1) io.read()", &fd, in[0]);
    close(in[0]);
    {
        char b[8];
        if (read(fd, b, sizeof b) <= 0)     /* "2\n": it is up and waiting */
            die("lua5.3 did not start");
    }
    for (tries = 0; tries < 3 && kib < 0; tries++)
        kib = private_kib(pid);
    close(in[1]);
    close(fd);
    waitpid(pid, NULL, 0);
    if (kib < 0)
        die("cannot read lua5.3's smaps_rollup");
    printf("private_kib=%ld\n", kib);
}

/* describe's "state" object, flattened to key=value lines. */
static void m_describe(void)
{
    struct cli c;
    const char req[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"describe\"}\n";
    json_t *m, *st, *v;
    const char *k;

    cli_open(&c, sock_path);
    send_all(c.fd, req, sizeof req - 1);
    m = cli_recv(&c);
    st = json_object_get(expect_result(m), "state");
    json_object_foreach(st, k, v) {
        if (json_is_integer(v))
            printf("%s=%" JSON_INTEGER_FORMAT "\n", k, json_integer_value(v));
        else if (json_is_null(v))
            printf("%s=null\n", k);
    }
    json_decref(m);
    cli_close(&c);
}

/* The floor under any process-per-execution design: fork, _exit, wait. */
static void m_forkfloor(long n)
{
    double *lat = calloc((size_t)n, sizeof *lat);
    long i;

    if (!lat)
        die("out of memory");
    for (i = 0; i < n; i++) {
        double t0 = now_us();
        int st;
        pid_t pid = fork();
        if (pid < 0)
            die("fork: %s", strerror(errno));
        if (pid == 0)
            _exit(0);
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        lat[i] = now_us() - t0;
    }
    print_latencies(lat, (size_t)n);
    free(lat);
}

/* The floor under a tool call: one byte relayed worker -> supervisor ->
 * client -> supervisor -> worker, three processes on socketpairs, each hop
 * a blocking read and a write (what a tool call costs without any JSON). */
static void relay_hop(int in, int out)
{
    char b;
    ssize_t r;

    while ((r = read(in, &b, 1)) < 0 && errno == EINTR)
        ;
    if (r != 1)
        _exit(0);
    if (write(out, &b, 1) != 1)
        _exit(0);
}

static void m_relay(long n)
{
    int wc[2], cs[2];       /* worker<->supervisor, supervisor<->client */
    struct rusage ru;
    pid_t sup, worker;
    double t0, el;
    long i;

    if (socketpair(AF_UNIX, SOCK_STREAM, 0, wc) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, cs) != 0)
        die("socketpair: %s", strerror(errno));
    if ((sup = fork()) == 0) {          /* relays both ways */
        close(wc[1]);
        close(cs[1]);
        for (;;) {
            relay_hop(wc[0], cs[0]);    /* the call, to the client */
            relay_hop(cs[0], wc[0]);    /* the answer, to the worker */
        }
    }
    if ((worker = fork()) == 0) {       /* calls n times, waits for each answer */
        char b = 'c';
        close(wc[0]);
        close(cs[0]);
        close(cs[1]);
        for (i = 0; i < n; i++) {
            if (write(wc[1], &b, 1) != 1 || read(wc[1], &b, 1) != 1)
                _exit(1);
        }
        _exit(0);
    }
    if (sup < 0 || worker < 0)
        die("fork: %s", strerror(errno));
    close(wc[0]);
    close(wc[1]);
    close(cs[0]);
    t0 = now_us();
    for (i = 0; i < n; i++)             /* the client answers at once */
        relay_hop(cs[1], cs[1]);
    el = now_us() - t0;
    close(cs[1]);
    waitpid(worker, NULL, 0);
    kill(sup, SIGKILL);
    if (wait4(sup, NULL, 0, &ru) < 0)
        die("wait4: %s", strerror(errno));
    /* the middle's CPU per call: the floor of a relay that sleeps between messages */
    printf("calls=%ld\nrate=%.1f\nper_call_us=%.1f\nmiddle_cpu_us=%.1f\n", n,
           (double)n / (el / 1e6), el / (double)n,
           ((double)ru.ru_utime.tv_sec * 1e6 + (double)ru.ru_utime.tv_usec +
            (double)ru.ru_stime.tv_sec * 1e6 + (double)ru.ru_stime.tv_usec) / (double)n);
}

/* A CPU hog: user-space work at the caller's priority, as any busy
 * neighbour on the machine.  It dies with its parent (the bench) and after
 * `seconds` at most, so a bench killed by any signal leaves no hog behind. */
static void m_hog(long seconds)
{
    pid_t parent = getppid();
    double end = now_us() + (double)seconds * 1e6;
    volatile unsigned long x = 0;

    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != parent)
        exit(0);
    for (;;) {
        for (long i = 0; i < 1000000; i++)
            x++;
        if (now_us() > end)
            exit(0);
    }
}

/* ------------------------------------------------------------------ */

static void usage(void)
{
    fputs("usage: loadgen MODE [-s SOCK] [-n N] [-c CONNS] [-p PID] [-e CODE] [-l LIMITS] [-b]\n"
          "modes: latency tput tools cpu idle workermem spawn-latency spawn-tput spawn-cpu "
          "spawn-mem describe forkfloor relay payload payload-floor session-latency parallel\n"
          "sequential-calls hog (parallel/sequential-calls: -n CALLS -c DELAY_MS)\n"
          "payload modes: -k value|bindings -B BYTES\n", stderr);
    exit(2);
}

int main(int argc, char **argv)
{
    const char *mode, *code = NULL, *limits = NULL;
    long n = 1000;
    int conns = 1, opt;
    pid_t pid = 0;

    if (argc < 2)
        usage();
    mode = argv[1];
    optind = 2;
    while ((opt = getopt(argc, argv, "s:n:c:p:e:l:bk:B:")) != -1) {
        switch (opt) {
        case 's': sock_path = optarg; break;
        case 'n': n = atol(optarg); break;
        case 'c': conns = atoi(optarg); break;
        case 'p': pid = (pid_t)atoi(optarg); break;
        case 'e': code = optarg; break;
        case 'l': limits = optarg; break;
        case 'b': use_bwrap = 1; break;
        case 'k': payload_bindings = strcmp(optarg, "bindings") == 0; break;
        case 'B': payload_bytes = atol(optarg); break;
        default: usage();
        }
    }
    if (n < 1 || conns < 1)
        usage();
    exec_limits = limits;
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strncmp(mode, "spawn", 5) != 0 && strcmp(mode, "workermem") != 0 &&
        strcmp(mode, "forkfloor") != 0 && strcmp(mode, "relay") != 0 &&
        strcmp(mode, "payload-floor") != 0 && strcmp(mode, "hog") != 0 && !sock_path)
        die("-s SOCK is required for %s", mode);
    if (strcmp(mode, "latency") == 0)
        m_latency(n);
    else if (strcmp(mode, "tput") == 0)
        m_tput(conns, n);
    else if (strcmp(mode, "tools") == 0)
        m_tools(n);
    else if (strcmp(mode, "cpu") == 0 && code)
        m_cpu(n, code, limits);
    else if (strcmp(mode, "idle") == 0 && pid > 0)
        m_idle(conns, pid);
    else if (strcmp(mode, "workermem") == 0 && pid > 0)
        m_workermem(pid);
    else if (strcmp(mode, "spawn-latency") == 0)
        m_spawn_latency(n);
    else if (strcmp(mode, "spawn-tput") == 0)
        m_spawn_tput(conns, n);
    else if (strcmp(mode, "spawn-cpu") == 0 && code)
        m_spawn_cpu(n, code);
    else if (strcmp(mode, "spawn-mem") == 0)
        m_spawn_mem();
    else if (strcmp(mode, "describe") == 0)
        m_describe();
    else if (strcmp(mode, "forkfloor") == 0)
        m_forkfloor(n);
    else if (strcmp(mode, "relay") == 0)
        m_relay(n);
    else if (strcmp(mode, "session-latency") == 0)
        m_session_latency(n);
    else if (strcmp(mode, "parallel") == 0)
        m_parallel(n, conns, 1);
    else if (strcmp(mode, "sequential-calls") == 0)
        m_parallel(n, conns, 0);
    else if (strcmp(mode, "payload") == 0 && payload_bytes > 0)
        m_payload(n);
    else if (strcmp(mode, "payload-floor") == 0 && payload_bytes > 0)
        m_payload_floor(n);
    else if (strcmp(mode, "hog") == 0)
        m_hog(n);
    else
        usage();
    return 0;
}
