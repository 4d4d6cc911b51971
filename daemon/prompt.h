/* Runs in: supervisor */
/*
 * prompt.h - the text an agent framework puts into its system prompt
 * (docs/protocol.md §3, prompt_info): what this sandbox really allows.
 * It describes worker/luaenv.c and worker/worker.c; change them together.
 */
#ifndef SANDBOXD_PROMPT_H
#define SANDBOXD_PROMPT_H

#include <jansson.h>

/* {"language": "Lua 5.3", "constraints": "<markdown bullets>",
 *  "tool_usage": "<one line>"} as a new object (caller owns); NULL only on
 * allocation failure.  session: the texts for code run in a session
 * (what persists differs). */
json_t *prompt_info_new(int session);

#endif
