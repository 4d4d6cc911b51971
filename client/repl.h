/* Runs in: sandboxctl */
/*
 * repl.h - `sandboxctl session`: an interactive loop over one sandboxd
 * session (docs/protocol.md §3.8).
 *
 * ctl_repl() opens a session with open_params (stolen: tools, bindings,
 * timeout_ms, limits) on the connection s, then reads stdin: each line, or
 * each block of lines that only compiles as a whole (a function body, a
 * loop), is one chunk.  A single line that compiles as `return <line>` is
 * run so, as the stock Lua REPL does, so `1 + 1` shows 2.  Whether text
 * compiles, and whether a block is complete, is asked of this process's own
 * Lua parser (which runs nothing): the daemon gets only the chunks that run,
 * so its logs and metrics count what the user ran, no probes.  A chunk with a
 * syntax error is still sent, for the daemon's message.  Output printed by a chunk
 * goes to stderr as it is printed (stream_output); the value, when there is
 * one, goes to stdout as JSON; an error is shown on stderr.  Tool calls are
 * served by s's tools, as for exec.  A prompt ("> ", "...> " inside a block)
 * is shown on stderr when stdin is a terminal.
 *
 * At end of input the session is closed and 0 returned.  A chunk whose end
 * closes the session (a limit, a cancel: data.session_closed) returns that
 * error's exit status; so does an error opening it.
 */
#ifndef SANDBOXCTL_REPL_H
#define SANDBOXCTL_REPL_H

#include <jansson.h>

#include "client/ctl.h"
#include "client/connection.h"

int ctl_repl(struct ctl_conn *s, json_t *open_params, enum ctl_json_style style);

#endif
