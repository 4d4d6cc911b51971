/* log.c - see log.h. */
#include "daemon/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static enum log_level threshold = LOG_LVL_INFO;

void log_set_level(enum log_level lvl) { threshold = lvl; }
int  log_enabled(enum log_level lvl) { return lvl <= threshold; }

/* Format into one buffer and emit it with a single write(2), so lines from
 * the supervisor and the zygote never interleave mid-line. */
void log_msg(enum log_level lvl, const char *fmt, ...)
{
    static const int prio[] = { 3, 4, 5, 6, 7 };
    char line[2048];
    va_list ap;
    int n;

    if (!log_enabled(lvl))
        return;
    n = snprintf(line, sizeof line, "<%d>sandboxd[%d]: ", prio[lvl], (int)getpid());
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    n = (int)strlen(line);
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* nowhere left to report it */
    }
}
