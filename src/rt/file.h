/* file: the file operations the cache, the compressor and the site checks share: open a
 * path for reading without leaving a directory (openat2 RESOLVE_BENEATH), read a file's
 * first size bytes whole, and tell a policy's refusal from a permission's.
 * Must not: follow a path out of the directory it is given (no "..", no absolute symlink, no
 * magic link), or keep anything between calls.
 * Ownership: the caller owns the fds it passes and the fd or buffer it gets back. */
#ifndef RT_FILE_H
#define RT_FILE_H

#include <stdbool.h>
#include <stdint.h>

/* Opens path ("" means dir_fd's directory itself) below dir_fd read-only, close-on-exec and
 * without a controlling terminal, plus flags (O_NONBLOCK, O_DIRECTORY...). Returns the fd, or
 * -errno: -EXDEV when the path or a symlink on it leads out of dir_fd. */
int file_open_beneath(int dir_fd, const char *path, int flags);

/* Reads bytes [0, size) of fd into buf with pread (the file offset is left alone), resuming
 * after EINTR and short reads. Returns 0, -errno, or -EIO when the file ends before size (it
 * shrank since it was stat()ed). */
int file_read_all(int fd, char *buf, uint64_t size);

/* After opening path failed with EACCES: true when its permissions let this process have
 * mode (R_OK, R_OK | X_OK), so what refused it is a security policy, in practice the process's
 * Landlock domain (Landlock checks opens, not access(2)); false when the permissions do. */
bool file_refused_by_policy(const char *path, int mode);

#endif
