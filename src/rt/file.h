/* file: the file operations the cache, the compressor and the site checks share: open a path
 * for reading without leaving a directory (openat2 RESOLVE_BENEATH), read a file's first size
 * bytes whole, take the SHA-256 of bytes in memory or of a file's first size bytes, and tell
 * a policy's refusal from a permission's.
 * Must not: follow a path out of the directory it is given (no "..", no absolute symlink, no
 * magic link), or keep anything between calls.
 * Ownership: the caller owns the fds it passes and the fd or buffer it gets back. */
#ifndef RT_FILE_H
#define RT_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Opens path ("" means dir_fd's directory itself) below dir_fd read-only, close-on-exec and
 * without a controlling terminal, plus flags (O_NONBLOCK, O_DIRECTORY...). Returns the fd, or
 * -errno: -EXDEV when the path or a symlink on it leads out of dir_fd. */
int file_open_beneath(int dir_fd, const char *path, int flags);

/* Reads bytes [0, size) of fd into buf with pread (the file offset is left alone), resuming
 * after EINTR and short reads. Returns 0, -errno, or -EIO when the file ends before size (it
 * shrank since it was stat()ed). */
int file_read_all(int fd, char *buf, uint64_t size);

/* The SHA-256 of data[0, len) (OpenSSL's, which uses the CPU's SHA extensions where it has
 * them: 1.9 GB/s on the development machine), its first out_len (<= 32) bytes into out. */
void file_digest_mem(const void *data, uint64_t len, uint8_t *out, size_t out_len);

/* The same of fd's bytes [0, size), read with pread in blocks. 0, -errno, -EIO when the file
 * ends before size, or -ENOMEM. Reads the whole file: not for the event loop. */
int file_digest_fd(int fd, uint64_t size, uint8_t *out, size_t out_len);

/* After opening path failed with EACCES: true when its permissions let this process have
 * mode (R_OK, R_OK | X_OK), so what refused it is a security policy, in practice the process's
 * Landlock domain (Landlock checks opens, not access(2)); false when the permissions do. */
bool file_refused_by_policy(const char *path, int mode);

#endif
