/* Runs in: supervisor */
/*
 * session.h - the session methods (docs/protocol.md §3.8): the requests
 * that open a session, run a chunk or a snapshot in it, and close it.
 *
 * A session is one execution (OP_SESSION) from session/open until its
 * worker is gone; its states and their changes are exec.c's, like every
 * execution's (exec.h: ST_IDLE, XE_CHUNK, XE_IDLE, XE_CLOSE).  What is here
 * is the client's side: the params of each request and the bounds on how
 * many sessions may be open (max_sessions, never every one of
 * max_workers; max_sessions_per_connection).
 *
 * Contract: each function is a row of methods.c's table, called after the
 * table's checks (params an object or absent; for session/open and
 * session/snapshot, the request id not in use on the connection), and
 * answers its request exactly once, now (every parameter error,
 * session_not_found, busy) or later through the session's execution.
 *  - m_session_open(), m_session_snapshot(), m_session_close(): the methods
 *    session/open, session/snapshot and session/close.
 *  - session_chunk(): an execute naming params.session (not null): one
 *    chunk in that session.
 */
#ifndef SANDBOXD_SESSION_H
#define SANDBOXD_SESSION_H

#include <jansson.h>

struct conn;
struct rpc_msg;

void m_session_open(struct conn *c, const struct rpc_msg *m);
void m_session_snapshot(struct conn *c, const struct rpc_msg *m);
void m_session_close(struct conn *c, const struct rpc_msg *m);
void session_chunk(struct conn *c, const struct rpc_msg *m);

#endif
