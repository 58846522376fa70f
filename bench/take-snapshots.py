# SPDX-License-Identifier: GPL-2.0-only
"""The bench's cross-architecture reference snapshots, taken by gdb in a verify fixture under qemu.

Run by take-snapshots.sh (gdb-multiarch, connected to `qemu-ARCH -g PORT verify_zoo run MAPS`):

    BENCH_ORACLE=test/oracle BENCH_OUT=DIR BENCH_ARCH=arm64 BENCH_MAPS=MAPS \
        gdb-multiarch -q -nx -batch ... -ex 'target remote ...' -x bench/take-snapshots.py

writes DIR/ARCH-NAME.snapshot.json (dwunw-snapshot-1) and DIR/ARCH-NAME.frames.json (gdb's
frames: the oracle) with test/oracle/gdb_snapshot.py, for the stops:
    qsort    zoo_leaf <- zoo_qsort_cmp <- glibc's qsort <- zoo_qsort <- zoo_run <- main ...
    recurse  zoo_leaf <- zoo_recurse x 25 <- zoo_run <- main ...  (~30 frames)
and prints BENCH_SNAPSHOT NAME for each one written.
"""
import os
import sys

import gdb

sys.path.insert(0, os.environ["BENCH_ORACLE"])
import gdb_frames  # noqa: E402
import gdb_snapshot  # noqa: E402


class Stop(gdb.Breakpoint):
    """A breakpoint that stops only when the newest frame's caller is `caller` (any if None)."""

    def __init__(self, spec, caller):
        super().__init__(spec, internal=True)
        self.caller = caller

    def stop(self):
        if self.caller is None:
            return True
        older = gdb.newest_frame().older()
        return older is not None and older.name() == self.caller


def main():
    out, arch, maps = os.environ["BENCH_OUT"], os.environ["BENCH_ARCH"], os.environ["BENCH_MAPS"]
    gdb_frames.setup()
    gdb.execute("handle all nostop noprint pass", to_string=True)
    for name, spec, caller in (("qsort", "zoo_leaf", "zoo_qsort_cmp"), ("recurse", "zoo_leaf", "zoo_recurse")):
        bp = Stop(spec, caller)
        gdb.execute("continue", to_string=True)
        if not gdb.selected_inferior().pid or not gdb.selected_inferior().threads():
            gdb.write("BENCH_ERROR %s: the program ended before the stop\n" % name)
            return
        gdb_snapshot.write_snapshot(os.path.join(out, "%s-%s.snapshot.json" % (arch, name)), maps)
        gdb.write("BENCH_SNAPSHOT %s\n" % name)
        bp.delete()
    gdb.execute("kill", to_string=True)


try:
    main()
except Exception as e:  # noqa: BLE001  (reported; the script's caller decides)
    gdb.write("BENCH_ERROR %s\n" % e)
    if gdb.selected_inferior().pid:
        gdb.execute("kill", to_string=True)
