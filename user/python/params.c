// SPDX-License-Identifier: MIT
/*
 * Parameters of a running model (--sharding), read with process_vm_readv.
 *
 * Tensor layout of torch 1.13 (x86-64), measured on live tensors with ctypes
 * (`ctypes.string_at(id(t), 64)`, `ctypes.string_at(t._cdata, 256)`), for inline (2-d,
 * 3-d, 0-d) and heap (6-d) sizes, float32/float64/int32, Tensor and Parameter:
 *   THPVariable (the Python tensor): PyObject_HEAD, then c10::MaybeOwned<at::Tensor>
 *     cdata: isBorrowed_ (bool) at 16, the union at 24, which holds the at::Tensor itself
 *     when owned (one intrusive_ptr: the TensorImpl *, == t._cdata) or a const
 *     at::Tensor * when borrowed.
 *   TensorImpl: sizes_and_strides_ (c10::impl::SizesAndStrides) at 72: size_ (the dim
 *     count, size_t) at 72, then a union at 80: 5 inline sizes (and 5 strides) while
 *     size_ <= 5, else a pointer to the sizes (then the strides) on the heap;
 *     numel_ (int64_t) at 168; data_type_ (caffe2::TypeMeta, a uint16_t index equal to
 *     the c10::ScalarType for these types) at 176.
 * torch 2.x: see torch_layouts below. Other versions: no dtype, no shape; the type name
 * and placements are read all the same. A header that does not check (numel != product of
 * the sizes, an unknown dtype) yields no dtype and no shape either; so does a symbolic
 * (SymInt) shape, which torch keeps elsewhere.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "commtrace/abi.h"
#include "commtrace/pyoffsets.h"
#include "python/objects.h"
#include "python/params.h"
#include "python/symbolize.h"
#include "target/proc.h"
#include "tree.h"
#include "util/hash.h"

#define TI_HDR_MAX	256   /* TensorImpl bytes read per tensor (the fields above) */
#define SEEN_SLOTS	32768 /* >= 2 * (CT_PARAMS_MAX + CT_PARAMS_MODULES), a power of 2 */
#define VERSION_PY_MAX	4096  /* torch/version.py read */
#define MAPS_LINE_MAX	(PATH_MAX + 256)
#define PARAMS_INIT_CAP 64

static const struct ct_torch_layout torch_layouts[] = {
    {.version = "1.13",
     .thp_borrowed = 16,
     .thp_cdata = 24,
     .ti_dim = 72,
     .ti_sizes = 80,
     .inline_max = 5,
     .ti_numel = 168,
     .ti_dtype = 176},
    /* torch 2.x: numel_ and data_type_ measured on 2.11 (scripts/torch-layout.py, the
     * c10d2 table), 8 bytes lower than 1.13; sizes_and_strides_ sits right before
     * storage_offset_ and numel_ as in 1.13, so 8 lower too. THPVariable keeps its
     * MaybeOwned<at::Tensor> cdata. Every tensor is checked (numel = product of sizes,
     * a known dtype) before a shape is shown. */
    {.version = "2",
     .thp_borrowed = 16,
     .thp_cdata = 24,
     .ti_dim = 64,
     .ti_sizes = 72,
     .inline_max = 5,
     .ti_numel = 160,
     .ti_dtype = 168},
};

const struct ct_torch_layout *ct_torch_layout_for(const char *version)
{
	for (size_t i = 0; i < sizeof(torch_layouts) / sizeof(torch_layouts[0]); i++) {
		size_t n = strlen(torch_layouts[i].version);

		/* "1.13" matches "1.13", "1.13.0a0", "1.13.1+cpu", not "1.130". */
		if (version && !strncmp(version, torch_layouts[i].version, n) &&
		    (version[n] == '\0' || version[n] == '.' || version[n] == '+'))
			return &torch_layouts[i];
	}
	return NULL;
}

int ct_torch_version_parse(const char *text, char *buf, size_t len)
{
	const char *p = text;

	if (!len)
		return -EINVAL;
	buf[0] = '\0';
	while ((p = strstr(p, "__version__"))) {
		const char *q = p + strlen("__version__");
		size_t n = 0;
		char quote;

		/* At the start of a line: not `git__version__` or a comment's mention. */
		if (p != text && p[-1] != '\n') {
			p = q;
			continue;
		}
		while (*q == ' ' || *q == '\t')
			q++;
		if (*q == ':') { /* `__version__: str = '2.1.0'` */
			q++;
			while (*q && *q != '=' && *q != '\n')
				q++;
		}
		if (*q++ != '=') {
			p = q;
			continue;
		}
		while (*q == ' ' || *q == '\t')
			q++;
		quote = *q;
		if (quote != '\'' && quote != '"') {
			p = q;
			continue;
		}
		q++;
		while (q[n] && q[n] != quote && q[n] != '\n' && n + 1 < len)
			n++;
		if (q[n] != quote)
			return -ENOENT;
		memcpy(buf, q, n);
		buf[n] = '\0';
		return n ? 0 : -ENOENT;
	}
	return -ENOENT;
}

/* torch's __version__ in pid: version.py next to the torch/_C extension it mapped, else
 * the version suffix of libtorch_cpu.so.X.Y.Z (Debian's). */
void ct_torch_version(pid_t pid, char *buf, size_t len)
{
	char path[64], line[MAPS_LINE_MAX], file[PATH_MAX + 64], text[VERSION_PY_MAX];
	char lib_version[32] = "";
	FILE *f;
	int fd;
	ssize_t n;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return;
	file[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		char *name = strchr(line, '/'), *base, *nl;

		if (!name)
			continue;
		nl = strchr(name, '\n');
		if (nl)
			*nl = '\0';
		base = strrchr(name, '/') + 1;
		if (!strncmp(base, "_C.", 3) && base - name >= 7 &&
		    !strncmp(base - 7, "/torch/", 7)) {
			base[0] = '\0';
			char py[PATH_MAX];

			snprintf(py, sizeof(py), "%sversion.py", name);
			if (ct_proc_file_path(pid, py, file, sizeof(file)))
				file[0] = '\0';
			break;
		}
		if (!lib_version[0] && !strncmp(base, "libtorch_cpu.so.", 16))
			snprintf(lib_version, sizeof(lib_version), "%s", base + 16);
	}
	fclose(f);
	if (file[0]) {
		fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			n = read(fd, text, sizeof(text) - 1);
			close(fd);
			if (n > 0) {
				text[n] = '\0';
				if (!ct_torch_version_parse(text, buf, len))
					return;
			}
		}
	}
	snprintf(buf, len, "%s", lib_version);
}

int ct_tensor_decode(const struct ct_torch_layout *l, const uint8_t *ti, size_t len,
		     const int64_t *heap, size_t nheap, uint16_t *dtype, int *ndim, int64_t *shape,
		     uint64_t *heap_addr)
{
	uint64_t dim, prod = 1;
	int64_t numel;
	const int64_t *sizes;
	int64_t inl[CT_PARAM_DIMS_MAX];

	if ((size_t)l->ti_dim + 8 > len || (size_t)l->ti_sizes + 8u * l->inline_max > len ||
	    (size_t)l->ti_numel + 8 > len || (size_t)l->ti_dtype + 2 > len ||
	    l->inline_max > CT_PARAM_DIMS_MAX)
		return -EINVAL;
	memcpy(&dim, ti + l->ti_dim, sizeof(dim));
	memcpy(&numel, ti + l->ti_numel, sizeof(numel));
	memcpy(dtype, ti + l->ti_dtype, sizeof(*dtype));
	if (dim > 64 || numel < 0) /* torch allows 64 dims at most */
		return -EINVAL;
	if (dim > CT_PARAM_DIMS_MAX)
		return -E2BIG;
	*ndim = (int)dim;
	if (dim <= l->inline_max) {
		memcpy(inl, ti + l->ti_sizes, 8 * dim);
		sizes = inl;
	} else {
		memcpy(heap_addr, ti + l->ti_sizes, sizeof(*heap_addr));
		if (!heap)
			return -EAGAIN;
		if (nheap < dim)
			return -EINVAL;
		sizes = heap;
	}
	for (uint64_t i = 0; i < dim; i++) {
		if (sizes[i] < 0)
			return -EINVAL;
		/* numel never overflows: a product past it means these are not sizes. */
		if (sizes[i] && prod > (uint64_t)INT64_MAX / (uint64_t)sizes[i])
			return -EINVAL;
		prod *= (uint64_t)sizes[i];
		shape[i] = sizes[i];
	}
	return prod == (uint64_t)numel ? 0 : -EINVAL;
}

void ct_placements_format(char *buf, size_t len, const char *const *items, size_t n)
{
	size_t off = 0;
	int w;

	if (!len)
		return;
	w = snprintf(buf, len, "(");
	for (size_t i = 0; i < n && w >= 0 && (size_t)w < len - off; i++) {
		off += (size_t)w;
		w = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", items[i]);
	}
	if (w >= 0 && (size_t)w < len - off) {
		off += (size_t)w;
		snprintf(buf + off, len - off, "%s)", n == 1 ? "," : "");
	}
}

struct walk {
	pid_t pid;
	const struct ct_py_objoffsets *oo;
	const struct ct_py_offsets *o;
	const struct ct_torch_layout *tl; /* NULL: no dtype, no shape */
	struct ct_params *out;
	uint32_t cap, modules;
	uint64_t *seen; /* SEEN_SLOTS addresses of modules and parameters visited */
	uint32_t nseen;
	uint64_t none_type; /* NoneType, once a value's tp_name said so */
	char prefix[CT_PARAM_FQN_MAX];
	int depth;
};

/* Mark addr visited: true if it was already (a module shared or in a cycle). */
static bool seen_before(struct walk *w, uint64_t addr)
{
	uint64_t h = ct_hash_mix(addr, 0);

	for (uint32_t i = 0; i < SEEN_SLOTS; i++) {
		uint64_t *s = &w->seen[(h + i) & (SEEN_SLOTS - 1)];

		if (*s == addr)
			return true;
		if (!*s) {
			/* Kept half empty; past that, treat as seen (the walk stops growing). */
			if (w->nseen >= SEEN_SLOTS / 2) {
				w->out->unreadable++;
				return true;
			}
			*s = addr;
			w->nseen++;
			return false;
		}
	}
	return true;
}

static bool is_none(struct walk *w, uint64_t obj)
{
	char tn[32];
	uint64_t type;

	if (ct_py_read_mem(w->pid, obj + w->o->object_type, &type, sizeof(type)))
		return false;
	if (w->none_type)
		return type == w->none_type;
	if (ct_py_read_type_name(w->pid, w->o, obj, tn, sizeof(tn)) || strcmp(tn, "NoneType"))
		return false;
	w->none_type = type;
	return true;
}

/* A type name without its module ("torch.distributed._tensor.api.DTensor" -> "DTensor"). */
static int short_type_name(struct walk *w, uint64_t obj, char *buf, size_t len)
{
	char tn[CT_PY_NAME_MAX];
	const char *dot;
	int err = ct_py_read_type_name(w->pid, w->o, obj, tn, sizeof(tn));

	if (err)
		return err;
	dot = strrchr(tn, '.');
	/* A name past len is cut: it still says which class. */
	return snprintf(buf, len, "%s", dot ? dot + 1 : tn) < 0 ? -EINVAL : 0;
}

/*
 * One placement: a str as it is, else `Shard(dim=0)`, `Partial(sum)`, `Replicate()`. Its
 * field is torch's `dim` or `reduce_op`, or hyper-parallel's `_dim` or `_reduce_op` (behind
 * a property). A Shard or Partial whose field cannot be read is `Shard(?)`, never `Shard()`.
 */
static int placement_str(struct walk *w, uint64_t obj, char *buf, size_t len)
{
	static const char *const attrs[] = {"dim", "_dim", "reduce_op", "_reduce_op"};
	char name[CT_PARAM_TYPE_MAX], s[64];
	uint64_t v[4];
	int64_t dim;
	int n, err = ct_py_read_str(w->pid, w->o, obj, buf, len);

	if (!err)
		return 0;
	err = short_type_name(w, obj, name, sizeof(name));
	if (err)
		return err;
	ct_py_getattrs(w->pid, w->oo, w->o, obj, attrs, 4, v);
	v[0] = v[0] ? v[0] : v[1];
	v[2] = v[2] ? v[2] : v[3];
	if (v[0] && !ct_py_read_int(w->pid, w->oo, w->o, v[0], &dim))
		n = snprintf(buf, len, "%s(dim=%lld)", name, (long long)dim);
	else if (v[2] && !ct_py_read_str(w->pid, w->o, v[2], s, sizeof(s)))
		n = snprintf(buf, len, "%s(%s)", name, s);
	else
		n = snprintf(buf, len, "%s(%s)", name, strstr(name, "Replicate") ? "" : "?");
	return n < 0 ? -EINVAL : 0; /* cut at len: a placement's name is short */
}

/* Where a tensor keeps its placements and its device mesh (0: not found). */
struct dist_refs {
	uint64_t placements, mesh;
};

/*
 * Its own `_placements` or `placements`, `device_mesh` or `_device_mesh` (hyper-parallel,
 * torch 1.x shapes), else those of its `_spec` (a torch 2.x DTensor): one read of each
 * object's attributes for all the names.
 */
static struct dist_refs dist_refs(struct walk *w, uint64_t obj)
{
	static const char *const own[] = {"_placements", "placements", "device_mesh",
					  "_device_mesh", "_spec"};
	static const char *const spec[] = {"placements", "mesh"};
	uint64_t a[5], b[2];
	struct dist_refs r = {0};

	if (ct_py_getattrs(w->pid, w->oo, w->o, obj, own, 5, a) <= 0)
		return r;
	r.placements = a[0] ? a[0] : a[1];
	r.mesh = a[2] ? a[2] : a[3];
	if ((!r.placements || !r.mesh) && a[4] &&
	    ct_py_getattrs(w->pid, w->oo, w->o, a[4], spec, 2, b) > 0) {
		r.placements = r.placements ? r.placements : b[0];
		r.mesh = r.mesh ? r.mesh : b[1];
	}
	if (r.placements && is_none(w, r.placements))
		r.placements = 0;
	if (r.mesh && is_none(w, r.mesh))
		r.mesh = 0;
	return r;
}

/* The placements at v (a str, or a tuple of placements), as the repr of their tuple. */
static void placements_str(struct walk *w, uint64_t v, char *buf, size_t len)
{
	char strs[CT_PARAM_PLACE_ITEMS][64];
	const char *ptrs[CT_PARAM_PLACE_ITEMS];
	uint64_t items[CT_PARAM_PLACE_ITEMS];
	size_t n = 0;

	buf[0] = '\0';
	if (!v)
		return;
	/* A bare string is shown as it is. */
	if (!ct_py_read_str(w->pid, w->o, v, buf, len))
		return;
	if (ct_py_tuple_items(w->pid, w->oo, w->o, v, items, CT_PARAM_PLACE_ITEMS, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		if (placement_str(w, items[i], strs[i], sizeof(strs[i])))
			snprintf(strs[i], sizeof(strs[i]), "?");
		ptrs[i] = strs[i];
	}
	ct_placements_format(buf, len, ptrs, n);
}

void ct_tensor_placements(pid_t pid, const struct ct_py_offsets *o, uint64_t obj, char *buf,
			  size_t len)
{
	struct walk w = {.pid = pid, .o = o};

	buf[0] = '\0';
	w.oo = ct_py_objoffsets_for(o->major, o->minor);
	if (w.oo)
		placements_str(&w, dist_refs(&w, obj).placements, buf, len);
}

int ct_spec_layout(pid_t pid, const struct ct_py_offsets *o, uint64_t spec, struct ct_spec_bpf *out)
{
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(o->major, o->minor);
	/* the words of the inline values a copy of CT_CAP_BYTES from CT_CAP_BEFORE holds */
	uint64_t type, flags, dict, placements, vals[(CT_CAP_BYTES - CT_CAP_BEFORE) / 8];
	size_t nvals, found = 0;
	uint16_t slot = 0;
	uint8_t valid;
	int err;

	if (!oo || oo->inline_values == CT_PY_NONE || oo->managed_dict >= 0 ||
	    -oo->managed_dict > CT_CAP_BEFORE ||
	    oo->inline_values + oo->values_array >= CT_CAP_BYTES - CT_CAP_BEFORE)
		return -ENOTSUP;
	nvals = (CT_CAP_BYTES - CT_CAP_BEFORE - oo->inline_values - oo->values_array) / 8;
	err = ct_py_type_of(pid, oo, o, spec, &type, &flags);
	if (!err && !(flags & oo->tpflags_inline_values))
		return -ENOTSUP;
	if (!err)
		err = ct_py_read_mem(pid, spec + (uint64_t)(int64_t)oo->managed_dict, &dict, 8);
	if (!err)
		err = ct_py_read_mem(pid, spec + oo->inline_values + oo->values_valid, &valid, 1);
	if (!err && (dict || valid != 1))
		return -ENOTSUP;
	if (!err)
		err = ct_py_getattr(pid, oo, o, spec, "placements", &placements);
	if (!err)
		err = ct_py_read_mem(pid, spec + oo->inline_values + oo->values_array, vals,
				     nvals * 8);
	if (err)
		return err;
	for (size_t i = 0; i < nvals; i++) {
		if (vals[i] == placements && found++ == 0)
			slot = (uint16_t)(oo->inline_values + oo->values_array + 8 * i);
	}
	if (found != 1)
		return -ENOTSUP; /* not among the values, or not told apart */
	out->type = type;
	out->slot = slot;
	out->valid = oo->inline_values + oo->values_valid;
	out->item = oo->inline_values + oo->values_array;
	out->dict = (uint16_t)-oo->managed_dict;
	return 0;
}

/* The dtype's name ("torch.float32") for a TypeMeta index, NULL when unknown. */
const char *ct_torch_dtype_name(uint16_t dtype)
{
	for (size_t i = 0; i < ct_lib_c10d.n_dtypes; i++)
		if (ct_lib_c10d.dtypes[i].value == dtype)
			return ct_lib_c10d.dtypes[i].name;
	return NULL;
}

/* dtype and shape from the TensorImpl behind the Python tensor at obj. */
int ct_tensor_read(pid_t pid, const struct ct_torch_layout *l, uint64_t obj, uint16_t *dtype,
		   int *ndim, int64_t *shape)
{
	uint8_t ti[TI_HDR_MAX];
	int64_t heap[CT_PARAM_DIMS_MAX];
	uint64_t impl, heap_addr = 0;
	uint8_t borrowed;
	int err;

	if (!l)
		return -ENOTSUP;
	err = ct_py_read_mem(pid, obj + l->thp_borrowed, &borrowed, 1);
	if (!err)
		err = ct_py_read_mem(pid, obj + l->thp_cdata, &impl, sizeof(impl));
	if (!err && borrowed > 1)
		err = -EINVAL;
	if (!err && borrowed) /* a const at::Tensor *: the TensorImpl * is its one field */
		err = ct_py_read_mem(pid, impl, &impl, sizeof(impl));
	if (!err)
		err = ct_py_read_mem(pid, impl, ti, (size_t)l->ti_dtype + 2);
	if (!err)
		err = ct_tensor_decode(l, ti, (size_t)l->ti_dtype + 2, NULL, 0, dtype, ndim, shape,
				       &heap_addr);
	if (err == -EAGAIN) {
		err = ct_py_read_mem(pid, heap_addr, heap, (size_t)*ndim * sizeof(heap[0]));
		if (!err)
			err = ct_tensor_decode(l, ti, (size_t)l->ti_dtype + 2, heap, (size_t)*ndim,
					       dtype, ndim, shape, &heap_addr);
	}
	if (err == -E2BIG) {
		/* Too many dims to show; the dtype is still good. */
		err = 0;
		*ndim = -1;
	}
	if (!err && !ct_torch_dtype_name(*dtype))
		err = -EINVAL;
	return err;
}

static void tensor_meta(struct walk *w, uint64_t obj, struct ct_param *p)
{
	uint16_t dtype;
	int ndim, err;

	if (!w->tl)
		return;
	err = ct_tensor_read(w->pid, w->tl, obj, &dtype, &ndim, p->shape);
	if (err) {
		if (err == -EINVAL)
			w->out->mismatched++;
		else
			w->out->unreadable++;
		p->dtype = NULL;
		return;
	}
	p->dtype = ct_torch_dtype_name(dtype);
	p->ndim = ndim;
}

/*
 * The device mesh at mesh, from torch DeviceMesh's `device_type`, the shape of its `mesh`
 * tensor and its `mesh_dim_names` (hyper-parallel's: the same behind properties, `_`
 * first): "DeviceMesh(cpu, shape=[2], dims=(tp))". What memo holds, when the mesh and those
 * three are the objects it was made from.
 */
static int mesh_str(struct walk *w, uint64_t mesh, struct ct_mesh_memo *memo, char *buf, size_t len)
{
	static const char *const attrs[] = {"device_type",  "mesh",  "mesh_dim_names",
					    "_device_type", "_mesh", "_mesh_dim_names"};
	struct ct_param t = {.ndim = -1};
	char dev[32] = "?", names[96] = "", name[32];
	uint64_t v[6], items[CT_PARAM_DIMS_MAX];
	size_t n = 0, o2;
	int found = mesh ? ct_py_getattrs(w->pid, w->oo, w->o, mesh, attrs, 6, v) : -ENOENT;

	if (found < 0)
		return found;
	for (int i = 0; i < 3; i++)
		v[i] = v[i] ? v[i] : v[i + 3];
	if (memo && memo->pid == w->pid && memo->mesh == mesh &&
	    !memcmp(memo->attrs, v, sizeof(memo->attrs))) {
		snprintf(buf, len, "%s", memo->str);
		return 0;
	}
	if (v[0])
		ct_py_read_str(w->pid, w->o, v[0], dev, sizeof(dev));
	if (v[1])
		tensor_meta(w, v[1], &t);
	if (v[2] && !is_none(w, v[2]) &&
	    !ct_py_tuple_items(w->pid, w->oo, w->o, v[2], items, CT_PARAM_DIMS_MAX, &n)) {
		o2 = 0;
		for (size_t i = 0; i < n && o2 < sizeof(names); i++) {
			if (ct_py_read_str(w->pid, w->o, items[i], name, sizeof(name)))
				snprintf(name, sizeof(name), "?");
			o2 += (size_t)snprintf(names + o2, sizeof(names) - o2, "%s%s",
					       i ? ", " : "", name);
		}
	}
	o2 = (size_t)snprintf(buf, len, "DeviceMesh(%s, shape=%s", dev, t.ndim < 0 ? "?" : "");
	if (o2 < len)
		o2 += ct_shape_format(buf + o2, len - o2, t.shape, t.ndim);
	if (names[0] && o2 < len)
		o2 += (size_t)snprintf(buf + o2, len - o2, ", dims=(%s)", names);
	if (o2 < len)
		snprintf(buf + o2, len - o2, ")");
	if (memo) {
		*memo = (struct ct_mesh_memo){.pid = w->pid, .mesh = mesh};
		memcpy(memo->attrs, v, sizeof(memo->attrs));
		snprintf(memo->str, sizeof(memo->str), "%s", buf);
	}
	return 0;
}

int ct_tensor_dist(pid_t pid, const struct ct_py_offsets *o, const struct ct_torch_layout *tl,
		   uint64_t obj, struct ct_mesh_memo *memo, char *placements, size_t plen,
		   char *mesh, size_t mlen)
{
	struct ct_params sink = {0};
	struct walk w = {.pid = pid, .o = o, .tl = tl, .out = &sink};
	struct dist_refs r;

	placements[0] = mesh[0] = '\0';
	w.oo = ct_py_objoffsets_for(o->major, o->minor);
	if (!w.oo)
		return -ENOTSUP;
	r = dist_refs(&w, obj);
	placements_str(&w, r.placements, placements, plen);
	return mesh_str(&w, r.mesh, memo, mesh, mlen);
}

static struct ct_param *param_slot(struct walk *w)
{
	struct ct_params *out = w->out;

	if (out->n == CT_PARAMS_MAX) {
		out->dropped++;
		return NULL;
	}
	if (out->n == w->cap) {
		uint32_t cap = w->cap ? w->cap * 2 : PARAMS_INIT_CAP;
		struct ct_param *v;

		if (cap > CT_PARAMS_MAX)
			cap = CT_PARAMS_MAX;
		v = realloc(out->v, (size_t)cap * sizeof(*v));
		if (!v) {
			out->dropped++;
			return NULL;
		}
		out->v = v;
		w->cap = cap;
	}
	memset(&out->v[out->n], 0, sizeof(out->v[0]));
	return &out->v[out->n++];
}

static int key_name(struct walk *w, uint64_t key, char *buf, size_t len)
{
	int err = ct_py_read_str(w->pid, w->o, key, buf, len);

	if (err)
		w->out->unreadable++;
	return err;
}

static int on_param(void *ctx, uint64_t key, uint64_t value)
{
	struct walk *w = ctx;
	char name[CT_PARAM_FQN_MAX];
	struct ct_param *p;
	uint64_t local;
	int n;

	/* register_parameter(name, None) leaves a None. A tied weight (output.weight is
	 * tok_embeddings.weight) is listed under each module that holds it, as CommDebugMode's
	 * get_sharding_info() lists it. */
	if (key_name(w, key, name, sizeof(name)) || is_none(w, value))
		return 0;
	p = param_slot(w);
	if (!p)
		return 0;
	n = snprintf(p->fqn, sizeof(p->fqn), "%s%s", w->prefix, name);
	if (n < 0 || (size_t)n >= sizeof(p->fqn)) {
		/* A cut FQN would name another parameter: not listed. */
		w->out->n--;
		w->out->unreadable++;
		return 0;
	}
	p->ndim = -1;
	if (short_type_name(w, value, p->type, sizeof(p->type)))
		snprintf(p->type, sizeof(p->type), "?");
	tensor_meta(w, value, p);
	placements_str(w, dist_refs(w, value).placements, p->placements, sizeof(p->placements));
	/* A torch 2.x DTensor: the shape above is the global one, this rank holds a shard. */
	p->local_ndim = -1;
	if (!ct_py_getattr(w->pid, w->oo, w->o, value, "_local_tensor", &local)) {
		struct ct_param lp = {.ndim = -1};

		tensor_meta(w, local, &lp);
		p->local_ndim = lp.ndim;
		memcpy(p->local_shape, lp.shape, sizeof(p->local_shape));
	}
	return 0;
}

static int walk_module(struct walk *w, uint64_t mod);

static int on_child(void *ctx, uint64_t key, uint64_t value)
{
	struct walk *w = ctx;
	char name[CT_PARAM_FQN_MAX];
	size_t plen = strlen(w->prefix);
	int n;

	if (key_name(w, key, name, sizeof(name)) || is_none(w, value))
		return 0;
	n = snprintf(w->prefix + plen, sizeof(w->prefix) - plen, "%s.", name);
	if (n < 0 || (size_t)n >= sizeof(w->prefix) - plen)
		w->out->unreadable++; /* an FQN past CT_PARAM_FQN_MAX: not listed */
	else
		walk_module(w, value);
	w->prefix[plen] = '\0';
	return 0;
}

/* A module's own parameters, then its children's, as named_parameters() lists them. */
static int walk_module(struct walk *w, uint64_t mod)
{
	uint64_t dict;
	int err;

	if (w->depth >= CT_PARAMS_DEPTH || w->modules >= CT_PARAMS_MODULES) {
		w->out->unreadable++;
		return 0;
	}
	if (seen_before(w, mod))
		return 0;
	w->modules++;
	err = ct_py_getattr(w->pid, w->oo, w->o, mod, "_parameters", &dict);
	if (!err)
		err = ct_py_dict_foreach(w->pid, w->oo, w->o, dict, on_param, w);
	if (err && w->depth == 0)
		return err; /* the root is not a readable nn.Module */
	if (err)
		w->out->unreadable++;
	if (!ct_py_getattr(w->pid, w->oo, w->o, mod, "_modules", &dict)) {
		w->depth++;
		if (ct_py_dict_foreach(w->pid, w->oo, w->o, dict, on_child, w))
			w->out->unreadable++;
		w->depth--;
	}
	return 0;
}

struct ct_params *ct_params_collect(pid_t pid, const struct ct_pyproc *py, uint64_t root)
{
	struct ct_params *out = calloc(1, sizeof(*out));
	struct walk w = {.pid = pid, .o = &py->offsets, .out = out};

	if (!out)
		return NULL;
	w.oo = ct_py_objoffsets_for(py->major, py->minor);
	w.seen = calloc(SEEN_SLOTS, sizeof(*w.seen));
	if (!w.seen) {
		free(out);
		return NULL;
	}
	if (!w.oo || !root) {
		out->err = -EINVAL;
		goto done;
	}
	ct_torch_version(pid, out->torch_version, sizeof(out->torch_version));
	w.tl = ct_torch_layout_for(out->torch_version);
	out->layout_known = w.tl != NULL;
	ct_py_snapshot_begin(pid); /* the types and dict keys every module shares, read once */
	out->err = walk_module(&w, root);
	ct_py_snapshot_end();
	/* A process that exited meanwhile: say so, whatever the read that failed said. */
	if (out->err && kill(pid, 0) && errno == ESRCH)
		out->err = -ESRCH;
done:
	free(w.seen);
	return out;
}

void ct_params_free(struct ct_params *p)
{
	if (!p)
		return;
	free(p->v);
	free(p);
}
