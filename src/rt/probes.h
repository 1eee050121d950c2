/* probes: the USDT probes bpftrace (or perf, or SystemTap) attaches to, provider "ringhttpd".
 * Must not: cost anything when nothing is attached: each probe is one nop and a note in the
 * ELF .note.stapsdt section (<sys/sdt.h>, a header only: no library, no runtime dependency);
 * arguments are values already in registers or memory, never computed for the probe alone.
 * Ownership: none; the probe list and argument meanings below are the interface scripts use:
 *   conn_accepted  (worker, slot, fd)
 *   conn_closed    (worker, slot, reason: 0 done 1 client 2 timeout 3 error 4 drain)
 *   request_start  (worker, slot, method char*, method length, target char*, target length)
 *   request_done   (worker, slot, status, bytes sent, duration us, method: enum http_method)
 *   cache_hit      (path char*, length)   cache_miss (path char*, length): a file-cache look-up
 *   file_send_start(worker, slot, bytes)  file_send_done (worker, slot, error: 0 or -errno)
 *   loop_turn      (worker, completions, enters) */
#ifndef RT_PROBES_H
#define RT_PROBES_H

#define SDT_USE_VARIADIC 1
#include <sys/sdt.h>

#define PROBE(name, ...) STAP_PROBEV(ringhttpd, name, __VA_ARGS__)

#endif
