/*
 * refuse.c - one error line and a lingering close for connections the
 * daemon will not serve.  See refuse.h.
 */
#include "daemon/refuse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/list.h"
#include "common/log.h"
#include "daemon/sup.h"
#include "proto/jsonrpc.h"
#include "proto/mutant.h"

struct refused {
    struct sup *sup;
    struct list_head node;      /* in sup->refused, oldest first */
    int      fd;
    ev_io    rio;
    ev_timer linger;
};

void refuse_init(struct sup *s)
{
    list_init(&s->refused);
    s->n_refused = 0;
}

static void refused_close(struct refused *r)
{
    struct sup *s = r->sup;

    ev_io_stop(s->loop, &r->rio);
    ev_timer_stop(s->loop, &r->linger);
    close(r->fd);
    list_del(&r->node);
    s->n_refused--;
    free(r);
}

static void refused_read_cb(struct ev_loop *loop, ev_io *io, int revents)
{
    struct refused *r = io->data;
    char buf[16384];
    ssize_t n = read(r->fd, buf, sizeof buf);
    (void)loop; (void)revents;

    /* drop what the peer sends; its EOF (or any error) ends the linger */
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        refused_close(r);
}

static void refused_timer_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop; (void)revents;
    refused_close(t->data);
}

void refuse_conn(struct sup *s, int fd, json_t *msg)
{
    size_t len;
    char *line = msg ? rpc_dump_line(msg, &len) : NULL;
    struct refused *r;

    json_decref(msg);
    if (line && write(fd, line, len) < 0)
        log_debug("refusing a connection: %s", strerror(errno));
    free(line);
    if (MUTANT(REFUSE_LINGER)) {
        close(fd);                      /* mutant: closed with unread input */
        return;
    }
    shutdown(fd, SHUT_WR);
    if (s->n_refused >= REFUSE_MAX)     /* the oldest goes first */
        refused_close(list_first(&s->refused, struct refused, node));
    if (!(r = calloc(1, sizeof *r))) {
        close(fd);
        return;
    }
    r->sup = s;
    r->fd = fd;
    list_add_tail(&s->refused, &r->node);
    s->n_refused++;
    ev_io_init(&r->rio, refused_read_cb, fd, EV_READ);
    r->rio.data = r;
    ev_io_start(s->loop, &r->rio);
    ev_timer_init(&r->linger, refused_timer_cb, REFUSE_LINGER, 0.);
    r->linger.data = r;
    ev_timer_start(s->loop, &r->linger);
}

void refuse_close_all(struct sup *s)
{
    while (s->n_refused > 0)
        refused_close(list_first(&s->refused, struct refused, node));
}
