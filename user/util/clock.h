/* SPDX-License-Identifier: MIT */
/* The one clock reader: nanoseconds of a POSIX clock. */
#ifndef CT_UTIL_CLOCK_H
#define CT_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

/*
 * CLOCK_MONOTONIC is the clock of every record (bpf_ktime_get_ns); CLOCK_REALTIME turns it
 * into wall-clock time.
 */
uint64_t ct_now_ns(clockid_t clk);

#endif
