/* Runs in: sandboxctl */
/*
 * ctl.h - what every part of sandboxctl shares: exit statuses, JSON output
 * style, diagnostics, and small file and string helpers.
 *
 * Conventions of the client:
 *  - Every diagnostic goes to stderr as one line "sandboxctl: ...", and says
 *    what failed, on what (a path, a method, a tool), and why.
 *  - Functions return 0 on success and -1 on failure unless they say
 *    otherwise; those that produce a JSON value return a new reference the
 *    caller owns (jansson's rules), or NULL.
 *  - There is no mutable global state; the event loop gets signals through
 *    a signalfd (client/connection.c), not through handlers.
 */
#ifndef SANDBOXCTL_CTL_H
#define SANDBOXCTL_CTL_H

#include <jansson.h>
#include <stdio.h>
#include <stddef.h>

/* The release, the daemon's: the top-level file VERSION, which the Makefile
 * gives as -DSANDBOXD_VERSION (daemon/sup.h is not included here: it pulls
 * in the daemon's event loop headers). */
#ifndef SANDBOXD_VERSION
#error "SANDBOXD_VERSION comes from the file VERSION: build with make"
#endif
#define SANDBOXCTL_VERSION SANDBOXD_VERSION
#define CTL_DEFAULT_SOCKET "/run/sandboxd/sandboxd.sock"
#define CTL_SOCKET_ENV     "SANDBOXD_SOCKET"

/*
 * Exit statuses.  0-4 and 69-77 are the documented ones (docs/sandboxctl.1); 70, 74 and 130 are
 * the client's own and are documented in --help and sandboxctl(1).
 */
enum ctl_exit {
    CTL_EXIT_OK        = 0,
    CTL_EXIT_SCRIPT    = 1,   /* syntax_error, runtime_error */
    CTL_EXIT_UNHEALTHY = 1,   /* health: every failure (a container health check's 1) */
    CTL_EXIT_USAGE     = 2,   /* bad invocation or input; request refused as invalid */
    CTL_EXIT_LIMIT     = 3,   /* the sandbox ended the execution */
    CTL_EXIT_CANCELLED = 4,   /* cancelled, tool_aborted */
    CTL_EXIT_NOCONNECT = 69,  /* cannot connect to the socket */
    CTL_EXIT_SOFTWARE  = 70,  /* out of memory or another failure inside sandboxctl */
    CTL_EXIT_IOERR     = 74,  /* cannot write stdout or --save-bindings */
    CTL_EXIT_BUSY      = 75,  /* busy */
    CTL_EXIT_PROTOCOL  = 76,  /* the daemon broke the protocol, or failed internally */
    CTL_EXIT_FORBIDDEN = 77,  /* forbidden */
    CTL_EXIT_INTERRUPT = 130, /* a second Ctrl-C */
};

enum ctl_json_style {
    CTL_JSON_AUTO,      /* pretty when the stream is a terminal, else compact */
    CTL_JSON_PRETTY,
    CTL_JSON_COMPACT,
};

/* "sandboxctl: <message>\n" on stderr. */
void ctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print v (any JSON value) and a newline on f in the given style; style AUTO
 * looks at whether f is a terminal.  Returns -1 if v cannot be encoded or
 * the write fails. */
int ctl_print_json(FILE *f, const json_t *v, enum ctl_json_style style);

/* The exit status for a JSON-RPC error object from the daemon, chosen by
 * data.kind (the table is in ctl.c, --help and sandboxctl(1)).  An error
 * without a known kind is a protocol error (76). */
int ctl_exit_for_error(const json_t *error);

/* Read a whole file, or stdin for "-", into a malloc'd NUL-terminated
 * buffer (*data, owned by the caller) of *len bytes.  On failure returns -1
 * with errno set and *data NULL. */
int ctl_read_file(const char *path, char **data, size_t *len);

/* Read path ("-" = stdin) and parse it as any JSON value.  On failure prints
 * a message naming `what` and path, and returns NULL. */
json_t *ctl_load_json_file(const char *path, const char *what);

/* Replace path with data: through a temporary file and rename() when path
 * is a regular file or does not exist, so a failed write never leaves half
 * a file; written in place otherwise (a FIFO, /dev/stdout).  -1 with errno. */
int ctl_write_file(const char *path, const char *data, size_t len);

/* A JSON string holding s[0..len), with every byte that is not part of
 * valid UTF-8 replaced by U+FFFD.  NULL only when out of memory. */
json_t *ctl_string_lossy(const char *s, size_t len);

/* Write a printable excerpt of s[0..len) into dst (always NUL-terminated):
 * control and non-ASCII bytes as \xNN, cut with "..." to fit.  For messages
 * that must show what arrived without flooding the terminal. */
void ctl_excerpt(char *dst, size_t dstlen, const char *s, size_t len);

/* Parse a whole decimal integer (optional sign).  -1 if s is anything else
 * or out of range. */
int ctl_parse_int(const char *s, json_int_t *out);

#endif
