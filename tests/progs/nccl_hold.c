// SPDX-License-Identifier: MIT
/*
 * A process with NCCL mapped and nothing else to do: a target for `--dry-run -p PID`.
 * There is no GPU on the test machines, so it never calls NCCL; RTLD_LAZY keeps dlopen
 * from resolving anything it would not need.
 *
 *   nccl_hold [LIBPATH]     (default /usr/local/cuda/lib64/libnccl.so.2)
 *
 * Prints "ready" on stdout once the library is mapped, then sleeps until killed.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/usr/local/cuda/lib64/libnccl.so.2";
	void *lib = dlopen(path, RTLD_LAZY | RTLD_LOCAL);

	if (!lib) {
		fprintf(stderr, "nccl_hold: dlopen %s: %s\n", path, dlerror());
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
