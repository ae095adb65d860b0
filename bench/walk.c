/* The floor: walk a classic pcap file's record headers and count packets, nothing else
 * (read(2) in 1 MB blocks). What reading the file costs; tcpwhy cannot go faster than this. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: walk FILE.pcap\n"); return 2; }
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) { perror(argv[1]); return 2; }
    static unsigned char buf[1 << 20];
    size_t have = 0, off = 24; /* skip the global header */
    uint64_t packets = 0, consumed = 0;
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof buf - have);
        if (n < 0) { perror("read"); return 2; }
        have += (size_t)n;
        while (have - off >= 16) {
            uint32_t caplen;
            memcpy(&caplen, buf + off + 8, 4);
            if (caplen > (1u << 24)) { fprintf(stderr, "bad record\n"); return 2; }
            if (have - off < 16 + caplen) break;
            off += 16 + caplen;
            packets++;
        }
        if (n == 0) break;
        memmove(buf, buf + off, have - off);
        consumed += off; have -= off; off = 0;
    }
    printf("%llu packets\n", (unsigned long long)packets);
    return 0;
}
