// SPDX-License-Identifier: GPL-2.0-only
/* memleak's shared state (memleak_state.h). */
#include "memleak_state.h"

struct memleak_bpf *skel;
pid_t target_pid;
bool following;
