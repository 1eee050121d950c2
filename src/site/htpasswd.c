/* htpasswd files; see htpasswd.h. */
#include "site/htpasswd.h"

#include <crypt.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>
#include <unistd.h>

#include "rt/file.h"

void auth_file_free(struct auth_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++) {
        free(f->users[i].name);
        free(f->users[i].hash);
    }
    free(f->users);
    free(f->dummy);
    free(f);
}

/* Characters of crypt's base64 ("./0-9A-Za-z"): n of them at p, then the end of the string. */
static bool crypt64(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!p[i] ||
            !strchr("./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", p[i]))
            return false;
    return p[n] == '\0';
}

/* Whether a bcrypt or SHA-crypt hash is whole: libcrypt's crypt_checksalt judges only the
 * setting at its start, so a line cut short ("alice:$2y$10$") passed it, and that user could
 * never log in instead of the file being refused. bcrypt: "$2y$NN$" and 53 characters (salt and
 * hash); SHA-crypt: "$5$" or "$6$", an optional "rounds=N$", a salt of up to 16 characters,
 * "$", and 43 ($5$) or 86 ($6$) characters. */
static bool whole(const char *hash)
{
    if (hash[1] == '2')
        return hash[4] >= '0' && hash[4] <= '9' && hash[5] >= '0' && hash[5] <= '9' &&
               hash[6] == '$' && crypt64(hash + 7, 53);
    const char *salt = hash + 3, *end;
    if (strncmp(salt, "rounds=", 7) == 0 && (salt = strchr(salt, '$')))
        salt++;
    if (!salt || !(end = strchr(salt, '$')) || end - salt > 16)
        return false;
    return crypt64(end + 1, hash[1] == '5' ? 43 : 86);
}

/* The hash formats libcrypt verifies that are worth having: bcrypt and SHA-crypt. */
static const char *refuse(const char *hash)
{
    if (strncmp(hash, "$apr1$", 6) == 0)
        return "MD5 ($apr1$) is refused: make it again with htpasswd -B (bcrypt)";
    if (strncmp(hash, "$2y$", 4) && strncmp(hash, "$2b$", 4) && strncmp(hash, "$2a$", 4) &&
        strncmp(hash, "$5$", 3) && strncmp(hash, "$6$", 3))
        return "only bcrypt ($2y$, htpasswd -B) and SHA-crypt ($5$, $6$) hashes are accepted; "
               "plain text, {SHA}, crypt(3) DES and MD5 are refused";
    /* libxcrypt calls $5$ "legacy" and a low bcrypt cost "too cheap": both still verify */
    int ok = crypt_checksalt(hash);
    if (ok == CRYPT_SALT_INVALID || ok == CRYPT_SALT_METHOD_DISABLED || !whole(hash))
        return "the hash is malformed or libcrypt cannot check it";
    return NULL;
}

/* What makes a hash cost what it costs: its prefix ("$2y$", "$5$", ...) and its cost (bcrypt's
 * log2 rounds; SHA-crypt's rounds, 5000 when the hash names none, as libcrypt reads it). */
struct setting {
    char prefix[5];
    unsigned long cost;
    size_t count; /* entries that have it */
};

static struct setting setting_of(const char *hash)
{
    struct setting s = {{0}, 0, 1};
    if (hash[1] == '2') { /* $2?$NN$: refuse() let only well-formed ones through */
        memcpy(s.prefix, hash, 4);
        s.cost = strtoul(hash + 4, NULL, 10);
    } else {
        memcpy(s.prefix, hash, 3);
        s.cost = strncmp(hash + 3, "rounds=", 7) == 0 ? strtoul(hash + 10, NULL, 10) : 5000;
    }
    return s;
}

/* The dummy setting for f (see htpasswd.h). A mixed file (cost raised over the years, or
 * $5$ and bcrypt users side by side) gets its most common setting, the first in the file on a
 * tie: an unknown user then looks like the most users, so timing can single out only the few
 * entries whose cost differs, and never the many. (The most expensive setting would protect
 * the few costly entries, typically one admin, and expose everyone else.) */
static int make_dummy(struct auth_file *f)
{
    struct setting *seen = calloc(f->n, sizeof(*seen));
    size_t kinds = 0, best = 0;
    int rc = -ENOMEM;
    if (!seen)
        return rc;
    for (size_t i = 0; i < f->n; i++) {
        struct setting s = setting_of(f->users[i].hash);
        size_t k = 0;
        /* $2a$, $2b$ and $2y$ are one algorithm: prefix[1] names the algorithm */
        while (k < kinds && (seen[k].cost != s.cost || seen[k].prefix[1] != s.prefix[1]))
            k++;
        if (k == kinds)
            seen[kinds++] = s;
        else
            seen[k].count++;
        if (seen[k].count > seen[best].count)
            best = k;
    }
    /* no random bytes given: libcrypt draws the salt from the kernel's generator */
    char out[CRYPT_GENSALT_OUTPUT_SIZE];
    if (crypt_gensalt_rn(seen[best].prefix, seen[best].cost, NULL, 0, out, sizeof(out)))
        rc = (f->dummy = strdup(out)) ? 0 : -ENOMEM;
    else
        rc = errno ? -errno : -EINVAL;
    free(seen);
    return rc;
}

int auth_file_load(const char *path, struct auth_file **out, char *why, size_t why_len)
{
    FILE *fp = fopen(path, "re");
    struct auth_file *f = calloc(1, sizeof(*f));
    char *line = NULL;
    size_t cap = 0, lineno = 0, alloc = 0;
    int rc = -ENOMEM;
    if (!fp || !f) {
        rc = fp ? -ENOMEM : -errno;
        if (rc == -EACCES && file_refused_by_policy(path, R_OK)) /* a reload naming a new file */
            snprintf(why, why_len,
                     "--basic-auth: cannot read '%s': outside the directories Landlock let "
                     "this process read when it started; restart ringhttpd to use it",
                     path);
        else
            snprintf(why, why_len, "--basic-auth: cannot read '%s': %s", path, strerror(-rc));
        goto out;
    }
    ssize_t n;
    while ((n = getline(&line, &cap, fp)) >= 0) {
        lineno++;
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n == 0 || line[0] == '#')
            continue;
        char *colon = strchr(line, ':');
        const char *bad = !colon || colon == line ? "not 'user:hash'" : refuse(colon + 1);
        if (bad) {
            snprintf(why, why_len, "--basic-auth: %s line %zu: %s", path, lineno, bad);
            rc = -EINVAL;
            goto out;
        }
        *colon = '\0';
        if (f->n == alloc) {
            struct auth_user *u = realloc(f->users, (alloc = alloc ? 2 * alloc : 8) * sizeof(*u));
            if (!u)
                goto nomem;
            f->users = u;
        }
        f->users[f->n] = (struct auth_user){strdup(line), strdup(colon + 1)};
        if (!f->users[f->n].name || !f->users[f->n++].hash)
            goto nomem;
    }
    if (f->n == 0) {
        snprintf(why, why_len, "--basic-auth: '%s' has no users", path);
        rc = -EINVAL;
        goto out;
    }
    if (getrandom(f->id, sizeof(f->id), 0) != (ssize_t)sizeof(f->id))
        goto nomem;
    if ((rc = make_dummy(f)) != 0) {
        snprintf(why, why_len, "--basic-auth: '%s': cannot make a dummy salt like its entries: %s",
                 path, strerror(-rc));
        goto out;
    }
    *out = f;
    f = NULL;
    rc = 0;
    goto out;
nomem:
    snprintf(why, why_len, "--basic-auth: out of memory reading '%s'", path);
    rc = -ENOMEM;
out:
    free(line);
    if (fp)
        fclose(fp);
    auth_file_free(f);
    return rc;
}

int auth_file_check(const char *path, char *why, size_t why_len)
{
    struct auth_file *f;
    int rc = auth_file_load(path, &f, why, why_len);
    if (rc == 0)
        auth_file_free(f);
    return rc;
}
