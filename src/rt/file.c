#include "rt/file.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
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

int file_read_all(int fd, char *buf, uint64_t size)
{
    for (uint64_t done = 0; done < size;) {
        ssize_t n = pread(fd, buf + done, size - done, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        done += (uint64_t)n;
    }
    return 0;
}

bool file_refused_by_policy(const char *path, int mode)
{
    return faccessat(AT_FDCWD, path, mode, AT_EACCESS) == 0;
}
