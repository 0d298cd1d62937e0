# SPDX-License-Identifier: MIT
"""commtrace.devprof: a MegaKernel's device profile buffers, sampled by a schedule.

Seed 004's user API, shaped like torch.profiler. The user writes:

    from commtrace import devprof

    with devprof.mega_kernel_profile(
            schedule=devprof.schedule(skip_first=10, wait=1, warmup=1, active=2, repeat=1),
            out_dir="prof", on_trace_ready=devprof.chrome_trace_handler("prof")) as prof:
        for batch in loader:
            train_step(batch)   # the MegaKernel's launches sample as the schedule says
            prof.step()

and never touches the runtime config, the rank, the device, the counters or the buffer.
The MegaKernel's builder binds its kernel once, with the names only it knows (FR-08/09),
and asks for a launch before each call:

    MK = devprof.MegaKernel("mk", aic_tasks=[...], aiv_tasks=[...],
                            stage_names=["attn_qkv", ...], owner_labels=["layer0", ...],
                            memory=devprof.TorchMemory("cuda"))
    launch = devprof.profile_buffer(MK)  # no profile, or not sampled: a zeroed config
    config.prof = launch.config          # struct ct_devprof_runtime_config, 24 bytes
    run_kernel(config)
    launch.done()                        # optional: prof.step() collects every launch

A saved window is one buffer file per kernel (the format `commtrace-bpf devprof` reads);
on_trace_ready gets a Window that decodes it to Chrome Trace or fuses it into a
torch.profiler trace of the same run. Every decision and check is the C host runtime's,
in libcommtrace-devprof.so (include/commtrace/devprof_api.h); its errors are raised as
DevprofError subclasses that carry the CLI's exit code (docs/devprof.md, "Errors").
"""
import ctypes
import ctypes.util
import enum
import json
import os
from pathlib import Path

__all__ = [
    "ProfilerAction", "Schedule", "schedule", "MegaKernel", "HostMemory", "TorchMemory",
    "Launch", "Window", "Profile", "mega_kernel_profile", "profile_buffer",
    "chrome_trace_handler", "decode", "fuse", "validate",
    "DevprofError", "UsageError", "ScheduleError", "LibraryError", "DevprofIOError",
    "BufferTooSmallError", "CorruptBufferError", "EmptyBufferError", "MetadataError",
    "TraceError", "HostAlignmentRefused", "AlignmentError", "PlanError",
]

LIB_NAME = "libcommtrace-devprof.so"
ABI_VERSION = 1
MAX_INVOCATIONS = 4096  # DEVPROF_MAX_INVOCATIONS: a window file is cut there
U32 = (1 << 32) - 1


# ---------------------------------------------------------------------------------------
# Errors: one class per family of the CLI's exit codes


class DevprofError(Exception):
    """A refusal of the C runtime; .code is `commtrace-bpf devprof`'s exit code for it."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


class UsageError(DevprofError, ValueError):
    """A bad argument (exit 2)."""


class ScheduleError(UsageError):
    """A schedule torch.profiler.schedule would refuse too."""


class LibraryError(DevprofError, ImportError):
    """libcommtrace-devprof.so is missing or does not match this package."""


class DevprofIOError(DevprofError, OSError):
    """A file could not be read or written (exit 6)."""


class BufferTooSmallError(DevprofError):
    """A buffer smaller than its layout needs (exit 12)."""


class CorruptBufferError(DevprofError):
    """A buffer that fails validation (exits 10-18, 26)."""


class EmptyBufferError(CorruptBufferError):
    """A sampled buffer with no record in any slot (exit 19)."""


class MetadataError(DevprofError, ValueError):
    """Stage names or owner labels the decoder cannot use (exit 20)."""


class TraceError(DevprofError):
    """A profiler trace or device JSON that cannot be fused (exits 21, 25)."""


class HostAlignmentRefused(TraceError):
    """The trace has no device kernel event to align to (exit 22, FR-14)."""


class AlignmentError(TraceError):
    """Invocations and kernel events do not pair up (exits 23, 27)."""


class PlanError(DevprofError, ValueError):
    """The capacity planner refused the schedule of tasks (exit 24)."""


_CLASSES = {2: UsageError, 6: DevprofIOError, 12: BufferTooSmallError, 19: EmptyBufferError,
            20: MetadataError, 21: TraceError, 22: HostAlignmentRefused, 23: AlignmentError,
            24: PlanError, 25: TraceError, 27: AlignmentError}
_CLASSES.update({c: CorruptBufferError for c in (10, 11, 13, 14, 15, 16, 17, 18, 26)})


def _raise(err, what=None, cls=None):
    msg = err.message.decode(errors="replace")
    raise (cls or _CLASSES.get(err.code, DevprofError))(f"{what}: {msg}" if what else msg,
                                                        err.code)


# ---------------------------------------------------------------------------------------
# The library and its structs (include/commtrace/devprof.h, devprof_api.h)

u32, u64 = ctypes.c_uint32, ctypes.c_uint64


class _Schedule(ctypes.Structure):
    _fields_ = [(n, u32) for n in ("skip_first", "wait", "warmup", "active", "repeat",
                                    "skip_first_wait")]


class _Session(ctypes.Structure):
    _fields_ = [("sched", _Schedule), ("step", u64), ("invocation_seq", u32),
                ("in_step", u32), ("max_per_step", u32)]


class RuntimeConfig(ctypes.Structure):
    """struct ct_devprof_runtime_config: what the kernel reads; zero means not sampling."""
    _fields_ = [("profile_enable", u32), ("step", u32), ("profile_buffer", u64),
                ("invocation_seq", u32), ("reserved", u32)]


class _Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int32), ("message", ctypes.c_char * 512)]


class _Plan(ctypes.Structure):
    _fields_ = [(n, u32) for n in ("aic_cores", "aiv_cores", "aic_max_tasks", "aiv_max_tasks",
                                    "aic_capacity", "aiv_capacity")] + \
               [(n, u64) for n in ("aic_expected_drops", "aiv_expected_drops", "bytes")]


class _Summary(ctypes.Structure):
    _fields_ = [("invocations", u64), ("records", u64), ("dropped", u64)]


class _Job(ctypes.Structure):
    _fields_ = [(n, ctypes.c_char_p) for n in ("device", "profiler", "out", "meta",
                                                "kernel_name")] + \
               [(n, u32) for n in ("display", "pid_base", "skip", "align_in_order",
                                   "allow_host_align", "reserved")]


_SIZES = {"session": _Session, "schedule": _Schedule, "runtime_config": RuntimeConfig,
          "error": _Error, "plan": _Plan, "summary": _Summary, "job": _Job}
_lib_handle = None


def _candidates():
    env = os.environ.get("COMMTRACE_DEVPROF_LIB")
    if env:
        return [Path(env)]
    here = Path(__file__).resolve().parent
    # installed: PREFIX/lib/python3.X/dist-packages/commtrace -> PREFIX/lib; in the tree:
    # python/commtrace -> build/
    found = [here.parents[2] / LIB_NAME, here.parents[1] / "build" / LIB_NAME]
    system = ctypes.util.find_library("commtrace-devprof")
    return found + ([Path(system)] if system else [])


def _lib():
    global _lib_handle
    if _lib_handle is not None:
        return _lib_handle
    tried = _candidates()
    path = next((p for p in tried if p.is_file() or not p.is_absolute()), None)
    if path is None:
        raise LibraryError(f"{LIB_NAME} not found (looked for {', '.join(map(str, tried))}); "
                           "build it with `make devprof-lib`, install it with `make install`, "
                           "or name it in COMMTRACE_DEVPROF_LIB", 1)
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        raise LibraryError(f"cannot load {path}: {e}", 1) from None
    lib.ctdp_abi_version.restype = u32
    lib.ctdp_sizeof.restype, lib.ctdp_sizeof.argtypes = ctypes.c_size_t, [ctypes.c_char_p]
    if lib.ctdp_abi_version() != ABI_VERSION:
        raise LibraryError(f"{path} has C ABI version {lib.ctdp_abi_version()}, this package "
                           f"needs {ABI_VERSION}: install both from one build", 1)
    for name, cls in _SIZES.items():
        if lib.ctdp_sizeof(name.encode()) != ctypes.sizeof(cls):
            raise LibraryError(f"{path}: struct {name} is {lib.ctdp_sizeof(name.encode())} "
                               f"bytes there, {ctypes.sizeof(cls)} here", 1)
    P, E = ctypes.POINTER, ctypes.POINTER(_Error)
    sig = {
        "ctdp_schedule_check": (ctypes.c_int, [P(_Schedule), E]),
        "ctdp_schedule_action": (ctypes.c_int, [P(_Schedule), u64]),
        "ctdp_session_init": (None, [P(_Session), P(_Schedule), u32, u64]),
        "ctdp_session_step": (None, [P(_Session)]),
        "ctdp_session_configure": (ctypes.c_int, [P(_Session), P(RuntimeConfig), u64]),
        "ctdp_plan": (ctypes.c_int, [P(u32), u32, P(u32), u32, u32, P(_Plan), E]),
        "ctdp_buffer_size": (u64, [u32, u32, u32, u32, u32]),
        "ctdp_meta_check": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, E]),
        "ctdp_buffer_init": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, u64, u32, u32,
                                            u32, u32, u32, ctypes.c_char_p, u32, E]),
        "ctdp_buffer_collect": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t,
                                               P(RuntimeConfig), P(_Summary), E]),
        "ctdp_validate": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, P(_Summary), E]),
        "ctdp_decode_files": (ctypes.c_int, [P(_Job), E]),
        "ctdp_fuse_files": (ctypes.c_int, [P(_Job), E]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    _lib_handle = lib
    return lib


def _u32(name, v, low=0):
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= U32:
        raise (ScheduleError if name in Schedule.FIELDS else UsageError)(
            f"{name} must be an integer from {low} to {U32}, not {v!r}", 2)
    return v


# ---------------------------------------------------------------------------------------
# The schedule


class ProfilerAction(enum.IntEnum):
    """enum ct_devprof_action; the names and values of torch.profiler.ProfilerAction."""
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


class Schedule:
    """torch.profiler.schedule's numbers, decided by the C session: skip skip_first steps,
    then cycles of wait (off), warmup (sampled, discarded) and active steps (sampled and
    kept; the window is saved after the last), repeat cycles (0: forever)."""
    FIELDS = ("skip_first", "wait", "warmup", "active", "repeat", "skip_first_wait")

    def __init__(self, *, wait=0, warmup=0, active=1, repeat=0, skip_first=0,
                 skip_first_wait=0):
        values = dict(wait=wait, warmup=warmup, active=active, repeat=repeat,
                      skip_first=skip_first, skip_first_wait=skip_first_wait)
        self._c = _Schedule(**{k: _u32(k, v) for k, v in values.items()})
        err = _Error()
        if _lib().ctdp_schedule_check(ctypes.byref(self._c), ctypes.byref(err)):
            _raise(err, cls=ScheduleError)
        for k, v in values.items():
            setattr(self, k, v)

    def __call__(self, step):
        """The action for step (0-based), as torch.profiler.schedule(...)(step) returns it."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise UsageError(f"a step is an integer >= 0, not {step!r}", 2)
        return ProfilerAction(_lib().ctdp_schedule_action(ctypes.byref(self._c), step))

    def __repr__(self):
        return "schedule(" + ", ".join(f"{k}={getattr(self, k)}" for k in self.FIELDS) + ")"


def schedule(*, wait=0, warmup=0, active=1, repeat=0, skip_first=0, skip_first_wait=0):
    """Seed 004's schedule(): the arguments and meaning of torch.profiler.schedule."""
    return Schedule(wait=wait, warmup=warmup, active=active, repeat=repeat,
                    skip_first=skip_first, skip_first_wait=skip_first_wait)


# ---------------------------------------------------------------------------------------
# Where the buffers live


class HostMemory:
    """Buffers in host memory: for a kernel that runs on the host or maps host memory."""

    def alloc(self, nbytes):
        return (ctypes.c_uint8 * nbytes)()

    def address(self, buf):
        return ctypes.addressof(buf)

    def upload(self, buf, data):
        ctypes.memmove(buf, data, len(data))

    def download(self, buf):
        return bytearray(buf)


class TorchMemory:
    """Buffers as uint8 tensors on a torch device ("cuda", "cuda:1", "npu", "cpu"); a
    download waits for the kernel as .cpu() does."""

    def __init__(self, device="cuda"):
        import torch
        self.torch, self.device = torch, device

    def alloc(self, nbytes):
        return self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device)

    def address(self, buf):
        return buf.data_ptr()

    def upload(self, buf, data):
        buf.copy_(self.torch.frombuffer(bytearray(data), dtype=self.torch.uint8))

    def download(self, buf):
        return bytearray(buf.cpu().numpy().tobytes())


# ---------------------------------------------------------------------------------------
# The kernel, as its builder binds it


def _array(xs):
    return (u32 * max(len(xs), 1))(*xs)


class MegaKernel:
    """One MegaKernel as its builder knows it (FR-05, FR-08, FR-09).

    name: the kernel's name in the trace (the fusion matches kernel events by it);
    aic_tasks, aiv_tasks: the tasks each AIC / AIV worker runs per call (the planner sizes
    each type's slots from its busiest worker: records_per_task x tasks, rounded up to 16,
    at most 256); stage_names, owner_labels: a list indexed by desc_id / owner_id, or a
    dict keyed by it; clock_hz and global_clock: the device counter the recorder reads
    (%globaltimer: 1 GHz, one clock for all cores); memory: where buffers are allocated;
    max_bytes: the most bytes the kernel's runtime can give a buffer (a plan that needs
    more raises BufferTooSmallError)."""

    def __init__(self, name, *, aic_tasks, aiv_tasks, stage_names=None, owner_labels=None,
                 records_per_task=3, clock_hz=1_000_000_000, global_clock=True,
                 memory=None, max_bytes=None):
        if not isinstance(name, str) or not name:
            raise UsageError(f"a MegaKernel needs a name, not {name!r}", 2)
        aic = [_u32("aic_tasks[]", t) for t in aic_tasks]
        aiv = [_u32("aiv_tasks[]", t) for t in aiv_tasks]
        meta = {"kernel": name}
        for key, names in (("stage_names", stage_names), ("owner_labels", owner_labels)):
            if names is not None:
                meta[key] = ({str(k): v for k, v in names.items()} if isinstance(names, dict)
                             else list(names))
        self.name, self.memory = name, memory or HostMemory()
        if isinstance(clock_hz, bool) or not isinstance(clock_hz, int) or clock_hz < 1:
            raise UsageError(f"clock_hz is a positive integer, not {clock_hz!r}", 2)
        self.clock_hz = clock_hz  # the runtime checks its range
        self.flags = 1 if global_clock else 0
        self.meta = json.dumps(meta, separators=(",", ":")).encode()
        lib, err, plan = _lib(), _Error(), _Plan()
        if lib.ctdp_meta_check(self.meta, len(self.meta), ctypes.byref(err)):
            _raise(err, f"MegaKernel {name!r}")
        if lib.ctdp_plan(_array(aic), len(aic), _array(aiv), len(aiv),
                         _u32("records_per_task", records_per_task, 1), ctypes.byref(plan),
                         ctypes.byref(err)):
            _raise(err, f"MegaKernel {name!r}")
        self.plan = {f: getattr(plan, f) for f, _ in _Plan._fields_}
        self.nbytes = lib.ctdp_buffer_size(plan.aic_cores, plan.aiv_cores, plan.aic_capacity,
                                           plan.aiv_capacity, len(self.meta))
        if max_bytes is not None and self.nbytes > max_bytes:
            raise BufferTooSmallError(
                f"MegaKernel {name!r}: its buffer needs {self.nbytes} bytes ({plan.aic_cores} "
                f"AIC x {plan.aic_capacity} + {plan.aiv_cores} AIV x {plan.aiv_capacity} "
                f"records and {len(self.meta)} bytes of names), max_bytes is {max_bytes}", 12)
        image = (ctypes.c_uint8 * self.nbytes)()
        if lib.ctdp_buffer_init(image, self.nbytes, self.clock_hz, self.flags, plan.aic_cores,
                                plan.aiv_cores, plan.aic_capacity, plan.aiv_capacity,
                                self.meta, len(self.meta), ctypes.byref(err)):
            _raise(err, f"MegaKernel {name!r}", cls=UsageError)  # its arguments, not a buffer
        self.image = bytes(image)  # what every sampled call's buffer starts as
        self._pool = []

    def __repr__(self):
        p = self.plan
        return (f"MegaKernel({self.name!r}: {p['aic_cores']} AIC x {p['aic_capacity']} + "
                f"{p['aiv_cores']} AIV x {p['aiv_capacity']} records, {self.nbytes} bytes)")


# ---------------------------------------------------------------------------------------
# A launch: what the builder gets per call


class Launch:
    """One call of a kernel: .config goes into the kernel's runtime config; .sampled says
    whether it records (then .buffer_address is its buffer); .done() collects it after
    the kernel ran (prof.step() does it for any launch not done)."""

    def __init__(self, kernel, profile, config, action, buf):
        self.kernel, self.config, self.action = kernel, config, ProfilerAction(action)
        self._profile, self._buf = profile, buf
        self.step, self.invocation_seq = config.step, config.invocation_seq

    @property
    def sampled(self):
        return bool(self.config.profile_enable)

    @property
    def buffer_address(self):
        return self.config.profile_buffer

    def done(self):
        if self._profile is not None:
            profile, self._profile = self._profile, None
            profile._collect(self)

    def __repr__(self):
        return (f"Launch({self.kernel.name!r} step {self.step} call {self.invocation_seq}: "
                f"{self.action.name})")


_current = None  # the profile inside its with block


def profile_buffer(kernel):
    """The hook a MegaKernel's builder calls before each launch: a Launch whose config
    samples or not as the active profile's schedule says; outside any profile, a zeroed
    config (FR-01, FR-03)."""
    if not isinstance(kernel, MegaKernel):
        raise UsageError(f"profile_buffer takes a MegaKernel, not {type(kernel).__name__}", 2)
    if _current is None:
        return Launch(kernel, None, RuntimeConfig(), ProfilerAction.NONE, None)
    return _current._launch(kernel)


# ---------------------------------------------------------------------------------------
# Windows and the profile


def _job(**kw):
    j = _Job()
    for k, v in kw.items():
        setattr(j, k, os.fsencode(v) if isinstance(v, (str, Path)) else v)
    return j


def _display(display):
    if display not in ("stage", "full"):
        raise UsageError(f"display is 'stage' or 'full', not {display!r}", 2)
    return int(display == "full")


def decode(buffer, out, *, display="stage", meta=None, pid_base=1):
    """`devprof decode`: a buffer file to a schema-v1 Chrome Trace at out."""
    err = _Error()
    job = _job(device=buffer, out=out, meta=meta, display=_display(display),
               pid_base=_u32("pid_base", pid_base, 1))
    if _lib().ctdp_decode_files(ctypes.byref(job), ctypes.byref(err)):
        _raise(err)
    return str(out)


def fuse(device, profiler_trace, out, *, kernel_name=None, skip=0, align_in_order=False,
         allow_host_align=False, display="stage", meta=None):
    """`devprof fuse`: the device buffer (or decoded JSON) into a torch.profiler trace of
    the same run, the fused trace at out. Without a device kernel event in the trace,
    HostAlignmentRefused, unless allow_host_align (FR-14)."""
    err = _Error()
    job = _job(device=device, profiler=profiler_trace, out=out, meta=meta,
               kernel_name=kernel_name, display=_display(display), skip=_u32("skip", skip),
               align_in_order=int(bool(align_in_order)),
               allow_host_align=int(bool(allow_host_align)))
    if _lib().ctdp_fuse_files(ctypes.byref(job), ctypes.byref(err)):
        _raise(err)
    return str(out)


def validate(buffer):
    """A buffer file's (or bytes') invocations, records and drops, or the error raised."""
    data = Path(buffer).read_bytes() if isinstance(buffer, (str, Path)) else bytes(buffer)
    err, s = _Error(), _Summary()
    if _lib().ctdp_validate(data, len(data), ctypes.byref(s), ctypes.byref(err)):
        _raise(err, str(buffer) if isinstance(buffer, (str, Path)) else None)
    return {"invocations": s.invocations, "records": s.records, "dropped": s.dropped}


class Window:
    """One saved sampling window of one kernel: its buffer file (.path) and what it holds.
    complete is False for a window cut short: the profile ended first, or it reached
    4,096 invocations (MAX_INVOCATIONS) and goes on in the next file."""

    def __init__(self, kernel, rank, index, path, invocations, records, dropped, complete):
        self.kernel, self.rank, self.index, self.path = kernel, rank, index, path
        self.invocations = invocations  # [(step, invocation_seq)], in call order
        self.steps = sorted({s for s, _ in invocations})
        self.records, self.dropped, self.complete = records, dropped, complete

    def export_chrome_trace(self, path, display="stage"):
        return decode(self.path, path, display=display)

    def fuse(self, profiler_trace, path, **kw):
        """fuse() of this window; the kernel's name filters the trace's kernel events."""
        kw.setdefault("kernel_name", self.kernel)
        return fuse(self.path, profiler_trace, path, **kw)

    def __repr__(self):
        return (f"Window({self.kernel!r} rank {self.rank} #{self.index}: steps {self.steps}, "
                f"{len(self.invocations)} invocations, {self.records} records, {self.dropped} "
                f"dropped{'' if self.complete else ', cut short'}: {self.path})")


def _rank():
    for var in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0


class _Open:
    """A window being written: kept buffers are appended to its .part file as they come,
    so memory stays bounded; it is renamed when saved."""

    def __init__(self, path):
        self.path, self.part = path, path.with_name(path.name + ".part")
        self.f = open(self.part, "wb")
        self.invocations, self.records, self.dropped = [], 0, 0


class Profile:
    """What mega_kernel_profile() returns: step() after each training step; .windows are
    the saved ones, in order."""

    def __init__(self, sched, out_dir, on_trace_ready, max_per_step, rank):
        if sched is None:
            sched = Schedule(active=U32)  # torch's default: record every step, save at exit
        if not isinstance(sched, Schedule):
            raise UsageError("schedule= takes commtrace.devprof.schedule(...) (the arguments "
                             "of torch.profiler.schedule), not " + type(sched).__name__, 2)
        self.schedule, self.out_dir, self.on_trace_ready = sched, Path(out_dir), on_trace_ready
        self.max_per_step = _u32("max_per_step", max_per_step)
        self.rank = _rank() if rank is None else _u32("rank", rank)
        self.step_num, self.windows = 0, []
        self._sessions, self._open, self._pending, self._count = {}, {}, [], {}

    def __enter__(self):
        global _current
        if _current is not None:
            raise UsageError("a mega_kernel_profile is already active in this process", 2)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        _current = self
        return self

    def __exit__(self, *exc):
        global _current
        try:
            self._collect_pending()
        finally:
            _current = None
            for name in list(self._open):
                self._save(name, complete=False)
        return False

    def step(self):
        """profiler.step(): the step is over. Collects its launches, saves the windows
        whose last active step it was, and moves every kernel's session on."""
        self._collect_pending()
        if self.schedule(self.step_num) == ProfilerAction.RECORD_AND_SAVE:
            for name in list(self._open):
                self._save(name, complete=True)
        lib = _lib()
        for s in self._sessions.values():
            lib.ctdp_session_step(ctypes.byref(s))
        self.step_num += 1

    def _launch(self, kernel):
        lib = _lib()
        s = self._sessions.get(kernel.name)
        if s is None:
            s = self._sessions[kernel.name] = _Session()
            lib.ctdp_session_init(ctypes.byref(s), ctypes.byref(self.schedule._c),
                                  self.max_per_step, self.step_num)
        buf = kernel._pool.pop() if kernel._pool else kernel.memory.alloc(kernel.nbytes)
        cfg = RuntimeConfig()
        action = lib.ctdp_session_configure(ctypes.byref(s), ctypes.byref(cfg),
                                            kernel.memory.address(buf))
        if action == ProfilerAction.NONE:
            kernel._pool.append(buf)
            return Launch(kernel, None, cfg, action, None)
        kernel.memory.upload(buf, kernel.image)
        launch = Launch(kernel, self, cfg, action, buf)
        self._pending.append(launch)
        return launch

    def _collect_pending(self):
        while self._pending:
            self._pending[0].done()

    def _collect(self, launch):
        self._pending.remove(launch)
        kernel, buf = launch.kernel, launch._buf
        try:
            data = kernel.memory.download(buf)
        finally:
            kernel._pool.append(buf)
        if launch.action == ProfilerAction.WARMUP:
            return  # sampled for the first touch only
        what = f"{kernel.name} step {launch.step} call {launch.invocation_seq}"
        if len(data) < kernel.nbytes:
            raise BufferTooSmallError(f"{what}: {len(data)} bytes came back, the buffer has "
                                      f"{kernel.nbytes}", 12)
        c, err, s = (ctypes.c_uint8 * len(data)).from_buffer(data), _Error(), _Summary()
        if _lib().ctdp_buffer_collect(c, len(data), ctypes.byref(launch.config), ctypes.byref(s),
                                      ctypes.byref(err)):
            if err.code == 19:
                _raise(err, f"{what}: sampled, yet the kernel wrote no record (does it pass "
                       "launch.config to its recorder?)")
            _raise(err, what)
        w = self._open.get(kernel.name)
        if w is None:
            n = self._count[kernel.name] = self._count.get(kernel.name, -1) + 1
            w = self._open[kernel.name] = _Open(
                self.out_dir / f"{kernel.name}.rank{self.rank}.window{n}.bin")
        w.f.write(data)
        w.invocations.append((launch.step, launch.invocation_seq))
        w.records += s.records
        w.dropped += s.dropped
        if len(w.invocations) >= MAX_INVOCATIONS:
            self._save(kernel.name, complete=False)

    def _save(self, name, complete):
        w = self._open.pop(name)
        w.f.close()
        os.replace(w.part, w.path)
        win = Window(name, self.rank, self._count[name], str(w.path), w.invocations, w.records,
                     w.dropped, complete)
        self.windows.append(win)
        if self.on_trace_ready is not None:
            self.on_trace_ready(win)


def mega_kernel_profile(*, schedule=None, out_dir=".", on_trace_ready=None, max_per_step=0,
                        rank=None):
    """Seed 004's mega_kernel_profile(): a context; .step() after each training step.

    schedule: devprof.schedule(...) (default: every step sampled, one window saved at the
    end, as torch.profiler without a schedule); out_dir: where window files go, named
    <kernel>.rank<R>.window<N>.bin; on_trace_ready(window): called as each is saved;
    max_per_step: sample at most that many calls of a kernel per step (0: all); rank:
    default from RANK (torchrun), OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID."""
    return Profile(schedule, out_dir, on_trace_ready, max_per_step, rank)


def chrome_trace_handler(dir_name, display="stage"):
    """An on_trace_ready that decodes each window to dir_name/<window file>.json, as
    torch.profiler.tensorboard_trace_handler writes each trace."""
    _display(display)
    Path(dir_name).mkdir(parents=True, exist_ok=True)

    def handler(window):
        window.export_chrome_trace(Path(dir_name) / (Path(window.path).stem + ".json"),
                                   display=display)
    return handler
