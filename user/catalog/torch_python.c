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
 */
#include "catalog/catalog.h"

static const struct ct_func torch_python_funcs[] = {
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
    .times = "not a collective: autograd context creation, for backward attribution",
};
