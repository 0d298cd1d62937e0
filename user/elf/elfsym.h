/* SPDX-License-Identifier: MIT */
/*
 * ELF symbol resolution with libbpf's rules: .dynsym first, then .symtab;
 * functions only (STT_FUNC, STT_GNU_IFUNC); "name@VERSION" and "name@@VERSION"
 * match "name"; a global definition wins over a weak one; aliases at one address
 * are one function. C++ functions are matched on their demangled qualified name
 * ("c10d::ProcessGroupGloo::allreduce"), without demangling every symbol of a
 * 200 MB library: a cheap substring test on the mangled name comes first.
 */
#ifndef CT_ELF_ELFSYM_H
#define CT_ELF_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ct_elf;

struct ct_elf_sym {
	const char *name;    /* as stored, version suffix stripped; valid during the callback */
	const char *version; /* "GLIBC_2.2.5", or NULL */
	uint64_t addr;	     /* st_value */
	uint64_t size;
	uint8_t type; /* STT_* */
	uint8_t bind; /* STB_* */
	bool dynsym;  /* from .dynsym (else .symtab) */
};

/* Return non-zero from the callback to stop the walk (that value is returned). */
typedef int (*ct_elf_sym_cb)(const struct ct_elf_sym *sym, void *ctx);

/* Open an ELF file; on failure NULL and a message in err. */
struct ct_elf *ct_elf_open(const char *path, char *err, size_t errlen);
void ct_elf_close(struct ct_elf *e);

/* Every symbol of .dynsym, then of .symtab (undefined ones skipped). */
int ct_elf_foreach_sym(struct ct_elf *e, ct_elf_sym_cb cb, void *ctx);

/* File offset of a virtual address, through the PT_LOAD segments (what uprobes take). */
int ct_elf_vaddr_to_off(struct ct_elf *e, uint64_t vaddr, uint64_t *off);

/* Copy len bytes of the file image at a virtual address (e.g. a function's first bytes). */
int ct_elf_read_vaddr(struct ct_elf *e, uint64_t vaddr, void *buf, size_t len);

/*
 * The virtual address that file offset 0 has (0 for shared objects and PIEs,
 * 0x400000 for a classic executable): runtime = mapping start of offset 0
 * - this + st_value, also for .bss objects that no file offset covers.
 */
uint64_t ct_elf_base_vaddr(const struct ct_elf *e);

/* The entry point (e_entry), a virtual address. */
uint64_t ct_elf_entry(const struct ct_elf *e);

/* ET_DYN (shared object or PIE) or ET_EXEC. */
bool ct_elf_is_dyn(const struct ct_elf *e);

/* Demangled C++ name without parameters ("ns::Cls::fn"), malloc'ed; NULL if not C++. */
char *ct_demangle_qualified(const char *mangled);
/* Full demangled name with parameters, malloc'ed; NULL if not C++, invalid, or if its
 * text would pass CT_DEMANGLE_MAX bytes (back-references make it exponential). */
#define CT_DEMANGLE_MAX (256u << 10)
char *ct_demangle(const char *mangled);
/* The reduction ct_demangle_qualified applies to an already demangled name; malloc'ed. */
char *ct_demangled_to_qualified(const char *demangled);

/* What to look for. */
struct ct_sym_want {
	const char *name; /* C name, or C++ qualified name "ns::Cls::fn" when cxx */
	bool cxx;
	bool object; /* a data object (STT_OBJECT) rather than a function */
};

struct ct_sym_found {
	bool found;
	uint64_t addr;	   /* st_value of the chosen definition */
	uint64_t file_off; /* file offset for the uprobe */
	uint64_t size;
	int n_aliases;	  /* other names at the same address (e.g. PMPI_X) */
	int n_overloads;  /* other addresses matching a C++ name (all but the first ignored) */
	char symbol[256]; /* the raw symbol chosen (mangled for C++) */
};

/* Resolve n wants in one pass over the symbol tables; returns how many were found. */
int ct_elf_resolve(struct ct_elf *e, const struct ct_sym_want *wants, size_t n,
		   struct ct_sym_found *found);

/*
 * x86-64: length of a leading `endbr64` at the function's entry (4), else 0.
 * A uprobe on endbr64 is single-stepped out of line (~20 µs on these VMs) while
 * the following instruction usually is emulated (~0.7 µs): attach past it.
 */
int ct_elf_endbr_len(struct ct_elf *e, uint64_t vaddr);

#endif
