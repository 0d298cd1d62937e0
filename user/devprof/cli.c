// SPDX-License-Identifier: MIT
/*
 * `commtrace-bpf devprof ...`: decode, validate, fuse, plan, schedule, gen. Every error
 * is one line on stderr and a DEVPROF_E_* exit code; outputs appear only complete.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "devprof/devprof.h"
#include "devprof/devprof_cli.h"

static int fail(const struct devprof_err *e)
{
	fprintf(stderr, "devprof: %s\n", e->msg);
	return e->code;
}

static int usage_err(const char *cmd, const char *fmt, const char *arg)
{
	fprintf(stderr, "devprof %s: ", cmd);
	fprintf(stderr, fmt, arg ? arg : "");
	fprintf(stderr, " (see 'commtrace-bpf devprof %s --help')\n", cmd);
	return DEVPROF_E_USAGE;
}

static int parse_u32(const char *s, uint32_t max, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !*s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* "3,5,0,2" → counts; at most max entries. */
static int parse_list(const char *s, uint32_t *out, uint32_t max, uint32_t *n)
{
	char buf[16384], *tok, *save = NULL;

	*n = 0;
	if (!s || snprintf(buf, sizeof(buf), "%s", s) >= (int)sizeof(buf))
		return -1;
	if (!*buf)
		return 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (*n >= max || parse_u32(tok, 1u << 24, &out[*n]))
			return -1;
		(*n)++;
	}
	return 0;
}

static int parse_display(const char *s, enum devprof_display *d)
{
	if (!strcmp(s, "stage"))
		*d = DEVPROF_DISPLAY_STAGE;
	else if (!strcmp(s, "full"))
		*d = DEVPROF_DISPLAY_FULL;
	else
		return -1;
	return 0;
}

static const char decode_help[] =
    "Usage: commtrace-bpf devprof decode BUFFER -o OUT.json [options]\n"
    "Decodes a device profile buffer (one or more invocations) into a schema-v1 Chrome\n"
    "Trace: one process per invocation, one track per core (AIC 0.., AIV 0..).\n"
    "  -o, --output FILE     output JSON ('-' for stdout); written only on success\n"
    "  --display MODE        stage: stage names only (default); full: owner/stage[index]\n"
    "  --meta FILE           display metadata JSON (kernel, stage_names, owner_labels);\n"
    "                        overrides metadata embedded in the buffer\n"
    "  --pid-base N          pid of the first invocation (default 1)\n"
    "Examples:\n"
    "  commtrace-bpf devprof decode prof.bin -o prof.json\n"
    "  commtrace-bpf devprof decode prof.bin --display full --meta stages.json -o prof.json\n";

static const char validate_help[] =
    "Usage: commtrace-bpf devprof validate BUFFER\n"
    "Checks a device profile buffer and prints one line per core: records and drops.\n"
    "Examples:\n"
    "  commtrace-bpf devprof validate prof.bin\n";

static const char fuse_help[] =
    "Usage: commtrace-bpf devprof fuse --device DEV --profiler TRACE.json -o OUT.json\n"
    "Fuses a device trace (a buffer, or JSON from 'devprof decode') into a PyTorch profiler\n"
    "trace. The outer device kernel events (ph X, cat \"kernel\") whose name contains the\n"
    "kernel name are numbered 0, 1, ... by time; the invocation with invocation_seq S (the\n"
    "kernel's call number since its sampling session started) is aligned to event\n"
    "SKIP + S, so the profiler must have recorded the kernel's calls from the session\n"
    "start; an S past the trace's events is refused (exit 27). Its cores become tracks\n"
    "of that kernel's process. Diagnostics go to metadata.commtrace_devprof.\n"
    "  --device FILE         devprof buffer or decoded device JSON\n"
    "  --profiler FILE       torch.profiler export_chrome_trace() output\n"
    "  -o, --output FILE     fused JSON; written only on success\n"
    "  --kernel-name S       match kernel events whose name contains S (default: the\n"
    "                        kernel named in the device metadata, else every kernel)\n"
    "  --skip N              skip the first N matching events (launches of the kernel\n"
    "                        before its sampling session started)\n"
    "  --align-in-order      align invocation k (file order) to event SKIP + k and ignore\n"
    "                        invocation_seq: for a profiler that recorded only the\n"
    "                        sampled calls (e.g. the same wait/warmup/active window)\n"
    "  --allow-host-align    if the trace has no matching device kernel (CPU-only\n"
    "                        traces), align to host events named S instead; refused\n"
    "                        by default\n"
    "  --display MODE, --meta FILE   as for decode, when DEV is a buffer\n"
    "Examples:\n"
    "  commtrace-bpf devprof fuse --device prof.bin --profiler kineto.json -o fused.json\n"
    "  commtrace-bpf devprof fuse --device prof.bin --profiler window.json --align-in-order \\\n"
    "      -o fused.json\n"
    "  commtrace-bpf devprof fuse --device prof.json --profiler cpu.json \\\n"
    "      --allow-host-align --kernel-name megakernel -o fused.json\n";

static const char plan_help[] =
    "Usage: commtrace-bpf devprof plan --aic-tasks LIST --aiv-tasks LIST [options]\n"
    "Sizes the per-core slots from the real schedule: the busiest AIC core and the\n"
    "busiest AIV core set their type's capacity (records per task x tasks), rounded up\n"
    "to 16 records, at most 256; expected drops are reported when 256 is not enough.\n"
    "  --aic-tasks LIST      tasks per AIC core, comma separated (empty: no AIC core)\n"
    "  --aiv-tasks LIST      tasks per AIV core, comma separated\n"
    "  --records-per-task N  records each task writes (default 3)\n"
    "  --json                print JSON\n"
    "Examples:\n"
    "  commtrace-bpf devprof plan --aic-tasks 12,12,11 --aiv-tasks 30,29,30,31\n"
    "  commtrace-bpf devprof plan --aic-tasks 100 --aiv-tasks '' --json\n";

static const char schedule_help[] =
    "Usage: commtrace-bpf devprof schedule --active A [options] --steps N\n"
    "Prints which steps and kernel calls sample under a sampling window (seed 004's\n"
    "schedule(); the C API is ct_devprof_session_* in include/commtrace/devprof.h):\n"
    "skip-first steps, then cycles of wait, warmup and active steps, repeat times.\n"
    "  --skip-first N  --wait N  --warmup N  --active N  --repeat N (0: forever)\n"
    "  --skip-first-wait N   non-zero: no wait before the first cycle (torch 2.6)\n"
    "  --steps N             steps to print\n"
    "  --calls-per-step N    kernel calls per step (default 1)\n"
    "  --max-per-step N      sample at most N calls per step (default: all)\n"
    "  --json                print JSON\n"
    "Examples:\n"
    "  commtrace-bpf devprof schedule --wait 1 --warmup 1 --active 2 --repeat 1 --steps 6\n";

static const char gen_help[] =
    "Usage: commtrace-bpf devprof gen --scenario NAME -o OUT.bin [--corrupt KIND]\n"
    "Writes a buffer with known content through the real recorder (for tests).\n"
    "  --scenario NAME   basic (2 AIC + 3 AIV, metadata), overflow (a full slot, drops),\n"
    "                    nometa (no metadata), multi (3 invocations)\n"
    "  --corrupt KIND    magic, version, truncate, count, end-before-start, freq-zero,\n"
    "                    freq-absurd, kind, dropped-not-full\n"
    "Examples:\n"
    "  commtrace-bpf devprof gen --scenario overflow -o overflow.bin\n"
    "  commtrace-bpf devprof gen --scenario basic --corrupt kind -o bad.bin\n";

static const char main_help[] =
    "Usage: commtrace-bpf devprof COMMAND [options]   (COMMAND --help for more)\n"
    "Device profile buffers of fused MegaKernels (docs/devprof.md).\n"
    "  decode     buffer -> schema-v1 Chrome Trace JSON\n"
    "  validate   check a buffer, print per-core records and drops\n"
    "  fuse       device trace + PyTorch profiler trace -> one Chrome Trace\n"
    "  plan       per-core capacity from the schedule\n"
    "  schedule   which steps and calls sample (wait/warmup/active/repeat)\n"
    "  gen        buffers with known content, valid or corrupt\n"
    "Exit codes: 0 ok, 1 out of memory, 2 usage, 6 I/O, 10 magic, 11 version, 12 truncated,\n"
    "13 layout, 14 count over capacity, 15 frequency, 16 end before start, 17 record\n"
    "kind, 18 slot, 19 no records, 20 metadata, 21 profiler trace, 22 host alignment\n"
    "refused, 23 alignment, 24 plan, 25 device JSON, 26 drops in a slot that is not\n"
    "full, 27 invocation_seq past the profiler's kernel events.\n"
    "Examples:\n"
    "  commtrace-bpf devprof decode prof.bin -o prof.json\n"
    "  commtrace-bpf devprof fuse --device prof.bin --profiler kineto.json -o fused.json\n";

enum {
	O_DISPLAY = 256,
	O_META,
	O_PID_BASE,
	O_DEVICE,
	O_PROFILER,
	O_HOST,
	O_KNAME,
	O_SKIP,
	O_AIC,
	O_AIV,
	O_RPT,
	O_JSON,
	O_SKIPF,
	O_WAIT,
	O_WARMUP,
	O_ACTIVE,
	O_REPEAT,
	O_STEPS,
	O_CPS,
	O_MPS,
	O_SCEN,
	O_CORRUPT,
	O_IN_ORDER,
	O_SKIPFW
};

static const struct option long_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"output", required_argument, NULL, 'o'},
    {"display", required_argument, NULL, O_DISPLAY},
    {"meta", required_argument, NULL, O_META},
    {"pid-base", required_argument, NULL, O_PID_BASE},
    {"device", required_argument, NULL, O_DEVICE},
    {"profiler", required_argument, NULL, O_PROFILER},
    {"allow-host-align", no_argument, NULL, O_HOST},
    {"kernel-name", required_argument, NULL, O_KNAME},
    {"skip", required_argument, NULL, O_SKIP},
    {"aic-tasks", required_argument, NULL, O_AIC},
    {"aiv-tasks", required_argument, NULL, O_AIV},
    {"records-per-task", required_argument, NULL, O_RPT},
    {"json", no_argument, NULL, O_JSON},
    {"skip-first", required_argument, NULL, O_SKIPF},
    {"wait", required_argument, NULL, O_WAIT},
    {"warmup", required_argument, NULL, O_WARMUP},
    {"active", required_argument, NULL, O_ACTIVE},
    {"repeat", required_argument, NULL, O_REPEAT},
    {"steps", required_argument, NULL, O_STEPS},
    {"calls-per-step", required_argument, NULL, O_CPS},
    {"max-per-step", required_argument, NULL, O_MPS},
    {"scenario", required_argument, NULL, O_SCEN},
    {"corrupt", required_argument, NULL, O_CORRUPT},
    {"align-in-order", no_argument, NULL, O_IN_ORDER},
    {"skip-first-wait", required_argument, NULL, O_SKIPFW},
    {NULL, 0, NULL, 0},
};

struct args {
	const char *cmd, *out, *meta, *device, *profiler, *kname, *aic, *aiv, *scenario, *corrupt;
	const char *input;
	enum devprof_display display;
	uint32_t pid_base, skip, rpt, steps, cps, mps;
	struct ct_devprof_schedule sched;
	int host, json, have_aic, have_aiv, have_active, in_order;
};

/* Whether the space-separated list holds name as a whole word. */
static int has_word(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; (p = strstr(p, name)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
			return 1;
	return 0;
}

/* Options are shared by name; each command rejects the ones it does not take. */
static int parse_args(int argc, char **argv, const char *allowed, const char *help, struct args *a)
{
	int c, idx;

	memset(a, 0, sizeof(*a));
	a->cmd = argv[0];
	a->pid_base = 1;
	a->rpt = 3;
	a->cps = 1;
	optind = 0; /* glibc: a full reset, so the CLI can run more than once in a process */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "ho:", long_opts, &idx)) != -1) {
		const char *name = NULL;
		uint32_t *u = NULL, max = UINT32_MAX;

		if (c == '?')
			return usage_err(a->cmd, "unknown option or missing value: %s",
					 argv[optind - 1]);
		if (c == 'h') {
			fputs(help, stdout);
			return -1;
		}
		for (idx = 0; long_opts[idx].name; idx++)
			if (long_opts[idx].val == c)
				name = long_opts[idx].name;
		if (c != 'o' && !has_word(allowed, name))
			return usage_err(a->cmd, "option --%s does not apply here", name);
		switch (c) {
		case 'o':
			if (!has_word(allowed, "output"))
				return usage_err(a->cmd, "option -o does not apply here", NULL);
			a->out = optarg;
			break;
		case O_DISPLAY:
			if (parse_display(optarg, &a->display))
				return usage_err(a->cmd, "--display takes stage or full, not '%s'",
						 optarg);
			break;
		case O_META:
			a->meta = optarg;
			break;
		case O_DEVICE:
			a->device = optarg;
			break;
		case O_PROFILER:
			a->profiler = optarg;
			break;
		case O_HOST:
			a->host = 1;
			break;
		case O_KNAME:
			a->kname = optarg;
			break;
		case O_AIC:
			a->aic = optarg;
			a->have_aic = 1;
			break;
		case O_AIV:
			a->aiv = optarg;
			a->have_aiv = 1;
			break;
		case O_JSON:
			a->json = 1;
			break;
		case O_SCEN:
			a->scenario = optarg;
			break;
		case O_CORRUPT:
			a->corrupt = optarg;
			break;
		case O_IN_ORDER:
			a->in_order = 1;
			break;
		case O_PID_BASE:
			u = &a->pid_base;
			max = 1u << 30;
			break;
		case O_SKIP:
			u = &a->skip;
			break;
		case O_RPT:
			u = &a->rpt;
			max = 64;
			break;
		case O_SKIPF:
			u = &a->sched.skip_first;
			break;
		case O_SKIPFW:
			u = &a->sched.skip_first_wait;
			break;
		case O_WAIT:
			u = &a->sched.wait;
			break;
		case O_WARMUP:
			u = &a->sched.warmup;
			break;
		case O_ACTIVE:
			u = &a->sched.active;
			a->have_active = 1;
			break;
		case O_REPEAT:
			u = &a->sched.repeat;
			break;
		case O_STEPS:
			u = &a->steps;
			max = 1u << 20;
			break;
		case O_CPS:
			u = &a->cps;
			max = 4096;
			break;
		case O_MPS:
			u = &a->mps;
			max = 4096;
			break;
		}
		if (u && parse_u32(optarg, max, u))
			return usage_err(a->cmd, "invalid number '%s'", optarg);
	}
	if (optind < argc)
		a->input = argv[optind++];
	if (optind < argc)
		return usage_err(a->cmd, "unexpected argument '%s'", argv[optind]);
	return 0;
}

static int cmd_decode(int argc, char **argv)
{
	struct devprof_err err = {0};
	struct devprof_job j;
	struct args a;
	int rc;

	rc = parse_args(argc, argv, "output display meta pid-base", decode_help, &a);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (!a.input || !a.out)
		return usage_err(a.cmd, "needs a BUFFER and -o OUT%s", "");
	devprof_job_init(&j);
	j.device = a.input;
	j.out = a.out;
	j.meta = a.meta;
	j.display = a.display;
	j.pid_base = (int)a.pid_base;
	return devprof_decode_files(&j, &err) ? fail(&err) : 0;
}

static int cmd_validate(int argc, char **argv)
{
	struct devprof_err err = {0};
	struct devprof_file f;
	struct args a;
	uint8_t *data = NULL;
	size_t len, k;
	uint32_t i;
	int rc;

	rc = parse_args(argc, argv, "", validate_help, &a);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (!a.input)
		return usage_err(a.cmd, "needs a BUFFER%s", "");
	rc = devprof_read_file(a.input, DEVPROF_MAX_FILE, &data, &len, &err);
	if (!rc)
		rc = devprof_parse(data, len, &f, &err);
	if (rc) {
		free(data);
		return fail(&err);
	}
	for (k = 0; k < f.n; k++) {
		const struct ct_devprof_header *h = &f.inv[k].h;

		printf("invocation %zu: step %u call %u, %u AIC + %u AIV cores, capacity %u/%u, "
		       "clock %llu Hz, %llu records, %llu dropped, metadata %s\n",
		       k, h->step, h->invocation_seq, h->aic_cores, h->aiv_cores, h->aic_capacity,
		       h->aiv_capacity, (unsigned long long)h->clock_hz,
		       (unsigned long long)f.inv[k].records, (unsigned long long)f.inv[k].dropped,
		       h->meta_size ? "embedded" : "absent");
		for (i = 0; i < h->aic_cores + h->aiv_cores; i++) {
			struct ct_devprof_slot s;

			devprof_slot_at(&f.inv[k], i, &s);
			printf("  %s %u: %u records, %u dropped\n",
			       s.core_type == CT_DEVPROF_CORE_AIC ? "AIC" : "AIV", s.core_id,
			       s.record_count, s.dropped_count);
		}
	}
	devprof_file_free(&f);
	free(data);
	return 0;
}

static int cmd_fuse(int argc, char **argv)
{
	struct devprof_err err = {0};
	struct devprof_job j;
	struct args a;
	int rc;

	rc = parse_args(argc, argv,
			"output device profiler allow-host-align kernel-name skip display meta "
			"align-in-order",
			fuse_help, &a);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (a.input)
		return usage_err(a.cmd, "unexpected argument '%s'", a.input);
	if (!a.device || !a.profiler || !a.out)
		return usage_err(a.cmd, "needs --device, --profiler and -o%s", "");
	devprof_job_init(&j);
	j.device = a.device;
	j.profiler = a.profiler;
	j.out = a.out;
	j.meta = a.meta;
	j.display = a.display;
	j.fuse.allow_host_align = a.host;
	j.fuse.kernel_name = a.kname;
	j.fuse.skip = a.skip;
	j.fuse.align_in_order = a.in_order;
	return devprof_fuse_files(&j, &err) ? fail(&err) : 0;
}

static int cmd_plan(int argc, char **argv)
{
	static uint32_t aic[CT_DEVPROF_MAX_CORES], aiv[CT_DEVPROF_MAX_CORES];
	struct devprof_err err = {0};
	struct devprof_plan p;
	uint32_t naic = 0, naiv = 0;
	struct args a;
	int rc;

	rc = parse_args(argc, argv, "aic-tasks aiv-tasks records-per-task json", plan_help, &a);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (a.input)
		return usage_err(a.cmd, "unexpected argument '%s'", a.input);
	if (!a.have_aic || !a.have_aiv)
		return usage_err(a.cmd, "needs --aic-tasks and --aiv-tasks (either may be ''%s)",
				 "");
	if (parse_list(a.aic, aic, CT_DEVPROF_MAX_CORES, &naic))
		return usage_err(a.cmd, "bad --aic-tasks '%s' (comma-separated counts)", a.aic);
	if (parse_list(a.aiv, aiv, CT_DEVPROF_MAX_CORES, &naiv))
		return usage_err(a.cmd, "bad --aiv-tasks '%s' (comma-separated counts)", a.aiv);
	rc = devprof_plan(aic, naic, aiv, naiv, a.rpt, &p, &err);
	if (rc)
		return fail(&err);
	if (a.json) {
		printf(
		    "{\"aic_cores\":%u,\"aiv_cores\":%u,\"aic_max_tasks\":%u,\"aiv_max_tasks\":%u,"
		    "\"aic_capacity\":%u,\"aiv_capacity\":%u,\"aic_expected_drops\":%llu,"
		    "\"aiv_expected_drops\":%llu,\"bytes\":%llu}\n",
		    p.aic_cores, p.aiv_cores, p.aic_max_tasks, p.aiv_max_tasks, p.aic_capacity,
		    p.aiv_capacity, (unsigned long long)p.aic_expected_drops,
		    (unsigned long long)p.aiv_expected_drops, (unsigned long long)p.bytes);
		return 0;
	}
	printf("AIC: %u cores, busiest runs %u tasks -> capacity %u records\n", p.aic_cores,
	       p.aic_max_tasks, p.aic_capacity);
	printf("AIV: %u cores, busiest runs %u tasks -> capacity %u records\n", p.aiv_cores,
	       p.aiv_max_tasks, p.aiv_capacity);
	printf("buffer: %llu bytes per invocation (without metadata)\n",
	       (unsigned long long)p.bytes);
	if (p.aic_expected_drops || p.aiv_expected_drops)
		printf("warning: %d records per core are not enough; expect %llu AIC and %llu AIV "
		       "records dropped\n",
		       CT_DEVPROF_MAX_RECS, (unsigned long long)p.aic_expected_drops,
		       (unsigned long long)p.aiv_expected_drops);
	return 0;
}

static const char *action_name(enum ct_devprof_action x)
{
	static const char *const n[] = {"none", "warmup", "record", "record_and_save"};

	return n[x];
}

static int cmd_schedule(int argc, char **argv)
{
	struct ct_devprof_session s;
	struct args a;
	uint32_t st, call;
	int rc, first = 1;

	rc = parse_args(argc, argv,
			"skip-first skip-first-wait wait warmup active repeat steps calls-per-step "
			"max-per-step json",
			schedule_help, &a);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (a.input)
		return usage_err(a.cmd, "unexpected argument '%s'", a.input);
	if (!a.have_active || !a.sched.active || !a.steps)
		return usage_err(a.cmd, "needs --active N (N > 0) and --steps N (N > 0)%s", "");
	ct_devprof_session_init(&s, &a.sched, a.mps);
	if (a.json)
		printf("[");
	for (st = 0; st < a.steps; st++) {
		for (call = 0; call < a.cps; call++) {
			struct ct_devprof_runtime_config cfg;
			/* Any non-zero address: the CLI only shows the decision. */
			enum ct_devprof_action x = ct_devprof_session_configure(&s, &cfg, 1);

			if (a.json)
				printf("%s{\"step\":%u,\"call\":%u,\"invocation_seq\":%u,"
				       "\"action\":\"%s\",\"profile_enable\":%u}",
				       first ? "" : ",", st, call, cfg.invocation_seq,
				       action_name(x), cfg.profile_enable);
			else
				printf("step %u call %u (seq %u): %s%s\n", st, call,
				       cfg.invocation_seq, action_name(x),
				       cfg.profile_enable ? ", sampling" : "");
			first = 0;
		}
		ct_devprof_session_step(&s);
	}
	if (a.json)
		printf("]\n");
	return 0;
}

static int cmd_gen(int argc, char **argv)
{
	struct devprof_err err = {0};
	enum devprof_corrupt cor = DEVPROF_CORRUPT_NONE;
	struct args a;
	uint8_t *buf = NULL;
	size_t len, i;
	int rc;

	rc = parse_args(argc, argv, "output scenario corrupt", gen_help, &a);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (a.input)
		return usage_err(a.cmd, "unexpected argument '%s'", a.input);
	if (!a.scenario || !a.out)
		return usage_err(a.cmd, "needs --scenario NAME and -o OUT%s", "");
	if (a.corrupt) {
		for (i = 0; devprof_corruptions[i]; i++)
			if (!strcmp(devprof_corruptions[i], a.corrupt))
				break;
		if (!devprof_corruptions[i])
			return usage_err(a.cmd, "unknown --corrupt '%s'", a.corrupt);
		cor = (enum devprof_corrupt)i;
	}
	rc = devprof_gen(a.scenario, cor, &buf, &len, &err);
	if (!rc)
		rc = devprof_write_file(a.out, buf, len, &err);
	free(buf);
	return rc ? fail(&err) : 0;
}

int devprof_cli_main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
	    {"decode", cmd_decode}, {"validate", cmd_validate}, {"fuse", cmd_fuse},
	    {"plan", cmd_plan},	    {"schedule", cmd_schedule}, {"gen", cmd_gen},
	};
	size_t i;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(main_help, argc < 2 ? stderr : stdout);
		return argc < 2 ? DEVPROF_E_USAGE : 0;
	}
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr,
		"devprof: unknown command '%s' (decode, validate, fuse, plan, schedule, "
		"gen; see --help)\n",
		argv[1]);
	return DEVPROF_E_USAGE;
}
