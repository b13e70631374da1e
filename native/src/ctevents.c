/*
 * The conntrack event binding (ctnetlink) on the reader of nl_reader.h: the
 * kernel's DESTROY events (NFNLGRP_CONNTRACK_DESTROY), one netlink message
 * per ended flow, so the front daemon frees a flow's record when the kernel
 * forgets the flow instead of dumping the whole table to find out.
 *
 * Subscribing is joining a multicast group (no config message): netlink
 * checks CAP_NET_ADMIN in the socket's network namespace for nfnetlink's
 * groups, which the unprivileged unit has. NETLINK_NO_ENOBUFS stays off: a
 * full receive buffer makes the next recvmsg() fail with ENOBUFS (counted as
 * an overrun by the reader), which is how the daemon learns that events were
 * lost and a resync is due. Events carry no sequence numbers: how many were
 * lost is not knowable, only that some were.
 *
 * Events are per flow only if the flow has the conntrack event extension:
 * with net.netfilter.nf_conntrack_events=2 (the default) the kernel adds it
 * only while a ctnetlink listener exists in the namespace, so flows created
 * before we subscribed never report their end (nft `ct event set` forces it).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include "nl_reader.h"

/* Layout shared with src/conntrack/layout.ts (keep in sync). Addresses take
 * four words each (IPv6: the address's four 32-bit groups in network order,
 * each as a host number; IPv4: word 0, the rest 0), so IPv6 needs no new layout. */
enum { E_FAMILY = 0, E_PROTO, E_SRC, E_DST = E_SRC + 4, E_SPORT = E_DST + 4, E_DPORT, E_MARK, E_FLAGS, E_TCP_STATE,
       E_ID, EV_META_WORDS };
/* Bits of E_FLAGS: which optional attributes the event carried. */
enum { EF_MARK = 1, EF_PORTS = 2, EF_TCP_STATE = 4, EF_ID = 8 };
enum { EV_STATS_WORDS = NS_COUNT }; /* the reader's counters only (NS_ITEMS counts events) */

/* One event message is a few hundred bytes (tuples, protoinfo, counters,
 * timestamps, labels, helper and security context names): 8 KiB is a wide margin. */
#define EV_MSG_MAX 8192

/* Attribute tables on the stack: nothing allocated per event. Each callback
 * keeps the attributes it knows whose payload has the right length, and
 * skips types newer than the headers. */
static int top_cb(const struct nlattr *a, void *data) {
  const struct nlattr **tb = data;
  int t = mnl_attr_get_type(a);
  if (mnl_attr_type_valid(a, CTA_MAX) < 0) return MNL_CB_OK;
  if ((t == CTA_TUPLE_ORIG || t == CTA_PROTOINFO) && mnl_attr_validate(a, MNL_TYPE_NESTED) < 0) return MNL_CB_OK;
  if ((t == CTA_MARK || t == CTA_ID) && mnl_attr_validate(a, MNL_TYPE_U32) < 0) return MNL_CB_OK;
  tb[t] = a;
  return MNL_CB_OK;
}

static int tuple_cb(const struct nlattr *a, void *data) {
  const struct nlattr **tb = data;
  int t = mnl_attr_get_type(a);
  if (mnl_attr_type_valid(a, CTA_TUPLE_MAX) < 0) return MNL_CB_OK;
  if ((t == CTA_TUPLE_IP || t == CTA_TUPLE_PROTO) && mnl_attr_validate(a, MNL_TYPE_NESTED) < 0) return MNL_CB_OK;
  tb[t] = a;
  return MNL_CB_OK;
}

static int ip_cb(const struct nlattr *a, void *data) {
  const struct nlattr **tb = data;
  int t = mnl_attr_get_type(a);
  if (mnl_attr_type_valid(a, CTA_IP_MAX) < 0) return MNL_CB_OK;
  if ((t == CTA_IP_V4_SRC || t == CTA_IP_V4_DST) && mnl_attr_validate(a, MNL_TYPE_U32) < 0) return MNL_CB_OK;
  if ((t == CTA_IP_V6_SRC || t == CTA_IP_V6_DST) && mnl_attr_validate2(a, MNL_TYPE_BINARY, 16) < 0) return MNL_CB_OK;
  tb[t] = a;
  return MNL_CB_OK;
}

static int proto_cb(const struct nlattr *a, void *data) {
  const struct nlattr **tb = data;
  int t = mnl_attr_get_type(a);
  if (mnl_attr_type_valid(a, CTA_PROTO_MAX) < 0) return MNL_CB_OK;
  if (t == CTA_PROTO_NUM && mnl_attr_validate(a, MNL_TYPE_U8) < 0) return MNL_CB_OK;
  if ((t == CTA_PROTO_SRC_PORT || t == CTA_PROTO_DST_PORT) && mnl_attr_validate(a, MNL_TYPE_U16) < 0) return MNL_CB_OK;
  tb[t] = a;
  return MNL_CB_OK;
}

static int protoinfo_cb(const struct nlattr *a, void *data) {
  const struct nlattr **tb = data;
  if (mnl_attr_type_valid(a, CTA_PROTOINFO_MAX) < 0) return MNL_CB_OK;
  if (mnl_attr_get_type(a) == CTA_PROTOINFO_TCP && mnl_attr_validate(a, MNL_TYPE_NESTED) < 0) return MNL_CB_OK;
  tb[mnl_attr_get_type(a)] = a;
  return MNL_CB_OK;
}

static int tcp_cb(const struct nlattr *a, void *data) {
  const struct nlattr **tb = data;
  if (mnl_attr_type_valid(a, CTA_PROTOINFO_TCP_MAX) < 0) return MNL_CB_OK;
  if (mnl_attr_get_type(a) == CTA_PROTOINFO_TCP_STATE && mnl_attr_validate(a, MNL_TYPE_U8) < 0) return MNL_CB_OK;
  tb[mnl_attr_get_type(a)] = a;
  return MNL_CB_OK;
}

/* Four words of an address: IPv4 into word 0, IPv6 as four groups. */
static void put_addr(uint32_t *w, const struct nlattr *v4, const struct nlattr *v6) {
  w[0] = w[1] = w[2] = w[3] = 0;
  if (v4) {
    w[0] = ntohl(mnl_attr_get_u32(v4));
  } else if (v6) {
    uint32_t g[4];
    memcpy(g, mnl_attr_get_payload(v6), sizeof g);
    for (int i = 0; i < 4; i++) w[i] = ntohl(g[i]);
  }
}

/* nl_binding.decode for IPCTNL_MSG_CT_DELETE (a destroy event): 0 when the
 * original tuple's addresses are missing (a bad message). */
static int decode_event(nl_reader *r, const struct nlmsghdr *nlh, uint32_t *m) {
  (void)r;
  if (mnl_nlmsg_get_payload_len(nlh) < sizeof(struct nfgenmsg)) return 0;
  const struct nfgenmsg *nfg = mnl_nlmsg_get_payload(nlh);
  const struct nlattr *tb[CTA_MAX + 1], *tt[CTA_TUPLE_MAX + 1], *ti[CTA_IP_MAX + 1], *tp[CTA_PROTO_MAX + 1];
  memset(tb, 0, sizeof tb);
  memset(tt, 0, sizeof tt);
  memset(ti, 0, sizeof ti);
  memset(tp, 0, sizeof tp);
  if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), top_cb, tb) < 0 || !tb[CTA_TUPLE_ORIG]) return 0;
  if (mnl_attr_parse_nested(tb[CTA_TUPLE_ORIG], tuple_cb, tt) < 0 || !tt[CTA_TUPLE_IP]) return 0;
  if (mnl_attr_parse_nested(tt[CTA_TUPLE_IP], ip_cb, ti) < 0) return 0;
  int v4 = ti[CTA_IP_V4_SRC] && ti[CTA_IP_V4_DST], v6 = ti[CTA_IP_V6_SRC] && ti[CTA_IP_V6_DST];
  if (!v4 && !v6) return 0;
  uint32_t flags = 0;
  m[E_FAMILY] = nfg->nfgen_family;
  put_addr(m + E_SRC, v4 ? ti[CTA_IP_V4_SRC] : NULL, v4 ? NULL : ti[CTA_IP_V6_SRC]);
  put_addr(m + E_DST, v4 ? ti[CTA_IP_V4_DST] : NULL, v4 ? NULL : ti[CTA_IP_V6_DST]);
  m[E_PROTO] = m[E_SPORT] = m[E_DPORT] = 0;
  if (tt[CTA_TUPLE_PROTO] && mnl_attr_parse_nested(tt[CTA_TUPLE_PROTO], proto_cb, tp) >= 0) {
    if (tp[CTA_PROTO_NUM]) m[E_PROTO] = mnl_attr_get_u8(tp[CTA_PROTO_NUM]);
    if (tp[CTA_PROTO_SRC_PORT] && tp[CTA_PROTO_DST_PORT]) {
      m[E_SPORT] = ntohs(mnl_attr_get_u16(tp[CTA_PROTO_SRC_PORT]));
      m[E_DPORT] = ntohs(mnl_attr_get_u16(tp[CTA_PROTO_DST_PORT]));
      flags |= EF_PORTS;
    }
  }
  m[E_MARK] = 0;
  if (tb[CTA_MARK]) { /* the kernel leaves a zero mark out */
    m[E_MARK] = ntohl(mnl_attr_get_u32(tb[CTA_MARK]));
    flags |= EF_MARK;
  }
  m[E_ID] = 0;
  if (tb[CTA_ID]) {
    m[E_ID] = ntohl(mnl_attr_get_u32(tb[CTA_ID]));
    flags |= EF_ID;
  }
  m[E_TCP_STATE] = 0;
  if (tb[CTA_PROTOINFO]) {
    const struct nlattr *pi[CTA_PROTOINFO_MAX + 1], *tcp[CTA_PROTOINFO_TCP_MAX + 1];
    memset(pi, 0, sizeof pi);
    memset(tcp, 0, sizeof tcp);
    if (mnl_attr_parse_nested(tb[CTA_PROTOINFO], protoinfo_cb, pi) >= 0 && pi[CTA_PROTOINFO_TCP] &&
        mnl_attr_parse_nested(pi[CTA_PROTOINFO_TCP], tcp_cb, tcp) >= 0 && tcp[CTA_PROTOINFO_TCP_STATE]) {
      m[E_TCP_STATE] = mnl_attr_get_u8(tcp[CTA_PROTOINFO_TCP_STATE]);
      flags |= EF_TCP_STATE;
    }
  }
  m[E_FLAGS] = flags;
  return 1;
}

static const nl_binding ctevents_binding = {
  .label = "conntrack events", .noun = "conntrack event group", .config_msg = "NETLINK_ADD_MEMBERSHIP",
  .proc_list = NULL, .resource = "SluiceCtEvents",
  .codes = { .assert = "ERR_CTEV_NATIVE_ASSERT", .nomem = "ERR_CTEV_SOCKET", .socket = "ERR_CTEV_SOCKET",
             .permission = "ERR_CTEV_PERMISSION", .busy = "ERR_CTEV_SOCKET", .unsupported = "ERR_CTEV_UNSUPPORTED",
             .config = "ERR_CTEV_SOCKET", .poll_start = "ERR_CTEV_SOCKET", .poll = "ERR_CTEV_POLL" },
  .subsys = NFNL_SUBSYS_CTNETLINK, .msg_type = IPCTNL_MSG_CT_DELETE,
  .meta_words = EV_META_WORDS, .stats_words = EV_STATS_WORDS, .kernel_errors = NS_RECV_ERRORS,
  .decode = decode_event, .after_batch = NULL, .config_put = NULL, /* nothing to unbind: closing leaves the group */
  /* One datagram per ended flow; records are freed within 1 s of the event
   * (issue 22), so 10 ms of gathering is free and caps wake-ups at 100/s. */
  .coalesce_ms = 10,
};
#define ASSERT_ARG(cond, what) NL_ASSERT(env, &ctevents_binding, cond, what)

/* ctEventsOpen(rcvbufBytes, rx: Uint8Array, meta: Uint32Array, stats: Float64Array, onBatch(n), onError(err)) -> handle */
static napi_value ce_open(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value a[6];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  ASSERT_ARG(argc == 6, "ctEventsOpen() takes 6 arguments");
  uint32_t rcvbuf;
  ASSERT_ARG(get_u32(env, a[0], &rcvbuf), "rcvbufBytes");
  nl_open_args o = { 0, rcvbuf, EV_MSG_MAX, a[4], a[5], a[1], a[2], a[3], NULL };
  nl_reader *r = nl_reader_new(env, &ctevents_binding, sizeof(nl_reader), &o);
  if (!r) return NULL;
  int group = NFNLGRP_CONNTRACK_DESTROY, err = 0;
  if (mnl_socket_setsockopt(r->nl, NETLINK_ADD_MEMBERSHIP, &group, sizeof group) < 0) err = errno;
  /* ENOENT: nf_conntrack_netlink is not loaded and cannot be (the group has no kernel side). */
  if (err == ENOENT) err = EOPNOTSUPP;
  return nl_reader_start(r, err);
}

/* ctEventsDecode(msg: Uint8Array, meta: Uint32Array) -> 0 or 1: the decoder
 * on one netlink message built by a test (no socket). */
static napi_value ce_decode(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value a[2], out;
  void *msg, *meta;
  size_t msg_len, meta_len;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  ASSERT_ARG(argc == 2 && get_typed(env, a[0], napi_uint8_array, &msg, &msg_len) &&
                 get_typed(env, a[1], napi_uint32_array, &meta, &meta_len) && meta_len >= EV_META_WORDS,
             "ctEventsDecode(msg, meta)");
  const struct nlmsghdr *nlh = msg;
  int ok = msg_len >= sizeof *nlh && mnl_nlmsg_ok(nlh, (int)msg_len) &&
           NFNL_SUBSYS_ID(nlh->nlmsg_type) == NFNL_SUBSYS_CTNETLINK &&
           decode_event(NULL, nlh, meta);
  napi_create_uint32(env, (uint32_t)ok, &out);
  return out;
}

void ctevents_register(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    { "ctEventsOpen", NULL, ce_open, NULL, NULL, NULL, napi_default, NULL },
    { "ctEventsDecode", NULL, ce_decode, NULL, NULL, NULL, napi_default, NULL },
    { "ctEventsClose", NULL, nl_reader_close_js, NULL, NULL, NULL, napi_default, (void *)&ctevents_binding },
    { "ctEventsRef", NULL, nl_reader_ref_js, NULL, NULL, NULL, napi_default, (void *)&ctevents_binding },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  set_number(env, exports, "EV_META_WORDS", EV_META_WORDS);
  set_number(env, exports, "EV_STATS_WORDS", EV_STATS_WORDS);
}
