// `dwunw symbolize`: name the frames a pprof profile left without a name (locations without a
// line, in mappings with has_functions=false), by the mapping's build id. Every location of such a
// mapping is named again, as `pprof -symbolize` does: a name the profiling host had only from
// .dynsym (an exported alias) gives way to the debug file's. The file: the module file at its
// path when it is the same build, else a debug file under the debug directories
// (.build-id/xx/rest.debug), and with debuginfod the servers of DEBUGINFOD_URLS (libdwunw's fetch
// worker). A profile taken on a host without debug files is named elsewhere; the names and lines
// are libdwunw's, the same the tools give when the debug files are there.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { Function as PFunction, Line, type Location, type Mapping, Profile } from 'pprof-format';
import { type DebuginfodResult, Dwunw, type FrameSymbol, type Module } from './dwunw.js';
import { debuginfodSummary } from './debuginfod.js';
import { execSegment } from './elf-load.js';
import { CliError } from './output.js';

export interface SymbolizeOptions {
  /** ':'-separated roots of separate debug files (libdwunw's default /usr/lib/debug) */
  debugDirs?: string;
  debuginfod: boolean;
  waitMs: number;
}

export interface SymbolizeResult {
  profile: Buffer;
  /** locations without a name in the input, and how many of them are named now */
  unnamed: number;
  named: number;
  /** one line per cause of names still missing */
  summary: string[];
}

/** The profile in a pprof file's bytes (gzip'd or not). */
export function decodePprof(bytes: Buffer, what: string): Profile {
  try {
    return Profile.decode(bytes[0] === 0x1f && bytes[1] === 0x8b ? gunzipSync(bytes) : bytes);
  } catch (e) {
    throw new CliError(what, `not a pprof profile (${(e as Error).message})`);
  }
}

interface Target {
  mapping: Mapping;
  locations: Location[];
  module: Module | null;
  /** file address = address - bias */
  bias: bigint;
  why: string;
}

export function symbolizePprof(bytes: Buffer, what: string, o: SymbolizeOptions): SymbolizeResult {
  const p = decodePprof(bytes, what);
  const str = (i: number | bigint): string => p.stringTable.strings[Number(i)] ?? '';
  const locationsOf = new Map<string, Location[]>();
  for (const l of p.location) {
    if (!l.mappingId) continue;
    const k = String(l.mappingId);
    locationsOf.set(k, [...(locationsOf.get(k) ?? []), l]);
  }
  const unnamed = new Set(p.location.filter((l) => l.line.length === 0));
  const d = new Dwunw({ debugDirs: o.debugDirs ?? null, debuginfod: o.debuginfod });
  const targets: Target[] = [];
  try {
    for (const m of p.mapping) {
      const locations = locationsOf.get(String(m.id));
      if (m.hasFunctions || !locations) continue;
      targets.push({ mapping: m, locations, ...openFor(d, m, str(m.filename), str(m.buildId), o.debugDirs) });
    }
    const functions = new Map<string, number>();
    const functionFor = (name: string, file: string): number => {
      const key = `${name}\0${file}`;
      let id = functions.get(key);
      if (id === undefined) {
        id = p.function.length + 1;
        p.function.push(new PFunction({ id, name: p.stringTable.dedup(name), systemName: p.stringTable.dedup(name), filename: p.stringTable.dedup(file) }));
        functions.set(key, id);
      }
      return id;
    };
    const name = (t: Target): void => {
      for (const l of t.locations) {
        const sym: FrameSymbol | null = t.module ? t.module.symbolize(BigInt(l.address) - t.bias) : null;
        if (sym) l.line = [new Line({ functionId: functionFor(sym.name, sym.file ?? str(t.mapping.filename)), line: sym.line ?? 0 })];
      }
    };
    for (const t of targets) name(t);
    const summary: string[] = [];
    if (o.debuginfod) {
      // the first look-ups asked for the missing debug files; name again with what came
      const pending = d.debuginfodWait(o.waitMs);
      for (const t of targets) name(t);
      const results: DebuginfodResult[] = d.debuginfodResults();
      summary.push(...debuginfodSummary(results, pending, o.waitMs));
    }
    const unopened = targets.filter((t) => !t.module);
    if (unopened.length) {
      const shown = unopened.slice(0, 4).map((t) => `${str(t.mapping.filename)} (${t.why})`);
      summary.push(
        `dwunw: symbolize: no file for ${unopened.length} mapping${unopened.length > 1 ? 's' : ''}: ${shown.join(', ')}${unopened.length > 4 ? ', ...' : ''}; their frames keep no name`,
      );
    }
    for (const t of targets) {
      t.mapping.hasFunctions = t.locations.every((l) => l.line.length > 0);
      if (t.locations.some((l) => l.line.some((x) => Number(x.line) > 0))) {
        t.mapping.hasFilenames = true;
        t.mapping.hasLineNumbers = true;
      }
    }
    const named = [...unnamed].filter((l) => l.line.length > 0).length;
    return { profile: gzipSync(p.encode()), unnamed: unnamed.size, named, summary };
  } finally {
    for (const t of targets) t.module?.close();
    d.close();
  }
}

/**
 * The file that names a mapping: the module at its path when its build id is the mapping's, else
 * the debug file of that build id under the debug directories. The bias turns a location's address
 * into the file's own address (the mapping's memory_start and file_offset through the file's
 * executable segment; 0 for dwunw's own profiles, whose addresses are the file's).
 */
function openFor(d: Dwunw, mapping: Mapping, path: string, buildId: string, debugDirs: string | undefined): { module: Module | null; bias: bigint; why: string } {
  const candidates: string[] = [];
  if (path.startsWith('/')) candidates.push(path);
  if (/^[0-9a-f]{4,}$/.test(buildId)) {
    for (const dir of (debugDirs ?? '/usr/lib/debug').split(':').filter(Boolean)) {
      candidates.push(join(dir, '.build-id', buildId.slice(0, 2), `${buildId.slice(2)}.debug`));
    }
  }
  let why = buildId ? `no file with build id ${buildId}` : 'no build id, and no file at the path';
  for (const c of candidates) {
    if (!existsSync(c)) continue;
    let m: Module;
    try {
      m = d.open(c);
    } catch (e) {
      why = `${c}: ${(e as Error).message}`;
      continue;
    }
    if (buildId && m.buildId !== buildId) {
      why = `${c} has build id ${m.buildId || 'none'}, not ${buildId}`;
      m.close();
      continue;
    }
    return { module: m, bias: mappingBias(mapping, c), why: '' };
  }
  return { module: null, bias: 0n, why };
}

/** The bias of a mapping: memory_start - file_offset + the segment's offset - its address. */
function mappingBias(m: Mapping, file: string): bigint {
  const seg = execSegment(file);
  if (!seg) return 0n;
  return BigInt(m.memoryStart) - BigInt(m.fileOffset) + seg.offset - seg.vaddr;
}
