/* Runs in: supervisor */
/*
 * refuse.h - connections the daemon will not serve: a peer the allow lists
 * refuse, or one over max_connections.
 *
 * Contract:
 *  - refuse_conn() takes an accepted, non-blocking fd and a message (an
 *    error object, stolen).  It writes the message as one line (the socket
 *    buffer of a fresh connection always takes one short line), shuts down
 *    the sending side, then reads and drops whatever the peer still sends
 *    until its EOF or REFUSE_LINGER seconds.  So the peer reads its error
 *    and then the end of the stream, never a reset for data it sent that we
 *    did not read.
 *  - Refused connections are not client connections: they never count
 *    against max_connections, so a refused peer that reconnects in a loop
 *    cannot take the slots allowed clients need.  At most REFUSE_MAX linger
 *    at once; beyond that the oldest is closed at once.
 *  - refuse_close_all() closes every lingering one (at shutdown).
 */
#ifndef SANDBOXD_REFUSE_H
#define SANDBOXD_REFUSE_H

#include <jansson.h>

struct sup;

#define REFUSE_MAX    32
#define REFUSE_LINGER 2.0

void refuse_init(struct sup *s);
void refuse_conn(struct sup *s, int fd, json_t *msg);
void refuse_close_all(struct sup *s);

#endif
