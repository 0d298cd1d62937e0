// SPDX-License-Identifier: MIT
/*
 * The decode and fuse jobs on files, one implementation for `commtrace-bpf devprof
 * decode|fuse` and for libcommtrace-devprof (the Python package): bounded reads, the
 * same checks, outputs that appear only complete.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "devprof/devprof.h"

static int write_json(const char *path, const cJSON *doc, int formatted, struct devprof_err *err)
{
	char *s = formatted ? cJSON_Print(doc) : cJSON_PrintUnformatted(doc);
	int rc;

	if (!s)
		return devprof_errf(err, DEVPROF_E_NOMEM, "out of memory printing JSON");
	rc = devprof_write_file(path, s, strlen(s), err);
	if (!rc && strcmp(path, "-") == 0)
		putchar('\n');
	free(s);
	return rc;
}

static int load_meta(const char *path, cJSON **meta, struct devprof_err *err)
{
	uint8_t *data;
	size_t len;
	int rc;

	rc = devprof_read_file(path, CT_DEVPROF_MAX_META, &data, &len, err);
	if (rc)
		return rc;
	*meta = devprof_parse_json(data, len, DEVPROF_E_META, path, err);
	free(data);
	if (!*meta)
		return DEVPROF_E_META;
	rc = devprof_meta_check(*meta, path, err);
	if (rc) {
		cJSON_Delete(*meta);
		*meta = NULL;
	}
	return rc;
}

/*
 * JSON (from 'devprof decode') starts with '{' after optional whitespace; anything else
 * is decoded as a buffer, so a damaged buffer reports its real error class.
 */
static int load_device(const char *path, const struct devprof_export_opts *eo, cJSON **doc,
		       struct devprof_err *err)
{
	uint8_t *data;
	size_t len, i = 0;
	int rc;

	rc = devprof_read_file(path, DEVPROF_MAX_FILE, &data, &len, err);
	if (rc)
		return rc;
	while (i < len && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t'))
		i++;
	if (i < len && data[i] == '{')
		*doc = devprof_parse_json(data, len, DEVPROF_E_DEVJSON, path, err);
	else
		*doc = devprof_build_trace(data, len, eo, err);
	free(data);
	return *doc ? 0 : err->code;
}

/* The export options of a job, with its --meta file loaded (*meta: free it). */
static int job_export_opts(const struct devprof_job *j, struct devprof_export_opts *eo,
			   cJSON **meta, struct devprof_err *err)
{
	int rc;

	devprof_export_opts_init(eo);
	eo->display = j->display;
	eo->pid_base = j->pid_base;
	*meta = NULL;
	if (!j->meta)
		return 0;
	rc = load_meta(j->meta, meta, err);
	eo->meta = *meta;
	eo->meta_source = j->meta;
	return rc;
}

void devprof_job_init(struct devprof_job *j)
{
	memset(j, 0, sizeof(*j));
	j->pid_base = 1;
}

int devprof_decode_files(const struct devprof_job *j, struct devprof_err *err)
{
	struct devprof_export_opts eo;
	cJSON *meta, *doc = NULL;
	uint8_t *data = NULL;
	size_t len;
	int rc;

	rc = job_export_opts(j, &eo, &meta, err);
	if (!rc)
		rc = devprof_read_file(j->device, DEVPROF_MAX_FILE, &data, &len, err);
	if (!rc) {
		doc = devprof_build_trace(data, len, &eo, err);
		rc = doc ? write_json(j->out, doc, 1, err) : err->code;
	}
	free(data);
	cJSON_Delete(doc);
	cJSON_Delete(meta);
	return rc;
}

int devprof_fuse_files(const struct devprof_job *j, struct devprof_err *err)
{
	struct devprof_export_opts eo;
	cJSON *meta, *dev = NULL, *prof = NULL, *out = NULL;
	uint8_t *data = NULL;
	size_t len;
	int rc;

	rc = job_export_opts(j, &eo, &meta, err);
	if (!rc)
		rc = load_device(j->device, &eo, &dev, err);
	if (!rc)
		rc = devprof_read_file(j->profiler, DEVPROF_MAX_TRACE, &data, &len, err);
	if (!rc) {
		prof = devprof_parse_json(data, len, DEVPROF_E_TRACE, j->profiler, err);
		rc = prof ? 0 : err->code;
	}
	if (!rc) {
		out = devprof_fuse(dev, prof, &j->fuse, err);
		if (out)
			prof = NULL; /* consumed by out */
		rc = out ? write_json(j->out, out, 0, err) : err->code;
	}
	free(data);
	cJSON_Delete(meta);
	cJSON_Delete(dev);
	cJSON_Delete(prof);
	cJSON_Delete(out);
	return rc;
}
