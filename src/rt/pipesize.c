/* Splice pipe sizing from the kernel's limits; see pipesize.h. */
#include "rt/pipesize.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#define MIN_BYTES (64u << 10)

static uint64_t read_u64(const char *path, uint64_t dflt)
{
    unsigned long long v;
    FILE *f = fopen(path, "re");
    if (!f)
        return dflt;
    int n = fscanf(f, "%llu", &v);
    fclose(f);
    return n == 1 ? v : dflt;
}

void pipesize_read(struct pipe_limits *lim)
{
    struct rlimit rl;
    long page = sysconf(_SC_PAGESIZE);
    lim->max_size = read_u64("/proc/sys/fs/pipe-max-size", 1u << 20);
    lim->soft_pages = read_u64("/proc/sys/fs/pipe-user-pages-soft", 16384);
    lim->nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (uint64_t)rl.rlim_cur : 1024;
    lim->page_size = page > 0 ? (unsigned)page : 4096;
    /* The kernel exempts CAP_SYS_RESOURCE and CAP_SYS_ADMIN; root stands for them here. */
    lim->privileged = geteuid() == 0;
}

void pipesize_plan(const struct pipe_limits *lim, unsigned want, unsigned want_bytes,
                   unsigned threads, struct pipe_plan *out)
{
    uint64_t bytes = lim->page_size, count = want ? want : 1;
    threads = threads ? threads : 1;
    while (bytes * 2 <= want_bytes && bytes * 2 <= lim->max_size)
        bytes *= 2;
    uint64_t floor = bytes < MIN_BYTES ? bytes : MIN_BYTES;
    if (!lim->privileged && lim->soft_pages) {
        uint64_t budget = lim->soft_pages * lim->page_size / 2 / threads;
        while (count * bytes > budget && bytes > floor)
            bytes /= 2;
        if (count * bytes > budget)
            count = budget / bytes;
    }
    uint64_t fd_pipes = lim->nofile / 4 / 2 / threads;
    if (count > fd_pipes)
        count = fd_pipes;
    if (count < 1)
        count = 1;
    out->count = (unsigned)count;
    out->bytes = (unsigned)bytes;
    out->shrunk = count < want || bytes < want_bytes;
}
