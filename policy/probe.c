/*
 * probe.c - see probe.h: the start-up probe of the worker layers, each
 * tried by contain_drop_privileges() or contain_userns_confine() in a
 * throwaway child.
 */
#include "policy/probe.h"

#include <dirent.h>
#include <errno.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <sys/syscall.h>
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
#include "proto/mutant.h"

/* The caller's logger, named `say` in each function that logs. */
#define say_err(...)    say(LOG_LVL_ERROR, __VA_ARGS__)
#define say_warn(...)   say(LOG_LVL_WARNING, __VA_ARGS__)
#define say_notice(...) say(LOG_LVL_NOTICE, __VA_ARGS__)

static const struct { int flag; const char *name; } ns_names[] = {
    { CLONE_NEWNET, "net" }, { CLONE_NEWIPC, "ipc" },
    { CLONE_NEWNS, "mnt" }, { CLONE_NEWUTS, "uts" },
};

#define PROBE_ROOT_WRITABLE 250     /* probe exit: "/" writable after the drop */
/* a probe child's exit status for a failure: errno, kept below the codes above */
#define PROBE_ERRNO() (errno > 0 && errno < PROBE_ROOT_WRITABLE ? errno : EPERM)
/* added to errno by probe_userns() when the namespaces worked and the
 * chroot into their empty root failed */
#define PROBE_CHROOT_STEP 128

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

/* Whether this process has capability cap in its effective set. */
static int has_cap(int cap)
{
    struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

    memset(data, 0, sizeof data);
    return syscall(SYS_capget, &hdr, data) == 0 &&
           (data[CAP_TO_INDEX(cap)].effective & CAP_TO_MASK(cap)) != 0;
}

/* The integer in a /proc file, or -1 when it cannot be read. */
static long proc_long(const char *path)
{
    char buf[32];
    FILE *f = fopen(path, "re");
    long v = -1;

    if (f) {
        if (fgets(buf, sizeof buf, f))
            v = strtol(buf, NULL, 10);
        fclose(f);
    }
    return v;
}

/* Whether a seccomp filter confines this process (a container runtime's
 * profile, systemd's SystemCallFilter= or RestrictNamespaces=). */
static int under_seccomp_filter(void)
{
    char line[128];
    FILE *f = fopen("/proc/self/status", "re");
    int filtered = 0;

    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Seccomp:", 8) == 0)
            filtered = strtol(line + 8, NULL, 10) == 2;
    fclose(f);
    return filtered;
}

/* The seccomp-filter cause of each kind of step, for refusal_cause(). */
static const char filtered_ns[] =
    "EPERM from the seccomp filter the daemon runs under (a container runtime's profile: "
    "Docker's and containerd's default refuse unshare and user namespaces without "
    "CAP_SYS_ADMIN; or systemd's RestrictNamespaces=)";
static const char filtered_chroot[] =
    "EPERM from the seccomp filter the daemon runs under, on chroot(2) (containers-common's "
    "default profile, podman's and CRI-O's, allows it only to a container given SYS_CHROOT)";

/* What a refused confinement step needed, for the step's failure err:
 * EPERM is the kernel's answer to a missing capability, a sysctl and a
 * seccomp filter alike, so each is looked at, in the order the kernel
 * would refuse: the capability the step needs (caps, -1 terminated;
 * none for a user namespace), the sysctls that forbid user namespaces
 * (userns), then a seccomp filter on the daemon (filtered: what to say
 * then).  Writes into buf. */
static const char *refusal_cause(int err, const int *caps, int userns, const char *filtered,
                                 char *buf, size_t len)
{
    static const struct { int cap; const char *name; } names[] = {
        { CAP_SYS_ADMIN, "CAP_SYS_ADMIN" }, { CAP_SYS_CHROOT, "CAP_SYS_CHROOT" },
        { CAP_SETUID, "CAP_SETUID" }, { CAP_SETGID, "CAP_SETGID" },
    };

    if (err == PROBE_ROOT_WRITABLE)
        return probe_error(err);
    if (userns && err == ENOSPC && proc_long("/proc/sys/user/max_user_namespaces") == 0) {
        snprintf(buf, len, "the sysctl user.max_user_namespaces is 0");
        return buf;
    }
    if (err != EPERM && err != EACCES) {
        snprintf(buf, len, "%s", strerror(err));
        return buf;
    }
    for (; caps && *caps >= 0; caps++) {
        if (has_cap(*caps))
            continue;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (names[i].cap == *caps)
                snprintf(buf, len, "EPERM: the daemon lacks %s", names[i].name);
        return buf;
    }
    if (userns && !has_cap(CAP_SYS_ADMIN) &&
        proc_long("/proc/sys/kernel/unprivileged_userns_clone") == 0) {
        snprintf(buf, len, "EPERM: the sysctl kernel.unprivileged_userns_clone is 0");
        return buf;
    }
    if (userns && proc_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1) {
        snprintf(buf, len, "EPERM: AppArmor restricts unprivileged user namespaces "
                 "(kernel.apparmor_restrict_unprivileged_userns = 1)");
        return buf;
    }
    if (under_seccomp_filter()) {
        snprintf(buf, len, "%s", filtered);
        return buf;
    }
    snprintf(buf, len, "%s", strerror(err));
    return buf;
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
            say_err("worker chroot '%s': cannot create it: %s", path, strerror(errno));
            return -1;
        }
        if (chown(path, 0, 0) < 0 || chmod(path, 0555) < 0) {
            say_err("worker chroot '%s': %s", path, strerror(errno));
            return -1;
        }
        say_notice("created the empty worker chroot %s (root, 0555)", path);
    }
    errno = 0;
    if (!realpath(path, real) || strlen(real) >= outlen) {
        say_err("worker chroot '%s': %s", path, strerror(errno ? errno : ENAMETOOLONG));
        return -1;
    }
    if (lstat(real, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
        (st.st_mode & (S_IWGRP | S_IWOTH))) {
        say_err("worker chroot '%s' must be a directory owned by root and not writable "
                "by group or others", real);
        return -1;
    }
    if (!(d = opendir(real))) {
        say_err("worker chroot '%s': %s", real, strerror(errno));
        return -1;
    }
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            entries++;
    closedir(d);
    if (entries) {
        say_err("worker chroot '%s' is not empty", real);
        return -1;
    }
    /* every ancestor: root-owned, and others cannot swap the path under us */
    snprintf(up, sizeof up, "%s", real);
    for (char *slash = strrchr(up, '/'); slash; slash = strrchr(up, '/')) {
        *slash = '\0';
        const char *dir = up[0] ? up : "/";
        if (lstat(dir, &st) < 0 || !safe_dir_mode(&st)) {
            say_err("worker chroot '%s': ancestor %s must be owned by root and not "
                    "writable by group or others (or sticky)", real, dir);
            return -1;
        }
        if (!up[0])
            break;
    }
    snprintf(out, outlen, "%s", real);
    return 0;
}

/* As root without the capability to unshare: the namespaces through a user
 * namespace that maps the worker's ids (contain_enter_userns_mapped), then the
 * worker's own drop, in a child; 0, or the errno it failed with. */
static int probe_drop_mapped(uid_t uid, gid_t gid, const char *chroot_dir, int ns)
{
    struct contain_opts o = { .drop_privs = 1, .uid = uid, .gid = gid,
                              .chroot_dir = chroot_dir };
    pid_t pid = fork();

    if (pid < 0)
        return errno;
    if (pid == 0) {
        if (contain_enter_userns_mapped(ns, uid, gid) < 0 || contain_drop_privileges(&o) < 0)
            _exit(PROBE_ERRNO());
        _exit(access("/", W_OK) == 0 ? PROBE_ROOT_WRITABLE : 0);
    }
    return probe_reap(pid);
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

        if (contain_enter_userns(uid, gid) < 0)
            _exit(PROBE_ERRNO());
        if (contain_userns_confine(&o) < 0)
            _exit(PROBE_CHROOT_STEP + (errno > 0 && errno < PROBE_CHROOT_STEP ? errno : EPERM));
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
    char why[320];

    if (err == 0) {
        snprintf(l->ns, sizeof l->ns, "%d", CLONE_NEWUSER | CONTAIN_NS_ALL);
        say_notice("containment: not root: workers run as uid %u in their own user namespace "
                   "(uid 0 there, no capabilities), chroot to an empty read-only tmpfs, "
                   "namespaces user+net+ipc+mnt+uts; also one fresh process per execution, "
                   "fds closed, rlimits, no_new_privs, non-dumpable, seccomp allowlist",
                   (unsigned)geteuid());
        return;
    }
    say_warn("containment: not root, so workers keep uid %u: no uid drop, chroot or "
             "namespaces (user namespaces not available here: %s); active: one fresh "
             "process per execution, fds closed, rlimits, no_new_privs, non-dumpable, "
             "seccomp allowlist", (unsigned)geteuid(),
             err == PROBE_ROOT_WRITABLE ? "the empty root was writable or not empty"
             : err > PROBE_CHROOT_STEP ? refusal_cause(err - PROBE_CHROOT_STEP, NULL, 0,
                                                       filtered_chroot, why, sizeof why)
                                      : refusal_cause(err, NULL, 1, filtered_ns, why, sizeof why));
}

int probe_layers(const struct config *cfg, struct worker_layers *l, probe_log_fn *say)
{
    const struct passwd *pw;
    const struct group *gr;
    uid_t uid;
    gid_t gid;
    static const int drop_caps[] = { CAP_SYS_CHROOT, CAP_SETGID, CAP_SETUID, -1 };
    static const int ns_caps[] = { CAP_SYS_ADMIN, -1 };
    int ns = 0, err, errs[sizeof ns_names / sizeof ns_names[0]], via_userns = 0;
    char names[64] = "", why[320], why_userns[320] = "";

    if (l->decided)
        return 0;
    if (geteuid() != 0) {
        decide_userns(l, say);
        l->decided = 1;
        return 0;
    }
    if (!cfg->worker_user || !*cfg->worker_user) {
        say_err("running as root with no [worker] user: refusing to run workers as root");
        return -1;
    }
    if (!(pw = getpwnam(cfg->worker_user))) {
        say_err("[worker] user '%s' does not exist: refusing to run workers as root",
                cfg->worker_user);
        return -1;
    }
    uid = pw->pw_uid;
    gid = pw->pw_gid;
    if (cfg->worker_group && *cfg->worker_group) {
        if (!(gr = getgrnam(cfg->worker_group))) {
            say_err("[worker] group '%s' does not exist: refusing to run workers as root",
                    cfg->worker_group);
            return -1;
        }
        gid = gr->gr_gid;
    }
    if (uid == 0 || gid == 0) {
        say_err("[worker] user/group resolve to uid %u gid %u: workers must not run as root "
                "or in group 0", (unsigned)uid, (unsigned)gid);
        return -1;
    }
    if (cfg->worker_chroot && *cfg->worker_chroot &&
        prepare_chroot(cfg->worker_chroot, l->chroot, sizeof l->chroot, say) < 0)
        return -1;
    if ((err = probe_drop(uid, gid, l->chroot[0] ? l->chroot : NULL, 0)) != 0) {
        say_err("workers cannot drop to uid %u gid %u%s%s: %s; refusing to start",
                (unsigned)uid, (unsigned)gid, l->chroot[0] ? " in chroot " : "",
                l->chroot, refusal_cause(err, l->chroot[0] ? drop_caps : drop_caps + 1, 0,
                                         filtered_chroot, why, sizeof why));
        return -1;
    }
    for (size_t i = 0; i < sizeof ns_names / sizeof ns_names[0]; i++) {
        errs[i] = probe_drop(uid, gid, l->chroot[0] ? l->chroot : NULL, ns_names[i].flag);
        if (errs[i] == 0)
            ns |= ns_names[i].flag;
    }
    /* Refused for want of CAP_SYS_ADMIN (a container): a user namespace
     * that maps the worker's ids may still give them all. */
    if (ns != CONTAIN_NS_ALL && !MUTANT(NO_MAPPED_USERNS)) {
        err = probe_drop_mapped(uid, gid, l->chroot[0] ? l->chroot : NULL, CONTAIN_NS_ALL);
        if (err == 0) {
            ns = CONTAIN_NS_ALL;
            via_userns = 1;
        } else {
            refusal_cause(err, NULL, 1, filtered_ns, why_userns, sizeof why_userns);
        }
    }
    for (size_t i = 0; i < sizeof ns_names / sizeof ns_names[0]; i++) {
        if (ns & ns_names[i].flag)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                     names[0] ? "+" : "", ns_names[i].name);
        else
            say_warn("containment: %s namespace not permitted here (%s; nor through a user "
                     "namespace: %s); workers share the daemon's", ns_names[i].name,
                     refusal_cause(errs[i], ns_caps, 0, filtered_ns, why, sizeof why),
                     why_userns);
    }
    if (via_userns)
        say_notice("containment: the namespaces come through a user namespace (it maps only "
                   "the worker's uid and gid; the zygote keeps the daemon's capabilities): "
                   "unshare alone is refused (%s)",
                   refusal_cause(errs[0] ? errs[0] : EPERM, ns_caps, 0, filtered_ns, why,
                                 sizeof why));
    if (ns && !via_userns && (err = probe_drop(uid, gid, l->chroot[0] ? l->chroot : NULL, ns)) != 0) {
        say_warn("containment: namespaces %s together fail (%s); workers get none",
                 names, probe_error(err));
        ns = 0;
        names[0] = '\0';
    }
    snprintf(l->uid, sizeof l->uid, "%u", (unsigned)uid);
    snprintf(l->gid, sizeof l->gid, "%u", (unsigned)gid);
    snprintf(l->ns, sizeof l->ns, "%d", ns | (via_userns ? CLONE_NEWUSER : 0));
    if (!l->chroot[0])
        say_warn("containment: [worker] chroot is empty: workers see the daemon's file system "
                 "(seccomp still forbids every file call)");
    say_notice("containment: workers run as uid %u (%s) gid %u, chroot %s, namespaces %s; "
               "also one fresh process per execution, fds closed, rlimits, no_new_privs, "
               "non-dumpable, seccomp allowlist",
               (unsigned)uid, cfg->worker_user, (unsigned)gid,
               l->chroot[0] ? l->chroot : "none",
               names[0] ? (via_userns ? "user+net+ipc+mnt+uts" : names) : "none");
    l->decided = 1;
    return 0;
}
