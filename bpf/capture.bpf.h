/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Copies, at the call, of the objects a stack's names are read from when they may not
 * outlive it: a torch 2.x redistribution's source and target specs (CT_PYC_CAPTURE,
 * pyabi.h). Without them such a stack had to wake the reader at once (a forced wakeup
 * costs the calling thread about 30 us on these VMs, more than the whole walk), and the
 * reader could still come too late. The walker noted the innermost such frame's specs in
 * walkbuf; here each spec, its placements tuple, every placement and the object in its
 * first field are copied into one CT_EV_CAPTURE record sent before the call's. Anything
 * unexpected (another type, a dict that took the inline values over, more placements than
 * fit) sends nothing and says so: the caller then wakes the reader as before.
 */
#ifndef CT_CAPTURE_BPF_H
#define CT_CAPTURE_BPF_H

/* Copy CT_CAP_BYTES around obj into region i; false if it could not be read. */
static __always_inline bool cap_region(struct ct_capture_event *ev, __u32 i, __u64 obj)
{
	if (i >= CT_CAP_REGIONS || obj < CT_CAP_BEFORE)
		return false;
	ev->r[i].addr = obj - CT_CAP_BEFORE;
	return !bpf_probe_read_user(ev->r[i].data, CT_CAP_BYTES, (void *)(obj - CT_CAP_BEFORE));
}

/* The pointer-sized word at off from the object copied in region i (off 8-aligned). */
static __always_inline __u64 cap_word(const struct ct_capture_event *ev, __u32 i, __u32 off)
{
	__u64 v = 0;

	if (i < CT_CAP_REGIONS)
		__builtin_memcpy(&v, ev->r[i].data + ((CT_CAP_BEFORE + off) & (CT_CAP_BYTES - 8)),
				 8);
	return v;
}

/* Are the inline values of the object copied in region i its attributes, no dict's? */
static __always_inline bool cap_valid(const struct ct_capture_event *ev, __u32 i,
				      const struct walk_state *ws)
{
	__u64 dict = 0;

	if (i >= CT_CAP_REGIONS || ws->cap_dict > CT_CAP_BEFORE)
		return false;
	__builtin_memcpy(&dict,
			 ev->r[i].data + ((CT_CAP_BEFORE - ws->cap_dict) & (CT_CAP_BYTES - 8)), 8);
	return !dict && ev->r[i].data[(CT_CAP_BEFORE + ws->cap_valid) & (CT_CAP_BYTES - 1)] == 1;
}

/* One spec and what its placements are made of, from region *n on. */
static __always_inline bool cap_spec(const struct ct_pyproc_bpf *pp, struct ct_capture_event *ev,
				     const struct walk_state *ws, __u64 spec, __u32 *n)
{
	__u32 i = *n, t;
	__u64 tuple, items, item, val;

	if (!cap_region(ev, i, spec) || cap_word(ev, i, pp->off.object_type) != ws->cap_type ||
	    !cap_valid(ev, i, ws))
		return false;
	tuple = cap_word(ev, i, ws->cap_slot);
	t = ++i;
	if (!cap_region(ev, t, tuple))
		return false;
	items = cap_word(ev, t, pp->vals.var_size);
	if (items > CT_CAP_ITEMS)
		return false;
	i++;
	for (__u32 k = 0; k < CT_CAP_ITEMS; k++) {
		if (k >= items)
			break;
		item = cap_word(ev, t, pp->vals.tuple_items + 8 * k);
		if (!cap_region(ev, i, item) || !cap_valid(ev, i, ws))
			return false;
		val = cap_word(ev, i, ws->cap_item);
		i++;
		if (val && !cap_region(ev, i++, val))
			return false;
	}
	*n = i;
	return true;
}

/*
 * After a walk of a known stack: the capture it asked for, sent. Whether the stack can stay
 * known: true when none was asked for or it was sent.
 */
static __noinline bool capture(__u64 pid_tgid, __u64 ts)
{
	__u32 zero = 0, n = 0, tgid = pid_tgid >> 32;
	struct walk_state *ws = bpf_map_lookup_elem(&walkbuf, &zero);
	const struct ct_pyproc_bpf *pp;
	struct ct_capture_event *ev;

	if (!ws || !ws->cap_spec[0])
		return true;
	pp = bpf_map_lookup_elem(&pyprocs, &tgid);
	if (!pp || !ws->cap_spec[1])
		return false;
	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev)
		return false;
	if (!cap_spec(pp, ev, ws, ws->cap_spec[0], &n) ||
	    !cap_spec(pp, ev, ws, ws->cap_spec[1], &n)) {
		bpf_ringbuf_discard(ev, BPF_RB_NO_WAKEUP);
		return false;
	}
	fill_hdr(&ev->hdr, CT_EV_CAPTURE, 0, pid_tgid, 0, ts);
	ev->n = n;
	ev->pad = 0;
	bpf_ringbuf_submit(ev, wakeup_flag());
	return true;
}

#endif
