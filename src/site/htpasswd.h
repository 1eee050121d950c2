/* htpasswd: reads an htpasswd file (user:hash lines, '#' comments) and keeps what basic auth
 * verifies against: bcrypt ($2y$, $2b$, $2a$, htpasswd -B) and SHA-crypt ($5$, $6$) hashes that
 * libcrypt can check. Plain text, {SHA}, DES crypt and MD5 ($apr1$) are refused with the line
 * that has them, so a weak file stops the start (or the reload), not a login.
 * It also makes, once per load, the dummy setting an unknown user is checked against, so that
 * user costs what a known one costs (the same algorithm and cost as the file's entries).
 * Must not: verify anything (rt/auth.c does, off the loop), or keep a file's bytes beyond the
 * users and hashes.
 * Ownership: a struct auth_file belongs to the site that loaded it (rt/site.h). */
#ifndef RT_HTPASSWD_H
#define RT_HTPASSWD_H

#include <stddef.h>

struct auth_user {
    char *name;
    char *hash;
};

struct auth_file {
    struct auth_user *users;
    size_t n;
    /* A crypt setting (algorithm, cost, random salt; no hash: crypt does a hash's full work
     * from a setting alone) with the settings most of the file's entries have: an unknown user
     * is verified against it. */
    char *dummy;
    unsigned char id[32]; /* random: tells files apart in a worker's cache of verifications */
};

/* Loads path: 0 with *out, or -errno with a one-line reason naming the file and line. */
int auth_file_load(const char *path, struct auth_file **out, char *why, size_t why_len);
/* The same, for --check-config and start-up: nothing kept. */
int auth_file_check(const char *path, char *why, size_t why_len);
void auth_file_free(struct auth_file *f);

#endif
