// SPDX-License-Identifier: MIT
/*
 * Output files are written to a fresh temporary beside the target, created
 * with O_EXCL|O_NOFOLLOW (a planted symlink is never followed), then renamed
 * over it: a reader never sees half a file, and an error leaves no empty one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "export/export.h"

FILE *ct_open_output(const char *path, char *tmp, size_t tmplen)
{
	int fd, n;
	FILE *f;

	n = snprintf(tmp, tmplen, "%s.tmp.%d", path, (int)getpid());
	if (n < 0 || (size_t)n >= tmplen) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return NULL;
	f = fdopen(fd, "w");
	if (!f) {
		int e = errno;

		close(fd);
		unlink(tmp);
		errno = e;
	}
	return f;
}

int ct_commit_output(FILE *f, const char *tmp, const char *path)
{
	int err = 0;

	if (fflush(f) || ferror(f))
		err = -errno ? -errno : -EIO;
	if (fclose(f) && !err)
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}
