/*
 * steps.c - where the time of one trivial execute goes, step by step,
 * and the floor of each step.  Prints "key=value" lines like loadgen;
 * bench/breakdown runs both modes in interleaved rounds and prints the
 * table.
 *
 *   steps execs -s SOCK -n N       N sequential `return 1+1` against a daemon
 *                                  built with SANDBOXD_BENCH_TRACE (make trace):
 *                                  the median of each step (common/trace.h)
 *   steps floors -n N              the floor of each step, measured here: a
 *                                  wake-up across processes, jansson's parse
 *                                  and dump of the same texts, a chunk in a
 *                                  ready Lua state
 *
 * All stamps are CLOCK_MONOTONIC, the same clock in every process.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "timing.h"

static void die(const char *what)
{
    fprintf(stderr, "steps: %s%s%s\n", what, errno ? ": " : "", errno ? strerror(errno) : "");
    exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double median_of(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return pct(v, n, 50);
}

/* ---- the steps of an execute, from the stamps in its answer ---- */

/* The supervisor's slots, then the worker's, as common/trace.h numbers them. */
enum { S_READ, S_PARSED, S_DISPATCH, S_JOB_SENT, S_END_READ, S_ANSWER, S_REAP, S_N };
enum { W_JOB, W_READY, W_LUA, W_END, W_N };

static const char *const step_names[] = {
    "in",           /* client's write -> the supervisor has read it */
    "parse",        /* the request line parsed */
    "dispatch",     /* checked, admitted, a pooled worker taken */
    "job",          /* limits and priority set, the job built and written */
    "handover",     /* the worker woken, the job read */
    "wparse",       /* the job parsed, limits applied */
    "lua",          /* tool tables, bindings, compile, run, results */
    "wend",         /* the end frame's stats */
    "endhop",       /* dumped, written, the supervisor woken, read */
    "answer",       /* the result checked, the answer built and dumped */
    "out",          /* the answer written, the client woken, the answer read */
};
#define NSTEPS (sizeof step_names / sizeof step_names[0])

struct stamps {
    uint64_t send, recv;
    uint64_t s[S_N], w[W_N];
};

static int get_stamps(json_t *ans, struct stamps *t)
{
    json_t *tr = json_object_get(json_object_get(json_object_get(ans, "result"), "stats"),
                                 "trace");
    json_t *s = json_object_get(tr, "sup"), *w = json_object_get(tr, "worker");

    if (json_array_size(s) != S_N || json_array_size(w) != W_N)
        return -1;
    for (int i = 0; i < S_N; i++)
        t->s[i] = (uint64_t)json_integer_value(json_array_get(s, (size_t)i));
    for (int i = 0; i < W_N; i++)
        t->w[i] = (uint64_t)json_integer_value(json_array_get(w, (size_t)i));
    return 0;
}

static int connect_to(const char *path)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0 || strlen(path) >= sizeof a.sun_path)
        die("socket");
    strcpy(a.sun_path, path);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        die("connect");
    return fd;
}

/* One line from fd (blocking); the stamp is taken when its last byte is
 * read, before it is parsed. */
static json_t *read_answer(int fd, char *buf, size_t cap, uint64_t *stamp)
{
    size_t len = 0;
    json_error_t err;
    json_t *j;

    for (;;) {
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("the daemon closed the connection");
        len += (size_t)n;
        if (buf[len - 1] == '\n')
            break;
        if (len == cap)
            die("answer too long");
    }
    *stamp = now_ns();
    if (!(j = json_loadb(buf, len - 1, 0, &err)))
        die("bad JSON in an answer");
    return j;
}

static void m_execs(const char *sock, long n)
{
    int fd = connect_to(sock);
    long warm = n / 10 + 5, total = warm + n + 1;
    struct stamps *t = calloc((size_t)total, sizeof *t);
    double *steps[NSTEPS], *all = calloc((size_t)n, sizeof *all),
           *reap = calloc((size_t)n, sizeof *reap);
    char line[512], *buf = malloc(65536);
    long nreap = 0, reap_late = 0;

    if (!t || !all || !reap || !buf)
        die("out of memory");
    for (size_t k = 0; k < NSTEPS; k++)
        if (!(steps[k] = calloc((size_t)n, sizeof(double))))
            die("out of memory");
    for (long i = 0; i < total; i++) {
        int len = snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":"
                           "\"execute\",\"params\":{\"code\":\"return 1+1\"}}\n", i + 1);
        json_t *ans;
        t[i].send = now_ns();
        if (write(fd, line, (size_t)len) != len)
            die("write");
        ans = read_answer(fd, buf, 65536, &t[i].recv);
        if (get_stamps(ans, &t[i]) != 0)
            die("the answer has no stats.trace: is the daemon a trace build (make trace)?");
        json_decref(ans);
    }
    close(fd);
    /* execution i's answer and reap stamps ride in answer i + 1 */
    for (long k = 0; k < n; k++) {
        const struct stamps *a = &t[warm + k], *b = &t[warm + k + 1];
#define D(x, y) (((double)(x) - (double)(y)) / 1e3)
        double d[NSTEPS] = {
            D(a->s[S_READ], a->send), D(a->s[S_PARSED], a->s[S_READ]),
            D(a->s[S_DISPATCH], a->s[S_PARSED]), D(a->s[S_JOB_SENT], a->s[S_DISPATCH]),
            D(a->w[W_JOB], a->s[S_JOB_SENT]), D(a->w[W_READY], a->w[W_JOB]),
            D(a->w[W_LUA], a->w[W_READY]), D(a->w[W_END], a->w[W_LUA]),
            D(a->s[S_END_READ], a->w[W_END]), D(b->s[S_ANSWER], a->s[S_END_READ]),
            D(a->recv, b->s[S_ANSWER]),
        };
        for (size_t s = 0; s < NSTEPS; s++)
            steps[s][k] = d[s];
        all[k] = D(a->recv, a->send);
        /* the worker's reap: after its answer (off the critical path), and
         * is it later than the next request's arrival? */
        if (b->s[S_REAP] > a->s[S_END_READ]) {
            reap[nreap++] = D(b->s[S_REAP], b->s[S_ANSWER]);
            if (b->s[S_REAP] > b->s[S_READ])
                reap_late++;
        }
    }
    for (size_t s = 0; s < NSTEPS; s++)
        printf("%s_us=%.1f\n", step_names[s], median_of(steps[s], (size_t)n));
    printf("total_us=%.1f\n", median_of(all, (size_t)n));
    qsort(all, (size_t)n, sizeof *all, cmp_double);
    printf("total_p99_us=%.1f\n", pct(all, (size_t)n, 99));
    /* the reap of execution i's worker after its answer was written, and
     * the share of reaps that came after the next request was read (on
     * that execution's path) */
    printf("reap_after_answer_us=%.1f\nreaped_share=%.3f\nreap_in_next=%.3f\n",
           nreap ? median_of(reap, (size_t)nreap) : -1.0, (double)nreap / (double)n,
           (double)reap_late / (double)n);
    for (size_t s = 0; s < NSTEPS; s++)
        free(steps[s]);
    free(t);
    free(all);
    free(reap);
    free(buf);
}

/* ---- floors ---- */

/* One byte's wake-up across processes: the child sleeps in read(2) (as a
 * pooled worker and the client do) or in epoll_wait (as the supervisor
 * does), stamps its wake-up and sends the stamp back.  Median one-way time. */
static double hop_floor(long n, int use_epoll)
{
    int sv[2];
    pid_t pid;
    double *v = calloc((size_t)n, sizeof *v);

    if (!v || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        die("socketpair");
    if ((pid = fork()) == 0) {
        int ep = -1;
        struct epoll_event ev = { .events = EPOLLIN };
        char c;
        close(sv[0]);
        if (use_epoll && ((ep = epoll_create1(0)) < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sv[1], &ev)))
            _exit(1);
        for (;;) {
            uint64_t t;
            if (use_epoll && epoll_wait(ep, &ev, 1, -1) != 1)
                _exit(1);
            if (read(sv[1], &c, 1) != 1)
                _exit(0);
            t = now_ns();
            if (write(sv[1], &t, sizeof t) != sizeof t)
                _exit(1);
        }
    }
    close(sv[1]);
    for (long i = -(n / 10 + 5); i < n; i++) {
        uint64_t t0, t1;
        usleep(20);                     /* the child is asleep again */
        t0 = now_ns();
        if (write(sv[0], "x", 1) != 1 || read(sv[0], &t1, sizeof t1) != sizeof t1)
            die("hop");
        if (i >= 0)
            v[i] = (double)(t1 - t0) / 1e3;
    }
    close(sv[0]);
    waitpid(pid, NULL, 0);
    double m = median_of(v, (size_t)n);
    free(v);
    return m;
}

/* Median time of f(arg) in us, run n times. */
static double time_of(long n, void (*f)(void *), void *arg)
{
    double *v = calloc((size_t)n, sizeof *v), m;

    if (!v)
        die("out of memory");
    for (long i = -(n / 10 + 5); i < n; i++) {
        double t0 = now_us();
        f(arg);
        if (i >= 0)
            v[i] = now_us() - t0;
    }
    m = median_of(v, (size_t)n);
    free(v);
    return m;
}

static void parse_text(void *arg)
{
    json_error_t err;
    json_t *j = json_loads((const char *)arg, 0, &err);

    if (!j)
        die("floor text");
    json_decref(j);
}

static void dump_tree(void *arg)
{
    free(json_dumps((const json_t *)arg, JSON_COMPACT));
}

static void lua_chunk(void *arg)
{
    lua_State *L = arg;

    if (luaL_loadbuffer(L, "return 1+1", 10, "=input") != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK ||
        lua_tointeger(L, -1) != 2)
        die("lua");
    lua_settop(L, 0);
}

/* The texts of a trivial execute as the daemon makes them: the request,
 * the job, the end frame, the answer. */
static const char REQUEST[] =
    "{\"jsonrpc\":\"2.0\",\"id\":17,\"method\":\"execute\",\"params\":{\"code\":\"return 1+1\"}}";
static const char JOB[] =
    "{\"op\":\"execute\",\"code\":\"return 1+1\",\"tools\":[],\"bindings\":[],\"limits\":{"
    "\"max_heap\":67108864,\"max_reductions\":null,\"max_output_bytes\":1048576,"
    "\"max_bindings_bytes\":16777216,\"max_result_bytes\":16777216,\"max_parallel_calls\":16,"
    "\"tool_spin_us\":200,\"rlimit_as\":608174080,\"rlimit_cpu\":31}}";
static const char END[] =
    "{\"value\":2,\"bindings\":[],\"binding_names\":[],\"output_truncated\":false,"
    "\"stats\":{\"reductions\":3,\"heap_peak_bytes\":31722,\"cpu_us\":41}}";
static const char ANSWER[] =
    "{\"jsonrpc\":\"2.0\",\"id\":17,\"result\":{\"value\":2,\"output\":\"\",\"output_truncated\":"
    "false,\"stats\":{\"wall_us\":181,\"cpu_us\":41,\"reductions\":3,\"heap_peak_bytes\":31722,"
    "\"tool_calls\":0},\"bindings\":[],\"binding_names\":[]}}";

static void m_floors(long n)
{
    json_error_t err;
    json_t *job = json_loads(JOB, 0, &err), *end = json_loads(END, 0, &err),
           *ans = json_loads(ANSWER, 0, &err);
    lua_State *L = luaL_newstate();

    if (!job || !end || !ans || !L)
        die("floor setup");
    luaL_openlibs(L);
    printf("hop_read_us=%.1f\n", hop_floor(n / 10 + 1, 0));
    printf("hop_epoll_us=%.1f\n", hop_floor(n / 10 + 1, 1));
    printf("parse_request_us=%.2f\n", time_of(n, parse_text, (void *)REQUEST));
    printf("dump_job_us=%.2f\n", time_of(n, dump_tree, job));
    printf("parse_job_us=%.2f\n", time_of(n, parse_text, (void *)JOB));
    printf("lua_chunk_us=%.2f\n", time_of(n, lua_chunk, L));
    printf("dump_end_us=%.2f\n", time_of(n, dump_tree, end));
    printf("parse_end_us=%.2f\n", time_of(n, parse_text, (void *)END));
    printf("dump_answer_us=%.2f\n", time_of(n, dump_tree, ans));
    printf("parse_answer_us=%.2f\n", time_of(n, parse_text, (void *)ANSWER));
    lua_close(L);
    json_decref(job);
    json_decref(end);
    json_decref(ans);
}

int main(int argc, char **argv)
{
    const char *sock = NULL;
    long n = 1000;
    int opt;

    if (argc < 2)
        goto usage;
    optind = 2;
    while ((opt = getopt(argc, argv, "s:n:")) != -1) {
        if (opt == 's')
            sock = optarg;
        else if (opt == 'n')
            n = atol(optarg);
        else
            goto usage;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (n < 1)
        goto usage;
    if (strcmp(argv[1], "execs") == 0 && sock)
        m_execs(sock, n);
    else if (strcmp(argv[1], "floors") == 0)
        m_floors(n);
    else
        goto usage;
    return 0;
usage:
    fputs("usage: steps execs -s SOCK -n N | steps floors -n N\n", stderr);
    return 2;
}
