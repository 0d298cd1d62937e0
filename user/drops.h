/* SPDX-License-Identifier: MIT */
/*
 * What was lost, counted (README "Bounded and safe"): the kernel's per-CPU drop counters
 * (enum ct_drop, read by attach.c) and user space's own. Every report names them the same.
 */
#ifndef CT_DROPS_H
#define CT_DROPS_H

#include <stdint.h>

struct ct_session;

/* Total drops of all kinds: records lost. */
uint64_t ct_session_drops(const struct ct_session *s);
/* The name of a drop kind (enum ct_drop) in the JSON, the Chrome metadata and the metrics. */
const char *ct_drop_name(int kind);
/* Calls lost (their entry record): calls made = calls counted + this. */
uint64_t ct_session_dropped_calls(const struct ct_session *s);

#endif
