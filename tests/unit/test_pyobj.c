// SPDX-License-Identifier: MIT
/*
 * Naming objects in real interpreters: each runs a script that builds instances whose
 * attributes live in every place the versions keep them (a dict at tp_dictoffset, 3.11+
 * managed dicts before the object, 3.13 inline values, a materialized dict, a combined dict
 * past the shared-keys limit, a var-size object's dict from its end), dicts of both key
 * kinds and an OrderedDict, and callables of each kind, then prints id() of everything. The
 * test reads the same objects back with process_vm_readv and compares addresses and names.
 * No root needed: a parent may read its child. An absent interpreter is skipped loudly.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "commtrace/pyoffsets.h"
#include "python/objects.h"
#include "python/params.h"
#include "python/pyproc.h"
#include "python/symbolize.h"

static const char pyobj_script[] =
    "import sys, collections\n"
    "def k(label, obj):\n"
    "    print('k', label, id(obj))\n"
    "class Holder:\n"
    "    def __init__(self):\n"
    "        self.alpha = object()\n"
    "        self.beta = 'bee' + str(len(sys.argv))\n"
    "    def meth(self):\n"
    "        pass\n"
    "h, h2, h3, hd = Holder(), Holder(), Holder(), Holder()\n"
    "h.gamma = [1]\n" /* added after creation: 3.11+ may grow the shared keys or make a dict */
    "del h3.alpha\n"
    "hd.__dict__\n" /* materializes the dict (3.13: it shares the inline values) */
    "hd.delta = (2,)\n"
    "class Late:\n"
    "    pass\n"
    "la = Late()\n"
    "la.x, la.y = object(), object()\n"
    "class Many:\n"
    "    pass\n"
    "ma = Many()\n"
    "for i in range(40):\n" /* past the 30 shared keys: a combined dict */
    "    setattr(ma, 'a%d' % i, object())\n"
    "class Tup(tuple):\n" /* var-size: the dict sits at a negative tp_dictoffset */
    "    pass\n"
    "tu = Tup((1, 2, 3))\n"
    "tu.tag = object()\n"
    "class Named:\n"
    "    def __init__(self, n):\n"
    "        self.__name__ = n\n"
    "nm = Named('add.Tensor')\n"
    "class Mod:\n"
    "    def __init__(self):\n"
    "        self._modules = {}\n"
    "par = Mod()\n"
    "for n in ('fc1', 'fc2', 'act', '0'):\n"
    "    par._modules[n] = Mod()\n"
    "a, b, c, e = object(), object(), object(), object()\n"
    "ud = {'fc1': a, 'fc2': b, 'caf\xc3\xa9': c}\n" /* str keys only: a unicode table (3.11+) */
    "gd = {1: a, 'fc1': b, 'fc2': c, (2, 3): e}\n"  /* other keys: a general table */
    "dd = {'x': a, 'y': b, 'z': c}\n"
    "del dd['x']\n"
    "od = collections.OrderedDict(fc1=a, fc2=b)\n"
    "big = {str(i): i for i in range(5000)}\n"
    "bm = h.meth\n" /* kept alive: a bound method is made per access */
    "def pyfunc():\n"
    "    pass\n"
    "class Slotted:\n" /* __slots__: member descriptors in the types' dicts */
    "    __slots__ = ('s1', 's2')\n"
    "class SubSlotted(Slotted):\n"
    "    __slots__ = ('s3',)\n"
    "sl = SubSlotted()\n"
    "sl.s1, sl.s3 = object(), object()\n" /* s2 left unset */
    "for lab, o in (('sl', sl), ('sl.s1', sl.s1), ('sl.s3', sl.s3)):\n"
    "    k(lab, o)\n"
    "for lab, o in (('h', h), ('h2', h2), ('h3', h3), ('hd', hd), ('la', la), ('ma', ma),\n"
    "               ('tu', tu), ('nm', nm), ('par', par), ('ud', ud), ('gd', gd), ('dd', dd),\n"
    "               ('od', od), ('big', big), ('a', a), ('b', b), ('c', c), ('e', e),\n"
    "               ('h.alpha', h.alpha), ('h.beta', h.beta), ('h.gamma', h.gamma),\n"
    "               ('h2.beta', h2.beta), ('h3.beta', h3.beta), ('hd.alpha', hd.alpha),\n"
    "               ('hd.delta', hd.delta), ('la.x', la.x), ('la.y', la.y),\n"
    "               ('ma.a0', ma.a0), ('ma.a37', ma.a37), ('tu.tag', tu.tag),\n"
    "               ('par.fc2', par._modules['fc2']), ('par.0', par._modules['0']),\n"
    "               ('par._modules', par._modules), ('len', len), ('pyfunc', pyfunc),\n"
    "               ('bound', bm), ('join', str.join), ('Holder', Holder),\n"
    "               ('dict', dict), ('nm.name', nm.__name__)):\n"
    "    k(lab, o)\n"
    "print('ready', flush=True)\n"
    "sys.stdin.readline()\n"
    "SubSlotted.s3 = 5\n"    /* the member descriptor replaced: the type's version changes */
    "sl.s1, SubSlotted.s3\n" /* looked up: the type gets a new version tag */
    "print('modified', flush=True)\n"
    "sys.stdin.read()\n";

/* Debian's 3.11 with torch 1.13: a real module tree and real ops. */
static const char pyobj_torch_script[] =
    "import sys\n"
    "import torch, torch.nn as nn, torch.nn.functional as F\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.fc1 = nn.Linear(4, 8)\n"
    "        self.fc2 = nn.Linear(8, 2)\n"
    "        self.blocks = nn.ModuleList([nn.ReLU(), nn.Linear(2, 2)])\n"
    "net = Net()\n"
    "seq = nn.Sequential(nn.Linear(2, 2), nn.GELU())\n"
    "for lab, o in (('net', net), ('fc1', net.fc1), ('fc2', net.fc2), ('blocks', net.blocks),\n"
    "               ('blk0', net.blocks[0]), ('blk1', net.blocks[1]), ('seq', seq),\n"
    "               ('seq0', seq[0]), ('seq1', seq[1]), ('linear', F.linear),\n"
    "               ('gelu', F.gelu), ('add', torch.ops.aten.add.Tensor),\n"
    "               ('training', net.__dict__['training'])):\n"
    "    print('k', lab, id(o))\n"
    "print('ready', flush=True)\n"
    "sys.stdin.read()\n";

/* torch 1.13 parameters: nesting, None entries, a tied weight, a module cycle, heap sizes
 * (6 dims), a 0-d Parameter subclass, bfloat16, and placements in each form. */
static const char pyobj_params_script[] =
    "import sys\n"
    "import torch, torch.nn as nn\n"
    "class Shard:\n"
    "    def __init__(self, dim):\n"
    "        self.dim = dim\n"
    "class Replicate:\n"
    "    pass\n"
    "class Partial:\n"
    "    def __init__(self):\n"
    "        self.reduce_op = 'sum'\n"
    "class Spec:\n"
    "    pass\n"
    "class MyParam(nn.Parameter):\n"
    "    pass\n"
    "class Block(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.mlp = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 4, bias=False))\n"
    "        self.register_parameter('none_p', None)\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.emb = nn.Embedding(10, 4)\n"
    "        self.layers = nn.ModuleList([Block(), Block()])\n"
    "        self.head = nn.Linear(4, 10).to(torch.bfloat16)\n"
    "        self.head.weight = self.emb.weight\n"
    "        self.big = nn.Parameter(torch.zeros(1, 2, 1, 2, 1, 3))\n"
    "        self.scalar = MyParam(torch.tensor(1.0, dtype=torch.float64))\n"
    "net = Net()\n"
    "ints = (0, 7, -5, 2**40, -2**62, 2**63 - 1, 2**63, 2**70)\n"
    "net._modules['gone'] = None\n"
    "net.layers[1]._modules['loop'] = net\n"
    "sp = Spec()\n"
    "sp.placements = (Shard(1), Replicate(), Partial())\n"
    "net.layers[0].mlp[0].weight._spec = sp\n"
    "net.head.bias._placements = ('Shard(dim=0)',)\n"
    "net.big.placements = 'Replicate()'\n"
    "print('k net', id(net))\n"
    "print('k ints', id(ints))\n"
    "print('ready', flush=True)\n"
    "sys.stdin.read()\n";

#define PYOBJ_OUT_MAX	16384
#define PYOBJ_MAX_FACTS 64

struct pyobj_child {
	pid_t pid;
	int in_fd, out_fd;
	int n;
	char label[PYOBJ_MAX_FACTS][32];
	uint64_t id[PYOBJ_MAX_FACTS];
};

/* Read fd into out (cap bytes, NUL-terminated, *len of them so far) until it holds token
 * (ms to wait for each read): 0, -ETIMEDOUT, -EIO or -E2BIG. */
static int read_until(int fd, char *out, size_t cap, size_t *len, const char *token, int ms)
{
	while (!strstr(out, token)) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (*len + 1 >= cap)
			return -E2BIG;
		if (poll(&p, 1, ms) <= 0)
			return -ETIMEDOUT;
		n = read(fd, out + *len, cap - 1 - *len);
		if (n <= 0)
			return -EIO;
		*len += (size_t)n;
		out[*len] = '\0';
	}
	return 0;
}

/* Wait (5 s) for a line the child prints after "ready". */
static int child_wait_line(struct pyobj_child *c, const char *line)
{
	char out[256] = "";
	size_t len = 0;

	return read_until(c->out_fd, out, sizeof(out), &len, line, 5000);
}

static void child_stop(struct pyobj_child *c)
{
	if (c->in_fd >= 0)
		close(c->in_fd);
	if (c->out_fd >= 0)
		close(c->out_fd);
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
	}
	c->pid = 0;
	c->in_fd = c->out_fd = -1;
}

/* Start python on script; read "k LABEL ID" lines up to "ready" (30 s: torch imports). */
static int child_start(const char *python, const char *script, struct pyobj_child *c)
{
	static char out[PYOBJ_OUT_MAX];
	int in[2], op[2], err;
	size_t len = 0;
	char *line, *save;

	memset(c, 0, sizeof(*c));
	memset(out, 0, sizeof(out));
	c->in_fd = c->out_fd = -1;
	if (pipe(in))
		return -errno;
	if (pipe(op)) {
		close(in[0]);
		close(in[1]);
		return -errno;
	}
	c->pid = fork();
	if (c->pid < 0)
		return -errno;
	if (c->pid == 0) {
		char *argv[] = {(char *)python, "-I", (char *)script, NULL};

		dup2(in[0], 0);
		dup2(op[1], 1);
		close(in[1]);
		close(op[0]);
		execv(python, argv);
		_exit(127);
	}
	close(in[0]);
	close(op[1]);
	c->in_fd = in[1];
	c->out_fd = op[0];
	err = read_until(c->out_fd, out, sizeof(out), &len, "ready\n", 30000);
	if (err)
		return err;
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long id;
		char lab[32];

		if (sscanf(line, "k %31s %llu", lab, &id) == 2 && c->n < PYOBJ_MAX_FACTS) {
			snprintf(c->label[c->n], sizeof(c->label[0]), "%s", lab);
			c->id[c->n++] = id;
		}
	}
	return c->n ? 0 : -EPROTO;
}

/* id() the script printed for label; a missing label fails the test and reads as 0. */
static uint64_t id_of(const struct pyobj_child *c, const char *label)
{
	for (int i = 0; i < c->n; i++)
		if (!strcmp(c->label[i], label))
			return c->id[i];
	ct_test_fail(__FILE__, __LINE__, "no id printed for %s", label);
	return 0;
}

/* Write script to the test's directory; start the interpreter; detect it. */
static int start(const char *label, const char *python, const char *body, struct pyobj_child *c,
		 struct ct_pyproc *p)
{
	char script[512];
	FILE *fp;
	int err;

	snprintf(script, sizeof(script), "%s/pyobj_target.py", ct_test_tmpdir());
	fp = fopen(script, "w");
	if (!fp)
		return -errno;
	fputs(body, fp);
	fclose(fp);
	err = child_start(python, script, c);
	if (!ASSERT_OK(err, "start interpreter"))
		return err;
	err = ct_py_detect(c->pid, p);
	if (err == -EPERM)
		fprintf(stderr, "  SKIP %s: process_vm_readv on a child refused\n", label);
	else
		ASSERT_OK(err, "ct_py_detect");
	return err;
}

static void expect_attr(const struct pyobj_child *c, const struct ct_pyproc *p,
			const struct ct_py_objoffsets *oo, const char *obj, const char *name,
			const char *val_label)
{
	uint64_t v = 1;
	int err = ct_py_getattr(c->pid, oo, &p->offsets, id_of(c, obj), name, &v);
	char what[96];

	snprintf(what, sizeof(what), "getattr(%s, %s)", obj, name);
	if (!val_label) {
		ASSERT_EQ(err, -ENOENT, what);
		return;
	}
	if (ASSERT_OK(err, what))
		ASSERT_EQ(v, id_of(c, val_label), what);
}

static void expect_key(const struct pyobj_child *c, const struct ct_pyproc *p,
		       const struct ct_py_objoffsets *oo, const char *dict, const char *val,
		       const char *key)
{
	char buf[64], what[96];
	int err = ct_py_dict_key_of(c->pid, oo, &p->offsets, id_of(c, dict), id_of(c, val), buf,
				    sizeof(buf));

	snprintf(what, sizeof(what), "key of %s in %s", val, dict);
	if (ASSERT_OK(err, what))
		ASSERT_STREQ(buf, key, what);
}

static void expect_callable(const struct pyobj_child *c, const struct ct_pyproc *p,
			    const struct ct_py_objoffsets *oo, const char *obj, const char *name)
{
	char buf[64], what[96];
	int err = ct_py_callable_name(c->pid, oo, &p->offsets, id_of(c, obj), buf, sizeof(buf));

	snprintf(what, sizeof(what), "callable name of %s", obj);
	if (ASSERT_OK(err, what))
		ASSERT_STREQ(buf, name, what);
}

/* Several names at once, in a dict and in slots, then the same inside a snapshot. */
static void check_getattrs(const struct pyobj_child *c, const struct ct_pyproc *p,
			   const struct ct_py_objoffsets *oo)
{
	static const char *const hn[] = {"alpha", "missing", "beta", "gamma", "alph"};
	static const char *const sn[] = {"s3", "s2", "s1"};
	static const char *const nine[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
	uint64_t v[9];

	for (int snap = 0; snap < 2; snap++) {
		struct ct_py_snapshot_stats before = ct_py_snapshot_stats(), after;

		if (snap)
			ct_py_snapshot_begin(c->pid);
		if (ASSERT_EQ(ct_py_getattrs(c->pid, oo, &p->offsets, id_of(c, "h"), hn, 5, v), 3,
			      "h: 3 of 5 names")) {
			ASSERT_EQ(v[0], id_of(c, "h.alpha"), "h.alpha");
			ASSERT_EQ(v[1], 0, "h.missing");
			ASSERT_EQ(v[2], id_of(c, "h.beta"), "h.beta");
			ASSERT_EQ(v[3], id_of(c, "h.gamma"), "h.gamma");
			ASSERT_EQ(v[4], 0, "h.alph");
		}
		if (ASSERT_EQ(ct_py_getattrs(c->pid, oo, &p->offsets, id_of(c, "sl"), sn, 3, v), 2,
			      "sl: 2 of 3 slots")) {
			ASSERT_EQ(v[0], id_of(c, "sl.s3"), "sl.s3");
			ASSERT_EQ(v[1], 0, "sl.s2");
			ASSERT_EQ(v[2], id_of(c, "sl.s1"), "sl.s1");
		}
		ASSERT_EQ(ct_py_getattrs(c->pid, oo, &p->offsets, id_of(c, "h"), nine, 9, v),
			  -EINVAL, "too many names");
		ct_py_snapshot_end();
		after = ct_py_snapshot_stats();
		/* The second lookup reads the objects the first read: from the snapshot. */
		if (snap)
			ASSERT_GT(after.hits, before.hits, "snapshot hits");
		else
			ASSERT_EQ(after.hits, before.hits, "no snapshot, no hits");
	}
}

static void check_objects(const char *label, const char *python, int minor)
{
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(3, minor);
	struct pyobj_child c = {.in_fd = -1, .out_fd = -1};
	struct ct_pyproc *p;
	char buf[64];
	uint64_t v;

	if (access(python, X_OK)) {
		fprintf(stderr, "  SKIP %s: %s is not installed\n", label, python);
		return;
	}
	ct_subtest(label);
	p = calloc(1, sizeof(*p));
	if (!ASSERT_NOT_NULL(p, "alloc") || !ASSERT_NOT_NULL(oo, "object offsets") ||
	    start(label, python, pyobj_script, &c, p))
		goto out;
	ASSERT_EQ(p->minor, minor, "minor");
	ASSERT_EQ(oo->minor, minor, "object offsets table");

	/* Instance attributes, in each place the version keeps them. */
	expect_attr(&c, p, oo, "h", "alpha", "h.alpha");
	expect_attr(&c, p, oo, "h", "beta", "h.beta");
	expect_attr(&c, p, oo, "h", "gamma", "h.gamma");
	expect_attr(&c, p, oo, "h", "missing", NULL);
	expect_attr(&c, p, oo, "h", "alph", NULL);
	expect_attr(&c, p, oo, "h2", "beta", "h2.beta");
	expect_attr(&c, p, oo, "h2", "gamma", NULL);
	expect_attr(&c, p, oo, "h3", "alpha", NULL); /* deleted */
	expect_attr(&c, p, oo, "h3", "beta", "h3.beta");
	expect_attr(&c, p, oo, "hd", "alpha", "hd.alpha");
	expect_attr(&c, p, oo, "hd", "delta", "hd.delta");
	expect_attr(&c, p, oo, "la", "x", "la.x");
	expect_attr(&c, p, oo, "la", "y", "la.y");
	expect_attr(&c, p, oo, "ma", "a0", "ma.a0");
	expect_attr(&c, p, oo, "ma", "a37", "ma.a37");
	expect_attr(&c, p, oo, "tu", "tag", "tu.tag");
	expect_attr(&c, p, oo, "nm", "__name__", "nm.name");
	expect_attr(&c, p, oo, "par", "_modules", "par._modules");
	/* Objects without an instance dict. */
	expect_attr(&c, p, oo, "a", "x", NULL);
	expect_attr(&c, p, oo, "len", "__name__", NULL);
	/* __slots__, twice: the second time from what the first walk of the MRO found. */
	for (int i = 0; i < 2; i++) {
		expect_attr(&c, p, oo, "sl", "s1", "sl.s1");
		expect_attr(&c, p, oo, "sl", "s3", "sl.s3");
		expect_attr(&c, p, oo, "sl", "s2", NULL); /* a slot never set */
		expect_attr(&c, p, oo, "sl", "s4", NULL);
	}
	check_getattrs(&c, p, oo);
	/* A type changed after that: s3 is a plain class attribute now, no slot of sl. */
	if (ASSERT_EQ(write(c.in_fd, "\n", 1), 1, "tell the child") &&
	    ASSERT_OK(child_wait_line(&c, "modified"), "type modified")) {
		expect_attr(&c, p, oo, "sl", "s3", NULL);
		expect_attr(&c, p, oo, "sl", "s1", "sl.s1");
	}
	ASSERT_EQ(ct_py_getattr(c.pid, oo, &p->offsets, id_of(&c, "h"), "", &v), -EINVAL,
		  "empty name");

	/* Keys of values: unicode and general tables, a deleted entry, an OrderedDict. */
	expect_key(&c, p, oo, "ud", "b", "fc2");
	expect_key(&c, p, oo, "ud", "c", "caf\xc3\xa9");
	expect_key(&c, p, oo, "gd", "b", "fc1");
	expect_key(&c, p, oo, "gd", "c", "fc2");
	expect_key(&c, p, oo, "dd", "c", "z");
	expect_key(&c, p, oo, "od", "b", "fc2");
	expect_key(&c, p, oo, "par._modules", "par.fc2", "fc2");
	expect_key(&c, p, oo, "par._modules", "par.0", "0");
	ASSERT_EQ(ct_py_dict_key_of(c.pid, oo, &p->offsets, id_of(&c, "dd"), id_of(&c, "a"), buf,
				    sizeof(buf)),
		  -ENOENT, "deleted entry's value");
	ASSERT_EQ(ct_py_dict_key_of(c.pid, oo, &p->offsets, id_of(&c, "gd"), id_of(&c, "e"), buf,
				    sizeof(buf)),
		  -EINVAL, "a tuple key is not a str");
	ASSERT_EQ(ct_py_dict_key_of(c.pid, oo, &p->offsets, id_of(&c, "gd"), id_of(&c, "a"), buf,
				    sizeof(buf)),
		  -EINVAL, "an int key is not a str");
	ASSERT_EQ(ct_py_dict_key_of(c.pid, oo, &p->offsets, id_of(&c, "h"), id_of(&c, "a"), buf,
				    sizeof(buf)),
		  -EINVAL, "not a dict");
	ASSERT_EQ(ct_py_dict_key_of(c.pid, oo, &p->offsets, id_of(&c, "big"), id_of(&c, "a"), buf,
				    sizeof(buf)),
		  -E2BIG, "a dict over the bound");
	if (ASSERT_OK(ct_py_module_name(c.pid, oo, &p->offsets, id_of(&c, "par"),
					id_of(&c, "par.fc2"), buf, sizeof(buf)),
		      "module name"))
		ASSERT_STREQ(buf, "fc2", "module name");
	ASSERT_EQ(ct_py_module_name(c.pid, oo, &p->offsets, id_of(&c, "par"), id_of(&c, "a"), buf,
				    sizeof(buf)),
		  -ENOENT, "not a child");
	ASSERT_EQ(ct_py_module_name(c.pid, oo, &p->offsets, id_of(&c, "h"), id_of(&c, "a"), buf,
				    sizeof(buf)),
		  -ENOENT, "no _modules");

	/* Callables of each kind, then the fallbacks. */
	expect_callable(&c, p, oo, "len", "len");
	expect_callable(&c, p, oo, "pyfunc", "pyfunc");
	expect_callable(&c, p, oo, "bound", "meth");
	expect_callable(&c, p, oo, "join", "join");
	expect_callable(&c, p, oo, "Holder", "Holder");
	expect_callable(&c, p, oo, "dict", "dict");
	expect_callable(&c, p, oo, "nm", "add.Tensor");
	expect_callable(&c, p, oo, "h", "Holder");
	expect_callable(&c, p, oo, "a", "object");
	if (ASSERT_OK(ct_py_callable_name(c.pid, oo, &p->offsets, id_of(&c, "len"), buf, 3),
		      "truncated"))
		ASSERT_STREQ(buf, "le", "truncated name");
	ASSERT_LT(ct_py_callable_name(c.pid, oo, &p->offsets, 8, buf, sizeof(buf)), 0,
		  "unreadable object");
out:
	child_stop(&c);
	free(p);
}

static const char *pyenv_python(char *buf, size_t len, const char *ver, const char *exe)
{
	const char *root = getenv("PYENV_ROOT");

	snprintf(buf, len, "%s/versions/%s/bin/%s", root ? root : "/root/.pyenv", ver, exe);
	return buf;
}

TEST(pyobj_cpython_3_10)
{
	char b[512];

	check_objects("pyenv 3.10", pyenv_python(b, sizeof(b), "3.10.13", "python3.10"), 10);
}

TEST(pyobj_cpython_3_11)
{
	char b[512];

	check_objects("pyenv 3.11", pyenv_python(b, sizeof(b), "3.11.7", "python3.11"), 11);
}

TEST(pyobj_cpython_3_11_debian)
{
	check_objects("debian 3.11", "/usr/bin/python3.11", 11);
}

TEST(pyobj_cpython_3_12)
{
	char b[512];

	check_objects("pyenv 3.12", pyenv_python(b, sizeof(b), "3.12.1", "python3.12"), 12);
}

TEST(pyobj_cpython_3_13)
{
	char b[512];

	check_objects("pyenv 3.13", pyenv_python(b, sizeof(b), "3.13.0", "python3.13"), 13);
}

/* torch 1.13 on Debian's 3.11: nn.Module trees keep children in an OrderedDict _modules. */
TEST(pyobj_torch_modules)
{
	const char *python = "/usr/bin/python3.11";
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(3, 11);
	struct pyobj_child c = {.in_fd = -1, .out_fd = -1};
	struct ct_pyproc *p;
	char buf[64];
	uint64_t v;

	/* Debian's python3-torch; other pythons here have no torch. */
	if (access(python, X_OK) ||
	    access("/usr/lib/python3/dist-packages/torch/__init__.py", R_OK)) {
		fprintf(stderr, "  SKIP: no torch for %s\n", python);
		return;
	}
	p = calloc(1, sizeof(*p));
	if (!ASSERT_NOT_NULL(p, "alloc") || start("torch", python, pyobj_torch_script, &c, p))
		goto out;
	if (ASSERT_OK(ct_py_module_name(c.pid, oo, &p->offsets, id_of(&c, "net"), id_of(&c, "fc2"),
					buf, sizeof(buf)),
		      "fc2 in net"))
		ASSERT_STREQ(buf, "fc2", "fc2 in net");
	if (ASSERT_OK(ct_py_module_name(c.pid, oo, &p->offsets, id_of(&c, "net"),
					id_of(&c, "blocks"), buf, sizeof(buf)),
		      "blocks in net"))
		ASSERT_STREQ(buf, "blocks", "blocks in net");
	if (ASSERT_OK(ct_py_module_name(c.pid, oo, &p->offsets, id_of(&c, "blocks"),
					id_of(&c, "blk1"), buf, sizeof(buf)),
		      "1 in ModuleList"))
		ASSERT_STREQ(buf, "1", "1 in ModuleList");
	if (ASSERT_OK(ct_py_module_name(c.pid, oo, &p->offsets, id_of(&c, "seq"), id_of(&c, "seq0"),
					buf, sizeof(buf)),
		      "0 in Sequential"))
		ASSERT_STREQ(buf, "0", "0 in Sequential");
	ASSERT_EQ(ct_py_module_name(c.pid, oo, &p->offsets, id_of(&c, "net"), id_of(&c, "seq1"),
				    buf, sizeof(buf)),
		  -ENOENT, "not a child of net");
	if (ASSERT_OK(ct_py_getattr(c.pid, oo, &p->offsets, id_of(&c, "net"), "training", &v),
		      "net.training"))
		ASSERT_EQ(v, id_of(&c, "training"), "net.training is the bool");
	expect_callable(&c, p, oo, "linear", "linear");
	expect_callable(&c, p, oo, "gelu", "gelu");
	/* an OpOverload, named as str() names it: its __qualname__ namespace, its __name__ */
	expect_callable(&c, p, oo, "add", "aten.add.Tensor");
	expect_callable(&c, p, oo, "fc1", "Linear");
out:
	child_stop(&c);
	free(p);
}

struct expect_param {
	const char *fqn, *type, *dtype;
	int ndim;
	int64_t shape[6];
	const char *placements;
};

/* Parameters of a live torch 1.13 model read from outside, in named_parameters() order (a
 * tied weight under each of its modules). */
TEST(pyobj_torch_params)
{
	/* clang-format off */
	static const struct expect_param want[] = {
		{"big", "Parameter", "torch.float32", 6, {1, 2, 1, 2, 1, 3}, "Replicate()"},
		{"scalar", "MyParam", "torch.float64", 0, {0}, ""},
		{"emb.weight", "Parameter", "torch.float32", 2, {10, 4}, ""},
		{"layers.0.mlp.0.weight", "Parameter", "torch.float32", 2, {6, 4},
		 "(Shard(dim=1), Replicate(), Partial(sum))"},
		{"layers.0.mlp.0.bias", "Parameter", "torch.float32", 1, {6}, ""},
		{"layers.0.mlp.2.weight", "Parameter", "torch.float32", 2, {4, 6}, ""},
		{"layers.1.mlp.0.weight", "Parameter", "torch.float32", 2, {6, 4}, ""},
		{"layers.1.mlp.0.bias", "Parameter", "torch.float32", 1, {6}, ""},
		{"layers.1.mlp.2.weight", "Parameter", "torch.float32", 2, {4, 6}, ""},
		/* tied to emb.weight: listed under each module that holds it, as CommDebugMode's
		 * get_sharding_info() does (named_parameters() would list it once) */
		{"head.weight", "Parameter", "torch.float32", 2, {10, 4}, ""},
		{"head.bias", "Parameter", "torch.bfloat16", 1, {10}, "(Shard(dim=0),)"},
	};
	/* clang-format on */
	static const int64_t ints[] = {0, 7, -5, 1LL << 40, -(1LL << 62), INT64_MAX};
	const char *python = "/usr/bin/python3.11";
	const struct ct_py_objoffsets *oo = ct_py_objoffsets_for(3, 11);
	struct pyobj_child c = {.in_fd = -1, .out_fd = -1};
	struct ct_params *ps = NULL;
	struct ct_pyproc *p;
	uint64_t items[16];
	size_t n;

	if (access(python, X_OK) ||
	    access("/usr/lib/python3/dist-packages/torch/__init__.py", R_OK)) {
		fprintf(stderr, "  SKIP: no torch for %s\n", python);
		return;
	}
	p = calloc(1, sizeof(*p));
	if (!ASSERT_NOT_NULL(p, "alloc") || start("torch", python, pyobj_params_script, &c, p))
		goto out;
	/* Tuples and ints, as placements use them. */
	if (ASSERT_OK(ct_py_tuple_items(c.pid, oo, &p->offsets, id_of(&c, "ints"), items, 16, &n),
		      "tuple items")) {
		int64_t v;

		ASSERT_EQ(n, 8, "tuple length");
		for (size_t i = 0; i < 6 && i < n; i++) {
			ASSERT_OK(ct_py_read_int(c.pid, oo, &p->offsets, items[i], &v), "int");
			ASSERT_EQ(v, ints[i], "int value");
		}
		for (size_t i = 6; i < n; i++)
			ASSERT_EQ(ct_py_read_int(c.pid, oo, &p->offsets, items[i], &v), -ERANGE,
				  "past int64");
	}
	ASSERT_EQ(ct_py_tuple_items(c.pid, oo, &p->offsets, id_of(&c, "ints"), items, 4, &n),
		  -E2BIG, "tuple over the bound");
	ASSERT_EQ(ct_py_tuple_items(c.pid, oo, &p->offsets, id_of(&c, "net"), items, 4, &n),
		  -EINVAL, "not a tuple");

	ps = ct_params_collect(c.pid, p, id_of(&c, "net"));
	if (!ASSERT_NOT_NULL(ps, "collect") || !ASSERT_OK(ps->err, "collect"))
		goto out;
	ASSERT_STREQ(ps->torch_version, "1.13.0a0", "torch version from torch/version.py");
	ASSERT_TRUE(ps->layout_known, "torch 1.13 layout");
	ASSERT_EQ(ps->n, (sizeof(want) / sizeof(want[0])), "parameter count");
	ASSERT_EQ(ps->dropped, 0, "dropped");
	ASSERT_EQ(ps->unreadable + ps->mismatched, 0, "unreadable");
	for (size_t i = 0; i < ps->n && i < (sizeof(want) / sizeof(want[0])); i++) {
		const struct ct_param *g = &ps->v[i];
		const struct expect_param *e = &want[i];

		ASSERT_STREQ(g->fqn, e->fqn, "fqn");
		ASSERT_STREQ(g->type, e->type, e->fqn);
		ASSERT_STREQ(g->dtype ? g->dtype : "(null)", e->dtype, e->fqn);
		ASSERT_STREQ(g->placements, e->placements, e->fqn);
		if (ASSERT_EQ(g->ndim, e->ndim, e->fqn))
			for (int d = 0; d < e->ndim; d++)
				ASSERT_EQ(g->shape[d], e->shape[d], e->fqn);
	}
	ct_params_free(ps);
	/* Not a module: nothing to list, and said so. */
	ps = ct_params_collect(c.pid, p, id_of(&c, "ints"));
	if (ASSERT_NOT_NULL(ps, "collect on a tuple"))
		ASSERT_LT(ps->err, 0, "a tuple is no module");
out:
	ct_params_free(ps);
	child_stop(&c);
	free(p);
}

/* The snapshot on this process's own memory: what it holds, what a fresh read sees, a read
 * across two lines, one into an unmapped page, and batched reads. */
TEST(pyobj_snapshot)
{
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *mem = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t a = 0, b = 0, addrs[3];
	uint8_t buf[48];
	bool ok[3] = {false, false, true};
	pid_t self = getpid();
	struct ct_py_snapshot_stats s0, s1;

	if (!ASSERT_TRUE(mem != MAP_FAILED, "mmap"))
		return;
	munmap(mem + page, (size_t)page); /* the page after is not mapped */
	memset(mem, 0, (size_t)page);
	memcpy(mem + 16, &(uint64_t){0x1111}, 8);
	memset(mem + 1000, 0x5a, 48);
	memcpy(mem + 2048, &(uint64_t){0x3333}, 8);
	ct_py_snapshot_begin(self);
	s0 = ct_py_snapshot_stats();
	ASSERT_OK(ct_py_read_mem(self, (uint64_t)(uintptr_t)(mem + 16), &a, 8), "first read");
	memcpy(mem + 16, &(uint64_t){0x2222}, 8);
	ASSERT_OK(ct_py_read_mem(self, (uint64_t)(uintptr_t)(mem + 16), &a, 8), "again");
	ASSERT_EQ(a, 0x1111, "what the snapshot holds");
	ASSERT_OK(ct_py_read_fresh(self, (uint64_t)(uintptr_t)(mem + 16), &b, 8), "fresh");
	ASSERT_EQ(b, 0x2222, "what the memory holds now");
	s1 = ct_py_snapshot_stats();
	ASSERT_EQ(s1.lines_read - s0.lines_read, 1, "one line read");
	ASSERT_EQ(s1.hits - s0.hits, 1, "one hit");
	/* Across two lines of the page, then past its end. */
	ASSERT_OK(ct_py_read_mem(self, (uint64_t)(uintptr_t)(mem + 1000), buf, 48), "two lines");
	ASSERT_EQ(buf[0] == 0x5a && buf[47] == 0x5a, 1, "both lines' bytes");
	ASSERT_OK(ct_py_read_mem(self, (uint64_t)(uintptr_t)(mem + page - 8), &a, 8),
		  "the page's last word");
	ASSERT_EQ(ct_py_read_mem(self, (uint64_t)(uintptr_t)(mem + page - 8), buf, 16), -EFAULT,
		  "into the unmapped page");
	/* Batched: a line held, a line not yet read, an unmapped one. */
	addrs[0] = (uint64_t)(uintptr_t)(mem + 16);
	addrs[1] = (uint64_t)(uintptr_t)(mem + 2048);
	addrs[2] = (uint64_t)(uintptr_t)(mem + page + 64);
	if (ASSERT_OK(ct_py_read_many(self, addrs, 3, 8, buf, ok), "read_many")) {
		memcpy(&a, buf, 8);
		memcpy(&b, buf + 8, 8);
		ASSERT_EQ(ok[0] && ok[1] && !ok[2], 1, "which regions read");
		ASSERT_EQ(a, 0x1111, "from the line held");
		ASSERT_EQ(b, 0x3333, "from a line read now");
	}
	ct_py_snapshot_end();
	ASSERT_OK(ct_py_read_mem(self, (uint64_t)(uintptr_t)(mem + 16), &a, 8), "after");
	ASSERT_EQ(a, 0x2222, "no snapshot: the memory now");
	munmap(mem, (size_t)page);
}
