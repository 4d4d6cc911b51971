/* log.c - see log.h. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static enum log_level threshold = LOG_LVL_INFO;

/* 1 when stderr is the journal (set by log_init). */
static int to_journal;

void log_init(void)
{
    const char *v = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    int n = 0;

    to_journal = 0;
    if (!v || sscanf(v, "%llu:%llu%n", &dev, &ino, &n) != 2 || v[n] != '\0')
        return;
    if (fstat(STDERR_FILENO, &st) < 0)
        return;
    to_journal = (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_set_level(enum log_level lvl) { threshold = lvl; }
int  log_enabled(enum log_level lvl) { return lvl <= threshold; }

/* Format into one buffer and emit it with a single write(2), so lines from
 * the supervisor and the zygote never interleave mid-line.  The journal
 * records the identifier and pid itself (SYSLOG_IDENTIFIER, _PID), so there
 * the line is only the priority and the message. */
void log_msg(enum log_level lvl, const char *fmt, ...)
{
    static const int prio[] = { 3, 4, 5, 6, 7 };
    char line[2048];
    va_list ap;
    int n;

    if (!log_enabled(lvl))
        return;
    if (to_journal)
        n = snprintf(line, sizeof line, "<%d>", prio[lvl]);
    else
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
