// SPDX-License-Identifier: MIT
/* Drop accounting: what was lost, by kind, for every report and the live notices. */
#include "drops.h"
#include "session.h"

uint64_t ct_session_dropped_calls(const struct ct_session *s)
{
	/* Calls made = total_counts + this, exactly (tests/integration/test_events_rate.py). */
	return s->drops[CT_DROP_RINGBUF] + s->drops[CT_DROP_THREADS] + s->dropped_user;
}

const char *ct_drop_name(int kind)
{
	static const char *const names[CT_DROP_MAX] = {
	    [CT_DROP_RINGBUF] = "ringbuf_full",
	    [CT_DROP_THREADS] = "thread_table_full",
	    [CT_DROP_DEPTH] = "nesting_too_deep",
	    [CT_DROP_UNPAIRED] = "unpaired_returns",
	    [CT_DROP_READ] = "unreadable_args",
	    [CT_DROP_RINGBUF_RET] = "returns_lost",
	    [CT_DROP_RINGBUF_PROC] = "process_events_lost",
	    [CT_DROP_OPS] = "op_records_lost",
	    [CT_DROP_OPS_DEPTH] = "ops_nesting_too_deep",
	};

	return kind >= 0 && kind < CT_DROP_MAX && names[kind] ? names[kind] : "unnamed";
}

uint64_t ct_session_drops(const struct ct_session *s)
{
	/* Anomalies that lose no event (unpaired returns, unreadable args) are not drops. */
	return ct_session_dropped_calls(s) + s->drops[CT_DROP_RINGBUF_RET] +
	       s->drops[CT_DROP_RINGBUF_PROC] + s->drops[CT_DROP_OPS];
}
