// Cross builds of libdwunw (native/Makefile, CROSS=aarch64-linux-gnu- and CROSS=mipsel-linux-gnu-):
//   - libdwunw.a builds with the cross compiler (-Werror), its objects are of the target's ELF
//     machine and class;
//   - the unit tests that need no libelf (test_cfi, test_expr, test_bytes) link statically for
//     the target and pass under qemu-user (`make cross-check`): the CFI parser, the CFA program
//     interpreter, the table and the expression machine on a 64-bit and a 32-bit target;
//   - every header the cross build reads comes from the cross compiler, the cross C library, the
//     source tree, or is one of the Multi-Arch: same libelf/zlib/zstd/lzma headers the Makefile
//     lets through (nothing else from the host's /usr/include).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { ElfFile } from '../lib/verify-elf.js';
import { root, type Run, run as runToEnd } from './helpers.js';

const targets = [
  { cross: 'aarch64-linux-gnu-', machine: 183, is64: true },
  { cross: 'mipsel-linux-gnu-', machine: 8, is64: false },
];
// test/kernels.test.ts builds the same cross memleaks: one make at a time in build/<triplet>
const crossLock = join(root, 'build', '.cross.lock');
const allowed = /^\/usr\/include\/(libelf\.h|gelf\.h|nlist\.h|elfutils\/[^/]+|zlib\.h|zconf\.h|zstd\.h|lzma\.h|lzma\/[^/]+)$/;

/** A program to its end (make, the table tools, qemu): as long as the test file may take. */
const run = (cmd: string, args: string[]): Promise<Run> => runToEnd(cmd, args, { timeoutMs: 900_000 });

for (const x of targets) {
  const triplet = x.cross.slice(0, -1);
  t.test(`CROSS=${x.cross}`, async (t) => {
    if (!existsSync(`/usr/bin/${x.cross}gcc`)) {
      t.fail(`no ${x.cross}gcc (scripts/ensure-deps installs it)`);
      return;
    }
    const b = await run('flock', [crossLock, 'make', '-s', '-j2', '-C', 'native', `CROSS=${x.cross}`, 'lib', 'cross-check']);
    t.equal(b.status, 0, `make -C native CROSS=${x.cross} lib cross-check${b.status !== 0 ? `: ${b.stderr.slice(-1500)}` : ''}`);
    const lines = b.stdout.split('\n').filter((l) => /: exit \d+, \d+ ok, \d+ not ok$/.test(l));
    t.equal(lines.length, 3, `three unit tests ran under qemu (${lines.length})`);
    for (const l of lines) t.match(l, /: exit 0, [1-9]\d* ok, 0 not ok$/, l);

    const obj = join(root, 'build', triplet, 'obj', 'unwind.o');
    t.ok(existsSync(join(root, 'build', triplet, 'libdwunw.a')), `build/${triplet}/libdwunw.a`);
    if (existsSync(obj)) {
      const e = new ElfFile(obj);
      t.equal(e.machine, x.machine, `${triplet} objects: e_machine ${x.machine}`);
      t.equal(e.is64, x.is64, `${triplet} objects: ELFCLASS${x.is64 ? 64 : 32}`);
    } else {
      t.fail(`no ${obj}`);
    }

    const h = await run('make', ['-s', '-C', 'native', `CROSS=${x.cross}`, 'cross-headers']);
    t.equal(h.status, 0, 'make cross-headers');
    const headers = h.stdout.split('\n').filter((l) => l !== '');
    const foreign = headers.filter(
      (p) =>
        !p.startsWith(`/usr/lib/gcc-cross/${triplet}/`) &&
        !p.startsWith(`/usr/${triplet}/include/`) &&
        !/^\/usr\/lib\/gcc-cross\/[^/]+\/\d+\/\.\.\/\.\.\/\.\.\/\.\.\//.test(p) &&
        !p.startsWith('include/') &&
        !p.startsWith('src/') &&
        !allowed.test(p),
    );
    t.ok(headers.length > 50, `${headers.length} headers read`);
    t.same(foreign, [], 'no other host header');
    t.ok(headers.some((p) => p === '/usr/include/libelf.h'), "libelf.h: the host's (Multi-Arch: same) copy");
  });
}

// memleak for arm64 and mips32 (bpf/Makefile CROSS=aarch64-linux-gnu- / mipsel-linux-gnu-): the BPF
// object with that architecture's register frame, the user space linked against
// build/<triplet>/libdwunw.a and that architecture's libbpf; an ELF that runs under qemu-user as far
// as a machine without BPF lets it (its usage, and its refusal of a pid that maps no libc). Loading
// it needs a kernel of that architecture: test/kernels.test.ts boots one.
const memleakTargets = [
  { cross: 'aarch64-linux-gnu-', qemu: 'qemu-aarch64', machine: 183, is64: true, regs: /STRUCT 'user_pt_regs' size=272 vlen=4/, what: "arm64's user_pt_regs" },
  { cross: 'mipsel-linux-gnu-', qemu: 'qemu-mipsel', machine: 8, is64: false, regs: /STRUCT 'pt_regs' size=184 vlen=8/, what: "mips32's pt_regs (32-bit slots)", noKernelBtf: true },
];

/**
 * What an object needs of the kernel's BTF: its CO-RE relocations (the core_relo_len of the
 * .BTF.ext header) and its tp_btf programs (their sections), from readelf's section table.
 */
async function kernelBtfNeeds(obj: string): Promise<{ coreReloBytes: number; tpBtf: string[] }> {
  const secs = (await run('readelf', ['-SW', obj])).stdout;
  const ext = /\]\s+\.BTF\.ext\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)/.exec(secs);
  let coreReloBytes = -1;
  if (ext) {
    const h = readFileSync(obj).subarray(parseInt(ext[1]!, 16), parseInt(ext[1]!, 16) + 32);
    coreReloBytes = h.length === 32 ? h.readUInt32LE(28) : -1; // struct btf_ext_header: core_relo_len last
  }
  return { coreReloBytes, tpBtf: secs.match(/\btp_btf\/\S+/g) ?? [] };
}
for (const x of memleakTargets) {
  const triplet = x.cross.slice(0, -1);
  t.test(`memleak builds for ${triplet}`, async (t) => {
    const lib = await run('flock', [crossLock, 'make', '-s', '-j2', '-C', 'native', `CROSS=${x.cross}`, 'lib']);
    t.equal(lib.status, 0, `make -C native CROSS=${x.cross} lib${lib.status !== 0 ? `: ${lib.stderr.slice(-1500)}` : ''}`);
    const b = await run('flock', [crossLock, 'make', '-s', '-C', 'bpf', `CROSS=${x.cross}`]);
    t.equal(b.status, 0, `make -C bpf CROSS=${x.cross}${b.status !== 0 ? `: ${b.stderr.slice(-1500)}` : ''}`);
    const out = join(root, 'build', triplet, 'bpf');
    for (const name of ['memleak', 'memleak-fp']) {
      const f = join(out, name);
      if (!existsSync(f)) {
        t.fail(`no ${f}`);
        continue;
      }
      const e = new ElfFile(f);
      t.equal(e.machine, x.machine, `${name}: e_machine ${x.machine}`);
      t.equal(e.is64, x.is64, `${name}: ELFCLASS${x.is64 ? 64 : 32}`);
    }
    const btf = await run('bpftool', ['btf', 'dump', 'file', join(out, 'memleak.bpf.o')]);
    t.match(btf.stdout, x.regs, `the BPF object reads ${x.what}`);
    if (x.noKernelBtf) {
      // it loads in kernels without BTF (Debian's mipsel one: test/kernels.test.ts)
      const needs = await kernelBtfNeeds(join(out, 'memleak.bpf.o'));
      t.same(needs, { coreReloBytes: 0, tpBtf: [] }, 'the BPF object needs no kernel BTF: no CO-RE relocation, no tp_btf program');
    }
    const sysroot = `/usr/${triplet}`;
    const help = await run(x.qemu, ['-L', sysroot, join(out, 'memleak'), '--help']);
    t.equal(help.status, 0, `${x.qemu} memleak --help: exit 0`);
    t.match(help.stdout, /^Usage: memleak \[OPTION\.\.\.\] \[INTERVAL \[COUNT\]\]/, 'its usage');
    t.match(help.stdout, /--unwind=auto\|kernel\|dwarf\|fp/, 'with DWARF unwinding (HAVE_DWUNW)');
    const pid1 = await run(x.qemu, ['-L', sysroot, join(out, 'memleak'), '-p', '1']);
    t.equal(pid1.status, 1, `${x.qemu} memleak -p 1: exit 1`);
    t.match(pid1.stderr, /^memleak: pid 1 does not map libc\.so\.6/m, 'one line naming the cause');
  });
}
