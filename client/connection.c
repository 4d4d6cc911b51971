/*
 * connection.c - the client's connection and event loop.  Contracts in
 * connection.h.
 *
 * The loop is poll() over five descriptors: the socket, the signalfd, and
 * the stdin/stdout/stderr pipes of the tool command being run (fd -1, hence
 * ignored, when none runs).  Nothing in it blocks: the socket is
 * non-blocking and writes go through s->out, so a daemon that is slow to
 * read never stops us from reading its messages or a Ctrl-C.
 */
#include "client/connection.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/ctl.h"

#define EXCERPT 200

/* "* " info lines, like curl -v. */
static void info(const struct ctl_conn *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void info(const struct ctl_conn *s, const char *fmt, ...)
{
    va_list ap;

    if (!s->verbose)
        return;
    fputs("* ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void frame(const struct ctl_conn *s, const char *dir, const char *line, size_t len)
{
    if (!s->verbose)
        return;
    fputs(dir, stderr);
    fwrite(line, 1, len, stderr);
    fputc('\n', stderr);
    fflush(stderr);
}

static const char *connect_hint(int err)
{
    switch (err) {
    case ENOENT:
        return " (is sandboxd running? the socket is set with -s or $" CTL_SOCKET_ENV ")";
    case ECONNREFUSED:
        return " (nobody listens there: sandboxd is not running, or the file is stale)";
    case EACCES:
    case EPERM:
        return " (the socket's permissions do not allow this user)";
    default:
        return "";
    }
}

/* Connect a non-blocking, close-on-exec stream socket to path.  Returns the
 * fd, or -1 after printing why. */
static int connect_unix(const char *path)
{
    struct sockaddr_un sa;
    int fd, err;

    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path) {
        ctl_err("cannot connect to %s: the path is longer than %zu bytes", path,
                sizeof sa.sun_path - 1);
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ctl_err("cannot connect to %s: socket: %s", path, strerror(errno));
        return -1;
    }
    while (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        if (errno == EINTR)
            continue;
        err = errno;
        ctl_err("cannot connect to %s: %s%s", path, strerror(err), connect_hint(err));
        close(fd);
        return -1;
    }
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
        ctl_err("cannot connect to %s: fcntl: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Block SIGINT and SIGCHLD and return a signalfd for them; ignore SIGPIPE
 * (write errors are handled where they happen). */
static int signals_open(void)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -1;
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
        return -1;
    return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

int ctl_conn_open(struct ctl_conn *s, const char *path, int verbose,
                  const struct ctl_tools *tools)
{
    memset(s, 0, sizeof *s);
    s->fd = s->sigfd = -1;
    s->path = path;
    s->verbose = verbose;
    s->tools = tools;
    ndjson_init(&s->rd, CTL_MAX_LINE);
    s->run.fd_in = s->run.fd_out = s->run.fd_err = -1;
    s->fd = connect_unix(path);
    if (s->fd < 0)
        return CTL_EXIT_NOCONNECT;
    info(s, "connected to %s", path);
    s->sigfd = signals_open();
    s->queue = json_array();
    if (s->sigfd < 0 || s->queue == NULL) {
        ctl_err("cannot set up signal handling: %s", strerror(errno));
        return CTL_EXIT_SOFTWARE;
    }
    return 0;
}

void ctl_conn_close(struct ctl_conn *s)
{
    if (s->running)
        ctl_run_end(&s->run);
    s->running = 0;
    if (s->fd >= 0)
        close(s->fd);
    if (s->sigfd >= 0)
        close(s->sigfd);
    s->fd = s->sigfd = -1;
    ndjson_free(&s->rd);
    free(s->out);
    free(s->answer_line);
    json_decref(s->answer);
    json_decref(s->queue);
    json_decref(s->id);
    s->out = s->answer_line = NULL;
    s->answer = s->queue = s->id = NULL;
}

/* Queue msg (borrowed) for sending.  -1 only when out of memory; after the
 * daemon stopped reading, messages are dropped. */
static int send_msg(struct ctl_conn *s, const json_t *msg)
{
    size_t len, ncap;
    char *line, *nout;

    line = rpc_dump_line(msg, &len);
    if (line == NULL)
        return -1;
    frame(s, "> ", line, len > 0 ? len - 1 : 0);
    if (s->write_closed) {
        free(line);
        return 0;
    }
    if (s->out_off == s->out_len)
        s->out_off = s->out_len = 0;
    if (s->out_len + len > s->out_cap) {
        ncap = s->out_cap ? s->out_cap : 4096;
        while (ncap < s->out_len + len)
            ncap *= 2;
        nout = realloc(s->out, ncap);
        if (nout == NULL) {
            free(line);
            return -1;
        }
        s->out = nout;
        s->out_cap = ncap;
    }
    memcpy(s->out + s->out_len, line, len);
    s->out_len += len;
    free(line);
    return 0;
}

/* send_msg() for a message we built: steals msg. */
static int send_new(struct ctl_conn *s, json_t *msg)
{
    int rc = msg ? send_msg(s, msg) : -1;

    json_decref(msg);
    return rc;
}

/* Write what the socket takes now.  A daemon that closed its end gets
 * nothing more, but we keep reading: it may have said why. */
static void flush_out(struct ctl_conn *s)
{
    ssize_t w;

    while (s->out_off < s->out_len && !s->write_closed) {
        w = send(s->fd, s->out + s->out_off, s->out_len - s->out_off,
                 MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (w < 0) {
            info(s, "cannot write to the daemon: %s", strerror(errno));
            s->write_closed = 1;
            s->out_off = s->out_len = 0;
            return;
        }
        s->out_off += (size_t)w;
    }
}

/* A JSON-RPC error response for id (borrowed) with one of the contract's
 * kinds; steals nothing. */
static int send_error(struct ctl_conn *s, json_t *id, enum rpc_kind kind, const char *msg)
{
    return send_new(s, rpc_error_new(id, kind, msg, NULL));
}

/* Start h's command for the call `id`, or answer that it cannot run. */
static int start_command(struct ctl_conn *s, const struct ctl_handler *h, json_t *id,
                         json_t *args)
{
    json_t *empty = args ? NULL : json_array();
    char text[256];
    int rc = 0;

    if (ctl_run_start(&s->run, h, id, args ? args : empty) == 0) {
        info(s, "%s.%s: running /bin/sh -c '%s'", h->tool, h->func, h->command);
        s->running = 1;
    } else {
        snprintf(text, sizeof text, "cannot run the tool command: %s", strerror(errno));
        info(s, "%s.%s: %s", h->tool, h->func, text);
        rc = send_new(s, json_pack("{s:s, s:O, s:{s:i, s:s, s:{}}}", "jsonrpc", "2.0", "id", id,
                                   "error", "code", CTL_TOOL_ERROR_CODE, "message", text,
                                   "data"));
    }
    json_decref(empty);
    return rc;
}

/* Answer one tool/call request (borrowed), or start the command that will. */
static int serve_call(struct ctl_conn *s, json_t *req)
{
    json_t *id = json_object_get(req, "id"), *params = json_object_get(req, "params");
    json_t *args = json_object_get(params, "args");
    const char *tool = json_string_value(json_object_get(params, "tool"));
    const char *func = json_string_value(json_object_get(params, "function"));
    const struct ctl_handler *h;
    char text[512];

    if (tool == NULL || func == NULL || (args != NULL && !json_is_array(args)))
        return send_error(s, id, RPC_E_INVALID_PARAMS,
                          "tool/call needs params.tool, params.function and params.args");
    if (s->interrupts > 0)
        return send_error(s, id, RPC_E_CANCELLED, "cancelled by the user (Ctrl-C)");
    h = ctl_tools_find(s->tools, tool, func);
    if (h == NULL) {
        snprintf(text, sizeof text,
                 "sandboxctl has no handler for %.200s.%.200s (give one with --tool or "
                 "--tool-reply)", tool, func);
        return send_error(s, id, RPC_E_METHOD_NOT_FOUND, text);
    }
    if (h->kind == CTL_HANDLER_REPLY) {
        info(s, "%s.%s: fixed reply", tool, func);
        return send_new(s, rpc_result_new(id, json_incref(h->reply)));
    }
    return start_command(s, h, id, args);
}

/* Serve queued tool calls, in order, until one needs a command to run. */
static int pump_tools(struct ctl_conn *s)
{
    json_t *req;
    int rc = 0;

    while (!s->running && rc == 0 && json_array_size(s->queue) > 0) {
        req = json_incref(json_array_get(s->queue, 0));
        json_array_remove(s->queue, 0);
        rc = serve_call(s, req);
        json_decref(req);
    }
    return rc;
}

/* If the running command is complete, answer its call and start the next. */
static int check_run(struct ctl_conn *s)
{
    int rc;

    if (!s->running || !ctl_run_done(&s->run))
        return 0;
    if (WIFEXITED(s->run.status))
        info(s, "%s.%s: exit status %d", s->run.h->tool, s->run.h->func,
             WEXITSTATUS(s->run.status));
    else
        info(s, "%s.%s: killed by signal %d", s->run.h->tool, s->run.h->func,
             WTERMSIG(s->run.status));
    rc = send_new(s, ctl_run_reply(&s->run));
    ctl_run_end(&s->run);
    s->running = 0;
    return rc < 0 ? rc : pump_tools(s);
}

/* Stop the running command and forget queued calls, without answering
 * them: the execution they belong to is being cancelled. */
static void drop_tools(struct ctl_conn *s)
{
    if (s->running) {
        info(s, "%s.%s: killing the tool command", s->run.h->tool, s->run.h->func);
        ctl_run_end(&s->run);
        s->running = 0;
    }
    json_array_clear(s->queue);
}

/* The daemon withdrew tool call `id` (a $/cancelRequest or
 * notifications/cancelled): stop its command or drop it from the queue. */
static int withdraw_call(struct ctl_conn *s, const json_t *id)
{
    json_t *req;
    size_t i;

    if (id == NULL)
        return 0;
    if (s->running && json_equal(s->run.call_id, (json_t *)id)) {
        info(s, "%s.%s: call withdrawn by the daemon", s->run.h->tool, s->run.h->func);
        ctl_run_end(&s->run);
        s->running = 0;
        return pump_tools(s);
    }
    json_array_foreach(s->queue, i, req) {
        if (json_equal(json_object_get(req, "id"), (json_t *)id)) {
            json_array_remove(s->queue, i);
            break;
        }
    }
    return 0;
}

static int on_request(struct ctl_conn *s, const struct rpc_msg *m)
{
    char text[300];

    if (strcmp(m->method, "tool/call") != 0) {
        snprintf(text, sizeof text, "sandboxctl does not serve the method '%.200s'", m->method);
        return send_error(s, m->id, RPC_E_METHOD_NOT_FOUND, text);
    }
    if (json_array_append(s->queue, m->root) < 0)
        return -1;
    return pump_tools(s);
}

static int on_notification(struct ctl_conn *s, const struct rpc_msg *m)
{
    if (strcmp(m->method, "$/cancelRequest") == 0)
        return withdraw_call(s, json_object_get(m->params, "id"));
    if (strcmp(m->method, "notifications/cancelled") == 0)
        return withdraw_call(s, json_object_get(m->params, "requestId"));
    if (strcmp(m->method, "execution/output") == 0 && s->stream_output && s->id &&
        json_equal(json_object_get(m->params, "execution_id"), s->id)) {
        const json_t *text = json_object_get(m->params, "text");
        if (json_is_string(text)) {
            fwrite(json_string_value(text), 1, json_string_length(text), stderr);
            fflush(stderr);
            s->streamed = 1;
        }
        return 0;
    }
    return 0;   /* others are only shown by -v */
}

/* A response that answers our request: it carries our id. */
static int is_answer(const struct ctl_conn *s, const struct rpc_msg *m)
{
    return m->type == RPC_RESPONSE && m->id != NULL && json_equal(m->id, s->id);
}

/* {"jsonrpc":"2.0","id":null,"error":{...}}: how a daemon answers a request
 * it could not read (too large, not JSON) or a peer it refuses.  There is
 * only one request in flight, so it is the answer.  Checked on the raw
 * object because rpc_parse() may classify a null id as unusable. */
static int is_null_id_error(const json_t *root)
{
    const json_t *id = json_object_get(root, "id");
    const json_t *error = json_object_get(root, "error");

    return json_is_object(root) && id != NULL && json_is_null(id) && json_is_object(error) &&
           json_is_integer(json_object_get(error, "code")) &&
           json_is_string(json_object_get(error, "message")) &&
           json_object_get(root, "result") == NULL && json_object_get(root, "method") == NULL &&
           json_is_string(json_object_get(root, "jsonrpc")) &&
           strcmp(json_string_value(json_object_get(root, "jsonrpc")), "2.0") == 0;
}

static int protocol_error(const char *what, const char *why, const char *line, size_t len)
{
    char shown[EXCERPT];

    ctl_excerpt(shown, sizeof shown, line, len);
    if (why != NULL)
        ctl_err("protocol error: the daemon sent %s (%s): '%s'", what, why, shown);
    else
        ctl_err("protocol error: the daemon sent %s: '%s'", what, shown);
    return CTL_EXIT_PROTOCOL;
}

/* Handle one line.  Returns 0, or an exit status. */
static int on_line(struct ctl_conn *s, const char *line, size_t len)
{
    struct rpc_msg m;
    int rc = 0;

    frame(s, "< ", line, len);
    rpc_parse(line, len, &m);
    if (is_answer(s, &m) ||
        ((m.type == RPC_RESPONSE || m.type == RPC_INVALID) && is_null_id_error(m.root))) {
        s->answer = json_incref(m.root);
        s->answer_line = malloc(len + 1);
        s->answered = 1;
        if (s->answer_line == NULL) {
            rc = -1;
            goto out;
        }
        memcpy(s->answer_line, line, len);
        s->answer_line[len] = '\0';
        s->answer_len = len;
        goto out;
    }
    switch (m.type) {
    case RPC_PARSE_ERROR:
        rc = protocol_error("invalid JSON", m.why, line, len);
        break;
    case RPC_INVALID:
        rc = protocol_error("a message that is not JSON-RPC 2.0", m.why, line, len);
        break;
    case RPC_RESPONSE:
        rc = protocol_error("a response to a request it was never sent", NULL, line, len);
        break;
    case RPC_REQUEST:
        rc = on_request(s, &m);
        break;
    case RPC_NOTIFICATION:
        rc = on_notification(s, &m);
        break;
    }
out:
    rpc_msg_clear(&m);
    if (rc < 0) {
        ctl_err("out of memory");
        rc = CTL_EXIT_SOFTWARE;
    }
    return rc;
}

static int on_eof(struct ctl_conn *s)
{
    char shown[EXCERPT];
    size_t pending = ndjson_pending(&s->rd);

    if (pending > 0) {
        /* ndjson.h has no accessor for the unfinished line; buf + pos is
         * where its documented fields say the unconsumed bytes start. */
        ctl_excerpt(shown, sizeof shown, inbuf_data(&s->rd.in), pending);
        ctl_err("protocol error: the daemon closed the connection in the middle of a "
                "message (%zu bytes: '%s')", pending, shown);
    } else {
        ctl_err("protocol error: the daemon closed the connection without answering");
    }
    return CTL_EXIT_PROTOCOL;
}

/* Read what the socket has and handle every complete line.  Returns 0, or
 * an exit status. */
static int on_readable(struct ctl_conn *s)
{
    char chunk[65536];
    enum ndjson_status st;
    const char *line;
    size_t len;
    ssize_t n;
    int rc;

    n = read(s->fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (n < 0) {
        ctl_err("protocol error: lost the connection to the daemon: %s", strerror(errno));
        return CTL_EXIT_PROTOCOL;
    }
    if (n == 0)
        return on_eof(s);
    if (ndjson_feed(&s->rd, chunk, (size_t)n) < 0) {
        ctl_err("out of memory");
        return CTL_EXIT_SOFTWARE;
    }
    while (!s->answered && (st = ndjson_next(&s->rd, &line, &len)) != NDJSON_AGAIN) {
        if (st == NDJSON_TOO_LONG) {
            ctl_err("protocol error: the daemon sent a message longer than %zu bytes",
                    CTL_MAX_LINE);
            return CTL_EXIT_PROTOCOL;
        }
        rc = on_line(s, line, len);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int interrupt(struct ctl_conn *s)
{
    s->interrupts++;
    if (s->interrupts > 1) {
        ctl_err("interrupted");
        return CTL_EXIT_INTERRUPT;
    }
    ctl_err("interrupted: cancelling the request (Ctrl-C again to quit at once)");
    drop_tools(s);
    if (send_new(s, rpc_request_new(NULL, "$/cancelRequest", json_pack("{s:O}", "id", s->id))) <
        0) {
        ctl_err("out of memory");
        return CTL_EXIT_SOFTWARE;
    }
    return 0;
}

/* Drain the signalfd.  Returns 0, or an exit status. */
static int on_signals(struct ctl_conn *s)
{
    struct signalfd_siginfo si;
    int rc;

    while (read(s->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD) {
            if (s->running)
                ctl_run_reap(&s->run);
        } else if (si.ssi_signo == SIGINT) {
            rc = interrupt(s);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ctl_conn_call(struct ctl_conn *s, const char *method, json_t *params)
{
    long long deadline = s->answer_within_ms > 0 ? now_ms() + s->answer_within_ms : 0;
    struct pollfd p[5];
    int rc, wait_ms = -1;

    json_decref(s->id);
    json_decref(s->answer);
    free(s->answer_line);
    s->answer = NULL;
    s->answer_line = NULL;
    s->answer_len = 0;
    s->answered = 0;
    s->streamed = 0;
    s->interrupts = 0;
    s->id = json_integer(++s->seq);
    if (s->id == NULL || send_new(s, rpc_request_new(s->id, method, params)) < 0) {
        ctl_err("out of memory");
        return CTL_EXIT_SOFTWARE;
    }
    while (!s->answered) {
        p[0].fd = s->fd;
        p[0].events = POLLIN | (s->out_off < s->out_len && !s->write_closed ? POLLOUT : 0);
        p[1].fd = s->sigfd;
        p[1].events = POLLIN;
        p[0].revents = p[1].revents = 0;
        if (s->running)
            ctl_run_pollfds(&s->run, &p[2]);
        else
            p[2].fd = p[3].fd = p[4].fd = -1;
        if (deadline) {
            long long left = deadline - now_ms();

            if (left <= 0) {
                ctl_err("no answer from %s within %d ms", s->path, s->answer_within_ms);
                return CTL_EXIT_PROTOCOL;
            }
            wait_ms = (int)left;
        }
        if (poll(p, 5, wait_ms) < 0) {
            if (errno == EINTR)
                continue;
            ctl_err("poll: %s", strerror(errno));
            return CTL_EXIT_SOFTWARE;
        }
        /* The command's pipes first: p[2..4] are stale once anything else
         * may have ended or replaced the run. */
        if (s->running)
            ctl_run_io(&s->run, &p[2]);
        if (p[1].revents && (rc = on_signals(s)) != 0)
            return rc;
        if (p[0].revents & POLLOUT)
            flush_out(s);
        if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && (rc = on_readable(s)) != 0)
            return rc;
        if (check_run(s) < 0) {
            ctl_err("out of memory");
            return CTL_EXIT_SOFTWARE;
        }
        flush_out(s);
    }
    return 0;
}
