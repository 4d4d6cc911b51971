/*
 * ctl.c - diagnostics, JSON output, the error-kind -> exit status table, and
 * file helpers for sandboxctl.  See ctl.h for the contracts.
 */
#include "client/ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void ctl_err(const char *fmt, ...)
{
    va_list ap;

    fputs("sandboxctl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int ctl_print_json(FILE *f, const json_t *v, enum ctl_json_style style)
{
    size_t flags = JSON_ENCODE_ANY;
    char *text;
    int rc = 0;

    if (style == CTL_JSON_AUTO)
        style = isatty(fileno(f)) ? CTL_JSON_PRETTY : CTL_JSON_COMPACT;
    flags |= style == CTL_JSON_PRETTY ? JSON_INDENT(2) : JSON_COMPACT;
    text = json_dumps(v, flags);
    if (text == NULL)
        return -1;
    if (fputs(text, f) == EOF || fputc('\n', f) == EOF)
        rc = -1;
    free(text);
    return rc;
}

/*
 * The mapping, by data.kind.  Contract section 7 fixes 1, 3, 4, 75 and 77.
 * The rest is this client's choice:
 *  - requests the daemon refused as invalid (bad params, a limit above the
 *    ceiling, an unknown method, code or a message too large) are usage
 *    errors: the invocation must change;
 *  - bindings_too_large is a limit the sandbox enforced at the end of the
 *    execution, like memory_limit;
 *  - parse_error and invalid_request mean sandboxctl and the daemon disagree
 *    on the protocol itself, and internal_error means the daemon failed:
 *    both are protocol errors, as is any kind the contract does not know.
 */
static const struct {
    const char *kind;
    int status;
} kind_status[] = {
    {"syntax_error", CTL_EXIT_SCRIPT},
    {"runtime_error", CTL_EXIT_SCRIPT},
    {"invalid_params", CTL_EXIT_USAGE},
    {"limit_out_of_range", CTL_EXIT_USAGE},
    {"method_not_found", CTL_EXIT_USAGE},
    {"code_too_large", CTL_EXIT_USAGE},
    {"message_too_large", CTL_EXIT_USAGE},
    {"session_not_found", CTL_EXIT_USAGE},
    {"timeout", CTL_EXIT_LIMIT},
    {"memory_limit", CTL_EXIT_LIMIT},
    {"reductions_limit", CTL_EXIT_LIMIT},
    {"cpu_limit", CTL_EXIT_LIMIT},
    {"crashed", CTL_EXIT_LIMIT},
    {"bindings_too_large", CTL_EXIT_LIMIT},
    {"tool_call_limit", CTL_EXIT_LIMIT},
    {"cancelled", CTL_EXIT_CANCELLED},
    {"tool_aborted", CTL_EXIT_CANCELLED},
    {"busy", CTL_EXIT_BUSY},
    {"forbidden", CTL_EXIT_FORBIDDEN},
    {"parse_error", CTL_EXIT_PROTOCOL},
    {"invalid_request", CTL_EXIT_PROTOCOL},
    {"internal_error", CTL_EXIT_PROTOCOL},
};

int ctl_exit_for_error(const json_t *error)
{
    const char *kind = json_string_value(json_object_get(json_object_get(error, "data"), "kind"));
    size_t i;

    if (kind == NULL)
        return CTL_EXIT_PROTOCOL;
    for (i = 0; i < sizeof kind_status / sizeof kind_status[0]; i++)
        if (strcmp(kind, kind_status[i].kind) == 0)
            return kind_status[i].status;
    return CTL_EXIT_PROTOCOL;
}

/* Read fd to its end into a growing buffer.  Owns nothing on failure. */
static int read_all(int fd, char **data, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap), *nbuf;
    ssize_t r;

    if (buf == NULL)
        return -1;
    for (;;) {
        if (cap - n < 2) {
            if (cap > SIZE_MAX / 2) {
                errno = EFBIG;
                goto fail;
            }
            nbuf = realloc(buf, cap * 2);
            if (nbuf == NULL)
                goto fail;
            buf = nbuf;
            cap *= 2;
        }
        r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            goto fail;
        if (r == 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
fail:
    free(buf);
    return -1;
}

int ctl_read_file(const char *path, char **data, size_t *len)
{
    int fd, rc, saved;

    *data = NULL;
    *len = 0;
    if (strcmp(path, "-") == 0)
        return read_all(STDIN_FILENO, data, len);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    rc = read_all(fd, data, len);
    saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

json_t *ctl_load_json_file(const char *path, const char *what)
{
    const char *shown = strcmp(path, "-") == 0 ? "stdin" : path;
    json_error_t jerr;
    json_t *v;
    char *text;
    size_t len;

    if (ctl_read_file(path, &text, &len) < 0) {
        ctl_err("cannot read %s %s: %s", what, shown, strerror(errno));
        return NULL;
    }
    v = json_loadb(text, len, JSON_DECODE_ANY, &jerr);
    free(text);
    if (v == NULL)
        ctl_err("%s %s is not valid JSON: %s (line %d, column %d)", what, shown, jerr.text,
                jerr.line, jerr.column);
    return v;
}

static int write_all(int fd, const char *data, size_t len)
{
    ssize_t w;

    while (len > 0) {
        w = write(fd, data, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        data += w;
        len -= (size_t)w;
    }
    return 0;
}

/* In-place write, for targets that are not regular files. */
static int write_in_place(const char *path, const char *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    int rc, saved;

    if (fd < 0)
        return -1;
    rc = write_all(fd, data, len);
    saved = errno;
    if (close(fd) < 0 && rc == 0)
        rc = -1;
    else
        errno = saved;
    return rc;
}

int ctl_write_file(const char *path, const char *data, size_t len)
{
    struct stat st;
    char *tmp = NULL;
    mode_t mode, mask;
    int fd = -1, rc = -1, saved;

    if (stat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode))
            return write_in_place(path, data, len);
        mode = st.st_mode & 07777;
    } else {
        mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
    }
    if (asprintf(&tmp, "%s.XXXXXX", path) < 0) {
        tmp = NULL;
        goto out;
    }
    fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        goto out;
    if (fchmod(fd, mode) < 0 || write_all(fd, data, len) < 0)
        goto out_unlink;
    if (close(fd) < 0) {
        fd = -1;
        goto out_unlink;
    }
    fd = -1;
    if (rename(tmp, path) < 0)
        goto out_unlink;
    rc = 0;
    goto out;
out_unlink:
    saved = errno;
    unlink(tmp);
    errno = saved;
out:
    saved = errno;
    if (fd >= 0)
        close(fd);
    free(tmp);
    errno = saved;
    return rc;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 if the
 * byte at s does not start one.  Rejects overlong forms, surrogates and
 * code points above U+10FFFF, as jansson does. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t need, i;
    uint32_t cp;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) {
        need = 2;
        cp = s[0] & 0x1F;
    } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
        need = 3;
        cp = s[0] & 0x0F;
    } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
        need = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (n < need)
        return 0;
    for (i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((need == 3 && cp < 0x800) || (need == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return need;
}

json_t *ctl_string_lossy(const char *s, size_t len)
{
    static const char repl[] = "\xEF\xBF\xBD";
    const unsigned char *u = (const unsigned char *)s;
    char *buf, *p;
    json_t *str;
    size_t i = 0, k;

    if (len > (SIZE_MAX - 1) / 3)
        return NULL;
    buf = malloc(len * 3 + 1);
    if (buf == NULL)
        return NULL;
    p = buf;
    while (i < len) {
        k = utf8_seq(u + i, len - i);
        if (k == 0) {
            memcpy(p, repl, 3);
            p += 3;
            i++;
        } else {
            memcpy(p, s + i, k);
            p += k;
            i += k;
        }
    }
    str = json_stringn(buf, (size_t)(p - buf));
    free(buf);
    return str;
}

void ctl_excerpt(char *dst, size_t dstlen, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, i;
    unsigned char c;

    if (dstlen == 0)
        return;
    for (i = 0; i < len; i++) {
        c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            if (o + 1 + 4 > dstlen)
                break;
            dst[o++] = (char)c;
        } else {
            if (o + 4 + 4 > dstlen)
                break;
            dst[o++] = '\\';
            dst[o++] = 'x';
            dst[o++] = hex[c >> 4];
            dst[o++] = hex[c & 15];
        }
    }
    if (i < len && o + 4 <= dstlen) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = '\0';
}

int ctl_parse_int(const char *s, json_int_t *out)
{
    char *end;
    long long v;

    if (*s == '\0' || (*s != '-' && *s != '+' && (*s < '0' || *s > '9')))
        return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = (json_int_t)v;
    return 0;
}
