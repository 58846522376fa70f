/* SPDX-License-Identifier: GPL-2.0-only */
/* CPython's internal layouts, one row per minor version: where the thread states, frames, code
 * objects and strings keep what a stack needs. Measured from each version's DWARF (python3.X-dbg,
 * gdb ptype/o); a version not in the table is not read (never guessed). */
#ifndef DWUNW_PY_LAYOUT_H
#define DWUNW_PY_LAYOUT_H

#include <stdint.h>

struct dw_py_layout {
	uint8_t major, minor;
	/* _PyRuntimeState */
	uint16_t rt_interp_head;
	/* PyInterpreterState */
	uint16_t is_next, is_threads_head;
	/* PyThreadState */
	uint16_t ts_next, ts_cframe, ts_native_tid;
	/* _PyCFrame */
	uint16_t cf_current_frame;
	/* _PyInterpreterFrame */
	uint16_t fr_code, fr_previous, fr_prev_instr, fr_is_entry, fr_owner;
	/* PyCodeObject (the co_* members are also checked against PyCode_Type's member list) */
	uint16_t co_firstlineno, co_filename, co_name, co_qualname, co_linetable, co_firsttraceable;
	uint16_t co_code;             /* co_code_adaptive: PyCode_Type.tp_basicsize */
	/* PyTypeObject */
	uint16_t tp_name, tp_basicsize, tp_itemsize, tp_members;
	/* str: state word, data of a compact ASCII and of a compact non-ASCII string */
	uint16_t str_length, str_state, str_ascii_data, str_compact_data;
	uint16_t unicode_basicsize;   /* PyUnicode_Type.tp_basicsize */
	uint16_t ob_type, bytes_size, bytes_data; /* PyObject.ob_type; a bytes object's length and data */
	uint8_t owner_generator;      /* _PyInterpreterFrame.owner of a generator's frame */
	/* How a frame says it is the first its native eval call ran: 3.11 has is_entry (fr_is_entry,
	 * entry_flag 1); 3.12 pushes a shim frame owned by the C stack (owner_cstack) below it. */
	uint8_t entry_flag;
	uint8_t owner_cstack;         /* 0xff: none */
};

/* The row for major.minor, or NULL; *index (when given) is its index + 1. */
const struct dw_py_layout *dw_py_layout_for(unsigned major, unsigned minor, uint32_t *index);
/* The row of an index + 1 from dw_py_layout_for, or NULL. */
const struct dw_py_layout *dw_py_layout_at(uint32_t index);

#endif
