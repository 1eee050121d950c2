/* --user and Landlock; see privs.h. */
#include "server/privs.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <linux/landlock.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config/config.h"

int privs_user(const char *spec, uid_t *uid, gid_t *gid, char *why, size_t why_len)
{
    char name[256];
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);

    if (len >= sizeof(name)) {
        snprintf(why, why_len, "--user: name too long");
        return -EINVAL;
    }
    memcpy(name, spec, len);
    name[len] = '\0';
    /* getpwnam is done here, before any confinement, while /etc/passwd is still readable. */
    struct passwd *pw = getpwnam(name);
    if (!pw) {
        snprintf(why, why_len, "--user: no user '%s'", name);
        return -ENOENT;
    }
    *uid = pw->pw_uid;
    *gid = pw->pw_gid;
    if (colon) {
        struct group *gr = getgrnam(colon + 1);
        if (!gr) {
            snprintf(why, why_len, "--user: no group '%s'", colon + 1);
            return -ENOENT;
        }
        *gid = gr->gr_gid;
    }
    return 0;
}

int privs_drop(const char *spec, char *why, size_t why_len)
{
    uid_t uid;
    gid_t gid;
    int rc = privs_user(spec, &uid, &gid, why, why_len);
    if (rc)
        return rc;
    if (geteuid() != 0) {
        /* A container or a Kubernetes pod that already runs as the user it names (the image's
         * USER, runAsUser): there is nothing to change, and failing would make the same
         * command line start only under root (issue 36). Supplementary groups cannot be
         * dropped without root; they are the ones the runtime gave. */
        if (uid == getuid() && uid == geteuid() && gid == getgid() && gid == getegid()) {
            snprintf(why, why_len, "--user %s: already running as that user and group", spec);
            return 0;
        }
        snprintf(why, why_len,
                 "--user %s: only a process started as root can change user (running as uid "
                 "%u, gid %u; that is uid %u, gid %u)",
                 spec, (unsigned)geteuid(), (unsigned)getegid(), (unsigned)uid, (unsigned)gid);
        return -EPERM;
    }
    if (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0) {
        int err = errno;
        snprintf(why, why_len, "--user %s: %s", spec, strerror(err));
        return -err;
    }
    if (uid != 0 && setuid(0) == 0) { /* paranoia: root must not be reachable again */
        snprintf(why, why_len, "--user %s: could regain root", spec);
        return -EPERM;
    }
    return 0;
}

/* Rights a kernel of each Landlock ABI knows; handling one it does not know is EINVAL. Defined
 * here for the bits newer than Debian 12's headers. */
#define LL_FS_V1 ((1ULL << 13) - 1)  /* EXECUTE .. MAKE_SYM */
#define LL_FS_REFER (1ULL << 13)     /* ABI 2 */
#define LL_FS_TRUNCATE (1ULL << 14)  /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#define LL_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

/* The ruleset being filled, whether -v lists what each rule allows, and the read rules made
 * so far (each directory said once: the root's parent often holds the config file too). */
struct ruleset {
    int fd;
    bool verbose;
    int nread;
    char *read[64];
};

static int add_rule(struct ruleset *rs, const char *path, uint64_t access, char *why,
                    size_t why_len)
{
    for (int i = 0; access == LL_READ && i < rs->nread; i++)
        if (strcmp(rs->read[i], path) == 0)
            return 0;
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        snprintf(why, why_len, "landlock: %s: %s", path, strerror(err));
        return -err;
    }
    struct landlock_path_beneath_attr attr = {.allowed_access = access, .parent_fd = fd};
    long rc = syscall(SYS_landlock_add_rule, rs->fd, LANDLOCK_RULE_PATH_BENEATH, &attr, 0);
    int err = errno;
    close(fd);
    if (rc != 0) {
        snprintf(why, why_len, "landlock: rule for %s: %s", path, strerror(err));
        return -err;
    }
    if (access == LL_READ && rs->nread < (int)(sizeof(rs->read) / sizeof(rs->read[0])) &&
        (rs->read[rs->nread] = strdup(path)))
        rs->nread++;
    if (rs->verbose) /* what a directory rule grants is the whole tree: say which trees */
        fprintf(stderr, "ringhttpd: landlock: %s beneath %s\n",
                access & LANDLOCK_ACCESS_FS_MAKE_REG       ? "may create and write files"
                : access == LANDLOCK_ACCESS_FS_REMOVE_FILE ? "may remove files"
                                                           : "may read",
                path);
    return 0;
}

/* The directory that holds path's last component (resolved), into out. */
static int parent_dir(const char *path, char *out)
{
    char copy[PATH_MAX];
    snprintf(copy, sizeof(copy), "%s", path);
    return realpath(dirname(copy), out) ? 0 : -errno;
}

/* Read access beneath the directory that holds path as given and beneath the one that holds
 * what it resolves to. A rule on the file's inode would not do: sed -i, mv, git checkout and
 * the deploy tools replace a file by renaming a new one over it, and a Kubernetes ConfigMap
 * re-points its ..data symlink, so the file a reload reads is a new inode (issue 36). */
static int allow_dirs_of(struct ruleset *rs, const char *path, char *why, size_t why_len)
{
    char dir[PATH_MAX], resolved[PATH_MAX], other[PATH_MAX];
    int rc = parent_dir(path, dir);
    if (rc == 0)
        rc = add_rule(rs, dir, LL_READ, why, why_len);
    if (rc == 0 && realpath(path, resolved) && parent_dir(resolved, other) == 0 &&
        strcmp(other, dir) != 0)
        rc = add_rule(rs, other, LL_READ, why, why_len);
    return rc;
}

/* A site's root (its directory's parent, before and after resolving links, so a re-pointed
 * symlink or a recreated root stays readable), its htpasswd and --mime-types files' directories. */
static int allow_level(struct ruleset *rs, const struct config *c, char *why, size_t why_len)
{
    int rc = 0;
    if (c->docroot) /* the top level has none when only its sites name roots */
        rc = allow_dirs_of(rs, c->docroot, why, why_len);
    for (int i = 0; i < c->num_auths && rc == 0; i++)
        rc = allow_dirs_of(rs, c->auths[i].htpasswd, why, why_len);
    if (rc == 0 && c->mime_file) /* a site's own --mime-types, re-read by a reload */
        rc = allow_dirs_of(rs, c->mime_file, why, why_len);
    return rc;
}

int privs_landlock(const struct config *cfg, char *why, size_t why_len)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 0) {
        int err = errno;
        /* EPERM: a seccomp filter that does not know Landlock (systemd-nspawn 252's, for one)
         * forbids it, as one may forbid io_uring; serve without, as on an old kernel. */
        if (err == EPERM)
            snprintf(why, why_len, "landlock: forbidden by a system call filter (%s): not applied",
                     strerror(err));
        if (err == ENOSYS || err == EOPNOTSUPP || err == EPERM)
            return 0;
        snprintf(why, why_len, "landlock: ABI version: %s", strerror(err));
        return -err;
    }

    struct landlock_ruleset_attr attr = {.handled_access_fs = LL_FS_V1};
    if (abi >= 2)
        attr.handled_access_fs |= LL_FS_REFER;
    if (abi >= 3)
        attr.handled_access_fs |= LL_FS_TRUNCATE;
    if (abi >= 5)
        attr.handled_access_fs |= LL_FS_IOCTL_DEV;
    struct ruleset ruleset = {
        .fd = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0),
        .verbose = cfg->verbose,
    };
    struct ruleset *rs = &ruleset;
    if (rs->fd < 0) {
        int err = errno;
        snprintf(why, why_len, "landlock: create ruleset: %s", strerror(err));
        return -err;
    }
    char dir[PATH_MAX];
    int rc = 0;
    for (int i = -1; i < cfg->num_sites && rc == 0; i++) /* the top level, then each site */
        rc = allow_level(rs, i < 0 ? cfg : &cfg->sites[i], why, why_len);
    if (rc == 0 && cfg->config_file) /* SIGHUP re-reads it */
        rc = allow_dirs_of(rs, cfg->config_file, why, why_len);
    /* A reload re-reads the TLS pairs, perhaps replaced by new files (certbot's renewals are
     * new files behind symlinks). */
    for (int i = 0; rc == 0 && i < cfg->num_tls_certs; i++)
        if ((rc = allow_dirs_of(rs, cfg->tls_certs[i].cert, why, why_len)) == 0)
            rc = allow_dirs_of(rs, cfg->tls_certs[i].key, why, why_len);
    /* A reload re-reads the session-ticket key files (a fleet's rotation rewrites them). */
    for (int i = 0; rc == 0 && i < cfg->num_ticket_key_files; i++)
        rc = allow_dirs_of(rs, cfg->ticket_key_files[i], why, why_len);
    /* ... and the QUIC secret files, rotated the same way. */
    for (int i = 0; rc == 0 && i < cfg->num_quic_secret_files; i++)
        rc = allow_dirs_of(rs, cfg->quic_secret_files[i], why, why_len);
    /* The access log is reopened on SIGUSR1, after a rotation perhaps as a new file. */
    if (rc == 0 && cfg->access_log && strcmp(cfg->access_log, "-") != 0 &&
        (rc = parent_dir(cfg->access_log, dir)) == 0)
        rc = add_rule(rs, dir, LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_MAKE_REG, why,
                      why_len);
    /* A --bind unix:PATH socket file is removed at exit, as nginx does (its master is not
     * confined): removal only, beneath the socket's directory (/run/ringhttpd, typically). */
    for (int i = 0; rc == 0 && i < cfg->num_binds; i++)
        if (cfg->binds[i].path && (rc = parent_dir(cfg->binds[i].path, dir)) == 0)
            rc = add_rule(rs, dir, LANDLOCK_ACCESS_FS_REMOVE_FILE, why, why_len);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* The sanitizers' runtime reads /proc/self (maps, task list) at exit for the leak check. */
    if (rc == 0)
        rc = add_rule(rs, "/proc", LL_READ, why, why_len);
#endif
    if (rc == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        rc = -errno;
        snprintf(why, why_len, "landlock: no_new_privs: %s", strerror(-rc));
    }
    if (rc == 0 && syscall(SYS_landlock_restrict_self, rs->fd, 0) != 0) {
        rc = -errno;
        snprintf(why, why_len, "landlock: restrict_self: %s", strerror(-rc));
    }
    close(rs->fd);
    for (int i = 0; i < rs->nread; i++)
        free(rs->read[i]);
    if (rc == -ENOENT && why[0] == '\0')
        snprintf(why, why_len, "landlock: cannot resolve the document root's directory");
    return rc < 0 ? rc : (int)abi;
}
