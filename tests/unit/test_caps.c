/* Unit tests for engine/caps (the io_uring engine's go/no-go from a probe's results, fed fakes
 * here: the kernels we must tell apart) and engine/tag (the user_data encoding both engines
 * use). */
#include "engine/caps.h"

#include <errno.h>

#include "engine/tag.h"
#include "unit.h"

static const struct caps_try ok = {CAPS_OK, 0};

/* What a 6.1 kernel answers: everything the engine uses works. */
static struct engine_caps kernel_6_1(void)
{
    return (struct engine_caps){
        .probed = true,
        .ring = ok,
        .setup = CAPS_SETUP_SINGLE_ISSUER,
        .ops = (1u << CAPS_OP_COUNT) - 1,
        .buf_ring = ok,
        .accept_ms = ok,
        .recv_ms = ok,
        .cancel_all = ok,
        .cqe_skip = true,
    };
}

TEST(caps_usable_kernel)
{
    struct engine_caps c = kernel_6_1();
    const char *why = NULL;
    CHECK_INT(caps_decide(&c, &why), 0);
    CHECK(why && why[0] == '\0');
    /* Optional features do not matter: no SPLICE (files go by sendfile), no CQE_SKIP, the
     * plain setup mode of a kernel without SINGLE_ISSUER. */
    c.ops &= ~(1u << CAPS_OP_SPLICE);
    c.cqe_skip = false;
    c.setup = 0;
    CHECK_INT(caps_decide(&c, &why), 0);
}

/* 5.19: buffer rings and multishot accept exist, the opcode probe lists RECV, but a multishot
 * recv is refused with EINVAL. The old probe passed this kernel; the engine then closed
 * connections at their first multishot recv. */
TEST(caps_kernel_5_19_refuses_multishot_recv)
{
    struct engine_caps c = kernel_6_1();
    c.setup = CAPS_SETUP_COOP_TASKRUN;
    c.recv_ms = (struct caps_try){CAPS_FAILED, -EINVAL};
    c.cancel_all = (struct caps_try){CAPS_UNTRIED, 0};
    const char *why = NULL;
    CHECK_INT(caps_decide(&c, &why), -EINVAL);
    CHECK(why && strstr(why, "multishot recv") && strstr(why, "6.0"));
}

TEST(caps_each_requirement_is_required)
{
    const char *why;
    struct engine_caps c = kernel_6_1();
    c.probed = false;
    CHECK_INT(caps_decide(&c, &why), -EINVAL);

    c = kernel_6_1();
    c.ring = (struct caps_try){CAPS_FAILED, -EPERM}; /* seccomp, io_uring_disabled */
    CHECK_INT(caps_decide(&c, &why), -EPERM);
    CHECK(strstr(why, "io_uring_setup") != NULL);

    c = kernel_6_1();
    c.ring = (struct caps_try){CAPS_FAILED, -ENOSYS}; /* before 5.1 */
    CHECK_INT(caps_decide(&c, &why), -ENOSYS);

    for (int op = 0; op < CAPS_OP_COUNT; op++) {
        if (op == CAPS_OP_SPLICE)
            continue;
        c = kernel_6_1();
        c.ops &= ~(1u << op);
        CHECK_INT(caps_decide(&c, &why), -EINVAL);
        CHECK(strstr(why, "opcode") != NULL);
    }

    c = kernel_6_1();
    c.buf_ring = (struct caps_try){CAPS_FAILED, -EINVAL}; /* 5.18 */
    CHECK_INT(caps_decide(&c, &why), -EINVAL);
    CHECK(strstr(why, "buffer ring") != NULL);

    c = kernel_6_1();
    c.accept_ms = (struct caps_try){CAPS_FAILED, -EINVAL};
    CHECK_INT(caps_decide(&c, &why), -EINVAL);
    CHECK(strstr(why, "multishot accept") != NULL);

    c = kernel_6_1();
    c.cancel_all = (struct caps_try){CAPS_FAILED, -EINVAL};
    CHECK_INT(caps_decide(&c, &why), -EINVAL);
    CHECK(strstr(why, "cancel") != NULL);

    /* A requirement never tried (the probe stopped early) is a failure, not a pass. */
    c = kernel_6_1();
    c.recv_ms = (struct caps_try){CAPS_UNTRIED, 0};
    CHECK_INT(caps_decide(&c, &why), -EINVAL);

    /* The first failure in probe order is the one reported. */
    c = kernel_6_1();
    c.buf_ring = (struct caps_try){CAPS_FAILED, -ENOMEM};
    c.recv_ms = (struct caps_try){CAPS_FAILED, -EINVAL};
    CHECK_INT(caps_decide(&c, &why), -ENOMEM);
    CHECK(strstr(why, "buffer ring") != NULL);
}

TEST(caps_op_names)
{
    CHECK(strcmp(caps_op_name(CAPS_OP_ACCEPT), "ACCEPT") == 0);
    CHECK(strcmp(caps_op_name(CAPS_OP_SPLICE), "SPLICE") == 0);
    CHECK(strcmp(caps_op_name(CAPS_OP_COUNT), "?") == 0);
    for (int op = 0; op < CAPS_OP_COUNT; op++)
        CHECK(caps_op_name((enum caps_op)op) != NULL);
}

TEST(tag_round_trip)
{
    static const struct tag cases[] = {
        {0, 0, 0},          {1, 1, 1},   {255, TAG_GEN_MASK, UINT32_MAX}, {12, 0x123456, 16383},
        {7, 0, UINT32_MAX}, {255, 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct tag t = tag_decode(tag_encode(cases[i].op, cases[i].gen, cases[i].slot));
        CHECK_INT(t.op, cases[i].op);
        CHECK_INT(t.gen, cases[i].gen);
        CHECK_INT(t.slot, cases[i].slot);
        CHECK(tag_is_current(t, cases[i].gen));
    }
}

TEST(tag_layout_and_generations)
{
    /* The layout is op (8) | gen (24) | slot (32), as io_uring user_data and epoll data. */
    CHECK(tag_encode(0xab, 0x123456, 0x89abcdef) == 0xab12345689abcdefull);
    CHECK(tag_encode(1, 0, 0) == 1ull << 56);
    /* Only the generation's low 24 bits are kept: no field bleeds into another. */
    uint64_t t = tag_encode(3, 0xff000001u, 5);
    CHECK(t == tag_encode(3, 1, 5));
    struct tag d = tag_decode(t);
    CHECK_INT(d.op, 3);
    CHECK_INT(d.slot, 5);
    CHECK(tag_is_current(d, 0xff000001u));
    CHECK(tag_is_current(d, 1));
    /* A completion of the slot's previous connection is stale. */
    CHECK(!tag_is_current(d, 2));
    CHECK(!tag_is_current(d, 0));
    /* The generation wraps at 2^24. */
    CHECK(tag_is_current(tag_decode(tag_encode(9, 1u << 24, 7)), 0));
}
