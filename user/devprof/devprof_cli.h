/* SPDX-License-Identifier: MIT */
#ifndef CT_DEVPROF_CLI_H
#define CT_DEVPROF_CLI_H
/* `commtrace-bpf devprof ...`: device profile buffers (argv[0] is "devprof"). */
int devprof_cli_main(int argc, char **argv);
#endif
