// SPDX-License-Identifier: MIT
/*
 * ELF symbol tables with libelf, resolved the way libbpf's uprobe attach does it
 * (elf_find_func_offset): .dynsym, then .symtab; functions only; a versioned
 * name matches its base name; global beats weak; one address is one function.
 * Unlike libbpf 1.1 we do not fail on two definitions at different addresses
 * (e.g. "foo@V1" and "foo@@V2"): the default version, then the strongest
 * binding, then the first one seen wins, and the others are counted.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf/elfsym.h"

/* Bounds on what one resolution tracks per wanted name. */
#define CT_MAX_NEEDLES	64 /* distinct mangled-name pieces over all C++ wants */
#define CT_WANT_NEEDLES 8  /* pieces checked per want */
#define CT_MAX_ADDRS	64 /* distinct addresses remembered per want */
#define CT_MAX_ALIASES	32 /* distinct alias names remembered per want */
#define CT_MAX_VERSIONS 4096
#define CT_NEEDLE_LEN	128

struct ct_symtab {
	Elf_Data *syms;
	const char *strs;
	size_t strs_len;
	size_t count;
	bool dyn;
};

struct ct_elf {
	int fd;
	Elf *elf;
	GElf_Ehdr ehdr;
	GElf_Phdr *phdrs;
	size_t phnum;
	struct ct_symtab tabs[2];
	int ntabs;
	Elf_Data *versym;      /* one GElf_Versym per .dynsym entry, or NULL */
	const char **vernames; /* verdef names by version index */
	size_t nvernames;
	char *namebuf; /* base names of versioned symbols for ct_elf_foreach_sym */
	size_t namebuf_len;
};

/* A symbol as the internal walk sees it: names point into the mapped string table. */
struct ct_rawsym {
	GElf_Sym sym;
	const char *name;    /* as stored, possibly "name@VER" */
	size_t base_len;     /* length of the name before any '@' */
	const char *version; /* or NULL */
	bool hidden;	     /* a non-default version ("name@VER", versym bit 15) */
	bool dyn;
};

typedef int (*ct_rawsym_cb)(struct ct_elf *e, const struct ct_rawsym *s, void *ctx);

static int set_err(char *err, size_t errlen, int ret, const char *path, const char *what)
{
	if (err && errlen)
		snprintf(err, errlen, "%s: %s", path, what);
	return ret;
}

static const char *sec_strs(Elf *elf, size_t ndx, size_t *len)
{
	Elf_Scn *scn = elf_getscn(elf, ndx);
	Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;

	/* A table whose last byte is NUL lets every in-range offset be used as a C string. */
	if (!d || !d->d_buf || !d->d_size || ((const char *)d->d_buf)[d->d_size - 1] != '\0')
		return NULL;
	*len = d->d_size;
	return d->d_buf;
}

static int load_verdefs(struct ct_elf *e, Elf_Scn *scn, const GElf_Shdr *sh)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	const char *strs;
	size_t strs_len, off = 0, n, max_ndx = 0, pass;

	strs = sec_strs(e->elf, sh->sh_link, &strs_len);
	if (!d || !strs)
		return 0; /* no version names: symbols just carry none */
	/* Two passes: the largest index sizes the table, then the names fill it. */
	for (pass = 0; pass < 2; pass++) {
		off = 0;
		for (n = 0; n < sh->sh_info && n < CT_MAX_VERSIONS; n++) {
			GElf_Verdef vd;
			GElf_Verdaux va;
			unsigned int ndx;

			if (!gelf_getverdef(d, off, &vd))
				break;
			ndx = vd.vd_ndx & 0x7fff;
			if (pass == 0 && ndx > max_ndx)
				max_ndx = ndx;
			if (pass == 1 && vd.vd_cnt && gelf_getverdaux(d, off + vd.vd_aux, &va) &&
			    va.vda_name < strs_len && !(vd.vd_flags & VER_FLG_BASE))
				e->vernames[ndx] = strs + va.vda_name;
			if (!vd.vd_next)
				break;
			off += vd.vd_next;
		}
		if (pass == 0) {
			e->vernames = calloc(max_ndx + 1, sizeof(*e->vernames));
			if (!e->vernames)
				return -ENOMEM;
			e->nvernames = max_ndx + 1;
		}
	}
	return 0;
}

static int load_sections(struct ct_elf *e)
{
	Elf_Scn *scn = NULL, *dynsym = NULL, *symtab = NULL, *verdef = NULL, *versym = NULL;
	GElf_Shdr sh, vdsh;
	int i, err;

	while ((scn = elf_nextscn(e->elf, scn))) {
		if (!gelf_getshdr(scn, &sh))
			return -EINVAL;
		if (sh.sh_type == SHT_DYNSYM)
			dynsym = scn;
		else if (sh.sh_type == SHT_SYMTAB)
			symtab = scn;
		else if (sh.sh_type == SHT_GNU_verdef) {
			verdef = scn;
			vdsh = sh;
		} else if (sh.sh_type == SHT_GNU_versym)
			versym = scn;
	}
	/* libbpf's order: exported symbols first; .symtab adds locals and may be stripped. */
	for (i = 0; i < 2; i++) {
		struct ct_symtab *t = &e->tabs[e->ntabs];
		Elf_Scn *s = i == 0 ? dynsym : symtab;
		size_t entsz = gelf_fsize(e->elf, ELF_T_SYM, 1, EV_CURRENT);

		if (!s || !gelf_getshdr(s, &sh) || sh.sh_type == SHT_NOBITS || !entsz)
			continue;
		t->syms = elf_getdata(s, NULL);
		t->strs = sec_strs(e->elf, sh.sh_link, &t->strs_len);
		if (!t->syms || !t->strs)
			continue;
		t->count = t->syms->d_size / entsz;
		t->dyn = i == 0;
		e->ntabs++;
	}
	if (dynsym && versym) {
		Elf_Data *vd = elf_getdata(versym, NULL);

		if (vd && e->ntabs && e->tabs[0].dyn && vd->d_size / 2 >= e->tabs[0].count)
			e->versym = vd;
	}
	if (verdef) {
		err = load_verdefs(e, verdef, &vdsh);
		if (err)
			return err;
	}
	return 0;
}

struct ct_elf *ct_elf_open(const char *path, char *err, size_t errlen)
{
	struct ct_elf *e;
	size_t i;
	int ret;

	if (elf_version(EV_CURRENT) == EV_NONE) {
		set_err(err, errlen, 0, path, "libelf version mismatch");
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		set_err(err, errlen, 0, path, "out of memory");
		return NULL;
	}
	e->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (e->fd < 0) {
		set_err(err, errlen, 0, path, strerror(errno));
		free(e);
		return NULL;
	}
	/* mmap: a 200 MB library is read only where its tables are. */
	e->elf = elf_begin(e->fd, ELF_C_READ_MMAP, NULL);
	if (!e->elf || elf_kind(e->elf) != ELF_K_ELF || !gelf_getehdr(e->elf, &e->ehdr)) {
		set_err(err, errlen, 0, path, "not an ELF file");
		goto fail;
	}
	if (e->ehdr.e_type != ET_DYN && e->ehdr.e_type != ET_EXEC) {
		set_err(err, errlen, 0, path, "not an executable or shared object");
		goto fail;
	}
	if (elf_getphdrnum(e->elf, &e->phnum) || !e->phnum) {
		set_err(err, errlen, 0, path, "no program headers");
		goto fail;
	}
	e->phdrs = calloc(e->phnum, sizeof(*e->phdrs));
	if (!e->phdrs) {
		set_err(err, errlen, 0, path, "out of memory");
		goto fail;
	}
	for (i = 0; i < e->phnum; i++) {
		if (!gelf_getphdr(e->elf, i, &e->phdrs[i])) {
			set_err(err, errlen, 0, path, "bad program header");
			goto fail;
		}
	}
	ret = load_sections(e);
	if (ret) {
		set_err(err, errlen, 0, path,
			ret == -ENOMEM ? "out of memory" : "bad section header");
		goto fail;
	}
	return e;
fail:
	ct_elf_close(e);
	return NULL;
}

void ct_elf_close(struct ct_elf *e)
{
	if (!e)
		return;
	if (e->elf)
		elf_end(e->elf);
	if (e->fd >= 0)
		close(e->fd);
	free(e->phdrs);
	free(e->vernames);
	free(e->namebuf);
	free(e);
}

uint64_t ct_elf_base_vaddr(const struct ct_elf *e)
{
	uint64_t lo = UINT64_MAX;

	for (size_t i = 0; i < e->phnum; i++)
		if (e->phdrs[i].p_type == PT_LOAD &&
		    e->phdrs[i].p_vaddr - e->phdrs[i].p_offset < lo)
			lo = e->phdrs[i].p_vaddr - e->phdrs[i].p_offset;
	return lo == UINT64_MAX ? 0 : lo;
}

uint64_t ct_elf_entry(const struct ct_elf *e)
{
	return e->ehdr.e_entry;
}

bool ct_elf_is_dyn(const struct ct_elf *e)
{
	return e && e->ehdr.e_type == ET_DYN;
}

static int walk_syms(struct ct_elf *e, ct_rawsym_cb cb, void *ctx)
{
	int t, ret;
	size_t i;

	for (t = 0; t < e->ntabs; t++) {
		const struct ct_symtab *tab = &e->tabs[t];

		for (i = 1; i < tab->count; i++) {
			struct ct_rawsym s = {.dyn = tab->dyn};
			const char *at;

			if (!gelf_getsym(tab->syms, i, &s.sym))
				return -EINVAL;
			if (s.sym.st_shndx == SHN_UNDEF || !s.sym.st_name ||
			    s.sym.st_name >= tab->strs_len)
				continue;
			s.name = tab->strs + s.sym.st_name;
			if (!*s.name)
				continue;
			at = strchr(s.name, '@');
			s.base_len = at ? (size_t)(at - s.name) : strlen(s.name);
			if (at) {
				/* .symtab spelling: "name@VER" (hidden) or "name@@VER" (default).
				 */
				s.hidden = at[1] != '@';
				s.version = at + (s.hidden ? 1 : 2);
			} else if (tab->dyn && e->versym) {
				GElf_Versym vs;
				unsigned int ndx;

				if (gelf_getversym(e->versym, i, &vs)) {
					ndx = vs & 0x7fff;
					s.hidden = vs & 0x8000;
					if (ndx < e->nvernames)
						s.version = e->vernames[ndx];
				}
			}
			ret = cb(e, &s, ctx);
			if (ret)
				return ret;
		}
	}
	return 0;
}

struct foreach_ctx {
	ct_elf_sym_cb cb;
	void *ctx;
};

static int foreach_one(struct ct_elf *e, const struct ct_rawsym *s, void *ctx)
{
	struct foreach_ctx *fc = ctx;
	struct ct_elf_sym pub = {
	    .name = s->name,
	    .version = s->version,
	    .addr = s->sym.st_value,
	    .size = s->sym.st_size,
	    .type = GELF_ST_TYPE(s->sym.st_info),
	    .bind = GELF_ST_BIND(s->sym.st_info),
	    .dynsym = s->dyn,
	};

	if (s->name[s->base_len]) {
		if (s->base_len + 1 > e->namebuf_len) {
			char *nb = realloc(e->namebuf, s->base_len + 1);

			if (!nb)
				return -ENOMEM;
			e->namebuf = nb;
			e->namebuf_len = s->base_len + 1;
		}
		memcpy(e->namebuf, s->name, s->base_len);
		e->namebuf[s->base_len] = '\0';
		pub.name = e->namebuf;
	}
	return fc->cb(&pub, fc->ctx);
}

int ct_elf_foreach_sym(struct ct_elf *e, ct_elf_sym_cb cb, void *ctx)
{
	struct foreach_ctx fc = {cb, ctx};

	if (!e || !cb)
		return -EINVAL;
	return walk_syms(e, foreach_one, &fc);
}

static const GElf_Phdr *load_seg(const struct ct_elf *e, uint64_t vaddr, bool file_only)
{
	size_t i;

	for (i = 0; i < e->phnum; i++) {
		const GElf_Phdr *p = &e->phdrs[i];
		uint64_t sz = file_only ? p->p_filesz : p->p_memsz;

		if (p->p_type == PT_LOAD && vaddr >= p->p_vaddr && vaddr - p->p_vaddr < sz)
			return p;
	}
	return NULL;
}

int ct_elf_vaddr_to_off(struct ct_elf *e, uint64_t vaddr, uint64_t *off)
{
	const GElf_Phdr *p;

	if (!e || !off)
		return -EINVAL;
	/* p_memsz, as libbpf: a .bss object still gets an offset that maps to its address. */
	p = load_seg(e, vaddr, false);
	if (!p)
		return -ENOENT;
	*off = vaddr - p->p_vaddr + p->p_offset;
	return 0;
}

int ct_elf_read_vaddr(struct ct_elf *e, uint64_t vaddr, void *buf, size_t len)
{
	const GElf_Phdr *p;
	ssize_t n;

	if (!e || (!buf && len))
		return -EINVAL;
	p = load_seg(e, vaddr, true);
	if (!p || len > p->p_filesz - (vaddr - p->p_vaddr))
		return -ENOENT;
	n = pread(e->fd, buf, len, (off_t)(vaddr - p->p_vaddr + p->p_offset));
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

int ct_elf_endbr_len(struct ct_elf *e, uint64_t vaddr)
{
	static const unsigned char endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};
	unsigned char b[4];
	int err;

	if (!e || e->ehdr.e_machine != EM_X86_64)
		return 0;
	err = ct_elf_read_vaddr(e, vaddr, b, sizeof(b));
	if (err)
		return err;
	return memcmp(b, endbr64, sizeof(b)) == 0 ? 4 : 0;
}

/* ---- resolution ---- */

struct want_state {
	const struct ct_sym_want *w;
	size_t base_len;     /* of w->name before any '@' */
	const char *version; /* wanted version, or NULL for "the default" */
	bool want_default;   /* "name@@VER" */
	int needles[CT_WANT_NEEDLES];
	int nneedles;
	int best_rank; /* -1 while nothing matched */
	const char *best_name;
	size_t best_base_len;
	uint64_t addrs[CT_MAX_ADDRS];
	int naddrs, extra_addrs;
	const char *aliases[CT_MAX_ALIASES];
	size_t alias_lens[CT_MAX_ALIASES];
	int naliases;
};

struct resolve_ctx {
	struct want_state *ws;
	size_t n;
	struct ct_sym_found *found;
	char needles[CT_MAX_NEEDLES][CT_NEEDLE_LEN];
	int needle_users[CT_MAX_NEEDLES];
	int nneedles;
	/* Per-symbol memo: which needles were looked for (gen) and found (hit). */
	unsigned int gen;
	unsigned int needle_gen[CT_MAX_NEEDLES];
	bool needle_hit[CT_MAX_NEEDLES];
	char *qual; /* the current symbol's qualified name, demangled at most once */
	bool qual_done;
	char *mbuf; /* base copy of a versioned mangled name */
	size_t mbuf_len;
	int err;
};

static int add_needle(struct resolve_ctx *rc, const char *needle)
{
	int i;

	if (strlen(needle) >= CT_NEEDLE_LEN)
		return -1; /* too long to be worth it; the demangled comparison still decides */
	for (i = 0; i < rc->nneedles; i++)
		if (strcmp(rc->needles[i], needle) == 0)
			goto used;
	if (rc->nneedles == CT_MAX_NEEDLES)
		return -1;
	snprintf(rc->needles[rc->nneedles++], CT_NEEDLE_LEN, "%s", needle);
used:
	rc->needle_users[i]++;
	return i;
}

static bool ident_piece(const char *p, size_t len)
{
	size_t i;

	if (!len || (p[0] >= '0' && p[0] <= '9'))
		return false;
	for (i = 0; i < len; i++) {
		char c = p[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return false;
	}
	return true;
}

/*
 * Each identifier of "a::b::c" is spelled "<len><id>" somewhere in the mangled name
 * (later uses may be substitutions, the first never is), so a symbol lacking one
 * cannot match and is not demangled. "std" is skipped ("St"), as are operators and
 * other pieces with no plain spelling; "(anonymous namespace)" is "_GLOBAL__N_1".
 */
static void plan_needles(struct resolve_ctx *rc, struct want_state *ws)
{
	const char *p = ws->w->name, *end = p + ws->base_len;

	while (p < end && ws->nneedles < CT_WANT_NEEDLES) {
		const char *q = p;
		size_t len;
		int depth = 0, idx = -1;

		while (q < end && !(depth == 0 && q[0] == ':' && q[1] == ':')) {
			if (*q == '(' || *q == '<' || *q == '{')
				depth++;
			else if ((*q == ')' || *q == '>' || *q == '}') && depth > 0)
				depth--;
			q++;
		}
		len = q - p;
		if (len == 21 && strncmp(p, "(anonymous namespace)", 21) == 0) {
			idx = add_needle(rc, "_GLOBAL__N_1");
		} else if (ident_piece(p, len) && !(len == 3 && strncmp(p, "std", 3) == 0) &&
			   !(len >= 8 && strncmp(p, "operator", 8) == 0 &&
			     !ident_piece(p + 8, 1))) {
			char buf[CT_NEEDLE_LEN];
			int m = snprintf(buf, sizeof(buf), "%zu%.*s", len, (int)len, p);

			if (m > 0 && (size_t)m < sizeof(buf))
				idx = add_needle(rc, buf);
		}
		if (idx >= 0) {
			int i;

			for (i = 0; i < ws->nneedles; i++)
				if (ws->needles[i] == idx)
					break;
			if (i == ws->nneedles)
				ws->needles[ws->nneedles++] = idx;
		}
		p = q < end ? q + 2 : end;
	}
}

/* Most shared needle first: for 15 c10d wants one strstr("4c10d") rejects most symbols. */
static void order_needles(struct resolve_ctx *rc, struct want_state *ws)
{
	int i, j;

	for (i = 1; i < ws->nneedles; i++) {
		int v = ws->needles[i];

		for (j = i; j > 0; j--) {
			int u = ws->needles[j - 1];

			if (rc->needle_users[u] > rc->needle_users[v] ||
			    (rc->needle_users[u] == rc->needle_users[v] &&
			     strlen(rc->needles[u]) >= strlen(rc->needles[v])))
				break;
			ws->needles[j] = u;
		}
		ws->needles[j] = v;
	}
}

static bool needle_in(struct resolve_ctx *rc, int idx, const char *name)
{
	if (rc->needle_gen[idx] != rc->gen) {
		rc->needle_gen[idx] = rc->gen;
		rc->needle_hit[idx] = strstr(name, rc->needles[idx]) != NULL;
	}
	return rc->needle_hit[idx];
}

static const char *sym_qualified(struct resolve_ctx *rc, const struct ct_rawsym *s)
{
	const char *mangled = s->name;

	if (rc->qual_done)
		return rc->qual;
	rc->qual_done = true;
	if (s->name[s->base_len]) {
		if (s->base_len + 1 > rc->mbuf_len) {
			char *nb = realloc(rc->mbuf, s->base_len + 1);

			if (!nb) {
				rc->err = -ENOMEM;
				return NULL;
			}
			rc->mbuf = nb;
			rc->mbuf_len = s->base_len + 1;
		}
		memcpy(rc->mbuf, s->name, s->base_len);
		rc->mbuf[s->base_len] = '\0';
		mangled = rc->mbuf;
	}
	rc->qual = ct_demangle_qualified(mangled);
	return rc->qual;
}

static int sym_rank(const struct ct_rawsym *s)
{
	int bind = GELF_ST_BIND(s->sym.st_info), r = s->hidden ? 0 : 4;

	if (bind == STB_GLOBAL || bind == STB_GNU_UNIQUE)
		r += 2;
	else if (bind == STB_WEAK)
		r += 1;
	return r;
}

static bool type_ok(const struct ct_sym_want *w, const GElf_Sym *sym)
{
	int type = GELF_ST_TYPE(sym->st_info);

	if (w->object)
		return type == STT_OBJECT;
	return type == STT_FUNC || type == STT_GNU_IFUNC;
}

static bool version_ok(const struct want_state *ws, const struct ct_rawsym *s)
{
	if (!ws->version)
		return true;
	if (!s->version || strcmp(s->version, ws->version) != 0)
		return false;
	return !ws->want_default || !s->hidden;
}

static bool want_matches(struct resolve_ctx *rc, struct want_state *ws, const struct ct_rawsym *s)
{
	const char *q;
	int i;

	if (!ws->w->cxx)
		return s->base_len == ws->base_len &&
		       memcmp(s->name, ws->w->name, ws->base_len) == 0;
	/* Clones (".cold", ".isra.0", ".constprop.0") are not the function's entry. */
	if (s->name[0] != '_' || s->name[1] != 'Z' || memchr(s->name, '.', s->base_len))
		return false;
	for (i = 0; i < ws->nneedles; i++)
		if (!needle_in(rc, ws->needles[i], s->name))
			return false;
	q = sym_qualified(rc, s);
	return q && strlen(q) == ws->base_len && memcmp(q, ws->w->name, ws->base_len) == 0;
}

static void note_match(struct resolve_ctx *rc, size_t k, const struct ct_rawsym *s)
{
	struct want_state *ws = &rc->ws[k];
	struct ct_sym_found *f = &rc->found[k];
	uint64_t addr = s->sym.st_value;
	int i, rank = sym_rank(s);

	for (i = 0; i < ws->naddrs; i++)
		if (ws->addrs[i] == addr)
			break;
	if (i == ws->naddrs) {
		if (ws->naddrs < CT_MAX_ADDRS)
			ws->addrs[ws->naddrs++] = addr;
		else
			ws->extra_addrs++;
	}
	if (rank <= ws->best_rank)
		return;
	ws->best_rank = rank;
	ws->best_name = s->name;
	ws->best_base_len = s->base_len;
	f->addr = addr;
	f->size = s->sym.st_size;
	snprintf(f->symbol, sizeof(f->symbol), "%.*s", (int)s->base_len, s->name);
}

static int resolve_one(struct ct_elf *e, const struct ct_rawsym *s, void *ctx)
{
	struct resolve_ctx *rc = ctx;
	size_t k;

	rc->gen++;
	rc->qual_done = false;
	for (k = 0; k < rc->n; k++) {
		struct want_state *ws = &rc->ws[k];

		if (type_ok(ws->w, &s->sym) && version_ok(ws, s) && want_matches(rc, ws, s))
			note_match(rc, k, s);
		if (rc->err)
			break;
	}
	free(rc->qual);
	rc->qual = NULL;
	return rc->err;
}

/* Second walk, addresses only: the other names defined where each chosen symbol is. */
static int count_aliases(struct ct_elf *e, const struct ct_rawsym *s, void *ctx)
{
	struct resolve_ctx *rc = ctx;
	size_t k;
	int i;

	for (k = 0; k < rc->n; k++) {
		struct want_state *ws = &rc->ws[k];

		if (ws->best_rank < 0 || s->sym.st_value != rc->found[k].addr ||
		    !type_ok(ws->w, &s->sym))
			continue;
		if (s->base_len == ws->best_base_len &&
		    memcmp(s->name, ws->best_name, s->base_len) == 0)
			continue;
		for (i = 0; i < ws->naliases; i++)
			if (ws->alias_lens[i] == s->base_len &&
			    memcmp(ws->aliases[i], s->name, s->base_len) == 0)
				break;
		if (i == ws->naliases && ws->naliases < CT_MAX_ALIASES) {
			ws->aliases[ws->naliases] = s->name;
			ws->alias_lens[ws->naliases++] = s->base_len;
		}
	}
	return 0;
}

int ct_elf_resolve(struct ct_elf *e, const struct ct_sym_want *wants, size_t n,
		   struct ct_sym_found *found)
{
	struct resolve_ctx *rc;
	size_t k;
	int ret, nfound = 0;

	if (!e || (n && (!wants || !found)))
		return -EINVAL;
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return -ENOMEM;
	rc->ws = calloc(n ? n : 1, sizeof(*rc->ws));
	if (!rc->ws) {
		free(rc);
		return -ENOMEM;
	}
	rc->n = n;
	rc->found = found;
	for (k = 0; k < n; k++) {
		struct want_state *ws = &rc->ws[k];
		const char *at;

		memset(&found[k], 0, sizeof(found[k]));
		ws->w = &wants[k];
		ws->best_rank = -1;
		if (!wants[k].name || !wants[k].name[0]) {
			ws->best_rank = -2; /* never matches: an empty name is a caller bug */
			ws->base_len = 0;
			continue;
		}
		at = strchr(wants[k].name, '@');
		ws->base_len = at ? (size_t)(at - wants[k].name) : strlen(wants[k].name);
		if (at) {
			ws->want_default = at[1] == '@';
			ws->version = at + (ws->want_default ? 2 : 1);
		}
		if (wants[k].cxx)
			plan_needles(rc, ws);
	}
	for (k = 0; k < n; k++)
		order_needles(rc, &rc->ws[k]);

	ret = walk_syms(e, resolve_one, rc);
	if (!ret)
		ret = walk_syms(e, count_aliases, rc);
	for (k = 0; !ret && k < n; k++) {
		struct want_state *ws = &rc->ws[k];
		struct ct_sym_found *f = &found[k];

		if (ws->best_rank < 0)
			continue;
		if (ct_elf_vaddr_to_off(e, f->addr, &f->file_off))
			continue; /* not in any PT_LOAD: nothing to probe */
		f->found = true;
		f->n_aliases = ws->naliases;
		f->n_overloads = ws->naddrs + ws->extra_addrs - 1;
		nfound++;
	}
	free(rc->qual);
	free(rc->mbuf);
	free(rc->ws);
	free(rc);
	return ret ? ret : nfound;
}
