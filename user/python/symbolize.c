// SPDX-License-Identifier: MIT
/* Python code objects to names and lines, read from the target with process_vm_readv. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "commtrace/pyoffsets.h"
#include "python/linetable.h"
#include "python/pyproc.h"
#include "python/symbolize.h"
#include "tree.h"
#include "util/hash.h"
#include "util/intern.h"

#define PY_TYPE_SLOTS	64  /* processes whose str/code/bytes type pointers are remembered */
#define PY_CODE_HDR_MAX 512 /* the code object fields read are below 256 in 3.10-3.13 */
#define PY_STR_HDR_MAX	128 /* sizeof(PyCompactUnicodeObject): 72 in 3.10/3.11, 56 after */
#define PY_TPNAME_MAX	64  /* "str", "code", "bytes"; a class name may be truncated */

enum py_kind { PY_STR, PY_CODE, PY_BYTES, PY_NKINDS };
static const char *const py_kind_name[PY_NKINDS] = {"str", "code", "bytes"};

struct type_slot {
	pid_t pid;
	uint64_t type[PY_NKINDS]; /* 0 until validated by tp_name */
};

struct entry {
	pid_t pid; /* 0: free */
	int32_t next;
	uint8_t ref;
	bool lt_done; /* the line table was read (lt NULL: unavailable) */
	bool told;    /* handed out as fresh once (ct_pyframe.fresh) */
	bool noted;   /* counted as unverifiable */
	/* The line of the instruction seen last: a loop's frames sit at the same call each time,
	 * and decoding the line table was half of the reader's time per stack. */
	bool last_ok;
	uint64_t last_instr;
	int last_line;
	uint64_t code;
	/* What a hit re-reads and compares: an address reused by another object differs. */
	uint64_t type, name_ptr, file_ptr, lt_ptr;
	uint32_t version;	/* co_version (3.12+), else 0 */
	uint64_t ident, ident2; /* for BPF (struct ct_pycode_val) */
	bool ident_ok;		/* something tells a reuse apart: a version, a name or file ident */
	bool plain_first;	/* its first local is never a cell (ct_pyframe.plain_first) */
	uint64_t deaths;	/* ct_py_symbolize_since: 1 + its deaths count when last read */
	int32_t firstlineno;
	uint32_t lt_len;
	uint8_t *lt;
	char qualname[CT_PY_NAME_MAX];
	char filename[CT_PY_FILE_MAX];
	const char *iqualname, *ifilename; /* the same, interned once (ct_intern) */
};

struct ct_pysym_cache {
	unsigned int cap, nused, hand, nbuckets;
	int32_t *buckets;
	struct entry *e;
	struct ct_pysym_stats st;
	struct type_slot types[PY_TYPE_SLOTS];
	unsigned int type_next;
	ct_pysym_forget_fn *forget;
	void *forget_ctx;
};

/* Read a NUL-terminated string without crossing into a page that may not be mapped. */
static int read_cstr(pid_t pid, uint64_t addr, char *buf, size_t len)
{
	static long page;
	size_t got = 0;

	if (!len)
		return -EINVAL;
	if (!page)
		page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
	while (got + 1 < len) {
		size_t room = (size_t)page - ((addr + got) & (uint64_t)(page - 1));
		size_t want = len - 1 - got < room ? len - 1 - got : room;
		char *nul;
		int err = ct_py_read_mem(pid, addr + got, buf + got, want);

		if (err) {
			buf[got] = '\0';
			return got ? 0 : err;
		}
		nul = memchr(buf + got, '\0', want);
		if (nul)
			return 0;
		got += want;
	}
	buf[got] = '\0';
	return 0;
}

int ct_py_read_cstr(pid_t pid, uint64_t addr, char *buf, size_t len)
{
	return read_cstr(pid, addr, buf, len);
}

static int read_ptr(pid_t pid, uint64_t addr, uint64_t *v)
{
	return ct_py_read_mem(pid, addr, v, sizeof(*v));
}

int ct_py_read_type_name(pid_t pid, const struct ct_py_offsets *o, uint64_t obj, char *buf,
			 size_t len)
{
	uint64_t type, name;
	int err;

	if (!len)
		return -EINVAL;
	buf[0] = '\0';
	err = read_ptr(pid, obj + o->object_type, &type);
	if (!err)
		err = read_ptr(pid, type + o->type_name, &name);
	if (!err)
		err = read_cstr(pid, name, buf, len);
	return err;
}

static struct type_slot *type_slot(struct ct_pysym_cache *c, pid_t pid)
{
	struct type_slot *s;

	if (!c)
		return NULL;
	for (unsigned int i = 0; i < PY_TYPE_SLOTS; i++)
		if (c->types[i].pid == pid)
			return &c->types[i];
	s = &c->types[c->type_next++ % PY_TYPE_SLOTS];
	memset(s, 0, sizeof(*s));
	s->pid = pid;
	return s;
}

/*
 * Is type the interpreter's str/code/bytes type? These are static objects of libpython,
 * so once one pointer is confirmed by its tp_name, a plain compare decides.
 */
static bool is_type(struct ct_pysym_cache *c, pid_t pid, const struct ct_py_offsets *o,
		    uint64_t type, enum py_kind k)
{
	struct type_slot *s = type_slot(c, pid);
	char name[PY_TPNAME_MAX];
	uint64_t np;

	if (s && s->type[k])
		return s->type[k] == type;
	if (!type || read_ptr(pid, type + o->type_name, &np) ||
	    read_cstr(pid, np, name, sizeof(name)) || strcmp(name, py_kind_name[k]))
		return false;
	if (s)
		s->type[k] = type;
	return true;
}

static size_t put_utf8(char *buf, size_t at, size_t len, unsigned int ch)
{
	if (ch < 0x80) {
		if (at + 1 >= len)
			return 0;
		buf[at] = (char)ch;
		return 1;
	}
	if (at + 2 >= len)
		return 0;
	buf[at] = (char)(0xc0 | ch >> 6);
	buf[at + 1] = (char)(0x80 | (ch & 0x3f));
	return 2;
}

/* What tells a str from another at its address: its cached hash (-1: none), its
 * CT_PY_NAME_IDENT. */
struct str_id {
	int64_t hash;
	uint64_t ident;
};

/* *id of the str whose header (hlen bytes from obj) is in hdr. */
static void str_id_of(pid_t pid, const struct ct_py_offsets *o, uint64_t obj,
		      const unsigned char *hdr, size_t hlen, struct str_id *id)
{
	uint64_t chars = 0;
	unsigned int state;
	int64_t n;
	bool ascii;

	memcpy(&n, hdr + o->unicode_length, 8);
	memcpy(&state, hdr + o->unicode_state, 4);
	ascii = (state >> CT_PY_STATE_COMPACT_BIT & 1) && (state >> CT_PY_STATE_ASCII_BIT & 1);
	id->hash = -1;
	if (o->unicode_hash != CT_PY_NONE && (size_t)o->unicode_hash + 8 <= hlen)
		memcpy(&id->hash, hdr + o->unicode_hash, 8);
	if (id->hash == -1 && ascii && n > 0 && n <= 8 &&
	    ct_py_read_mem(pid, obj + o->unicode_ascii_data, &chars, (size_t)n))
		n = 0; /* unreadable: no ident */
	id->ident = o->unicode_hash == CT_PY_NONE || (id->hash == -1 && !ascii)
			? 0
			: CT_PY_NAME_IDENT(id->hash, n, chars);
}

/* A str's struct str_id, read now from obj. */
static int read_str_id(pid_t pid, const struct ct_py_offsets *o, uint64_t obj, struct str_id *id)
{
	unsigned char hdr[PY_STR_HDR_MAX];
	size_t hlen = o->unicode_compact_data;
	int err;

	if (hlen > sizeof(hdr) || (size_t)o->unicode_length + 8 > hlen ||
	    (size_t)o->unicode_state + 4 > hlen)
		return -EINVAL;
	err = ct_py_read_fresh(pid, obj, hdr, hlen);
	if (!err)
		str_id_of(pid, o, obj, hdr, hlen, id);
	return err;
}

/* A str object's text into buf; *id (if not NULL) as above. */
static int read_str(struct ct_pysym_cache *c, pid_t pid, const struct ct_py_offsets *o,
		    uint64_t obj, char *buf, size_t len, struct str_id *id)
{
	unsigned char hdr[PY_STR_HDR_MAX];
	unsigned int state, kind;
	size_t hlen = o->unicode_compact_data, n, at = 0;
	uint64_t type, data;
	int64_t slen;
	int err;

	if (!len)
		return -EINVAL;
	buf[0] = '\0';
	if (hlen > sizeof(hdr) || (size_t)o->object_type + 8 > hlen ||
	    (size_t)o->unicode_length + 8 > hlen || (size_t)o->unicode_state + 4 > hlen)
		return -EINVAL;
	err = ct_py_read_mem(pid, obj, hdr, hlen);
	if (err)
		return err;
	memcpy(&type, hdr + o->object_type, 8);
	memcpy(&slen, hdr + o->unicode_length, 8);
	memcpy(&state, hdr + o->unicode_state, 4);
	if (id)
		str_id_of(pid, o, obj, hdr, hlen, id);
	if (!is_type(c, pid, o, type, PY_STR) || slen < 0)
		return -EINVAL;
	if (!(state >> CT_PY_STATE_COMPACT_BIT & 1))
		return -EINVAL; /* legacy (pre-PEP 393 API) string: never a code object's name */
	kind = state >> CT_PY_STATE_KIND_SHIFT & CT_PY_STATE_KIND_MASK;
	if (kind != 1 && kind != 2 && kind != 4)
		return -EINVAL;
	data = obj + (state >> CT_PY_STATE_ASCII_BIT & 1 ? o->unicode_ascii_data
							 : o->unicode_compact_data);
	n = (size_t)slen < len - 1 ? (size_t)slen : len - 1; /* characters that can fit */
	{
		unsigned char raw[CT_PY_FILE_MAX * 4];

		if (n * kind > sizeof(raw))
			n = sizeof(raw) / kind;
		err = ct_py_read_mem(pid, data, raw, n * kind);
		if (err)
			return err;
		for (size_t i = 0; i < n; i++) {
			unsigned int ch;
			size_t w;

			if (kind == 1)
				ch = raw[i];
			else if (kind == 2)
				ch = raw[2 * i] | (unsigned int)raw[2 * i + 1] << 8;
			else
				ch = raw[4 * i] | (unsigned int)raw[4 * i + 1] << 8 |
				     (unsigned int)raw[4 * i + 2] << 16 |
				     (unsigned int)raw[4 * i + 3] << 24;
			if (kind > 1 && ch >= 0x80)
				ch = '?';
			w = put_utf8(buf, at, len, ch);
			if (!w)
				break;
			at += w;
		}
	}
	buf[at] = '\0';
	return 0;
}

int ct_py_read_str(pid_t pid, const struct ct_py_offsets *o, uint64_t strobj, char *buf, size_t len)
{
	return read_str(NULL, pid, o, strobj, buf, len, NULL);
}

static int read_bytes(struct ct_pysym_cache *c, pid_t pid, const struct ct_py_offsets *o,
		      uint64_t obj, uint8_t **data, uint32_t *dlen)
{
	uint64_t type;
	int64_t size;
	uint8_t *p;
	int err;

	*data = NULL;
	*dlen = 0;
	err = read_ptr(pid, obj + o->object_type, &type);
	if (!err)
		err = ct_py_read_mem(pid, obj + o->bytes_size, &size, sizeof(size));
	if (err)
		return err;
	if (!is_type(c, pid, o, type, PY_BYTES) || size < 0)
		return -EINVAL;
	if (size > CT_PY_LINETABLE_MAX)
		return -E2BIG;
	p = malloc(size ? (size_t)size : 1);
	if (!p)
		return -ENOMEM;
	err = ct_py_read_mem(pid, obj + o->bytes_data, p, (size_t)size);
	if (err) {
		free(p);
		return err;
	}
	*data = p;
	*dlen = (uint32_t)size;
	return 0;
}

/* ---- the cache ---- */

static unsigned int bucket_of(const struct ct_pysym_cache *c, pid_t pid, uint64_t code)
{
	return (unsigned int)ct_hash_mix(code, (uint64_t)(uint32_t)pid) & (c->nbuckets - 1);
}

struct ct_pysym_cache *ct_pysym_cache_new(unsigned int capacity)
{
	struct ct_pysym_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->cap = capacity ? capacity : CT_PYSYM_DEFAULT_CAP;
	c->nbuckets = 1;
	while (c->nbuckets < c->cap * 2)
		c->nbuckets <<= 1;
	c->e = calloc(c->cap, sizeof(*c->e));
	c->buckets = malloc(c->nbuckets * sizeof(*c->buckets));
	if (!c->e || !c->buckets) {
		ct_pysym_cache_free(c);
		return NULL;
	}
	memset(c->buckets, 0xff, c->nbuckets * sizeof(*c->buckets)); /* all -1 */
	return c;
}

static void drop(struct ct_pysym_cache *c, int32_t idx)
{
	struct entry *e = &c->e[idx];
	int32_t *pp = &c->buckets[bucket_of(c, e->pid, e->code)];

	if (e->told && c->forget)
		c->forget(c->forget_ctx, e->pid, e->code);
	while (*pp >= 0 && *pp != idx)
		pp = &c->e[*pp].next;
	if (*pp == idx)
		*pp = e->next;
	c->st.line_bytes -= e->lt_len;
	c->st.entries--;
	free(e->lt);
	memset(e, 0, sizeof(*e));
	e->next = -1;
}

void ct_pysym_cache_free(struct ct_pysym_cache *c)
{
	if (!c)
		return;
	if (c->e)
		for (unsigned int i = 0; i < c->nused; i++)
			free(c->e[i].lt);
	free(c->e);
	free(c->buckets);
	free(c);
}

void ct_pysym_cache_on_forget(struct ct_pysym_cache *c, ct_pysym_forget_fn *fn, void *ctx)
{
	c->forget = fn;
	c->forget_ctx = ctx;
}

void ct_pysym_cache_forget_pid(struct ct_pysym_cache *c, pid_t pid)
{
	for (unsigned int i = 0; i < c->nused; i++)
		if (c->e[i].pid == pid)
			drop(c, (int32_t)i);
	for (unsigned int i = 0; i < PY_TYPE_SLOTS; i++)
		if (c->types[i].pid == pid)
			memset(&c->types[i], 0, sizeof(c->types[i]));
}

void ct_pysym_cache_stats(const struct ct_pysym_cache *c, struct ct_pysym_stats *st)
{
	*st = c->st;
}

/*
 * Second-chance clock over the used slots: the first entry not referenced since the last
 * sweep (a free slot is taken as is). keep is never chosen. -1 if nothing can be.
 */
static int32_t clock_victim(struct ct_pysym_cache *c, int32_t keep)
{
	/* Two sweeps at most: the first clears every reference bit it passes. */
	for (unsigned int n = 0; n < 2 * c->nused + 1; n++) {
		int32_t i = (int32_t)(c->hand++ % c->nused);
		struct entry *e = &c->e[i];

		if (i == keep)
			continue;
		if (!e->pid)
			return i;
		if (e->ref) {
			e->ref = 0;
			continue;
		}
		drop(c, i);
		c->st.evictions++;
		return i;
	}
	return -1;
}

/* A slot for a new entry: never-used ones first, then the clock. */
static int32_t take_slot(struct ct_pysym_cache *c)
{
	if (c->nused < c->cap)
		return (int32_t)c->nused++;
	return clock_victim(c, -1);
}

static int32_t lookup(struct ct_pysym_cache *c, pid_t pid, uint64_t code)
{
	for (int32_t i = c->buckets[bucket_of(c, pid, code)]; i >= 0; i = c->e[i].next)
		if (c->e[i].pid == pid && c->e[i].code == code)
			return i;
	return -1;
}

struct code_hdr {
	uint64_t type, name_ptr, file_ptr, lt_ptr;
	uint64_t co_name; /* co_name: on 3.11 name_ptr is co_qualname */
	uint64_t kinds;	  /* co_localspluskinds (3.11+), else 0 */
	int32_t firstlineno;
	uint32_t version; /* 0 where there is none */
};

static __u16 code_name_off(const struct ct_py_offsets *o)
{
	return o->code_qualname != CT_PY_NONE ? o->code_qualname : o->code_name;
}

/* The bytes of a code object's head that hold the fields of struct code_hdr. */
static size_t code_hdr_len(const struct ct_py_offsets *o)
{
	__u16 offs[] = {o->object_type,	   code_name_off(o),	   o->code_filename,
			o->code_linetable, o->code_firstlineno,	   o->code_version,
			o->code_name,	   o->code_localspluskinds};
	size_t end = 0;

	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		if (offs[i] != CT_PY_NONE && (size_t)offs[i] + 8 > end)
			end = (size_t)offs[i] + 8;
	return end;
}

static void parse_code_hdr(const struct ct_py_offsets *o, const unsigned char *buf,
			   struct code_hdr *h)
{
	memcpy(&h->type, buf + o->object_type, 8);
	memcpy(&h->name_ptr, buf + code_name_off(o), 8);
	memcpy(&h->file_ptr, buf + o->code_filename, 8);
	memcpy(&h->lt_ptr, buf + o->code_linetable, 8);
	memcpy(&h->firstlineno, buf + o->code_firstlineno, 4);
	memcpy(&h->co_name, buf + o->code_name, 8);
	h->version = 0;
	if (o->code_version != CT_PY_NONE)
		memcpy(&h->version, buf + o->code_version, 4);
	h->kinds = 0;
	if (o->code_localspluskinds != CT_PY_NONE)
		memcpy(&h->kinds, buf + o->code_localspluskinds, 8);
}

static int read_code_hdr(pid_t pid, const struct ct_py_offsets *o, uint64_t code,
			 struct code_hdr *h)
{
	unsigned char buf[PY_CODE_HDR_MAX];
	size_t end = code_hdr_len(o);
	int err;

	if (end > sizeof(buf))
		return -EINVAL;
	err = ct_py_read_mem(pid, code, buf, end);
	if (err)
		return err;
	parse_code_hdr(o, buf, h);
	return 0;
}

/* 3.10/3.11: do h's co_name and file name have v's ident and ident2 (0: not compared)? */
static int code_strs_are(pid_t pid, const struct ct_py_offsets *o, const struct code_hdr *h,
			 const struct ct_pycode_val *v)
{
	struct str_id name = {-1, 0}, file = {-1, 0};
	int err;

	if (!v->ident && !v->ident2)
		return 0; /* nothing tells it from another at its address */
	err = v->ident ? read_str_id(pid, o, h->co_name, &name) : 0;
	if (!err && v->ident2)
		err = read_str_id(pid, o, h->file_ptr, &file);
	if (err)
		return err;
	return (!v->ident || name.ident == v->ident) &&
	       (!v->ident2 || (uint64_t)file.hash == v->ident2);
}

int ct_py_code_is(pid_t pid, const struct ct_py_offsets *o, uint64_t code_type, uint64_t code,
		  const struct ct_pycode_val *v)
{
	unsigned char buf[PY_CODE_HDR_MAX];
	size_t end = code_hdr_len(o);
	struct code_hdr h;
	uint64_t refcnt;
	int err;

	if (end > sizeof(buf) || !code_type)
		return -EINVAL;
	err = ct_py_read_fresh(pid, code, buf, end);
	if (err)
		return err;
	parse_code_hdr(o, buf, &h);
	/*
	 * Alive, not only alike: a freed code object's memory still holds its fields until
	 * reused, but the allocator has written its free list into the head (pymalloc: the
	 * first word, a pointer or NULL; glibc: the first two).
	 */
	memcpy(&refcnt, buf, sizeof(refcnt));
	if (h.type != code_type || refcnt < 1 || refcnt > UINT32_MAX || h.name_ptr != v->name ||
	    h.file_ptr != v->filename || h.lt_ptr != v->linetable ||
	    h.firstlineno != v->firstlineno)
		return 0;
	if (o->code_version != CT_PY_NONE)
		return h.version == v->ident;
	/* 3.10/3.11: what BPF checks at each stack, co_name's ident and the file's hash */
	return code_strs_are(pid, o, &h, v);
}

/* Is the first local of a code object neither a cell nor a free variable? kinds: its
 * co_localspluskinds (3.11+; 0 before, or unread: false), read from a checked code object. */
static bool first_local_plain(pid_t pid, const struct ct_py_offsets *o, uint64_t kinds)
{
	int64_t size = 0;
	uint8_t kind;

	return kinds && !ct_py_read_mem(pid, kinds + o->bytes_size, &size, sizeof(size)) &&
	       size >= 1 && !ct_py_read_mem(pid, kinds + o->bytes_data, &kind, 1) &&
	       !(kind & o->fast_cell_kinds);
}

static int fill_entry(struct ct_pysym_cache *c, pid_t pid, const struct ct_py_offsets *o,
		      uint64_t code, const struct code_hdr *h, struct entry *e)
{
	int err;

	if (!is_type(c, pid, o, h->type, PY_CODE))
		return -EINVAL;
	struct str_id name_id = {-1, 0}, file_id = {-1, 0};

	err = read_str(c, pid, o, h->name_ptr, e->qualname, sizeof(e->qualname), &name_id);
	if (!err)
		err = read_str(c, pid, o, h->file_ptr, e->filename, sizeof(e->filename), &file_id);
	if (err)
		return err;
	e->version = h->version;
	if (o->code_version != CT_PY_NONE) {
		e->ident = h->version;
		e->ident2 = 0;
		e->ident_ok = h->version != 0; /* 0: the counter ran out, versions repeat */
	} else {
		/* co_name's ident (an identifier's hash is computed when it is interned) and
		 * co_filename's hash, where Python computed it (0: not compared); one at least. */
		char co_name[CT_PY_NAME_MAX];

		if (h->co_name != h->name_ptr &&
		    read_str(c, pid, o, h->co_name, co_name, sizeof(co_name), &name_id))
			name_id.ident = 0;
		e->ident = name_id.ident;
		e->ident2 = file_id.hash == -1 ? 0 : (uint64_t)file_id.hash;
		e->ident_ok = o->unicode_hash != CT_PY_NONE && (e->ident || e->ident2);
	}
	e->pid = pid;
	e->code = code;
	e->type = h->type;
	e->name_ptr = h->name_ptr;
	e->file_ptr = h->file_ptr;
	e->lt_ptr = h->lt_ptr;
	e->firstlineno = h->firstlineno;
	e->plain_first = first_local_plain(pid, o, h->kinds);
	e->iqualname = e->ifilename = NULL; /* interned at first use */
	return 0;
}

static void load_linetable(struct ct_pysym_cache *c, pid_t pid, const struct ct_py_offsets *o,
			   int32_t idx)
{
	struct entry *e = &c->e[idx];
	uint8_t *lt;
	uint32_t n;

	e->lt_done = true;
	if (read_bytes(c, pid, o, e->lt_ptr, &lt, &n))
		return;
	/* Keep all tables within a budget; the entry being filled is never the victim. */
	while (c->st.line_bytes + n > CT_PYSYM_LINE_BYTES && c->st.line_bytes)
		if (clock_victim(c, idx) < 0)
			break;
	e->lt = lt;
	e->lt_len = n;
	c->st.line_bytes += n;
}

static int64_t lasti_of(const struct ct_py_offsets *o, uint64_t code, uint64_t instr)
{
	uint64_t start;

	if (o->instr_is_index)
		return (int32_t)instr; /* 3.10 f_lasti: an int, -1 before the first instruction */
	start = code + o->code_adaptive;
	/*
	 * 3.11/3.12 prev_instr: the last code unit executed (for an inlined Python call, the
	 * CALL's last inline cache entry); 3.13 instr_ptr: the instruction executing (the
	 * CALL itself for every frame below the top of a running stack; only a suspended
	 * generator's points past its YIELD_VALUE). Either lies inside the calling
	 * instruction's location entry, so it is decoded as is, as CPython's own
	 * PyFrame_GetLineNumber does. prev_instr is start - 1 before the first instruction.
	 */
	if (instr < start)
		return -1;
	return (int64_t)((instr - start) / 2);
}

/* out from the cached entry idx: names, first line and the line executing at instr. */
static void fill_out(struct ct_pysym_cache *c, pid_t pid, const struct ct_py_offsets *o,
		     int32_t idx, uint64_t instr, struct ct_pyframe *out)
{
	struct entry *e = &c->e[idx];

	e->ref = 1;
	if (!e->lt_done)
		load_linetable(c, pid, o, idx);
	e = &c->e[idx];
	if (!e->iqualname) {
		e->iqualname = ct_intern(e->qualname);
		e->ifilename = ct_intern(e->filename);
	}
	out->qualname = e->iqualname;
	out->filename = e->ifilename;
	out->firstlineno = e->firstlineno;
	if (!e->last_ok || e->last_instr != instr) {
		e->last_line = ct_py_linetable_line(o->minor, e->lt, e->lt_len, e->firstlineno,
						    lasti_of(o, e->code, instr));
		e->last_instr = instr;
		e->last_ok = e->lt_done;
	}
	out->line = e->last_line;
	if (out->line < 0)
		c->st.line_unknown++;
	out->known = (struct ct_pycode_val){.name = e->name_ptr,
					    .filename = e->file_ptr,
					    .linetable = e->lt_ptr,
					    .ident = e->ident,
					    .ident2 = e->ident2,
					    .firstlineno = e->firstlineno};
	out->plain_first = e->plain_first;
	out->fresh = !e->told && e->ident_ok;
	if (out->fresh)
		e->told = true;
	else if (!e->ident_ok && !e->noted) {
		e->noted = true;
		c->st.unverifiable++;
	}
}

/* The rest of ct_py_symbolize(), once the code object's head h is read. */
static int symbolize_hdr(struct ct_pysym_cache *c, pid_t pid, const struct ct_py_offsets *o,
			 uint64_t code, uint64_t instr, uint64_t ident, const struct code_hdr *hp,
			 struct ct_pyframe *out)
{
	struct code_hdr h = *hp;
	struct entry *e;
	int32_t idx;
	int err;

	idx = lookup(c, pid, code);
	if (idx >= 0) {
		e = &c->e[idx];
		if (e->type == h.type && e->name_ptr == h.name_ptr && e->file_ptr == h.file_ptr &&
		    e->lt_ptr == h.lt_ptr && e->firstlineno == h.firstlineno &&
		    e->version == h.version) {
			c->st.hits++;
		} else {
			c->st.stale++;
			drop(c, idx);
			idx = -1;
		}
	}
	if (idx < 0) {
		c->st.misses++;
		idx = take_slot(c);
		if (idx < 0) {
			c->st.errors++;
			return -ENOMEM;
		}
		e = &c->e[idx];
		err = fill_entry(c, pid, o, code, &h, e);
		if (err) {
			memset(e, 0, sizeof(*e));
			c->st.errors++;
			return err;
		}
		unsigned int b = bucket_of(c, pid, code);

		e->next = c->buckets[b];
		c->buckets[b] = idx;
		c->st.entries++;
	}
	/* The object at the address now is another than the one the frame ran: it was freed
	 * and its memory reused since the capture. Not named at all rather than wrongly. */
	if (ident && c->e[idx].ident && c->e[idx].ident != ident) {
		c->st.reused++;
		return -ESTALE;
	}
	fill_out(c, pid, o, idx, instr, out);
	return 0;
}

/* ct_py_symbolize() of a frame BPF sent: ident, which object the frame ran (0: unknown). */
static int symbolize_one(struct ct_pysym_cache *c, pid_t pid, const struct ct_py_offsets *o,
			 uint64_t code, uint64_t instr, uint64_t ident, struct ct_pyframe *out)
{
	struct code_hdr h;
	int err;

	memset(out, 0, sizeof(*out));
	out->line = -1;
	if (!code || !pid) {
		c->st.errors++;
		return -EINVAL;
	}
	err = read_code_hdr(pid, o, code, &h);
	if (err) {
		c->st.errors++;
		return err;
	}
	return symbolize_hdr(c, pid, o, code, instr, ident, &h, out);
}

int ct_py_symbolize(struct ct_pysym_cache *c, pid_t pid, const struct ct_py_offsets *o,
		    uint64_t code, uint64_t instr, struct ct_pyframe *out)
{
	return symbolize_one(c, pid, o, code, instr, 0, out);
}

int ct_py_symbolize_since(struct ct_pysym_cache *c, pid_t pid, const struct ct_py_offsets *o,
			  uint64_t code, uint64_t instr, uint64_t deaths, struct ct_pyframe *out)
{
	int32_t idx = code && pid ? lookup(c, pid, code) : -1;
	int err;

	if (idx >= 0 && c->e[idx].deaths == deaths + 1) {
		/* no code object has died since this one was last read: it is that one */
		memset(out, 0, sizeof(*out));
		out->line = -1;
		c->st.hits++;
		fill_out(c, pid, o, idx, instr, out);
		return 0;
	}
	err = symbolize_one(c, pid, o, code, instr, 0, out);
	idx = err ? -1 : lookup(c, pid, code);
	if (idx >= 0)
		c->e[idx].deaths = deaths + 1;
	return err;
}

void ct_py_symbolize_many(struct ct_pysym_cache *c, pid_t pid, const struct ct_py_offsets *o,
			  const struct ct_pyframe_raw *raw, int n, bool checked,
			  struct ct_pyframe *out, int *rc)
{
	unsigned char buf[CT_PY_MAX_FRAMES][PY_CODE_HDR_MAX];
	struct iovec local[CT_PY_MAX_FRAMES], remote[CT_PY_MAX_FRAMES];
	size_t len = code_hdr_len(o), done = 0;
	int idx[CT_PY_MAX_FRAMES], k = 0; /* idx[0..k) */
	ssize_t got = -1;

	if (n > CT_PY_MAX_FRAMES)
		n = CT_PY_MAX_FRAMES;
	/* One process_vm_readv for the heads of every frame's code object not checked. */
	for (int i = 0; i < n; i++) {
		int32_t hit;

		if (raw[i].ident == CT_PY_IDENT_UNREAD) {
			/* BPF could not read the code object the frame ran: the one there now
			 * may be another. Not read at all. */
			memset(&out[i], 0, sizeof(out[i]));
			out[i].line = -1;
			c->st.unread++;
			rc[i] = -ESTALE;
			continue;
		}
		hit = checked && raw[i].code ? lookup(c, pid, raw[i].code) : -1;
		if (hit >= 0) {
			fill_out(c, pid, o, hit, raw[i].instr, &out[i]); /* sets every field */
			c->st.checked_hits++;
			rc[i] = 0;
			continue;
		}
		c->st.checked_misses += checked;
		rc[i] = 1; /* to do below */
		if (!raw[i].code || len > PY_CODE_HDR_MAX)
			continue;
		local[k] = (struct iovec){.iov_base = buf[k], .iov_len = len};
		remote[k] =
		    (struct iovec){.iov_base = (void *)(uintptr_t)raw[i].code, .iov_len = len};
		idx[k++] = i;
	}
	if (k && pid)
		got = process_vm_readv(pid, local, (unsigned long)k, remote, (unsigned long)k, 0);
	if (got > 0)
		done = (size_t)got / len; /* it stops at the first head it cannot read */
	for (int i = 0, j = 0; i < n; i++) {
		struct code_hdr h;

		if (rc[i] != 1)
			continue; /* checked in BPF at capture and found cached, or unread */
		if (j < k && idx[j] == i && (size_t)j < done) {
			memset(&out[i], 0, sizeof(out[i]));
			out[i].line = -1;
			parse_code_hdr(o, buf[j++], &h);
			rc[i] = symbolize_hdr(c, pid, o, raw[i].code, raw[i].instr, raw[i].ident,
					      &h, &out[i]);
			continue;
		}
		if (j < k && idx[j] == i)
			j++;
		rc[i] = symbolize_one(c, pid, o, raw[i].code, raw[i].instr, raw[i].ident, &out[i]);
	}
}
