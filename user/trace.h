/* SPDX-License-Identifier: MIT */
#ifndef CT_TRACE_H
#define CT_TRACE_H

/* `commtrace-bpf [options] -p PID | -- COMMAND`: the tracer. Its exit status (exit.h). */
int ct_trace_main(int argc, char **argv);

#endif
