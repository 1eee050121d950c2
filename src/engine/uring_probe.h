/* uring_probe: what io_uring offers on this kernel, probed once per process into struct
 * engine_caps (uring_probe, declared in engine/engine.h), and the ring setup the probe and the
 * workers share. Must not: run per worker or after the workers start; keep state.
 * Ownership: none; the caps it fills are the caller's. */
#ifndef ENGINE_URING_PROBE_H
#define ENGINE_URING_PROBE_H

/* A worker's ring, which the probe sets up exactly before any worker does. */
#define SQ_ENTRIES 1024
#define CQ_ENTRIES 16384

/* The io_uring_setup flags for a CAPS_SETUP_* mode (caps.setup). */
unsigned uring_setup_flags(unsigned caps_setup);

#endif
