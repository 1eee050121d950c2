/* Unit tests for rt/pipesize: splice pipes sized from fs.pipe-max-size,
 * fs.pipe-user-pages-soft and RLIMIT_NOFILE (issue 10 item 7). */
#include "rt/pipesize.h"

#include "unit.h"

static const struct pipe_limits defaults = {
    .max_size = 1u << 20,
    .soft_pages = 16384,
    .nofile = 1u << 20,
    .page_size = 4096,
};

TEST(pipesize_root_gets_what_it_asks)
{
    struct pipe_limits lim = defaults;
    struct pipe_plan p;
    lim.privileged = true;
    pipesize_plan(&lim, 64, 1u << 20, 8, &p);
    CHECK_INT(p.count, 64);
    CHECK_INT(p.bytes, 1u << 20);
    CHECK(!p.shrunk);
}

TEST(pipesize_unprivileged_stays_within_half_the_soft_limit)
{
    /* 16384 pages = 64 MiB per user; half of it over 2 workers is 16 MiB each: the default
     * 64 x 1 MiB would fill the whole limit with one worker (issue 10). */
    struct pipe_plan p;
    pipesize_plan(&defaults, 64, 1u << 20, 2, &p);
    CHECK_INT(p.count, 64);
    CHECK_INT(p.bytes, 256u << 10);
    CHECK(p.shrunk);
    CHECK((uint64_t)p.count * p.bytes * 2 <= defaults.soft_pages * 4096 / 2);
}

TEST(pipesize_shrinks_size_to_64k_then_count)
{
    struct pipe_plan p;
    pipesize_plan(&defaults, 64, 1u << 20, 64, &p); /* 512 KiB budget per worker */
    CHECK_INT(p.bytes, 64u << 10);
    CHECK_INT(p.count, 8);
}

TEST(pipesize_respects_pipe_max_size)
{
    struct pipe_limits lim = defaults;
    struct pipe_plan p;
    lim.privileged = true;
    lim.max_size = 300000; /* not a power of two: the largest one below */
    pipesize_plan(&lim, 4, 1u << 20, 1, &p);
    CHECK_INT(p.bytes, 256u << 10);
    CHECK_INT(p.count, 4);
    lim.max_size = 4096;
    pipesize_plan(&lim, 4, 1u << 20, 1, &p);
    CHECK_INT(p.bytes, 4096);
}

TEST(pipesize_leaves_fds_for_connections)
{
    struct pipe_limits lim = defaults;
    struct pipe_plan p;
    lim.privileged = true;
    lim.nofile = 1024; /* a quarter, 256 fds, is 128 pipes, over 4 workers 32 each */
    pipesize_plan(&lim, 64, 1u << 20, 4, &p);
    CHECK_INT(p.count, 32);
    CHECK(p.shrunk);
    lim.nofile = 8; /* never none at all */
    pipesize_plan(&lim, 64, 1u << 20, 4, &p);
    CHECK_INT(p.count, 1);
}

TEST(pipesize_no_soft_limit)
{
    struct pipe_limits lim = defaults;
    struct pipe_plan p;
    lim.soft_pages = 0;
    pipesize_plan(&lim, 64, 1u << 20, 16, &p);
    CHECK_INT(p.count, 64);
    CHECK_INT(p.bytes, 1u << 20);
}
