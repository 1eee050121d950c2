/* fuzz_htpasswd: libFuzzer target for the htpasswd reader (rt/htpasswd.h), which reads files an
 * operator may have written by hand. The input is the file (a memfd, read through its /proc
 * path as a configured file is). Asserts that a file is either refused with a reason naming it,
 * or kept as users whose names are the non-empty text before each line's first ':' and whose
 * hashes are bcrypt or SHA-crypt, in the order of the file's lines.
 * Must not: be linked into the server; it aborts on the first broken invariant.
 * Ownership: libFuzzer owns data; the memfd is made once and rewritten per input. */
#include "site/htpasswd.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_htpasswd: %s:%d: %s\n", __FILE__, __LINE__, #cond);              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static bool strong(const char *hash)
{
    return strncmp(hash, "$2y$", 4) == 0 || strncmp(hash, "$2b$", 4) == 0 ||
           strncmp(hash, "$2a$", 4) == 0 || strncmp(hash, "$5$", 3) == 0 ||
           strncmp(hash, "$6$", 3) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("htpasswd", MFD_CLOEXEC);
        REQUIRE(fd >= 0);
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    }
    REQUIRE(ftruncate(fd, 0) == 0);
    REQUIRE(pwrite(fd, data, size, 0) == (ssize_t)size);

    struct auth_file *f = NULL;
    char why[512] = "";
    int rc = auth_file_load(path, &f, why, sizeof(why));
    if (rc != 0) {
        REQUIRE(rc == -EINVAL || rc == -ENOMEM);
        REQUIRE(f == NULL && strstr(why, "--basic-auth") && strstr(why, path));
        return 0;
    }
    REQUIRE(f && f->n > 0);
    /* Every kept user is a line "name:hash" of the input, in order, the name up to its first
     * ':' (so a name has none), the hash the rest of the line without its line ending. */
    const char *p = (const char *)data, *end = p + size;
    for (size_t i = 0; i < f->n; i++) {
        const char *name = f->users[i].name, *hash = f->users[i].hash;
        size_t nl = strlen(name), hl = strlen(hash);
        REQUIRE(nl > 0 && !strchr(name, ':') && name[0] != '#' && strong(hash));
        REQUIRE(!memchr(hash, '\n', hl) && (hl == 0 || hash[hl - 1] != '\r'));
        const char *at = NULL;
        while (p < end && !at) {
            const char *eol = memchr(p, '\n', (size_t)(end - p));
            const char *line_end = eol ? eol : end;
            if ((size_t)(line_end - p) > nl && memcmp(p, name, nl) == 0 && p[nl] == ':' &&
                (size_t)(line_end - p) >= nl + 1 + hl && memcmp(p + nl + 1, hash, hl) == 0)
                at = p;
            p = eol ? eol + 1 : end;
        }
        REQUIRE(at != NULL);
    }
    auth_file_free(f);
    return 0;
}
