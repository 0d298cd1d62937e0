// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the fusion input parser. Input: DEVICE_JSON NUL PROFILER_JSON, or
 * PROFILER_JSON alone, fused with the generator's "multi" device trace. Every
 * combination of host alignment and in-order alignment runs on every input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "devprof/devprof.h"

static cJSON *builtin_device(void)
{
	static cJSON *doc;
	struct devprof_err err;
	uint8_t *buf = NULL;
	size_t len = 0;

	if (!doc && !devprof_gen("multi", DEVPROF_CORRUPT_NONE, &buf, &len, &err)) {
		doc = devprof_build_trace(buf, len, NULL, &err);
		free(buf);
	}
	return doc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	struct devprof_fuse_opts o = {0};
	struct devprof_err err;
	cJSON *dev = NULL, *prof, *out;
	const cJSON *d;

	if (nul) {
		dev = devprof_parse_json(data, (size_t)(nul - data), DEVPROF_E_DEVJSON, "device",
					 &err);
		if (!dev)
			return 0;
		d = dev;
		size -= (size_t)(nul - data) + 1;
		data = nul + 1;
	} else {
		d = builtin_device();
	}
	for (int mode = 0; d && mode < 4; mode++) {
		o.allow_host_align = mode & 1;
		o.align_in_order = mode >> 1;
		prof = devprof_parse_json(data, size, DEVPROF_E_TRACE, "profiler", &err);
		if (!prof)
			break;
		out = devprof_fuse(d, prof, &o, &err);
		/* On success the profiler tree belongs to out. */
		cJSON_Delete(out ? out : prof);
	}
	cJSON_Delete(dev);
	return 0;
}
