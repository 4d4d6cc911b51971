/* Runs in: supervisor */
/*
 * methods.h - dispatch of client requests and notifications.
 *
 * Contract: methods_request() answers every request exactly once, either
 * now (ping, describe, metrics, prompt_info, binding_names, every parameter
 * error, busy, a request for a session that is busy or unknown) or later
 * through the execution it creates or finds (execute, check,
 * session/open; execute with params.session, session/snapshot and
 * session/close, which go to the session's execution).
 * methods_notification() never answers; it knows `$/cancelRequest` and
 * ignores the rest.  Parameters are validated fully in the supervisor,
 * before any worker is involved (execute, check and session/open by
 * params.h, the session methods by session.h); the code itself is only
 * measured (max_code_bytes), never parsed.
 */
#ifndef SANDBOXD_METHODS_H
#define SANDBOXD_METHODS_H

struct conn;
struct rpc_msg;

void methods_request(struct conn *c, const struct rpc_msg *m);
void methods_notification(struct conn *c, const struct rpc_msg *m);

#endif
