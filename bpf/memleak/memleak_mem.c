// SPDX-License-Identifier: GPL-2.0-only
/* memleak's own memory (memleak_mem.h). */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "memleak_allocs.h"
#include "memleak_mem.h"

struct self_rss {
	uint64_t rss, anon, file;
};

static struct self_rss self_rss(void)
{
	struct self_rss r = { 0, 0, 0 };
	char line[256];
	unsigned long long v;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return r;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "VmRSS: %llu", &v) == 1)
			r.rss = v * 1024;
		else if (sscanf(line, "RssAnon: %llu", &v) == 1)
			r.anon = v * 1024;
		else if (sscanf(line, "RssFile: %llu", &v) == 1)
			r.file = v * 1024;
	}
	fclose(f);
	return r;
}

void ml_mem_json(struct bpf_object *obj, size_t outstanding)
{
	struct self_rss r = self_rss();
	struct bpf_map *m;
	uint64_t total = 0;
	int c = 0;

	printf(",\"memory\":{\"rss_bytes\":%" PRIu64 ",\"rss_anon_bytes\":%" PRIu64
	       ",\"rss_file_bytes\":%" PRIu64 ",\"event_window_bytes\":%zu,\"event_table_bytes\":%zu"
	       ",\"event_table_entries\":%zu,\"outstanding\":%zu,\"bpf_maps\":{",
	       r.rss, r.anon, r.file, ml_ev_window_bytes(), ml_ev_old_bytes(), ml_ev_old_entries(),
	       outstanding);
	bpf_object__for_each_map(m, obj) {
		uint64_t b = ml_map_memlock(bpf_map__fd(m));

		if (bpf_map__fd(m) < 0)
			continue;
		total += b;
		printf("%s\"%s\":%" PRIu64, c++ ? "," : "", bpf_map__name(m), b);
	}
	printf("},\"bpf_maps_bytes\":%" PRIu64 "}", total);
}

void ml_mem_text(FILE *f, struct bpf_object *obj, size_t outstanding)
{
	struct self_rss r = self_rss();
	struct bpf_map *m;
	uint64_t total = 0;

	fprintf(f, "memleak: memory: RSS %.1f MiB (anonymous %.1f, files and ring buffer %.1f), "
		"event ids %.1f MiB (window %.1f, %zu old in %.1f), %zu outstanding allocations\n",
		r.rss / 1048576.0, r.anon / 1048576.0, r.file / 1048576.0,
		(ml_ev_window_bytes() + ml_ev_old_bytes()) / 1048576.0,
		ml_ev_window_bytes() / 1048576.0, ml_ev_old_entries(), ml_ev_old_bytes() / 1048576.0,
		outstanding);
	bpf_object__for_each_map(m, obj) {
		uint64_t b;

		if (bpf_map__fd(m) < 0)
			continue;
		b = ml_map_memlock(bpf_map__fd(m));
		total += b;
		fprintf(f, "memleak: BPF map %-16s %10.1f KiB\n", bpf_map__name(m), b / 1024.0);
	}
	fprintf(f, "memleak: BPF maps total %.1f MiB\n", total / 1048576.0);
}
