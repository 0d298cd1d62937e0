// SPDX-License-Identifier: MIT
/*
 * PyTorch's Python bindings (libtorch_python.so): not a communication library, but where a
 * Python autograd Function's context is born. THPFunction_new allocates the ctx object of
 * every Function.apply (DTensor's redistribute, from_local and to_local; the autograd-aware
 * collectives of torch.distributed.nn). Its entry carries the forward's Python stack (the
 * module that created the ctx), its return the ctx itself, which is `self` of the frame
 * BackwardCFunction.apply in the backward pass: the backward collectives it issues are
 * attributed to that module (user/pystacks.c). Same signature in 1.13 and 2.x:
 * PyObject *THPFunction_new(PyTypeObject *type, PyObject *args, PyObject *kwargs).
 * THPEngine_run_backward (Variable._execution_engine.run_backward: loss.backward(),
 * torch.autograd.grad) brackets a backward pass on the calling thread, for --ops' phase.
 *
 * One hit per ctx instead of two where the function's code allows: THPFunction_new begins
 * `obj = type->tp_alloc(type, 0); if (!obj) ...` (call *0x130(%rdi), tp_alloc's offset in
 * PyTypeObject; test %rax,%rax; je), in 1.13 and 2.6 alike. A probe on that je sees the
 * ctx in rax and the same Python stack as the entry: no return probe. On the je, not the
 * test: the kernel emulates a conditional jump, where it single-steps a test (a second
 * trap), as it does the entry's sub $0x8,%rsp in 2.6. Where the bytes are not there, the
 * entry and return are probed.
 */
#include "catalog/catalog.h"

static const uint8_t tp_alloc_call[] = {0xff, 0x97, 0x30, 0x01, 0x00, 0x00, /* call *0x130(%rdi) */
					0x48, 0x85, 0xc0,		    /* test %rax,%rax */
					0x74 /* je rel8 */};
static const struct ct_point ctx_allocated = {tp_alloc_call, sizeof(tp_alloc_call), 9, 32};

static const struct ct_func torch_python_funcs[] = {
    {"THPFunction_new", "THPFunction_new", .cxx = true, .optional = true, .kind = CT_K_AUTOGRAD_CTX,
     .flags = CT_PF_POINT, .point = &ctx_allocated},
    {"THPFunction_new", "THPFunction_new", .cxx = true, .optional = true,
     .kind = CT_K_AUTOGRAD_CTX},
    {"THPEngine_run_backward", "THPEngine_run_backward", .cxx = true, .optional = true,
     .kind = CT_K_BACKWARD_RUN},
};

static const char *const torch_python_files[] = {"libtorch_python.so", NULL};

const struct ct_libdesc ct_lib_torch_python = {
    .lib = CT_LIB_TORCH_PYTHON,
    .name = "torch_python",
    .files = torch_python_files,
    .funcs = torch_python_funcs,
    .n_funcs = ARRAY_LEN(torch_python_funcs),
    .aux = true,
    .stacks_only = true,
    .times = "not a collective: autograd context creation, for backward attribution",
};
