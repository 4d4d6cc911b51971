/* Runs in: supervisor, zygote */
/*
 * log.h - one line per event on stderr, with sd-daemon priority prefixes
 * ("<3>" error ... "<7>" debug) so journald keeps severities:
 * "<6>sandboxd[PID]: message", or "<6>message" when stderr is the journal
 * (JOURNAL_STREAM names fd 2), which records the identifier and pid itself.
 *
 * The level threshold is process-wide state (one of the few mutable globals
 * the house rules allow: daemon/sup.h lists them); log_set_level() changes
 * it on reload.
 */
#ifndef SANDBOXD_LOG_H
#define SANDBOXD_LOG_H

/* The levels, most severe first ("<3>" error ... "<7>" debug). */
enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARNING, LOG_LVL_NOTICE, LOG_LVL_INFO, LOG_LVL_DEBUG };

/* Call first thing in main(): looks whether stderr is the journal, that is
 * whether JOURNAL_STREAM (which systemd sets for a unit whose output goes to
 * journald) names the device and inode of fd 2.  A value inherited by a
 * process whose stderr was redirected names another file and does not
 * count.  The zygote is started without the daemon's environment, so its
 * lines keep their "sandboxd[PID]: " and tell its pid from the supervisor's. */
void log_init(void);
void log_set_level(enum log_level lvl);
int  log_enabled(enum log_level lvl);
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...)    log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...)   log_msg(LOG_LVL_WARNING, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_LVL_NOTICE, __VA_ARGS__)
#define log_info(...)   log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...)  log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
