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

/* Splices all n bytes of the pipe to the socket. */
static void drain(int pipe_rd, int sock, size_t n)
{
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

static void run(const char *method, int file, size_t size, int sock, int pipe_fd[2])
{
    static char buf[CHUNK + CHUNK / FRAME * HDR];
    static struct iovec iov[2 * CHUNK / FRAME];
    int tmpl[2] = {-1, -1};
    char *map = NULL;
    if (!strcmp(method, "tee")) {
        need(pipe(tmpl) == 0 && write(tmpl[1], header, HDR) == HDR, "template pipe");
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
            /* A header page of its own per round, unmapped after: the pipe and then TCP hold
             * references to it, so nothing rewrites what they will send. */
            char *hp = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            need(hp != MAP_FAILED, "mmap header page");
            memcpy(hp, header, HDR);
            int n = frames_iov(iov, hp, map + off, len), at = 0;
            size_t in = len + (size_t)n / 2 * HDR;
            while (at < n) {
                ssize_t k = vmsplice(pipe_fd[1], iov + at, (unsigned long)(n - at), 0);
                need(k > 0, "vmsplice");
                for (; at < n && (size_t)k >= iov[at].iov_len; at++)
                    k -= (ssize_t)iov[at].iov_len;
                if (k)
                    iov[at].iov_base = (char *)iov[at].iov_base + k, iov[at].iov_len -= (size_t)k;
            }
            munmap(hp, 4096);
            drain(pipe_fd[0], sock, in);
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
    static const char *methods[] = {"sendfile", "composed", "tee",     "preadv",
                                    "mmap",     "vmsplice", "perframe"};
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
            run(methods[m], file, size, srv, pipe_fd);
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
