// SPDX-License-Identifier: MIT
/* The end of a session, live or replayed: the same reports in the same order. */
#include <stdio.h>
#include <string.h>
#include "diag/diag.h"
#include "export/export.h"

int ct_export_final(struct ct_session *s)
{
	const struct ct_opts *o = s->opts;
	int rc = 0, err;

	if (!o->quiet)
		ct_export_summary(s, stderr, true);
	if (!o->quiet && s->diag)
		ct_diag_print(s->diag, stderr, o->verbose >= 1);
	if (o->table_path) {
		err = ct_write_table(s, o->table_path, o->noise_level);
		if (err) {
			fprintf(stderr, "commtrace-bpf: writing %s: %s\n", o->table_path,
				strerror(-err));
			rc = -1;
		}
	}
	if (o->json_path) {
		err = ct_export_json(s, o->json_path);
		if (err) {
			fprintf(stderr, "commtrace-bpf: writing %s: %s\n", o->json_path,
				strerror(-err));
			rc = -1;
		}
	}
	return rc;
}
