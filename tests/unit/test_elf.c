// SPDX-License-Identifier: MIT
/*
 * ELF resolution against the fixtures of mk/fixtures.mk and the real collective
 * libraries. Expected addresses and offsets come from a second, independent
 * reader below (raw Elf64 structures over mmap, no libelf), so a libelf misuse
 * in user/elf cannot hide behind the same misuse in the test.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "elf/elfsym.h"

#define FX "build/fixtures/"

struct raw_elf {
	const unsigned char *map;
	size_t size;
};

static bool raw_open(const char *path, struct raw_elf *r)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	r->map = NULL;
	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof(Elf64_Ehdr)) {
		void *m = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);

		if (m != MAP_FAILED) {
			r->map = m;
			r->size = st.st_size;
		}
	}
	close(fd);
	return r->map && memcmp(r->map, ELFMAG, SELFMAG) == 0 && r->map[EI_CLASS] == ELFCLASS64;
}

static void raw_close(struct raw_elf *r)
{
	if (r->map)
		munmap((void *)r->map, r->size);
	r->map = NULL;
}

static const Elf64_Shdr *raw_shdr(const struct raw_elf *r, unsigned int i)
{
	const Elf64_Ehdr *eh = (const void *)r->map;

	return (const void *)(r->map + eh->e_shoff + (size_t)i * eh->e_shentsize);
}

/*
 * The first defined symbol spelled exactly `name` (versions included, as stored) in the
 * table of type `shtype`, optionally with binding `bind` (-1: any). False if none.
 */
static bool raw_sym(const struct raw_elf *r, unsigned int shtype, const char *name, int bind,
		    Elf64_Sym *out)
{
	const Elf64_Ehdr *eh = (const void *)r->map;
	unsigned int i;
	size_t j;

	for (i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *sh = raw_shdr(r, i), *str;
		const Elf64_Sym *syms;

		if (sh->sh_type != shtype)
			continue;
		str = raw_shdr(r, sh->sh_link);
		syms = (const void *)(r->map + sh->sh_offset);
		for (j = 1; j < sh->sh_size / sizeof(Elf64_Sym); j++) {
			const char *n = (const char *)r->map + str->sh_offset + syms[j].st_name;

			if (syms[j].st_shndx == SHN_UNDEF || strcmp(n, name) != 0)
				continue;
			if (bind >= 0 && ELF64_ST_BIND(syms[j].st_info) != bind)
				continue;
			*out = syms[j];
			return true;
		}
	}
	return false;
}

/* Defined, named symbols in .dynsym and .symtab together. */
static long raw_count_defined(const struct raw_elf *r)
{
	const Elf64_Ehdr *eh = (const void *)r->map;
	unsigned int i;
	long n = 0;
	size_t j;

	for (i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *sh = raw_shdr(r, i), *str;
		const Elf64_Sym *syms;

		if (sh->sh_type != SHT_SYMTAB && sh->sh_type != SHT_DYNSYM)
			continue;
		str = raw_shdr(r, sh->sh_link);
		syms = (const void *)(r->map + sh->sh_offset);
		for (j = 1; j < sh->sh_size / sizeof(Elf64_Sym); j++)
			if (syms[j].st_shndx != SHN_UNDEF && syms[j].st_name &&
			    r->map[str->sh_offset + syms[j].st_name])
				n++;
	}
	return n;
}

static bool raw_has_section(const struct raw_elf *r, unsigned int shtype)
{
	const Elf64_Ehdr *eh = (const void *)r->map;
	unsigned int i;

	for (i = 0; i < eh->e_shnum; i++)
		if (raw_shdr(r, i)->sh_type == shtype)
			return true;
	return false;
}

/* File offset from the program headers: the PT_LOAD whose file image holds vaddr. */
static bool raw_off(const struct raw_elf *r, uint64_t vaddr, uint64_t *off)
{
	const Elf64_Ehdr *eh = (const void *)r->map;
	unsigned int i;

	for (i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph =
		    (const void *)(r->map + eh->e_phoff + (size_t)i * eh->e_phentsize);

		if (ph->p_type == PT_LOAD && vaddr >= ph->p_vaddr &&
		    vaddr < ph->p_vaddr + ph->p_memsz) {
			*off = vaddr - ph->p_vaddr + ph->p_offset;
			return true;
		}
	}
	return false;
}

static struct ct_elf *open_fixture(const char *path, struct raw_elf *raw)
{
	char err[256] = "";
	struct ct_elf *e;

	e = ct_elf_open(path, err, sizeof(err));
	if (!ASSERT_NOT_NULL(e, err))
		return NULL;
	if (!ASSERT_TRUE(raw_open(path, raw), path)) {
		ct_elf_close(e);
		raw_close(raw);
		return NULL;
	}
	return e;
}

/* A found symbol at the st_value of `raw_name`, with the offset the phdrs give. */
static bool check_at(const struct raw_elf *raw, const struct ct_sym_found *f, unsigned int shtype,
		     const char *raw_name, int bind)
{
	Elf64_Sym s;
	uint64_t off = 0;

	if (!ASSERT_TRUE(f->found, raw_name) ||
	    !ASSERT_TRUE(raw_sym(raw, shtype, raw_name, bind, &s), raw_name) ||
	    !ASSERT_EQ(f->addr, s.st_value, raw_name) || !ASSERT_EQ(f->size, s.st_size, raw_name) ||
	    !ASSERT_TRUE(raw_off(raw, s.st_value, &off), raw_name) ||
	    !ASSERT_EQ(f->file_off, off, raw_name))
		return false;
	return true;
}

TEST(elf_weak_alias)
{
	struct ct_sym_want w[] = {{"MPI_Fake_allreduce"}, {"PMPI_Fake_allreduce"}};
	struct ct_sym_found f[2];
	struct raw_elf raw;
	struct ct_elf *e = open_fixture(FX "libweak.so", &raw);

	if (!e)
		return;
	if (!ASSERT_EQ(ct_elf_resolve(e, w, 2, f), 2, "found"))
		goto out;
	if (!check_at(&raw, &f[0], SHT_DYNSYM, "MPI_Fake_allreduce", STB_WEAK) ||
	    !check_at(&raw, &f[1], SHT_DYNSYM, "PMPI_Fake_allreduce", STB_GLOBAL))
		goto out;
	ASSERT_EQ(f[0].addr, f[1].addr, "alias shares the address");
	ASSERT_EQ(f[0].n_aliases, 1, "MPI_ has PMPI_ as alias");
	ASSERT_EQ(f[1].n_aliases, 1, "PMPI_ has MPI_ as alias");
	ASSERT_EQ(f[0].n_overloads, 0, "one address");
	ASSERT_STREQ(f[0].symbol, "MPI_Fake_allreduce", "symbol");
	ASSERT_STREQ(f[1].symbol, "PMPI_Fake_allreduce", "symbol");
out:
	raw_close(&raw);
	ct_elf_close(e);
}

TEST(elf_global_beats_local_and_weak_beats_local)
{
	struct ct_sym_want w[] = {{"dup_name"}, {"weak_vs_local"}, {"static_only"}};
	struct ct_sym_found f[3];
	struct raw_elf raw;
	struct ct_elf *e = open_fixture(FX "libweak.so", &raw);
	Elf64_Sym loc;

	if (!e)
		return;
	if (!ASSERT_EQ(ct_elf_resolve(e, w, 3, f), 3, "found"))
		goto out;
	check_at(&raw, &f[0], SHT_SYMTAB, "dup_name", STB_GLOBAL);
	check_at(&raw, &f[1], SHT_SYMTAB, "weak_vs_local", STB_WEAK);
	check_at(&raw, &f[2], SHT_SYMTAB, "static_only", STB_LOCAL);
	/* The statics sit at other addresses: one other definition each. */
	if (ASSERT_TRUE(raw_sym(&raw, SHT_SYMTAB, "dup_name", STB_LOCAL, &loc), "local dup_name"))
		ASSERT_NEQ(loc.st_value, f[0].addr, "local is elsewhere");
	ASSERT_EQ(f[0].n_overloads, 1, "dup_name: the local");
	ASSERT_EQ(f[1].n_overloads, 1, "weak_vs_local: the local");
	ASSERT_EQ(f[2].n_overloads, 0, "static_only");
	ASSERT_EQ(f[0].n_aliases, 0, "no alias");
out:
	raw_close(&raw);
	ct_elf_close(e);
}

TEST(elf_objects)
{
	struct ct_sym_want w[] = {
	    {"ct_fixture_counter", false, true},
	    {"ct_fixture_bss", false, true},
	    {"ct_fixture_counter"},
	    {"PMPI_Fake_allreduce", false, true},
	};
	struct ct_sym_found f[4];
	struct raw_elf raw;
	struct ct_elf *e = open_fixture(FX "libweak.so", &raw);
	int v = 0;

	if (!e)
		return;
	ASSERT_EQ(ct_elf_resolve(e, w, 4, f), 2, "only the object wants");
	check_at(&raw, &f[0], SHT_DYNSYM, "ct_fixture_counter", -1);
	check_at(&raw, &f[1], SHT_DYNSYM, "ct_fixture_bss", -1);
	ASSERT_FALSE(f[2].found, "an object is no function");
	ASSERT_FALSE(f[3].found, "a function is no object");
	if (ASSERT_OK(ct_elf_read_vaddr(e, f[0].addr, &v, sizeof(v)), "read .data"))
		ASSERT_EQ(v, 42, "initial value");
	/* .bss has no file image. */
	ASSERT_EQ(ct_elf_read_vaddr(e, f[1].addr, &v, sizeof(v)), -ENOENT, "read .bss");
	raw_close(&raw);
	ct_elf_close(e);
}

struct ver_seen {
	int n_vfunc;
	const char *v1, *v2;
	bool v1_dyn, v2_dyn;
	char v1_ver[16], v2_ver[16];
	uint64_t v1_addr, v2_addr;
};

static int ver_cb(const struct ct_elf_sym *s, void *ctx)
{
	struct ver_seen *vs = ctx;

	if (strcmp(s->name, "vfunc") != 0)
		return 0;
	vs->n_vfunc++;
	if (!s->dynsym || !s->version)
		return 0;
	if (strcmp(s->version, "VER_1") == 0) {
		vs->v1_addr = s->addr;
		snprintf(vs->v1_ver, sizeof(vs->v1_ver), "%s", s->version);
	} else {
		vs->v2_addr = s->addr;
		snprintf(vs->v2_ver, sizeof(vs->v2_ver), "%s", s->version);
	}
	return 0;
}

TEST(elf_versioned)
{
	struct ct_sym_want w[] = {{"vfunc"},	    {"vfunc@VER_1"}, {"vfunc@@VER_2"},
				  {"vfunc@@VER_1"}, {"plain"},	     {"vfunc_v1"}};
	struct ct_sym_found f[6];
	struct raw_elf raw;
	struct ct_elf *e = open_fixture(FX "libver.so", &raw);
	struct ver_seen vs = {0};
	Elf64_Sym v1, v2;

	if (!e)
		return;
	if (!ASSERT_TRUE(raw_sym(&raw, SHT_SYMTAB, "vfunc_v1", -1, &v1), "vfunc_v1") ||
	    !ASSERT_TRUE(raw_sym(&raw, SHT_SYMTAB, "vfunc_v2", -1, &v2), "vfunc_v2"))
		goto out;
	ASSERT_EQ(ct_elf_resolve(e, w, 6, f), 5, "found");
	ASSERT_EQ(f[0].addr, v2.st_value, "plain name: the default version");
	ASSERT_EQ(f[0].n_overloads, 1, "the old version is elsewhere");
	ASSERT_EQ(f[0].n_aliases, 1, "vfunc_v2 (local) at the same address");
	ASSERT_STREQ(f[0].symbol, "vfunc", "version stripped");
	ASSERT_EQ(f[1].addr, v1.st_value, "@VER_1");
	ASSERT_EQ(f[2].addr, v2.st_value, "@@VER_2");
	ASSERT_FALSE(f[3].found, "VER_1 is not the default");
	check_at(&raw, &f[4], SHT_DYNSYM, "plain", -1);
	ASSERT_EQ(f[5].addr, v1.st_value, "the local implementation name");

	ASSERT_OK(ct_elf_foreach_sym(e, ver_cb, &vs), "foreach");
	/* dynsym vfunc x2 (versions from .gnu.version_d), symtab vfunc@VER_1 / vfunc@@VER_2. */
	ASSERT_EQ(vs.n_vfunc, 4, "vfunc definitions");
	ASSERT_STREQ(vs.v1_ver, "VER_1", "dynsym version");
	ASSERT_STREQ(vs.v2_ver, "VER_2", "dynsym version");
	ASSERT_EQ(vs.v1_addr, v1.st_value, "VER_1 address");
	ASSERT_EQ(vs.v2_addr, v2.st_value, "VER_2 address");
out:
	raw_close(&raw);
	ct_elf_close(e);
}

static int count_cb(const struct ct_elf_sym *s, void *ctx)
{
	long *n = ctx;

	(*n)++;
	return 0;
}

static int stop_cb(const struct ct_elf_sym *s, void *ctx)
{
	long *n = ctx;

	return ++(*n) == 3 ? 77 : 0;
}

TEST(elf_foreach)
{
	const char *paths[] = {FX "libweak.so", FX "libweak-stripped.so", FX "libver.so",
			       FX "libcxx.so", FX "nopie"};
	size_t i;

	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct raw_elf raw;
		struct ct_elf *e;
		long n = 0;

		ct_subtest(paths[i]);
		e = open_fixture(paths[i], &raw);
		if (!e)
			continue;
		ASSERT_OK(ct_elf_foreach_sym(e, count_cb, &n), "foreach");
		ASSERT_EQ(n, raw_count_defined(&raw), "every defined named symbol");
		n = 0;
		ASSERT_EQ(ct_elf_foreach_sym(e, stop_cb, &n), 77, "stop value");
		ASSERT_EQ(n, 3, "stopped at the third");
		raw_close(&raw);
		ct_elf_close(e);
	}
}

TEST(elf_stripped_dynsym_only)
{
	struct ct_sym_want w[] = {{"MPI_Fake_allreduce"}, {"dup_name"}, {"static_only"}};
	struct ct_sym_found f[3];
	struct raw_elf raw, full;
	struct ct_elf *e = open_fixture(FX "libweak-stripped.so", &raw);
	Elf64_Sym s;

	if (!e)
		return;
	if (!ASSERT_TRUE(raw_open(FX "libweak.so", &full), "unstripped"))
		goto out;
	ASSERT_FALSE(raw_has_section(&raw, SHT_SYMTAB), "really stripped");
	ASSERT_EQ(ct_elf_resolve(e, w, 3, f), 2, "found");
	if (check_at(&raw, &f[0], SHT_DYNSYM, "MPI_Fake_allreduce", -1) &&
	    ASSERT_TRUE(raw_sym(&full, SHT_DYNSYM, "PMPI_Fake_allreduce", -1, &s), "PMPI"))
		ASSERT_EQ(f[0].addr, s.st_value, "same address as unstripped PMPI_");
	ASSERT_EQ(f[0].n_aliases, 1, "alias in .dynsym");
	check_at(&raw, &f[1], SHT_DYNSYM, "dup_name", STB_GLOBAL);
	ASSERT_EQ(f[1].n_overloads, 0, "the local went with .symtab");
	ASSERT_FALSE(f[2].found, "statics are gone");
out:
	raw_close(&full);
	raw_close(&raw);
	ct_elf_close(e);
}

TEST(elf_nopie)
{
	struct ct_sym_want w[] = {
	    {"nopie_func"}, {"nopie_obj", false, true}, {"main"}, {"dup_exe"}, {"weak_exe"}};
	struct ct_sym_found f[5];
	struct raw_elf raw;
	struct ct_elf *e = open_fixture(FX "nopie", &raw);
	const Elf64_Ehdr *eh;
	int v = 0;

	if (!e)
		return;
	eh = (const void *)raw.map;
	ASSERT_EQ(eh->e_type, ET_EXEC, "fixture is ET_EXEC");
	ASSERT_FALSE(ct_elf_is_dyn(e), "not ET_DYN");
	ASSERT_FALSE(raw_has_section(&raw, SHT_DYNSYM) &&
			 raw_sym(&raw, SHT_DYNSYM, "dup_exe", -1, &(Elf64_Sym){0}),
		     "dup_exe only in .symtab");
	ASSERT_EQ(ct_elf_resolve(e, w, 5, f), 5, "found");
	check_at(&raw, &f[0], SHT_SYMTAB, "nopie_func", -1);
	check_at(&raw, &f[1], SHT_SYMTAB, "nopie_obj", -1);
	check_at(&raw, &f[2], SHT_SYMTAB, "main", -1);
	/* The statics come first in .symtab; binding, not order, decides. */
	check_at(&raw, &f[3], SHT_SYMTAB, "dup_exe", STB_GLOBAL);
	check_at(&raw, &f[4], SHT_SYMTAB, "weak_exe", STB_WEAK);
	ASSERT_EQ(f[3].n_overloads, 1, "the static");
	/* Absolute addresses: the offset is not the address. */
	ASSERT_NEQ(f[0].file_off, f[0].addr, "offset differs from vaddr");
	if (ASSERT_OK(ct_elf_read_vaddr(e, f[1].addr, &v, sizeof(v)), "read"))
		ASSERT_EQ(v, 7, "nopie_obj");
	raw_close(&raw);
	ct_elf_close(e);
}

TEST(elf_endbr)
{
	static const unsigned char endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};
	struct ct_sym_want w[] = {{"ct_fx_endbr"}, {"ct_fx_push"}};
	struct ct_sym_found f[2];
	struct raw_elf raw;
	struct ct_elf *e = open_fixture(FX "libweak.so", &raw);

	if (!e)
		return;
	if (!ASSERT_EQ(ct_elf_resolve(e, w, 2, f), 2, "found"))
		goto out;
	ASSERT_OK(memcmp(raw.map + f[0].file_off, endbr64, 4), "fixture starts with endbr64");
	ASSERT_EQ(raw.map[f[1].file_off], 0x55, "fixture starts with push %rbp");
	ASSERT_EQ(ct_elf_endbr_len(e, f[0].addr), 4, "endbr64");
	ASSERT_EQ(ct_elf_endbr_len(e, f[1].addr), 0, "push");
	ASSERT_EQ(ct_elf_endbr_len(e, 0x7fffffff0000ULL), -ENOENT, "unmapped");
out:
	raw_close(&raw);
	ct_elf_close(e);
}

TEST(elf_cxx)
{
	struct ct_sym_want w[] = {
	    {"ns::Cls::run", true}, {"ns::Cls::operator()", true},
	    {"ns::Cls::get", true}, {"ns::tmpl", true},
	    {"ns::Box::put", true}, {"(anonymous namespace)::anon_fn", true},
	    {"ns::name", true},	    {"ns::Cls::counter", true, true},
	    {"ns::Cls::run"}, /* not C++: compares the mangled spelling */
	    {"ns::Cls", true},	    {"ns::Cls::ru", true},
	};
	enum { N = sizeof(w) / sizeof(w[0]) };
	struct ct_sym_found f[N];
	struct raw_elf raw;
	struct ct_elf *e = open_fixture(FX "libcxx.so", &raw);
	Elf64_Sym a, b;

	if (!e)
		return;
	ASSERT_EQ(ct_elf_resolve(e, w, N, f), 8, "found");
	/* Overloads: both exported GLOBAL; the first in .dynsym order is taken. */
	if (ASSERT_TRUE(raw_sym(&raw, SHT_DYNSYM, "_ZN2ns3Cls3runEi", -1, &a), "run(int)") &&
	    ASSERT_TRUE(raw_sym(&raw, SHT_DYNSYM, "_ZN2ns3Cls3runEd", -1, &b), "run(double)")) {
		ASSERT_TRUE(f[0].addr == a.st_value || f[0].addr == b.st_value, "one of them");
		ASSERT_TRUE(strcmp(f[0].symbol, "_ZN2ns3Cls3runEi") == 0 ||
				strcmp(f[0].symbol, "_ZN2ns3Cls3runEd") == 0,
			    "mangled symbol");
	}
	ASSERT_EQ(f[0].n_overloads, 1, "run: two overloads");
	check_at(&raw, &f[1], SHT_DYNSYM, "_ZNK2ns3ClsclEi", -1);
	ASSERT_STREQ(f[1].symbol, "_ZNK2ns3ClsclEi", "operator()");
	check_at(&raw, &f[2], SHT_DYNSYM, "_ZNK2ns3Cls3getIiEET_S2_", -1);
	ASSERT_EQ(f[3].n_overloads, 1, "tmpl<int>, tmpl<double>");
	ASSERT_EQ(f[4].n_overloads, 1, "Box<int>::put, Box<long>::put");
	check_at(&raw, &f[5], SHT_SYMTAB, "_ZN12_GLOBAL__N_17anon_fnEi", -1);
	check_at(&raw, &f[6], SHT_DYNSYM, "_ZN2ns4nameB5cxx11Ev", -1);
	check_at(&raw, &f[7], SHT_DYNSYM, "_ZN2ns3Cls7counterE", -1);
	ASSERT_FALSE(f[8].found, "C++ name without cxx");
	ASSERT_FALSE(f[9].found, "a class is no function");
	ASSERT_FALSE(f[10].found, "no prefix match");
	raw_close(&raw);
	ct_elf_close(e);
}

TEST(elf_demangle)
{
	static const char *const cases[][2] = {
	    {"c10d::ProcessGroupGloo::allreduce(std::vector<at::Tensor, "
	     "std::allocator<at::Tensor> >&, c10d::AllreduceOptions const&)",
	     "c10d::ProcessGroupGloo::allreduce"},
	    {"gloo::allreduce(gloo::AllreduceOptions const&)", "gloo::allreduce"},
	    {"void ns::tmpl<int>(int)", "ns::tmpl"},
	    {"unsigned long ns::sz<char>(char const*)", "ns::sz"},
	    {"ns::Cls<int>::get() const", "ns::Cls::get"},
	    {"ns::Cls::operator()(int) const", "ns::Cls::operator()"},
	    {"ns::Cls::operator()() const &&", "ns::Cls::operator()"},
	    {"ns::X::operator->() const", "ns::X::operator->"},
	    {"bool ns::operator< <int>(ns::X<int> const&, ns::X<int> const&)", "ns::operator<"},
	    {"std::ostream& ns::operator<<(std::ostream&, ns::X const&)", "ns::operator<<"},
	    {"ns::X::operator bool() const", "ns::X::operator bool"},
	    {"(anonymous namespace)::helper(int)", "(anonymous namespace)::helper"},
	    {"(anonymous namespace)::Y ns::make<(anonymous namespace)::Y>()", "ns::make"},
	    {"ns::name[abi:cxx11]()", "ns::name"},
	    {"ns::f(int) [clone .cold]", "ns::f"},
	    {"ns::X::~X()", "ns::X::~X"},
	    {"ns::Cls::counter", "ns::Cls::counter"},
	    {"ns::f(int)::{lambda(int)#1}::operator()(int) const",
	     "ns::f(int)::{lambda(int)#1}::operator()"},
	    {"std::vector<int, std::allocator<int> >::push_back(int&&)", "std::vector::push_back"},
	};
	size_t i;
	char *q;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		q = ct_demangled_to_qualified(cases[i][0]);
		ASSERT_STREQ(q, cases[i][1], cases[i][0]);
		free(q);
	}
	q = ct_demangle_qualified(
	    "_ZN4c10d16ProcessGroupGloo9allreduceERSt6vectorIN2at6TensorESaIS3_"
	    "EERKNS_16AllreduceOptionsE");
	ASSERT_STREQ(q, "c10d::ProcessGroupGloo::allreduce", "mangled c10d");
	free(q);
	q = ct_demangle("_ZNK2ns3ClsclEi");
	ASSERT_STREQ(q, "ns::Cls::operator()(int) const", "full");
	free(q);
	ASSERT_TRUE(ct_demangle("main") == NULL, "C name");
	ASSERT_TRUE(ct_demangle("i") == NULL, "a bare type is no symbol");
	ASSERT_TRUE(ct_demangle_qualified("_Zgarbage") == NULL, "invalid");
}

/* "_Z1fI1AIiiE" then n template arguments A<X, X>, X the argument before: each doubles the
 * text, so the name is 12 bytes a level and its demangled text 2^n long. */
static void doubling_name(char *buf, size_t size, int n)
{
	static const char digits[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
	size_t o = (size_t)snprintf(buf, size, "_Z1fI1AIiiE");
	int i;

	for (i = 0; i < n; i++) {
		int k = 2 * i + 1; /* the substitution of the previous A<...> (base 36) */
		char ref[8];

		if (k < 36)
			snprintf(ref, sizeof(ref), "S%c_", digits[k]);
		else
			snprintf(ref, sizeof(ref), "S%c%c_", digits[k / 36], digits[k % 36]);
		o += (size_t)snprintf(buf + o, size - o, "1AI%s%sE", ref, ref);
	}
	snprintf(buf + o, size - o, "Evv");
}

TEST(elf_demangle_bounded)
{
	char name[1024];
	char *d;

	doubling_name(name, sizeof(name), 2);
	d = ct_demangle(name);
	ASSERT_STREQ(d,
		     "void f<A<int, int>, A<A<int, int>, A<int, int> >, "
		     "A<A<A<int, int>, A<int, int> >, A<A<int, int>, A<int, int> > > >()",
		     "two levels");
	free(d);
	/* 11 levels: about 136 KiB of text, under the bound. */
	doubling_name(name, sizeof(name), 11);
	d = ct_demangle(name);
	ASSERT_TRUE(d && strlen(d) > 64 * 1024 && strlen(d) < CT_DEMANGLE_MAX, "11 levels");
	free(d);
	/* 40 levels (495 bytes) ask for 2^40 times as much: refused, and at once (the
	 * fuzzer found such a name hanging __cxa_demangle for 20 minutes). */
	doubling_name(name, sizeof(name), 40);
	ASSERT_TRUE(ct_demangle(name) == NULL, "40 levels refused");
	ASSERT_TRUE(ct_demangle_qualified(name) == NULL, "40 levels, qualified");
}

TEST(elf_open_errors)
{
	char err[256] = "";
	struct ct_elf *e;

	e = ct_elf_open(FX "does-not-exist.so", err, sizeof(err));
	ASSERT_TRUE(e == NULL, "missing file");
	ASSERT_TRUE(strstr(err, "No such file") != NULL, err);
	err[0] = '\0';
	e = ct_elf_open("tests/unit/harness.h", err, sizeof(err));
	ASSERT_TRUE(e == NULL, "text file");
	ASSERT_TRUE(strstr(err, "not an ELF file") != NULL, err);
	e = ct_elf_open(FX "libweak.so", err, sizeof(err));
	if (!ASSERT_NOT_NULL(e, err))
		return;
	ASSERT_TRUE(ct_elf_is_dyn(e), "shared object");
	ASSERT_EQ(ct_elf_resolve(e, NULL, 0, NULL), 0, "nothing wanted");
	ASSERT_EQ(ct_elf_resolve(NULL, NULL, 0, NULL), -EINVAL, "no elf");
	ct_elf_close(e);
	ct_elf_close(NULL);
}

/* ---- the real libraries, where installed ---- */

static bool have(const char *path)
{
	if (access(path, R_OK) == 0)
		return true;
	fprintf(stderr, "  SKIP %s: not installed\n", path);
	return false;
}

/* A want resolved to one address that an alias shares: both names, both st_values. */
static void check_alias_pair(const char *path, const char *weak, const char *strong)
{
	struct ct_sym_want w[] = {{weak}, {strong}};
	struct ct_sym_found f[2];
	struct raw_elf raw;
	struct ct_elf *e = open_fixture(path, &raw);
	Elf64_Sym s;

	if (!e)
		return;
	ASSERT_EQ(ct_elf_resolve(e, w, 2, f), 2, "found");
	if (check_at(&raw, &f[0], SHT_DYNSYM, weak, STB_WEAK) &&
	    ASSERT_TRUE(raw_sym(&raw, SHT_DYNSYM, strong, STB_GLOBAL, &s), strong))
		ASSERT_EQ(f[0].addr, s.st_value, "weak alias at the strong name's address");
	ASSERT_EQ(f[0].addr, f[1].addr, "one function");
	ASSERT_GE(f[0].n_aliases, 1, "aliases");
	ASSERT_EQ(f[0].n_overloads, 0, "found once");
	ASSERT_STREQ(f[0].symbol, weak, "symbol");
	raw_close(&raw);
	ct_elf_close(e);
}

TEST(elf_system_libmpi)
{
	const char *p = "/usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so.40";

	if (access(p, R_OK) != 0)
		p = "/usr/lib/x86_64-linux-gnu/libmpi.so.40";
	if (have(p))
		check_alias_pair(p, "MPI_Allreduce", "PMPI_Allreduce");
}

TEST(elf_system_libnccl)
{
	const char *p = "/usr/local/cuda/lib64/libnccl.so.2";

	if (have(p))
		check_alias_pair(p, "ncclAllReduce", "pncclAllReduce");
}

TEST(elf_system_libgloo)
{
	const char *p = "/lib/libgloo.so.0";
	struct ct_sym_want w[] = {{"gloo::allreduce", true}, {"gloo::broadcast", true}};
	struct ct_sym_found f[2];
	struct raw_elf raw;
	struct ct_elf *e;

	if (!have(p))
		return;
	e = open_fixture(p, &raw);
	if (!e)
		return;
	ASSERT_EQ(ct_elf_resolve(e, w, 2, f), 2, "found");
	check_at(&raw, &f[0], SHT_DYNSYM, "_ZN4gloo9allreduceERKNS_16AllreduceOptionsE", -1);
	check_at(&raw, &f[1], SHT_DYNSYM, "_ZN4gloo9broadcastERNS_16BroadcastOptionsE", -1);
	ASSERT_EQ(f[0].n_overloads, 0, "one gloo::allreduce");
	raw_close(&raw);
	ct_elf_close(e);
}

TEST(elf_system_libtorch_c10d)
{
	static const char *const names[] = {
	    "allreduce",
	    "allreduce_coalesced",
	    "allgather",
	    "_allgather_base",
	    "allgather_coalesced",
	    "broadcast",
	    "reduce",
	    "reduce_scatter",
	    "alltoall_base",
	    "gather",
	    "scatter",
	    "barrier",
	    "send",
	    "recv",
	    "recvAnysource",
	};
	enum { N = sizeof(names) / sizeof(names[0]) };
	const char *p = "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13";
	struct ct_sym_want w[N];
	struct ct_sym_found f[N];
	char qn[N][64], err[256];
	struct timespec t0, t1;
	struct raw_elf raw;
	struct ct_elf *e;
	size_t i;
	int n;

	if (!have(p))
		return;
	for (i = 0; i < N; i++) {
		snprintf(qn[i], sizeof(qn[i]), "c10d::ProcessGroupGloo::%s", names[i]);
		w[i] = (struct ct_sym_want){qn[i], true, false};
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	e = ct_elf_open(p, err, sizeof(err));
	if (!ASSERT_NOT_NULL(e, err))
		return;
	n = ct_elf_resolve(e, w, N, f);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fprintf(stderr, "  libtorch_cpu: open + resolve %d c10d names: %.1f ms\n", N,
		(t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
	ASSERT_EQ(n, N, "all found");
	if (!ASSERT_TRUE(raw_open(p, &raw), p))
		goto out;
	for (i = 0; i < N; i++) {
		char *q = ct_demangle_qualified(f[i].symbol);
		Elf64_Sym s;
		uint64_t off = 0;

		ct_subtest(names[i]);
		ASSERT_STREQ(q, qn[i], "the chosen symbol demangles to the want");
		free(q);
		if (ASSERT_TRUE(raw_sym(&raw, SHT_DYNSYM, f[i].symbol, -1, &s), f[i].symbol)) {
			ASSERT_EQ(f[i].addr, s.st_value, "st_value");
			if (ASSERT_TRUE(raw_off(&raw, s.st_value, &off), "phdr"))
				ASSERT_EQ(f[i].file_off, off, "offset");
		}
		ASSERT_EQ(f[i].n_overloads, 0, "no overloads in 1.13");
	}
	raw_close(&raw);
out:
	ct_elf_close(e);
}

/* Found by tests/fuzz/fuzz_text.c: an operator name running past the cut of the name. */
TEST(elf_demangle_operator_past_cut)
{
	char *q = ct_demangle_qualified("_Zcl");

	/* Whatever it makes of it, it stays in its buffer (ASan: make test-asan). */
	free(q);
	q = ct_demangled_to_qualified("ns::f(int)");
	if (ASSERT_NOT_NULL(q, "ns::f(int)"))
		ASSERT_STREQ(q, "ns::f", "parameters cut");
	free(q);
}
