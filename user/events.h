/* SPDX-License-Identifier: MIT */
/* The ring buffer's records, in: checked, recorded, dispatched (events.c). */
#ifndef CT_EVENTS_H
#define CT_EVENTS_H

#include <errno.h>
#include <stddef.h>

/*
 * The ring buffer's callback. It returns CT_EVENTS_YIELD after every CT_EVENTS_BATCH
 * records: libbpf then stops reading (that record is consumed), so that the main loop
 * runs its checks even while the ring never runs empty.
 */
#define CT_EVENTS_BATCH 65536
#define CT_EVENTS_YIELD (-EAGAIN)
int ct_events_handle(void *ctx, void *data, size_t len);

#endif
