// SPDX-License-Identifier: MIT
/* Errors and files for devprof: bounded reads, all-or-nothing writes. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "devprof/devprof.h"

int devprof_errf(struct devprof_err *e, int code, const char *fmt, ...)
{
	va_list ap;

	if (e) {
		e->code = code;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}

int devprof_read_file(const char *path, uint64_t max, uint8_t **out, size_t *len,
		      struct devprof_err *err)
{
	struct stat st;
	uint8_t *buf;
	size_t got = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return devprof_errf(err, DEVPROF_E_IO, "cannot open %s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return devprof_errf(err, DEVPROF_E_IO, "%s is not a regular file", path);
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return devprof_errf(err, DEVPROF_E_IO,
				    "%s is %lld bytes, more than the %llu allowed", path,
				    (long long)st.st_size, (unsigned long long)max);
	}
	/* One spare byte keeps a NUL after text, which cJSON's length-bounded parse ignores. */
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return devprof_errf(err, DEVPROF_E_NOMEM, "out of memory reading %s", path);
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;

			free(buf);
			close(fd);
			return devprof_errf(err, DEVPROF_E_IO, "cannot read %s: %s", path,
					    strerror(e));
		}
		got += (size_t)n;
	}
	close(fd);
	buf[got] = 0;
	*out = buf;
	*len = got;
	return 0;
}

int devprof_write_file(const char *path, const void *data, size_t len, struct devprof_err *err)
{
	char tmp[4096];
	struct stat st;
	size_t off = 0;
	bool in_place;
	int fd;

	if (strcmp(path, "-") == 0) {
		if (fwrite(data, 1, len, stdout) != len || fflush(stdout))
			return devprof_errf(err, DEVPROF_E_IO, "cannot write to stdout");
		return 0;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= (int)sizeof(tmp))
		return devprof_errf(err, DEVPROF_E_IO, "output path too long: %s", path);
	/* A device or a FIFO (/dev/null, a pipe) is written in place, never renamed over. */
	in_place = !lstat(path, &st) && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode));
	if (in_place)
		tmp[0] = '\0';
	fd = in_place ? open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC) : mkstemp(tmp);
	if (fd < 0)
		return devprof_errf(err, DEVPROF_E_IO,
				    "cannot create a temporary file next to %s: %s", path,
				    strerror(errno));
	while (off < len) {
		ssize_t n = write(fd, (const char *)data + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto fail;
		off += (size_t)n;
	}
	if (in_place) {
		if (close(fd) < 0) {
			fd = -1;
			goto fail;
		}
		return 0;
	}
	if (fchmod(fd, 0644) < 0 || close(fd) < 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) < 0)
		goto fail;
	return 0;
fail : {
	int e = errno ? errno : EIO;

	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return devprof_errf(err, DEVPROF_E_IO, "cannot write %s: %s", path, strerror(e));
}
}

cJSON *devprof_parse_json(const uint8_t *data, size_t len, int code, const char *what,
			  struct devprof_err *err)
{
	const char *end = NULL;
	cJSON *j;

	j = cJSON_ParseWithLengthOpts((const char *)data, len, &end, 0);
	if (!j) {
		size_t at = end ? (size_t)(end - (const char *)data) : 0;

		devprof_errf(err, code, "%s is not valid JSON (error near byte %zu)", what, at);
		return NULL;
	}
	while (end && (size_t)(end - (const char *)data) < len &&
	       (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t'))
		end++;
	if (end && (size_t)(end - (const char *)data) < len) {
		devprof_errf(err, code, "%s has trailing data after the JSON value at byte %zu",
			     what, (size_t)(end - (const char *)data));
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}
