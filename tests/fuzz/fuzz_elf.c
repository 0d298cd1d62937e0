// SPDX-License-Identifier: MIT
/* libFuzzer: the ELF symbol resolver on arbitrary bytes (a target's libraries are input). */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include "elf/elfsym.h"

static int count_sym(const struct ct_elf_sym *s, void *ctx)
{
	(*(int *)ctx)++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct ct_sym_want wants[] = {
	    {"MPI_Allreduce", false, false},
	    {"gloo::allreduce", true, false},
	    {"ompi_mpi_double", false, true},
	};
	struct ct_sym_found found[3];
	char path[64], err[256];
	struct ct_elf *e;
	uint64_t off;
	int fd = memfd_create("fuzz-elf", 0), n = 0;

	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	e = ct_elf_open(path, err, sizeof(err));
	if (e) {
		ct_elf_foreach_sym(e, count_sym, &n);
		ct_elf_resolve(e, wants, 3, found);
		ct_elf_vaddr_to_off(e, ct_elf_entry(e), &off);
		ct_elf_endbr_len(e, ct_elf_entry(e));
		ct_elf_base_vaddr(e);
		ct_elf_close(e);
	}
	close(fd);
	return 0;
}
