// SPDX-License-Identifier: MIT
/*
 * libFuzzer: the text parsers of untrusted input: /proc/PID/maps lines, pid lists,
 * profile rules (--profile files) and C++ demangling of symbol names.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "elf/elfsym.h"
#include "python/profiles.h"
#include "target/proc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), err[256], *d;
	struct ct_map m;
	struct ct_rule r;
	pid_t pids[8];

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = 0;
	ct_maps_parse_line(s, &m);
	ct_parse_pid_list(s, pids, 8);
	ct_profiles_parse_line(s, &r, err, sizeof(err));
	d = ct_demangle_qualified(s);
	free(d);
	free(s);
	return 0;
}
