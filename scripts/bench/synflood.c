/*
 * synflood: a spoofed-source TCP SYN generator for the front benchmark
 * (scripts/bench/front.ts --only flood [--family 6]). Testbed use only: the
 * bench runs it inside the testbed's client namespace against a testbed VIP;
 * every source and destination is in 198.18.0.0/15 (RFC 2544) or, for IPv6,
 * 2001:2::/48 (RFC 5180), and the tool refuses any other address, so it
 * cannot aim outside a benchmark network by mistake.
 *
 *   synflood --dst 198.19.1.1 --dport 81 --src 198.18.11.128/25
 *   synflood --dst 2001:2:0:1001::1 --dport 81 --src 2001:2:0:11::80/121
 *            [--netns NAME] [--seconds 3] [--count N] [--rate R (SYNs/s, 0 = max)]
 *            [--batch 256] [--procs 1]
 *
 * The family is the one of --dst; --src must be of the same family (IPv4
 * LEN 15..32, IPv6 LEN 97..128: the walk varies the address's last 32 bits).
 * Raw socket (IPPROTO_RAW, so the header is ours: IP_HDRINCL for IPv4, and
 * for AF_INET6 the kernel takes IPPROTO_RAW as header-included too): for
 * IPv4 the kernel fills the header checksum and id; IPv6 has no header
 * checksum. The TCP checksum is ours, over the family's pseudo-header (RFC
 * 793; RFC 8200 8.1 for IPv6). Each sendmmsg() carries `batch`
 * packets rewritten in place: the next (source address, source port) of a
 * walk over the CIDR x ports 1024..65534 (addresses first, so a /25 gives
 * 8.2M distinct flows before any repeats: random draws would repeat a flow
 * now and then, which the daemon counts as a retransmitted SYN), and a
 * random sequence number. Each sender process starts at its own offset. The TCP checksum is updated from a
 * precomputed sum of the constant words (pseudo-header and header) plus the
 * three changed fields, so a packet costs a few additions, not a full sum
 * (for IPv6 the source's first 96 bits are constant and in that sum).
 * `--procs N` forks N senders, each with 1/N of the count and the rate.
 * Prints one JSON line at the end: {"sent":..,"seconds":..,"rate":..,"errors":..,"procs":..}.
 * `sent` counts what sendmmsg() accepted; a packet the veth or a router
 * drops later is still counted as offered (the bench counts arrivals itself).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* IPv4: 20-byte IP header + 20-byte TCP header; IPv6: 40 + 20. */
#define PKT_LEN4 40
#define PKT_LEN6 60
#define MAX_PKT 60
#define MAX_BATCH 1024

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what) {
  fprintf(stderr, "synflood: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void usage(const char *why) {
  fprintf(stderr, "synflood: %s\nusage: synflood --dst IP|IPv6 --dport N --src CIDR [--netns NAME] [--seconds S] [--count N] [--rate R] [--batch B] [--procs P]\n", why);
  exit(2);
}

/* 198.18.0.0/15 only (host byte order). */
static int in_bench_range(uint32_t a) { return (a & 0xfffe0000u) == 0xc6120000u; }
/* 2001:2::/48 only (RFC 5180's benchmarking range; the testbed's IPv6). */
static int in_bench_range6(const uint8_t a[16]) {
  static const uint8_t p[6] = {0x20, 0x01, 0x00, 0x02, 0x00, 0x00};
  return memcmp(a, p, sizeof p) == 0;
}

static uint64_t rng_state;
static inline uint64_t rnd(void) {
  /* xorshift64*: enough for spreading addresses and ports. */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1DULL;
}

struct opts {
  int v6;           /* the family: of --dst, and --src must match */
  uint32_t dst;     /* IPv4, network order */
  uint8_t dst6[16];
  uint16_t dport;   /* host order */
  /* The walked part of the source: the IPv4 address, or an IPv6 address's
   * last 32 bits (host order); src6 holds the IPv6 prefix's other bits. */
  uint32_t src_net;
  uint8_t src6[16];
  uint32_t src_size;
  double seconds;
  uint64_t count;
  double rate;
  int batch;
  int procs;
  const char *netns;
};

/* Sums the 16-bit big-endian words of `p` (len even) into a 32-bit accumulator. */
static uint32_t sum16(const uint8_t *p, size_t len) {
  uint32_t s = 0;
  for (size_t i = 0; i + 1 < len; i += 2) s += (uint32_t)(p[i] << 8 | p[i + 1]);
  return s;
}

static uint16_t fold(uint64_t s) {
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return (uint16_t)s;
}

/* One sender: sends until count, seconds or (with rate) the schedule ends; returns packets accepted. */
static uint64_t send_loop(const struct opts *o, uint64_t count, double rate, uint64_t start, uint64_t *errors) {
  int fd = socket(o->v6 ? AF_INET6 : AF_INET, SOCK_RAW, IPPROTO_RAW);
  if (fd < 0) die(o->v6 ? "socket(AF_INET6, SOCK_RAW, IPPROTO_RAW)" : "socket(AF_INET, SOCK_RAW, IPPROTO_RAW)");
  int sndbuf = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);

  static uint8_t pkts[MAX_BATCH][MAX_PKT];
  static struct iovec iov[MAX_BATCH];
  static struct mmsghdr msgs[MAX_BATCH];
  /* Where the per-packet fields sit: the walked 32 bits of the source, and the TCP header. */
  const size_t len = o->v6 ? PKT_LEN6 : PKT_LEN4, ip_len = len - 20, src_off = o->v6 ? 20 : 12;
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_addr.s_addr = o->dst};
  struct sockaddr_in6 to6 = {.sin6_family = AF_INET6}; /* sin6_port 0: the socket's protocol */
  memcpy(&to6.sin6_addr, o->dst6, 16);
  for (int i = 0; i < o->batch; i++) {
    uint8_t *p = pkts[i];
    memset(p, 0, MAX_PKT);
    if (o->v6) {
      p[0] = 0x60;                /* version 6, traffic class 0, flow label 0 */
      p[4] = 0; p[5] = 20;        /* payload length: the TCP header */
      p[6] = IPPROTO_TCP;         /* next header */
      p[7] = 64;                  /* hop limit */
      memcpy(p + 8, o->src6, 16); /* source: the prefix; its last 32 bits are walked */
      memcpy(p + 24, o->dst6, 16);
    } else {
      p[0] = 0x45;                /* IPv4, 20-byte header */
      p[2] = 0; p[3] = PKT_LEN4;  /* total length */
      p[6] = 0x40;                /* DF */
      p[8] = 64;                  /* TTL */
      p[9] = IPPROTO_TCP;
      memcpy(p + 16, &o->dst, 4);
    }
    uint8_t *t = p + ip_len;
    t[2] = (uint8_t)(o->dport >> 8); t[3] = (uint8_t)o->dport;
    t[12] = 0x50;                 /* data offset 5 */
    t[13] = 0x02;                 /* SYN */
    t[14] = 0xfa; t[15] = 0xf0;   /* window 64240 */
    iov[i].iov_base = p;
    iov[i].iov_len = len;
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_name = o->v6 ? (void *)&to6 : (void *)&to;
    msgs[i].msg_hdr.msg_namelen = o->v6 ? sizeof to6 : sizeof to;
  }
  /* Constant part of the TCP checksum: the pseudo-header (IPv4: destination,
   * protocol, TCP length; IPv6: the source's first 96 bits, the destination,
   * the upper-layer length 20 and next header 6) and the TCP header with
   * source port, sequence and checksum zero. The walked source bits are
   * zero in the packet here, so they are not in the sum. */
  uint32_t base = o->v6 ? sum16(pkts[0] + 8, 12) + sum16(pkts[0] + 24, 16) + 20 + IPPROTO_TCP + sum16(pkts[0] + 40, 20)
                        : sum16(pkts[0] + 16, 4) + IPPROTO_TCP + 20 + sum16(pkts[0] + 20, 20);

  double t0 = now_s(), end = t0 + o->seconds;
  uint64_t sent = 0;
  uint32_t tick = 0;
  while (sent < count) {
    int n = o->batch;
    if ((uint64_t)n > count - sent) n = (int)(count - sent);
    for (int i = 0; i < n; i++) {
      uint8_t *p = pkts[i], *a = p + src_off, *t = p + ip_len;
      uint64_t idx = start + sent + (uint64_t)i;
      uint32_t src = o->src_net + (uint32_t)(idx % o->src_size);
      uint16_t sport = (uint16_t)(1024 + (idx / o->src_size) % 64511);
      uint32_t seq = (uint32_t)(rnd() >> 16);
      a[0] = (uint8_t)(src >> 24); a[1] = (uint8_t)(src >> 16); a[2] = (uint8_t)(src >> 8); a[3] = (uint8_t)src;
      t[0] = (uint8_t)(sport >> 8); t[1] = (uint8_t)sport;
      t[4] = (uint8_t)(seq >> 24); t[5] = (uint8_t)(seq >> 16); t[6] = (uint8_t)(seq >> 8); t[7] = (uint8_t)seq;
      uint64_t s = (uint64_t)base + (src >> 16) + (src & 0xffff) + sport + (seq >> 16) + (seq & 0xffff);
      uint16_t c = (uint16_t)~fold(s);
      t[16] = (uint8_t)(c >> 8); t[17] = (uint8_t)c;
    }
    int k = sendmmsg(fd, msgs, (unsigned)n, 0);
    if (k < 0) {
      if (errno == ENOBUFS || errno == EAGAIN || errno == EINTR) { (*errors)++; continue; }
      die("sendmmsg");
    }
    sent += (uint64_t)k;
    /* The clock is read once per 16 batches at full rate (cheap enough either way). */
    if (rate > 0 || (++tick & 15) == 0) {
      double t = now_s();
      if (t >= end) break;
      if (rate > 0) {
        double due = t0 + (double)sent / rate;
        if (due > end) due = end;
        if (due > t) {
          struct timespec ts = {.tv_sec = (time_t)(due - t), .tv_nsec = (long)((due - t - (double)(time_t)(due - t)) * 1e9)};
          nanosleep(&ts, NULL);
        }
      }
    }
  }
  close(fd);
  return sent;
}

int main(int argc, char **argv) {
  struct opts o = {.seconds = 3, .count = UINT64_MAX, .rate = 0, .batch = 256, .procs = 1};
  const char *dst = NULL, *src = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) usage("every option takes a value");
    i++;
    if (!strcmp(a, "--dst")) dst = v;
    else if (!strcmp(a, "--dport")) o.dport = (uint16_t)atoi(v);
    else if (!strcmp(a, "--src")) src = v;
    else if (!strcmp(a, "--netns")) o.netns = v;
    else if (!strcmp(a, "--seconds")) o.seconds = atof(v);
    else if (!strcmp(a, "--count")) o.count = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--rate")) o.rate = atof(v);
    else if (!strcmp(a, "--batch")) o.batch = atoi(v);
    else if (!strcmp(a, "--procs")) o.procs = atoi(v);
    else usage("unknown option");
  }
  if (!dst || !src || o.dport == 0) usage("--dst, --dport and --src are required");
  if (o.batch < 1 || o.batch > MAX_BATCH) usage("--batch is 1..1024");
  if (o.procs < 1 || o.procs > 64) usage("--procs is 1..64");
  if (!(o.seconds > 0) || o.seconds > 3600) usage("--seconds is (0, 3600]");
  const char *slash = strchr(src, '/');
  char net[64];
  if (!slash || (size_t)(slash - src) >= sizeof net) usage("--src is ADDRESS/LEN");
  memcpy(net, src, (size_t)(slash - src));
  net[slash - src] = 0;
  int len = atoi(slash + 1);
  o.v6 = strchr(dst, ':') != NULL;
  if (!o.v6) {
    struct in_addr ad;
    if (inet_pton(AF_INET, dst, &ad) != 1) usage("--dst is an IPv4 or IPv6 address");
    o.dst = ad.s_addr;
    if (inet_pton(AF_INET, net, &ad) != 1 || len < 15 || len > 32) usage("--src is A.B.C.D/LEN with LEN 15..32 (an IPv4 --dst)");
    o.src_size = len == 32 ? 1 : 1u << (32 - len);
    o.src_net = ntohl(ad.s_addr) & ~(o.src_size - 1);
    if (!in_bench_range(ntohl(o.dst)) || !in_bench_range(o.src_net)) usage("--dst and --src must be in 198.18.0.0/15 (the testbed's range)");
  } else {
    if (inet_pton(AF_INET6, dst, o.dst6) != 1) usage("--dst is an IPv4 or IPv6 address");
    if (inet_pton(AF_INET6, net, o.src6) != 1 || len < 97 || len > 128) usage("--src is an IPv6 PREFIX/LEN with LEN 97..128 (an IPv6 --dst)");
    o.src_size = len == 128 ? 1 : 1u << (128 - len);
    uint32_t low = (uint32_t)o.src6[12] << 24 | (uint32_t)o.src6[13] << 16 | (uint32_t)o.src6[14] << 8 | o.src6[15];
    o.src_net = low & ~(o.src_size - 1);
    memset(o.src6 + 12, 0, 4); /* the walked bits: written per packet */
    /* A prefix (the /48) check covers every source: the walk stays inside the /LEN. */
    if (!in_bench_range6(o.dst6) || !in_bench_range6(o.src6)) usage("--dst and --src must be in 2001:2::/48 (the testbed's IPv6 range)");
  }

  if (o.netns) {
    char path[256];
    snprintf(path, sizeof path, "/run/netns/%s", o.netns);
    int nfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nfd < 0) die(path);
    if (setns(nfd, CLONE_NEWNET) < 0) die("setns");
    close(nfd);
  }

  double t0 = now_s();
  uint64_t sent = 0, errors = 0;
  int pfd[2];
  if (pipe(pfd) < 0) die("pipe");
  for (int i = 0; i < o.procs; i++) {
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
      close(pfd[0]);
      rng_state = ((uint64_t)getpid() << 32) ^ (uint64_t)(now_s() * 1e9) ^ 0x9E3779B97F4A7C15ULL;
      uint64_t share = o.count == UINT64_MAX ? UINT64_MAX : o.count / (uint64_t)o.procs + ((uint64_t)i < o.count % (uint64_t)o.procs);
      uint64_t res[2] = {0, 0};
      /* Offsets spread over the flow space, so two senders do not send the same flows. */
      uint64_t start = (uint64_t)i * ((uint64_t)o.src_size * 64511u / (uint64_t)o.procs);
      res[0] = send_loop(&o, share, o.rate / o.procs, start, &res[1]);
      if (write(pfd[1], res, sizeof res) != sizeof res) _exit(1);
      _exit(0);
    }
  }
  close(pfd[1]);
  uint64_t res[2];
  while (read(pfd[0], res, sizeof res) == sizeof res) {
    sent += res[0];
    errors += res[1];
  }
  int failed = 0, status;
  while (wait(&status) > 0)
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  double secs = now_s() - t0;
  printf("{\"sent\":%llu,\"seconds\":%.4f,\"rate\":%.0f,\"errors\":%llu,\"procs\":%d}\n", (unsigned long long)sent, secs, (double)sent / secs, (unsigned long long)errors, o.procs);
  return failed;
}
