// SPDX-License-Identifier: MIT
/* Communicator identities: a process' handles to (library, size, ordinal), and the members of each
 * identity. */
#include <stdlib.h>
#include "catalog/catalog.h"
#include "diag/internal.h"

static uint64_t comm_key(uint8_t lib, int32_t size, uint32_t ordinal, int32_t leader)
{
	return ((uint64_t)lib << 56) ^ ((uint64_t)(uint32_t)size << 24) ^
	       ((uint64_t)ordinal << 40) ^ (uint64_t)(uint32_t)(leader + 1) * 0x9e3779b97f4a7c15ULL;
}

/* Room for one more index in a growing list. */
static bool grow_i32(int32_t **list, int n, int *cap)
{
	int nc = *cap ? *cap * 2 : 4;
	int32_t *x;

	if (n < *cap)
		return true;
	x = realloc(*list, (size_t)nc * sizeof(*x));
	if (!x)
		return false;
	*list = x;
	*cap = nc;
	return true;
}

static bool same_comm(const struct comm *c, uint8_t lib, int32_t size, uint32_t ordinal,
		      int32_t leader)
{
	return c->lib == lib && c->size == size && c->ordinal == ordinal && c->leader == leader;
}

static int32_t comm_get(struct ct_diag *d, uint8_t lib, int32_t size, uint32_t ordinal,
			int32_t leader)
{
	uint64_t key = comm_key(lib, size, ordinal, leader);
	int32_t at = diag_index_get(&d->comm_ix, key);
	struct comm *c;

	if (at && same_comm(d->comms[at - 1], lib, size, ordinal, leader))
		return at - 1;
	for (int i = 0; at && i < d->ncomms; i++) /* the key is a hash: a clash is scanned */
		if (same_comm(d->comms[i], lib, size, ordinal, leader))
			return i;
	if (!diag_grow(&d->comms, d->ncomms, &d->capcomms, (int)d->o.max_comms))
		return -1;
	c = calloc(1, sizeof(*c));
	if (!c || (!at && diag_index_put(&d->comm_ix, key, d->ncomms))) {
		free(c);
		return -1;
	}
	c->lib = lib;
	c->size = size;
	c->ordinal = ordinal;
	c->leader = leader;
	d->comms[d->ncomms] = c;
	return d->ncomms++;
}

static int32_t member_get(struct ct_diag *d, int32_t ci, struct dproc *p, int32_t comm_rank)
{
	struct comm *c = d->comms[ci];
	int pi = diag_proc_index(d, p);
	struct member *m;

	for (int i = 0; i < c->nmembers; i++) {
		m = d->members[c->members[i]];
		if (m->proc == pi)
			return c->members[i];
		if (m->comm_rank == comm_rank)
			c->ambiguous = true; /* two processes, one rank: not one group */
	}
	if (!grow_i32(&c->members, c->nmembers, &c->capmembers))
		return -1;
	if (!diag_grow(&d->members, d->nmembers, &d->capmembers, (int)d->o.max_members) ||
	    !grow_i32(&p->mem, p->nmem, &p->capmem))
		return -1;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -1;
	p->mem[p->nmem++] = d->nmembers;
	m->comm = ci;
	m->proc = pi;
	m->comm_rank = comm_rank;
	d->members[d->nmembers] = m;
	c->members[c->nmembers++] = d->nmembers;
	if (c->nmembers > c->size)
		c->ambiguous = true;
	return d->nmembers++;
}

/* The member (process' half of a communicator identity) of a handle; -1: none. */
int32_t diag_handle_member(struct ct_diag *d, struct dproc *p, const struct ct_diag_call *c,
			   const struct ct_stack_line *site)
{
	int32_t leader = c->has_leader ? c->leader : -1;
	int slot = -1, k;
	uint32_t ordinal;
	int32_t ci, mi;
	char name[48];

	p->clock++;
	for (int i = 0; i < p->nh; i++)
		if (p->h[i].handle == c->comm && p->h[i].lib == c->lib &&
		    p->h[i].size == c->comm_size && p->h[i].leader == leader) {
			p->h[i].last = p->clock;
			return p->h[i].member;
		}
	if (c->comm_size <= 0)
		return -1;
	for (k = 0; k < p->nord; k++)
		if (p->ord[k].lib == c->lib && p->ord[k].size == c->comm_size)
			break;
	if (k == p->nord) {
		if (p->nord == (int)ARRAY_LEN(p->ord))
			return -1;
		p->ord[k].lib = c->lib;
		p->ord[k].size = c->comm_size;
		p->ord[k].next = 0;
		p->nord++;
	}
	ordinal = p->ord[k].next++;
	ci = comm_get(d, c->lib, c->comm_size, ordinal, leader);
	mi = ci >= 0 ? member_get(d, ci, p, c->comm_rank) : -1;
	if (ci < 0)
		d->drops.comms_over_limit++;
	else if (mi < 0)
		d->drops.members_over_limit++;
	if (p->st.n) { /* not the first collective of the process: a communicator made since */
		if (ci >= 0)
			diag_comm_name(d->comms[ci], name, sizeof(name));
		else
			diag_comm_name(&(struct comm){.lib = c->lib,
						      .size = c->comm_size,
						      .ordinal = ordinal,
						      .leader = leader},
				       name, sizeof(name));
		diag_newcomm_add(d, p, c->function, false, site, name);
	}
	if (p->nh < CT_DIAG_HANDLES) {
		slot = p->nh++;
	} else {
		slot = 0;
		for (int i = 1; i < p->nh; i++)
			if (p->h[i].last < p->h[slot].last)
				slot = i;
		d->drops.handles_evicted++;
	}
	p->h[slot].handle = c->comm;
	p->h[slot].lib = c->lib;
	p->h[slot].size = c->comm_size;
	p->h[slot].leader = leader;
	p->h[slot].member = mi;
	p->h[slot].last = p->clock;
	return mi;
}

int ct_diag_ncomms(const struct ct_diag *d)
{
	return d->ncomms;
}

bool ct_diag_comm_info(const struct ct_diag *d, int i, char *name, size_t len, int *members,
		       uint64_t *collectives, bool *ambiguous)
{
	if (i < 0 || i >= d->ncomms)
		return false;
	diag_comm_name(d->comms[i], name, len);
	*members = d->comms[i]->nmembers;
	*collectives = d->comms[i]->collectives;
	*ambiguous = d->comms[i]->ambiguous;
	return true;
}
