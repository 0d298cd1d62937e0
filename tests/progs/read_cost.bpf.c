// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * What a BPF program's reads of a traced process's memory cost (tests/progs/read_cost.c,
 * `scripts/bench.py reads`): an entry probe that makes `reads` reads of `len` bytes each,
 * read i at base + i * stride, the base the probed function's first argument (a mapping of
 * the target's) or, where bit i of `on_stack` is set, its stack pointer (another region).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define RC_MAX_READS 16
#define RC_MAX_LEN   16384

__u32 reads, len, stride, on_stack;

struct rc_buf {
	__u8 d[RC_MAX_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rc_buf);
} rc_bufs SEC(".maps");

SEC("uprobe")
int rc_probe(struct pt_regs *ctx)
{
	__u32 zero = 0, n;
	struct rc_buf *b = bpf_map_lookup_elem(&rc_bufs, &zero);
	__u64 heap = PT_REGS_PARM1(ctx), sp = PT_REGS_SP(ctx);

	if (!b)
		return 0;
	for (int i = 0; i < RC_MAX_READS; i++) {
		if (i >= reads)
			break;
		n = len;
		/* Hide the bound from clang, or it drops the mask the verifier needs. */
		asm volatile("" : "+r"(n));
		n &= RC_MAX_LEN - 1;
		bpf_probe_read_user(b->d, n,
				    (void *)((on_stack >> i & 1 ? sp : heap) + (__u64)i * stride));
	}
	return 0;
}
