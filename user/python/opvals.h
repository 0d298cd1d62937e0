/* SPDX-License-Identifier: MIT */
/*
 * --ops: what an op was called with and returned, from the values BPF read while the
 * objects were alive (struct ct_op_vals, abi.h). Per value: its kind (the short name of
 * its type: "DTensor", "Parameter", "float", "None"); for a tensor (a type deriving from
 * torch's _TensorBase / TensorBase), its dtype and shape when the TensorImpl fields BPF
 * read check out (numel = product of the sizes, a known dtype), the placements it carries
 * and its device mesh. Types are classified once per (process, type object) and cached:
 * classes live as long as their process in practice. Placements and mesh are read from
 * user space when the event is handled (bounded reads, checked: the object must still
 * look alive and have its type).
 */
#ifndef CT_PYTHON_OPVALS_H
#define CT_PYTHON_OPVALS_H

#include <stdint.h>
#include <sys/types.h>

#include "commtrace/abi.h"
#include "python/params.h"
#include "python/pyproc.h"
#include "tree.h"

struct ct_opvals_cache;

/*
 * The shape of a tensor BPF described (struct ct_op_val) into shape (CT_OP_DIMS): its dim
 * count, or -1 where the fields were not read or do not check (numel is the product of
 * the sizes, the dtype is torch's).
 */
int ct_opval_shape(const struct ct_op_val *r, int64_t *shape);

/*
 * Whether the object at obj in process pid (interpreter offsets o) is a torch tensor: 1, 0
 * for any other object, -ESRCH when it is gone. By type when given (read by BPF at the
 * call), else by the object's head read now: gone when unreadable, or with a reference
 * count no live object has (a freed block's first word is a free-list pointer). Types are
 * cached.
 */
int ct_opvals_is_tensor(struct ct_opvals_cache *c, pid_t pid, const struct ct_py_offsets *o,
			uint64_t obj, uint64_t type);

struct ct_opvals_cache *ct_opvals_cache_new(void);
void ct_opvals_cache_free(struct ct_opvals_cache *c);

/*
 * Describe raw (from process pid, interpreter py, torch layout tl or NULL) into out (zeroed
 * first). sl: where the process's DTensors keep their spec and its placements (0: not
 * measured), by which a DTensor whose spec and placements are made of the same objects as
 * one described before is named from a cache, without reading its attributes.
 */
void ct_opvals_describe(struct ct_opvals_cache *c, pid_t pid, const struct ct_pyproc *py,
			const struct ct_torch_layout *tl, const struct ct_spec_bpf *sl,
			const struct ct_op_vals *raw, struct ct_values *out);

#endif
