/* SPDX-License-Identifier: GPL-2.0-only */
/* The process/thread selection lists' size (select.bpf.h), shared with user space. */
#ifndef DWUNW_SELECT_H
#define DWUNW_SELECT_H

#define SEL_MAX_FILTER 1024          /* -p / -L / -t entries */

#endif /* DWUNW_SELECT_H */
