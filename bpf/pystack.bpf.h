/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The CPython frame walker: at a collective, the calling thread's Python
 * frames as (code object, instruction, first local) triples, innermost first.
 * Strings are never read here; user space resolves the pointers once and
 * caches them (user/python/).
 *
 * The thread's PyThreadState is found without the GIL (c10d releases it before
 * the collective, so the runtime's "current" thread state is someone else's):
 * the interpreter's thread list is searched for the entry whose
 * native_thread_id is this thread (3.11+) or whose thread_id, the pthread_t,
 * equals this thread's fs base (3.10: glibc's pthread_self() is the TCB that fs
 * points to). The result is cached per thread and re-validated at each use.
 */
#ifndef CT_PYSTACK_BPF_H
#define CT_PYSTACK_BPF_H

#include "commtrace/pyabi.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tgid */
	__type(value, struct ct_pyproc_bpf);
} pyprocs SEC(".maps");

/* Code objects user space has resolved (struct ct_pycode_val); LRU: run-time code cannot fill it.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct ct_pycode_key);
	__type(value, struct ct_pycode_val);
} pycodes SEC(".maps");

/*
 * Bumped after each code object's deallocation (ct_code_free) and each change user space
 * makes to pycodes: a copy of a held entry (codecache) made at an older count is not used.
 */
volatile __u64 ct_code_gen = 0;

/*
 * What the walker uses of held pycodes entries (their flags and ident), per CPU, by code
 * object address: where most frames of a stack are the same functions call after call, one
 * look here instead of a hash lookup in a table of 64k entries, whose buckets are cold
 * between collectives. Two ways a set: the 40 distinct code objects of a stack met 8
 * conflicts a walk in a direct-mapped cache of 256 slots, each a hash lookup.
 */
#define CT_CODE_SETS 512
#define CT_CODE_WAYS 2

struct code_cache_slot {
	__u64 code, gen, ident;
	__u32 tgid, flags;
};

struct code_cache {
	struct code_cache_slot e[CT_CODE_SETS][CT_CODE_WAYS]; /* way 0: the newer */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct code_cache);
} codecache SEC(".maps");

/*
 * What the last walk on this CPU found of each frame's code object, by depth: its flags
 * where it was held (CT_PYC_HELD), else 0; gen: ct_code_gen when that walk began. Where
 * the buffer walked into still holds the thread's last stack (walk_python's last_n,
 * bpf/stackshare.bpf.h) and gen has not moved since (no code object died, user space
 * changed no entry), a frame whose code object is the held one at the same depth there is
 * that object, alive: its ident is that frame's, its flags these, without a look in
 * codecache. A framework's stacks are the same distinct functions call after call, each
 * its own line of codecache; here they are 4 bytes a frame, in order. A call's walk (into
 * callbuf) and an op's (into another buffer, with no last stack) each have their own: an
 * op's walk between two calls must not leave its stack's flags for the second.
 */
enum { CT_LC_CALL, CT_LC_OP, CT_LC_SLOTS };

struct last_codes {
	__u64 gen;
	__u32 flags[CT_PY_MAX_FRAMES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CT_LC_SLOTS);
	__type(key, __u32);
	__type(value, struct last_codes);
} lastcodes SEC(".maps");

/* tid → PyThreadState, validated before use. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} tstates SEC(".maps");

static __always_inline __u64 rd64(__u64 addr)
{
	__u64 v = 0;

	if (addr)
		bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

/*
 * What the cell obj holds (PyCellObject.ob_ref, right after its type), or obj when it is
 * not a cell: its type and the word after it in one read. A cell is 24 bytes, so that read
 * fails only for something that is not one.
 */
static __always_inline __u64 uncell(__u64 obj, __u16 type_off, __u64 cell_type)
{
	__u64 w[2];

	if (obj && cell_type && !bpf_probe_read_user(w, sizeof(w), (void *)(obj + type_off)) &&
	    w[0] == cell_type)
		return w[1];
	return obj;
}

/* Is ts the thread state of the current thread? */
static __always_inline bool tstate_is_mine(const struct ct_py_offsets *o, __u64 ts, __u32 tid,
					   __u64 fsbase)
{
	if (!ts)
		return false;
	if (o->tstate_native_tid != CT_PY_NONE)
		return rd64(ts + o->tstate_native_tid) == tid;
	if (o->tstate_thread_id != CT_PY_NONE)
		return rd64(ts + o->tstate_thread_id) == fsbase;
	return false;
}

struct find_ts {
	const struct ct_py_offsets *o;
	__u64 ts, found, fsbase;
	__u32 tid;
};

static long find_ts_cb(__u64 i, void *data)
{
	struct find_ts *f = data;

	if (!f->ts)
		return 1;
	if (tstate_is_mine(f->o, f->ts, f->tid, f->fsbase)) {
		f->found = f->ts;
		return 1;
	}
	f->ts = rd64(f->ts + f->o->tstate_next);
	return 0;
}

/*
 * One value an op got or returned: its type and, where torch's layout is known, the
 * TensorImpl fields behind a THPVariable (MaybeOwned<at::Tensor>: owned, the union holds
 * the TensorImpl *; borrowed, an at::Tensor * to it). Read blindly: for an object that is
 * not a tensor the reads fail or give values user space discards by the type.
 */
static __always_inline void describe_val(const struct ct_pyproc_bpf *pp, __u64 obj,
					 struct ct_op_val *v)
{
	const struct ct_pyvals_bpf *pv = &pp->vals;
	__u64 impl, src;
	__u8 borrowed = 0;

	v->obj = obj;
	if (!obj)
		return;
	v->type = rd64(obj + pp->off.object_type);
	if (!pv->ti_dtype)
		return;
	if (bpf_probe_read_user(&borrowed, 1, (void *)(obj + pv->thp_borrowed)) || borrowed > 1)
		return;
	impl = rd64(obj + pv->thp_cdata);
	if (borrowed)
		impl = rd64(impl);
	if (!impl)
		return;
	v->ndim = rd64(impl + pv->ti_dim);
	v->numel = (__s64)rd64(impl + pv->ti_numel);
	src = impl + pv->ti_sizes;
	if (v->ndim > pv->inline_max)
		src = rd64(src); /* sizes then strides on the heap: 2 * ndim > CT_OP_DIMS */
	if (bpf_probe_read_user(&v->dtype, sizeof(v->dtype), (void *)(impl + pv->ti_dtype)) ||
	    bpf_probe_read_user(v->sizes, sizeof(v->sizes), (void *)src))
		return;
	v->impl = 1;
}

/* Is the object at obj a tuple (or a subclass)? */
static __always_inline bool is_tuple(const struct ct_pyproc_bpf *pp, __u64 obj)
{
	__u64 type = obj ? rd64(obj + pp->off.object_type) : 0;

	return type && (rd64(type + pp->vals.type_flags) & pp->vals.tuple_flag);
}

/* Item i of the tuple at tuple (n items), or 0. */
static __always_inline __u64 tuple_item(const struct ct_pyproc_bpf *pp, __u64 tuple, __u64 n,
					__u32 i)
{
	return i < n ? rd64(tuple + pp->vals.tuple_items + 8 * (i & 15)) : 0;
}

/* The first item of the tuple at args (a function's *args), or 0. */
static __always_inline __u64 args_first(const struct ct_pyproc_bpf *pp, __u64 args)
{
	return is_tuple(pp, args) ? tuple_item(pp, args, rd64(args + pp->vals.var_size), 0) : 0;
}

/*
 * One read of the frame's head instead of one per field: 3.11+ keep code,
 * previous, instruction, owner and the first locals within 96 bytes. Fields
 * past it (3.10's f_localsplus at 352) are read on their own.
 */
#define CT_FRAME_HEAD 96
#define CT_HEAD_MASK  127 /* a power of two above the head, for the verifier */

#define CT_WALK_MEMO 8 /* code objects a walk remembers having checked */

/*
 * What the walk changes as it goes, in a map value rather than on the stack: the verifier
 * tracks stack slots exactly, so every combination of their values made walk_cb a new
 * state to verify, iteration after iteration (over the 1M-instruction limit on 6.18's
 * verifier); a map value's words are plain scalars to it, and walk_cb converges at once.
 */
struct walk_state {
	__u64 frame;
	__u64 helper;	 /* the first local of the outermost helper frame seen */
	__u64 opcall;	 /* the first argument of the innermost torch op called from Python */
	__u64 opcall_at; /* its frame */
	/*
	 * Code objects this walk read and checked, with their idents: one seen again further
	 * out (each nn.Module level runs the same _wrapped_call_impl and _call_impl; a
	 * recursion) is alive, held by the frame further in, and is not read again.
	 */
	__u64 memo_code[CT_WALK_MEMO], memo_ident[CT_WALK_MEMO];
	__u32 memo_next, pad0;
	/* a code object's bytes (off the 512-byte stack) */
	__u8 span[CT_HEAD_MASK + 1 + 8] __attribute__((aligned(8)));
	__u64 file_checked, file_hash; /* the file name checked last, and its hash */
	__u64 unknown;		       /* a frame whose code object is not known as resolved */
	__u64 cap_spec[2];	       /* the innermost CT_PYC_CAPTURE frame's specs (0: none) */
	__u64 differ; /* 1 + the outermost frame that differs from the last stack's; 0: none */
	struct ct_pyframe_raw f; /* the frame being read */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk_state);
} walkbuf SEC(".maps");

/*
 * Frames are read through windows of the memory below them: 3.11+ pushes a Python call's
 * frame right after its caller's on the thread's data stack, so one read of up to
 * CT_WIN_BYTES below a frame (within its page, which is mapped since the frame is) holds
 * the frames further out too. A read per frame was measured at about 200 ns on the first VMs;
 * on the 5 µs-trap VM (`scripts/bench.py reads`) a hit's first read costs about 150 ns and
 * each further one 3-25 ns, more when cold: a window saves that much a frame.
 * Two windows: the frames a C call enters are on the C stack (3.12+'s shim frames), between
 * stretches of the data stack.
 */
#define CT_WIN_BYTES   2048
#define CT_PAGE	       4096
#define CT_CSTACK_SPAN (8u << 20) /* above sp: the C stack (its default limit) */

#define CT_WIN_WORDS (4 * CT_WIN_BYTES / 8)

struct frame_win {
	__u64 lo[2], hi[2]; /* what each window holds: [lo, hi); hi 0: nothing */
	__u32 next, pad;    /* the window filled next */
	/* twice CT_WIN_BYTES each: a read's length masks below that. As words, where a frame's
	 * fields are loaded from: 8-aligned, as the frames in them are. */
	union {
		__u8 data[2][2 * CT_WIN_BYTES];
		__u64 word[CT_WIN_WORDS];
	};
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct frame_win);
} framewin SEC(".maps");

/* The frame fields walk_cb loads (struct walk.wi) */
enum ct_wi { CT_WI_PREV, CT_WI_CODE, CT_WI_INSTR, CT_WI_SELF, CT_WI_ARG1, CT_WI_ARG2, CT_WI_N = 8 };
#define CT_WI_OUT 0xff

struct walk {
	const struct ct_pyproc_bpf *pp;
	struct ct_pystack *st;
	struct walk_state *s;
	struct frame_win *win;
	struct code_cache *cc;
	struct last_codes *lc;
	__u64 sp;  /* the C stack pointer at the probe */
	__u64 gen; /* ct_code_gen when the walk began */
	__u32 tgid;
	__u32 last_n;	 /* frames of the last stack st holds, compared with as they are replaced */
	__u32 last_held; /* of them, those lc describes (0: lc is another moment's) */
	/* the frame fields' words in its head (CT_WI_OUT: past it, or not 8-aligned), worked
	 * out once a walk rather than at each load */
	__u8 wi[CT_WI_N];
};

/* A field's word in the frame's head, or CT_WI_OUT. */
static __always_inline __u8 head_wi(__u16 off)
{
	return off <= CT_FRAME_HEAD - 8 && !(off & 7) ? off / 8 : CT_WI_OUT;
}

/*
 * Field wi (enum ct_wi; at offset off) of the frame whose head is at word `at` of the
 * windows: a load of a word (the frame's pointers are 8-aligned; a copy of the head, then
 * bytes assembled into each field, were 170 instructions a frame). A field past the head
 * (3.10's f_localsplus at 352) is read on its own.
 */
static __always_inline __u64 head_u64(const struct walk *w, __u32 at, __u64 frame, __u32 wi,
				      __u16 off)
{
	__u8 k = w->wi[wi & (CT_WI_N - 1)];

	if (k != CT_WI_OUT)
		return w->win->word[(at + k) & (CT_WIN_WORDS - 1)];
	return rd64(frame + off);
}

static __always_inline __u8 head_u8(const struct walk *w, __u32 at, __u16 off)
{
	return (__u8)(w->win->word[(at + off / 8) & (CT_WIN_WORDS - 1)] >> (8 * (off & 7)));
}

/*
 * Where the frame's head is in the windows (*at, a word index): in a window that holds it,
 * else in one read now. A frame on the C stack (3.12+'s shim, between sp and 8 MiB above
 * it) is read with the memory above it (the frames further out are there), one on the data
 * stack with the memory below it. The window just used is kept, the other refilled: the
 * shims between stretches of the data stack do not evict the data stack's window.
 */
static __always_inline bool read_head(struct walk *w, __u64 frame, __u32 *at)
{
	struct frame_win *win = w->win;
	__u64 lo;
	__u32 k, len;

	for (k = 0; k < 2; k++) {
		if (frame >= win->lo[k] && frame + CT_FRAME_HEAD <= win->hi[k]) {
			*at = k * (2 * CT_WIN_BYTES / 8) + (__u32)(frame - win->lo[k]) / 8;
			win->next = k ^ 1;
			return true;
		}
	}
	k = win->next & 1;
	win->next = k ^ 1;
	*at = k * (2 * CT_WIN_BYTES / 8);
	if (frame >= w->sp && frame - w->sp < CT_CSTACK_SPAN) {
		lo = frame;
		len = CT_WIN_BYTES;
	} else {
		lo = frame + CT_FRAME_HEAD - CT_WIN_BYTES;
		if (lo > frame || lo < (frame & ~(__u64)(CT_PAGE - 1)))
			lo = frame & ~(__u64)(CT_PAGE - 1);
		len = frame + CT_FRAME_HEAD - lo; /* at most CT_WIN_BYTES, as lo was chosen */
	}
	/* Hide the bound from clang, or it drops the mask the verifier needs. */
	asm volatile("" : "+r"(len));
	len &= 2 * CT_WIN_BYTES - 1;
	if (bpf_probe_read_user(win->data[k], len, (void *)lo)) {
		lo = frame; /* the head alone */
		len = CT_FRAME_HEAD;
		if (bpf_probe_read_user(win->data[k], CT_FRAME_HEAD, (void *)frame)) {
			win->hi[k] = 0;
			return false;
		}
	}
	win->lo[k] = lo;
	win->hi[k] = lo + len;
	*at += (__u32)(frame - lo) / 8;
	return true;
}

/* The ident of a code object this walk already checked: true and *ident, else false. */
static __always_inline bool memo_find(const struct walk_state *s, __u64 code, __u64 *ident)
{
	for (int i = 0; i < CT_WALK_MEMO; i++) {
		if (code && s->memo_code[i] == code) {
			*ident = s->memo_ident[i];
			return true;
		}
	}
	return false;
}

static __always_inline void memo_add(struct walk_state *s, __u64 code, __u64 ident)
{
	__u32 i = s->memo_next++ % CT_WALK_MEMO;

	s->memo_code[i] = code;
	s->memo_ident[i] = ident;
}

static __always_inline __u64 span_u64(const __u8 *buf, __u16 lo, __u16 off)
{
	__u64 v = 0;

	__builtin_memcpy(&v, buf + ((off - lo) & CT_HEAD_MASK), 8);
	return v;
}

static __always_inline bool slot_is(const struct code_cache_slot *c, const struct walk *w,
				    __u64 code)
{
	return c->code == code && c->tgid == w->tgid && c->gen == w->gen;
}

/*
 * What user space resolved at this frame's code object's address. true: a held code object,
 * alive as resolved (its deallocation would have deleted the entry), whose flags and ident
 * are in *held. false: *v is the pycodes entry to check the code object against, or NULL
 * (nothing, or a frame further out than one that was not known: the rest is not checked).
 */
static __always_inline bool known_code(struct walk *w, __u64 code, const struct ct_pycode_val **v,
				       struct code_cache_slot **held)
{
	struct ct_pycode_key k = {.tgid = w->tgid, .code = code};
	struct code_cache_slot *set = w->cc->e[((code >> 4) ^ (code >> 13)) & (CT_CODE_SETS - 1)];
	const struct ct_pycode_val *e;

	*v = NULL;
	if (w->s->unknown)
		return false;
	if (slot_is(&set[0], w, code)) {
		*held = &set[0];
		return true;
	}
	if (slot_is(&set[1], w, code)) {
		*held = &set[1];
		return true;
	}
	e = bpf_map_lookup_elem(&pycodes, &k);
	/* A held entry lives as long as its code object, which the frame holds; the count
	 * read before this lookup was bumped if it died since. */
	if (!e || !(e->flags & CT_PYC_HELD) || !w->pp->code_free) {
		*v = e;
		return false;
	}
	set[1] = set[0];
	set[0].code = code;
	set[0].tgid = w->tgid;
	set[0].gen = w->gen;
	set[0].ident = e->ident;
	set[0].flags = e->flags;
	*held = &set[0];
	return true;
}

/* A code object's bytes from code_lo into buf (CT_HEAD_MASK + 1 + 8 bytes). */
static __always_inline bool read_span(const struct ct_pyproc_bpf *pp, __u64 code, __u8 *buf)
{
	__u32 len = pp->code_len;

	if (!len || len > CT_PY_CODE_SPAN)
		return false;
	/* Hide the bound from clang, or it drops the mask the verifier needs. */
	asm volatile("" : "+r"(len));
	len &= CT_HEAD_MASK;
	return !bpf_probe_read_user(buf, len, (void *)(code + pp->code_lo));
}

/*
 * Which code object this is (struct ct_pyframe_raw.ident), from its bytes in buf (read by
 * the caller, from code_lo): co_version (3.12+), else co_name's CT_PY_NAME_IDENT, or 0;
 * CT_PY_IDENT_UNREAD where the name cannot be read.
 */
static __always_inline __u64 code_ident(struct walk *w, const __u8 *buf)
{
	const struct ct_py_offsets *o = &w->pp->off;
	__u16 lo = w->pp->code_lo;
	__u32 ver = 0, state = 0;
	__u64 h = 0, name, chars = 0;
	__s64 len = 0;

	if (o->code_version != CT_PY_NONE) {
		__builtin_memcpy(&ver, buf + ((o->code_version - lo) & CT_HEAD_MASK), 4);
		return ver;
	}
	if (o->unicode_hash == CT_PY_NONE)
		return 0;
	name = span_u64(buf, lo, o->code_name);
	if (bpf_probe_read_user(&h, sizeof(h), (void *)(name + o->unicode_hash)))
		return CT_PY_IDENT_UNREAD;
	if (h != (__u64)-1)
		return h;
	/* No hash (a name never used as a key): a short ASCII name by its characters. */
	if (bpf_probe_read_user(&state, sizeof(state), (void *)(name + o->unicode_state)) ||
	    bpf_probe_read_user(&len, sizeof(len), (void *)(name + o->unicode_length)))
		return CT_PY_IDENT_UNREAD;
	if ((state & w->pp->ascii_state) != w->pp->ascii_state || len <= 0 || len > 8)
		return 0;
	if (bpf_probe_read_user(&chars, sizeof(chars), (void *)(name + o->unicode_ascii_data)))
		return CT_PY_IDENT_UNREAD;
	return CT_PY_NAME_IDENT(-1, len, chars);
}

/*
 * Is this frame's code object the one user space resolved (v)? buf holds its bytes from
 * code_lo (fresh: read for this frame; not for a code object this walk checked at a frame
 * further in: that one is alive, held by that frame, and was checked).
 */
static __always_inline bool code_matches(struct walk *w, const struct ct_pycode_val *v,
					 const __u8 *buf, bool fresh, __u64 ident)
{
	const struct ct_py_offsets *o = &w->pp->off;
	__u16 lo = w->pp->code_lo, name;
	__u32 first = 0;

	if (v->flags & CT_PYC_LIVE)
		return false;
	if (!fresh)
		return true;
	name = o->code_qualname != CT_PY_NONE ? o->code_qualname : o->code_name;
	__builtin_memcpy(&first, buf + ((o->code_firstlineno - lo) & CT_HEAD_MASK), 4);
	if (span_u64(buf, lo, name) != v->name ||
	    span_u64(buf, lo, o->code_filename) != v->filename ||
	    span_u64(buf, lo, o->code_linetable) != v->linetable ||
	    (__s32)first != v->firstlineno || (v->ident && ident != v->ident))
		return false;
	/* 3.10/3.11: the file's hash, once per file name on this stack (alive: the code objects
	 * that hold it are on it) */
	if (v->ident2 && (v->filename != w->s->file_checked || v->ident2 != w->s->file_hash)) {
		if (rd64(v->filename + o->unicode_hash) != v->ident2)
			return false;
		w->s->file_checked = v->filename;
		w->s->file_hash = v->ident2;
	}
	return true;
}

/*
 * A frame of a stack not known: its first local, if it reads as a tensor and is not among
 * the guesses yet (struct ct_pystack.nguess). Without torch's layout in BPF, nothing reads
 * as a tensor: the first locals are kept with their types alone, which tell user space
 * whether the helper's was a tensor at the call (read later, its memory may hold another
 * object). A global function, verified once on its own: inlined at its four calls, the
 * entry program took 180 000 instructions to verify instead of 69 000 (6.18).
 */
__noinline int ct_guess_helper(struct ct_pystack *st, const struct ct_pyproc_bpf *pp, __u64 obj,
			       __u8 from)
{
	struct ct_op_val *v;
	__s64 prod = 1;
	__u16 k;

	if (!st || !pp)
		return 0;
	k = st->nguess;
	if (k >= CT_PYS_GUESSES || !obj)
		return 0;
	for (int i = 0; i < CT_PYS_GUESSES; i++)
		if (i < k && st->helper[i].obj == obj)
			return 0;
	v = &st->helper[k & (CT_PYS_GUESSES - 1)];
	__builtin_memset(v, 0, sizeof(*v));
	describe_val(pp, obj, v);
	if (!pp->vals.ti_dtype) {
		v->guess = from;
		st->nguess = v->type ? k + 1 : k;
		return 0;
	}
	if (!v->impl || v->ndim > CT_OP_DIMS)
		return 0;
	for (int d = 0; d < CT_OP_DIMS; d++)
		if (d < v->ndim)
			prod *= v->sizes[d];
	v->guess = from;
	if (v->numel >= 0 && prod == v->numel)
		st->nguess = k + 1;
	return 0;
}

static __always_inline void guess_helper(struct walk *w, __u64 obj, __u8 from)
{
	ct_guess_helper(w->st, w->pp, obj, from);
}

/*
 * Frame n of st made f, once compared word for word with the frame it replaces, of the
 * last stack st held (last_n frames; 0: none): whether they differ. Comparing there costs
 * no line the store would not bring in. A global function, verified once on its own.
 */
__noinline int ct_frame_store(struct ct_pystack *st, const struct ct_pyframe_raw *f, __u32 n,
			      __u32 last_n)
{
	struct ct_pyframe_raw *d;
	const __u64 *x, *y = (const void *)f;
	int differs;

	if (!st || !f)
		return 0;
	d = &st->frames[n & (CT_PY_MAX_FRAMES - 1)];
	x = (const void *)d;
	differs = n >= last_n || x[0] != y[0] || x[1] != y[1] || x[2] != y[2] || x[3] != y[3] ||
		  x[4] != y[4] || x[5] != y[5];
	*d = *f;
	return differs;
}

static long walk_cb(__u64 i, void *data)
{
	struct walk *w = data;
	const struct ct_py_offsets *o = &w->pp->off;
	struct ct_pystack *st = w->st;
	__u64 frame = w->s->frame;
	__u8 *span = w->s->span;
	const struct ct_pyproc_bpf *pp = w->pp;
	const struct ct_pycode_val *kv;
	struct code_cache_slot *held;
	struct ct_pyframe_raw *fr = &w->s->f;
	__u32 n = st->nframes, flags, at = 0;
	__u64 self, code, ident = 0;
	bool fresh, known;

	if (!frame)
		return 1;
	if (n >= CT_PY_MAX_FRAMES) {
		st->flags |= CT_PYS_TRUNCATED;
		return 1;
	}
	if (!read_head(w, frame, &at)) {
		st->flags |= CT_PYS_CUT;
		w->s->frame = 0;
		return 1;
	}
	w->s->frame = head_u64(w, at, frame, CT_WI_PREV, o->frame_previous);
	/* 3.12+: a shim frame on the C stack carries no Python code. */
	if (o->frame_owner < CT_FRAME_HEAD && head_u8(w, at, o->frame_owner) == o->owner_cstack)
		return 0;
	n &= CT_PY_MAX_FRAMES - 1;
	code = head_u64(w, at, frame, CT_WI_CODE, o->frame_code);
	fr->code = code;
	fr->instr = head_u64(w, at, frame, CT_WI_INSTR, o->frame_instr);
	if (o->instr_is_index) /* 3.10: an int */
		fr->instr = (__u64)(__s64)(__s32)fr->instr;
	st->nframes = n + 1;
	if (n < w->last_held && (w->lc->flags[n] & CT_PYC_HELD) && st->frames[n].code == code &&
	    !w->s->unknown) {
		const struct ct_pyframe_raw *last = &st->frames[n];

		flags = w->lc->flags[n];
		/* No local of it used (every frame whose locals are read has CT_PYC_SELF), at
		 * the same instruction: the frame held there is this one, word for word. */
		if (!(flags & CT_PYC_SELF) && last->instr == fr->instr && !last->self &&
		    !last->arg1 && !last->arg2)
			return 0;
		ident = last->ident;
	} else if (known_code(w, code, &kv, &held)) {
		ident = held->ident;
		flags = held->flags;
		w->lc->flags[n] = flags;
	} else {
		w->lc->flags[n] = 0;
		/* The code object's bytes, once per code object and walk: which object it is
		 * goes with the frame, so that a reused address is never named as the old one. */
		fresh = false;
		if (!memo_find(w->s, code, &ident)) {
			fresh = read_span(pp, code, span);
			ident = fresh ? code_ident(w, span) : CT_PY_IDENT_UNREAD;
			if (fresh)
				memo_add(w->s, code, ident);
			else
				w->s->unknown = true; /* unreadable: nothing to check it by */
		}
		flags = kv ? kv->flags : 0;
		if (!kv || ident == CT_PY_IDENT_UNREAD || !code_matches(w, kv, span, fresh, ident))
			w->s->unknown = true;
	}
	fr->ident = ident;
	/* A helper's tensor is described here; without torch's layout in BPF, by user space. */
	if ((flags & (CT_PYC_HELPER | CT_PYC_OPCALL)) && !pp->vals.ti_dtype)
		w->s->unknown = true;
	known = !w->s->unknown;
	/* A known code object whose locals name nothing (no CT_PYC_SELF: user space reads none
	 * of them) has them sent as 0, not even loaded: a loop's counter does not make the
	 * frames of its stacks differ from one call to the next (bpf/stackshare.bpf.h). */
	if (known && !(flags & CT_PYC_SELF)) {
		self = fr->arg1 = fr->arg2 = 0;
	} else {
		self = head_u64(w, at, frame, CT_WI_SELF, o->frame_localsplus);
		fr->arg1 = head_u64(w, at, frame, CT_WI_ARG1, o->frame_localsplus + 8);
		fr->arg2 = head_u64(w, at, frame, CT_WI_ARG2, o->frame_localsplus + 16);
		/* Read now: the cell dies with the call (torch 2.x's Module._call_impl has
		 * one). Not for a known code object whose first local is never a cell. */
		if (!known || !(flags & CT_PYC_PLAIN))
			self = uncell(self, o->object_type, pp->cell_type);
	}
	fr->self = self;
	if (ct_frame_store(st, fr, n, w->last_n))
		w->s->differ = n + 1;
	if (!known && n < CT_PYS_GUESS_FRAMES) {
		guess_helper(w, self, CT_GUESS_FROM(n, 0));
		if (!n) /* an op called from Python (torch.compile's code): its first argument */
			guess_helper(w, args_first(pp, fr->arg1), CT_GUESS_FROM(n, 1));
	}
	if (known && (flags & CT_PYC_HELPER))
		w->s->helper = self;
	if (known && (flags & CT_PYC_OPCALL) && !w->s->opcall) {
		w->s->opcall = args_first(w->pp, fr->arg1);
		w->s->opcall_at = n;
	}
	if (known && (flags & CT_PYC_CAPTURE) && !w->s->cap_spec[0]) {
		w->s->cap_spec[0] = fr->arg1;
		w->s->cap_spec[1] = fr->arg2;
	}
	return 0;
}

/*
 * Fills st (nframes 0 and a flag when there is no Python on this thread), comparing each
 * frame with the one it replaces, of the last stack st held (last_n frames; 0: none). Of a
 * stack with as many frames as that one, how many at the outermost end are the same as
 * its; else 0. lc_slot: which kind of walk (struct last_codes).
 */
static __always_inline __u32 walk_python(__u32 tgid, __u32 tid, __u64 sp, struct ct_pystack *st,
					 __u32 last_n, __u32 lc_slot)
{
	struct ct_pyproc_bpf *pp = bpf_map_lookup_elem(&pyprocs, &tgid);
	struct task_struct *task;
	struct find_ts f = {};
	struct walk w = {};
	__u64 *cached, ts = 0, frame, helper;
	__u32 zero = 0;

	st->nframes = 0;
	st->flags = 0;
	st->nguess = 0;
	st->nsame = 0;
	w.s = bpf_map_lookup_elem(&walkbuf, &zero);
	w.win = bpf_map_lookup_elem(&framewin, &zero);
	w.cc = bpf_map_lookup_elem(&codecache, &zero);
	w.lc = bpf_map_lookup_elem(&lastcodes, &lc_slot);
	if (!pp || !w.s || !w.win || !w.cc || !w.lc)
		return 0;
	st->flags |= CT_PYS_PYTHON;
	task = bpf_get_current_task_btf();
	f.fsbase = BPF_CORE_READ(task, thread.fsbase);
	f.o = &pp->off;
	f.tid = tid;
	cached = bpf_map_lookup_elem(&tstates, &tid);
	if (cached && tstate_is_mine(&pp->off, *cached, tid, f.fsbase)) {
		ts = *cached;
	} else {
		f.ts = rd64(rd64(pp->runtime + pp->off.runtime_interp_head) +
			    pp->off.interp_threads_head);
		bpf_loop(CT_PY_MAX_THREADS, find_ts_cb, &f, 0);
		ts = f.found;
		if (ts)
			bpf_map_update_elem(&tstates, &tid, &ts, BPF_ANY);
	}
	if (!ts) {
		st->flags |= CT_PYS_NO_TSTATE; /* a thread that never ran Python */
		return 0;
	}
	frame = rd64(ts + pp->off.tstate_frame);
	if (pp->off.cframe_current_frame != CT_PY_NONE)
		frame = rd64(frame + pp->off.cframe_current_frame);
	w.pp = pp;
	w.wi[CT_WI_PREV] = head_wi(pp->off.frame_previous);
	w.wi[CT_WI_CODE] = head_wi(pp->off.frame_code);
	w.wi[CT_WI_INSTR] = head_wi(pp->off.frame_instr);
	w.wi[CT_WI_SELF] = head_wi(pp->off.frame_localsplus);
	w.wi[CT_WI_ARG1] = head_wi(pp->off.frame_localsplus + 8);
	w.wi[CT_WI_ARG2] = head_wi(pp->off.frame_localsplus + 16);
	w.st = st;
	w.last_n = last_n;
	__builtin_memset(w.s, 0, sizeof(*w.s));
	w.s->frame = frame;
	w.win->hi[0] = w.win->hi[1] = 0; /* what they held was another moment's */
	w.tgid = tgid;
	w.sp = sp;
	w.gen = ct_code_gen;
	w.last_held = w.lc->gen == w.gen ? last_n : 0;
	bpf_loop(CT_PY_MAX_FRAMES + 1, walk_cb, &w, 0);
	if (st->nframes) /* lc's flags are now this walk's (those further out, another's) */
		w.lc->gen = w.gen;
	if (w.s->frame)
		st->flags |= CT_PYS_TRUNCATED;
	if (w.s->unknown || !st->nframes) {
		/* a helper or op frame known, further in than the first one not known: the best
		 * guess (one of them: a helper calls no op from Python but torch.compile's) */
		if (st->nguess >= CT_PYS_GUESSES && (w.s->helper || w.s->opcall))
			st->nguess = CT_PYS_GUESSES - 1;
		if (w.s->helper)
			guess_helper(&w, w.s->helper, 0);
		else if (w.s->opcall && w.s->opcall_at < CT_PYS_GUESS_FRAMES)
			guess_helper(&w, w.s->opcall, CT_GUESS_FROM(w.s->opcall_at, 1));
		return 0;
	}
	st->flags |= CT_PYS_KNOWN;
	helper = w.s->helper ? w.s->helper : w.s->opcall; /* opcall: torch.compile's code */
	if (helper) {
		__builtin_memset(&st->helper[0], 0, sizeof(st->helper[0]));
		describe_val(pp, helper, &st->helper[0]);
		st->flags |= CT_PYS_HELPER;
	}
	return last_n && st->nframes == last_n ? st->nframes - w.s->differ : 0;
}

#endif
