# SPDX-License-Identifier: MIT
"""The Makefile's dependencies and toolchain choice, checked with `make -n` (nothing is
built, no root needed)."""
import os
import re
import platform
import subprocess
import sys

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


def test_man_page_renders_and_lists_every_option():
    """`man -l` renders commtrace-bpf(8) without a warning, and it names every long option
    of --help and every exit status."""
    r = subprocess.run(["man", "--warnings", "-l", "docs/commtrace-bpf.8"], cwd=REPO,
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, MANWIDTH="100"))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    page = re.sub(r".\x08", "", r.stdout)  # grotty's overstrike bold and underline
    for section in ("SYNOPSIS", "OPTIONS", "EXIT STATUS", "FILES", "EXAMPLES"):
        assert f"\n{section}\n" in page, section
    help_text = subprocess.run([str(REPO / "commtrace-bpf"), "--help"], capture_output=True,
                               text=True, timeout=30).stdout
    options = sorted(set(re.findall(r"(--[a-z][a-z-]+)", help_text)))
    assert len(options) > 25, options
    missing = [o for o in options if o not in page]
    assert not missing, f"options in --help but not in the man page: {missing}"
    exits = page[page.index("\nEXIT STATUS\n"):page.index("\nENVIRONMENT\n")]
    for code in ("0", "1", "2", "3", "4", "5"):
        assert re.search(rf"^\s+{code}\s", exits, re.M), code


def test_install_and_uninstall_exactly(tmp_path):
    """make install puts the binary, the man page and the docs under DESTDIR/PREFIX;
    make uninstall removes exactly those files."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    dest = tmp_path / "root"
    r = subprocess.run(["make", "install", f"DESTDIR={dest}", "PREFIX=/opt/ct"], cwd=REPO,
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    docs = sorted(f"opt/ct/share/doc/commtrace/{p.name}"
                  for p in [REPO / "README.md", *(REPO / "docs").glob("*.md")])
    pydir = f"opt/ct/lib/python3.{sys.version_info[1]}/dist-packages/commtrace"
    assert files == sorted(["opt/ct/sbin/commtrace-bpf", "opt/ct/share/man/man8/commtrace-bpf.8",
                            *docs, "opt/ct/lib/libcommtrace-devprof.so",
                            "opt/ct/include/commtrace/devprof.h",
                            "opt/ct/include/commtrace/devprof_api.h",
                            f"{pydir}/__init__.py", f"{pydir}/devprof.py"]), files
    assert os.access(dest / "opt/ct/sbin/commtrace-bpf", os.X_OK)
    v = subprocess.run([str(dest / "opt/ct/sbin/commtrace-bpf"), "-V"], capture_output=True,
                       text=True, timeout=30)
    assert v.returncode == 0 and v.stdout.startswith("commtrace-bpf ")
    # The installed package finds its installed library (PREFIX/lib), not the tree's.
    code = ("from commtrace import devprof; devprof.schedule(active=1); "
            "print(devprof.__file__, devprof._lib_handle._name)")
    py = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                        cwd=tmp_path, env=dict(env, PYTHONPATH=str(dest / pydir / "..")))
    assert py.returncode == 0, py.stderr
    assert py.stdout.split() == [str(dest / pydir / "devprof.py"),
                                 str(dest / "opt/ct/lib/libcommtrace-devprof.so")], py.stdout
    r = subprocess.run(["make", "uninstall", f"DESTDIR={dest}", "PREFIX=/opt/ct"], cwd=REPO,
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    left = [str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()]
    assert left == [], left
    assert not (dest / "opt/ct/share/doc/commtrace").exists()


def stub(dirpath, name, body):
    p = dirpath / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)


def test_install_deps_installs_only_what_is_missing(tmp_path):
    """The installer asks dpkg once, installs exactly the missing packages and says so;
    with everything present it installs nothing (dpkg and apt-get stubbed on PATH)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "apt.log"
    # dpkg-query -W -f=FORMAT PKG...: "PKG installed" for each, except $MISSING (unknown).
    stub(bindir, "dpkg-query", 'echo call >> "$DPKG_LOG"; shift 2\n'
         'for p in "$@"; do [ "$p" = "$MISSING" ] || echo "$p installed"; done\n')
    stub(bindir, "apt-get", f'echo "$@" >> {log}\n')
    stub(bindir, "id", "echo 0\n")
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", DPKG_LOG=str(tmp_path / "d"))
    env.pop("COMMTRACE_SKIP_APT", None)

    r = subprocess.run(["scripts/install-deps.sh"], cwd=REPO, capture_output=True, text=True,
                       env=dict(env, MISSING="cppcheck"), timeout=60)
    assert r.returncode == 0, r.stderr
    assert "installing 1 missing package(s): cppcheck" in r.stdout, r.stdout
    calls = log.read_text().splitlines()
    assert calls[-1].split() == ["install", "-y", "-qq", "cppcheck"], calls
    assert len((tmp_path / "d").read_text().splitlines()) == 1  # one dpkg-query for all

    log.unlink()
    r = subprocess.run(["scripts/install-deps.sh"], cwd=REPO, capture_output=True, text=True,
                       env=dict(env, MISSING="none"), timeout=60)
    assert r.returncode == 0 and "packages present" in r.stdout, r.stdout
    assert not log.exists(), "apt-get ran with nothing missing"


def test_demo_and_test_run_the_installer_first():
    """The README's two commands set themselves up: the installer comes before the build."""
    for target in ("demo", "test"):
        lines = make_n(target)
        assert lines[0] == "scripts/install-deps.sh", (target, lines[:3])


def test_no_file_of_user_reaches_back():
    """scripts/check-layers.py over the built objects: no cycle of calls between files."""
    r = subprocess.run(["scripts/check-layers.py"], cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no file reaches back" in r.stdout


def test_check_layers_finds_a_cycle(tmp_path):
    """The checker itself can fail: two files that call each other are named, with why."""
    (tmp_path / "user").mkdir()
    for name, body in (("a", "void b(void); void a(void) { b(); }"),
                       ("b", "void a(void); void b(void) { a(); }"),
                       ("c", "void a(void); void c(void) { a(); }")):
        src = tmp_path / f"{name}.c"
        src.write_text(body + "\n")
        subprocess.run(["gcc", "-c", str(src), "-o", str(tmp_path / "user" / f"{name}.o")],
                       check=True, timeout=60)
    r = subprocess.run([str(REPO / "scripts/check-layers.py"), "--build", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout
    assert "2 files reach each other: user/a.c user/b.c" in r.stdout, r.stdout
    assert "user/a.c -> user/b.c: b" in r.stdout and "user/c.c" not in r.stdout.split(
        "reach each other")[1].splitlines()[0]


GENERATED = ("include/commtrace/pyoffsets.h",)  # scripts/gen-pyoffsets.sh writes it


def test_no_source_file_over_900_lines():
    """One job per file: no source file (generated ones aside) is over 900 lines."""
    files = subprocess.run(["git", "ls-files", "*.c", "*.h", "*.py", "*.sh", "*.cu"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    long = {}
    for f in files:
        if f.startswith("vmlinux/") or f in GENERATED or f.endswith("_offsets.h"):
            continue
        n = (REPO / f).read_text(errors="replace").count("\n")
        if n > 900:
            long[f] = n
    assert not long, f"files over 900 lines: {long}"
