/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Copies, at the call, of the objects a name or a value is read from when they may not
 * outlive the call: a torch 2.x redistribution's source and target specs (a stack's
 * CT_PYC_CAPTURE frame), and with --ops the DTensors an op was called with or returned.
 * Each spec, its placements tuple, every placement and the object in its one field (and a
 * DTensor itself) go into one CT_EV_CAPTURE record sent before the record they belong to,
 * with its time; user space reads them from there (struct ct_spec_bpf says where they
 * are). Without them a redistribution's stack had to wake the reader at once (a forced
 * wakeup cost the calling thread about 30 us on these VMs, more than the whole walk), and
 * the reader could still come too late; an op's DTensors were read when its record was
 * handled, some of them freed or reused by then.
 */
#ifndef CT_CAPTURE_BPF_H
#define CT_CAPTURE_BPF_H

/*
 * The next region (ev->n) filled with the CT_CAP_BYTES around obj, and counted; its index,
 * or -1 when there is none left or obj could not be read. The count lives in the record, not
 * in a register: the verifier then does not follow every value it could take through
 * every branch (it did, past 250 000 instructions per --ops program).
 */
static __always_inline int cap_region(struct ct_capture_event *ev, __u64 obj)
{
	__u32 i = *(volatile __u32 *)&ev->n; /* reloaded: clang would reuse the last count */

	if (i >= CT_CAP_REGIONS || obj < CT_CAP_BEFORE)
		return -1;
	ev->r[i].addr = obj - CT_CAP_BEFORE;
	if (bpf_probe_read_user(ev->r[i].data, CT_CAP_BYTES, (void *)(obj - CT_CAP_BEFORE)))
		return -1;
	ev->n = i + 1;
	return (int)i;
}

/* The pointer-sized word at off from the object copied in region i (off 8-aligned). */
static __always_inline __u64 cap_word(const struct ct_capture_event *ev, int i, __u32 off)
{
	__u64 v = 0;

	if (i >= 0 && i < CT_CAP_REGIONS)
		__builtin_memcpy(&v, ev->r[i].data + ((CT_CAP_BEFORE + off) & (CT_CAP_BYTES - 8)),
				 8);
	return v;
}

/* Are the inline values of the object copied in region i its attributes, no dict's? */
static __always_inline bool cap_valid(const struct ct_capture_event *ev, int i,
				      const struct ct_spec_bpf *sp)
{
	__u64 dict = 0;

	if (i < 0 || i >= CT_CAP_REGIONS || sp->dict > CT_CAP_BEFORE)
		return false;
	__builtin_memcpy(&dict, ev->r[i].data + ((CT_CAP_BEFORE - sp->dict) & (CT_CAP_BYTES - 8)),
			 8);
	return !dict && ev->r[i].data[(CT_CAP_BEFORE + sp->valid) & (CT_CAP_BYTES - 1)] == 1;
}

/* One spec and what its placements are made of, into the next regions. */
static __always_inline bool cap_spec(const struct ct_pyproc_bpf *pp, struct ct_capture_event *ev,
				     __u64 spec)
{
	const struct ct_spec_bpf *sp = &pp->spec;
	int i = cap_region(ev, spec), t, k;
	__u64 items, val;

	if (i < 0 || cap_word(ev, i, pp->off.object_type) != sp->type || !cap_valid(ev, i, sp))
		return false;
	t = cap_region(ev, cap_word(ev, i, sp->slot));
	if (t < 0)
		return false;
	items = cap_word(ev, t, pp->vals.var_size);
	if (items > CT_CAP_ITEMS)
		return false;
	for (k = 0; k < CT_CAP_ITEMS; k++) {
		if (k >= items)
			break;
		i = cap_region(ev, cap_word(ev, t, pp->vals.tuple_items + 8 * k));
		if (i < 0 || !cap_valid(ev, i, sp))
			return false;
		val = cap_word(ev, i, sp->item);
		if (val && cap_region(ev, val) < 0)
			return false;
	}
	return true;
}

/* A record to copy into, where BPF knows the layouts (vals: a DTensor's too); else NULL. */
static __always_inline struct ct_capture_event *cap_begin(const struct ct_pyproc_bpf **pp,
							  __u64 pid_tgid, bool vals)
{
	__u32 tgid = pid_tgid >> 32;
	struct ct_capture_event *ev;

	*pp = bpf_map_lookup_elem(&pyprocs, &tgid);
	if (!*pp || !(*pp)->spec.type || (vals && !(*pp)->spec.dtensor))
		return NULL;
	ev = bpf_ringbuf_reserve(&events, sizeof(struct ct_capture_event), 0);
	if (ev)
		ev->n = 0;
	return ev;
}

static __always_inline void cap_send(struct ct_capture_event *ev, __u64 pid_tgid, __u64 ts)
{
	fill_hdr(&ev->hdr, CT_EV_CAPTURE, 0, pid_tgid, 0, ts);
	ev->pad = 0;
	bpf_ringbuf_submit(ev, wakeup_flag());
}

/*
 * After a walk of a known stack: the capture it asked for, sent. Whether the stack can stay
 * known: true when none was asked for or it was sent.
 */
static __noinline bool capture(__u64 pid_tgid, __u64 ts)
{
	__u32 zero = 0;
	struct walk_state *ws = bpf_map_lookup_elem(&walkbuf, &zero);
	const struct ct_pyproc_bpf *pp;
	struct ct_capture_event *ev;

	if (!ws || !ws->cap_spec[0])
		return true;
	if (!ws->cap_spec[1])
		return false;
	ev = cap_begin(&pp, pid_tgid, false);
	if (!ev)
		return false;
	if (!cap_spec(pp, ev, ws->cap_spec[0]) || !cap_spec(pp, ev, ws->cap_spec[1])) {
		bpf_ringbuf_discard(ev, BPF_RB_NO_WAKEUP);
		return false;
	}
	cap_send(ev, pid_tgid, ts);
	return true;
}

/*
 * --ops: the DTensors among an op's values (the items of a tuple, or obj), each with its
 * spec, as far as the regions go; nothing is sent when there is none. A DTensor not copied
 * whole is read from the live process, as before. Global: verified once, not at each of
 * the --ops programs' call sites. How many regions were sent.
 */
__noinline int capture_vals(__u64 pid_tgid, __u64 ts, __u64 obj, __u64 tuple)
{
	const struct ct_pyproc_bpf *pp;
	struct ct_capture_event *ev = cap_begin(&pp, pid_tgid, true);
	__u64 items = 1, v;
	__u32 mark;
	int i;

	if (!ev)
		return 0;
	if (tuple)
		items = rd64(obj + pp->vals.var_size);
	for (int k = 0; k < CT_OP_VALS; k++) {
		if (k >= items)
			break;
		v = tuple ? rd64(obj + pp->vals.tuple_items + 8 * k) : obj;
		mark = ev->n;
		i = cap_region(ev, v);
		if (i < 0 || cap_word(ev, i, pp->off.object_type) != pp->spec.dtensor ||
		    !cap_spec(pp, ev, cap_word(ev, i, pp->spec.dtensor_spec)))
			ev->n = mark; /* not a DTensor, or not whole: its regions are reused */
	}
	if (!ev->n) {
		bpf_ringbuf_discard(ev, BPF_RB_NO_WAKEUP);
		return 0;
	}
	mark = ev->n;
	cap_send(ev, pid_tgid, ts);
	return (int)mark;
}

#endif
