// send-floor: what it costs one thread to send a cached file over loopback
// TCP in 1 MiB responses, seven ways, with no SMB server around it (for
// docs/BENCHMARKS.md run 25). It bounds what any SMB server can spend per
// GiB on a READ response on this machine.
//
//   gcc -O2 -o /tmp/send-floor scripts/send-floor.c -lcrypto -lpthread
//   /tmp/send-floor FILE [ROUNDS]
//
// FILE should be cached (cat FILE >/dev/null) and larger than the CPU
// caches (1 GiB). Each round runs every mode once, over the whole file; the
// sender's CPU comes from getrusage(RUSAGE_THREAD) and so includes the
// receive-side TCP work the kernel does in the sender's context on
// loopback, as a server's does. A reader thread drains the socket.
//
//   0 copy:       pread 1 MiB into a buffer, writev header + buffer
//   1 copy+gmac:  pread in 256 KiB pieces, AES-128-GMAC (OpenSSL) each
//                 while in cache, writev (what Braid does for a signed READ)
//   2 map+gmac:   GMAC and writev straight from an mmap of the file (no
//                 pread copy; not a snapshot: a concurrent writer could
//                 change bytes between MAC and send)
//   3 map:        writev straight from the mmap, nothing else (unsigned)
//   4 copy+gcm:   pread in 256 KiB pieces, AES-128-GCM (OpenSSL) each in
//                 place, writev (what Braid does for an encrypted READ)
//   5 map>gcm:    AES-128-GCM from the mmap into the buffer, writev (the
//                 cipher makes the copy; still a snapshot of what it read)
//   6 copy+zc:    pread into one of 16 buffers, send with MSG_ZEROCOPY (a
//                 buffer is reused only once the kernel reports it done);
//                 prints how many sends the kernel reported as copied
//                 after all (SO_EE_CODE_ZEROCOPY_COPIED)
//
// Prints each mode's median CPU-seconds per GiB over the rounds.
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/errqueue.h>
#include <poll.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define MIB (1 << 20)
#define PIECE (MIB / 4)
#define MODES 7
#define MAX_ROUNDS 32

static const char *names[MODES] = {"copy", "copy+gmac", "map+gmac", "map", "copy+gcm", "map>gcm", "copy+zc"};
static volatile int listening;
static int port;

static void *drain(void *arg) {
    int ls = *(int *)arg;
    listening = 1;
    int s = accept(ls, 0, 0);
    char *b = malloc(4 * MIB);
    while (recv(s, b, 4 * MIB, 0) > 0) {
    }
    return 0;
}

static double thread_cpu(void) {
    struct rusage r;
    getrusage(RUSAGE_THREAD, &r);
    return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6;
}

static void send_all(int s, unsigned char *hdr, const unsigned char *data) {
    struct iovec iov[2] = {{hdr, 80}, {(void *)data, MIB}};
    size_t want = 80 + MIB;
    while (want) {
        ssize_t n = writev(s, iov, 2);
        if (n <= 0) {
            perror("writev");
            exit(1);
        }
        want -= n;
        for (int i = 0; i < 2 && n; i++) {
            size_t k = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;
            iov[i].iov_base = (char *)iov[i].iov_base + k;
            iov[i].iov_len -= k;
            n -= k;
        }
    }
}


#define ZC_BUFS 16
static unsigned long zc_sent, zc_done, zc_copied;

// Collect MSG_ZEROCOPY completions; with `wait`, block until one arrives.
static void zc_reap(int s, int wait) {
    for (;;) {
        if (wait) {
            struct pollfd p = {.fd = s, .events = 0};
            poll(&p, 1, -1);
        }
        char control[128];
        struct msghdr msg = {.msg_control = control, .msg_controllen = sizeof control};
        if (recvmsg(s, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
            if (wait) continue;
            return;
        }
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            struct sock_extended_err *e = (void *)CMSG_DATA(c);
            if (e->ee_origin != SO_EE_ORIGIN_ZEROCOPY) continue;
            unsigned long n = e->ee_data - e->ee_info + 1;
            zc_done += n;
            if (e->ee_code & SO_EE_CODE_ZEROCOPY_COPIED) zc_copied += n;
        }
        wait = 0;
    }
}

static void send_zc(int s, unsigned char *hdr, const unsigned char *data) {
    struct iovec iov[2] = {{hdr, 80}, {(void *)data, MIB}};
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
    size_t want = 80 + MIB;
    while (want) {
        ssize_t n = sendmsg(s, &msg, MSG_ZEROCOPY);
        if (n <= 0) {
            perror("sendmsg");
            exit(1);
        }
        zc_sent++;
        want -= n;
        for (size_t i = 0; i < msg.msg_iovlen && n; i++) {
            size_t k = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;
            iov[i].iov_base = (char *)iov[i].iov_base + k;
            iov[i].iov_len -= k;
            n -= k;
        }
    }
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE [ROUNDS]\n", argv[0]);
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    if (rounds < 1 || rounds > MAX_ROUNDS) rounds = 3;
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    off_t size = lseek(fd, 0, SEEK_END) / MIB * MIB;
    const unsigned char *map = mmap(0, size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        perror("mmap");
        return 1;
    }

    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t sl = sizeof sa;
    if (bind(ls, (void *)&sa, sl) || listen(ls, 1) || getsockname(ls, (void *)&sa, &sl)) {
        perror("listen");
        return 1;
    }
    port = ntohs(sa.sin_port);
    pthread_t t;
    pthread_create(&t, 0, drain, &ls);
    while (!listening) usleep(1000);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, (void *)&sa, sizeof sa)) {
        perror("connect");
        return 1;
    }

    unsigned char *buf = aligned_alloc(4096, MIB), hdr[80] = {0}, tag[16];
    unsigned char *zc_buf = aligned_alloc(4096, (size_t)ZC_BUFS * MIB);
    int one = 1;
    if (setsockopt(s, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one)) perror("SO_ZEROCOPY");
    unsigned char key[16] = {1}, iv[12] = {2};
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    double cost[MODES][MAX_ROUNDS];
    double gib = size / (double)(1 << 30);
    for (int r = 0; r < rounds; r++) {
        for (int m = 0; m < MODES; m++) {
            double c0 = thread_cpu();
            for (off_t off = 0; off < size; off += MIB) {
                const unsigned char *data = buf;
                int l;
                if (m == 0) {
                    if (pread(fd, buf, MIB, off) != MIB) return 1;
                } else if (m == 1) {
                    EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), 0, key, iv);
                    for (int i = 0; i < MIB; i += PIECE) {
                        if (pread(fd, buf + i, PIECE, off + i) != PIECE) return 1;
                        EVP_EncryptUpdate(ctx, 0, &l, buf + i, PIECE);
                    }
                    EVP_EncryptFinal_ex(ctx, 0, &l);
                    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag);
                } else if (m == 6) {
                    // Reuse a buffer only after every send before it is done.
                    while (zc_sent - zc_done >= ZC_BUFS - 1) zc_reap(s, 1);
                    zc_reap(s, 0);
                    unsigned char *b = zc_buf + (size_t)((off / MIB) % ZC_BUFS) * MIB;
                    if (pread(fd, b, MIB, off) != MIB) return 1;
                    send_zc(s, hdr, b);
                    continue;
                } else if (m >= 4) {
                    EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), 0, key, iv);
                    for (int i = 0; i < MIB; i += PIECE) {
                        const unsigned char *src = map + off + i;
                        if (m == 4) {
                            if (pread(fd, buf + i, PIECE, off + i) != PIECE) return 1;
                            src = buf + i;
                        }
                        EVP_EncryptUpdate(ctx, buf + i, &l, src, PIECE);
                    }
                    EVP_EncryptFinal_ex(ctx, 0, &l);
                    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag);
                } else {
                    data = map + off;
                    if (m == 2) {
                        EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), 0, key, iv);
                        EVP_EncryptUpdate(ctx, 0, &l, data, MIB);
                        EVP_EncryptFinal_ex(ctx, 0, &l);
                        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag);
                    }
                }
                memcpy(hdr + 48, tag, 16);
                send_all(s, hdr, data);
            }
            cost[m][r] = (thread_cpu() - c0) / gib;
        }
    }
    // GMAC alone over a buffer in cache: what the MAC adds to mode 0.
    double c0 = thread_cpu();
    int l;
    for (int i = 0; i < 1024; i++) {
        EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), 0, key, iv);
        EVP_EncryptUpdate(ctx, 0, &l, buf, MIB);
        EVP_EncryptFinal_ex(ctx, 0, &l);
    }
    double gmac_hot = thread_cpu() - c0;
    for (int m = 0; m < MODES; m++) {
        qsort(cost[m], rounds, sizeof(double), cmp);
        printf("%d %-10s %.3f CPU-s/GiB (median of %d; range %.3f-%.3f)\n", m, names[m],
               cost[m][rounds / 2], rounds, cost[m][0], cost[m][rounds - 1]);
    }
    printf("  gmac alone, in cache: %.3f CPU-s/GiB\n", gmac_hot);
    zc_reap(s, 0);
    printf("  MSG_ZEROCOPY sends: %lu, reported done: %lu, of which copied by the kernel: %lu\n",
           zc_sent, zc_done, zc_copied);
    return 0;
}
