// SPDX-License-Identifier: MIT
/*
 * Output files are written to a fresh temporary beside the target, created
 * with O_EXCL|O_NOFOLLOW (a planted symlink is never followed), then renamed
 * over it: a reader never sees half a file, and an error leaves no empty one.
 * A target that is a character device or a FIFO (/dev/null, /dev/stdout, a pipe
 * to another tool) is written in place: renaming over it would replace the
 * device node with a file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/output.h"

FILE *ct_open_output(const char *path, char *tmp, size_t tmplen)
{
	struct stat st;
	int fd, n;
	FILE *f;

	if (!lstat(path, &st) && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
		if (tmplen)
			tmp[0] = '\0'; /* written in place: nothing to rename */
		fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return NULL;
		f = fdopen(fd, "w");
		if (!f)
			close(fd);
		return f;
	}
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
	if (!tmp[0]) /* a device or a FIFO, written in place */
		return err;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}
