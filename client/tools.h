/* Runs in: sandboxctl */
/*
 * tools.h - the tools sandboxctl declares to the daemon and how it answers
 * their calls.
 *
 * Sources, merged at the end of option parsing (order on the command line
 * does not matter):
 *  - `--tools FILE`: a JSON array of tool declarations, exactly as the
 *    execute method takes them (modules, arities, reference-only tools).
 *    Sent as they are; the daemon validates them.
 *  - `--tool NAME.FUNC=COMMAND`: answer NAME.FUNC by running COMMAND.
 *  - `--tool-reply NAME.FUNC=JSON`: answer NAME.FUNC with a fixed value.
 *  Each handler's NAME.FUNC is added to the declarations: to the tool of
 *  that name from a file if there is one, else to a new {"name": NAME}.
 *
 * Ownership: a ctl_tools owns every string and JSON value in it; handlers
 * found with ctl_tools_find() are borrowed and live as long as the set.
 * The add functions print their own diagnostics (usage errors) and return
 * -1.
 */
#ifndef SANDBOXCTL_TOOLS_H
#define SANDBOXCTL_TOOLS_H

#include <jansson.h>
#include <stddef.h>

enum ctl_handler_kind {
    CTL_HANDLER_COMMAND,    /* run `command` through /bin/sh -c */
    CTL_HANDLER_REPLY,      /* answer with `reply` */
};

struct ctl_handler {
    char *tool;                 /* owned: NAME, the Lua global */
    char *func;                 /* owned: FUNC */
    enum ctl_handler_kind kind;
    char *command;              /* owned; CTL_HANDLER_COMMAND */
    json_t *reply;              /* owned; CTL_HANDLER_REPLY */
};

struct ctl_tools {
    struct ctl_handler *h;      /* owned array of n handlers */
    size_t n;
    json_t *files;              /* owned array: declarations from --tools, in order */
};

void ctl_tools_init(struct ctl_tools *t);
void ctl_tools_free(struct ctl_tools *t);

/* spec is "NAME.FUNC=COMMAND" / "NAME.FUNC=JSON".  A second handler for the
 * same NAME.FUNC is an error. */
int ctl_tools_add_command(struct ctl_tools *t, const char *spec);
int ctl_tools_add_reply(struct ctl_tools *t, const char *spec);
/* path "-" reads stdin. */
int ctl_tools_add_file(struct ctl_tools *t, const char *path);

/* Nonzero if nothing was declared. */
int ctl_tools_empty(const struct ctl_tools *t);

/* The `tools` array of an execute or check request (new reference), or
 * NULL when out of memory. */
json_t *ctl_tools_declare(const struct ctl_tools *t);

/* The handler for tool.func, or NULL. */
const struct ctl_handler *ctl_tools_find(const struct ctl_tools *t, const char *tool,
                                         const char *func);

#endif
