/* compress: makes the compressed variants of cached files (gzip with libdeflate, Brotli, zstd,
 * and dcz: zstd against a dictionary, RFC 9842) and decides where: on the worker's loop when
 * the measured cost model says it takes under about a millisecond, else on the worker's
 * compressor thread, which wakes the loop through w->wake_fd when a variant is ready.
 * Must not: let the compressor thread touch the worker's cache, connections or counters: a job
 * carries copies of what the thread reads (the body's bytes or fd, the dictionary's location)
 * and its result goes into the cache on the worker's thread, in compress_collect.
 * Ownership: each worker owns at most one struct compressor, made when it starts or adopts a
 * configuration in which some site compresses (a reload may turn compression on) and kept
 * until it stops, and its thread (started on first use, joined by compress_free). A job in
 * flight holds a reference to its base fentry, taken and dropped on the worker's thread, so
 * the file's fd and bytes outlive the job (a derived body, a directory listing, is never
 * rewritten in place: a new rendering is a new entry, fcache_derive). */
#ifndef RT_COMPRESS_H
#define RT_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/accept.h"

struct runtime;
struct fentry;

/* The codings made here: the three of enum accept_coding, then the dictionary one. */
#define COMPRESS_DCZ ACCEPT_CODINGS
#define COMPRESS_CODINGS (ACCEPT_CODINGS + 1)

#define COMPRESS_LOOP_NS 1000000 /* the most compressing a loop turn may do, estimated */
#define DCZ_HEADER_LEN 40        /* RFC 9842 4: 8 magic bytes and the dictionary's SHA-256 */

struct compressor;

struct compressor *compress_new(void);
/* Stops and joins the thread; drops the references the unfinished jobs hold. */
void compress_free(struct runtime *w, struct compressor *c);

/*
 * Asks for the variant `coding` of base (for COMPRESS_DCZ: against the dictionary whose
 * SHA-256 is dict_hash, found among the files matching the --dictionary pattern `pattern` and
 * no larger than max_dict: the --compress-max of the site the request was routed to).
 * Returns 0 when the variant has just been made on the loop (fcache_variant_get now finds it),
 * -EINPROGRESS when it is being made off the loop (already, or queued now), -EAGAIN when the
 * queue is full, or another -errno. Never blocks and never compresses more than the cost model
 * allows on the loop.
 */
int compress_request(struct runtime *w, struct fentry *base, int coding,
                     const unsigned char *dict_hash, const char *pattern, size_t max_dict);

/* Moves finished jobs' variants into the worker's cache; called by worker_tick. */
void compress_collect(struct runtime *w);

/* The level used for a body of `size` bytes (chosen by measurement, see compress.c). */
int compress_level(int coding, uint64_t size);

/* The estimated CPU time, in nanoseconds, of compressing size bytes with coding at its level. */
uint64_t compress_cost_ns(int coding, uint64_t size);

/*
 * Compresses in[0..len) with coding at level into a malloc'd buffer (*out, *out_len). For
 * COMPRESS_DCZ, dict[0..dict_len) is the raw-content dictionary and dict_hash its SHA-256; the
 * output starts with the 40-byte dcz header. Returns 0 or -errno.
 */
int compress_encode(int coding, int level, const void *in, size_t len, const void *dict,
                    size_t dict_len, const unsigned char *dict_hash, char **out, size_t *out_len);

/* The tag a variant is cached under (fcache_variant_get): the coding's name, and for dcz the
 * dictionary hash after it. Returns its length. */
size_t compress_tag(char *tag, size_t cap, int coding, const unsigned char *dict_hash);

/* The Content-Encoding name: "br", "zstd", "gzip", "dcz". */
const char *compress_coding_name(int coding);

#endif
