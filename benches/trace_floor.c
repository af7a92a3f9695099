/*
 * The floor under any block-trace analysis, for scripts/bench-trace: a program that does the
 * least an analysis must (walk every record of a merged blkparse trace and match each
 * completion to its queue record by sector) and nothing else: no other statistics, no output
 * but one line, one thread, the file mapped and populated in one call. Timed beside btt and
 * iolab on the same file, it says how far from the machine's limit each tool is; on small
 * traces most of it is the cost of starting a process at all.
 *
 * Usage: trace_floor FILE (native-endian blk_io_trace records, as blkparse -d writes them).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>

struct record { /* struct blk_io_trace, 48 bytes, then pdu_len bytes of payload */
    uint32_t magic, sequence;
    uint64_t time, sector;
    uint32_t bytes, action, pid, device, cpu;
    uint16_t error, pdu_len;
};

enum { QUEUE = 1, BACKMERGE = 2, FRONTMERGE = 3, COMPLETE = 8 };
#define SLOTS (1u << 14) /* open addressing; IOs in flight stay far below half of it */
static uint64_t keys[SLOTS], queued_at[SLOTS];

static unsigned home(uint64_t key) { return (unsigned)((key * 0x9E3779B97F4A7C15ull) >> 50); }

static unsigned find(uint64_t key)
{
    unsigned h = home(key);
    while (keys[h] && keys[h] != key)
        h = (h + 1) & (SLOTS - 1);
    return h;
}

/* Backward-shift deletion: later entries of the probe chain move up, so no tombstones. */
static void erase(unsigned hole)
{
    for (unsigned j = hole;;) {
        j = (j + 1) & (SLOTS - 1);
        if (!keys[j])
            break;
        if (((j - home(keys[j])) & (SLOTS - 1)) >= ((j - hole) & (SLOTS - 1))) {
            keys[hole] = keys[j];
            queued_at[hole] = queued_at[j];
            hole = j;
        }
    }
    keys[hole] = 0;
}

int main(int argc, char **argv)
{
    struct stat st;
    int fd = argc == 2 ? open(argv[1], O_RDONLY) : -1;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_size < 48) {
        fprintf(stderr, "usage: trace_floor MERGED-TRACE (a readable, non-empty file)\n");
        return 2;
    }
    const char *p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED || (((const struct record *)p)->magic & 0xffffff00u) != 0x65617400u) {
        fprintf(stderr, "trace_floor: %s is not a native-endian blktrace file\n", argv[1]);
        return 1;
    }
    uint64_t records = 0, matched = 0, q2c_sum = 0, in_flight = 0;
    for (size_t at = 0; at + 48 <= (size_t)st.st_size; records++) {
        const struct record *r = (const void *)(p + at);
        unsigned action = r->action & 0xffff;
        uint64_t key = r->sector + 1; /* 0 marks an empty slot */
        if (action == QUEUE && in_flight < SLOTS / 2) {
            unsigned h = find(key);
            in_flight += !keys[h];
            keys[h] = key;
            queued_at[h] = r->time;
        } else if (action == COMPLETE || action == BACKMERGE || action == FRONTMERGE) {
            /* A merged bio never completes under its own sector: it leaves the table too. */
            unsigned h = find(key);
            if (keys[h] == key) {
                if (action == COMPLETE) {
                    q2c_sum += r->time - queued_at[h];
                    matched++;
                }
                in_flight--;
                erase(h);
            }
        }
        at += 48 + r->pdu_len;
    }
    printf("%llu records, %llu completions matched, mean Q2C %.0f ns\n",
           (unsigned long long)records, (unsigned long long)matched,
           matched ? (double)q2c_sum / matched : 0.0);
    return 0;
}
