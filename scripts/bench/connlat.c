/*
 * connlat: a paced (open-loop) HTTP client that times each connection's
 * connect() and time to first byte with the monotonic clock, for the front
 * benchmark's "connect latency added by the front node"
 * (scripts/bench/front.ts --only latency). Testbed use only: the address
 * must be in 198.18.0.0/15.
 *
 *   connlat --dst 198.19.1.1 --port 80 --rate 5000 [--count 20000] [--seconds 5]
 *           [--netns NAME] [--src A.B.C.D,...] [--max-inflight 1024]
 *
 * Connection i starts at t0 + i/rate (non-blocking connect; a source address
 * from --src taken in turn), whatever the earlier ones are doing, so a slow
 * answer does not slow the offered rate (no coordinated omission); when the
 * client itself falls behind its schedule the lag is reported (maxLagUs).
 *   connect  connect() called -> the socket is writable (SYN-ACK received,
 *            the kernel's ACK sent): one round trip through the front node.
 *   ttfb     connect() called -> the first response byte readable.
 * Both include the same epoll wake-up for every mode compared. A
 * connection that fails or is not answered within 2 s counts as an error.
 * Prints one JSON line with count, ok, errors, the percentiles in µs
 * (p50, p90, p99, max) and the achieved rate.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SRC 64
#define TIMEOUT_NS 2000000000LL

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what) {
  fprintf(stderr, "connlat: %s: %s\n", what, strerror(errno));
  exit(1);
}
static void usage(const char *why) {
  fprintf(stderr, "connlat: %s\nusage: connlat --dst IP --port N --rate R [--count N] [--seconds S] [--netns NAME] [--src A,B,..] [--max-inflight N]\n", why);
  exit(2);
}

enum { CONNECTING, WAITING, READING };
struct conn {
  int fd;
  int state;
  int64_t start;
};

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}
static double pct(int64_t *v, size_t n, double p) {
  if (n == 0) return -1;
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return (double)v[i] / 1000.0;
}

int main(int argc, char **argv) {
  const char *dst = NULL, *netns = NULL, *srcs = NULL;
  int port = 80, max_inflight = 1024;
  double rate = 0, seconds = 5;
  long count = 1000000;
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) usage("every option takes a value");
    if (!strcmp(a, "--dst")) dst = v;
    else if (!strcmp(a, "--port")) port = atoi(v);
    else if (!strcmp(a, "--rate")) rate = atof(v);
    else if (!strcmp(a, "--count")) count = atol(v);
    else if (!strcmp(a, "--seconds")) seconds = atof(v);
    else if (!strcmp(a, "--netns")) netns = v;
    else if (!strcmp(a, "--src")) srcs = v;
    else if (!strcmp(a, "--max-inflight")) max_inflight = atoi(v);
    else usage("unknown option");
  }
  if (!dst || !(rate > 0) || count < 1 || !(seconds > 0) || seconds > 600 || max_inflight < 1 || max_inflight > 60000) usage("--dst and --rate are required; --count >= 1, --seconds (0, 600], --max-inflight 1..60000");
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, dst, &to.sin_addr) != 1) usage("--dst is an IPv4 address");
  if ((ntohl(to.sin_addr.s_addr) & 0xfffe0000u) != 0xc6120000u) usage("--dst must be in 198.18.0.0/15 (the testbed's range)");
  struct sockaddr_in src[MAX_SRC];
  int nsrc = 0;
  if (srcs) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", srcs);
    for (char *t = strtok(buf, ","); t && nsrc < MAX_SRC; t = strtok(NULL, ",")) {
      memset(&src[nsrc], 0, sizeof src[nsrc]);
      src[nsrc].sin_family = AF_INET;
      if (inet_pton(AF_INET, t, &src[nsrc].sin_addr) != 1) usage("--src is a comma-separated list of IPv4 addresses");
      nsrc++;
    }
  }
  if (netns) {
    char path[256];
    snprintf(path, sizeof path, "/run/netns/%s", netns);
    int nfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nfd < 0) die(path);
    if (setns(nfd, CLONE_NEWNET) < 0) die("setns");
    close(nfd);
  }

  int ep = epoll_create1(0);
  if (ep < 0) die("epoll_create1");
  struct conn *conns = calloc((size_t)max_inflight, sizeof *conns);
  int *freelist = malloc(sizeof(int) * (size_t)max_inflight);
  int64_t *lat_c = malloc(sizeof(int64_t) * (size_t)count), *lat_t = malloc(sizeof(int64_t) * (size_t)count);
  if (!conns || !freelist || !lat_c || !lat_t) die("malloc");
  for (int i = 0; i < max_inflight; i++) conns[i].fd = -1;
  int nfree = max_inflight;
  for (int i = 0; i < max_inflight; i++) freelist[i] = max_inflight - 1 - i;
  static const char req[] = "GET / HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n";

  int64_t t0 = now_ns(), end = t0 + (int64_t)(seconds * 1e9), period = (int64_t)(1e9 / rate);
  long started = 0, ok = 0, errors = 0, nc = 0, nt = 0, skipped = 0;
  int inflight = 0;
  int64_t max_lag = 0;
  char rbuf[16384];
  struct epoll_event evs[256];
  for (;;) {
    int64_t t = now_ns();
    /* Start every connection now due (open loop); stop starting at count or the deadline. */
    while (started < count && t < end && t0 + started * period <= t) {
      int64_t lag = t - (t0 + started * period);
      if (lag > max_lag) max_lag = lag;
      if (nfree == 0) { skipped++; started++; errors++; continue; }
      int slot = freelist[--nfree];
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) die("socket");
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (nsrc > 0) {
        setsockopt(fd, SOL_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&src[started % nsrc], sizeof src[0]) < 0) die("bind");
      }
      conns[slot] = (struct conn){.fd = fd, .state = CONNECTING, .start = now_ns()};
      started++;
      if (connect(fd, (struct sockaddr *)&to, sizeof to) < 0 && errno != EINPROGRESS) {
        close(fd); freelist[nfree++] = slot; errors++; continue;
      }
      struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)slot};
      if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
      inflight++;
      t = now_ns();
    }
    if ((started >= count || t >= end) && inflight == 0) break;
    /* Expire connections unanswered for 2 s (a scan per wake-up is cheap at this size). */
    if (t > end + TIMEOUT_NS) {
      for (int s = 0; s < max_inflight; s++) if (conns[s].fd >= 0 && t - conns[s].start > TIMEOUT_NS) {
        close(conns[s].fd); conns[s].fd = -1; freelist[nfree++] = s; inflight--; errors++;
      }
      if (inflight == 0) break;
    }
    int wait_ms = 0;
    if (started < count && t < end) {
      int64_t next = t0 + started * period - now_ns();
      wait_ms = next > 1000000 ? (int)(next / 1000000) : 0;
    } else {
      wait_ms = 50;
    }
    int n = epoll_wait(ep, evs, 256, wait_ms);
    if (n < 0 && errno != EINTR) die("epoll_wait");
    int64_t te = now_ns();
    for (int i = 0; i < n; i++) {
      int slot = (int)evs[i].data.u32;
      struct conn *c = &conns[slot];
      int done = 0, failed = 0;
      if (c->state == CONNECTING) {
        int err = 0;
        socklen_t l = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
        if (err != 0 || (evs[i].events & (EPOLLERR | EPOLLHUP))) { failed = 1; }
        else {
          lat_c[nc++] = te - c->start;
          if (write(c->fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) failed = 1;
          else {
            c->state = WAITING;
            struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)slot};
            epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
          }
        }
      } else {
        ssize_t r;
        while ((r = read(c->fd, rbuf, sizeof rbuf)) > 0) {
          if (c->state == WAITING) { lat_t[nt++] = te - c->start; c->state = READING; }
        }
        if (r == 0) done = 1;
        else if (errno != EAGAIN) failed = 1;
      }
      if (done || failed) {
        close(c->fd); c->fd = -1; freelist[nfree++] = slot; inflight--;
        if (failed || c->state != READING) errors++; else ok++;
      }
    }
  }
  double secs = (double)(now_ns() - t0) / 1e9;
  qsort(lat_c, (size_t)nc, sizeof *lat_c, cmp64);
  qsort(lat_t, (size_t)nt, sizeof *lat_t, cmp64);
  printf("{\"count\":%ld,\"ok\":%ld,\"errors\":%ld,\"skipped\":%ld,\"seconds\":%.3f,\"rate\":%.0f,\"maxLagUs\":%.0f,"
         "\"connectUs\":{\"n\":%ld,\"p50\":%.1f,\"p90\":%.1f,\"p99\":%.1f,\"max\":%.1f},"
         "\"ttfbUs\":{\"n\":%ld,\"p50\":%.1f,\"p90\":%.1f,\"p99\":%.1f,\"max\":%.1f}}\n",
         started, ok, errors, skipped, secs, (double)started / secs, (double)max_lag / 1000.0,
         nc, pct(lat_c, (size_t)nc, 0.5), pct(lat_c, (size_t)nc, 0.9), pct(lat_c, (size_t)nc, 0.99), pct(lat_c, (size_t)nc, 1.0),
         nt, pct(lat_t, (size_t)nt, 0.5), pct(lat_t, (size_t)nt, 0.9), pct(lat_t, (size_t)nt, 0.99), pct(lat_t, (size_t)nt, 1.0));
  return 0;
}
