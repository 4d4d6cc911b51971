/* Runs in: supervisor */
/*
 * tools.h - the tool declarations of a request (params.tools of execute and
 * session/open): validated and normalised for the worker's job, and indexed
 * for the supervisor's check of each tool call the worker makes.  No Lua:
 * the supervisor validates every declaration before a worker sees one.
 *
 * A declaration is {"name": N, "module": M?, "functions": [F, ...]?}, N a
 * free Lua identifier (not a global of the sandbox nor a reserved word:
 * the tool becomes a global), M a string of at most RPC_ID_MAX bytes
 * without NUL (default N), each F a function name or {"name": F,
 * "arities": [n, ...]?}.  A function name is any string of 1 to
 * TOOLS_MAX_NAME bytes without NUL except "__module" (it becomes a field
 * of the tool's table, so it need not be an identifier).  Names are unique
 * within their list.
 *
 * Contract:
 *  - tools_norm(): tools may be NULL or JSON null (no tools).  On success it
 *    returns a new array, what the job carries: every tool as {"name",
 *    "module", "functions": [entry]} with its module filled in, every entry
 *    a name string or {"name", "arities"}; and sets *index to a new object
 *    mapping each tool name to {"module", "functions": {name: entry}}, the
 *    entries shared with the array.  On failure it returns NULL, writes a
 *    NUL-terminated message of at most errlen bytes to err ("out of
 *    memory" when that is the cause) and leaves *index untouched.  The
 *    input is borrowed and never modified (plain names are shared with it
 *    by reference).  Linear time in the size of the list.
 *  - tools_find(): the entry of function fn of tool name in an index made
 *    by tools_norm(), or NULL; when found, *tool_out is the tool's index
 *    entry (borrowed from index).
 *  - tools_arity_ok(): whether a call with n arguments is allowed by entry
 *    (every count when it names no arities).
 *  - tools_probe(): defined by no program; tools_norm() calls it, when a
 *    test defines it, once for each entry a duplicate check looks at (one
 *    per name checked: one hash lookup), so tests/unit/test_tools.c tells a
 *    quadratic check by its count, not by its time.  A weak reference: in
 *    the daemon and sandboxctl it is NULL and nothing is called.
 */
#ifndef SANDBOXD_TOOLS_H
#define SANDBOXD_TOOLS_H

#include <jansson.h>
#include <stddef.h>

#define TOOLS_MAX           256     /* tools in one request */
#define TOOLS_MAX_FUNCTIONS 256     /* functions of one tool */
#define TOOLS_MAX_NAME      128     /* bytes of a tool or function name */
#define TOOLS_MAX_ARITIES   16      /* arities of one function */
#define TOOLS_MAX_ARITY     250     /* the largest arity */

json_t *tools_norm(const json_t *tools, json_t **index, char *err, size_t errlen);
const json_t *tools_find(const json_t *index, const char *name, const char *fn,
                         const json_t **tool_out);
int tools_arity_ok(const json_t *entry, size_t n);
void tools_probe(void) __attribute__((weak));

#endif
