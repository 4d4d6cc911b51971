/*
 * probe.c - see probe.h: the start-up probe of the worker layers, each
 * tried by contain_drop_privileges() or contain_userns_confine() in a
 * throwaway child.
 */
#include "policy/probe.h"

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "policy/contain.h"

/* The caller's logger, named `say` in each function that logs. */
#define log_err(...)    say(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...)   say(LOG_LVL_WARNING, __VA_ARGS__)
#define log_notice(...) say(LOG_LVL_NOTICE, __VA_ARGS__)

static const struct { int flag; const char *name; } ns_names[] = {
    { CLONE_NEWNET, "net" }, { CLONE_NEWIPC, "ipc" },
    { CLONE_NEWNS, "mnt" }, { CLONE_NEWUTS, "uts" },
};

#define PROBE_ROOT_WRITABLE 250     /* probe exit: "/" writable after the drop */
/* a probe child's exit status for a failure: errno, kept below the codes above */
#define PROBE_ERRNO() (errno > 0 && errno < PROBE_ROOT_WRITABLE ? errno : EPERM)

/* The verdict of a probe child: its exit status, or an errno-like value
 * when it could not be waited for or did not exit normally. */
static int probe_reap(pid_t pid)
{
    int status;

    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return errno;
    }
    if (!WIFEXITED(status))
        return EINTR;
    return WEXITSTATUS(status);
}

/* Run contain_drop_privileges() with these namespaces in a child; 0, or the
 * errno it failed with (PROBE_ROOT_WRITABLE: the drop "worked" but the root
 * is writable). */
static int probe_drop(uid_t uid, gid_t gid, const char *chroot_dir, int ns)
{
    struct contain_opts o = { .drop_privs = 1, .uid = uid, .gid = gid,
                              .chroot_dir = chroot_dir, .unshare_flags = ns };
    pid_t pid = fork();

    if (pid < 0)
        return errno;
    if (pid == 0) {
        if (contain_drop_privileges(&o) < 0)
            _exit(PROBE_ERRNO());
        _exit(access("/", W_OK) == 0 ? PROBE_ROOT_WRITABLE : 0);
    }
    return probe_reap(pid);
}

static const char *probe_error(int err)
{
    return err == PROBE_ROOT_WRITABLE ? "the chroot is writable by the worker user"
                                      : strerror(err);
}

/* Not writable by group/other, or sticky (others cannot rename entries). */
static int safe_dir_mode(const struct stat *st)
{
    return st->st_uid == 0 && S_ISDIR(st->st_mode) &&
           ((st->st_mode & (S_IWGRP | S_IWOTH)) == 0 || (st->st_mode & S_ISVTX));
}

/* Create (if missing) and check the empty chroot directory; the resolved
 * path goes into out.  0, or -1 after logging why. */
static int prepare_chroot(const char *path, char *out, size_t outlen, probe_log_fn *say)
{
    struct stat st;
    char real[PATH_MAX], up[PATH_MAX];
    DIR *d;
    struct dirent *de;
    int entries = 0;

    if (lstat(path, &st) < 0 && errno == ENOENT) {
        if (mkdir(path, 0555) < 0) {
            log_err("worker chroot '%s': cannot create it: %s", path, strerror(errno));
            return -1;
        }
        if (chown(path, 0, 0) < 0 || chmod(path, 0555) < 0) {
            log_err("worker chroot '%s': %s", path, strerror(errno));
            return -1;
        }
        log_notice("created the empty worker chroot %s (root, 0555)", path);
    }
    errno = 0;
    if (!realpath(path, real) || strlen(real) >= outlen) {
        log_err("worker chroot '%s': %s", path, strerror(errno ? errno : ENAMETOOLONG));
        return -1;
    }
    if (lstat(real, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
        (st.st_mode & (S_IWGRP | S_IWOTH))) {
        log_err("worker chroot '%s' must be a directory owned by root and not writable "
                "by group or others", real);
        return -1;
    }
    if (!(d = opendir(real))) {
        log_err("worker chroot '%s': %s", real, strerror(errno));
        return -1;
    }
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            entries++;
    closedir(d);
    if (entries) {
        log_err("worker chroot '%s' is not empty", real);
        return -1;
    }
    /* every ancestor: root-owned, and others cannot swap the path under us */
    snprintf(up, sizeof up, "%s", real);
    for (char *slash = strrchr(up, '/'); slash; slash = strrchr(up, '/')) {
        *slash = '\0';
        const char *dir = up[0] ? up : "/";
        if (lstat(dir, &st) < 0 || !safe_dir_mode(&st)) {
            log_err("worker chroot '%s': ancestor %s must be owned by root and not "
                    "writable by group or others (or sticky)", real, dir);
            return -1;
        }
        if (!up[0])
            break;
    }
    snprintf(out, outlen, "%s", real);
    return 0;
}

/* Without root: enter a user namespace and confine as a worker would, in a
 * throwaway child; 0, or the errno it failed with (PROBE_ROOT_WRITABLE:
 * the new root is writable or not empty). */
static int probe_userns(void)
{
    struct contain_opts o = { .userns = 1, .chroot_dir = CONTAIN_USERNS_ROOT };
    uid_t uid = getuid();
    gid_t gid = getgid();
    pid_t pid = fork();

    if (pid < 0)
        return errno;
    if (pid == 0) {
        DIR *d;
        struct dirent *de;
        int entries = 0;

        if (contain_enter_userns(uid, gid) < 0 || contain_userns_confine(&o) < 0)
            _exit(PROBE_ERRNO());
        if ((d = opendir("/")) != NULL) {
            while ((de = readdir(d)) != NULL)
                entries += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
            closedir(d);
        }
        _exit(access("/", W_OK) == 0 || entries != 0 ? PROBE_ROOT_WRITABLE : 0);
    }
    return probe_reap(pid);
}

/* Not root: workers keep the daemon's uid; a user namespace, where the host
 * permits one, still gives them an empty root and their own net, ipc, mount
 * and uts namespaces (docs/security.md 3.6). */
static void decide_userns(struct worker_layers *l, probe_log_fn *say)
{
    int err = probe_userns();

    if (err == 0) {
        snprintf(l->ns, sizeof l->ns, "%d", CLONE_NEWUSER | CONTAIN_NS_ALL);
        log_notice("containment: not root: workers run as uid %u in their own user namespace "
                   "(uid 0 there, no capabilities), chroot to an empty read-only tmpfs, "
                   "namespaces user+net+ipc+mnt+uts; also one fresh process per execution, "
                   "fds closed, rlimits, no_new_privs, non-dumpable, seccomp allowlist",
                   (unsigned)geteuid());
        return;
    }
    log_notice("containment: not root, so workers keep uid %u: no uid drop, chroot or "
               "namespaces (user namespaces not available here: %s); active: one fresh "
               "process per execution, fds closed, rlimits, no_new_privs, non-dumpable, "
               "seccomp allowlist", (unsigned)geteuid(),
               err == PROBE_ROOT_WRITABLE ? "the empty root was writable or not empty"
                                          : strerror(err));
}

int probe_layers(const struct config *cfg, struct worker_layers *l, probe_log_fn *say)
{
    const struct passwd *pw;
    const struct group *gr;
    uid_t uid;
    gid_t gid;
    int ns = 0, err;
    char names[64] = "";

    if (l->decided)
        return 0;
    if (geteuid() != 0) {
        decide_userns(l, say);
        l->decided = 1;
        return 0;
    }
    if (!cfg->worker_user || !*cfg->worker_user) {
        log_err("running as root with no [worker] user: refusing to run workers as root");
        return -1;
    }
    if (!(pw = getpwnam(cfg->worker_user))) {
        log_err("[worker] user '%s' does not exist: refusing to run workers as root",
                cfg->worker_user);
        return -1;
    }
    uid = pw->pw_uid;
    gid = pw->pw_gid;
    if (cfg->worker_group && *cfg->worker_group) {
        if (!(gr = getgrnam(cfg->worker_group))) {
            log_err("[worker] group '%s' does not exist: refusing to run workers as root",
                    cfg->worker_group);
            return -1;
        }
        gid = gr->gr_gid;
    }
    if (uid == 0 || gid == 0) {
        log_err("[worker] user/group resolve to uid %u gid %u: workers must not run as root "
                "or in group 0", (unsigned)uid, (unsigned)gid);
        return -1;
    }
    if (cfg->worker_chroot && *cfg->worker_chroot &&
        prepare_chroot(cfg->worker_chroot, l->chroot, sizeof l->chroot, say) < 0)
        return -1;
    if ((err = probe_drop(uid, gid, l->chroot[0] ? l->chroot : NULL, 0)) != 0) {
        log_err("workers cannot drop to uid %u gid %u%s%s: %s; refusing to start",
                (unsigned)uid, (unsigned)gid, l->chroot[0] ? " in chroot " : "",
                l->chroot, probe_error(err));
        return -1;
    }
    for (size_t i = 0; i < sizeof ns_names / sizeof ns_names[0]; i++) {
        err = probe_drop(uid, gid, l->chroot[0] ? l->chroot : NULL, ns_names[i].flag);
        if (err == 0) {
            ns |= ns_names[i].flag;
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                     names[0] ? "+" : "", ns_names[i].name);
        } else {
            log_warn("containment: %s namespace not permitted here (%s); workers share "
                     "the daemon's", ns_names[i].name, probe_error(err));
        }
    }
    if (ns && (err = probe_drop(uid, gid, l->chroot[0] ? l->chroot : NULL, ns)) != 0) {
        log_warn("containment: namespaces %s together fail (%s); workers get none",
                 names, probe_error(err));
        ns = 0;
        names[0] = '\0';
    }
    snprintf(l->uid, sizeof l->uid, "%u", (unsigned)uid);
    snprintf(l->gid, sizeof l->gid, "%u", (unsigned)gid);
    snprintf(l->ns, sizeof l->ns, "%d", ns);
    if (!l->chroot[0])
        log_warn("containment: [worker] chroot is empty: workers see the daemon's file system "
                 "(seccomp still forbids every file call)");
    log_notice("containment: workers run as uid %u (%s) gid %u, chroot %s, namespaces %s; "
               "also one fresh process per execution, fds closed, rlimits, no_new_privs, "
               "non-dumpable, seccomp allowlist",
               (unsigned)uid, cfg->worker_user, (unsigned)gid,
               l->chroot[0] ? l->chroot : "none", names[0] ? names : "none");
    l->decided = 1;
    return 0;
}
