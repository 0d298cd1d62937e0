// SPDX-License-Identifier: MIT
/* Communicator identities: a process' handles to (library, size, ordinal), and the members of each
 * identity. */
#include <stdlib.h>
#include "catalog/catalog.h"
#include "diag/internal.h"

static int16_t comm_get(struct ct_diag *d, uint8_t lib, int32_t size, uint32_t ordinal)
{
	struct comm *c;

	for (int i = 0; i < d->ncomms; i++) {
		c = d->comms[i];
		if (c->lib == lib && c->size == size && c->ordinal == ordinal)
			return (int16_t)i;
	}
	if (d->ncomms == CT_DIAG_COMMS)
		return -1;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -1;
	c->lib = lib;
	c->size = size;
	c->ordinal = ordinal;
	d->comms[d->ncomms] = c;
	return (int16_t)d->ncomms++;
}

static int16_t member_get(struct ct_diag *d, int16_t ci, struct dproc *p, int32_t comm_rank)
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
	if (d->nmembers == CT_DIAG_MEMBERS || c->nmembers == (int)ARRAY_LEN(c->members))
		return -1;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -1;
	m->comm = ci;
	m->proc = (int16_t)pi;
	m->comm_rank = comm_rank;
	d->members[d->nmembers] = m;
	c->members[c->nmembers++] = (int16_t)d->nmembers;
	if (c->nmembers > c->size)
		c->ambiguous = true;
	return (int16_t)d->nmembers++;
}

/* The member (process' half of a communicator identity) of a handle; -1: none. */
int16_t diag_handle_member(struct ct_diag *d, struct dproc *p, const struct ct_diag_call *c,
			   const struct ct_stack_line *site)
{
	int slot = -1, k;
	uint32_t ordinal;
	int16_t ci, mi;
	char name[48];

	p->clock++;
	for (int i = 0; i < p->nh; i++)
		if (p->h[i].handle == c->comm && p->h[i].lib == c->lib &&
		    p->h[i].size == c->comm_size) {
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
	ci = comm_get(d, c->lib, c->comm_size, ordinal);
	mi = ci >= 0 ? member_get(d, ci, p, c->comm_rank) : -1;
	if (ci < 0)
		d->drops.comms_over_limit++;
	else if (mi < 0)
		d->drops.members_over_limit++;
	if (p->st.n) { /* not the first collective of the process: a communicator made since */
		if (ci >= 0)
			diag_comm_name(d->comms[ci], name, sizeof(name));
		else
			snprintf(name, sizeof(name), "%s#%u/%d", ct_lib_name(c->lib), ordinal,
				 c->comm_size);
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
