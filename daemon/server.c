/*
 * server.c - the listening socket: create or inherit, accept, authorise.
 * See server.h.
 */
#include "daemon/server.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/conn.h"
#include "common/log.h"
#include "daemon/metrics.h"
#include "daemon/refuse.h"
#include "daemon/sup.h"
#include "proto/jsonrpc.h"
#include "proto/mutant.h"

#define SD_LISTEN_FDS_START 3

static int peer_allowed(const struct sup *s, uid_t uid, gid_t gid)
{
    size_t i;

    if (s->cfg.n_allow_uids == 0 && s->cfg.n_allow_gids == 0)
        return 1;
    for (i = 0; i < s->cfg.n_allow_uids; i++)
        if (s->cfg.allow_uids[i] == uid)
            return 1;
    for (i = 0; i < s->cfg.n_allow_gids; i++)
        if (s->cfg.allow_gids[i] == gid)
            return 1;
    return 0;
}

/* Over max_connections: one `busy` error and a lingering close
 * (refuse.c), no connection state: a flood of connections costs at most
 * REFUSE_MAX lingering fds. */
static void refuse_busy(struct sup *s, int fd)
{
    /* Logged before the peer can see its EOF, so whoever watches both
     * (an operator, a test) finds the line once the connection is gone. */
    log_warn("refused a connection: %u connections are open (max_connections)", s->n_conns);
    refuse_conn(s, fd, rpc_error_new(NULL, RPC_E_BUSY, "too many connections",
                                     json_pack("{s:I,s:s,s:b}", "max_connections",
                                               (json_int_t)s->cfg.max_connections,
                                               "output", "", "output_truncated", 0)));
}

/* A peer the allow lists refuse: one `forbidden` error, a lingering close,
 * and no slot among the client connections. */
static void refuse_peer(struct sup *s, int fd, const struct ucred *cred)
{
    char msg[128];

    log_notice("refused peer uid=%u gid=%u pid=%d", (unsigned)cred->uid,
               (unsigned)cred->gid, (int)cred->pid);
    metrics_refused_peer();
    snprintf(msg, sizeof msg, "this peer (uid %u, gid %u) may not use sandboxd",
             (unsigned)cred->uid, (unsigned)cred->gid);
    refuse_conn(s, fd, rpc_error_new(NULL, RPC_E_FORBIDDEN, msg,
                                     json_pack("{s:s,s:b}", "output", "",
                                               "output_truncated", 0)));
}

static void accept_pause_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct sup *s = t->data;
    (void)revents;
    if (s->listen_fd >= 0)
        ev_io_start(loop, &s->accept_io);
}

/* Out of descriptors, the listener stays readable and accept pauses every
 * 100 ms for as long as it lasts: logged at once, then at most every
 * ACCEPT_WARN_INTERVAL seconds with the count of pauses not logged (one a
 * second would still be 86,400 lines a day), and once when accepting works
 * again. */
#define ACCEPT_WARN_INTERVAL 10.0

static void accept_paused(struct sup *s, int err)
{
    ev_tstamp now = ev_now(s->loop);

    if (MUTANT(ACCEPT_WARN))
        s->accept_pauses = 0;           /* mutant: every pause logged */
    if (s->accept_pauses == 0 || now - s->accept_logged >= ACCEPT_WARN_INTERVAL) {
        log_warn("accept: %s; pausing for 100 ms (%u pauses in a row, %u not logged since the "
                 "last report)", strerror(err), s->accept_pauses + 1, s->accept_quiet);
        s->accept_logged = now;
        s->accept_quiet = 0;
    } else {
        s->accept_quiet++;
    }
    if (s->accept_pauses < UINT_MAX)
        s->accept_pauses++;
}

static void accept_resumed(struct sup *s)
{
    if (s->accept_pauses == 0)
        return;
    log_notice("accept: connections are taken again (after %u pauses for want of descriptors)",
               s->accept_pauses);
    s->accept_pauses = 0;
    s->accept_quiet = 0;
}

static void accept_cb(struct ev_loop *loop, ev_io *io, int revents)
{
    struct sup *s = io->data;
    (void)revents;

    for (int burst = 0; burst < 64; burst++) {
        struct ucred cred;
        socklen_t len = sizeof cred;
        struct conn *c;
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Out of descriptors: stop accepting for a moment rather
                 * than spin on a listener that stays readable. */
                accept_paused(s, errno);
                ev_io_stop(loop, io);
                ev_timer_set(&s->accept_pause, 0.1, 0.);
                ev_timer_start(loop, &s->accept_pause);
            }
            return;
        }
        accept_resumed(s);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
            log_warn("SO_PEERCRED: %s", strerror(errno));
            close(fd);
            continue;
        }
        /* the peer check first: a refused peer never takes a slot */
        if (!peer_allowed(s, cred.uid, cred.gid)) {
            refuse_peer(s, fd, &cred);
            continue;
        }
        /* (the mutant: refused connections hold slots too) */
        if (s->n_conns + (MUTANT(REFUSED_SLOTS) ? s->n_refused : 0) >= s->cfg.max_connections) {
            refuse_busy(s, fd);
            continue;
        }
        if (!(c = conn_new(s, fd)))
            continue;
        c->peer_pid = cred.pid;
        c->peer_uid = cred.uid;
        c->peer_gid = cred.gid;
        log_debug("conn=%llu from uid=%u gid=%u pid=%d", (unsigned long long)c->id,
                  (unsigned)cred.uid, (unsigned)cred.gid, (int)cred.pid);
    }
}

/* systemd socket activation, without libsystemd.  Returns the fd, -1 when
 * not activated, -2 when the passed fd is unusable (checked to be
 * a listening AF_UNIX stream socket; its path, if any, goes in path_out). */
static int inherited_socket(char *path_out, size_t path_len)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    int fd = SD_LISTEN_FDS_START, type = 0, listening = 0;
    long n;
    socklen_t len = sizeof type;
    struct sockaddr_un addr = { 0 };
    socklen_t alen = sizeof addr;

    if (!pid || !fds || strtol(pid, NULL, 10) != (long)getpid() || (n = strtol(fds, NULL, 10)) < 1)
        return -1;
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    for (int extra = fd + 1; extra < SD_LISTEN_FDS_START + n; extra++) {
        log_warn("LISTEN_FDS: ignoring the extra socket fd %d (one socket is used)", extra);
        fcntl(extra, F_SETFD, FD_CLOEXEC);
    }
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM ||
        getsockname(fd, (struct sockaddr *)&addr, &alen) != 0 || addr.sun_family != AF_UNIX) {
        log_err("LISTEN_FDS: fd %d is not a Unix stream socket", fd);
        return -2;
    }
    len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) {
        log_err("LISTEN_FDS: fd %d is not listening (use Accept=no)", fd);
        return -2;
    }
    if (alen > offsetof(struct sockaddr_un, sun_path) && addr.sun_path[0])
        snprintf(path_out, path_len, "%.*s", (int)sizeof addr.sun_path, addr.sun_path);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/* Is something alive behind the socket file at addr? */
static int socket_in_use(const struct sockaddr_un *addr)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), live;

    if (fd < 0)
        return 0;
    live = connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0;
    close(fd);
    return live;
}

static void make_parent_dir(const char *path)
{
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char *slash;

    snprintf(dir, sizeof dir, "%s", path);
    if (!(slash = strrchr(dir, '/')) || slash == dir)
        return;
    *slash = '\0';
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        log_warn("mkdir %s: %s", dir, strerror(errno));
}

/* Remove the socket file this daemon bound, and only that one: whatever
 * sits at the path now (a newer daemon's socket, a file an operator put
 * there) is left alone unless it is the very inode recorded at bind. */
static void unlink_own_socket(struct sup *s, const char *path)
{
    struct stat st;

    if (!s->socket_owned || !path)
        return;
    s->socket_owned = 0;
    if (!MUTANT(SOCKET_INODE)) {        /* the mutant unlinks whatever is there */
        if (lstat(path, &st) != 0)
            return;
        if (!S_ISSOCK(st.st_mode) || st.st_dev != s->socket_dev || st.st_ino != s->socket_ino) {
            log_notice("%s is no longer the socket this daemon bound; leaving it", path);
            return;
        }
    }
    if (unlink(path) != 0 && errno != ENOENT)
        log_warn("unlink %s: %s", path, strerror(errno));
}

static int create_socket(struct sup *s, const char *path)
{
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    struct stat st;
    int fd = -1;
    mode_t old;

    if (strlen(path) >= sizeof addr.sun_path) {
        log_err("socket path too long: %s", path);
        return -1;
    }
    strcpy(addr.sun_path, path);
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            log_err("%s exists and is not a socket", path);
            return -1;
        }
        if (socket_in_use(&addr)) {
            log_err("%s: another daemon is already listening there", path);
            return -1;
        }
        unlink(path);           /* stale: its daemon is gone */
    }
    make_parent_dir(path);
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0)
        goto fail;
    old = umask(0177);          /* never world-accessible, even for a moment */
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        umask(old);
        goto fail;
    }
    umask(old);
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
        s->socket_owned = 1;
        s->socket_dev = st.st_dev;
        s->socket_ino = st.st_ino;
    }
    if (chmod(path, s->cfg.socket_mode) != 0)
        log_warn("chmod %s: %s", path, strerror(errno));
    if (s->cfg.socket_group && *s->cfg.socket_group) {
        /* a number is used as is (config.c accepts "2000" even
         * when no group of that name exists, e.g. a pod's fsGroup) */
        const char *g = s->cfg.socket_group;
        int numeric = strspn(g, "0123456789") == strlen(g);
        struct group *gr = numeric ? NULL : getgrnam(g);
        if (!numeric && !gr)
            log_warn("socket group %s: no such group", g);
        else if (chown(path, (uid_t)-1, numeric ? (gid_t)strtoul(g, NULL, 10) : gr->gr_gid) != 0)
            log_warn("socket group %s: %s", g, strerror(errno));
    }
    if (listen(fd, 256) != 0)
        goto fail;
    return fd;
fail:
    log_err("%s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    unlink_own_socket(s, path);
    return -1;
}

int server_listen(struct sup *s, const char *path)
{
    char passed[sizeof(((struct sockaddr_un *)0)->sun_path) + 1] = "";
    int fd = inherited_socket(passed, sizeof passed);

    if (fd == -2)
        return -1;
    if (fd < 0) {
        fd = create_socket(s, path);
    } else {
        if (passed[0])          /* report the path systemd bound */
            path = passed;
        log_info("using the socket passed by systemd (%s)", path);
    }
    if (fd < 0)
        return -1;
    s->listen_fd = fd;
    s->socket_path = strdup(path);
    refuse_init(s);
    ev_io_init(&s->accept_io, accept_cb, fd, EV_READ);
    s->accept_io.data = s;
    ev_timer_init(&s->accept_pause, accept_pause_cb, 0., 0.);
    s->accept_pause.data = s;
    ev_io_start(s->loop, &s->accept_io);
    return 0;
}

void server_close(struct sup *s)
{
    if (s->listen_fd < 0)
        return;
    ev_io_stop(s->loop, &s->accept_io);
    ev_timer_stop(s->loop, &s->accept_pause);
    refuse_close_all(s);
    close(s->listen_fd);
    s->listen_fd = -1;
    unlink_own_socket(s, s->socket_path);
}
