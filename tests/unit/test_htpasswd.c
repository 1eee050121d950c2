/* test_htpasswd: rt/htpasswd.h's dummy setting, against which an unknown user is verified
 * (issue 25): the algorithm and cost of the file's entries, the most common in a mixed file
 * (bcrypt's $2a$, $2b$ and $2y$ counted as one), a fresh random salt at each load.
 * Must not: leave anything behind in /tmp.
 * Ownership: each test writes and removes its own file. */
#include "unit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "site/htpasswd.h"

/* Well-formed bcrypt and SHA-crypt hashes in the shapes htpasswd -B [-C 12], openssl passwd -5
 * and Python's crypt make; only their settings matter here, not what they hash. */
#define B5 "$2y$05$oCiyxOCQwsn5JqlhYhLaXuSWgHS7qsAhBJXn8bgrdgqNFd5nQeeXm"
#define B5B "$2b$05$oCiyxOCQwsn5JqlhYhLaXuSWgHS7qsAhBJXn8bgrdgqNFd5nQeeXm"
#define B12 "$2y$12$oCiyxOCQwsn5JqlhYhLaXuSWgHS7qsAhBJXn8bgrdgqNFd5nQeeXm"
#define S5 "$5$saltsaltsaltsalt$hPfH.lFMBbYu3Qcw0Zye3FY8SYgvKNQIUPZtchNLz.D"
#define S6R                                                                                        \
    "$6$rounds=20000$saltsaltsaltsalt$YJ5EY/"                                                      \
    "zAlcTC8OcccBQx2Pse17.TjfIdVweQXzoWv311W6aRVdjNjW5zxVih5"                                      \
    "xEaJ1OUPJEZONSEZguWDLgK6."

/* The dummy of a file with these lines (one "user:hash" each), in out. */
static void dummy_of(const char *lines, char *out, size_t cap)
{
    char path[] = "/tmp/ringhttpd-htpasswd-XXXXXX", why[256] = "";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK_INT((int)write(fd, lines, strlen(lines)), (int)strlen(lines));
    close(fd);
    struct auth_file *f = NULL;
    CHECK_INT(auth_file_load(path, &f, why, sizeof(why)), 0);
    unlink(path);
    snprintf(out, cap, "%s", f && f->dummy ? f->dummy : "");
    auth_file_free(f);
}

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

TEST(htpasswd_dummy_has_the_entries_settings)
{
    char d[256], again[256];
    dummy_of("alice:" B5 "\n", d, sizeof(d));
    CHECK(starts(d, "$2y$05$") && strlen(d) == 29);
    dummy_of("alice:" B5 "\n", again, sizeof(again));
    CHECK(strcmp(d, again) != 0); /* a random salt each load */
    dummy_of("alice:" B12 "\n", d, sizeof(d));
    CHECK(starts(d, "$2y$12$"));
    dummy_of("alice:" S5 "\n", d, sizeof(d));
    CHECK(starts(d, "$5$") && !strstr(d, "rounds=")); /* 5000, the default */
    dummy_of("alice:" S6R "\n", d, sizeof(d));
    CHECK(starts(d, "$6$rounds=20000$"));
}

TEST(htpasswd_dummy_of_a_mixed_file_is_its_most_common_setting)
{
    char d[256];
    dummy_of("root:" B12 "\na:" B5 "\nb:" B5 "\nc:" S5 "\n", d, sizeof(d));
    CHECK(starts(d, "$2y$05$"));
    /* $2y$ and $2b$ at cost 5 are one setting: three users against two $5$ */
    dummy_of("a:" S5 "\nb:" S5 "\nc:" B5 "\nd:" B5B "\ne:" B5 "\n", d, sizeof(d));
    CHECK(starts(d, "$2y$05$"));
    dummy_of("a:" S5 "\nc:" B5 "\n", d, sizeof(d)); /* a tie: the first */
    CHECK(starts(d, "$5$"));
}
