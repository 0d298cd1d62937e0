# SPDX-License-Identifier: MIT
"""The Makefile's dependencies and toolchain choice, checked with `make -n` (nothing is
built, no root needed)."""
import os
import platform
import subprocess

from conftest import REPO

ARCH = {"x86_64": "x86", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def make_n(*args, env=None):
    """make -n's commands; without env, make runs with no CC of the caller's."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "CC"}
    env = {k: v for k, v in env.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    r = subprocess.run(["make", "-n", *args], cwd=REPO, capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_vmlinux_h_rebuilds_bpf_object():
    """A refreshed vmlinux.h rebuilds the BPF object (it is in BPF_HDRS)."""
    vmlinux = f"vmlinux/{ARCH}/vmlinux.h"
    assert (REPO / vmlinux).exists(), vmlinux
    lines = make_n("-W", vmlinux, "build/commtrace.bpf.o")
    assert any("-target bpf" in l and "-c bpf/commtrace.bpf.c" in l for l in lines), lines


def test_cc_defaults_to_gcc_and_can_be_overridden():
    """make's predefined CC (cc) is replaced by gcc; a CC given by the user is kept."""
    def compile_line(*args, env=None):
        lines = make_n("-B", *args, "build/user/stats.o", env=env)
        found = [l for l in lines if "-c user/stats.c" in l]
        assert len(found) == 1, lines
        return found[0].split()[0]

    assert compile_line() == "gcc"
    assert compile_line("CC=clang") == "clang"
    assert compile_line(env=dict(os.environ, CC="clang")) == "clang"
