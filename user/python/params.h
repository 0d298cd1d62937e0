/* SPDX-License-Identifier: MIT */
/*
 * Parameters and sharding of a running model, read from outside (seed 000's
 * get_parameter_info / get_sharding_info, --sharding): from the root nn.Module found on
 * a collective's stack, its `_parameters` dict and, recursively, its `_modules`, as
 * torch's named_parameters() walks them (a module or parameter reached twice is listed
 * once, under its first name). Per parameter: its type name, its dtype and shape where
 * the TensorImpl layout of the running torch is known (torch 1.13: measured, see
 * params.c), and its placements when it carries them as an instance attribute
 * (`_placements`, `placements`, or `_spec.placements` of a PyTorch 2.x DTensor).
 * process_vm_readv only, every read checked, everything bounded.
 */
#ifndef CT_PYTHON_PARAMS_H
#define CT_PYTHON_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "python/pyproc.h"

#define CT_PARAMS_MAX	     4096 /* parameters listed per process; more are counted */
#define CT_PARAMS_MODULES    8192 /* modules visited per process */
#define CT_PARAMS_DEPTH	     32	  /* module nesting followed */
#define CT_PARAM_FQN_MAX     256
#define CT_PARAM_TYPE_MAX    64
#define CT_PARAM_PLACE_MAX   192 /* "(Shard(dim=0), Replicate())" */
#define CT_PARAM_PLACE_ITEMS 16	 /* placements read per parameter */
#define CT_PARAM_DIMS_MAX    16	 /* a tensor of more dims gets no shape */

struct ct_param {
	char fqn[CT_PARAM_FQN_MAX];   /* "layers.0.mlp.down_proj.weight" */
	char type[CT_PARAM_TYPE_MAX]; /* "Parameter", or the DTensor class name */
	const char *dtype;	      /* "torch.float32"; NULL when unknown */
	int ndim;		      /* -1: shape unknown */
	int64_t shape[CT_PARAM_DIMS_MAX];
	int local_ndim; /* a DTensor's local shard (its _local_tensor): -1 when it has none */
	int64_t local_shape[CT_PARAM_DIMS_MAX];
	char placements[CT_PARAM_PLACE_MAX]; /* "(Shard(dim=0),)"; "" when it has none */
};

/* The TensorImpl layout of a torch version: where a tensor's dim count, sizes, numel and
 * dtype are. */
struct ct_torch_layout {
	const char *version;   /* "1.13": major.minor it was measured on */
	uint16_t thp_borrowed; /* THPVariable: MaybeOwned<at::Tensor>::isBorrowed_ (bool) */
	uint16_t thp_cdata;    /* its union: the TensorImpl * (owned) or an at::Tensor * */
	uint16_t ti_dim;       /* SizesAndStrides::size_ (size_t) */
	uint16_t ti_sizes;     /* inline sizes (int64_t[inline_max]), else the heap pointer */
	uint16_t inline_max;   /* C10_SIZES_AND_STRIDES_MAX_INLINE_SIZE */
	uint16_t ti_numel;     /* numel_ (int64_t) */
	uint16_t ti_dtype;     /* data_type_ (TypeMeta index = ScalarType, uint16_t) */
};

struct ct_params {
	int err;		/* 0, or why nothing could be read (-errno) */
	char torch_version[32]; /* "1.13.0a0", "" when not found */
	bool layout_known;	/* dtypes and shapes were read */
	uint32_t n;
	uint32_t dropped;    /* parameters past CT_PARAMS_MAX */
	uint32_t unreadable; /* modules or parameters that could not be read */
	uint32_t mismatched; /* tensors whose layout did not check (numel != product) */
	struct ct_param *v;  /* n of them */
};

/*
 * Walk the module at root in process pid (its CPython: py). Always returns a struct (err
 * says when the root itself could not be read: -ESRCH once the process is gone), NULL
 * only without memory. Free with ct_params_free().
 */
struct ct_params *ct_params_collect(pid_t pid, const struct ct_pyproc *py, uint64_t root);
void ct_params_free(struct ct_params *p);

/* The layout for a torch __version__ ("1.13.0a0"), NULL when not measured. */
const struct ct_torch_layout *ct_torch_layout_for(const char *version);
/*
 * A torch tensor object's dtype and shape (shape: CT_PARAM_DIMS_MAX items), read from its
 * TensorImpl in process pid with layout l. 0 (*ndim -1: too many dims to show); -EINVAL when
 * the header does not check (not a tensor, another layout); -ENOTSUP without a layout.
 */
int ct_tensor_read(pid_t pid, const struct ct_torch_layout *l, uint64_t obj, uint16_t *dtype,
		   int *ndim, int64_t *shape);

/* torch's __version__ in process pid ("" when torch is not loaded). */
void ct_torch_version(pid_t pid, char *buf, size_t len);

/* The placements the tensor at obj carries (`_placements`, `placements`, `_spec.placements`)
 * as the repr of their tuple, "" when none could be read. */
void ct_tensor_placements(pid_t pid, const struct ct_py_offsets *o, uint64_t obj, char *buf,
			  size_t len);

/*
 * Where a torch 2.x DTensorSpec at spec keeps its placements, so that BPF can copy a spec
 * and its placements at a call (struct ct_spec_bpf's spec fields; its DTensor fields are
 * left as they are): its type, and from the object, the placements pointer's slot in its
 * inline values, the values' valid byte, the first value (a placement's field) and, before
 * the object, its managed dict pointer. 0, or -ENOTSUP where the interpreter has no inline
 * values (before 3.13) or the spec keeps its placements elsewhere (a dict, a slot), or
 * -errno (*out then unchanged).
 */
int ct_spec_layout(pid_t pid, const struct ct_py_offsets *o, uint64_t spec,
		   struct ct_spec_bpf *out);

/* The mesh described last, and the objects it was made from. */
struct ct_mesh_memo {
	pid_t pid;
	uint64_t mesh, attrs[3]; /* its device_type, mesh, mesh_dim_names */
	char str[192];
};

/*
 * The placements the tensor at obj carries (`_placements`, `placements`, else its
 * `_spec`'s) as the repr of their tuple, "" when none could be read; and its device mesh
 * (`device_mesh`, `_device_mesh`, else `_spec.mesh`), "DeviceMesh(cpu, shape=[2],
 * dims=(tp))". For the mesh 0, or -errno (-ENOENT: none). tl: the shape of the mesh,
 * when known. memo: NULL, or the mesh described last: the same mesh holding the same
 * objects is not read again.
 */
int ct_tensor_dist(pid_t pid, const struct ct_py_offsets *o, const struct ct_torch_layout *tl,
		   uint64_t obj, struct ct_mesh_memo *memo, char *placements, size_t plen,
		   char *mesh, size_t mlen);

/* The name of a TypeMeta index ("torch.float32"), NULL when unknown. */
const char *ct_torch_dtype_name(uint16_t dtype);

/* The __version__ string of a torch version.py's text: 0, or -ENOENT. */
int ct_torch_version_parse(const char *text, char *buf, size_t len);

/*
 * Decode a TensorImpl's header (len bytes read at its address; heap sizes, when there
 * are more dims than inline, passed as heap/nheap). 0 with dtype (ScalarType index),
 * ndim and shape filled; -EINVAL when the header does not check (numel != product of
 * the sizes, dims out of range), -E2BIG over CT_PARAM_DIMS_MAX dims, -EAGAIN when the
 * sizes are on the heap and heap is NULL (*ndim says how many to read from *heap_addr).
 */
int ct_tensor_decode(const struct ct_torch_layout *l, const uint8_t *ti, size_t len,
		     const int64_t *heap, size_t nheap, uint16_t *dtype, int *ndim, int64_t *shape,
		     uint64_t *heap_addr);

/* Placements as the repr of their tuple: "()", "(A,)" for one, "(A, B)" for more;
 * truncated to len - 1 bytes. */
void ct_placements_format(char *buf, size_t len, const char *const *items, size_t n);

#endif
