/* Runs in: supervisor */
/*
 * server.h - the listening Unix socket.
 *
 * Contract:
 *  - server_listen() uses a socket passed by systemd (LISTEN_PID/LISTEN_FDS,
 *    fd 3) when there is one, else creates `path`: a stale socket file left by
 *    a dead daemon is replaced, a live one is an error, the parent directory
 *    is created if missing, and the file gets the configured mode and group.
 *  - Accepted peers are checked with SO_PEERCRED against allow_uids and
 *    allow_gids first; a refused peer gets one `forbidden` error, a peer
 *    over max_connections one `busy` error, both with a lingering close
 *    (daemon/refuse.h) that never takes a client connection's slot.
 *  - server_close() stops accepting and removes the file if we created it
 *    and it is still the one we bound (same device and inode, recorded at
 *    bind): a file that replaced it at the path is never removed.
 */
#ifndef SANDBOXD_SERVER_H
#define SANDBOXD_SERVER_H

struct sup;

int  server_listen(struct sup *s, const char *path);
void server_close(struct sup *s);

#endif
