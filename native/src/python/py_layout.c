// SPDX-License-Identifier: GPL-2.0-only
/* The table of CPython layouts (py_layout.h). */
#include <stddef.h>
#include "py_layout.h"

static const struct dw_py_layout layouts[] = {
	{
		/* 3.11 (x86_64): Debian 12's 3.11.2 from python3.11-dbg; pyenv's 3.11.7 checks the same */
		.major = 3, .minor = 11,
		.rt_interp_head = 0x28,
		.is_next = 0x0, .is_threads_head = 0x10,
		.ts_next = 0x8, .ts_cframe = 0x38, .ts_native_tid = 0xa0,
		.cf_current_frame = 0x8,
		.fr_code = 32, .fr_previous = 48, .fr_prev_instr = 56, .fr_is_entry = 68, .fr_owner = 69,
		.co_firstlineno = 72, .co_filename = 112, .co_name = 120, .co_qualname = 128,
		.co_linetable = 136, .co_firsttraceable = 168, .co_code = 184,
		.tp_name = 0x18, .tp_basicsize = 0x20, .tp_itemsize = 0x28, .tp_members = 0xf0,
		.str_length = 0x10, .str_state = 0x20, .str_ascii_data = 48, .str_compact_data = 72,
		.unicode_basicsize = 80,
		.ob_type = 8, .bytes_size = 0x10, .bytes_data = 0x20,
		.owner_generator = 1,
		.entry_flag = 1, .owner_cstack = 0xff,
	},
	{
		/* 3.12 (x86_64): pyenv's 3.12.1, from its libpython3.12.so's DWARF */
		.major = 3, .minor = 12,
		.rt_interp_head = 0x28,
		.is_next = 0x0, .is_threads_head = 0x48,
		.ts_next = 0x8, .ts_cframe = 0x38, .ts_native_tid = 0x90,
		.cf_current_frame = 0x0,
		.fr_code = 0, .fr_previous = 8, .fr_prev_instr = 56, .fr_is_entry = 0, .fr_owner = 70,
		.co_firstlineno = 0x44, .co_filename = 0x70, .co_name = 0x78, .co_qualname = 0x80,
		.co_linetable = 0x88, .co_firsttraceable = 0xb0, .co_code = 0xc0,
		.tp_name = 0x18, .tp_basicsize = 0x20, .tp_itemsize = 0x28, .tp_members = 0xf0,
		.str_length = 0x10, .str_state = 0x20, .str_ascii_data = 40, .str_compact_data = 56,
		.unicode_basicsize = 64,
		.ob_type = 8, .bytes_size = 0x10, .bytes_data = 0x20,
		.owner_generator = 1,
		.entry_flag = 0, .owner_cstack = 3,
	},
};

#define NLAYOUTS (sizeof(layouts) / sizeof(layouts[0]))

const struct dw_py_layout *dw_py_layout_for(unsigned major, unsigned minor, uint32_t *index)
{
	for (size_t i = 0; i < NLAYOUTS; i++) {
		if (layouts[i].major == major && layouts[i].minor == minor) {
			if (index)
				*index = (uint32_t)i + 1;
			return &layouts[i];
		}
	}
	return NULL;
}

const struct dw_py_layout *dw_py_layout_at(uint32_t index)
{
	return index >= 1 && index <= NLAYOUTS ? &layouts[index - 1] : NULL;
}
