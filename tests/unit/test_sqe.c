/* Unit tests for engine/sqe: SQEs are never NULL, a full SQ is flushed, and what the kernel
 * refuses waits in order (linked chains whole) until it takes SQEs again. A ring created
 * disabled (IORING_SETUP_R_DISABLED) refuses every submission with EBADFD until it is enabled:
 * the kernel refusing, for real, on demand. Skipped where io_uring is unavailable. */
#include "engine/sqe.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "unit.h"

#define SQ 4
#define CQ 64

static bool ring_open(struct io_uring *ring, bool disabled)
{
    struct io_uring_params p = {
        .flags = IORING_SETUP_CQSIZE | (disabled ? IORING_SETUP_R_DISABLED : 0),
        .cq_entries = CQ,
    };
    int rc = io_uring_queue_init_params(SQ, ring, &p);
    if (rc < 0)
        fprintf(stderr, "  skipped: io_uring_setup: %s\n", strerror(-rc));
    return rc == 0;
}

static void ring_enable(struct io_uring *ring)
{
    CHECK(syscall(__NR_io_uring_register, ring->ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0) ==
          0);
}

static void nop(struct io_uring_sqe *sqe, uint64_t data, bool link)
{
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data64(sqe, data);
    if (link)
        sqe->flags |= IOSQE_IO_LINK;
}

/* Submits what is queued and checks that exactly n completions arrive, user data 0..n-1 in
 * order (NOPs complete in submission order), each successful. */
static void expect_in_order(struct io_uring *ring, unsigned n)
{
    CHECK(io_uring_submit(ring) >= 0);
    for (unsigned i = 0; i < n; i++) {
        struct io_uring_cqe *cqe;
        struct __kernel_timespec ts = {.tv_sec = 2};
        int rc = io_uring_wait_cqe_timeout(ring, &cqe, &ts);
        CHECK_INT(rc, 0);
        if (rc != 0)
            return;
        CHECK_INT(cqe->user_data, i);
        CHECK_INT(cqe->res, 0);
        io_uring_cqe_seen(ring, cqe);
    }
    CHECK_INT(io_uring_cq_ready(ring), 0);
}

TEST(sqe_full_ring_is_flushed_not_null)
{
    struct io_uring ring;
    struct sqe_spill s = {0};
    if (!ring_open(&ring, false))
        return;
    for (unsigned i = 0; i < 3 * SQ + 1; i++) {
        struct io_uring_sqe *sqe = sqe_get(&ring, &s);
        CHECK(sqe != NULL);
        if (!sqe)
            break;
        nop(sqe, i, false);
    }
    CHECK(s.head == NULL && !s.spilling); /* the kernel took every early flush */
    expect_in_order(&ring, 3 * SQ + 1);
    sqe_spill_free(&s);
    io_uring_queue_exit(&ring);
}

TEST(sqe_refused_ring_spills_in_order)
{
    struct io_uring ring;
    struct sqe_spill s = {0};
    if (!ring_open(&ring, true))
        return;
    unsigned n = 0;
    /* Fills the ring, then 3 more: the flush is refused (EBADFD), so they spill. */
    for (; n < SQ + 3; n++) {
        struct io_uring_sqe *sqe = sqe_get(&ring, &s);
        CHECK(sqe != NULL);
        if (!sqe)
            return;
        nop(sqe, n, false);
    }
    CHECK(s.spilling && s.head != NULL);
    /* A linked pair goes behind them in the spill, in order. */
    sqe_reserve(&ring, &s, 2);
    nop(sqe_get(&ring, &s), n++, true);
    nop(sqe_get(&ring, &s), n++, false);
    unsigned spilled = 0;
    for (struct sqe_spilled *sp = s.head; sp; sp = sp->next)
        spilled++;
    CHECK_INT(spilled, n - SQ);

    /* Still refused: nothing moves, nothing is lost. */
    sqe_flush(&ring, &s);
    CHECK(s.spilling && s.head != NULL);

    ring_enable(&ring);
    sqe_flush(&ring, &s); /* submits the ring's 4, copies the rest in as room appears */
    CHECK(s.head == NULL && s.tail == NULL && !s.spilling);
    expect_in_order(&ring, n);

    /* Spilling is over: SQEs come from the ring again, and the nodes are reused later. */
    struct io_uring_sqe *sqe = sqe_get(&ring, &s);
    CHECK(sqe != NULL && s.head == NULL);
    nop(sqe, 0, false);
    expect_in_order(&ring, 1);
    CHECK(s.free != NULL);
    sqe_spill_free(&s);
    CHECK(s.free == NULL);
    io_uring_queue_exit(&ring);
}

TEST(sqe_reserve_keeps_a_chain_whole)
{
    struct io_uring ring;
    struct sqe_spill s = {0};
    if (!ring_open(&ring, true))
        return;
    /* One slot left and the kernel refusing: the chain must not start in the ring and end in
     * the spill, or its link would end at whatever submission comes between. */
    for (unsigned i = 0; i < SQ - 1; i++)
        nop(sqe_get(&ring, &s), i, false);
    CHECK(!s.spilling);
    sqe_reserve(&ring, &s, 2);
    CHECK(s.spilling);
    nop(sqe_get(&ring, &s), SQ - 1, true);
    nop(sqe_get(&ring, &s), SQ, false);
    CHECK(s.head != NULL && s.head->sqe.user_data == SQ - 1);
    CHECK(s.head->next == s.tail && s.tail->sqe.user_data == SQ);
    ring_enable(&ring);
    sqe_flush(&ring, &s);
    CHECK(s.head == NULL && !s.spilling);
    expect_in_order(&ring, SQ + 1);
    sqe_spill_free(&s);
    io_uring_queue_exit(&ring);
}
