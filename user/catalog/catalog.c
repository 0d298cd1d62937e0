// SPDX-License-Identifier: MIT
/* The global catalog: probe ids, file matching, names, bytes. */
#include <stdio.h>
#include <string.h>
#include "catalog/catalog.h"

/*
 * glibc calls _dl_debug_state() after every change of the link map (dlopen,
 * dlclose, and the initial load before main): the debugger interface
 * (r_debug.r_brk). A uprobe there tells us about new libraries without polling.
 */
static const struct ct_func ldso_funcs[] = {
    {"_dl_debug_state", "_dl_debug_state", .kind = CT_K_DL_STATE},
};

static const char *const ldso_files[] = {"ld-linux", "ld64.so", "ld-2.", NULL};

const struct ct_libdesc ct_lib_ldso = {
    .lib = CT_LIB_LDSO,
    .name = "ld.so",
    .files = ldso_files,
    .funcs = ldso_funcs,
    .n_funcs = ARRAY_LEN(ldso_funcs),
};

const struct ct_libdesc *const ct_libs[] = {
    &ct_lib_mpi,  &ct_lib_gloo, &ct_lib_c10d, &ct_lib_c10d2,
    &ct_lib_nccl, &ct_lib_hccl, &ct_lib_ldso, &ct_lib_torch_python,
};
const size_t ct_n_libs = ARRAY_LEN(ct_libs);

size_t ct_catalog_size(void)
{
	size_t n = 0;

	for (size_t i = 0; i < ct_n_libs; i++)
		n += ct_libs[i]->n_funcs;
	return n;
}

const struct ct_func *ct_catalog_func(uint32_t probe_id, const struct ct_libdesc **lib)
{
	for (size_t i = 0; i < ct_n_libs; i++) {
		if (probe_id < ct_libs[i]->n_funcs) {
			if (lib)
				*lib = ct_libs[i];
			return &ct_libs[i]->funcs[probe_id];
		}
		probe_id -= ct_libs[i]->n_funcs;
	}
	return NULL;
}

void ct_catalog_spec(uint32_t probe_id, struct ct_probe_spec *spec)
{
	const struct ct_libdesc *lib;
	const struct ct_func *fn = ct_catalog_func(probe_id, &lib);

	memset(spec, 0, sizeof(*spec));
	if (!fn)
		return;
	spec->lib = lib->lib;
	spec->kind = fn->kind;
	spec->flags = fn->flags;
	spec->func_id = probe_id;
	memcpy(spec->val, fn->val, sizeof(spec->val));
	for (int phase = 0; phase < 3; phase++)
		for (int i = 0; i < CT_NVAL; i++)
			if (fn->val[i].op != CT_LOC_NONE && ct_loc_phase(fn->val[i].op) == phase)
				spec->order[spec->n_order++] = (__u8)i;
}

uint32_t ct_catalog_base(const struct ct_libdesc *lib)
{
	uint32_t base = 0;

	for (size_t i = 0; i < ct_n_libs && ct_libs[i] != lib; i++)
		base += ct_libs[i]->n_funcs;
	return base;
}

const struct ct_libdesc *ct_catalog_match_file(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	for (size_t i = 0; i < ct_n_libs; i++)
		for (const char *const *f = ct_libs[i]->files; *f; f++)
			if (strncmp(base, *f, strlen(*f)) == 0 &&
			    (!ct_libs[i]->accept || ct_libs[i]->accept(path)))
				return ct_libs[i];
	return NULL;
}

const char *ct_catalog_file_list(void)
{
	static char buf[256];
	size_t off = 0;

	if (buf[0])
		return buf;
	for (size_t i = 0; i < ct_n_libs; i++) {
		if (ct_libs[i]->lib == CT_LIB_LDSO || ct_libs[i]->aux ||
		    (i && ct_libs[i]->files == ct_libs[i - 1]->files))
			continue;
		for (const char *const *f = ct_libs[i]->files; *f; f++) {
			int n =
			    snprintf(buf + off, sizeof(buf) - off, "%s%s*", off ? ", " : "", *f);

			if (n < 0 || (size_t)n >= sizeof(buf) - off)
				return buf;
			off += n;
		}
	}
	return buf;
}

const char *ct_lib_name(uint8_t lib)
{
	static const char *const names[CT_LIB_MAX] = {
	    [CT_LIB_NONE] = "none",  [CT_LIB_MPI] = "mpi",
	    [CT_LIB_GLOO] = "gloo",  [CT_LIB_C10D] = "c10d",
	    [CT_LIB_NCCL] = "nccl",  [CT_LIB_HCCL] = "hccl",
	    [CT_LIB_LDSO] = "ld.so", [CT_LIB_TORCH_PYTHON] = "torch_python",
	};

	return lib < CT_LIB_MAX && names[lib] ? names[lib] : "?";
}

const char *ct_kind_name(uint8_t kind)
{
	static const char *const names[CT_K_MAX] = {
	    [CT_K_NONE] = "other",
	    [CT_K_ALLREDUCE] = "all_reduce",
	    [CT_K_REDUCE] = "reduce",
	    [CT_K_BROADCAST] = "broadcast",
	    [CT_K_ALLGATHER] = "all_gather",
	    [CT_K_GATHER] = "gather",
	    [CT_K_SCATTER] = "scatter",
	    [CT_K_ALLTOALL] = "all_to_all",
	    [CT_K_REDUCE_SCATTER] = "reduce_scatter",
	    [CT_K_BARRIER] = "barrier",
	    [CT_K_SEND] = "send",
	    [CT_K_RECV] = "recv",
	    [CT_K_SENDRECV] = "sendrecv",
	    [CT_K_WAIT] = "wait",
	    [CT_K_GROUP_START] = "group_start",
	    [CT_K_GROUP_END] = "group_end",
	    [CT_K_COMM_INIT] = "comm_init",
	    [CT_K_COMM_SPLIT] = "comm_split",
	    [CT_K_COMM_DESTROY] = "comm_destroy",
	    [CT_K_DL_STATE] = "dl_state",
	    [CT_K_AUTOGRAD_CTX] = "autograd_ctx",
	    [CT_K_BACKWARD_RUN] = "backward_run",
	};

	return kind < CT_K_MAX && names[kind] ? names[kind] : "?";
}

const char *ct_peer_role(const struct ct_func *fn)
{
	if (!ct_func_reads(fn, CT_V_PEER))
		return NULL;
	switch (fn->kind) {
	case CT_K_BROADCAST:
	case CT_K_REDUCE:
	case CT_K_GATHER:
	case CT_K_SCATTER:
		return "root";
	case CT_K_SEND:
	case CT_K_RECV:
	case CT_K_SENDRECV:
		return "peer";
	}
	return NULL;
}

const struct ct_named_value *ct_named_find(const struct ct_named_value *t, size_t n, uint64_t value)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].value == value)
			return &t[i];
	return NULL;
}

static uint64_t elem_size(const struct ct_libdesc *lib, uint8_t slot, const __u64 *val)
{
	const struct ct_named_value *d;

	if (slot == CT_SZ_DTYPE || slot == CT_SZ_RDTYPE) {
		d = ct_named_find(lib->dtypes, lib->n_dtypes,
				  val[slot == CT_SZ_DTYPE ? CT_V_DTYPE : CT_V_RDTYPE]);
		return d ? d->size : 0;
	}
	return slot < CT_NVAL ? val[slot] : 0;
}

uint64_t ct_bytes(const struct ct_libdesc *lib, const struct ct_bytes_rule *r, const __u64 *val)
{
	uint64_t b;

	if (!r->on || r->count >= CT_NVAL)
		return 0;
	if (r->when != CT_W_ALWAYS) {
		int root = (int32_t)val[CT_V_PEER], rank = (int32_t)val[CT_V_COMM_RANK];

		if ((r->when == CT_W_ROOT) != (root == rank))
			return 0;
	}
	b = val[r->count] * elem_size(lib, r->size, val);
	if (r->by_comm)
		b *= val[CT_V_COMM_SIZE];
	return b;
}
