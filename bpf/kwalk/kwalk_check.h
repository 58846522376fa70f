/* SPDX-License-Identifier: GPL-2.0-only */
/* kwalk-check: settings shared by its BPF programs and its user space. */
#ifndef DWUNW_KWALK_CHECK_H
#define DWUNW_KWALK_CHECK_H

/* Stack bytes carried with every event (the snapshot half of the comparison). */
#define KC_WINDOW 32768

/* --floor: programs kc_floor0 .. kc_floor10 (kwalk_check.bpf.c says what each times) */
#define KC_FLOOR_PROGS 11

#endif
