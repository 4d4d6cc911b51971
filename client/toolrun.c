/*
 * toolrun.c - run a --tool command for one tool/call.  Contracts in
 * toolrun.h.
 */
#include "client/toolrun.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/ctl.h"

/* Longest stderr text used as an error message. */
#define MESSAGE_MAX 4096

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* The environment of the command: ours, with SANDBOXCTL_TOOL and
 * SANDBOXCTL_FUNCTION set for this call.  The array and the two added
 * strings are owned by the caller (free_env); the rest is borrowed. */
static char **make_env(const struct ctl_handler *h)
{
    size_t n = 0, k = 0, i;
    char **env;

    while (environ[n] != NULL)
        n++;
    env = calloc(n + 3, sizeof *env);
    if (env == NULL)
        return NULL;
    if (asprintf(&env[0], "SANDBOXCTL_TOOL=%s", h->tool) < 0) {
        free(env);
        return NULL;
    }
    if (asprintf(&env[1], "SANDBOXCTL_FUNCTION=%s", h->func) < 0) {
        free(env[0]);
        free(env);
        return NULL;
    }
    k = 2;
    for (i = 0; i < n; i++)
        if (strncmp(environ[i], "SANDBOXCTL_TOOL=", 16) != 0 &&
            strncmp(environ[i], "SANDBOXCTL_FUNCTION=", 20) != 0)
            env[k++] = environ[i];
    env[k] = NULL;
    return env;
}

static void free_env(char **env)
{
    if (env != NULL) {
        free(env[0]);
        free(env[1]);
        free(env);
    }
}

/* posix_spawn /bin/sh -c COMMAND with fds in/out/err as 0/1/2, in a new
 * process group, with an empty signal mask and default SIGPIPE/SIGINT (the
 * client blocks and ignores those).  Returns 0 or an errno value. */
static int spawn_sh(pid_t *pid, const struct ctl_handler *h, int in, int out, int err)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, dfl;
    char *argv[] = {(char *)"sh", (char *)"-c", h->command, NULL};
    char **env = make_env(h);
    int rc;

    if (env == NULL)
        return ENOMEM;
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    sigaddset(&dfl, SIGINT);
    sigaddset(&dfl, SIGCHLD);
    rc = posix_spawn_file_actions_init(&fa);
    if (rc != 0)
        goto out_env;
    rc = posix_spawnattr_init(&at);
    if (rc != 0)
        goto out_fa;
    if ((rc = posix_spawn_file_actions_adddup2(&fa, in, STDIN_FILENO)) != 0 ||
        (rc = posix_spawn_file_actions_adddup2(&fa, out, STDOUT_FILENO)) != 0 ||
        (rc = posix_spawn_file_actions_adddup2(&fa, err, STDERR_FILENO)) != 0 ||
        (rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                                POSIX_SPAWN_SETSIGDEF)) != 0 ||
        (rc = posix_spawnattr_setpgroup(&at, 0)) != 0 ||
        (rc = posix_spawnattr_setsigmask(&at, &none)) != 0 ||
        (rc = posix_spawnattr_setsigdefault(&at, &dfl)) != 0)
        goto out_at;
    rc = posix_spawn(pid, "/bin/sh", &fa, &at, argv, env);
out_at:
    posix_spawnattr_destroy(&at);
out_fa:
    posix_spawn_file_actions_destroy(&fa);
out_env:
    free_env(env);
    return rc;
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);

    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int ctl_run_start(struct ctl_run *r, const struct ctl_handler *h, json_t *call_id,
                  const json_t *args)
{
    int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
    char *text;
    int rc, saved;

    memset(r, 0, sizeof *r);
    r->fd_in = r->fd_out = r->fd_err = -1;
    text = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
    if (text == NULL) {
        errno = ENOMEM;
        return -1;
    }
    r->in_len = strlen(text) + 1;
    r->in = malloc(r->in_len);
    if (r->in == NULL) {
        free(text);
        errno = ENOMEM;
        return -1;
    }
    memcpy(r->in, text, r->in_len - 1);
    r->in[r->in_len - 1] = '\n';
    free(text);
    if (pipe2(pin, O_CLOEXEC) < 0 || pipe2(pout, O_CLOEXEC) < 0 || pipe2(perr, O_CLOEXEC) < 0)
        goto fail;
    if (set_nonblock(pin[1]) < 0 || set_nonblock(pout[0]) < 0 || set_nonblock(perr[0]) < 0)
        goto fail;
    rc = spawn_sh(&r->pid, h, pin[0], pout[1], perr[1]);
    if (rc != 0) {
        errno = rc;
        goto fail;
    }
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    r->fd_in = pin[1];
    r->fd_out = pout[0];
    r->fd_err = perr[0];
    r->h = h;
    r->call_id = json_incref(call_id);
    r->out.max = CTL_TOOL_STDOUT_MAX;
    r->err.max = CTL_TOOL_STDERR_MAX;
    return 0;
fail:
    saved = errno;
    close_fd(&pin[0]);
    close_fd(&pin[1]);
    close_fd(&pout[0]);
    close_fd(&pout[1]);
    close_fd(&perr[0]);
    close_fd(&perr[1]);
    free(r->in);
    r->in = NULL;
    r->pid = 0;
    errno = saved;
    return -1;
}

void ctl_run_pollfds(const struct ctl_run *r, struct pollfd p[3])
{
    p[0].fd = r->fd_in;
    p[0].events = POLLOUT;
    p[1].fd = r->fd_out;
    p[1].events = POLLIN;
    p[2].fd = r->fd_err;
    p[2].events = POLLIN;
    p[0].revents = p[1].revents = p[2].revents = 0;
}

/* Keep up to b->max bytes; note when more arrive.  -1 when out of memory. */
static int obuf_add(struct ctl_obuf *b, const char *data, size_t n)
{
    size_t keep = n, ncap;
    char *np;

    if (b->len + keep > b->max) {
        keep = b->max - b->len;
        b->over = 1;
    }
    if (keep == 0)
        return 0;
    if (b->len + keep > b->cap) {
        ncap = b->cap ? b->cap : 4096;
        while (ncap < b->len + keep)
            ncap *= 2;
        np = realloc(b->p, ncap);
        if (np == NULL)
            return -1;
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->len, data, keep);
    b->len += keep;
    return 0;
}

static void kill_group(struct ctl_run *r)
{
    /* Only while the leader is not reaped: after that its pid (the group
     * id) may belong to someone else. */
    if (r->pid > 0)
        kill(-r->pid, SIGKILL);
}

static void pump_in(struct ctl_run *r)
{
    ssize_t w = write(r->fd_in, r->in + r->in_off, r->in_len - r->in_off);

    if (w < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (w < 0) {
        /* EPIPE: the command does not read its args; not an error. */
        close_fd(&r->fd_in);
        return;
    }
    r->in_off += (size_t)w;
    if (r->in_off == r->in_len)
        close_fd(&r->fd_in);
}

static void pump_out(struct ctl_run *r, int *fd, struct ctl_obuf *b)
{
    char chunk[65536];
    ssize_t n = read(*fd, chunk, sizeof chunk);

    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        close_fd(fd);
        return;
    }
    if (obuf_add(b, chunk, (size_t)n) < 0)
        b->over = 1;
    if (b->over && b == &r->out)
        kill_group(r);
}

void ctl_run_io(struct ctl_run *r, const struct pollfd p[3])
{
    if (r->fd_in >= 0 && (p[0].revents & (POLLOUT | POLLERR | POLLHUP)))
        pump_in(r);
    if (r->fd_out >= 0 && (p[1].revents & (POLLIN | POLLERR | POLLHUP)))
        pump_out(r, &r->fd_out, &r->out);
    if (r->fd_err >= 0 && (p[2].revents & (POLLIN | POLLERR | POLLHUP)))
        pump_out(r, &r->fd_err, &r->err);
}

void ctl_run_reap(struct ctl_run *r)
{
    int st;

    if (r->pid > 0 && waitpid(r->pid, &st, WNOHANG) == r->pid) {
        r->status = st;
        r->pid = 0;
    }
}

int ctl_run_done(const struct ctl_run *r)
{
    return r->pid == 0 && r->fd_out < 0 && r->fd_err < 0;
}

void ctl_run_end(struct ctl_run *r)
{
    int st;

    if (r->pid > 0) {
        kill_group(r);
        while (waitpid(r->pid, &st, 0) < 0 && errno == EINTR)
            ;
        r->pid = 0;
    }
    close_fd(&r->fd_in);
    close_fd(&r->fd_out);
    close_fd(&r->fd_err);
    free(r->in);
    free(r->out.p);
    free(r->err.p);
    json_decref(r->call_id);
    memset(r, 0, sizeof *r);
    r->fd_in = r->fd_out = r->fd_err = -1;
}

/* {"jsonrpc":"2.0","id":ID,"error":{"code":-32000,"message":M,"data":D}};
 * message and data stolen. */
static json_t *error_reply(json_t *id, json_t *message, json_t *data)
{
    if (message == NULL || data == NULL) {
        json_decref(message);
        json_decref(data);
        return NULL;
    }
    return json_pack("{s:s, s:O, s:{s:i, s:o, s:o}}", "jsonrpc", "2.0", "id", id, "error",
                     "code", CTL_TOOL_ERROR_CODE, "message", message, "data", data);
}

/* The command's stderr without trailing white space, at most MESSAGE_MAX
 * bytes, as a JSON string; NULL if that leaves nothing. */
static json_t *stderr_message(const struct ctl_obuf *e)
{
    size_t n = e->len;

    while (n > 0 && (e->p[n - 1] == '\n' || e->p[n - 1] == '\r' || e->p[n - 1] == ' ' ||
                     e->p[n - 1] == '\t'))
        n--;
    if (n == 0)
        return NULL;
    return ctl_string_lossy(e->p, n > MESSAGE_MAX ? MESSAGE_MAX : n);
}

static json_t *failure_reply(const struct ctl_run *r)
{
    json_t *msg = stderr_message(&r->err);
    char text[128];

    if (WIFSIGNALED(r->status)) {
        if (msg == NULL) {
            snprintf(text, sizeof text, "tool command killed by signal %d (%s)",
                     WTERMSIG(r->status), strsignal(WTERMSIG(r->status)));
            msg = json_string(text);
        }
        return error_reply(r->call_id, msg, json_pack("{s:i}", "signal", WTERMSIG(r->status)));
    }
    if (WEXITSTATUS(r->status) == CTL_TOOL_ABORT_STATUS) {
        if (msg == NULL) {
            snprintf(text, sizeof text, "tool command asked to abort (exit status %d)",
                     CTL_TOOL_ABORT_STATUS);
            msg = json_string(text);
        }
        return error_reply(r->call_id, msg,
                           json_pack("{s:b, s:i}", "abort", 1, "exit_status",
                                     CTL_TOOL_ABORT_STATUS));
    }
    if (msg == NULL) {
        snprintf(text, sizeof text, "tool command exited with status %d",
                 WEXITSTATUS(r->status));
        msg = json_string(text);
    }
    return error_reply(r->call_id, msg,
                       json_pack("{s:i}", "exit_status", WEXITSTATUS(r->status)));
}

/* The error for stdout that does not parse: says so, why, and what came. */
static json_t *not_json_reply(const struct ctl_run *r, const json_error_t *jerr)
{
    char shown[120], text[400];
    size_t n = r->out.len;

    while (n > 0 && (r->out.p[n - 1] == '\n' || r->out.p[n - 1] == '\r'))
        n--;
    if (r->out.len == 0) {
        snprintf(text, sizeof text, "tool command output is not JSON: it printed nothing");
    } else {
        ctl_excerpt(shown, sizeof shown, r->out.p, n);
        snprintf(text, sizeof text, "tool command output is not JSON: %s (output: '%s')",
                 jerr->text, shown);
    }
    return error_reply(r->call_id, json_string(text), json_object());
}

json_t *ctl_run_reply(const struct ctl_run *r)
{
    json_error_t jerr;
    json_t *value;
    char text[128];

    if (r->out.over) {
        snprintf(text, sizeof text, "tool command output exceeds %zu bytes", r->out.max);
        return error_reply(r->call_id, json_string(text), json_object());
    }
    if (!WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0)
        return failure_reply(r);
    value = json_loadb(r->out.p ? r->out.p : "", r->out.len, JSON_DECODE_ANY, &jerr);
    if (value == NULL)
        return not_json_reply(r, &jerr);
    if (r->err.len > 0)
        fwrite(r->err.p, 1, r->err.len, stderr);
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", r->call_id, "result", value);
}
