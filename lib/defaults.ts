// The CLI's defaults for unwinding, loadable without koffi (commands name them in --help).

export const DEFAULT_STACK_SIZE = 64 * 1024;
/** The library's default attach timeout (struct dwunw_config.attach_timeout_ms 0). */
export const DEFAULT_ATTACH_TIMEOUT_MS = 2000;
/** A [vdso] mapping larger than this is not copied (the library does not believe it either). */
export const MAX_VDSO_SIZE = 1 << 20;
/** The name under which a vDSO image serves the [vdso] mappings of offline maps. */
export const VDSO_NAME = '[vdso]';
export const DEFAULT_MAX_FRAMES = 256;
