// SPDX-License-Identifier: GPL-2.0-only
//! dwunw-framehop: framehop unwinding the snapshots `dwunw-bench --dump DIR` wrote.
//!
//!   dwunw-framehop DIR [--iterations N] [--batches B]
//!   dwunw-framehop DIR --profile NAME [--iterations N]
//!
//! Per snapshot (DIR/N.txt + DIR/N.stack): one framehop unwinder over the snapshot's modules
//! (their ELF files' .text, .eh_frame, .eh_frame_hdr, .debug_frame, .got), the stack bytes as its
//! only memory, a warm cache. Prints one JSON document: the pcs, why the walk stopped, and the
//! warm time per unwind (median and p90 over batches of N unwinds). --profile runs N warm
//! unwinds inside profile_loop() and nothing else timed, for
//! `valgrind --tool=callgrind --toggle-collect=profile_loop`, as dwunw-bench --profile does.

use framehop::aarch64::{CacheAarch64, UnwindRegsAarch64, UnwinderAarch64};
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{CacheStats, Error, ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use std::process::exit;
use std::time::Instant;

const MAXF: usize = 512; // frames kept per unwind, as dwunw-bench's BENCH_MAXF

fn die(msg: String) -> ! {
    eprintln!("dwunw-framehop: {msg}");
    exit(2);
}

struct Snap {
    name: String,
    arch: String,
    pc: u64,
    regs: Vec<(u32, u64)>,
    stack_lo: u64,
    stack: Vec<u8>,
    modules: Vec<(u64, u64, u64, String)>, // lo, hi, bias, file
}

fn hex(s: &str, what: &str) -> u64 {
    u64::from_str_radix(s, 16).unwrap_or_else(|_| die(format!("{what}: not hex: {s}")))
}

fn load(dir: &str, idx: usize) -> Option<Snap> {
    let txt = std::fs::read_to_string(format!("{dir}/{idx}.txt")).ok()?;
    let stack = std::fs::read(format!("{dir}/{idx}.stack"))
        .unwrap_or_else(|e| die(format!("{dir}/{idx}.stack: {e}")));
    let mut s = Snap {
        name: String::new(),
        arch: String::new(),
        pc: 0,
        regs: Vec::new(),
        stack_lo: 0,
        stack,
        modules: Vec::new(),
    };
    for line in txt.lines() {
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        let f: Vec<&str> = rest.splitn(4, ' ').collect();
        match key {
            "name" => s.name = rest.to_string(),
            "arch" => s.arch = rest.to_string(),
            "pc" => s.pc = hex(rest, "pc"),
            "stack" if f.len() == 2 => s.stack_lo = hex(f[0], "stack"),
            "reg" if f.len() == 2 => s.regs.push((f[0].parse().unwrap_or(u32::MAX), hex(f[1], "reg"))),
            "module" if f.len() == 4 => {
                s.modules.push((hex(f[0], "module"), hex(f[1], "module"), hex(f[2], "module"), f[3].to_string()))
            }
            _ => die(format!("{dir}/{idx}.txt: unexpected line: {line}")),
        }
    }
    Some(s)
}

fn reg(s: &Snap, n: u32) -> u64 {
    s.regs.iter().find(|r| r.0 == n).map(|r| r.1).unwrap_or(0)
}

/// The sections framehop reads, from an ELF64 little-endian file (both architectures here).
fn module_of(lo: u64, hi: u64, bias: u64, path: &str) -> Option<Module<Vec<u8>>> {
    let d = std::fs::read(path).ok()?;
    let u16_at = |o: usize| d.get(o..o + 2).map(|b| u16::from_le_bytes(b.try_into().unwrap()));
    let u32_at = |o: usize| d.get(o..o + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()));
    let u64_at = |o: usize| d.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()));
    if d.len() < 64 || &d[..4] != b"\x7fELF" || d[4] != 2 || d[5] != 1 {
        return None;
    }
    let shoff = u64_at(0x28)? as usize;
    let shentsize = u16_at(0x3a)? as usize;
    let shnum = u16_at(0x3c)? as usize;
    let shstrndx = u16_at(0x3e)? as usize;
    let sh = |i: usize| shoff.checked_add(i.checked_mul(shentsize)?);
    let strtab = u64_at(sh(shstrndx)? + 24)? as usize;
    let mut info = ExplicitModuleSectionInfo::<Vec<u8>>::default();
    for i in 0..shnum {
        let h = sh(i)?;
        let name_off = strtab.checked_add(u32_at(h)? as usize)?;
        let name_end = d.get(name_off..)?.iter().position(|&c| c == 0)? + name_off;
        let name = &d[name_off..name_end];
        let (kind, addr, off, size) = (u32_at(h + 4)?, u64_at(h + 16)?, u64_at(h + 24)? as usize, u64_at(h + 32)?);
        let data = || -> Option<Vec<u8>> {
            if kind == 8 {
                return None; // SHT_NOBITS (a separate debug file's stripped section)
            }
            d.get(off..off.checked_add(size as usize)?).map(|b| b.to_vec())
        };
        let range = Some(addr..addr + size);
        match name {
            b".text" => (info.text_svma, info.text) = (range, data()),
            b".eh_frame" => (info.eh_frame_svma, info.eh_frame) = (range, data()),
            b".eh_frame_hdr" => (info.eh_frame_hdr_svma, info.eh_frame_hdr) = (range, data()),
            b".debug_frame" => info.debug_frame = data(),
            b".got" => info.got_svma = range,
            _ => {}
        }
    }
    Some(Module::new(path.to_string(), lo..hi, bias, info))
}

/// One unwind: the pcs into `out`, the count, and the error that stopped it (None: the end).
pub trait Walk {
    fn unwind(&mut self, out: &mut [u64; MAXF]) -> (usize, Option<Error>);
    /// The rule cache's counters since the start: misses on a taken slot are collisions.
    fn cache_stats(&self) -> CacheStats;
}

struct Walker<U: Unwinder<Module = Module<Vec<u8>>>> {
    unwinder: U,
    cache: U::Cache,
    regs: U::UnwindRegs,
    pc: u64,
    stack_lo: u64,
    stack: Vec<u8>,
    stats: fn(&U::Cache) -> CacheStats,
}

impl<U: Unwinder<Module = Module<Vec<u8>>>> Walk for Walker<U>
where
    U::UnwindRegs: Clone,
{
    fn unwind(&mut self, out: &mut [u64; MAXF]) -> (usize, Option<Error>) {
        let (lo, stack) = (self.stack_lo, &self.stack);
        let mut read = |addr: u64| -> Result<u64, ()> {
            let o = addr.checked_sub(lo).ok_or(())? as usize;
            let b = stack.get(o..o.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(b.try_into().unwrap()))
        };
        let mut it = self.unwinder.iter_frames(self.pc, self.regs.clone(), &mut self.cache, &mut read);
        let mut n = 0;
        while n < MAXF {
            match it.next() {
                Ok(Some(FrameAddress::InstructionPointer(pc))) => out[n] = pc,
                Ok(Some(FrameAddress::ReturnAddress(ra))) => out[n] = ra.get(),
                Ok(None) => return (n, None),
                Err(e) => return (n, Some(e)),
            }
            n += 1;
        }
        (n, None)
    }
    fn cache_stats(&self) -> CacheStats {
        (self.stats)(&self.cache)
    }
}

fn walker(s: Snap) -> Result<Box<dyn Walk>, String> {
    let mods = s.modules.iter().filter_map(|m| module_of(m.0, m.1, m.2, &m.3));
    match s.arch.as_str() {
        "x86_64" => {
            let mut u = UnwinderX86_64::new();
            mods.for_each(|m| u.add_module(m));
            // DWARF x86_64: 6 = rbp, 7 = rsp
            let regs = UnwindRegsX86_64::new(s.pc, reg(&s, 7), reg(&s, 6));
            Ok(Box::new(Walker { unwinder: u, cache: CacheX86_64::new(), regs, pc: s.pc, stack_lo: s.stack_lo, stack: s.stack, stats: CacheX86_64::stats }))
        }
        "arm64" => {
            let mut u = UnwinderAarch64::new();
            mods.for_each(|m| u.add_module(m));
            // DWARF arm64: 29 = fp, 30 = lr, 31 = sp
            let regs = UnwindRegsAarch64::new(reg(&s, 30), reg(&s, 31), reg(&s, 29));
            Ok(Box::new(Walker { unwinder: u, cache: CacheAarch64::new(), regs, pc: s.pc, stack_lo: s.stack_lo, stack: s.stack, stats: CacheAarch64::stats }))
        }
        a => Err(format!("framehop has no {a} unwinder")),
    }
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// callgrind counts only inside this function (--toggle-collect=profile_loop).
#[no_mangle]
#[inline(never)]
pub fn profile_loop(w: &mut dyn Walk, out: &mut [u64; MAXF], n: u32) -> usize {
    let mut frames = 0;
    for _ in 0..n {
        frames += w.unwind(out).0;
    }
    frames
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = || -> ! {
        die("usage: dwunw-framehop DIR [--iterations N] [--batches B] [--profile NAME]".into())
    };
    let (mut iterations, mut batches, mut profile, mut dir) = (100u32, 200u32, None::<String>, None::<String>);
    let mut i = 1;
    while i < args.len() {
        let val = || args.get(i + 1).cloned().unwrap_or_else(|| usage());
        let num = |v: String| v.parse::<u32>().ok().filter(|&x| x > 0).unwrap_or_else(|| usage());
        match args[i].as_str() {
            "--iterations" => iterations = num(val()),
            "--batches" => batches = num(val()),
            "--profile" => profile = Some(val()),
            a if !a.starts_with("--") && dir.is_none() => {
                dir = Some(a.to_string());
                i += 1;
                continue;
            }
            _ => usage(),
        }
        i += 2;
    }
    let dir = dir.unwrap_or_else(|| usage());
    let snaps: Vec<Snap> = (0..).map_while(|i| load(&dir, i)).collect();
    let mut out = Box::new([0u64; MAXF]);

    if let Some(name) = profile {
        let s = snaps.into_iter().find(|s| s.name == name).unwrap_or_else(|| die(format!("--profile: no snapshot named {name}")));
        let mut w = walker(s).unwrap_or_else(|e| die(e));
        for _ in 0..11 {
            w.unwind(&mut out); // the first builds the cache; then warm, as dwunw-bench --profile
        }
        let before = w.cache_stats();
        let frames = profile_loop(w.as_mut(), &mut out, iterations);
        let after = w.cache_stats();
        println!(
            "{{\"profile\":{},\"unwinder\":\"framehop\",\"iterations\":{iterations},\"frames\":{},\"cache_hits\":{},\"cache_collisions\":{}}}",
            json_str(&name),
            frames / iterations as usize,
            after.hit_count - before.hit_count,
            after.miss_wrong_address_count - before.miss_wrong_address_count
        );
        return;
    }

    println!("{{\"bench\":\"dwunw-framehop\",\"framehop\":\"0.16.0\",\"snapshots\":[");
    let n = snaps.len();
    for (k, s) in snaps.into_iter().enumerate() {
        let (name, arch) = (s.name.clone(), s.arch.clone());
        let sep = if k + 1 < n { "," } else { "" };
        let mut w = match walker(s) {
            Ok(w) => w,
            Err(e) => {
                println!("  {{\"name\":{},\"arch\":\"{arch}\",\"status\":\"n/a\",\"reason\":{}}}{sep}", json_str(&name), json_str(&e));
                continue;
            }
        };
        let t0 = Instant::now();
        let (nf, err) = w.unwind(&mut out);
        let cold_ns = t0.elapsed().as_nanos();
        let pcs: Vec<String> = out[..nf].iter().map(|pc| format!("\"0x{pc:x}\"")).collect();
        let mut per: Vec<f64> = (0..batches)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..iterations {
                    std::hint::black_box(w.unwind(&mut out));
                }
                t.elapsed().as_nanos() as f64 / iterations as f64
            })
            .collect();
        per.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let cs = w.cache_stats();
        let q = |x: f64| per[((per.len() - 1) as f64 * x).round() as usize];
        let stop = err.map(|e| e.to_string()).unwrap_or_else(|| "OK".into());
        println!(
            "  {{\"name\":{},\"arch\":\"{arch}\",\"status\":\"ok\",\"stop\":{},\"complete\":{},\"frames\":{nf},\"median_ns\":{:.1},\"p90_ns\":{:.1},\"min_ns\":{:.1},\"cold_ns\":{cold_ns},\"cache_collisions_per_unwind\":{:.2},\"pcs\":[{}]}}{sep}",
            json_str(&name),
            json_str(&stop),
            err.is_none(),
            q(0.5),
            q(0.9),
            per[0],
            // direct-mapped rule cache: two pcs in one slot evict each other on every unwind
            cs.miss_wrong_address_count as f64 / (1 + batches as u64 * iterations as u64) as f64,
            pcs.join(",")
        );
    }
    println!("]}}");
}
