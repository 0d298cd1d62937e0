/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Argument decoding driven by the probe spec (struct ct_loc per value slot):
 * which register or stack slot, which dereference, which array sum. Adding a
 * library adds a table in user space (user/catalog/), never code here.
 */
#ifndef CT_ARGS_BPF_H
#define CT_ARGS_BPF_H

/*
 * The six register arguments and the stack pointer, read once at constant
 * offsets of ctx: the verifier refuses a ctx access whose offset the compiler
 * turned into a computed one (a switch becomes ctx + table[n]).
 */
struct ct_args {
	__u64 reg[7]; /* reg[1..6]; reg[0] unused */
	__u64 sp;
};

static __always_inline void read_args(struct pt_regs *ctx, struct ct_args *a)
{
	a->reg[0] = 0;
	a->reg[1] = PT_REGS_PARM1(ctx);
	a->reg[2] = PT_REGS_PARM2(ctx);
	a->reg[3] = PT_REGS_PARM3(ctx);
	a->reg[4] = PT_REGS_PARM4(ctx);
	a->reg[5] = PT_REGS_PARM5(ctx);
	/* libbpf 1.1 has no PT_REGS_PARM6; x86-64 passes the 6th in r9. */
	a->reg[6] = ctx->r9;
	a->sp = PT_REGS_SP(ctx);
}

static __always_inline __u64 arg_n(const struct ct_args *a, __u32 n)
{
	__u64 v = 0;

	if (n >= 1 && n <= 6)
		return a->reg[n];
	/*
	 * x86-64 SysV: at function entry [sp] holds the return address and the 7th
	 * integer argument is at [sp + 8]. BPF_UPROBE cannot name these.
	 */
	if (n > 6 && n <= 16 && bpf_probe_read_user(&v, sizeof(v), (void *)(a->sp + 8 * (n - 6))))
		count_drop(CT_DROP_READ);
	return v;
}

static __always_inline __u64 read_sized(__u64 addr, __u32 size)
{
	__u64 v = 0;
	long err;

	if (!addr)
		return 0;
	switch (size) {
	case 1:
		err = bpf_probe_read_user(&v, 1, (void *)addr);
		break;
	case 2:
		err = bpf_probe_read_user(&v, 2, (void *)addr);
		break;
	case 4:
		err = bpf_probe_read_user(&v, 4, (void *)addr);
		break;
	default:
		err = bpf_probe_read_user(&v, 8, (void *)addr);
		break;
	}
	if (err) {
		count_drop(CT_DROP_READ);
		return 0;
	}
	return v;
}

struct sum_ctx {
	__u64 base;
	__u64 n;
	__u64 sum;
	__u32 esz;
	__u32 err;
};

/* One chunk of 64 counts per bpf_loop() iteration: verified once, not 4096 times. */
static long sum_chunk(__u64 idx, void *data)
{
	struct sum_ctx *c = data;
	__u32 zero = 0;
	struct ct_scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	__u64 first = idx * 64, left;
	__u32 *b32;

	if (!s || first >= c->n)
		return 1;
	left = c->n - first;
	if (left > 64)
		left = 64;
	if (c->esz == 8) {
		if (bpf_probe_read_user(s->buf, left * 8, (void *)(c->base + first * 8))) {
			c->err = 1;
			return 1;
		}
		for (int j = 0; j < 64; j++) {
			if (j >= left)
				break;
			c->sum += s->buf[j];
		}
	} else {
		b32 = (__u32 *)s->buf;
		if (bpf_probe_read_user(b32, left * 4, (void *)(c->base + first * 4))) {
			c->err = 1;
			return 1;
		}
		for (int j = 0; j < 64; j++) {
			if (j >= left)
				break;
			/* MPI counts are C ints: a negative one is garbage, not a huge count. */
			if ((__s32)b32[j] > 0)
				c->sum += b32[j];
		}
	}
	return 0;
}

static __always_inline __u64 eval_loc(const struct ct_args *args, const struct ct_loc *l,
				      __u32 tgid, const __u64 *val)
{
	__u64 a = 0, aux = 0;
	__u8 op = l->op;

	if (l->aux < CT_NVAL)
		aux = val[l->aux];
	if (op != CT_LOC_CONST && op != CT_LOC_COMMINFO)
		a = arg_n(args, l->arg);

	switch (op) {
	case CT_LOC_ARG:
		/* The ABI leaves the upper bits of a register holding an int undefined. */
		if (l->size == 4)
			return (__u32)a;
		if (l->size == 2)
			return (__u16)a;
		if (l->size == 1)
			return (__u8)a;
		return a;
	case CT_LOC_DEREF:
		return read_sized(a ? a + l->off1 : 0, l->size);
	case CT_LOC_DEREF2:
		a = read_sized(a ? a + l->off1 : 0, 8);
		return read_sized(a ? a + l->off2 : 0, l->size);
	case CT_LOC_DEREF3:
		a = read_sized(a ? a + l->off1 : 0, 8);
		a = read_sized(a, 8);
		return read_sized(a ? a + l->off2 : 0, l->size);
	case CT_LOC_GROUP0: {
		__u32 v = 0;

		a = read_sized(a ? a + l->off1 : 0, 8);
		a = read_sized(a ? a + l->off2 : 0, 8);
		a = read_sized(a, 8);
		if (a & 1)
			return (a >> 32) | (1ULL << 32);
		if (!a || bpf_probe_read_user(&v, 4, (void *)(a + l->aux)))
			return 0;
		return (__u64)v | (1ULL << 32);
	}
	case CT_LOC_CONST:
		return (__u64)l->off1 | ((__u64)l->off2 << 16);
	case CT_LOC_INDEX:
		if (!a || aux > CT_MAX_VEC)
			return 0;
		return read_sized(a + aux * l->size, l->size);
	case CT_LOC_SUM: {
		struct sum_ctx c = {.base = a, .n = aux, .esz = l->size};

		if (!a || aux == 0)
			return 0;
		if (c.n > CT_MAX_VEC)
			c.n = CT_MAX_VEC;
		bpf_loop(CT_MAX_VEC / 64, sum_chunk, &c, 0);
		if (c.err)
			count_drop(CT_DROP_READ);
		return c.sum;
	}
	case CT_LOC_COMMINFO: {
		struct ct_comm_key key = {.tgid = tgid, .comm = val[CT_V_COMM]};
		struct ct_comm_info *info = bpf_map_lookup_elem(&comm_info, &key);

		if (!info)
			return 0;
		return l->aux == 1 ? info->rank : info->size;
	}
	}
	return 0;
}

struct ct_vals {
	__u64 v[CT_NVAL];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ct_vals);
} decoded SEC(".maps");

struct decode_ctx {
	struct ct_args args;
	__u32 probe_id;
	__u32 tgid;
};

/*
 * One slot per bpf_loop() iteration, in the order user space computed: the
 * callback is verified once, and a probe pays only for the slots it uses.
 */
static long decode_slot(__u64 idx, void *data)
{
	struct decode_ctx *c = data;
	const struct ct_probe_spec *spec;
	const struct ct_loc *l;
	struct ct_vals *out;
	__u32 zero = 0, i;

	out = bpf_map_lookup_elem(&decoded, &zero);
	spec = bpf_map_lookup_elem(&probe_specs, &c->probe_id);
	if (!out || !spec || idx >= CT_NVAL)
		return 1;
	i = spec->order[idx];
	asm volatile("" : "+r"(i)); /* keep the bound check on the register that indexes */
	if (i >= CT_NVAL)
		return 1;
	l = &spec->val[i];
	out->v[i] = eval_loc(&c->args, l, c->tgid, out->v);
	return 0;
}

/* Leaves the values of the probe's slots in the per-CPU `decoded` slot. */
static __always_inline int decode_args(struct pt_regs *ctx, __u32 probe_id, __u32 tgid, __u32 n)
{
	struct decode_ctx c = {.probe_id = probe_id, .tgid = tgid};
	struct ct_vals *out;
	__u32 zero = 0;

	out = bpf_map_lookup_elem(&decoded, &zero);
	if (!out)
		return -1;
	__builtin_memset(out, 0, sizeof(*out));
	if (!n)
		return 0;
	read_args(ctx, &c.args);
	bpf_loop(n, decode_slot, &c, 0);
	return 0;
}

#endif
