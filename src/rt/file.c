#include "rt/file.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int file_open_beneath(int dir_fd, const char *path, int flags)
{
    struct open_how how = {
        .flags = (uint64_t)(flags | O_RDONLY | O_CLOEXEC | O_NOCTTY),
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    long fd = syscall(SYS_openat2, dir_fd, *path ? path : ".", &how, sizeof(how));
    return fd < 0 ? -errno : (int)fd;
}

/* Bytes [at, at + size) of fd into buf. */
static int file_read_all_at(int fd, char *buf, uint64_t size, uint64_t at)
{
    for (uint64_t done = 0; done < size;) {
        ssize_t n = pread(fd, buf + done, size - done, (off_t)(at + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        done += (uint64_t)n;
    }
    return 0;
}

int file_read_all(int fd, char *buf, uint64_t size)
{
    return file_read_all_at(fd, buf, size, 0);
}

void file_digest_mem(const void *data, uint64_t len, uint8_t *out, size_t out_len)
{
    uint8_t md[SHA256_DIGEST_LENGTH];
    SHA256(data, len, md);
    memcpy(out, md, out_len < sizeof(md) ? out_len : sizeof(md));
}

int file_digest_fd(int fd, uint64_t size, uint8_t *out, size_t out_len)
{
    enum { BLOCK = 64 << 10 };
    int rc = -ENOMEM;
    char *buf = malloc(BLOCK);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!buf || !ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
        goto out;
    for (uint64_t done = 0; done < size;) {
        uint64_t want = size - done < BLOCK ? size - done : BLOCK;
        if ((rc = file_read_all_at(fd, buf, want, done)) != 0)
            goto out;
        EVP_DigestUpdate(ctx, buf, want);
        done += want;
    }
    uint8_t md[EVP_MAX_MD_SIZE];
    unsigned md_len = 0;
    rc = EVP_DigestFinal_ex(ctx, md, &md_len) == 1 ? 0 : -ENOMEM;
    if (rc == 0)
        memcpy(out, md, out_len < md_len ? out_len : md_len);
out:
    EVP_MD_CTX_free(ctx);
    free(buf);
    return rc;
}

bool file_refused_by_policy(const char *path, int mode)
{
    return faccessat(AT_FDCWD, path, mode, AT_EACCESS) == 0;
}
