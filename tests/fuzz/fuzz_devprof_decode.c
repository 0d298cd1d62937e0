// SPDX-License-Identifier: MIT
/* libFuzzer target: arbitrary bytes as a device profile buffer, decoded both ways. */
#include <stdint.h>
#include <stddef.h>
#include "devprof/devprof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct devprof_export_opts o;
	struct devprof_err err;
	struct devprof_file f;
	cJSON *doc;
	char *s;

	if (!devprof_parse(data, size, &f, &err))
		devprof_file_free(&f);
	devprof_export_opts_init(&o);
	o.display = size & 1 ? DEVPROF_DISPLAY_FULL : DEVPROF_DISPLAY_STAGE;
	doc = devprof_build_trace(data, size, &o, &err);
	if (doc) {
		s = cJSON_PrintUnformatted(doc);
		cJSON_free(s);
		cJSON_Delete(doc);
	}
	return 0;
}
