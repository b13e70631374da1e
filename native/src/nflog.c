/*
 * The NFLOG binding (nfnetlink_log) on the reader of nl_reader.h, for packets
 * the daemon only hears about (the front node's FIN and RST: no verdict).
 * The kernel fills one skb of `bufferBytes` with records and sends it when
 * `threshold` records are in it, when full, or `timeout` hundredths of a
 * second after its first record: many records a datagram (NLM_F_MULTI,
 * closed by NLMSG_DONE). A full receive buffer drops a whole datagram (one
 * ENOBUFS: an overrun); NFULNL_CFG_F_SEQ numbers the records, so the lost
 * ones are counted exactly from the gaps.
 */
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include "nl_reader.h"

/* Layout shared with src/nflog/layout.ts (keep in sync). */
enum { L_PAYLOAD_OFF = 0, L_PAYLOAD_LEN, L_INDEV, L_MARK, LOG_META_WORDS };
enum { LS_LOST = NS_COUNT, LOG_STATS_WORDS }; /* after the reader's counters (NS_*) */

/* Netlink framing and attributes around a record's payload (headers, mark,
 * interfaces, hardware address, sequence, timestamp): 1 KiB is a wide margin. */
#define LOG_MSG_OVERHEAD 1024

typedef struct {
  nl_reader r;        /* first: the reader frees the handle through it */
  int seq_known;      /* next_seq is valid (a record was seen) */
  uint32_t next_seq;  /* NFULA_SEQ expected next */
} sl_log;

static int log_attr_cb(const struct nlattr *attr, void *data) {
  const struct nlattr **tb = data;
  int type = mnl_attr_get_type(attr);
  if (mnl_attr_type_valid(attr, NFULA_MAX) < 0) return MNL_CB_OK; /* newer kernel: skip */
  int is_u32 = type == NFULA_MARK || type == NFULA_IFINDEX_INDEV || type == NFULA_SEQ;
  if (is_u32 && mnl_attr_validate(attr, MNL_TYPE_U32) < 0) return MNL_CB_OK;
  tb[type] = attr;
  return MNL_CB_OK;
}

/* nl_binding.decode for NFULNL_MSG_PACKET messages (records). */
static int decode_record(nl_reader *r, const struct nlmsghdr *nlh, uint32_t *m) {
  sl_log *l = (sl_log *)r;
  const struct nlattr *tb[NFULA_MAX + 1];
  memset(tb, 0, sizeof tb);
  if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), log_attr_cb, tb) < 0) return 0;
  if (tb[NFULA_SEQ]) {
    uint32_t seq = ntohl(mnl_attr_get_u32(tb[NFULA_SEQ]));
    /* Unsigned difference: correct across the 2^32 wrap. */
    if (l->seq_known && seq != l->next_seq) r->stats[LS_LOST] += (double)(uint32_t)(seq - l->next_seq);
    l->seq_known = 1;
    l->next_seq = seq + 1;
  }
  if (!tb[NFULA_PAYLOAD]) return 0;
  m[L_PAYLOAD_OFF] = (uint32_t)((const uint8_t *)mnl_attr_get_payload(tb[NFULA_PAYLOAD]) - r->rx);
  m[L_PAYLOAD_LEN] = mnl_attr_get_payload_len(tb[NFULA_PAYLOAD]);
  m[L_INDEV] = tb[NFULA_IFINDEX_INDEV] ? ntohl(mnl_attr_get_u32(tb[NFULA_IFINDEX_INDEV])) : 0;
  m[L_MARK] = tb[NFULA_MARK] ? ntohl(mnl_attr_get_u32(tb[NFULA_MARK])) : 0;
  return 1;
}

/* A NFULNL_MSG_CONFIG message binding or unbinding our group, ready for attributes. */
static struct nlmsghdr *config_put(char *buf, uint16_t group, int bind) {
  struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  struct nfgenmsg *nfg = mnl_nlmsg_put_extra_header(nlh, sizeof *nfg);
  nfg->nfgen_family = AF_UNSPEC;
  nfg->version = NFNETLINK_V0;
  nfg->res_id = htons(group);
  struct nfulnl_msg_config_cmd cmd = { bind ? NFULNL_CFG_CMD_BIND : NFULNL_CFG_CMD_UNBIND };
  mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof cmd, &cmd);
  return nlh;
}

/* NFLOG has no kernel-errors counter: an NLMSG_ERROR counts as a receive error. */
static const nl_binding nflog_binding = {
  .label = "nflog group", .noun = "log group", .config_msg = "NFULNL_MSG_CONFIG",
  .proc_list = "/proc/net/netfilter/nfnetlink_log", .resource = "SluiceNflog",
  .codes = { .assert = "ERR_NFLOG_NATIVE_ASSERT", .nomem = "ERR_NFLOG_SOCKET", .socket = "ERR_NFLOG_SOCKET",
             .permission = "ERR_NFLOG_PERMISSION", .busy = "ERR_NFLOG_BUSY", .unsupported = "ERR_NFLOG_CONFIG",
             .config = "ERR_NFLOG_CONFIG", .poll_start = "ERR_NFLOG_SOCKET", .poll = "ERR_NFLOG_POLL" },
  .subsys = NFNL_SUBSYS_ULOG, .msg_type = NFULNL_MSG_PACKET,
  .meta_words = LOG_META_WORDS, .stats_words = LOG_STATS_WORDS, .kernel_errors = NS_RECV_ERRORS,
  .decode = decode_record, .after_batch = NULL, .config_put = config_put,
};
#define ASSERT_ARG(cond, what) NL_ASSERT(env, &nflog_binding, cond, what)

/* nflogOpen(group, copyRange, bufferBytes, timeoutCs, threshold, rcvbufBytes, rx: Uint8Array,
 *           meta: Uint32Array, stats: Float64Array, onBatch(n), onError(err)) -> handle */
static napi_value sl_open(napi_env env, napi_callback_info info) {
  size_t argc = 11;
  napi_value a[11];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  ASSERT_ARG(argc == 11, "nflogOpen() takes 11 arguments");
  uint32_t group, copy_range, bufsize, timeout, threshold, rcvbuf;
  ASSERT_ARG(get_u32(env, a[0], &group) && group <= 0xffff, "group");
  ASSERT_ARG(get_u32(env, a[1], &copy_range) && copy_range > 0 && copy_range <= 0xffff, "copyRange");
  ASSERT_ARG(get_u32(env, a[2], &bufsize) && bufsize <= 131072, "bufferBytes");
  ASSERT_ARG(get_u32(env, a[3], &timeout), "timeoutCs");
  ASSERT_ARG(get_u32(env, a[4], &threshold) && threshold > 0, "threshold");
  ASSERT_ARG(get_u32(env, a[5], &rcvbuf), "rcvbufBytes");
  /* A datagram is at most max(bufferBytes, one record): only a single large record exceeds bufferBytes. */
  size_t one = (size_t)copy_range + LOG_MSG_OVERHEAD;
  nl_open_args o = { (uint16_t)group, rcvbuf, bufsize > one ? bufsize : one, a[9], a[10], a[6], a[7], a[8], NULL };
  nl_reader *r = nl_reader_new(env, &nflog_binding, sizeof(sl_log), &o);
  if (!r) return NULL;
  /* One message: the kernel creates the instance on BIND, then applies the attributes after it. */
  char cfg[MNL_SOCKET_BUFFER_SIZE];
  struct nlmsghdr *nlh = config_put(cfg, r->num, 1);
  struct nfulnl_msg_config_mode mode = { htonl(copy_range), NFULNL_COPY_PACKET, 0 };
  mnl_attr_put(nlh, NFULA_CFG_MODE, sizeof mode, &mode);
  /* Below its default (about a page) the kernel silently keeps it: the wrapper passes 8..128 KiB. */
  if (bufsize > 0) mnl_attr_put_u32(nlh, NFULA_CFG_NLBUFSIZ, htonl(bufsize));
  mnl_attr_put_u32(nlh, NFULA_CFG_TIMEOUT, htonl(timeout));
  mnl_attr_put_u32(nlh, NFULA_CFG_QTHRESH, htonl(threshold));
  mnl_attr_put_u16(nlh, NFULA_CFG_FLAGS, htons(NFULNL_CFG_F_SEQ));
  return nl_reader_start(r, nl_config_and_ack(r, nlh));
}

void nflog_register(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    { "nflogOpen", NULL, sl_open, NULL, NULL, NULL, napi_default, NULL },
    { "nflogClose", NULL, nl_reader_close_js, NULL, NULL, NULL, napi_default, (void *)&nflog_binding },
    { "nflogRef", NULL, nl_reader_ref_js, NULL, NULL, NULL, napi_default, (void *)&nflog_binding },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  set_number(env, exports, "LOG_META_WORDS", LOG_META_WORDS);
  set_number(env, exports, "LOG_STATS_WORDS", LOG_STATS_WORDS);
  set_number(env, exports, "LOG_MSG_OVERHEAD", LOG_MSG_OVERHEAD);
}
