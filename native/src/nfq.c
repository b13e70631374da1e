/*
 * sluice_nfq: the NFQUEUE binding (libnetfilter_queue's libmnl API) on the
 * reader of nl_reader.h, and the module's init. Every packet waits for a
 * verdict: JavaScript encodes verdicts into a shared tx area
 * (src/nfqueue/verdict-encoder.ts); this file sends them with one sendto().
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
#include "nl_reader.h"

/* Layout shared with src/nfqueue/layout.ts (keep in sync). */
enum {
  M_ID = 0, M_HOOK, M_MARK, M_CTMARK, M_CTINFO, M_INDEV, M_OUTDEV, M_PAYLOAD_OFF, M_PAYLOAD_LEN, M_FLAGS, M_ORIG_LEN, M_HWPROTO, META_WORDS
};
/* bits in M_FLAGS */
#define PF_HAS_CT        (1u << 0) /* NFQA_CT present: ctmark valid */
#define PF_HAS_CTINFO    (1u << 1) /* NFQA_CT_INFO present: ctinfo valid */
#define PF_CSUM_NOTREADY (1u << 2) /* NFQA_SKB_CSUMNOTREADY (only with GSO) */
#define PF_GSO           (1u << 3) /* NFQA_SKB_GSO */
#define PF_TRUNCATED     (1u << 4) /* payload cut at copy_range */
#define PF_HAS_MARK      (1u << 5)

/* after the reader's (NS_*). S_ID_GAPS: packet ids skipped (see next_id). */
enum { S_KERNEL_ERRORS = NS_COUNT, S_VERDICTS, S_SEND_ERRORS, S_ID_GAPS, STATS_WORDS };

/* Flags accepted in open(); same values as the kernel's NFQA_CFG_F_*. */
#define OPEN_FLAG_MASK (NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_CONNTRACK | NFQA_CFG_F_GSO)

/* Netlink framing and attributes around a payload: mostly the nested
 * conntrack attribute with NFQA_CFG_F_CONNTRACK; 4 KiB is a wide margin. */
#define MSG_OVERHEAD 4096
/* sk_sndbuf; the kernel refuses a datagram above sk_sndbuf - 32 (TX_LIMIT). */
#define SNDBUF (1 << 20)

typedef struct {
  nl_reader r; /* first: the reader frees the handle through it */
  uint8_t *tx; /* verdict messages, encoded by JavaScript */
  size_t tx_size;
  /* The id the kernel gives the next packet of our queue. The kernel numbers
   * a queue instance's packets 1, 2, 3... (id_sequence, from 0 when our bind
   * creates the instance) and sends each message under the queue's lock
   * right after numbering it, so messages arrive in id order; an id above
   * next_id means the ones between were numbered and never reached us
   * (their message did not fit the socket: the kernel accepted them with
   * FAIL_OPEN, or dropped them, and did not queue them). */
  uint32_t next_id;
} sq_queue;

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
  sq_queue *q = (sq_queue *)r;
  uint32_t skipped = m[M_ID] - q->next_id; /* wraps like the kernel's u32 */
  if (skipped != 0 && skipped < 0x80000000u) r->stats[S_ID_GAPS] += skipped;
  q->next_id = m[M_ID] + 1;
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
  /* NFQA_CAP_LEN comes only when the payload was cut: the real length. */
  m[M_ORIG_LEN] = plen;
  if (attr[NFQA_CAP_LEN]) {
    uint32_t cap = ntohl(mnl_attr_get_u32(attr[NFQA_CAP_LEN]));
    if (cap > plen) { m[M_ORIG_LEN] = cap; flags |= PF_TRUNCATED; }
  }
  if (attr[NFQA_SKB_INFO]) {
    uint32_t info = ntohl(mnl_attr_get_u32(attr[NFQA_SKB_INFO]));
    /* Only with NFQA_CFG_F_GSO: a partial L4 checksum, completed later; do not verify. */
    if (info & NFQA_SKB_CSUMNOTREADY) flags |= PF_CSUM_NOTREADY;
    if (info & NFQA_SKB_GSO) flags |= PF_GSO;
  }
  m[M_CTMARK] = 0;
  m[M_CTINFO] = 0;
  /* Only with NFQA_CFG_F_CONNTRACK (see README) and a conntrack entry. */
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

/* Sends tx bytes [0, len): verdict messages in one datagram. */
static void send_verdicts(sq_queue *q, uint32_t len) {
  if (len == 0) return;
  if (mnl_socket_sendto(q->r.nl, q->tx, len) < 0) {
    q->r.stats[S_SEND_ERRORS] += 1;
    q->r.stats[NS_LAST_ERRNO] = errno;
  }
}

/* nl_binding.after_batch: sends the verdicts onBatch encoded (it returns their length). */
static void after_batch(nl_reader *r, napi_value result) {
  sq_queue *q = (sq_queue *)r;
  uint32_t len = 0;
  if (result && napi_get_value_uint32(r->env, result, &len) != napi_ok) len = 0;
  if (len <= q->tx_size) send_verdicts(q, len);
}

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

/* open(queueNum, copyRange, maxLen, flags, rcvbufBytes, rx: Uint8Array, meta: Uint32Array,
 *      tx: Uint8Array, stats: Float64Array, onBatch(n) -> tx bytes to send, onError(err)) -> handle */
static napi_value sq_open(napi_env env, napi_callback_info info) {
  size_t argc = 11;
  napi_value a[11];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  ASSERT_ARG(argc == 11, "open() takes 11 arguments");
  uint32_t queue_num, copy_range, max_len, flags, rcvbuf;
  ASSERT_ARG(get_u32(env, a[0], &queue_num) && queue_num <= 0xffff, "queueNum");
  ASSERT_ARG(get_u32(env, a[1], &copy_range) && copy_range <= 0xffff, "copyRange");
  ASSERT_ARG(get_u32(env, a[2], &max_len) && max_len > 0, "maxLen");
  ASSERT_ARG(get_u32(env, a[3], &flags) && (flags & ~OPEN_FLAG_MASK) == 0, "flags");
  ASSERT_ARG(get_u32(env, a[4], &rcvbuf), "rcvbufBytes");
  void *tx;
  size_t tx_len;
  ASSERT_ARG(get_typed(env, a[7], napi_uint8_array, &tx, &tx_len) && tx_len <= SNDBUF - 32, "tx");
  uint32_t copy = copy_range ? copy_range : 0xffff;
  nl_open_args o = { (uint16_t)queue_num, rcvbuf, (size_t)copy + MSG_OVERHEAD, a[9], a[10], a[5], a[6], a[8], a[7] };
  sq_queue *q = (sq_queue *)nl_reader_new(env, &nfq_binding, sizeof *q, &o);
  if (!q) return NULL;
  q->tx = tx;
  q->tx_size = tx_len;
  q->next_id = 1;
  int fd = mnl_socket_get_fd(q->r.nl);
  int sndbuf = SNDBUF;
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf) < 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  /* One config message (see README): the kernel checks flags, then binds. */
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

/* verdicts(handle, n): sends tx bytes [0, n) now. */
static napi_value sq_verdicts(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value a[2];
  nl_reader *r;
  nl_reader_args(env, info, &argc, a, &r);
  sq_queue *q = (sq_queue *)r;
  uint32_t n;
  ASSERT_ARG(argc == 2 && q != NULL && !q->r.closing, "verdicts(handle, n)");
  ASSERT_ARG(get_u32(env, a[1], &n) && n <= q->tx_size, "byte count");
  send_verdicts(q, n);
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    { "open", NULL, sq_open, NULL, NULL, NULL, napi_default, NULL },
    { "verdicts", NULL, sq_verdicts, NULL, NULL, NULL, napi_default, (void *)&nfq_binding },
    { "close", NULL, nl_reader_close_js, NULL, NULL, NULL, napi_default, (void *)&nfq_binding },
    { "ref", NULL, nl_reader_ref_js, NULL, NULL, NULL, napi_default, (void *)&nfq_binding },
    { "liveness", NULL, nl_reader_liveness_js, NULL, NULL, NULL, napi_default, (void *)&nfq_binding },
    { "socketDrops", NULL, nl_reader_socket_drops_js, NULL, NULL, NULL, napi_default, (void *)&nfq_binding },
    { "notify", NULL, sq_sd_notify, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  set_number(env, exports, "META_WORDS", META_WORDS);
  set_number(env, exports, "STATS_WORDS", STATS_WORDS);
  set_number(env, exports, "MSG_OVERHEAD", MSG_OVERHEAD);
  nflog_register(env, exports);
  ctevents_register(env, exports);
  reuseport_register(env, exports);
  udp_batch_register(env, exports);
  loop_turns_register(env, exports);
  nft_netlink_register(env, exports);
  run_command_register(env, exports);
  read_full_register(env, exports);
  ct_dump_register(env, exports);
  ct_expire_register(env, exports);
  ct_msg_register(env, exports);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
