/* framecost: what the kernel charges a sender for a file sent as HTTP/2 DATA frames (a 9-byte
 * header before every 16 KiB of file) over loopback TCP, by each way of putting the headers
 * between the file's bytes, against sendfile of the bare file (HTTP/1.1's cost). Issue 30
 * asked whether a hand-off other than ringhttpd's (the file composed in a pipe: a header
 * write and a file splice per frame, one splice of the pipe to the socket) gets h2c within 3%
 * of HTTP/1.1; this measures the candidates without the server around them.
 *
 *   cc -O2 -o /tmp/framecost bench/prof/framecost.c -lpthread
 *   /tmp/framecost FILE [ROUNDS]      e.g. a 64 MiB file, 7 rounds: the best round of each
 *
 * The sender runs on CPU 0 and is timed by its thread CPU clock (user + system, the loopback
 * receive path included, as it runs in the sender's system call); a reader thread on CPU 1
 * drains the socket. Methods:
 *   sendfile   the file alone by sendfile (no frames): the yardstick
 *   composed   per frame: write(header) + splice(file -> pipe); one splice(pipe -> socket) per
 *              256 KiB (ringhttpd's epoll engine; io_uring's differs only in the fill)
 *   tee        as composed, the header by tee() from a pipe holding it (no page allocated and
 *              nothing copied per header)
 *   preadv     preadv of 256 KiB into a buffer with a 9-byte gap before each 16 KiB, one send
 *              (h2o's pread + write, the file copied twice)
 *   mmap       the file mapped; one sendmsg of [header, mapped 16 KiB] x 16 (copied once)
 *   vmsplice   the file mapped; vmsplice of [header, mapped 16 KiB] x 16 into the pipe, one
 *              splice out (zero copy; headers must stay unchanged until TCP is done with them)
 *   vmsbatch   as vmsplice, but the mapping made once and kept across rounds (as a server would
 *              keep one per file version) and 48 frames a call (what a 1 MiB pipe holds)
 *   splice1m   no frames: splice(file -> pipe) and out by 1 MiB (ringhttpd's HTTP/1.1 way)
 * FRAMECOST_FILL_ONLY=1 splices each pipe to /dev/null instead of the socket: what composing
 * the pipe costs without TCP (sendfile, mmap, preadv and perframe still go to the socket).
 *   perframe   per frame: send(header, MSG_MORE) + sendfile(16 KiB)
 * Exit 1 on any short or failed call: each method must move the whole file.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define FRAME 16384
#define CHUNK (256 * 1024) /* file bytes per round of a batched method */
#define HDR 9
#define BATCH 48 /* frames a 1 MiB pipe holds: 5 buffers each (the header and 4 pages) */

static const char header[HDR] = {0, 0x40, 0, 0, 0, 0, 0, 0, 1}; /* DATA, 16 KiB, stream 1 */

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void need(int ok, const char *what)
{
    if (!ok) {
        perror(what);
        exit(1);
    }
}

static void *reader(void *arg)
{
    static char buf[1 << 20];
    pin(1);
    while (read(*(int *)arg, buf, sizeof(buf)) > 0)
        ;
    return NULL;
}

static double thread_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int fill_only = -1; /* /dev/null under FRAMECOST_FILL_ONLY, else -1 */

/* Splices all n bytes of the pipe to the socket. */
static void drain(int pipe_rd, int sock, size_t n)
{
    if (fill_only >= 0)
        sock = fill_only;
    while (n) {
        ssize_t k = splice(pipe_rd, NULL, sock, NULL, n, SPLICE_F_MORE);
        need(k > 0, "splice pipe -> socket");
        n -= (size_t)k;
    }
}

static void send_all(int sock, const char *p, size_t n)
{
    while (n) {
        ssize_t k = send(sock, p, n, 0);
        need(k > 0, "send");
        p += k, n -= (size_t)k;
    }
}

/* The frames of file[off, off + len) as an iovec [header, 16 KiB]...; returns its length. */
static int frames_iov(struct iovec *iov, const char *hdr, const char *data, size_t len)
{
    int n = 0;
    for (size_t k = 0; k < len; k += FRAME) {
        iov[n++] = (struct iovec){(void *)hdr, HDR};
        iov[n++] = (struct iovec){(void *)(data + k), len - k < FRAME ? len - k : FRAME};
    }
    return n;
}

/* vmsplice of the frames of data[0, len) into the pipe, then out to sock. A header page of its
 * own per call, unmapped after: the pipe and then TCP hold references to it, so nothing
 * rewrites what they will send. */
static void vmsplice_frames(int pipe_fd[2], int sock, const char *data, size_t len)
{
    static struct iovec v[2 * BATCH];
    char *hp = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    need(hp != MAP_FAILED, "mmap header page");
    memcpy(hp, header, HDR);
    int n = frames_iov(v, hp, data, len), at = 0;
    size_t in = len + (size_t)n / 2 * HDR;
    while (at < n) {
        ssize_t k = vmsplice(pipe_fd[1], v + at, (unsigned long)(n - at), 0);
        need(k > 0, "vmsplice");
        for (; at < n && (size_t)k >= v[at].iov_len; at++)
            k -= (ssize_t)v[at].iov_len;
        if (k)
            v[at].iov_base = (char *)v[at].iov_base + k, v[at].iov_len -= (size_t)k;
    }
    munmap(hp, 4096);
    drain(pipe_fd[0], sock, in);
}

static void run(const char *method, int file, size_t size, int sock, int pipe_fd[2])
{
    static char buf[CHUNK + CHUNK / FRAME * HDR];
    static struct iovec iov[2 * CHUNK / FRAME];
    int tmpl[2] = {-1, -1};
    char *map = NULL;
    if (!strcmp(method, "tee")) {
        need(pipe(tmpl) == 0 && write(tmpl[1], header, HDR) == HDR, "template pipe");
    } else if (!strcmp(method, "vmsbatch")) {
        static char *kept; /* one file per run of the program */
        if (!kept) {
            kept = mmap(NULL, size, PROT_READ, MAP_SHARED | MAP_POPULATE, file, 0);
            need(kept != MAP_FAILED, "mmap");
        }
        for (size_t off = 0; off < size;) {
            size_t len = size - off < BATCH * FRAME ? size - off : BATCH * FRAME;
            vmsplice_frames(pipe_fd, sock, kept + off, len);
            off += len;
        }
        return;
    } else if (!strcmp(method, "splice1m")) {
        for (size_t off = 0; off < size;) {
            loff_t at = (loff_t)off;
            ssize_t d = splice(file, &at, pipe_fd[1], NULL, 1 << 20, 0);
            need(d > 0, "splice file -> pipe");
            drain(pipe_fd[0], sock, (size_t)d);
            off += (size_t)d;
        }
        return;
    } else if (!strcmp(method, "mmap") || !strcmp(method, "vmsplice")) {
        map = mmap(NULL, size, PROT_READ, MAP_SHARED, file, 0);
        need(map != MAP_FAILED, "mmap");
    }
    for (size_t off = 0; off < size;) {
        size_t len = size - off < CHUNK ? size - off : CHUNK;
        if (!strcmp(method, "sendfile")) {
            off_t o = (off_t)off;
            ssize_t k = sendfile(sock, file, &o, size - off);
            need(k > 0, "sendfile");
            off += (size_t)k;
            continue;
        }
        if (!strcmp(method, "composed") || !strcmp(method, "tee")) {
            size_t in = 0;
            for (size_t k = 0; k < len; k += FRAME) {
                ssize_t h = tmpl[0] >= 0 ? tee(tmpl[0], pipe_fd[1], HDR, 0)
                                         : write(pipe_fd[1], header, HDR);
                loff_t at = (loff_t)(off + k);
                size_t want = len - k < FRAME ? len - k : FRAME;
                ssize_t d = splice(file, &at, pipe_fd[1], NULL, want, 0);
                need(h == HDR && d == (ssize_t)want, "compose");
                in += HDR + want;
            }
            drain(pipe_fd[0], sock, in);
        } else if (!strcmp(method, "preadv")) {
            int n = 0;
            size_t at = 0;
            for (size_t k = 0; k < len; k += FRAME) {
                size_t want = len - k < FRAME ? len - k : FRAME;
                memcpy(buf + at, header, HDR);
                iov[n++] = (struct iovec){buf + at + HDR, want};
                at += HDR + want;
            }
            need(preadv(file, iov, n, (off_t)off) == (ssize_t)len, "preadv");
            send_all(sock, buf, at);
        } else if (!strcmp(method, "mmap")) {
            struct msghdr msg = {.msg_iov = iov};
            msg.msg_iovlen = (size_t)frames_iov(iov, header, map + off, len);
            ssize_t want = (ssize_t)(len + msg.msg_iovlen / 2 * HDR);
            need(sendmsg(sock, &msg, 0) == want, "sendmsg");
        } else if (!strcmp(method, "vmsplice")) {
            vmsplice_frames(pipe_fd, sock, map + off, len);
        } else if (!strcmp(method, "perframe")) {
            for (size_t k = 0; k < len; k += FRAME) {
                off_t o = (off_t)(off + k);
                size_t want = len - k < FRAME ? len - k : FRAME;
                need(send(sock, header, HDR, MSG_MORE) == HDR, "send header");
                need(sendfile(sock, file, &o, want) == (ssize_t)want, "sendfile frame");
            }
        } else {
            fprintf(stderr, "framecost: no method %s\n", method);
            exit(2);
        }
        off += len;
    }
    if (map)
        munmap(map, size);
    if (tmpl[0] >= 0)
        close(tmpl[0]), close(tmpl[1]);
}

int main(int argc, char **argv)
{
    static const char *methods[] = {"sendfile", "splice1m", "composed", "tee",     "preadv",
                                    "mmap",     "vmsplice", "vmsbatch", "perframe"};
    enum { NMETHODS = sizeof(methods) / sizeof(methods[0]) };
    if (argc < 2) {
        fprintf(stderr, "usage: framecost FILE [ROUNDS]\n");
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 7;
    int file = open(argv[1], O_RDONLY);
    need(file >= 0, argv[1]);
    size_t size = (size_t)lseek(file, 0, SEEK_END);
    pin(0);
    int lsn = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t alen = sizeof(addr);
    need(lsn >= 0 && bind(lsn, (void *)&addr, sizeof(addr)) == 0 && listen(lsn, 1) == 0 &&
             getsockname(lsn, (void *)&addr, &alen) == 0,
         "listen");
    double best[NMETHODS];
    for (int m = 0; m < NMETHODS; m++)
        best[m] = 1e30;
    for (int r = 0; r < rounds; r++) {
        for (int m = 0; m < NMETHODS; m++) { /* interleaved: the load changes under all alike */
            int cli = socket(AF_INET, SOCK_STREAM, 0);
            need(cli >= 0 && connect(cli, (void *)&addr, sizeof(addr)) == 0, "connect");
            int srv = accept(lsn, NULL, NULL);
            int pipe_fd[2];
            need(srv >= 0 && pipe(pipe_fd) == 0, "accept");
            fcntl(pipe_fd[1], F_SETPIPE_SZ, 1 << 20);
            pthread_t t;
            pthread_create(&t, NULL, reader, &cli);
            double t0 = thread_ms();
            fill_only = getenv("FRAMECOST_FILL_ONLY") ? open("/dev/null", O_WRONLY) : -1;
            run(methods[m], file, size, srv, pipe_fd);
            if (fill_only >= 0)
                close(fill_only);
            double ms = thread_ms() - t0;
            shutdown(srv, SHUT_WR);
            pthread_join(t, NULL);
            close(srv), close(cli), close(pipe_fd[0]), close(pipe_fd[1]);
            if (ms < best[m])
                best[m] = ms;
        }
    }
    printf("framecost: %zu bytes, %zu frames of %d, best of %d rounds, sender CPU:\n", size,
           (size + FRAME - 1) / FRAME, FRAME, rounds);
    for (int m = 0; m < NMETHODS; m++)
        printf("  %-9s %7.2f ms  %.2f x sendfile\n", methods[m], best[m], best[m] / best[0]);
    return 0;
}
