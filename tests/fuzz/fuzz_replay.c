// SPDX-License-Identifier: MIT
/*
 * libFuzzer: `commtrace-bpf replay FILE`, whose file is untrusted input: the header
 * checks, the framing, and every record through the live event path
 * (ct_events_handle: calls, returns, process events) and the text exporters.
 *
 * An input whose first byte is odd is framed records after a valid header (this
 * build's catalog), so that the fuzzer reaches the event path at once; otherwise it
 * is the whole file.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commtrace/record.h"
#include "events.h"
#include "export/export.h"
#include "record/record.h"
#include "record/replay.h"
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ct_rec_header h = ct_record_header();
	struct ct_opts o = {0};
	struct ct_session s = {.opts = &o};
	struct ct_replay_stats st;
	char err[512], *buf;
	size_t len = size;
	FILE *f, *out;

	if (!size)
		return 0;
	buf = malloc(sizeof(h) + size);
	if (!buf)
		return 0;
	if (data[0] & 1) {
		memcpy(buf, &h, sizeof(h));
		memcpy(buf + sizeof(h), data + 1, size - 1);
		len = sizeof(h) + size - 1;
	} else {
		memcpy(buf, data, size);
	}
	f = fmemopen(buf, len, "r");
	out = fopen("/dev/null", "w");
	if (f && out && ct_replay_file(&s, f, &st, err, sizeof(err)) == 0) {
		ct_export_summary(&s, out, true);
		ct_export_table(&s, out, 2);
	}
	if (f)
		fclose(f);
	if (out)
		fclose(out);
	ct_session_free(&s);
	free(buf);
	return 0;
}
