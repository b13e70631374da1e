/*
 * sluice_nfq: the NFQUEUE binding, over libnetfilter_queue's libmnl API, on
 * the netlink reader of nl_reader.h (which says how buffers, polling and
 * batches work); the module's init is here, for all three bindings.
 *
 * What NFQUEUE adds: every packet waits for a verdict. JavaScript stages
 * verdicts in a shared array (and replacement payloads in a shared area)
 * and returns how many it staged from the batch callback; they are encoded
 * as back-to-back netlink messages and sent with one sendto().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>

#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>

#include "addon.h"
#include "nl_reader.h"

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

enum { S_KERNEL_ERRORS = NS_COUNT, S_VERDICTS, S_SEND_ERRORS, STATS_WORDS }; /* after the reader's (NS_*) */

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

typedef struct {
  nl_reader r; /* first: the reader frees the handle through it */
  uint32_t *vbuf; uint32_t max_verdicts;
  uint8_t *txp; size_t txp_size;
  uint8_t tx[TX_LIMIT]; /* encoded verdict messages */
} sq_queue;

/* ---- receive path ------------------------------------------------------ */

static int ct_attr_cb(const struct nlattr *attr, void *data) {
  const struct nlattr **tb = data;
  int type = mnl_attr_get_type(attr);
  if (mnl_attr_type_valid(attr, CTA_MAX) < 0) return MNL_CB_OK; /* newer kernel: skip */
  if (type == CTA_MARK && mnl_attr_validate(attr, MNL_TYPE_U32) < 0) return MNL_CB_OK;
  tb[type] = attr;
  return MNL_CB_OK;
}

/* nl_binding.decode for NFQNL_MSG_PACKET messages. */
static int decode_packet(nl_reader *r, const struct nlmsghdr *nlh, uint32_t *m) {
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
    poff = (uint32_t)((const uint8_t *)mnl_attr_get_payload(attr[NFQA_PAYLOAD]) - r->rx);
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

/* ---- verdict path ------------------------------------------------------ */

static void tx_flush(sq_queue *q, size_t *pos) {
  if (*pos == 0) return;
  if (mnl_socket_sendto(q->r.nl, q->tx, *pos) < 0) {
    q->r.stats[S_SEND_ERRORS] += 1;
    q->r.stats[NS_LAST_ERRNO] = errno;
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
      if ((size_t)v[V_PAYLOAD_OFF] + plen > q->txp_size) { q->r.stats[S_SEND_ERRORS] += 1; continue; }
      payload = q->txp + v[V_PAYLOAD_OFF];
    } else if (code & VF_PAYLOAD_RX) {
      if ((size_t)v[V_PAYLOAD_OFF] + plen > q->r.rx_size) { q->r.stats[S_SEND_ERRORS] += 1; continue; }
      payload = q->r.rx + v[V_PAYLOAD_OFF];
    }
    if (payload && plen > 0xffff) { q->r.stats[S_SEND_ERRORS] += 1; continue; }
    size_t need = MNL_ALIGN(sizeof(struct nlmsghdr)) + MNL_ALIGN(sizeof(struct nfgenmsg)) +
                  MNL_ATTR_HDRLEN * 3 + 16 + MNL_ALIGN(payload ? plen : 0);
    if (pos + need > TX_LIMIT) tx_flush(q, &pos);
    struct nlmsghdr *nlh = nfq_nlmsg_put((char *)q->tx + pos, NFQNL_MSG_VERDICT, q->r.num);
    nfq_nlmsg_verdict_put(nlh, (int)v[V_ID], (int)(code & 0xff));
    if (code & VF_SET_MARK) nfq_nlmsg_verdict_put_mark(nlh, v[V_MARK]);
    if (payload) nfq_nlmsg_verdict_put_pkt(nlh, payload, plen);
    pos += MNL_ALIGN(nlh->nlmsg_len);
  }
  tx_flush(q, &pos);
  q->r.stats[S_VERDICTS] += n;
}

/* nl_binding.after_batch: sends the verdicts the batch callback staged
 * (its result), in the same native call. */
static void after_batch(nl_reader *r, napi_value result) {
  sq_queue *q = (sq_queue *)r;
  uint32_t staged = 0;
  if (result && napi_get_value_uint32(r->env, result, &staged) != napi_ok) staged = 0;
  if (staged > 0) send_verdicts(q, staged <= q->max_verdicts ? staged : q->max_verdicts);
}

/* ---- open / verdicts ----------------------------------------------------- */

/* A NFQNL_MSG_CONFIG message binding or unbinding our queue. */
static struct nlmsghdr *config_put(char *buf, uint16_t queue_num, int bind) {
  struct nlmsghdr *nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, queue_num);
  /* pf is ignored for BIND and UNBIND */
  nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, bind ? NFQNL_CFG_CMD_BIND : NFQNL_CFG_CMD_UNBIND);
  return nlh;
}

static const nl_binding nfq_binding = {
  .label = "nfqueue", .noun = "queue", .config_msg = "NFQNL_MSG_CONFIG",
  .proc_list = "/proc/net/netfilter/nfnetlink_queue", .resource = "SluiceNfqueue",
  .codes = { .assert = "ERR_NFQ_NATIVE_ASSERT", .nomem = "ERR_NFQ_NOMEM", .socket = "ERR_NFQ_SOCKET",
             .permission = "ERR_NFQ_PERMISSION", .busy = "ERR_NFQ_BUSY", .unsupported = "ERR_NFQ_UNSUPPORTED",
             .config = "ERR_NFQ_CONFIG", .poll_start = "ERR_NFQ_POLL", .poll = "ERR_NFQ_POLL" },
  .subsys = NFNL_SUBSYS_QUEUE, .msg_type = NFQNL_MSG_PACKET,
  .meta_words = META_WORDS, .stats_words = STATS_WORDS, .kernel_errors = S_KERNEL_ERRORS,
  .decode = decode_packet, .after_batch = after_batch, .config_put = config_put,
};
#define ASSERT_ARG(cond, what) NL_ASSERT(env, &nfq_binding, cond, what)

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
  ASSERT_ARG(argc == 12, "open() takes 12 arguments");
  uint32_t queue_num, copy_range, max_len, flags, rcvbuf;
  ASSERT_ARG(get_u32(env, a[0], &queue_num) && queue_num <= 0xffff, "queueNum");
  ASSERT_ARG(get_u32(env, a[1], &copy_range) && copy_range <= 0xffff, "copyRange");
  ASSERT_ARG(get_u32(env, a[2], &max_len) && max_len > 0, "maxLen");
  ASSERT_ARG(get_u32(env, a[3], &flags) && (flags & ~OPEN_FLAG_MASK) == 0, "flags");
  ASSERT_ARG(get_u32(env, a[4], &rcvbuf), "rcvbufBytes");
  void *vbuf, *txp;
  size_t vbuf_len, txp_len;
  ASSERT_ARG(get_typed(env, a[7], napi_uint32_array, &vbuf, &vbuf_len), "verdicts");
  ASSERT_ARG(get_typed(env, a[8], napi_uint8_array, &txp, &txp_len), "txPayload");
  ASSERT_ARG(vbuf_len >= VERDICT_WORDS, "verdicts length");
  uint32_t copy = copy_range ? copy_range : 0xffff;
  nl_open_args o = { (uint16_t)queue_num, rcvbuf, (size_t)copy + MSG_OVERHEAD, a[10], a[11], a[5], a[6], a[9], { a[7], a[8] } };
  sq_queue *q = (sq_queue *)nl_reader_new(env, &nfq_binding, sizeof *q, &o);
  if (!q) return NULL;
  q->vbuf = vbuf;
  q->max_verdicts = (uint32_t)(vbuf_len / VERDICT_WORDS);
  q->txp = txp;
  q->txp_size = txp_len;
  int fd = mnl_socket_get_fd(q->r.nl);
  int sndbuf = 1 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf) < 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);

  /* One config message does it all: the kernel validates the flags first,
   * then binds, then applies copy mode, max length and flags, so a refused
   * flag leaves no half-configured queue behind. */
  char cfg[MNL_SOCKET_BUFFER_SIZE];
  struct nlmsghdr *nlh = config_put(cfg, q->r.num, 1);
  nfq_nlmsg_cfg_put_params(nlh, NFQNL_COPY_PACKET, (int)copy);
  nfq_nlmsg_cfg_put_qmaxlen(nlh, max_len);
  mnl_attr_put_u32(nlh, NFQA_CFG_FLAGS, htonl(flags));
  mnl_attr_put_u32(nlh, NFQA_CFG_MASK, htonl(OPEN_FLAG_MASK));
  int err = nl_config_and_ack(&q->r, nlh);
  /* Kernel quirk: asking for NFQA_CFG_F_CONNTRACK while nf_conntrack_netlink
   * is not loaded makes the kernel load it and answer EAGAIN; retry once. */
  if (err == EAGAIN) err = nl_config_and_ack(&q->r, nlh);
  return nl_reader_start(&q->r, err);
}

/* verdicts(handle, n): sends staged verdicts [0, n) now (outside a batch). */
static napi_value sq_verdicts(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value a[2];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  ASSERT_ARG(argc == 2, "verdicts() takes 2 arguments");
  sq_queue *q = (sq_queue *)nl_reader_get(env, a[0], &nfq_binding);
  uint32_t n;
  ASSERT_ARG(q != NULL && !q->r.closing, "handle");
  ASSERT_ARG(get_u32(env, a[1], &n) && n <= q->max_verdicts, "count");
  if (!q->r.in_callback) {
    for (uint32_t i = 0; i < n; i++)
      ASSERT_ARG(!(q->vbuf[(size_t)i * VERDICT_WORDS + V_CODE] & VF_PAYLOAD_RX), "rx payload outside its batch");
  }
  send_verdicts(q, n);
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    { "open", NULL, sq_open, NULL, NULL, NULL, napi_default, NULL },
    { "verdicts", NULL, sq_verdicts, NULL, NULL, NULL, napi_default, NULL },
    { "close", NULL, nl_reader_close_js, NULL, NULL, NULL, napi_default, (void *)&nfq_binding },
    { "ref", NULL, nl_reader_ref_js, NULL, NULL, NULL, napi_default, (void *)&nfq_binding },
    { "liveness", NULL, nl_reader_liveness_js, NULL, NULL, NULL, napi_default, (void *)&nfq_binding },
    { "notify", NULL, sq_sd_notify, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  set_number(env, exports, "META_WORDS", META_WORDS);
  set_number(env, exports, "VERDICT_WORDS", VERDICT_WORDS);
  set_number(env, exports, "STATS_WORDS", STATS_WORDS);
  set_number(env, exports, "MSG_OVERHEAD", MSG_OVERHEAD);
  nflog_register(env, exports);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
