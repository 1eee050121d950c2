/* sendplan: the synchronous, non-blocking send loops both engines share: memory segments by
 * sendmsg (MSG_MORE while more follows, so headers and file share packets), file ranges by
 * sendfile or from a splice pipe already filled with them, or a plan composed into a pipe
 * (headers written, file pages spliced in) and sent by one splice; partial sends recorded with
 * plan_advance; a kernel TLS control record (plan.tls_record) by sendmsg with its content type in
 * a TLS_SET_RECORD_TYPE cmsg.
 * Must not: block (the socket is non-blocking) or keep state: the plan's cursor is the state.
 * Ownership: the caller's plan and socket. */
#ifndef ENGINE_SENDPLAN_H
#define ENGINE_SENDPLAN_H

#include <stdint.h>
#include <sys/socket.h>

#include "core/plan.h"

/* Sends as much of p as the socket takes now. Returns 0 when the plan is done, -EAGAIN when
 * the socket is full (wait until writable and call again), or another -errno. An interleaved
 * plan (sendplan_interleaved) is sent with TCP_CORK set, so its many small sendfiles fill
 * whole packets. */
int sendplan_now(int fd, struct plan *p);

/*
 * The same, for a plan whose file bytes come out of a pipe: pipe_rd holds the next *in_pipe
 * bytes of p's file segments from the cursor on, in plan order (a fill of sendplan_file_run's
 * range). Memory segments go by sendmsg, file bytes by splice from the pipe (MSG_MORE and
 * SPLICE_F_MORE while more follows), so an HTTP/2 DATA sequence costs two short system calls
 * a frame and no disk read. Returns 0 when p is done, -EAGAIN when the socket is full,
 * -ENODATA when a file segment is next and the pipe is empty (fill it, call again), or
 * another -errno. *in_pipe counts what the socket took.
 */
int sendplan_pipe(int fd, struct plan *p, int pipe_rd, uint32_t *in_pipe);

/* True when two or more file segments are left (HTTP/2 DATA frames, multipart ranges): the
 * shape whose memory and file pieces alternate. */
bool sendplan_interleaved(const struct plan *p);

/* The bytes of the first file segment from the cursor on and of the file segments after it
 * that continue it (same fd, next offset; memory segments between them are skipped): what one
 * read into a pipe may take for sendplan_pipe. Sets *fd and *off to where it starts; 0 when no
 * file segment is left. */
uint64_t sendplan_file_run(const struct plan *p, int *fd, uint64_t *off);

/*
 * The part of sendplan_file_run's range that one fill of an empty pipe may take when the plan
 * is then composed from it (sendplan_recompose) into another empty pipe of `slots` buffers of
 * `page` bytes: what comes before and between the file bytes counted at the most a write can
 * take (its length in pages, plus one), file bytes a buffer per page they touch. Sets *fd and
 * *off as sendplan_file_run; 0 when no file segment is left or none fits.
 */
uint64_t sendplan_fill_len(const struct plan *p, unsigned slots, unsigned page, int *fd,
                           uint64_t *off);

/* Flags for sending the next n memory segments of p: MSG_NOSIGNAL, and MSG_MORE while more of
 * the plan follows (headers share packets with the file) or when the close is to carry the tail
 * (plan.fin_carries_tail). */
static inline int sendplan_flags(const struct plan *p, unsigned n)
{
    bool more = p->cur + n < p->nseg || p->fin_carries_tail;
    return MSG_NOSIGNAL | (more ? MSG_MORE : 0);
}

/* True when a segment from the cursor on is a file range. */
bool sendplan_has_file(const struct plan *p);

/* How the next part of a plan leaves. */
enum sendplan_path {
    SENDPLAN_MEMORY,   /* the memory segments from the cursor: one SEND or SENDMSG */
    SENDPLAN_SPLICE,   /* the file segment at the cursor, or an interleaved plan from its
                        * cursor on: through a pipe (an interleaved one by sendplan_pipe) */
    SENDPLAN_SENDFILE, /* the rest of the plan by sendplan_now (sendmsg + sendfile); also a
                        * kernel TLS control record (rare: a ticket, an alert, close_notify) */
};

/*
 * The engine's choice for p (not done). splice_mode: files go by splice in this worker (the
 * io_uring engine with --file-send splice); splice_ok: this response may still use a pipe (it
 * has not waited too long for one). The epoll engine passes false, false: everything by
 * sendplan_now. In splice mode memory before a file segment leaves on its own (MSG_MORE keeps
 * it in the same packets), unless the plan is interleaved (its memory goes with the pipe's
 * bytes); without it, a plan holding a file goes whole by sendplan_now.
 */
enum sendplan_path sendplan_choose(const struct plan *p, bool splice_mode, bool splice_ok);

/*
 * A pipe that holds one small run of bytes that repeats in plans (an HTTP/2 DATA frame's 9-byte
 * header, the same for every full frame of a stream), for the composing calls below to put in
 * their pipe by tee(2) instead of write(2): the pipe buffer's page is shared, not allocated
 * and filled per header (issue 30: bench/prof/framecost, composed 24.5 ms per 64 MiB by write,
 * 17.3 by tee, sendfile of the bare file 10.4). Nothing rewrites bytes a pipe or the socket
 * still refers to: a new template is written after the old one was read out, into a page of
 * its own. The composing calls keep len and bytes right; a failed call on it sets broken, and
 * they write as before.
 * Ownership: the engine's (one per worker, pipepool_template), which closes its pipe.
 */
#define SENDPLAN_TMPL_MAX 16
struct sendplan_tmpl {
    int fd[2];   /* read end, then write end, both non-blocking */
    uint8_t len; /* bytes it holds (0: none) */
    bool broken; /* a call on it failed: not used again */
    char bytes[SENDPLAN_TMPL_MAX];
};

/*
 * The same again, for an engine that may read files from its loop (epoll): the pipe (pipe_fd:
 * read end, then a non-blocking write end) holds the next *in_pipe bytes of p from the cursor,
 * headers and file bytes alike, and is refilled up to cap bytes as it empties (headers by
 * write, file ranges by splice) before one splice moves it to the socket: the socket sees a
 * system call per pipe-full, not two per DATA frame. Small memory segments that repeat go by
 * tee from t (NULL: none). Returns 0 when p is done, -EAGAIN when
 * the socket is full (the pipe keeps what it holds), -ENODATA when the pipe could take nothing
 * though p is not done (send the rest another way), or another -errno.
 */
int sendplan_composed(int fd, struct plan *p, const int pipe_fd[2], uint32_t cap, uint32_t *in_pipe,
                      struct sendplan_tmpl *t);

/*
 * Composes p into a pipe from another pipe: src_rd holds the next *src_left file bytes of p
 * from the cursor + *in_dst on (a fill of sendplan_fill_len's range); those and the memory
 * segments around them are appended in plan order to the pipe dst_wr (its write end set
 * O_NONBLOCK), up to cap bytes in it, repeating small ones by tee from t (NULL: none). Page
 * references move
 * between the pipes, so no disk is read and nothing is copied but the headers. Returns 0 when
 * src is empty (*src_left == 0), -ENOSPC when dst filled first, or another -errno. *in_dst
 * counts the bytes in dst (sendplan_drain's *in_pipe).
 */
int sendplan_recompose(struct plan *p, int src_rd, uint32_t *src_left, int dst_wr, uint32_t cap,
                       uint32_t *in_dst, struct sendplan_tmpl *t);

/* Sends what a composed pipe holds (pipe_rd: the next *in_pipe bytes of p from its cursor, in
 * order) by splice, SPLICE_F_MORE while more of p follows. 0 when the pipe is empty, -EAGAIN
 * when the socket is full, or another -errno. */
int sendplan_drain(int fd, struct plan *p, int pipe_rd, uint32_t *in_pipe);

#endif
