/* SPDX-License-Identifier: MIT */
/*
 * What a well-formed record of each type is (include/commtrace/abi.h): the length checks of
 * the live reader (events.c) and of replay (record/replay.c), one copy.
 */
#ifndef CT_RECORDS_H
#define CT_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include "commtrace/abi.h"

static inline bool ct_rec_call_ok(const struct ct_call_event *ev, size_t len)
{
	return len >= CT_CALL_EVENT_SIZE(0) && ev->py.nframes + ev->py.nsame <= CT_PY_MAX_FRAMES &&
	       len >= CT_CALL_EVENT_SIZE(ev->py.nframes);
}

static inline bool ct_rec_ret_ok(size_t len)
{
	return len >= sizeof(struct ct_ret_event);
}

static inline bool ct_rec_op_ok(const struct ct_op_event *ev, size_t len)
{
	return len >= sizeof(*ev) && (!ev->has_vals || len >= sizeof(struct ct_op_vals_event));
}

static inline bool ct_rec_dispatch_ok(const struct ct_dispatch_event *ev, size_t len)
{
	return len >= CT_DISPATCH_EVENT_SIZE(0) && ev->py.nframes <= CT_PY_MAX_FRAMES &&
	       len >= CT_DISPATCH_EVENT_SIZE(ev->py.nframes);
}

static inline bool ct_rec_capture_ok(const struct ct_capture_event *ev, size_t len)
{
	return len >= sizeof(*ev) && ev->n <= CT_CAP_REGIONS;
}

static inline bool ct_rec_proc_ok(size_t len)
{
	return len >= sizeof(struct ct_proc_event);
}

#endif
