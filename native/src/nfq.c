/*
 * sluice_nfq: a small Node-API binding over libnetfilter_queue's libmnl API.
 *
 * Shape of the binding (why it looks like this):
 *   - JavaScript allocates every buffer once and hands it over at open():
 *     the receive area, the per-packet metadata array, the staged-verdict
 *     array, the replacement-payload area and the statistics array. The C side
 *     never allocates per packet and never creates JS objects per packet.
 *   - One uv_poll on the netlink socket. Each wakeup drains up to max_batch
 *     messages with non-blocking recvmsg(), writing the datagrams one after
 *     the other into the receive area, so the payloads stay where the kernel
 *     put them (zero copy). Then JavaScript is called ONCE with the count.
 *   - JavaScript returns how many verdicts it staged; they are encoded as
 *     back-to-back netlink messages and sent with one sendto().
 *
 * The TypeScript wrapper (src/nfqueue/) validates every argument; this file
 * only checks what it must to stay memory-safe, and reports violations as
 * errors with code ERR_NFQ_NATIVE_ASSERT.
 *
 * Must be used from the main JS thread of one environment (uv loop affinity).
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>

#include <libmnl/libmnl.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>

#include <node_api.h>
#include <uv.h>

#include "napi_util.h"
#include "nflog.h"
#include "nl_util.h"
#include "sd_notify.h"

/* ---- layout shared with src/nfqueue/layout.ts (keep in sync) ---------- */
enum {
  M_ID = 0, M_HOOK, M_MARK, M_CTMARK, M_CTINFO, M_INDEV, M_OUTDEV,
  M_PAYLOAD_OFF, M_PAYLOAD_LEN, M_FLAGS, M_ORIG_LEN, M_HWPROTO,
  META_WORDS
};
/* bits in M_FLAGS */
#define PF_HAS_CT        (1u << 0) /* NFQA_CT present: ctmark valid */
#define PF_HAS_CTINFO    (1u << 1) /* NFQA_CT_INFO present: ctinfo valid */
#define PF_CSUM_NOTREADY (1u << 2) /* NFQA_SKB_CSUMNOTREADY (only with GSO) */
#define PF_GSO           (1u << 3) /* NFQA_SKB_GSO */
#define PF_TRUNCATED     (1u << 4) /* payload cut at copy_range */
#define PF_HAS_MARK      (1u << 5)

enum { V_ID = 0, V_CODE, V_MARK, V_PAYLOAD_OFF, V_PAYLOAD_LEN, VERDICT_WORDS };
/* bits in V_CODE above the low byte, which holds the verdict itself */
#define VF_SET_MARK   (1u << 8)
#define VF_PAYLOAD_TX (1u << 9)  /* replacement payload in the tx area */
#define VF_PAYLOAD_RX (1u << 10) /* replacement payload in the rx area (same batch only) */

enum {
  S_PACKETS = 0, S_BATCHES, S_MAX_BATCH, S_VERDICTS, S_SEND_ERRORS,
  S_KERNEL_ERRORS, S_OVERRUNS, S_BAD_MESSAGES, S_RECV_ERRORS, S_LAST_ERRNO,
  S_TRUNCATED_READS, S_CALLBACK_ERRORS, STATS_WORDS
};

/* Flags accepted in open(); same values as the kernel's NFQA_CFG_F_*. */
#define OPEN_FLAG_MASK (NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_CONNTRACK | NFQA_CFG_F_GSO)

/*
 * Bytes of netlink framing and attributes around a payload. The largest part
 * is the nested conntrack attribute (tuples, status, mark, ...) when
 * NFQA_CFG_F_CONNTRACK is on; 4 KiB leaves a wide margin.
 */
#define MSG_OVERHEAD 4096
/*
 * netlink_sendmsg() refuses one datagram larger than sk_sndbuf - 32 with
 * EMSGSIZE. We raise sk_sndbuf to 1 MiB at open and keep each send below
 * this bound, which still fits one 64 KiB replacement payload.
 */
#define TX_LIMIT (192 * 1024)

typedef struct sq_queue_s {
  napi_env env;
  uv_poll_t poll;
  struct mnl_socket *nl;
  uint32_t portid;
  uint16_t queue_num;
  int closing;        /* close() was called; memory freed in on_closed */
  int in_callback;    /* JS batch callback running (rx payload refs valid) */
  double wakeups;     /* on_readable entries: liveness() shows the loop drains the socket */

  uint8_t *rx; size_t rx_size; size_t rx_need;
  uint32_t *meta; uint32_t max_batch;
  uint32_t *vbuf; uint32_t max_verdicts;
  uint8_t *txp; size_t txp_size;
  double *stats;
  uint8_t *tx; /* encoded verdict messages, TX_LIMIT bytes, C-owned */

  napi_ref on_batch, on_error, keep_rx, keep_meta, keep_vbuf, keep_txp, keep_stats, self;
  napi_async_context async_ctx;
} sq_queue;

/* ---- errors ------------------------------------------------------------ */

#define ASSERT_ARG(env, cond, what)                                                    \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      throw_coded((env), "ERR_NFQ_NATIVE_ASSERT", "native argument check failed: " what, 0, NULL); \
      return NULL;                                                                     \
    }                                                                                  \
  } while (0)

/* ---- receive path ------------------------------------------------------ */

static int ct_attr_cb(const struct nlattr *attr, void *data) {
  const struct nlattr **tb = data;
  int type = mnl_attr_get_type(attr);
  if (mnl_attr_type_valid(attr, CTA_MAX) < 0) return MNL_CB_OK; /* newer kernel: skip */
  if (type == CTA_MARK && mnl_attr_validate(attr, MNL_TYPE_U32) < 0) return MNL_CB_OK;
  tb[type] = attr;
  return MNL_CB_OK;
}

/* Fills one metadata slot from a NFQNL_MSG_PACKET message. Returns 0 if unusable. */
static int decode_packet(sq_queue *q, const struct nlmsghdr *nlh, uint32_t *m) {
  struct nlattr *attr[NFQA_MAX + 1];
  memset(attr, 0, sizeof attr);
  if (nfq_nlmsg_parse(nlh, attr) < 0 || !attr[NFQA_PACKET_HDR]) return 0;
  const struct nfqnl_msg_packet_hdr *ph = mnl_attr_get_payload(attr[NFQA_PACKET_HDR]);
  uint32_t flags = 0;
  m[M_ID] = ntohl(ph->packet_id);
  m[M_HOOK] = ph->hook;
  m[M_HWPROTO] = ntohs(ph->hw_protocol);
  m[M_MARK] = 0;
  if (attr[NFQA_MARK]) { m[M_MARK] = ntohl(mnl_attr_get_u32(attr[NFQA_MARK])); flags |= PF_HAS_MARK; }
  m[M_INDEV] = attr[NFQA_IFINDEX_INDEV] ? ntohl(mnl_attr_get_u32(attr[NFQA_IFINDEX_INDEV])) : 0;
  m[M_OUTDEV] = attr[NFQA_IFINDEX_OUTDEV] ? ntohl(mnl_attr_get_u32(attr[NFQA_IFINDEX_OUTDEV])) : 0;

  uint32_t plen = 0, poff = 0;
  if (attr[NFQA_PAYLOAD]) {
    plen = mnl_attr_get_payload_len(attr[NFQA_PAYLOAD]);
    poff = (uint32_t)((const uint8_t *)mnl_attr_get_payload(attr[NFQA_PAYLOAD]) - q->rx);
  }
  m[M_PAYLOAD_OFF] = poff;
  m[M_PAYLOAD_LEN] = plen;
  /* Kernel quirk: NFQA_CAP_LEN is only sent when the payload was cut at
   * copy_range; it then holds the packet's real length. */
  m[M_ORIG_LEN] = plen;
  if (attr[NFQA_CAP_LEN]) {
    uint32_t cap = ntohl(mnl_attr_get_u32(attr[NFQA_CAP_LEN]));
    if (cap > plen) { m[M_ORIG_LEN] = cap; flags |= PF_TRUNCATED; }
  }
  if (attr[NFQA_SKB_INFO]) {
    uint32_t info = ntohl(mnl_attr_get_u32(attr[NFQA_SKB_INFO]));
    /* Only reported with NFQA_CFG_F_GSO: the L4 checksum is partial and
     * will be completed by the NIC/stack later, so do not verify it. */
    if (info & NFQA_SKB_CSUMNOTREADY) flags |= PF_CSUM_NOTREADY;
    if (info & NFQA_SKB_GSO) flags |= PF_GSO;
  }
  m[M_CTMARK] = 0;
  m[M_CTINFO] = 0;
  /* NFQA_CT / NFQA_CT_INFO appear only with NFQA_CFG_F_CONNTRACK and only if
   * the packet has a conntrack entry (not for untracked packets). Kernels
   * built without CONFIG_NETFILTER_NETLINK_GLUE_CT (this project's test
   * machines) refuse that flag with EOPNOTSUPP at open. */
  if (attr[NFQA_CT]) {
    const struct nlattr *ct[CTA_MAX + 1];
    memset(ct, 0, sizeof ct);
    if (mnl_attr_parse_nested(attr[NFQA_CT], ct_attr_cb, ct) >= 0) {
      flags |= PF_HAS_CT;
      if (ct[CTA_MARK]) m[M_CTMARK] = ntohl(mnl_attr_get_u32(ct[CTA_MARK]));
    }
  }
  if (attr[NFQA_CT_INFO]) {
    m[M_CTINFO] = ntohl(mnl_attr_get_u32(attr[NFQA_CT_INFO]));
    flags |= PF_HAS_CTINFO;
  }
  m[M_FLAGS] = flags;
  return 1;
}

static void report_async_error(sq_queue *q, const char *code, int err, const char *syscall);
static void send_verdicts(sq_queue *q, uint32_t n);

/*
 * Drains the socket: up to max_batch packets or until the rx area cannot
 * hold another maximal message, then one JS call. uv_poll is level
 * triggered, so whatever is left wakes us again on the next loop turn; this
 * bound keeps timers and other I/O from starving under a flood.
 */
static void on_readable(uv_poll_t *handle, int status, int events) {
  sq_queue *q = handle->data;
  if (q->closing) return;
  q->wakeups += 1;
  if (status < 0) {
    report_async_error(q, "ERR_NFQ_POLL", -status, "uv_poll");
    return;
  }
  int fd = mnl_socket_get_fd(q->nl);
  size_t off = 0;
  uint32_t n = 0;
  while (n < q->max_batch && q->rx_size - off >= q->rx_need) {
    struct iovec iov = { q->rx + off, q->rx_size - off };
    struct sockaddr_nl sa;
    struct msghdr mh = { &sa, sizeof sa, &iov, 1, NULL, 0, 0 };
    ssize_t r = recvmsg(fd, &mh, MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {
        /* Socket receive buffer overflowed: the kernel dropped (or, with
         * FAIL_OPEN, accepted) packets it could not queue to us. Count and
         * keep reading; the socket stays usable. */
        q->stats[S_OVERRUNS] += 1;
        continue;
      }
      q->stats[S_RECV_ERRORS] += 1;
      q->stats[S_LAST_ERRNO] = errno;
      break;
    }
    if (mh.msg_flags & MSG_TRUNC) { q->stats[S_TRUNCATED_READS] += 1; continue; }
    if (sa.nl_pid != 0) { q->stats[S_BAD_MESSAGES] += 1; continue; } /* not from the kernel */
    const struct nlmsghdr *nlh = (const struct nlmsghdr *)(q->rx + off);
    int len = (int)r;
    while (mnl_nlmsg_ok(nlh, len)) {
      if (nlh->nlmsg_type == NLMSG_ERROR) {
        /* Errors for our verdicts (e.g. ENOENT for an unknown or already
         * decided id) arrive here even without NLM_F_ACK. */
        const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
        if (e->error != 0) {
          q->stats[S_KERNEL_ERRORS] += 1;
          q->stats[S_LAST_ERRNO] = -e->error;
        }
      } else if (NFNL_SUBSYS_ID(nlh->nlmsg_type) == NFNL_SUBSYS_QUEUE &&
                 NFNL_MSG_TYPE(nlh->nlmsg_type) == NFQNL_MSG_PACKET && n < q->max_batch) {
        if (decode_packet(q, nlh, q->meta + (size_t)n * META_WORDS)) n++;
        else q->stats[S_BAD_MESSAGES] += 1;
      } else if (nlh->nlmsg_type >= NLMSG_MIN_TYPE) {
        q->stats[S_BAD_MESSAGES] += 1;
      }
      nlh = mnl_nlmsg_next(nlh, &len);
    }
    off += MNL_ALIGN((size_t)r);
  }
  if (n == 0) return;
  q->stats[S_PACKETS] += n;
  q->stats[S_BATCHES] += 1;
  if (n > q->stats[S_MAX_BATCH]) q->stats[S_MAX_BATCH] = n;

  napi_env env = q->env;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value fn, recv, argv[1], result;
  napi_get_reference_value(env, q->on_batch, &fn);
  napi_get_global(env, &recv); /* make_callback needs an object receiver */
  napi_create_uint32(env, n, &argv[0]);
  q->in_callback = 1;
  /* napi_make_callback (not napi_call_function) so that process.nextTick
   * and promise jobs queued by the handler run right after it, as they would
   * after any other I/O callback. */
  napi_status st = napi_make_callback(env, q->async_ctx, recv, fn, 1, argv, &result);
  q->in_callback = 0;
  uint32_t staged = 0;
  if (st == napi_ok) {
    if (napi_get_value_uint32(env, result, &staged) != napi_ok) staged = 0;
  } else {
    q->stats[S_CALLBACK_ERRORS] += 1;
    raise_pending(env);
  }
  if (!q->closing && staged > 0) send_verdicts(q, staged <= q->max_verdicts ? staged : q->max_verdicts);
  napi_close_handle_scope(env, scope);
}

/* ---- verdict path ------------------------------------------------------ */

static void tx_flush(sq_queue *q, size_t *pos) {
  if (*pos == 0) return;
  if (mnl_socket_sendto(q->nl, q->tx, *pos) < 0) {
    q->stats[S_SEND_ERRORS] += 1;
    q->stats[S_LAST_ERRNO] = errno;
  }
  *pos = 0;
}

/* Encodes staged verdicts [0, n) as back-to-back NFQNL_MSG_VERDICT messages.
 * The kernel's netlink_rcv_skb() walks every message in one datagram, so a
 * batch costs one syscall (per TX_LIMIT bytes). */
static void send_verdicts(sq_queue *q, uint32_t n) {
  size_t pos = 0;
  for (uint32_t i = 0; i < n; i++) {
    const uint32_t *v = q->vbuf + (size_t)i * VERDICT_WORDS;
    uint32_t code = v[V_CODE];
    const uint8_t *payload = NULL;
    uint32_t plen = v[V_PAYLOAD_LEN];
    if (code & VF_PAYLOAD_TX) {
      if ((size_t)v[V_PAYLOAD_OFF] + plen > q->txp_size) { q->stats[S_SEND_ERRORS] += 1; continue; }
      payload = q->txp + v[V_PAYLOAD_OFF];
    } else if (code & VF_PAYLOAD_RX) {
      if ((size_t)v[V_PAYLOAD_OFF] + plen > q->rx_size) { q->stats[S_SEND_ERRORS] += 1; continue; }
      payload = q->rx + v[V_PAYLOAD_OFF];
    }
    if (payload && plen > 0xffff) { q->stats[S_SEND_ERRORS] += 1; continue; }
    size_t need = MNL_ALIGN(sizeof(struct nlmsghdr)) + MNL_ALIGN(sizeof(struct nfgenmsg)) +
                  MNL_ATTR_HDRLEN * 3 + 16 + MNL_ALIGN(payload ? plen : 0);
    if (pos + need > TX_LIMIT) tx_flush(q, &pos);
    struct nlmsghdr *nlh = nfq_nlmsg_put((char *)q->tx + pos, NFQNL_MSG_VERDICT, q->queue_num);
    nfq_nlmsg_verdict_put(nlh, (int)v[V_ID], (int)(code & 0xff));
    if (code & VF_SET_MARK) nfq_nlmsg_verdict_put_mark(nlh, v[V_MARK]);
    if (payload) nfq_nlmsg_verdict_put_pkt(nlh, payload, plen);
    pos += MNL_ALIGN(nlh->nlmsg_len);
  }
  tx_flush(q, &pos);
  q->stats[S_VERDICTS] += n;
}

/* ---- async errors ------------------------------------------------------ */

static void report_async_error(sq_queue *q, const char *code, int err, const char *syscall) {
  napi_env env = q->env;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value fn, recv, error, jcode, jmsg, result, v;
  char text[160];
  snprintf(text, sizeof text, "nfqueue %u: %s (%s)", q->queue_num, strerror(err), syscall);
  napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &jcode);
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &jmsg);
  napi_create_error(env, jcode, jmsg, &error);
  napi_create_int32(env, err, &v);
  napi_set_named_property(env, error, "errno", v);
  napi_get_reference_value(env, q->on_error, &fn);
  napi_get_global(env, &recv);
  if (napi_make_callback(env, q->async_ctx, recv, fn, 1, &error, &result) != napi_ok) raise_pending(env);
  napi_close_handle_scope(env, scope);
}

/* ---- open / close ------------------------------------------------------ */

static void free_handle(sq_queue *q) {
  napi_env env = q->env;
  napi_ref *refs[] = { &q->on_batch, &q->on_error, &q->keep_rx, &q->keep_meta,
                       &q->keep_vbuf, &q->keep_txp, &q->keep_stats, &q->self };
  for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++)
    if (*refs[i]) { napi_delete_reference(env, *refs[i]); *refs[i] = NULL; }
  if (q->async_ctx) napi_async_destroy(env, q->async_ctx);
  if (q->nl) mnl_socket_close(q->nl);
  free(q->tx);
  free(q);
}

static void on_closed(uv_handle_t *h) { free_handle(h->data); }

/*
 * open(queueNum, copyRange, maxLen, flags, rcvbufBytes,
 *      rx: Uint8Array, meta: Uint32Array, verdicts: Uint32Array,
 *      txPayload: Uint8Array, stats: Float64Array,
 *      onBatch(n) -> staged, onError(err)) -> handle
 */
static napi_value sq_open(napi_env env, napi_callback_info info) {
  size_t argc = 12;
  napi_value a[12];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  ASSERT_ARG(env, argc == 12, "open() takes 12 arguments");
  uint32_t queue_num, copy_range, max_len, flags, rcvbuf;
  ASSERT_ARG(env, get_u32(env, a[0], &queue_num) && queue_num <= 0xffff, "queueNum");
  ASSERT_ARG(env, get_u32(env, a[1], &copy_range) && copy_range <= 0xffff, "copyRange");
  ASSERT_ARG(env, get_u32(env, a[2], &max_len) && max_len > 0, "maxLen");
  ASSERT_ARG(env, get_u32(env, a[3], &flags) && (flags & ~OPEN_FLAG_MASK) == 0, "flags");
  ASSERT_ARG(env, get_u32(env, a[4], &rcvbuf), "rcvbufBytes");

  void *rx, *meta, *vbuf, *txp, *stats;
  size_t rx_len, meta_len, vbuf_len, txp_len, stats_len;
  ASSERT_ARG(env, get_typed(env, a[5], napi_uint8_array, &rx, &rx_len), "rx");
  ASSERT_ARG(env, get_typed(env, a[6], napi_uint32_array, &meta, &meta_len), "meta");
  ASSERT_ARG(env, get_typed(env, a[7], napi_uint32_array, &vbuf, &vbuf_len), "verdicts");
  ASSERT_ARG(env, get_typed(env, a[8], napi_uint8_array, &txp, &txp_len), "txPayload");
  ASSERT_ARG(env, get_typed(env, a[9], napi_float64_array, &stats, &stats_len), "stats");
  ASSERT_ARG(env, stats_len >= STATS_WORDS, "stats length");
  ASSERT_ARG(env, meta_len >= META_WORDS && vbuf_len >= VERDICT_WORDS, "meta/verdicts length");
  size_t rx_need = (size_t)(copy_range ? copy_range : 0xffff) + MSG_OVERHEAD;
  ASSERT_ARG(env, rx_len >= rx_need, "rx smaller than copyRange + overhead");
  napi_valuetype t1, t2;
  napi_typeof(env, a[10], &t1);
  napi_typeof(env, a[11], &t2);
  ASSERT_ARG(env, t1 == napi_function && t2 == napi_function, "callbacks");

  sq_queue *q = calloc(1, sizeof *q);
  if (!q || !(q->tx = malloc(TX_LIMIT))) {
    free(q);
    throw_coded(env, "ERR_NFQ_NOMEM", "out of memory", ENOMEM, "malloc");
    return NULL;
  }
  q->env = env;
  q->queue_num = (uint16_t)queue_num;
  q->rx = rx; q->rx_size = rx_len; q->rx_need = rx_need;
  q->meta = meta; q->max_batch = (uint32_t)(meta_len / META_WORDS);
  q->vbuf = vbuf; q->max_verdicts = (uint32_t)(vbuf_len / VERDICT_WORDS);
  q->txp = txp; q->txp_size = txp_len;
  q->stats = stats;

  int e;
  const char *syscall;
  q->nl = nl_open(rcvbuf, &e, &syscall);
  if (!q->nl) {
    free_handle(q);
    throw_coded(env, e == EPERM || e == EACCES ? "ERR_NFQ_PERMISSION" : "ERR_NFQ_SOCKET",
                "cannot open netlink socket (needs CAP_NET_ADMIN)", e, syscall);
    return NULL;
  }
  q->portid = mnl_socket_get_portid(q->nl);
  int fd = mnl_socket_get_fd(q->nl);
  int sndbuf = 1 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf) < 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);

  /* One config message does it all: the kernel validates the flags first,
   * then binds, then applies copy mode, max length and flags, so a refused
   * flag leaves no half-configured queue behind. */
  char cfg[MNL_SOCKET_BUFFER_SIZE];
  int err = 0;
  for (int attempt = 0; attempt < 2; attempt++) {
    struct nlmsghdr *nlh = nfq_nlmsg_put(cfg, NFQNL_MSG_CONFIG, q->queue_num);
    nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, NFQNL_CFG_CMD_BIND); /* pf is ignored for BIND */
    nfq_nlmsg_cfg_put_params(nlh, NFQNL_COPY_PACKET, (int)(copy_range ? copy_range : 0xffff));
    nfq_nlmsg_cfg_put_qmaxlen(nlh, max_len);
    mnl_attr_put_u32(nlh, NFQA_CFG_FLAGS, htonl(flags));
    mnl_attr_put_u32(nlh, NFQA_CFG_MASK, htonl(OPEN_FLAG_MASK));
    err = nl_config_and_ack(q->nl, q->portid, nlh);
    /* Kernel quirk: asking for NFQA_CFG_F_CONNTRACK while nf_conntrack_netlink
     * is not loaded makes the kernel load it and answer EAGAIN; retry once. */
    if (err != EAGAIN) break;
  }
  if (err == EPERM && proc_lists("/proc/net/netfilter/nfnetlink_queue", q->queue_num)) err = EBUSY;
  if (err) {
    free_handle(q);
    const char *code = err == EBUSY ? "ERR_NFQ_BUSY"
                     : (err == EPERM || err == EACCES) ? "ERR_NFQ_PERMISSION"
                     : err == EOPNOTSUPP ? "ERR_NFQ_UNSUPPORTED" : "ERR_NFQ_CONFIG";
    throw_coded(env, code, err == EBUSY ? "queue is already bound by another socket"
                                        : "cannot bind and configure queue", err, "NFQNL_MSG_CONFIG");
    return NULL;
  }

  napi_create_reference(env, a[10], 1, &q->on_batch);
  napi_create_reference(env, a[11], 1, &q->on_error);
  napi_create_reference(env, a[5], 1, &q->keep_rx);
  napi_create_reference(env, a[6], 1, &q->keep_meta);
  napi_create_reference(env, a[7], 1, &q->keep_vbuf);
  napi_create_reference(env, a[8], 1, &q->keep_txp);
  napi_create_reference(env, a[9], 1, &q->keep_stats);
  napi_value resource_name;
  napi_create_string_utf8(env, "SluiceNfqueue", NAPI_AUTO_LENGTH, &resource_name);
  napi_async_init(env, NULL, resource_name, &q->async_ctx);

  uv_loop_t *loop;
  napi_get_uv_event_loop(env, &loop);
  int ue = uv_poll_init(loop, &q->poll, fd);
  if (ue == 0) { q->poll.data = q; ue = uv_poll_start(&q->poll, UV_READABLE, on_readable); }
  if (ue != 0) {
    free_handle(q);
    throw_coded(env, "ERR_NFQ_POLL", "cannot poll netlink socket", -ue, "uv_poll_start");
    return NULL;
  }
  napi_value ext;
  napi_create_external(env, q, NULL, NULL, &ext);
  /* The handle keeps itself alive until close(): the caller owns its lifetime. */
  napi_create_reference(env, ext, 1, &q->self);
  return ext;
}

/* verdicts(handle, n): sends staged verdicts [0, n) now (outside a batch). */
static napi_value sq_verdicts(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value a[2];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  ASSERT_ARG(env, argc == 2, "verdicts() takes 2 arguments");
  sq_queue *q = get_external(env, a[0]);
  uint32_t n;
  ASSERT_ARG(env, q != NULL && !q->closing, "handle");
  ASSERT_ARG(env, get_u32(env, a[1], &n) && n <= q->max_verdicts, "count");
  if (!q->in_callback) {
    for (uint32_t i = 0; i < n; i++)
      ASSERT_ARG(env, !(q->vbuf[(size_t)i * VERDICT_WORDS + V_CODE] & VF_PAYLOAD_RX),
                 "rx payload outside its batch");
  }
  send_verdicts(q, n);
  return NULL;
}

/* close(handle): unbind (pending packets are dropped by the kernel), stop
 * polling; memory is released when libuv has closed the poll handle. */
static napi_value sq_close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  ASSERT_ARG(env, argc == 1, "close() takes 1 argument");
  sq_queue *q = get_external(env, a[0]);
  ASSERT_ARG(env, q != NULL, "handle");
  if (q->closing) return NULL;
  q->closing = 1;
  uv_poll_stop(&q->poll);
  char cfg[MNL_SOCKET_BUFFER_SIZE];
  struct nlmsghdr *nlh = nfq_nlmsg_put(cfg, NFQNL_MSG_CONFIG, q->queue_num);
  nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, NFQNL_CFG_CMD_UNBIND);
  /* Best effort: closing the socket unbinds too (NETLINK_URELEASE). */
  mnl_socket_sendto(q->nl, nlh, nlh->nlmsg_len);
  uv_close((uv_handle_t *)&q->poll, on_closed);
  return NULL;
}

/* ref(handle, bool): whether an open queue keeps the event loop alive. */
static napi_value sq_ref(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value a[2];
  bool on;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  sq_queue *q = argc == 2 ? get_external(env, a[0]) : NULL;
  ASSERT_ARG(env, q != NULL && napi_get_value_bool(env, a[1], &on) == napi_ok, "ref(handle, bool)");
  if (q->closing) return NULL;
  if (on) uv_ref((uv_handle_t *)&q->poll); else uv_unref((uv_handle_t *)&q->poll);
  return NULL;
}

/*
 * liveness(handle) -> { polling, portid, wakeups, readable }: what the
 * systemd watchdog check (src/systemd/queue-liveness.ts) needs to tell a
 * working packet loop from a dead one, read without touching the queue:
 *   polling   the uv_poll on the netlink socket is still registered (libuv
 *             stops it for good after a poll error)
 *   portid    our socket's netlink port id (the kernel lists the queue's
 *             owner by it in /proc/net/netfilter/nfnetlink_queue)
 *   wakeups   how many times on_readable ran
 *   readable  the socket has data waiting right now (poll with timeout 0)
 */
static napi_value sq_liveness(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  sq_queue *q = argc == 1 ? get_external(env, a[0]) : NULL;
  ASSERT_ARG(env, q != NULL, "liveness(handle)");
  int polling = !q->closing && uv_is_active((uv_handle_t *)&q->poll);
  int readable = 0;
  if (!q->closing) {
    struct pollfd pfd = { mnl_socket_get_fd(q->nl), POLLIN, 0 };
    readable = poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN) != 0;
  }
  napi_value out, v;
  napi_create_object(env, &out);
  napi_get_boolean(env, polling, &v); napi_set_named_property(env, out, "polling", v);
  napi_create_uint32(env, q->portid, &v); napi_set_named_property(env, out, "portid", v);
  napi_create_double(env, q->wakeups, &v); napi_set_named_property(env, out, "wakeups", v);
  napi_get_boolean(env, readable, &v); napi_set_named_property(env, out, "readable", v);
  return out;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    { "open", NULL, sq_open, NULL, NULL, NULL, napi_default, NULL },
    { "verdicts", NULL, sq_verdicts, NULL, NULL, NULL, napi_default, NULL },
    { "close", NULL, sq_close, NULL, NULL, NULL, napi_default, NULL },
    { "ref", NULL, sq_ref, NULL, NULL, NULL, napi_default, NULL },
    { "liveness", NULL, sq_liveness, NULL, NULL, NULL, napi_default, NULL },
    { "notify", NULL, sq_sd_notify, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  napi_value v;
  napi_create_uint32(env, META_WORDS, &v); napi_set_named_property(env, exports, "META_WORDS", v);
  napi_create_uint32(env, VERDICT_WORDS, &v); napi_set_named_property(env, exports, "VERDICT_WORDS", v);
  napi_create_uint32(env, STATS_WORDS, &v); napi_set_named_property(env, exports, "STATS_WORDS", v);
  napi_create_uint32(env, MSG_OVERHEAD, &v); napi_set_named_property(env, exports, "MSG_OVERHEAD", v);
  nflog_register(env, exports);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
