/* openat2-shim.c: LD_PRELOAD shim for running ringhttpd under valgrind 3.19, which lacks
 * openat2: syscall(SYS_openat2, ...) becomes openat() with the same flags (RESOLVE_* dropped,
 * so only for profiling a trusted docroot). Built by bench/prof/callgrind. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>
long syscall(long n, ...)
{
    va_list ap;
    va_start(ap, n);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (n == SYS_openat2) {
        struct open_how *how = (struct open_how *)a[2];
        return openat((int)a[0], (const char *)a[1], (int)how->flags, (mode_t)how->mode);
    }
    static long (*real)(long, ...);
    if (!real)
        real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
