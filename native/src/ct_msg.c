/* The conntrack message decoder shared by the event reader and the table
 * dump (ct_msg.h). */
#include <errno.h>
#include <string.h>
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include "ct_msg.h"
#include "napi_util.h"

/* Attribute tables on the stack: nothing allocated per event. Each callback
 * keeps the attributes it knows whose payload has the right length, and
 * skips types newer than the headers. */
static int top_cb(const struct nlattr *a, void *data) {
  const struct nlattr **tb = data;
  int t = mnl_attr_get_type(a);
  if (mnl_attr_type_valid(a, CTA_MAX) < 0) return MNL_CB_OK;
  if ((t == CTA_TUPLE_ORIG || t == CTA_TUPLE_REPLY || t == CTA_PROTOINFO) && mnl_attr_validate(a, MNL_TYPE_NESTED) < 0) return MNL_CB_OK;
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

/* A tuple's addresses into a[0..4) and b[0..4), its protocol and ports into
 * *proto, *sport, *dport (ports: *has_ports). 0 when its addresses are missing. */
static int put_tuple(const struct nlattr *tuple, uint32_t *a, uint32_t *b, uint32_t *proto, uint32_t *sport, uint32_t *dport, int *has_ports) {
  const struct nlattr *tt[CTA_TUPLE_MAX + 1], *ti[CTA_IP_MAX + 1], *tp[CTA_PROTO_MAX + 1];
  memset(tt, 0, sizeof tt);
  memset(ti, 0, sizeof ti);
  memset(tp, 0, sizeof tp);
  if (mnl_attr_parse_nested(tuple, tuple_cb, tt) < 0 || !tt[CTA_TUPLE_IP]) return 0;
  if (mnl_attr_parse_nested(tt[CTA_TUPLE_IP], ip_cb, ti) < 0) return 0;
  int v4 = ti[CTA_IP_V4_SRC] && ti[CTA_IP_V4_DST], v6 = ti[CTA_IP_V6_SRC] && ti[CTA_IP_V6_DST];
  if (!v4 && !v6) return 0;
  put_addr(a, v4 ? ti[CTA_IP_V4_SRC] : NULL, v4 ? NULL : ti[CTA_IP_V6_SRC]);
  put_addr(b, v4 ? ti[CTA_IP_V4_DST] : NULL, v4 ? NULL : ti[CTA_IP_V6_DST]);
  *proto = *sport = *dport = 0;
  *has_ports = 0;
  if (tt[CTA_TUPLE_PROTO] && mnl_attr_parse_nested(tt[CTA_TUPLE_PROTO], proto_cb, tp) >= 0) {
    if (tp[CTA_PROTO_NUM]) *proto = mnl_attr_get_u8(tp[CTA_PROTO_NUM]);
    if (tp[CTA_PROTO_SRC_PORT] && tp[CTA_PROTO_DST_PORT]) {
      *sport = ntohs(mnl_attr_get_u16(tp[CTA_PROTO_SRC_PORT]));
      *dport = ntohs(mnl_attr_get_u16(tp[CTA_PROTO_DST_PORT]));
      *has_ports = 1;
    }
  }
  return 1;
}

int ct_msg_decode(const struct nlmsghdr *nlh, uint32_t *m, int reply) {
  if (mnl_nlmsg_get_payload_len(nlh) < sizeof(struct nfgenmsg)) return 0;
  const struct nfgenmsg *nfg = mnl_nlmsg_get_payload(nlh);
  const struct nlattr *tb[CTA_MAX + 1];
  memset(tb, 0, sizeof tb);
  if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), top_cb, tb) < 0 || !tb[CTA_TUPLE_ORIG]) return 0;
  uint32_t flags = 0;
  int ports;
  if (!put_tuple(tb[CTA_TUPLE_ORIG], m + E_SRC, m + E_DST, &m[E_PROTO], &m[E_SPORT], &m[E_DPORT], &ports)) return 0;
  if (ports) flags |= EF_PORTS;
  m[E_FAMILY] = nfg->nfgen_family;
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
  if (reply) {
    uint32_t rdst[4], rproto = 0, rdport = 0;
    memset(m + E_REPLY_SRC, 0, 4 * sizeof *m);
    m[E_REPLY_SPORT] = 0;
    if (tb[CTA_TUPLE_REPLY] && put_tuple(tb[CTA_TUPLE_REPLY], m + E_REPLY_SRC, rdst, &rproto, &m[E_REPLY_SPORT], &rdport, &ports) && ports)
      flags |= EF_REPLY;
  }
  m[E_FLAGS] = flags;
  return 1;
}

/* ctMessageDecode(msg: Uint8Array, words: Uint32Array) -> 0 or 1: the
 * decoder on one netlink message built by a test (no socket), as the event
 * reader runs it (EV_META_WORDS words) or as the dump does (CT_ROW_WORDS:
 * the reply tuple too). 0 unless msg is one whole ctnetlink message. */
static napi_value decode_js(napi_env env, napi_callback_info info) {
  size_t argc = 2, len = 0, words = 0;
  napi_value a[2], out;
  void *msg = NULL, *m = NULL;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc != 2 || !get_typed(env, a[0], napi_uint8_array, &msg, &len) || !get_typed(env, a[1], napi_uint32_array, &m, &words) || words < EV_META_WORDS) {
    throw_coded(env, "ERR_SLUICE_NATIVE_ARG", "ctMessageDecode(msg: Uint8Array, words: Uint32Array of EV_META_WORDS or CT_ROW_WORDS words)", 0, NULL);
    return NULL;
  }
  const struct nlmsghdr *nlh = msg;
  int ok = len >= sizeof *nlh && mnl_nlmsg_ok(nlh, (int)len) && NFNL_SUBSYS_ID(nlh->nlmsg_type) == NFNL_SUBSYS_CTNETLINK &&
           ct_msg_decode(nlh, m, words >= CT_ROW_WORDS);
  napi_create_uint32(env, (uint32_t)ok, &out);
  return out;
}

void ct_msg_register(napi_env env, napi_value exports) {
  napi_property_descriptor p[] = {
    { "ctMessageDecode", NULL, decode_js, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof p / sizeof p[0], p);
}

int ct_msg_control(const struct nlmsghdr *nlh, int *err) {
  if (nlh->nlmsg_type == NLMSG_NOOP) return CT_CTL_SKIP;
  if (nlh->nlmsg_type == NLMSG_DONE) {
    /* Its payload, when present, is the dump's final status. */
    if (mnl_nlmsg_get_payload_len(nlh) >= sizeof(int)) {
      int status;
      memcpy(&status, mnl_nlmsg_get_payload(nlh), sizeof status);
      if (status < 0) {
        *err = -status;
        return CT_CTL_FAIL;
      }
    }
    return CT_CTL_DONE;
  }
  if (nlh->nlmsg_type == NLMSG_ERROR) {
    const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
    if (mnl_nlmsg_get_payload_len(nlh) < sizeof *e) {
      *err = EPROTO;
      return CT_CTL_FAIL;
    }
    if (e->error == 0) return CT_CTL_SKIP; /* an acknowledgement: nothing asked for one */
    *err = -e->error;
    return CT_CTL_FAIL;
  }
  return CT_CTL_DATA;
}
