// SPDX-License-Identifier: MIT
/* Command line: BCC/libbpf-tools conventions, strict numeric parsing. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "metrics/metrics.h"
#include "target/proc.h"
#include "ct_version.h"

static const char usage_text[] =
    "Usage: commtrace-bpf -p PID[,PID...] [options]\n"
    "       commtrace-bpf [options] -- COMMAND [ARGS...]\n"
    "       commtrace-bpf --dry-run (-p PID | --lib PATH)\n"
    "       commtrace-bpf devprof SUBCOMMAND ...   (device profile buffers; see devprof --help)\n"
    "       commtrace-bpf fuse -o OUT TRACE... [--profiler FILE ...]   (see fuse --help)\n"
    "       commtrace-bpf merge [--json OUT] [--chrome OUT] INPUT...   (several tracers of one\n"
    "                        job, one per node, by rank; see merge --help)\n"
    "\n"
    "Trace the collectives (Open MPI, Gloo, PyTorch c10d, NCCL, HCCL) of running processes\n"
    "with uprobes: calls, bytes, dtypes, communicators and latency, without changing or\n"
    "restarting them. Detaching leaves the processes as they were.\n"
    "\n"
    "Options:\n"
    "  -p, --pid PID[,PID...]   trace these running processes\n"
    "  -d, --duration SECONDS   stop after this long (default: until Ctrl-C or all exit)\n"
    "  -i, --interval SECONDS   print a live summary on stderr this often\n"
    "      --json FILE          write the report as JSON (schema: docs/json.md)\n"
    "      --table FILE         write seed 000's tracing table per process ('-': stdout)\n"
    "      --noise-level N      table detail: 0 collectives, 1 + ops and compiled graphs,\n"
    "                           2 + modules (default 0)\n"
    "      --profile FILE       more framework rules (module/op/helper frames; docs/profiles.md)\n"
    "      --no-stacks          do not walk Python stacks (collectives only, lowest cost)\n"
    "      --ops                also trace the entry and exit of every module, op and\n"
    "                           redistribute call the profiles name (not only those that\n"
    "                           communicate): complete tables, JSON records, timeline.\n"
    "                           On torch 2.x, ops are seen where torch dispatches them to\n"
    "                           a tensor subclass, their modules from their stacks\n"
    "      --ops-frames         --ops by the interpreter's frames on torch 2.x too: every\n"
    "                           profiled Python function C enters (costlier)\n"
    "      --chrome FILE        write a Chrome Trace / Perfetto JSON file (docs/chrome.md)\n"
    "      --chrome-max-mb N    cap its size (default 1024 MiB; 0: no cap)\n"
    "      --chrome-window S    write only the calls of the first S seconds\n"
    "      --device-buffer FILE add a device profile buffer (devprof) to the Chrome trace\n"
    "      --device-sync CYCLE@NS place it on the host clock: device cycle CYCLE was at\n"
    "                           CLOCK_MONOTONIC NS nanoseconds (default: its earliest\n"
    "                           record at the start of tracing, not synchronized)\n"
    "      --hang-after S       alert on stderr when a rank is blocked in a collective for S\n"
    "                           seconds while others moved on or never came (default 30;\n"
    "                           0: no alerts; README \"Diagnosis\")\n"
    "      --late-after S       name the last rank of a collective whose arrival skew is at\n"
    "                           least S seconds (default 0.25)\n"
    "      --sharding           list the root module's parameters (dtype, shape, placements)\n"
    "      --metrics [ADDR:]PORT serve Prometheus metrics over HTTP while tracing\n"
    "                           (PORT: on 127.0.0.1; 0.0.0.0:PORT: every interface;\n"
    "                           port 0: any free one, printed; docs/metrics.md)\n"
    "      --dry-run            resolve and print the probes that would be attached\n"
    "      --lib PATH           with --dry-run: resolve this library file\n"
    "      --wait-libs          accept processes that map no known library yet\n"
    "                           (they are attached when one is loaded)\n"
    "      --ringbuf MB         BPF ring buffer size (default 8, a power of 2)\n"
    "      --cost               account what tracing cost the traced processes: probe hits,\n"
    "                           BPF time, one hit measured here, CPU times (summary, JSON\n"
    "                           \"cost\"; turns on the kernel's BPF statistics meanwhile)\n"
    "      --record FILE        also write every record to FILE, for `commtrace-bpf replay\n"
    "                           FILE [--json F] [--chrome F] [--table F]` (docs/record.md)\n"
    "      --check              say whether BPF uprobes can be used here (0), are\n"
    "                           unavailable (3) or were refused by the verifier (1)\n"
    "  -q, --quiet              no summary on stderr (lost records are still said)\n"
    "  -v, --verbose            more detail (-vv: libbpf debug and every event)\n"
    "  -V, --version            print the version\n"
    "  -h, --help               this help\n"
    "\n"
    "Exit status: 0 done, 1 failed, 2 bad usage, 3 BPF unavailable (privilege), 4 no such\n"
    "process, 5 no known library in a process; for the subcommands also 6 a file could not\n"
    "be read or written, 10 and up their own classes of refused input (see their --help).\n"
    "\n"
    "Signals: Ctrl-C or SIGTERM stops and writes the reports; SIGUSR1 prints how far each\n"
    "process has got on each communicator (last collective entered and completed, the call\n"
    "in flight, its age and call site) and tracing goes on.\n"
    "\n"
    "Environment: COMMTRACE_UPROBE_MULTI=0 attaches one perf-event link per probe instead\n"
    "of uprobe_multi links (detaching then waits for the kernel once per probe).\n"
    "COMMTRACE_UPROBE_SESSION=0: --ops probes the interpreter (or torch 2.x's dispatch)\n"
    "with an entry and a return probe on every call instead of one uprobe session\n"
    "(Linux 6.13+).\n"
    "COMMTRACE_FILE_WIDE=N: with -p, a library file that N or more of the processes map\n"
    "(default 4) is probed once for all processes, filtered in BPF; 0: per process.\n"
    "COMMTRACE_PROBE_INSIDE=0: THPFunction_new is probed at its entry and return (two hits\n"
    "per autograd ctx) instead of once inside, just after the ctx's allocation.\n"
    "\n"
    "Examples:\n"
    "  sudo commtrace-bpf -p 4242                     # trace a running rank until Ctrl-C\n"
    "  sudo commtrace-bpf -p 4242,4243 -d 30 --json comm.json\n"
    "  sudo commtrace-bpf -i 5 -- mpirun -np 4 ./train   # launch, follow every rank\n"
    "  sudo commtrace-bpf -p 4242 --table - --noise-level 2   # who caused each collective\n"
    "  sudo commtrace-bpf -p 4242 --ops --table - --noise-level 2   # every op and module\n"
    "  sudo commtrace-bpf --dry-run -p 4242           # what would be probed\n"
    "  sudo commtrace-bpf -p 4242,4243 --chrome comm.trace.json   # open in ui.perfetto.dev\n"
    "  sudo commtrace-bpf -p 4242,4243 --hang-after 10 --json d.json   # late ranks, hangs\n"
    "  sudo commtrace-bpf -p 4242,4243 --metrics 9464  # scrape http://127.0.0.1:9464/metrics\n"
    "  commtrace-bpf merge --json all.json node0.json node1.json   # one report per job\n"
    "  commtrace-bpf --dry-run --lib /usr/lib/x86_64-linux-gnu/libnccl.so.2\n"
    "  sudo commtrace-bpf -p 4242 --record run.ctr; commtrace-bpf replay run.ctr --table -\n"
    "  sudo commtrace-bpf -p 4242,4243 -d 60 --cost   # what tracing costs this job\n";

void ct_usage(FILE *out)
{
	fputs(usage_text, out);
}

/* --device-sync CYCLE@NS: two unsigned 64-bit decimal numbers. */
static int parse_device_sync(const char *s, uint64_t *cycle, uint64_t *ns)
{
	unsigned long long v[2];
	const char *p = s;
	char *end;

	for (int i = 0; i < 2; i++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		errno = 0;
		v[i] = strtoull(p, &end, 10);
		if (errno || *end != (i ? '\0' : '@'))
			return -EINVAL;
		p = end + 1;
	}
	*cycle = v[0];
	*ns = v[1];
	return 0;
}

int ct_parse_noise_level(const char *s, int *out)
{
	if (strlen(s) != 1 || s[0] < '0' || s[0] > '2') {
		fprintf(stderr, "commtrace-bpf: invalid --noise-level '%s': 0, 1 or 2\n", s);
		return -EINVAL;
	}
	*out = s[0] - '0';
	return 0;
}

static int parse_seconds(const char *what, const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v <= 0) {
		fprintf(stderr, "commtrace-bpf: invalid %s '%s': a positive number of seconds\n",
			what, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int ct_parse_args(int argc, char **argv, struct ct_opts *o)
{
	enum {
		OPT_JSON = 256,
		OPT_DRY,
		OPT_LIB,
		OPT_WAIT,
		OPT_RB,
		OPT_RECORD,
		OPT_CHECK,
		OPT_TABLE,
		OPT_NOISE,
		OPT_PROFILE,
		OPT_NO_STACKS,
		OPT_OPS,
		OPT_OPS_FRAMES,
		OPT_SHARDING,
		OPT_CHROME,
		OPT_CHROME_MB,
		OPT_CHROME_WIN,
		OPT_DEVBUF,
		OPT_HANG_AFTER,
		OPT_LATE_AFTER,
		OPT_METRICS,
		OPT_DEVSYNC,
		OPT_COST
	};
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, 'p'},
	    {"duration", required_argument, NULL, 'd'},
	    {"interval", required_argument, NULL, 'i'},
	    {"json", required_argument, NULL, OPT_JSON},
	    {"dry-run", no_argument, NULL, OPT_DRY},
	    {"lib", required_argument, NULL, OPT_LIB},
	    {"wait-libs", no_argument, NULL, OPT_WAIT},
	    {"ringbuf", required_argument, NULL, OPT_RB},
	    {"record", required_argument, NULL, OPT_RECORD},
	    {"check", no_argument, NULL, OPT_CHECK},
	    {"table", required_argument, NULL, OPT_TABLE},
	    {"noise-level", required_argument, NULL, OPT_NOISE},
	    {"profile", required_argument, NULL, OPT_PROFILE},
	    {"no-stacks", no_argument, NULL, OPT_NO_STACKS},
	    {"ops", no_argument, NULL, OPT_OPS},
	    {"ops-frames", no_argument, NULL, OPT_OPS_FRAMES},
	    {"chrome", required_argument, NULL, OPT_CHROME},
	    {"chrome-max-mb", required_argument, NULL, OPT_CHROME_MB},
	    {"chrome-window", required_argument, NULL, OPT_CHROME_WIN},
	    {"device-buffer", required_argument, NULL, OPT_DEVBUF},
	    {"device-sync", required_argument, NULL, OPT_DEVSYNC},
	    {"hang-after", required_argument, NULL, OPT_HANG_AFTER},
	    {"late-after", required_argument, NULL, OPT_LATE_AFTER},
	    {"metrics", required_argument, NULL, OPT_METRICS},
	    {"sharding", no_argument, NULL, OPT_SHARDING},
	    {"cost", no_argument, NULL, OPT_COST},
	    {"quiet", no_argument, NULL, 'q'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	int c, n;
	char *end;
	unsigned long mb;

	memset(o, 0, sizeof(*o));
	o->ringbuf_mb = 8;
	o->chrome_max_mb = 1024;
	o->hang_after = 30;
	o->late_after = 0.25;
	/* "+": stop at the first non-option, so that a launched command keeps its own flags. */
	while ((c = getopt_long(argc, argv, "+p:d:i:qvVh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			n = ct_parse_pid_list(optarg, o->pids + o->n_pids,
					      CT_MAX_TARGETS - o->n_pids);
			if (n < 0) {
				fprintf(
				    stderr,
				    "commtrace-bpf: invalid pid list '%s': expected PID[,PID...] "
				    "of positive integers\n",
				    optarg);
				return CT_EXIT_USAGE;
			}
			o->n_pids += n;
			break;
		case 'd':
			if (parse_seconds("duration", optarg, &o->duration))
				return CT_EXIT_USAGE;
			break;
		case 'i':
			if (parse_seconds("interval", optarg, &o->interval))
				return CT_EXIT_USAGE;
			break;
		case OPT_JSON:
			o->json_path = optarg;
			break;
		case OPT_DRY:
			o->dry_run = true;
			break;
		case OPT_LIB:
			o->lib_path = optarg;
			break;
		case OPT_WAIT:
			o->wait_libs = true;
			break;
		case OPT_RB:
			errno = 0;
			mb = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || mb == 0 || mb > 1024 ||
			    (mb & (mb - 1))) {
				fprintf(
				    stderr,
				    "commtrace-bpf: invalid --ringbuf '%s': a power of two from 1 "
				    "to 1024 (MiB)\n",
				    optarg);
				return CT_EXIT_USAGE;
			}
			o->ringbuf_mb = (unsigned int)mb;
			break;
		case OPT_RECORD:
			o->record_path = optarg;
			break;
		case OPT_CHECK:
			o->check = true;
			break;
		case OPT_TABLE:
			o->table_path = optarg;
			break;
		case OPT_NOISE:
			if (ct_parse_noise_level(optarg, &o->noise_level))
				return CT_EXIT_USAGE;
			break;
		case OPT_PROFILE:
			o->profile_path = optarg;
			break;
		case OPT_OPS:
			o->ops = true;
			break;
		case OPT_OPS_FRAMES:
			o->ops = o->ops_frames = true;
			break;
		case OPT_NO_STACKS:
			o->no_stacks = true;
			break;
		case OPT_SHARDING:
			o->sharding = true;
			break;
		case OPT_COST:
			o->cost = true;
			break;
		case OPT_CHROME:
			o->chrome_path = optarg;
			break;
		case OPT_CHROME_MB:
			errno = 0;
			mb = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' ||
			    mb > (1ul << 20)) {
				fprintf(
				    stderr,
				    "commtrace-bpf: invalid --chrome-max-mb '%s': MiB from 0 (no "
				    "cap) to 1048576\n",
				    optarg);
				return CT_EXIT_USAGE;
			}
			o->chrome_max_mb = mb;
			break;
		case OPT_CHROME_WIN:
			if (parse_seconds("--chrome-window", optarg, &o->chrome_window))
				return CT_EXIT_USAGE;
			break;
		case OPT_HANG_AFTER:
		case OPT_LATE_AFTER: {
			double *v = c == OPT_HANG_AFTER ? &o->hang_after : &o->late_after;

			/* --hang-after 0 turns the alerts off. */
			if (!(c == OPT_HANG_AFTER && !strcmp(optarg, "0")) &&
			    parse_seconds(c == OPT_HANG_AFTER ? "--hang-after" : "--late-after",
					  optarg, v))
				return CT_EXIT_USAGE;
			if (c == OPT_HANG_AFTER && !strcmp(optarg, "0"))
				*v = 0;
			break;
		}
		case OPT_DEVBUF:
			o->device_buffer = optarg;
			break;
		case OPT_DEVSYNC:
			if (parse_device_sync(optarg, &o->device_sync_cycle, &o->device_sync_ns)) {
				fprintf(
				    stderr,
				    "commtrace-bpf: invalid --device-sync '%s': CYCLE@NS, device "
				    "cycle CYCLE was at CLOCK_MONOTONIC NS nanoseconds (two "
				    "unsigned decimal numbers)\n",
				    optarg);
				return CT_EXIT_USAGE;
			}
			o->device_sync = true;
			break;
		case OPT_METRICS: {
			struct sockaddr_storage ss;
			socklen_t sl;
			char msg[256];

			if (ct_metrics_parse_addr(optarg, &ss, &sl, msg, sizeof(msg))) {
				fprintf(stderr, "commtrace-bpf: %s\n", msg);
				return CT_EXIT_USAGE;
			}
			o->metrics_addr = optarg;
			break;
		}
		case 'q':
			o->quiet = true;
			break;
		case 'v':
			o->verbose++;
			break;
		case 'V':
			printf("commtrace-bpf %s\n", CT_VERSION);
			return CT_EXIT_DONE;
		case 'h':
			ct_usage(stdout);
			return CT_EXIT_DONE;
		default:
			fprintf(stderr, "Try 'commtrace-bpf --help' for more information.\n");
			return CT_EXIT_USAGE;
		}
	}
	if (optind < argc)
		o->cmd = argv + optind;
	if (o->check)
		return 0;
	if (o->lib_path && !o->dry_run) {
		fprintf(stderr, "commtrace-bpf: --lib goes with --dry-run\n");
		return CT_EXIT_USAGE;
	}
	if (!o->chrome_path && (o->device_buffer || o->chrome_window > 0)) {
		fprintf(stderr,
			"commtrace-bpf: --device-buffer and --chrome-window go with --chrome "
			"FILE\n");
		return CT_EXIT_USAGE;
	}
	if (o->device_sync && !o->device_buffer) {
		fprintf(stderr, "commtrace-bpf: --device-sync goes with --device-buffer FILE\n");
		return CT_EXIT_USAGE;
	}
	if (o->cmd && o->n_pids) {
		fprintf(stderr,
			"commtrace-bpf: give either -p PID or a command after --, not both\n");
		return CT_EXIT_USAGE;
	}
	if (!o->cmd && !o->n_pids && !(o->dry_run && o->lib_path)) {
		fprintf(stderr, "commtrace-bpf: nothing to trace: give -p PID or -- COMMAND\n"
				"Try 'commtrace-bpf --help' for more information.\n");
		return CT_EXIT_USAGE;
	}
	if (o->ops && o->no_stacks) {
		fprintf(stderr, "commtrace-bpf: --ops reads Python frames: not with --no-stacks\n");
		return CT_EXIT_USAGE;
	}
	if (o->sharding && o->no_stacks) {
		fprintf(stderr, "commtrace-bpf: --sharding finds the model on Python stacks: not "
				"with --no-stacks\n");
		return CT_EXIT_USAGE;
	}
	if (o->dry_run && o->cmd) {
		fprintf(stderr, "commtrace-bpf: --dry-run takes -p PID or --lib PATH\n");
		return CT_EXIT_USAGE;
	}
	return 0;
}
