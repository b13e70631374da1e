/*
 * A UDP socket read with recvmmsg and written with sendmmsg, for `sluice
 * dns` (src/dns/udp_batch.ts): one crossing into JavaScript per batch of
 * datagrams instead of one event and one send per datagram (Node's dgram
 * has neither call).
 *
 * Memory, all handed over by JavaScript once at open and kept referenced
 * until close; nothing is allocated per datagram on either side:
 *   rx      nslots slots of rx.length / nslots octets; datagram i lands at
 *           slot i (a datagram larger than its slot is cut: TRUNC flag).
 *   rxMeta  UDP_RX_META_WORDS words per slot: length, flags, family (4|6),
 *           source port, source address (IPv4: word 4; IPv6: words 4..7),
 *           each word host order of the address's network-order octets.
 *   tx      answers, packed by JavaScript.
 *   txMeta  UDP_TX_META_WORDS words per answer: rx slot (the destination is
 *           that slot's source address and port), offset in tx, length.
 *   stats   UDP_STATS_WORDS doubles (U_* below), read by JavaScript.
 *
 * Flow: on readable, recvmmsg up to nslots datagrams, fill rxMeta, call
 * onBatch(n) once; it answers into tx/txMeta and returns how many answers
 * there are; sendmmsg sends them (a partial send is continued; a datagram
 * the kernel refuses is counted and skipped; EAGAIN waits for POLLOUT up to
 * SEND_WAIT_MS once, then drops the rest, counted). JavaScript may send
 * early from inside onBatch (udpSend), when tx is full. The destinations
 * of txMeta are only valid during onBatch: an entry naming a slot not
 * filled by the current batch is refused (U_BAD_TX), never sent to a stale
 * address.
 *
 * Errors: a failed recvmmsg (an ICMP error pending on the socket, ENOMEM)
 * is counted and reading goes on; an EPOLLERR wake-up clears SO_ERROR and
 * polls again. Only a poll that cannot be restarted reaches onError.
 *
 * The socket is created and bound here (SO_REUSEPORT when asked, IPV6_V6ONLY
 * for IPv6 as dgram's ipv6Only), so that no other reader competes for it;
 * udpFd gives its descriptor to native/src/reuseport.c's steering program.
 * Use from the main JS thread of one environment (uv loop affinity).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>
#include "napi_util.h"

/* Layout shared with src/dns/udp_batch.ts (keep in sync). */
enum { RX_LEN, RX_FLAGS, RX_FAMILY, RX_PORT, RX_ADDR, UDP_RX_META_WORDS = RX_ADDR + 4 };
enum { TX_SLOT, TX_OFF, TX_LEN, UDP_TX_META_WORDS };
#define RXF_TRUNCATED 1u
enum {
  U_DATAGRAMS,      /* datagrams received */
  U_BATCHES,        /* onBatch calls */
  U_MAX_BATCH,      /* largest batch */
  U_SENT,           /* answers the kernel took */
  U_SEND_ERRORS,    /* answers the kernel refused (EPERM, ENETUNREACH, EMSGSIZE...) */
  U_SEND_DROPPED,   /* answers not sent: the send buffer stayed full (EAGAIN) */
  U_RECV_ERRORS,    /* failed recvmmsg calls and EPOLLERR wake-ups */
  U_LAST_ERRNO,
  U_TRUNCATED,      /* datagrams larger than a slot (cut) */
  U_WAKEUPS,        /* poll callbacks */
  U_CALLBACK_ERRORS,/* onBatch threw */
  U_BAD_TX,         /* txMeta entries refused (a bug in the caller) */
  U_SEND_CALLS,     /* sendmmsg calls */
  UDP_STATS_WORDS
};

/* recvmmsg batches per wake-up at most: uv_poll is level triggered, what is
 * left wakes us on the next loop turn, so timers, TCP and IPC are not
 * starved by a flood. */
#define BATCHES_PER_WAKE 4
/* How long one send waits for room in the send buffer before dropping. */
#define SEND_WAIT_MS 2
#define MAX_SLOTS 1024 /* UIO_MAXIOV: the kernel's limit on vlen */

typedef struct {
  napi_env env;
  uv_poll_t poll;
  int fd, closing;
  uint8_t *rx, *tx;
  size_t slot, tx_size;
  uint32_t nslots, txmax, *rxmeta, *txmeta;
  uint32_t current; /* slots filled by the batch being handled (0 outside onBatch) */
  double *stats;
  struct mmsghdr *rmsg, *smsg;
  struct iovec *riov, *siov;
  struct sockaddr_in6 *names; /* room for either family */
  napi_ref refs[8];
  size_t nrefs;
  napi_async_context async_ctx;
} udp_batch;
enum { R_ON_BATCH, R_ON_ERROR };

#define ARG(cond, what)                                                                           \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      throw_coded(env, "ERR_SLUICE_NATIVE_ARG", "native argument check failed: " what, 0, NULL); \
      return NULL;                                                                                \
    }                                                                                             \
  } while (0)

static void batch_free(udp_batch *u) {
  for (size_t i = 0; i < u->nrefs; i++) napi_delete_reference(u->env, u->refs[i]);
  if (u->async_ctx) napi_async_destroy(u->env, u->async_ctx);
  if (u->fd >= 0) close(u->fd);
  free(u->rmsg);
  free(u->smsg);
  free(u->riov);
  free(u->siov);
  free(u->names);
  free(u);
}

static void on_closed(uv_handle_t *h) { batch_free(h->data); }

/* Sends txMeta entries [0, count) of the current batch. */
static void send_tx(udp_batch *u, uint32_t count) {
  if (count > u->txmax) { u->stats[U_BAD_TX] += count; return; }
  uint32_t m = 0;
  for (uint32_t j = 0; j < count; j++) {
    const uint32_t *t = u->txmeta + (size_t)j * UDP_TX_META_WORDS;
    uint32_t slot = t[TX_SLOT], off = t[TX_OFF], len = t[TX_LEN];
    if (slot >= u->current || off > u->tx_size || len > u->tx_size - off || len == 0) {
      u->stats[U_BAD_TX] += 1;
      continue;
    }
    u->siov[m] = (struct iovec){ u->tx + off, len };
    struct msghdr *h = &u->smsg[m].msg_hdr;
    h->msg_name = &u->names[slot];
    h->msg_namelen = u->rmsg[slot].msg_hdr.msg_namelen;
    h->msg_iov = &u->siov[m];
    h->msg_iovlen = 1;
    h->msg_control = NULL;
    h->msg_controllen = 0;
    h->msg_flags = 0;
    m++;
  }
  uint32_t i = 0;
  int waited = 0;
  while (i < m) {
    u->stats[U_SEND_CALLS] += 1;
    int r = sendmmsg(u->fd, u->smsg + i, m - i, MSG_DONTWAIT);
    if (r > 0) {
      /* A partial send: the rest goes in the next call, which reports the
       * error (if any) of the first datagram not sent. */
      i += (uint32_t)r;
      u->stats[U_SENT] += r;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd p = { u->fd, POLLOUT, 0 };
      if (!waited && poll(&p, 1, SEND_WAIT_MS) > 0) { waited = 1; continue; }
      u->stats[U_SEND_DROPPED] += m - i;
      u->stats[U_LAST_ERRNO] = EAGAIN;
      return;
    }
    /* This datagram was refused (its error is not the socket's): skip it. */
    u->stats[U_SEND_ERRORS] += 1;
    u->stats[U_LAST_ERRNO] = r < 0 ? errno : 0;
    i++;
  }
}

static napi_status call(udp_batch *u, napi_ref fn_ref, napi_value arg, napi_value *result) {
  napi_value fn, recv;
  napi_get_reference_value(u->env, fn_ref, &fn);
  napi_get_global(u->env, &recv);
  /* make_callback: nextTick and promise jobs queued by the callback run right after it, as after any I/O callback. */
  return napi_make_callback(u->env, u->async_ctx, recv, fn, 1, &arg, result);
}

static void report_async_error(udp_batch *u, int err, const char *syscall) {
  napi_handle_scope scope;
  napi_open_handle_scope(u->env, &scope);
  char text[160];
  snprintf(text, sizeof text, "UDP batch socket: %s (%s)", strerror(err), syscall);
  napi_value result, error = coded_error(u->env, "ERR_SLUICE_UDP_BATCH", text, err, syscall);
  if (call(u, u->refs[R_ON_ERROR], error, &result) != napi_ok) raise_pending(u->env);
  napi_close_handle_scope(u->env, scope);
}

/* Datagrams [0, n) are in rx: fill rxMeta, one JS call, send what it answered. */
static void deliver(udp_batch *u, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    uint32_t *m = u->rxmeta + (size_t)i * UDP_RX_META_WORDS;
    const struct msghdr *h = &u->rmsg[i].msg_hdr;
    m[RX_LEN] = u->rmsg[i].msg_len;
    m[RX_FLAGS] = 0;
    if (h->msg_flags & MSG_TRUNC) {
      m[RX_FLAGS] |= RXF_TRUNCATED;
      m[RX_LEN] = u->slot < m[RX_LEN] ? (uint32_t)u->slot : m[RX_LEN];
      u->stats[U_TRUNCATED] += 1;
    }
    const struct sockaddr_in6 *s6 = &u->names[i];
    if (s6->sin6_family == AF_INET6) {
      m[RX_FAMILY] = 6;
      m[RX_PORT] = ntohs(s6->sin6_port);
      uint32_t w[4];
      memcpy(w, &s6->sin6_addr, 16);
      for (int k = 0; k < 4; k++) m[RX_ADDR + k] = ntohl(w[k]);
    } else {
      const struct sockaddr_in *s4 = (const struct sockaddr_in *)s6;
      m[RX_FAMILY] = 4;
      m[RX_PORT] = ntohs(s4->sin_port);
      m[RX_ADDR] = ntohl(s4->sin_addr.s_addr);
      m[RX_ADDR + 1] = m[RX_ADDR + 2] = m[RX_ADDR + 3] = 0;
    }
  }
  u->stats[U_DATAGRAMS] += n;
  u->stats[U_BATCHES] += 1;
  if (n > u->stats[U_MAX_BATCH]) u->stats[U_MAX_BATCH] = n;
  u->current = n;
  napi_handle_scope scope;
  napi_open_handle_scope(u->env, &scope);
  napi_value arg, result;
  uint32_t count = 0;
  napi_create_uint32(u->env, n, &arg);
  if (call(u, u->refs[R_ON_BATCH], arg, &result) != napi_ok) {
    u->stats[U_CALLBACK_ERRORS] += 1;
    raise_pending(u->env);
  } else if (napi_get_value_uint32(u->env, result, &count) != napi_ok) {
    count = 0;
  }
  if (!u->closing) send_tx(u, count);
  u->current = 0;
  napi_close_handle_scope(u->env, scope);
}

static void on_readable(uv_poll_t *handle, int status, int events) {
  udp_batch *u = handle->data;
  if (u->closing) return;
  u->stats[U_WAKEUPS] += 1;
  if (status < 0) {
    /* libuv reports EPOLLERR as UV_EBADF and stops the poll. On a UDP socket
     * that is a pending error (an ICMP error queued for it), not a broken
     * socket: read SO_ERROR (which clears it) and poll again. */
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(u->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
    u->stats[U_RECV_ERRORS] += 1;
    u->stats[U_LAST_ERRNO] = err != 0 ? err : -status;
    int ue = uv_poll_start(&u->poll, UV_READABLE, on_readable);
    if (ue < 0) report_async_error(u, -ue, "uv_poll_start");
    return;
  }
  for (int b = 0; b < BATCHES_PER_WAKE && !u->closing; b++) {
    for (uint32_t i = 0; i < u->nslots; i++) {
      u->rmsg[i].msg_hdr.msg_namelen = sizeof u->names[i];
      u->rmsg[i].msg_hdr.msg_flags = 0;
    }
    int got = recvmmsg(u->fd, u->rmsg, u->nslots, MSG_DONTWAIT, NULL);
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      /* ECONNREFUSED and the like: an error queued on the socket, reported
       * (and cleared) by this call. The next datagram is unaffected. */
      u->stats[U_RECV_ERRORS] += 1;
      u->stats[U_LAST_ERRNO] = errno;
      continue;
    }
    if (got == 0) break;
    deliver(u, (uint32_t)got);
    if ((uint32_t)got < u->nslots) break; /* drained */
  }
}

/* udpOpen(family 4|6, address, port, reusePort, rx, rxMeta, tx, txMeta, stats, onBatch(n) -> answers, onError(err)) -> handle */
static napi_value udp_open(napi_env env, napi_callback_info info) {
  size_t argc = 11;
  napi_value a[11];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  ARG(argc == 11, "udpOpen() takes 11 arguments");
  uint32_t family, port;
  bool reuse;
  char host[64];
  size_t hostlen;
  ARG(get_u32(env, a[0], &family) && (family == 4 || family == 6), "family 4|6");
  ARG(napi_get_value_string_utf8(env, a[1], host, sizeof host, &hostlen) == napi_ok && hostlen < sizeof host - 1, "address");
  ARG(get_u32(env, a[2], &port) && port <= 65535, "port");
  ARG(napi_get_value_bool(env, a[3], &reuse) == napi_ok, "reusePort");
  void *rx, *rxmeta, *tx, *txmeta, *stats;
  size_t rx_len, rxmeta_len, tx_len, txmeta_len, stats_len;
  ARG(get_typed(env, a[4], napi_uint8_array, &rx, &rx_len), "rx");
  ARG(get_typed(env, a[5], napi_uint32_array, &rxmeta, &rxmeta_len), "rxMeta");
  ARG(get_typed(env, a[6], napi_uint8_array, &tx, &tx_len), "tx");
  ARG(get_typed(env, a[7], napi_uint32_array, &txmeta, &txmeta_len), "txMeta");
  ARG(get_typed(env, a[8], napi_float64_array, &stats, &stats_len) && stats_len >= UDP_STATS_WORDS, "stats");
  ARG(is_function(env, a[9]) && is_function(env, a[10]), "callbacks");
  uint32_t nslots = (uint32_t)(rxmeta_len / UDP_RX_META_WORDS), txmax = (uint32_t)(txmeta_len / UDP_TX_META_WORDS);
  ARG(nslots >= 1 && nslots <= MAX_SLOTS && rx_len / nslots >= 512, "rxMeta: 1..1024 slots, rx >= 512 octets a slot");
  ARG(txmax >= 1 && txmax <= MAX_SLOTS && tx_len >= 512, "txMeta: 1..1024 answers, tx >= 512 octets");

  struct sockaddr_in6 sa6 = { 0 };
  struct sockaddr_in sa4 = { 0 };
  if (family == 6) {
    sa6.sin6_family = AF_INET6;
    sa6.sin6_port = htons((uint16_t)port);
    ARG(inet_pton(AF_INET6, host, &sa6.sin6_addr) == 1, "address: an IPv6 address");
  } else {
    sa4.sin_family = AF_INET;
    sa4.sin_port = htons((uint16_t)port);
    ARG(inet_pton(AF_INET, host, &sa4.sin_addr) == 1, "address: an IPv4 address");
  }

  udp_batch *u = calloc(1, sizeof *u);
  if (!u) {
    throw_coded(env, "ERR_SLUICE_UDP_BATCH", "out of memory", ENOMEM, "calloc");
    return NULL;
  }
  u->env = env;
  u->fd = -1;
  u->rx = rx;
  u->tx = tx;
  u->slot = rx_len / nslots;
  u->tx_size = tx_len;
  u->nslots = nslots;
  u->txmax = txmax;
  u->rxmeta = rxmeta;
  u->txmeta = txmeta;
  u->stats = stats;
  u->rmsg = calloc(nslots, sizeof *u->rmsg);
  u->riov = calloc(nslots, sizeof *u->riov);
  u->names = calloc(nslots, sizeof *u->names);
  u->smsg = calloc(txmax, sizeof *u->smsg);
  u->siov = calloc(txmax, sizeof *u->siov);
  if (!u->rmsg || !u->riov || !u->names || !u->smsg || !u->siov) {
    batch_free(u);
    throw_coded(env, "ERR_SLUICE_UDP_BATCH", "out of memory", ENOMEM, "calloc");
    return NULL;
  }
  for (uint32_t i = 0; i < nslots; i++) {
    u->riov[i] = (struct iovec){ u->rx + (size_t)i * u->slot, u->slot };
    u->rmsg[i].msg_hdr = (struct msghdr){ .msg_name = &u->names[i], .msg_namelen = sizeof u->names[i], .msg_iov = &u->riov[i], .msg_iovlen = 1 };
  }
  napi_value keep[] = { a[9], a[10], a[4], a[5], a[6], a[7], a[8] };
  for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) napi_create_reference(env, keep[i], 1, &u->refs[u->nrefs++]);

  const char *failed = NULL;
  int one = 1;
  u->fd = socket(family == 6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (u->fd < 0) failed = "socket";
  else if (family == 6 && setsockopt(u->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0) failed = "setsockopt IPV6_V6ONLY";
  else if (reuse && setsockopt(u->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) failed = "setsockopt SO_REUSEPORT";
  else if (family == 6 ? bind(u->fd, (struct sockaddr *)&sa6, sizeof sa6) < 0 : bind(u->fd, (struct sockaddr *)&sa4, sizeof sa4) < 0) failed = "bind";
  if (failed) {
    int e = errno;
    char text[160];
    snprintf(text, sizeof text, "UDP %s%s%s:%u", family == 6 ? "[" : "", host, family == 6 ? "]" : "", port);
    batch_free(u);
    throw_coded(env, "ERR_SLUICE_UDP_BATCH", text, e, failed);
    return NULL;
  }
  napi_value name, ext;
  napi_create_string_utf8(env, "SluiceUdpBatch", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, NULL, name, &u->async_ctx);
  uv_loop_t *loop;
  napi_get_uv_event_loop(env, &loop);
  int ue = uv_poll_init(loop, &u->poll, u->fd);
  if (ue == 0) {
    u->poll.data = u;
    ue = uv_poll_start(&u->poll, UV_READABLE, on_readable);
  }
  if (ue != 0) {
    batch_free(u);
    throw_coded(env, "ERR_SLUICE_UDP_BATCH", "cannot poll the UDP socket", -ue, "uv_poll_start");
    return NULL;
  }
  napi_create_external(env, u, NULL, NULL, &ext);
  /* The handle keeps itself alive until close(): the caller owns its lifetime. */
  napi_create_reference(env, ext, 1, &u->refs[u->nrefs++]);
  return ext;
}

static udp_batch *handle_arg(napi_env env, napi_callback_info info, size_t *argc, napi_value *a) {
  napi_get_cb_info(env, info, argc, a, NULL, NULL);
  udp_batch *u = *argc >= 1 ? get_external(env, a[0]) : NULL;
  return u && !u->closing ? u : NULL;
}

/* udpSend(handle, count): sends txMeta entries [0, count) now (only inside onBatch). */
static napi_value udp_send(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value a[2];
  udp_batch *u = handle_arg(env, info, &argc, a);
  uint32_t count;
  ARG(argc == 2 && u != NULL && get_u32(env, a[1], &count), "udpSend(handle, count)");
  send_tx(u, count);
  return NULL;
}

/* udpFd(handle) -> the socket's descriptor (for SO_ATTACH_REUSEPORT_CBPF). */
static napi_value udp_fd(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1], out;
  udp_batch *u = handle_arg(env, info, &argc, a);
  ARG(argc == 1 && u != NULL, "udpFd(handle)");
  napi_create_int32(env, u->fd, &out);
  return out;
}

/* udpLocalPort(handle) -> the bound port (port 0 asks the kernel for one). */
static napi_value udp_local_port(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1], out;
  udp_batch *u = handle_arg(env, info, &argc, a);
  ARG(argc == 1 && u != NULL, "udpLocalPort(handle)");
  struct sockaddr_in6 sa;
  socklen_t len = sizeof sa;
  uint32_t port = 0;
  if (getsockname(u->fd, (struct sockaddr *)&sa, &len) == 0) port = ntohs(sa.sin6_port); /* same offset in sockaddr_in */
  napi_create_uint32(env, port, &out);
  return out;
}

/* udpSourceText(handle, slot) -> the slot's source address as text (inet_ntop,
 * the form dgram's rinfo.address has), only inside onBatch. Called on a miss
 * of the caller's address cache, not per datagram. */
static napi_value udp_source_text(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value a[2], out;
  udp_batch *u = handle_arg(env, info, &argc, a);
  uint32_t slot;
  ARG(argc == 2 && u != NULL && get_u32(env, a[1], &slot) && slot < u->current, "udpSourceText(handle, slot of the current batch)");
  char text[INET6_ADDRSTRLEN];
  const struct sockaddr_in6 *s6 = &u->names[slot];
  const char *ok = s6->sin6_family == AF_INET6 ? inet_ntop(AF_INET6, &s6->sin6_addr, text, sizeof text)
                                               : inet_ntop(AF_INET, &((const struct sockaddr_in *)s6)->sin_addr, text, sizeof text);
  napi_create_string_latin1(env, ok ? text : "", NAPI_AUTO_LENGTH, &out);
  return out;
}

/* udpClose(handle): stop polling; the socket is closed and memory freed once libuv has closed the poll handle. */
static napi_value udp_close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  udp_batch *u = argc == 1 ? get_external(env, a[0]) : NULL;
  ARG(u != NULL, "udpClose(handle)");
  if (u->closing) return NULL;
  u->closing = 1;
  uv_poll_stop(&u->poll);
  uv_close((uv_handle_t *)&u->poll, on_closed);
  return NULL;
}

void udp_batch_register(napi_env env, napi_value exports) {
  napi_property_descriptor p[] = {
    { "udpOpen", NULL, udp_open, NULL, NULL, NULL, napi_default, NULL },
    { "udpSend", NULL, udp_send, NULL, NULL, NULL, napi_default, NULL },
    { "udpFd", NULL, udp_fd, NULL, NULL, NULL, napi_default, NULL },
    { "udpLocalPort", NULL, udp_local_port, NULL, NULL, NULL, napi_default, NULL },
    { "udpSourceText", NULL, udp_source_text, NULL, NULL, NULL, napi_default, NULL },
    { "udpClose", NULL, udp_close, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof p / sizeof p[0], p);
  set_number(env, exports, "UDP_RX_META_WORDS", UDP_RX_META_WORDS);
  set_number(env, exports, "UDP_TX_META_WORDS", UDP_TX_META_WORDS);
  set_number(env, exports, "UDP_STATS_WORDS", UDP_STATS_WORDS);
}
