// SPDX-License-Identifier: MIT
/*
 * What BPF is told about a Python process: its interpreter's layout and, once torch is
 * loaded, torch's tensor layout (the pyprocs map); the code objects user space resolved
 * (pycodes: known, held, to be copied at the call); and the probes on the interpreter
 * itself: where its code objects die (code_dealloc) and, with --ops, its frame evaluation.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "commtrace.skel.h"
#include "pystate.h"
#include "commtrace/pyoffsets.h"
#include "elf/elfsym.h"
#include "python/objects.h"
#include "python/params.h"
#include "python/profiles.h"
#include "python/symbolize.h"
#include "catalog/catalog.h"
#include "targets.h"
#include "util/log.h"

/* What BPF needs to describe op arguments and results; torch's part once it is loaded. */
static void fill_vals(const struct ct_proc *p, const struct ct_torch_layout *tl,
		      struct ct_pyvals_bpf *v)
{
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(p->py.major, p->py.minor);

	memset(v, 0, sizeof(*v));
	if (!oo)
		return;
	v->var_size = oo->var_size;
	v->tuple_items = oo->tuple_items;
	v->type_flags = oo->type_flags;
	v->tuple_flag = oo->tpflags_tuple_subclass;
	if (tl) {
		v->thp_borrowed = tl->thp_borrowed;
		v->thp_cdata = tl->thp_cdata;
		v->ti_dim = tl->ti_dim;
		v->ti_sizes = tl->ti_sizes;
		v->ti_numel = tl->ti_numel;
		v->ti_dtype = tl->ti_dtype;
		v->inline_max = tl->inline_max;
	}
}

/* The bytes of a code object BPF compares with struct ct_pycode_val (code_len 0: none). */
static void fill_code_span(const struct ct_py_offsets *o, struct ct_pyproc_bpf *v)
{
	__u16 name = o->code_qualname != CT_PY_NONE ? o->code_qualname : o->code_name;
	/* co_version last: the only one a version may not have (before 3.12) */
	__u16 at[] = {name,	    o->code_filename, o->code_linetable, o->code_firstlineno,
		      o->code_name, o->code_version};
	size_t need = sizeof(at) / sizeof(at[0]) - 1;
	unsigned int lo = UINT16_MAX, hi = 0;

	if (o->code_version == CT_PY_NONE && o->unicode_hash == CT_PY_NONE)
		return; /* nothing to tell an object from another at its address */
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		if (at[i] == CT_PY_NONE) {
			if (i < need)
				return;
			continue;
		}
		lo = at[i] < lo ? at[i] : lo;
		hi = at[i] + 8u > hi ? at[i] + 8u : hi; /* whole words: the walker reads 8 */
	}
	if (hi - lo > CT_PY_CODE_SPAN)
		return;
	v->code_lo = (__u16)lo;
	v->code_len = (__u16)(hi - lo);
}

int ct_pys_update_pyproc(struct ct_session *s, struct ct_proc *p, const struct ct_torch_layout *tl)
{
	struct ct_pyproc_bpf v = {0};
	__u32 key = p->pid;

	v.runtime = p->py.runtime_addr;
	v.cell_type = p->py.cell_type_addr;
	v.off = p->py.offsets;
	fill_vals(p, tl, &v.vals);
	fill_code_span(&p->py.offsets, &v);
	v.ascii_state = 1u << CT_PY_STATE_COMPACT_BIT | 1u << CT_PY_STATE_ASCII_BIT;
	v.code_free = p->code_free;
	v.pynode_obj = p->ops ? p->ops->pynode_obj : 0;
	v.spec = p->spec_layout;
	return bpf_map_update_elem(bpf_map__fd(s->skel->maps.pyprocs), &key, &v, BPF_ANY) ? -errno
											  : 0;
}

#define TORCH_LAYOUT_TRIES 8 /* lookups of torch's version while it is not loaded */

/*
 * torch's tensor layout in p, looked up until torch is loaded. A torch whose layout is not
 * known is said once: its tensors' shapes and dtypes are then marked unknown, never guessed.
 */
const struct ct_torch_layout *ct_pys_tensor_layout(struct ct_proc *p)
{
	char version[32];

	if (p->tensor_layout || p->tensor_layout_tries >= TORCH_LAYOUT_TRIES)
		return p->tensor_layout;
	p->tensor_layout_tries++;
	ct_torch_version(p->pid, version, sizeof(version));
	p->tensor_layout = ct_torch_layout_for(version);
	if (!p->tensor_layout && version[0]) {
		p->tensor_layout_tries = TORCH_LAYOUT_TRIES; /* torch is loaded: no more */
		fprintf(stderr,
			"commtrace-bpf: pid %d: torch %s: its tensor layout is not known to this "
			"build: tensor shapes and dtypes are marked unknown (no_layout); "
			"collectives, bytes, names and placements are not affected\n",
			p->pid, version);
	}
	return p->tensor_layout;
}

/*
 * Tell BPF torch's tensor layout if torch is loaded now (looked up until it is: a framework
 * without torch gets types only), so that it describes tensors at the call: a helper's
 * (the first one's too, a guess while its frame is not known), an op's arguments (--ops).
 */
void ct_pys_torch_layout_to_bpf(struct ct_session *s, struct ct_proc *p)
{
	const struct ct_torch_layout *tl;

	if (p->torch_layout)
		return;
	tl = ct_pys_tensor_layout(p);
	if (!tl || ct_pys_update_pyproc(s, p, tl))
		return;
	p->torch_layout = tl;
	ct_info("commtrace: pid %d: torch tensor layout known: tensors described at the call\n",
		p->pid);
}

/*
 * Probe where the process's code objects die (PyCode_Type's tp_dealloc, read from
 * the process: code_dealloc is not exported), so that the walker can trust a known code
 * object without reading it (CT_PYC_HELD). Where that is not possible, the walker reads
 * every code object, as before. 0, or -errno when p could not be told.
 */
int ct_pys_watch_code_frees(struct ct_session *s, struct ct_proc *p)
{
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(p->py.major, p->py.minor);
	uint64_t dealloc, off;
	char err[256];
	struct ct_elf *e;
	int rc;

	if (!oo || !p->py.code_type_addr ||
	    ct_py_read_mem(p->pid, p->py.code_type_addr + oo->type_dealloc, &dealloc,
			   sizeof(dealloc)) ||
	    dealloc < p->py.load_bias)
		return 0;
	e = ct_elf_open(p->py.open_path, err, sizeof(err));
	if (!e)
		return 0;
	rc = ct_elf_vaddr_to_off(e, dealloc - p->py.load_bias, &off);
	if (!rc)
		off += ct_elf_endbr_len(e, dealloc - p->py.load_bias);
	ct_elf_close(e);
	if (rc)
		return 0; /* not in the interpreter's file: another allocator's, not probed */
	rc = ct_bpf_attach_code_free(s, p->pid, p->py.open_path, off, &p->links);
	if (rc) {
		ct_info("commtrace: pid %d: code_dealloc not probed (%s): every known code "
			"object is read at each stack\n",
			p->pid, strerror(-rc));
		return 0;
	}
	p->code_free = true;
	return ct_pys_update_pyproc(s, p, p->torch_layout);
}

uint64_t ct_pys_code_deaths(const struct ct_session *s)
{
	return s->skel ? __atomic_load_n(&s->skel->bss->ct_code_gen, __ATOMIC_SEQ_CST) : 0;
}

void ct_pys_codes_changed(struct ct_session *s)
{
	/* after the change: BPF's copies of held entries made before it are not used */
	__atomic_fetch_add(&s->skel->bss->ct_code_gen, 1, __ATOMIC_SEQ_CST);
}

/*
 * A code object resolved from the process for the first time: BPF may trust it from now
 * on, with what it was validated by. Naming a helper reads its tensor, which BPF does
 * once torch's layout is there; a frame named by an object it was called with (an op
 * object) reads that object, so its stacks keep waking the reader.
 */
void ct_pys_tell_known(struct ct_session *s, struct ct_proc *p, uint64_t code,
		       const struct ct_pyframe *f, const struct ct_rule *r)
{
	struct ct_pycode_key k = {.tgid = (__u32)p->pid, .code = code};
	struct ct_pycode_val v = f->known;
	int fd;

	if (!s->skel)
		return;
	fd = bpf_map__fd(s->skel->maps.pycodes);
	if (r)
		v.flags |= CT_PYC_SELF | (f->plain_first ? CT_PYC_PLAIN : 0);
	if (r && r->role == CT_ROLE_HELPER)
		v.flags |= CT_PYC_HELPER;
	if (r && (r->role == CT_ROLE_HELPER || r->role == CT_ROLE_OPCALL))
		ct_pys_torch_layout_to_bpf(s, p);
	/* and so does a redistribution's, whose specs may be temporaries, unless BPF can copy
	 * them at the call (CT_PYC_CAPTURE) */
	if (r && r->role == CT_ROLE_RESHARD && p->spec_layout.type)
		v.flags |= CT_PYC_CAPTURE;
	else if (r && r->role != CT_ROLE_MODULE &&
		 (r->name_from == CT_NAME_ARG1 || r->name_from == CT_NAME_SELF ||
		  r->role == CT_ROLE_RESHARD))
		v.flags |= CT_PYC_LIVE;
	/* but an op called from Python lives as long as the process (its packet keeps it) */
	if (r && r->role == CT_ROLE_OPCALL)
		v.flags = (v.flags & ~CT_PYC_LIVE) | CT_PYC_OPCALL;
	if (bpf_map_update_elem(fd, &k, &v, BPF_NOEXIST)) {
		/* an entry replaced: BPF may hold a copy of it */
		if (errno != EEXIST || bpf_map_update_elem(fd, &k, &v, BPF_ANY)) {
			s->py->counts.known_failed++;
			return;
		}
		ct_pys_codes_changed(s);
	}
	/*
	 * Held: the code object resolved is still there now, alive (not freed memory that
	 * still looks like it), after the entry was added; from then on its deallocation
	 * deletes the entry (ct_code_free). Not once it has done so (BPF_EXIST), nor when it
	 * died or another code object took its address before the entry was added: that entry
	 * is deleted.
	 */
	if (!p->code_free || (v.flags & CT_PYC_LIVE))
		return;
	switch (ct_py_code_is(p->pid, &p->py.offsets, p->py.code_type_addr, code, &f->known)) {
	case 1:
		v.flags |= CT_PYC_HELD;
		if (!bpf_map_update_elem(fd, &k, &v, BPF_EXIST))
			s->py->counts.held++;
		break;
	case 0:
		bpf_map_delete_elem(fd, &k);
		ct_pys_codes_changed(s);
		break;
	}
}

/*
 * torch 2.x: the function that calls a tensor subclass's __torch_dispatch__ (and a Python
 * __torch_function__), and PyNode::apply, in the libtorch_python p maps. 1 when attached,
 * 0 where this torch is not 2.x or lacks them (the frames are probed instead), -errno.
 */
static int attach_dispatch(struct ct_session *s, struct ct_proc *p)
{
	struct ct_sym_want want[] = {
	    {.name = "torch::handle_torch_function_no_python_arg_parser", .cxx = true},
	    {.name = "torch::autograd::PyNode::apply", .cxx = true}};
	struct ct_sym_found found[2] = {{0}};
	const struct ct_file *f = NULL;
	char version[32], err[256];
	struct ct_elf *e;
	int rc;

	for (int i = 0; i < p->n_libs && !f; i++)
		if (p->libs[i].file->desc == &ct_lib_torch_python)
			f = p->libs[i].file;
	ct_torch_version(p->pid, version, sizeof(version));
	if (!f || version[0] < '2' || version[1] != '.')
		return 0;
	e = ct_elf_open(f->path, err, sizeof(err));
	if (!e)
		return 0;
	ct_elf_resolve(e, want, 2, found);
	for (int i = 0; i < 2; i++)
		if (found[i].found)
			found[i].file_off += ct_elf_endbr_len(e, found[i].addr);
	ct_elf_close(e);
	if (!found[0].found)
		return 0;
	rc = ct_bpf_attach_dispatch(s, p->pid, f->path, found[0].file_off,
				    found[1].found ? found[1].file_off : 0, &p->links);
	if (rc)
		return rc;
	if (!found[1].found)
		fprintf(stderr,
			"commtrace-bpf: pid %d: no PyNode::apply in %s: --ops puts the backward "
			"ops of torch's own autograd nodes under the module of the last autograd "
			"Function seen\n",
			p->pid, f->path);
	p->ops->dispatch = true;
	ct_pys_torch_layout_to_bpf(s, p); /* its values are described from the first op on */
	ct_info("commtrace: pid %d: torch %s: --ops sees ops where torch dispatches them\n", p->pid,
		version);
	return 1;
}

int ct_pys_attach_ops(struct ct_session *s, struct ct_proc *p)
{
	struct ct_sym_want want = {.name = "_PyEval_EvalFrameDefault"};
	struct ct_sym_found found = {0};
	char fpath[PATH_MAX + 32], err[256];
	struct ct_elf *e;
	int rc;

	p->ops = calloc(1, sizeof(*p->ops));
	if (!p->ops)
		return -ENOMEM;
	rc = s->opts->ops_frames ? 0 : attach_dispatch(s, p);
	if (rc)
		return rc < 0 ? rc : 0;
	snprintf(fpath, sizeof(fpath), "%s", p->py.open_path);
	e = ct_elf_open(fpath, err, sizeof(err));
	if (!e)
		return -ENOENT;
	ct_elf_resolve(e, &want, 1, &found);
	if (found.found)
		found.file_off += ct_elf_endbr_len(e, found.addr);
	ct_elf_close(e);
	if (!found.found) {
		fprintf(stderr,
			"commtrace-bpf: pid %d: no _PyEval_EvalFrameDefault in %s: --ops "
			"sees no calls there\n",
			p->pid, p->py.path);
		free(p->ops);
		p->ops = NULL;
		return 0;
	}
	rc = ct_bpf_attach_pyops(s, p->pid, fpath, found.file_off, &p->links);
	if (rc) {
		free(p->ops);
		p->ops = NULL;
	}
	return rc;
}

void ct_pys_measure_dtensor(struct ct_session *s, struct ct_proc *p, uint64_t obj, uint64_t type)
{
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(p->py.major, p->py.minor);
	struct ct_spec_bpf l = p->spec_layout;
	uint64_t off, spec;

	if (!oo || l.dtensor || p->dtensor_layout_tries >= 3)
		return;
	p->dtensor_layout_tries++;
	/* the slot must lie in what BPF copies of the DTensor (bpf/capture.bpf.h) */
	if (ct_py_slot_offset(p->pid, oo, &p->py.offsets, obj, "_spec", &off) ||
	    off + 8 > CT_CAP_BYTES - CT_CAP_BEFORE ||
	    ct_py_read_fresh(p->pid, obj + off, &spec, sizeof(spec)) ||
	    (!l.type && ct_spec_layout(p->pid, &p->py.offsets, spec, &l)))
		return;
	l.dtensor = type;
	l.dtensor_spec = (uint16_t)off;
	p->spec_layout = l;
	if (ct_pys_update_pyproc(s, p, p->torch_layout))
		p->spec_layout.dtensor = 0; /* BPF was not told */
}
