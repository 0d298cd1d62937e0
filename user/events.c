// SPDX-License-Identifier: MIT
/*
 * The ring buffer's callback: each record is checked for its length, written to the
 * recording (--record), and handed on by type: calls to calls.c, process events (fork,
 * exec, exit, a library loaded) to targets.c. Nothing else happens here.
 */
#include "calls.h"
#include "events.h"
#include "record/record.h"
#include "records.h"
#include "session.h"
#include "targets.h"

_Static_assert(sizeof(struct ct_hdr) == 24, "ct_hdr layout");
_Static_assert(sizeof(struct ct_loc) == 8, "ct_loc layout");
_Static_assert(sizeof(struct ct_probe_spec) == 8 + 8 * CT_NVAL + 16, "ct_probe_spec layout");
_Static_assert(sizeof(struct ct_op_val) == 88, "ct_op_val layout");
_Static_assert(sizeof(struct ct_call_event) ==
		   24 + 16 + 8 * CT_NVAL + 8 + 88 * CT_PYS_GUESSES + 48 * CT_PY_MAX_FRAMES,
	       "ct_call_event layout");
_Static_assert(sizeof(struct ct_pyframe_raw) == 48, "ct_pyframe_raw layout");
_Static_assert(sizeof(struct ct_ret_event) == 48, "ct_ret_event layout");
_Static_assert(sizeof(struct ct_op_event) == 64, "ct_op_event layout");
_Static_assert(sizeof(struct ct_proc_event) == 48, "ct_proc_event layout");
_Static_assert(sizeof(struct ct_frame) == 40, "ct_frame layout");
_Static_assert(sizeof(struct ct_capture_event) == 32 + CT_CAP_REGIONS * (8 + CT_CAP_BYTES),
	       "ct_capture_event layout");
_Static_assert(sizeof(struct ct_pycode_val) == 48, "ct_pycode_val layout");
_Static_assert(sizeof(struct ct_spec_bpf) == 32, "ct_spec_bpf layout");

int ct_events_handle(void *ctx, void *data, size_t len)
{
	struct ct_session *s = ctx;
	const struct ct_hdr *h = data;
	const struct ct_call_event *call;

	if (len < sizeof(*h))
		return 0;
	if (s->rec) /* --record: the record as the kernel wrote it */
		ct_record_event(s->rec, data, len);
	s->events++;
	switch (h->type) {
	case CT_EV_CALL:
		if (ct_rec_call_ok(data, len) && (call = ct_calls_whole(s, data)))
			ct_calls_on_call(s, call, NULL);
		break;
	case CT_EV_RET:
		if (ct_rec_ret_ok(len))
			ct_calls_on_ret(s, data);
		break;
	case CT_EV_OP:
	case CT_EV_OPEXIT:
		if (ct_rec_op_ok(data, len))
			ct_calls_on_op(s, data);
		break;
	case CT_EV_DISPATCH:
		if (ct_rec_dispatch_ok(data, len))
			ct_calls_on_dispatch(s, data);
		break;
	case CT_EV_GRADFN:
		if (len >= CT_GRADFN_EVENT_SHORT)
			ct_calls_on_gradfn(s, data, len >= sizeof(struct ct_gradfn_event));
		break;
	case CT_EV_BACKWARD:
	case CT_EV_BACKWARD_END:
		ct_calls_on_backward(s, h);
		break;
	case CT_EV_UNSEEN:
		ct_calls_on_unseen(s, h);
		break;
	case CT_EV_CAPTURE:
		if (ct_rec_capture_ok(data, len))
			ct_calls_on_capture(s, data);
		break;
	case CT_EV_EXEC:
	case CT_EV_FORK:
	case CT_EV_EXIT:
	case CT_EV_DLOPEN:
		if (ct_rec_proc_ok(len))
			ct_targets_proc_event(s, data);
		break;
	}
	if (++s->batch_n >= CT_EVENTS_BATCH) {
		s->batch_n = 0;
		return CT_EVENTS_YIELD;
	}
	return 0;
}
