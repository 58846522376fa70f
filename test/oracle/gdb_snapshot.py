# SPDX-License-Identifier: GPL-2.0-only
"""Snapshots for `dwunw unwind-snapshot`, each with gdb's frames as the oracle, at breakpoints.

Driven (always under `timeout`):

    DWUNW_SNAPSHOT_CONFIG=config.json timeout -k 5 60 gdb -q -nx -batch -x test/oracle/gdb_snapshot.py

config.json:
    {"program": "/abs/prog", "args": ["scenario"], "out": "/abs/dir",
     "breakpoints": [{"name": "cmp_entry", "spec": "*zoo_qsort_cmp"},
                     {"name": "plt", "module_addr": "0x2030", "hit": 1}, ...],
     "maps_file": null}
  spec         a gdb location (break SPEC), set once the program is loaded (starti)
  module_addr  an address of the program's ELF file; the load bias is added (PIE)
  hit          take the snapshot at this hit of the breakpoint (default 1), then delete it
  after        set this breakpoint only once the named one has been taken (a shared library's
               function after it is loaded; a function that also runs earlier, e.g. _dl_fixup)
  steps        {"enter": 0|1, "max": N}: instead of one snapshot, one per instruction: after
               `enter` stepi (into a jump's target), nexti (over calls) while the newest frame's
               function stays the same, at most N; each step is one "thread" of
               OUT/NAME.snapshot.json (tid = step number from 1), the frames likewise
  maps_file    read the maps text from this file instead of /proc/PID/maps (qemu-user)
  at_expr      instead of spec/module_addr: an expression evaluated when the breakpoint is set
               (with `after`: at the stop that armed it), whose value is the address, e.g.
               "$x30" / "$ra" / "*(void **)$sp" at a handler's entry: its signal trampoline
  signal       instead of a breakpoint: stop when the program receives this signal ("SIGSEGV",
               "SIGABRT"), before its handler runs; the snapshot is that of the faulting or
               signalled instruction
Remote mode (qemu-user's gdbstub; gdb-multiarch): the config also has
  remote       "HOST:PORT" of `qemu-ARCH -g PORT PROG ARGS` started by the caller (the program
               and args above are then only used for the symbols and the load bias)
  sysroot      the guest's root for shared libraries (/usr/aarch64-linux-gnu, ...)
and maps_file is the file the program writes its own /proc/self/maps to. The load bias then
comes from the auxiliary vector (AT_ENTRY), and gdb connects instead of running the program.
The program runs from its first instruction; at each wanted stop the script writes
  OUT/NAME.snapshot.json  the selected thread's registers and stack, in dwunw-snapshot-1 format
                          (with "vdso": the bytes of the [vdso] mapping, when the maps have one,
                          and "memory": [{"start", "bytes"}] of anonymous executable mappings,
                          such as qemu-user's signal trampoline page)
  OUT/NAME.frames.json    gdb's frames of that thread ({"pid", "threads": {tid: frames}}, as
                          gdb_frames.py prints them)
and continues; when every breakpoint is done (or the program exits) it kills the program and
writes OUT/index.json: {"snapshots": [{"name", "tid", "pc", "snapshot", "frames"}],
"missing": [names never reached], "errors": [...]}.

Sourced at a breakpoint, it defines `dwunw-snapshot FILE` (FILE and FILE.frames.json for the
selected thread). Registers come from gdb's "general" register group and are mapped to DWARF
numbers with the table of the architecture gdb reports; nothing else depends on the arch.
"""
import base64
import json
import os
import sys

import gdb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gdb_frames  # noqa: E402  (settings, frame walker)

FORMAT = "dwunw-snapshot-1"
STACK_CAP = 256 * 1024
VDSO_CAP = 1 << 20  # dwunw does not believe a larger vDSO


def _seq(names, first):
    return {n: first + i for i, n in enumerate(names)}


# gdb's register names -> DWARF register numbers, per architecture (dwunw's arch name, table,
# stack-pointer name). Keys are prefixes of gdb's Architecture.name().
ARCHES = (
    (
        "i386:x86-64",
        "x86_64",
        dict(
            rax=0, rdx=1, rcx=2, rbx=3, rsi=4, rdi=5, rbp=6, rsp=7,
            **_seq(["r%d" % i for i in range(8, 16)], 8), rip=16,
        ),
        "rsp",
    ),
    ("aarch64", "arm64", dict(**_seq(["x%d" % i for i in range(31)], 0), sp=31), "sp"),
    (
        "mips",
        "mips32",
        dict(
            **_seq(["zero", "at", "v0", "v1", "a0", "a1", "a2", "a3"], 0),
            **_seq(["t%d" % i for i in range(8)], 8),
            **_seq(["s%d" % i for i in range(8)], 16),
            t8=24, t9=25, k0=26, k1=27, gp=28, sp=29, s8=30, fp=30, ra=31,
        ),
        "sp",
    ),
)


def arch_of(frame):
    name = frame.architecture().name()
    for prefix, arch, table, sp in ARCHES:
        if name.startswith(prefix):
            return arch, table, sp
    raise gdb.GdbError("dwunw-snapshot: no DWARF register table for gdb architecture %s" % name)


def _mask():
    return (1 << (8 * gdb.lookup_type("void").pointer().sizeof)) - 1


def read_maps(pid, maps_file=None):
    with open(maps_file or "/proc/%d/maps" % pid) as f:
        return f.read()


def mapping_end(maps_text, addr):
    """End of the mapping that contains addr, or None."""
    for line in maps_text.splitlines():
        rng = line.split(None, 1)[0] if line.strip() else ""
        if "-" not in rng:
            continue
        lo, hi = (int(x, 16) for x in rng.split("-"))
        if lo <= addr < hi:
            return hi
    return None


def vdso_range(maps_text):
    """(start, end) of the [vdso] mapping, or None."""
    for line in maps_text.splitlines():
        f = line.split()
        if len(f) >= 6 and f[5] == "[vdso]" and "-" in f[0]:
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            return lo, hi
    return None


def read_vdso(inferior, maps_text):
    """The bytes of the [vdso] mapping (inferior memory), or None when there is none or it is unreadable."""
    rng = vdso_range(maps_text)
    if rng is None or not 0 < rng[1] - rng[0] <= VDSO_CAP:
        return None
    try:
        return bytes(inferior.read_memory(rng[0], rng[1] - rng[0]))
    except gdb.MemoryError:
        return None


MEMORY_CAP = 64 * 1024  # per anonymous executable mapping


def read_anon_code(inferior, maps_text):
    """[{"start", "bytes"}] of the anonymous executable mappings (qemu-user's signal trampoline
    page, JIT code): code that exists in no file, which an offline unwinder must see to recognise
    a trampoline by its instructions."""
    out = []
    for line in maps_text.splitlines():
        f = line.split()
        if len(f) < 5 or "-" not in f[0] or "x" not in f[1] or len(f) > 5:
            continue
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        if not 0 < hi - lo <= MEMORY_CAP:
            continue
        try:
            data = bytes(inferior.read_memory(lo, hi - lo))
        except gdb.MemoryError:
            continue
        out.append({"start": hex(lo), "bytes": base64.b64encode(data).decode("ascii")})
    return out


def read_stack(inferior, sp, end):
    """Bytes from sp up to end (at most STACK_CAP); stops early at an unreadable page."""
    size = min(end - sp, STACK_CAP)
    try:
        return bytes(inferior.read_memory(sp, size))
    except gdb.MemoryError:
        pass
    out = b""
    addr = sp
    while addr < sp + size:
        chunk = min(4096 - (addr % 4096), sp + size - addr)
        try:
            out += bytes(inferior.read_memory(addr, chunk))
        except gdb.MemoryError:
            break
        addr += chunk
    return out


def snapshot(maps_file=None):
    """(snapshot dict, frames dict) for the selected thread, at its newest frame."""
    inferior = gdb.selected_inferior()
    thread = gdb.selected_thread()
    tid = gdb_frames.tid_of(thread)
    frame = gdb.newest_frame()
    arch, table, sp_name = arch_of(frame)
    mask = _mask()
    regs = {}
    for reg in frame.architecture().registers("general"):
        num = table.get(reg.name)
        if num is None:
            continue
        try:
            value = frame.read_register(reg)
            if value.is_optimized_out:
                continue
            regs[num] = int(value) & mask
        except (gdb.error, ValueError):
            continue
    sp = regs.get(table[sp_name])
    maps = read_maps(inferior.pid, maps_file)
    stack = b""
    if sp is not None:
        end = mapping_end(maps, sp)
        if end is not None:
            stack = read_stack(inferior, sp, end)
    snap = {
        "format": FORMAT,
        "arch": arch,
        "pid": inferior.pid,
        "threads": [
            {
                "tid": tid,
                "pc": hex(int(frame.pc()) & mask),
                "regs": {str(n): hex(v) for n, v in sorted(regs.items())},
                "stack_start": hex(sp if sp is not None else 0),
                "stack": base64.b64encode(stack).decode("ascii"),
            }
        ],
        "maps": maps,
        "sysroot": None,
    }
    vdso = read_vdso(inferior, maps)
    if vdso:
        snap["vdso"] = base64.b64encode(vdso).decode("ascii")
    memory = read_anon_code(inferior, maps)
    if memory:
        snap["memory"] = memory
    frames, error = gdb_frames.frames_of_thread(thread)
    oracle = {"pid": inferior.pid, "threads": {str(tid): frames}, "errors": {str(tid): error} if error else {}}
    return snap, oracle


def write_snapshot(path, maps_file=None):
    snap, oracle = snapshot(maps_file)
    with open(path, "w") as f:
        json.dump(snap, f)
    frames_path = path + ".frames.json"
    if path.endswith(".snapshot.json"):
        frames_path = path[: -len(".snapshot.json")] + ".frames.json"
    with open(frames_path, "w") as f:
        json.dump(oracle, f)
    return snap, frames_path


def write_steps(path, steps, enter=0, maps_file=None):
    """Snapshots at successive instructions (see `steps` above) into one file: step i is thread i."""
    for _ in range(enter):
        gdb.execute("stepi", to_string=True)
    func = gdb.newest_frame().name()
    snap = None
    oracle = {"pid": gdb.selected_inferior().pid, "threads": {}, "errors": {}}
    for i in range(1, steps + 1):
        one, frames = snapshot(maps_file)
        th = one["threads"][0]
        real_tid = str(th["tid"])
        th["tid"] = i
        if snap is None:
            snap = one
        else:
            snap["threads"].append(th)
        oracle["threads"][str(i)] = frames["threads"][real_tid]
        if real_tid in frames["errors"]:
            oracle["errors"][str(i)] = frames["errors"][real_tid]
        gdb.execute("nexti", to_string=True)
        if not gdb.selected_inferior().pid or gdb.newest_frame().name() != func:
            break
    with open(path, "w") as f:
        json.dump(snap, f)
    frames_path = path[: -len(".snapshot.json")] + ".frames.json"
    with open(frames_path, "w") as f:
        json.dump(oracle, f)
    return snap, frames_path


class SnapshotCommand(gdb.Command):
    """dwunw-snapshot FILE: the selected thread's snapshot to FILE, gdb's frames beside it."""

    def __init__(self):
        super().__init__("dwunw-snapshot", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        if not arg.strip():
            raise gdb.GdbError("usage: dwunw-snapshot FILE")
        write_snapshot(arg.strip())


SnapshotCommand()


# ---- driven mode ----------------------------------------------------------------------------


class WantedBreakpoint(gdb.Breakpoint):
    """Stops only at hit number `want`."""

    def __init__(self, spec, name, want):
        super().__init__(spec, internal=False)
        self.dwunw_name = name
        self.want = want
        self.seen = 0

    def stop(self):
        self.seen += 1
        return self.seen == self.want


def load_bias(pid, program):
    """Load bias of the program: 0 for ET_EXEC, else the start of its offset-0 mapping."""
    with open(program, "rb") as f:
        ehdr = f.read(18)
    if int.from_bytes(ehdr[16:18], "little" if ehdr[5] == 1 else "big") == 2:  # ET_EXEC
        return 0
    real = os.path.realpath(program)
    for line in read_maps(pid).splitlines():
        f = line.split()
        if len(f) >= 6 and f[5] == real and int(f[2], 16) == 0:
            return int(f[0].split("-")[0], 16)
    raise gdb.GdbError("dwunw-snapshot: %s is not mapped" % real)


def load_bias_auxv(program):
    """Load bias of the program from the inferior's AT_ENTRY (remote targets: no /proc)."""
    with open(program, "rb") as f:
        head = f.read(64)
    little = head[5] == 1
    order = "little" if little else "big"
    if int.from_bytes(head[16:18], order) == 2:  # ET_EXEC
        return 0
    e_entry = int.from_bytes(head[24:32] if head[4] == 2 else head[24:28], order)
    for line in gdb.execute("info auxv", to_string=True).splitlines():
        f = line.split()
        if len(f) >= 2 and f[1] == "AT_ENTRY":
            return int(f[-1], 16) - e_entry
    raise gdb.GdbError("dwunw-snapshot: no AT_ENTRY in the auxiliary vector")


class SignalStop:
    """A wanted stop at a signal: quacks like WantedBreakpoint for drive()."""

    def __init__(self, signal, name):
        self.signal = signal
        self.dwunw_name = name
        self.dwunw_steps = None
        self.enabled = True
        gdb.execute("handle %s stop print" % signal, to_string=True)

    def is_valid(self):
        return True

    def delete(self):
        gdb.execute("handle %s nostop noprint" % self.signal, to_string=True)


def drive(config_path):
    with open(config_path) as f:
        cfg = json.load(f)
    out = cfg["out"]
    os.makedirs(out, exist_ok=True)
    index = {"snapshots": [], "missing": [], "errors": []}
    stops = []

    def on_stop(event):
        stops.append(event)

    # a run whose gdb frames are not the oracle (code gdb cannot unwind): frame 0 is enough
    if cfg.get("max_frames"):
        gdb_frames.MAX_FRAMES = int(cfg["max_frames"])
    gdb.events.stop.connect(on_stop)
    gdb.execute("set startup-with-shell off")
    gdb.execute("set breakpoint pending on")
    # The fixtures signal themselves: let every signal through without stopping.
    gdb.execute("handle all nostop noprint pass", to_string=True)
    if cfg.get("sysroot"):
        gdb.execute("set sysroot " + cfg["sysroot"], to_string=True)
    gdb.execute("file " + cfg["program"], to_string=True)
    if cfg.get("remote"):
        gdb.execute("target remote " + cfg["remote"], to_string=True)
        bias = load_bias_auxv(cfg["program"])
    else:
        gdb.execute("set args " + " ".join(cfg.get("args", [])))
        gdb.execute("starti", to_string=True)
        bias = load_bias(gdb.selected_inferior().pid, cfg["program"])
    pending = {}
    waiting = [bp for bp in cfg["breakpoints"] if bp.get("after")]

    def arm(bp):
        spec = bp.get("spec")
        try:
            if "signal" in bp:
                pending[bp["name"]] = SignalStop(bp["signal"], bp["name"])
                return
            if "module_addr" in bp:
                spec = "*0x%x" % (bias + int(bp["module_addr"], 16))
            elif "at_expr" in bp:
                spec = "*0x%x" % (int(gdb.parse_and_eval(bp["at_expr"])) & _mask())
            pending[bp["name"]] = WantedBreakpoint(spec, bp["name"], int(bp.get("hit", 1)))
            pending[bp["name"]].dwunw_steps = bp.get("steps")
        except gdb.error as e:
            index["errors"].append("%s: break %s: %s" % (bp["name"], spec or bp.get("at_expr") or bp.get("signal"), e))

    for bp in cfg["breakpoints"]:
        if not bp.get("after"):
            arm(bp)
    while pending:
        stops.clear()
        try:
            gdb.execute("continue", to_string=True)
        except gdb.error as e:
            index["errors"].append("continue: %s" % e)
            break
        if not gdb.selected_inferior().pid or not gdb.selected_inferior().threads():
            break  # the program exited
        hit = [
            b
            for ev in stops
            if isinstance(ev, gdb.BreakpointEvent)
            for b in ev.breakpoints
            if isinstance(b, WantedBreakpoint) and b.dwunw_name in pending
        ]
        if not hit:
            hit = [
                b
                for ev in stops
                if isinstance(ev, gdb.SignalEvent)
                for b in pending.values()
                if isinstance(b, SignalStop) and b.signal == ev.stop_signal
            ][:1]
        if not hit:
            if stops and isinstance(stops[-1], gdb.SignalEvent):
                continue
            index["errors"].append("unexpected stop: %r" % (stops,))
            break
        for b in hit:
            name = b.dwunw_name
            path = os.path.join(out, name + ".snapshot.json")
            try:
                steps = b.dwunw_steps
                if steps:
                    # nothing else may stop the stepping
                    others = [x for x in pending.values() if x is not b and x.enabled]
                    for x in others:
                        x.enabled = False
                    try:
                        snap, frames_path = write_steps(path, int(steps.get("max", 500)), int(steps.get("enter", 0)), cfg.get("maps_file"))
                    finally:
                        for x in others:
                            if x.is_valid():
                                x.enabled = True
                else:
                    snap, frames_path = write_snapshot(path, cfg.get("maps_file"))
                th = snap["threads"][0]
                index["snapshots"].append(
                    {"name": name, "tid": th["tid"], "pc": th["pc"], "steps": len(snap["threads"]),
                     "snapshot": path, "frames": frames_path}
                )
            except Exception as e:  # noqa: BLE001  (reported, the run goes on)
                index["errors"].append("%s: %s" % (name, e))
            del pending[name]
            b.delete()
            for bp in [w for w in waiting if w["after"] == name]:
                waiting.remove(bp)
                arm(bp)
    index["missing"] = sorted(list(pending) + [w["name"] for w in waiting])
    if gdb.selected_inferior().pid:
        gdb.execute("kill", to_string=True)
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f)
    gdb.write("DWUNW_SNAPSHOTS %d written, %d missing\n" % (len(index["snapshots"]), len(index["missing"])))


if __name__ == "__main__" and os.environ.get("DWUNW_SNAPSHOT_CONFIG"):
    try:
        drive(os.environ["DWUNW_SNAPSHOT_CONFIG"])
    except Exception as e:  # noqa: BLE001
        gdb.write("DWUNW_SNAPSHOT_ERROR %s\n" % e)
        if gdb.selected_inferior().pid:
            gdb.execute("kill", to_string=True)
        raise
