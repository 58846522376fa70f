# SPDX-License-Identifier: GPL-2.0-only
"""gdb as the stack oracle: the frames gdb finds for every thread, as JSON.

Attached to a live process (the usual way; always under `timeout`):

    timeout -k 5 60 gdb -q -nx -batch -p PID -x test/oracle/gdb_frames.py

prints one line

    DWUNW_FRAMES {"pid": N, "threads": {"TID": [{"pc": "0x...", "type": "normal"|"sigtramp",
                  "name": "func"|null}, ...], ...}, "errors": {"TID": "message"}}

At a breakpoint (`source test/oracle/gdb_frames.py` while stopped) it prints the same line for
the current stop. Either way it defines the command `dwunw-frames [FILE]` (all threads; JSON to
FILE, or the DWUNW_FRAMES line), for later stops; imported (by gdb_snapshot.py) it only defines
the command and the functions below. Only NORMAL and SIGTRAMP frames are kept: inline and tail-call frames are gdb's
reconstruction from debug information, which call-frame information cannot give. The pc of a
frame other than the newest is gdb's resume address (the return address, or the exact
interrupted pc after a signal trampoline): what an unwinder reports. Nothing here depends on
the architecture.
"""
import json

import gdb

MARKER = "DWUNW_FRAMES "
# A cycle in gdb's own unwinding must not hang the oracle.
MAX_FRAMES = 4096

SETTINGS = (
    "set pagination off",
    "set confirm off",
    "set width 0",
    "set backtrace past-main on",
    "set backtrace past-entry on",
    "set backtrace limit unlimited",
    "set print frame-arguments none",
    "set print entry-values no",
)


def setup():
    """The settings the oracle relies on (see the module docstring)."""
    for cmd in SETTINGS:
        gdb.execute(cmd, to_string=True)


def _addr(value):
    mask = (1 << (8 * gdb.lookup_type("void").pointer().sizeof)) - 1
    return int(value) & mask


def frames_of_thread(thread):
    """[{pc, type, name}] from the newest frame outward, for one gdb.InferiorThread.

    Returns (frames, error): error is gdb's message when the walk ended on an error.
    """
    thread.switch()
    frames = []
    error = None
    try:
        frame = gdb.newest_frame()
    except gdb.error as e:
        return frames, str(e)
    last = frame
    while frame is not None and len(frames) < MAX_FRAMES:
        kind = frame.type()
        if kind in (gdb.NORMAL_FRAME, gdb.SIGTRAMP_FRAME):
            try:
                name = frame.name()
            except gdb.error:
                name = None
            frames.append(
                {
                    "pc": hex(_addr(frame.pc())),
                    "type": "sigtramp" if kind == gdb.SIGTRAMP_FRAME else "normal",
                    "name": name,
                }
            )
        last = frame
        try:
            frame = frame.older()
        except gdb.error as e:
            error = str(e)
            break
    if frame is not None and error is None:
        error = "more than %d frames" % MAX_FRAMES
    elif frame is None and error is None:
        # gdb stopped on its own: keep its reason unless it is the normal end of the stack
        reason = last.unwind_stop_reason()
        if reason not in (gdb.FRAME_UNWIND_NO_REASON, gdb.FRAME_UNWIND_OUTERMOST):
            error = gdb.frame_stop_reason_string(reason)
    return frames, error


def tid_of(thread):
    """The kernel thread id (LWP) of a gdb.InferiorThread."""
    pid, lwp, _ = thread.ptid
    return lwp or pid


def all_frames():
    """{"pid", "threads": {tid: frames}, "errors": {tid: message}} for the selected inferior."""
    inferior = gdb.selected_inferior()
    selected = gdb.selected_thread()
    threads = {}
    errors = {}
    for thread in sorted(inferior.threads(), key=tid_of):
        frames, error = frames_of_thread(thread)
        threads[str(tid_of(thread))] = frames
        if error:
            errors[str(tid_of(thread))] = error
    if selected is not None and selected.is_valid():
        selected.switch()
    return {"pid": inferior.pid, "threads": threads, "errors": errors}


class FramesCommand(gdb.Command):
    """dwunw-frames [FILE]: every thread's NORMAL and SIGTRAMP frames as JSON, to FILE or stdout."""

    def __init__(self):
        super().__init__("dwunw-frames", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        result = all_frames()
        if arg.strip():
            with open(arg.strip(), "w") as f:
                json.dump(result, f)
        else:
            gdb.write(MARKER + json.dumps(result) + "\n")
            gdb.flush()


FramesCommand()
setup()

if __name__ == "__main__":
    # Loaded with -x after -p PID, or sourced at a stop: dump (gdb -batch then detaches).
    if gdb.selected_inferior().pid != 0:
        gdb.execute("dwunw-frames")
