/* sendplan: the partial-send loop both engines share, driven against a real socket whose buffer
 * is far smaller than the response, so every call ends in a short write or EAGAIN and must
 * resume exactly where it stopped (the seed servers truncated large files here). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/sendplan.h"
#include "unit.h"

#define FILE_SIZE (3 * 1024 * 1024 + 17)

static int temp_file_with(const unsigned char *data, size_t len)
{
    char name[] = "/tmp/sendplan-XXXXXX";
    int fd = mkstemp(name);
    if (fd < 0)
        return -1;
    unlink(name);
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, data + done, len - done);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)n;
    }
    return fd;
}

/* Reads whatever is available without blocking; returns bytes appended to out. */
static size_t drain(int fd, unsigned char *out, size_t cap)
{
    size_t got = 0;
    ssize_t n;
    while (got < cap && (n = recv(fd, out + got, cap - got, MSG_DONTWAIT)) > 0)
        got += (size_t)n;
    return got;
}

TEST(sendplan_resumes_after_eagain_across_memory_and_file_segments)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    fcntl(sv[0], F_SETFL, O_NONBLOCK);

    unsigned char *file = malloc(FILE_SIZE);
    for (size_t i = 0; i < FILE_SIZE; i++)
        file[i] = (unsigned char)(i * 7 + (i >> 11));
    int ffd = temp_file_with(file, FILE_SIZE);
    CHECK(ffd >= 0);

    static const char head[] = "HTTP/1.1 206 Partial Content\r\n\r\n";
    static const char part[] = "\r\n--b\r\n\r\n";
    struct plan p;
    plan_init(&p);
    CHECK(plan_mem(&p, head, sizeof(head) - 1));
    CHECK(plan_file(&p, ffd, 5, 1000000));
    CHECK(plan_mem(&p, part, sizeof(part) - 1));
    CHECK(plan_file(&p, ffd, 1000005, FILE_SIZE - 1000005));
    CHECK(plan_mem(&p, "", 0)); /* empty segments are skipped */
    CHECK_INT(p.nseg, 4);
    CHECK(sendplan_has_file(&p));

    size_t total = (size_t)p.bytes;
    unsigned char *got = malloc(total);
    size_t have = 0;
    int eagain = 0, rc;
    while ((rc = sendplan_now(sv[0], &p)) == -EAGAIN) {
        eagain++;
        have += drain(sv[1], got + have, total - have);
    }
    CHECK_INT(rc, 0);
    CHECK(plan_done(&p));
    while (have < total) {
        size_t n = drain(sv[1], got + have, total - have);
        if (n == 0)
            break;
        have += n;
    }
    CHECK(eagain > 10); /* the test really exercised resumption */
    CHECK_INT(have, total);
    size_t off = 0;
    CHECK(memcmp(got, head, sizeof(head) - 1) == 0);
    off += sizeof(head) - 1;
    CHECK(memcmp(got + off, file + 5, 1000000) == 0);
    off += 1000000;
    CHECK(memcmp(got + off, part, sizeof(part) - 1) == 0);
    off += sizeof(part) - 1;
    CHECK(memcmp(got + off, file + 1000005, FILE_SIZE - 1000005) == 0);

    free(got);
    free(file);
    close(ffd);
    close(sv[0]);
    close(sv[1]);
}

TEST(sendplan_reports_a_file_that_shrank)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    unsigned char data[100] = {0};
    int ffd = temp_file_with(data, sizeof(data));
    struct plan p;
    plan_init(&p);
    plan_file(&p, ffd, 0, 200); /* promises more than the file holds */
    CHECK_INT(sendplan_now(sv[0], &p), -EIO);
    close(ffd);
    close(sv[0]);
    close(sv[1]);
}

TEST(sendplan_reports_a_closed_peer)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    close(sv[1]);
    struct plan p;
    plan_init(&p);
    plan_mem(&p, "x", 1);
    CHECK_INT(sendplan_now(sv[0], &p), -EPIPE); /* MSG_NOSIGNAL: an error, not SIGPIPE */
    close(sv[0]);
}

TEST(plan_advance_moves_across_segments)
{
    struct plan p;
    struct iovec iov[4];
    plan_init(&p);
    plan_mem(&p, "abc", 3);
    plan_mem(&p, "defg", 4);
    plan_file(&p, 9, 100, 50);
    plan_mem(&p, "hi", 2);
    CHECK_INT(plan_iov(&p, iov, 4), 2);
    plan_advance(&p, 4);
    CHECK_INT(p.cur, 1);
    CHECK_INT(plan_iov(&p, iov, 4), 1);
    CHECK(iov[0].iov_len == 3 && memcmp(iov[0].iov_base, "efg", 3) == 0);
    plan_advance(&p, 3 + 20);
    CHECK_INT(p.cur, 2);
    CHECK(p.segs[2].off == 120 && p.segs[2].len == 30);
    CHECK_INT(plan_iov(&p, iov, 4), 0);
    plan_advance(&p, 32);
    CHECK(plan_done(&p));
}

TEST(sendplan_choose_paths)
{
    struct plan p;
    plan_init(&p);
    plan_mem(&p, "head", 4);
    CHECK(sendplan_choose(&p, true, true) == SENDPLAN_MEMORY);
    CHECK(sendplan_choose(&p, false, false) == SENDPLAN_MEMORY);
    plan_file(&p, 3, 0, 100);
    /* splice mode: the headers leave alone, then the file by splice (or sendfile once the
     * response may no longer use a pipe) */
    CHECK(sendplan_choose(&p, true, true) == SENDPLAN_MEMORY);
    CHECK(sendplan_choose(&p, true, false) == SENDPLAN_MEMORY);
    CHECK(sendplan_choose(&p, false, false) == SENDPLAN_SENDFILE); /* whole, by sendplan_now */
    plan_advance(&p, 4);
    CHECK(sendplan_choose(&p, true, true) == SENDPLAN_SPLICE);
    CHECK(sendplan_choose(&p, true, false) == SENDPLAN_SENDFILE);
    CHECK(sendplan_choose(&p, false, false) == SENDPLAN_SENDFILE);
}

/* A kernel TLS control record (a ticket, an alert) leaves by sendplan_now in every mode, its
 * content type in a cmsg; without the tls ULP the socket ignores the cmsg and sends the bytes
 * (the VM's test_ktls.py sees the kernel seal it). */
TEST(sendplan_tls_record_goes_by_sendmsg)
{
    struct plan p;
    plan_init(&p);
    CHECK_INT(p.tls_record, 0);
    plan_mem(&p, "\x01\x00", 2);
    p.tls_record = 21;
    CHECK(sendplan_choose(&p, true, true) == SENDPLAN_SENDFILE);
    CHECK(sendplan_choose(&p, false, false) == SENDPLAN_SENDFILE);
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    CHECK_INT(sendplan_now(sv[0], &p), 0);
    CHECK(plan_done(&p));
    unsigned char got[4];
    CHECK_INT(drain(sv[1], got, sizeof(got)), 2);
    CHECK(got[0] == 1 && got[1] == 0);
    close(sv[0]);
    close(sv[1]);
}

TEST(sendplan_file_run_joins_continuing_file_segments)
{
    struct plan p;
    int fd = -1;
    uint64_t off = 0;
    plan_init(&p);
    plan_mem(&p, "h1", 2);
    plan_file(&p, 7, 100, 10);
    plan_mem(&p, "h2", 2);
    plan_file(&p, 7, 110, 20); /* continues the first */
    plan_mem(&p, "h3", 2);
    plan_file(&p, 7, 500, 5); /* another range: a run of its own */
    CHECK(sendplan_interleaved(&p));
    CHECK_INT(sendplan_file_run(&p, &fd, &off), 30);
    CHECK(fd == 7 && off == 100);
    plan_advance(&p, 2 + 4); /* into the first file segment */
    CHECK_INT(sendplan_file_run(&p, &fd, &off), 26);
    CHECK_INT(off, 104);
    plan_advance(&p, 6 + 2 + 20);
    CHECK(!sendplan_interleaved(&p));
    CHECK_INT(sendplan_file_run(&p, &fd, &off), 5);
    CHECK_INT(off, 500);
    plan_advance(&p, 2 + 5);
    CHECK_INT(sendplan_file_run(&p, &fd, &off), 0);
}

/* HTTP/2's shape: 19 DATA frames (a 9-byte header, then 16 KiB of a file from an offset that is
 * not page-aligned, as for a range request) and a 3-byte tail: 39 of PLAN_MAX_SEGS segments. No
 * two header bytes alike in place, so a byte sent twice or skipped shows. */
enum { FRAMES = 19, FRAME = 16384 };
struct h2shape {
    unsigned char *file;
    int fd;
    unsigned start;
    char heads[FRAMES][9];
    struct plan p;
    size_t total;
};

static void h2shape_make(struct h2shape *h, unsigned start)
{
    size_t fsize = start + (size_t)FRAMES * FRAME;
    h->start = start;
    h->file = malloc(fsize);
    for (size_t i = 0; i < fsize; i++)
        h->file[i] = (unsigned char)(i * 13 + (i >> 9));
    h->fd = temp_file_with(h->file, fsize);
    CHECK(h->fd >= 0);
    plan_init(&h->p);
    for (int i = 0; i < FRAMES; i++) {
        for (int k = 0; k < 9; k++)
            h->heads[i][k] = (char)('a' + (i + 3 * k) % 26);
        CHECK(plan_mem(&h->p, h->heads[i], sizeof(h->heads[i])));
        CHECK(plan_file(&h->p, h->fd, start + (uint64_t)i * FRAME, FRAME));
    }
    CHECK(plan_mem(&h->p, "end", 3));
    h->total = (size_t)h->p.bytes;
}

/* got holds have bytes: all of the plan, in order. Frees h. */
static void h2shape_check_free(struct h2shape *h, const unsigned char *got, size_t have)
{
    CHECK(plan_done(&h->p));
    CHECK_INT(have, h->total);
    size_t at = 0;
    for (int i = 0; i < FRAMES && have == h->total; i++) {
        CHECK(memcmp(got + at, h->heads[i], 9) == 0);
        at += 9;
        CHECK(memcmp(got + at, h->file + h->start + (size_t)i * FRAME, FRAME) == 0);
        at += FRAME;
    }
    CHECK(have != h->total || memcmp(got + at, "end", 3) == 0);
    free(h->file);
    close(h->fd);
}

/* Through a pipe far smaller than the plan to a socket far smaller than the pipe: every fill
 * and every send ends short somewhere, and each byte must still come out once, in order. */
TEST(sendplan_pipe_interleaves_memory_with_the_pipes_file_bytes)
{
    int sv[2], pfd[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    CHECK(pipe2(pfd, O_NONBLOCK) == 0);
    CHECK(fcntl(pfd[0], F_SETPIPE_SZ, 65536) >= 4096);
    struct h2shape h;
    h2shape_make(&h, 4093);

    unsigned char *got = malloc(h.total);
    size_t have = 0;
    uint32_t in_pipe = 0;
    int fills = 0, eagain = 0, rc;
    while ((rc = sendplan_pipe(sv[0], &h.p, pfd[0], &in_pipe)) != 0) {
        if (rc == -ENODATA) {
            CHECK_INT(in_pipe, 0);
            int fd;
            uint64_t off;
            uint64_t run = sendplan_file_run(&h.p, &fd, &off);
            CHECK(run > 0 && fd == h.fd);
            loff_t at = (loff_t)off;
            ssize_t n = splice(fd, &at, pfd[1], NULL, run, SPLICE_F_NONBLOCK);
            CHECK(n > 0);
            in_pipe = (uint32_t)n;
            fills++;
        } else {
            CHECK_INT(rc, -EAGAIN);
            eagain++;
            have += drain(sv[1], got + have, h.total - have);
        }
    }
    CHECK_INT(in_pipe, 0);
    have += drain(sv[1], got + have, h.total - have);
    CHECK(fills >= 5 && eagain > 10); /* both kinds of resumption happened */
    h2shape_check_free(&h, got, have);
    free(got);
    close(pfd[0]);
    close(pfd[1]);
    close(sv[0]);
    close(sv[1]);
}

/* h's plan through sendplan_composed (template t, or NULL): headers and file ranges written into
 * a non-blocking pipe in order, at most cap bytes at a time, the pipe spliced on to a
 * destination that takes little at a time (a one-page pipe: a unix socket would take the
 * spliced pages whole). Checks every byte and frees h; returns how often the socket was full. */
static int composed_run(struct h2shape *h, uint32_t cap, struct sendplan_tmpl *t)
{
    int dst[2], pfd[2];
    CHECK(pipe2(dst, O_NONBLOCK) == 0);
    CHECK(fcntl(dst[0], F_SETPIPE_SZ, 4096) == 4096);
    CHECK(pipe2(pfd, 0) == 0);
    fcntl(pfd[1], F_SETFL, O_NONBLOCK);
    CHECK(fcntl(pfd[0], F_SETPIPE_SZ, 65536) >= 4096);
    unsigned char *got = malloc(h->total);
    size_t have = 0;
    uint32_t in_pipe = 0;
    int eagain = 0, rc;
    ssize_t n;
    while ((rc = sendplan_composed(dst[1], &h->p, pfd, cap, &in_pipe, t)) == -EAGAIN) {
        eagain++;
        while (have < h->total && (n = read(dst[0], got + have, h->total - have)) > 0)
            have += (size_t)n;
    }
    CHECK_INT(rc, 0);
    CHECK_INT(in_pipe, 0);
    while (have < h->total && (n = read(dst[0], got + have, h->total - have)) > 0)
        have += (size_t)n;
    h2shape_check_free(h, got, have);
    free(got);
    close(pfd[0]);
    close(pfd[1]);
    close(dst[0]);
    close(dst[1]);
    return eagain;
}

/* Capped at a frame and 4 bytes: fills end inside headers. */
TEST(sendplan_composed_puts_headers_and_file_ranges_through_one_pipe_in_order)
{
    struct h2shape h;
    h2shape_make(&h, 5001);
    CHECK(composed_run(&h, 9 + FRAME + 4, NULL) > 50);
}

/* With a template pipe (sendplan_tmpl): HTTP/2's shape with the headers of one stream (all
 * alike but the last, as a stream's full frames and its END_STREAM frame), then headers that
 * change at every frame, then a template whose pipe broke: the bytes come out once each, in
 * order, every time; the alike headers went by tee (the template holds them after), and a tee
 * never left the template's pipe short for the next. */
static void composed_with_template(bool alike, struct sendplan_tmpl *t)
{
    struct h2shape h;
    h2shape_make(&h, 4093);
    for (int i = 0; alike && i < FRAMES - 1; i++)
        memcpy(h.heads[i], "\x00\x40\x00\x00\x00\x00\x00\x00\x03", 9);
    composed_run(&h, 3 * (9 + FRAME) + 4, t);
}

TEST(sendplan_composed_tees_a_repeated_header_from_the_template_pipe)
{
    struct sendplan_tmpl t = {.len = 0};
    CHECK(pipe2(t.fd, O_NONBLOCK) == 0);
    composed_with_template(true, &t);
    CHECK(!t.broken);
    CHECK_INT(t.len, 9);
    CHECK(memcmp(t.bytes, "\x00\x40\x00\x00\x00\x00\x00\x00\x03", 9) == 0);
    int queued = -1;
    CHECK(ioctl(t.fd[0], FIONREAD, &queued) == 0);
    CHECK_INT(queued, 9);              /* tee left it whole */
    composed_with_template(false, &t); /* no two alike: written, the template unchanged */
    CHECK(!t.broken);
    CHECK_INT(t.len, 9);
    close(t.fd[0]); /* a read end gone: the next change of template fails, and it is given up */
    t.fd[0] = open("/dev/null", O_RDONLY);
    t.len = 1;
    t.bytes[0] = 'x';
    composed_with_template(true, &t);
    CHECK(t.broken);
    close(t.fd[0]);
    close(t.fd[1]);
}

TEST(sendplan_choose_takes_an_interleaved_plan_through_the_pipe_from_its_start)
{
    struct plan p;
    plan_init(&p);
    plan_mem(&p, "hdr", 3);
    plan_file(&p, 3, 0, 100);
    plan_mem(&p, "hdr", 3);
    plan_file(&p, 3, 100, 100);
    CHECK(sendplan_choose(&p, true, true) == SENDPLAN_SPLICE);
    CHECK(sendplan_choose(&p, true, false) == SENDPLAN_MEMORY);
    CHECK(sendplan_choose(&p, false, false) == SENDPLAN_SENDFILE);
}

/* What one fill may take so that, composed with its headers, it fits a pipe of `slots` pages:
 * the two pages a 9-byte header may touch, a page per page each file piece touches (an
 * unaligned 16 KiB frame touches five). */
TEST(sendplan_fill_len_counts_the_pipe_buffers_of_headers_and_pages)
{
    struct h2shape h;
    h2shape_make(&h, 4093);
    int fd = -1;
    uint64_t off = 0;
    /* 2 + 5 + 2 + 5 + 2 = 16: two frames, the third header fills the pipe. */
    CHECK_INT(sendplan_fill_len(&h.p, 16, 4096, &fd, &off), 2 * FRAME);
    CHECK(fd == h.fd && off == 4093);
    /* 17: a page of the third frame, up to its first page boundary. */
    CHECK_INT(sendplan_fill_len(&h.p, 17, 4096, &fd, &off), 2 * FRAME + 3);
    CHECK_INT(sendplan_fill_len(&h.p, 2, 4096, &fd, &off), 0); /* the header alone fills it */
    CHECK_INT(sendplan_fill_len(&h.p, 1000, 4096, &fd, &off), (uint64_t)FRAMES * FRAME);
    plan_advance(&h.p, 9 + 100); /* into the first frame: it continues from there */
    /* 4 pages (it now ends on a boundary) + 2 + 5 + 2, and 3 pages of the third frame. */
    CHECK_INT(sendplan_fill_len(&h.p, 16, 4096, &fd, &off), FRAME - 100 + FRAME + 3 * 4096 - 4093);
    CHECK_INT(off, 4093 + 100);
    free(h.file);
    close(h.fd);
}

/* The io_uring engine's walk (uring.c walk_fill, walk_compose, walk_next) with real pipes:
 * each fill (sendplan_fill_len into an empty pipe, as io-wq's splice does) is composed with
 * its headers into the other pipe, which trades places with it and drains to a destination
 * that takes little at a time. Pipes of 4, 16 and 256 pages, starts on and off page
 * boundaries: a fill must never leave bytes behind (-ENOSPC), and the bytes come out once
 * each, in order. */
static void recompose_walk(unsigned start, int pipe_bytes)
{
    int dst[2], a[2], b[2];
    CHECK(pipe2(dst, O_NONBLOCK) == 0);
    CHECK(fcntl(dst[0], F_SETPIPE_SZ, 4096) == 4096);
    CHECK(pipe2(a, 0) == 0 && pipe2(b, 0) == 0);
    fcntl(a[1], F_SETFL, O_NONBLOCK);
    fcntl(b[1], F_SETFL, O_NONBLOCK);
    CHECK_INT(fcntl(a[0], F_SETPIPE_SZ, pipe_bytes), pipe_bytes);
    CHECK_INT(fcntl(b[0], F_SETPIPE_SZ, pipe_bytes), pipe_bytes);
    int *slot = a, *scratch = b;
    struct h2shape h;
    h2shape_make(&h, start);

    unsigned char *got = malloc(h.total);
    size_t have = 0;
    uint32_t in_pipe = 0;
    int fills = 0, rc = 0;
    ssize_t n;
    while (!plan_done(&h.p)) {
        if (in_pipe == 0) {
            int fd;
            uint64_t off;
            uint64_t len = sendplan_fill_len(&h.p, (unsigned)pipe_bytes / 4096, 4096, &fd, &off);
            CHECK(len > 0);
            loff_t at = (loff_t)off;
            n = splice(fd, &at, slot[1], NULL, len, 0);
            CHECK(n > 0);
            uint32_t raw = (uint32_t)n;
            fills++;
            rc = sendplan_recompose(&h.p, slot[0], &raw, scratch[1], (uint32_t)pipe_bytes, &in_pipe,
                                    NULL);
            CHECK_INT(rc, 0);
            CHECK_INT(raw, 0);
            int *t = slot;
            slot = scratch;
            scratch = t;
            if (rc != 0)
                break;
        }
        rc = sendplan_drain(dst[1], &h.p, slot[0], &in_pipe);
        if (rc != 0 && rc != -EAGAIN)
            break;
        while (have < h.total && (n = read(dst[0], got + have, h.total - have)) > 0)
            have += (size_t)n;
    }
    CHECK_INT(rc, 0);
    CHECK_INT(in_pipe, 0);
    CHECK(fills >= (pipe_bytes > 65536 ? 1 : 5));
    while (have < h.total && (n = read(dst[0], got + have, h.total - have)) > 0)
        have += (size_t)n;
    h2shape_check_free(&h, got, have);
    free(got);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
    close(dst[0]);
    close(dst[1]);
}

TEST(sendplan_recompose_moves_each_fill_whole_through_a_second_pipe_in_order)
{
    recompose_walk(0, 16384);
    recompose_walk(4093, 16384);
    recompose_walk(5001, 65536);
    recompose_walk(4093, 1 << 20);
}
