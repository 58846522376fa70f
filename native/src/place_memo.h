/* SPDX-License-Identifier: GPL-2.0-only */
/* The context's place memo: the places of the last capture, taken by the next capture of the same
 * process instead of looking its modules up again. */
#ifndef DWUNW_PLACE_MEMO_H
#define DWUNW_PLACE_MEMO_H

#include "walk.h"

/* The memo's places into w (each with a module reference), when the memo is free and for w's
 * process. Returns whether the capture owns the memo (then dw_memo_give at its end). */
int dw_memo_take(struct walk *w);

/* The memo from w's places (the first two with a table); frees it. */
void dw_memo_give(struct walk *w);

#endif
