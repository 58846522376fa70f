#!/usr/bin/env bash
# take-snapshots.sh ARCH PROGRAM OUTDIR: the bench's reference snapshots of a verify fixture
# (fixtures/<arch>/build/verify_zoo-*) under qemu-user, taken by gdb-multiarch through qemu's
# gdbstub with take-snapshots.py. Writes OUTDIR/ARCH-*.snapshot.json and *.frames.json.
# Exit status 0 when they were written; otherwise 1 and one line on stderr saying why
# (the bench then runs without them).
set -u
arch=$1 prog=$(readlink -f "$2") out=$3
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
case $arch in
  arm64)  qemu=qemu-aarch64 tri=aarch64-linux-gnu cpu=(-cpu cortex-a57) ;;
  mips32) qemu=qemu-mipsel tri=mipsel-linux-gnu cpu=() ;;
  *) echo "take-snapshots: unknown arch $arch" >&2; exit 1 ;;
esac
for tool in "$qemu" gdb-multiarch timeout; do
  command -v "$tool" >/dev/null || { echo "bench: $arch reference snapshots not taken: $tool is missing" >&2; exit 1; }
done
mkdir -p "$out"
rm -f "$out/$arch"-*.json
maps="$out/$arch.maps"
log="$out/$arch.log"
: >"$log"
# The gdbstub takes one connection: gdb is started directly (it retries while qemu starts).
# Another port on a second try, should the first be taken.
for try in 1 2; do
  port=$(( 20000 + (RANDOM % 20000) ))
  "$qemu" "${cpu[@]}" -L "/usr/$tri" -g "$port" "$prog" run "$maps" >/dev/null 2>>"$log" &
  qpid=$!
  BENCH_ORACLE="$here/../test/oracle" BENCH_OUT="$out" BENCH_ARCH="$arch" BENCH_MAPS="$maps" \
    timeout -k 5 60 gdb-multiarch -q -nx -batch -iex "set sysroot /usr/$tri" -iex 'set debuginfod enabled off' \
      -iex 'set pagination off' -ex "file $prog" -ex "target remote 127.0.0.1:$port" \
      -x "$here/take-snapshots.py" >>"$log" 2>&1
  kill "$qpid" 2>/dev/null
  wait "$qpid" 2>/dev/null
  # gdb reads the libraries under its sysroot: the guest must have loaded those very files
  foreign=$(awk -v root="/usr/$tri/" '$6 ~ /\.so(\.[0-9.]+)?$/ && index($6, root) != 1 { print $6; exit }' "$maps" 2>/dev/null)
  if [ -n "$foreign" ]; then
    rm -f "$out/$arch"-*.json
    echo "bench: $arch reference snapshots not taken: the guest loaded $foreign, outside gdb's sysroot /usr/$tri (a host-installed C library of that architecture? doc/debugging.md §5)" >&2
    exit 1
  fi
  [ "$(grep -c '^BENCH_SNAPSHOT' "$log")" -eq 2 ] && exit 0
  rm -f "$out/$arch"-*.json
done
echo "bench: $arch reference snapshots not taken: $(grep -m1 -E 'BENCH_ERROR|rror' "$log" || echo 'see '"$log")" >&2
exit 1
