/*
 * Expiry of the flows that a server gone down can never answer (the
 * analogue of IPVS's expire_nodest_conn), over ctnetlink, off the loop.
 *
 * Why: a TCP flow decided for a server that then died stays in conntrack,
 * unreplied, for nf_conntrack_tcp_timeout_syn_sent (120 s), NATed to the
 * dead server. A client that opens a new connection from the same source
 * port within that time (ports are drawn at random and reused) sends a SYN
 * that conntrack takes for a retransmission of the old flow: it is never
 * queued, never decided again, and follows the old binding to the dead
 * server until the client gives up. A UDP flow is worse: every datagram
 * refreshes the entry, so a client that keeps sending never leaves the
 * dead server. Deleting such entries makes the next packet (the SYN's
 * retransmission, the next datagram) a new flow, decided for a live
 * server; the destroy events free the daemon's records.
 *
 * Which entries: those whose ct mark is the dead server's (the mark the
 * decision set: marks.ts) and whose reply comes from the server's address
 * and port (a reload that renumbered servers can leave another server's
 * older flows under this mark: they are not touched), and of those the
 * TCP flows the server never
 * answered (no IPS_SEEN_REPLY: nothing at the server to lose) and every UDP
 * flow (a datagram has no connection to break). TCP flows the server
 * answered stay: their packets cannot be decided again (a mid-stream
 * packet of an unknown flow is dropped), and if the down was a false alarm
 * they are alive.
 *
 * How: a dump filtered by the kernel on the mark (CTA_MARK, CTA_MARK_MASK;
 * every family), and for each entry that qualifies a delete by its
 * original tuple and id (so an entry that ended and was replaced by
 * another flow of the same tuple meanwhile is not touched: ENOENT) on a
 * second socket, each acknowledged, while the dump goes on: the kernel
 * holds the dump's place between reads. Nothing is collected, so memory
 * does not grow with the number of flows.
 *
 * Use: ctExpire(mark, server: Uint32Array(4), port) -> Promise<{ matched,
 * deleted, gone }> (server: its address as IPv6 words, an IPv4 one mapped
 * ::ffff:a.b.c.d as src/packet/address6.ts keeps it; matched:
 * entries with the mark that qualified; gone: ended before their delete);
 * rejects with ERR_SLUICE_CT_EXPIRE (EPERM without CAP_NET_ADMIN).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <libmnl/libmnl.h>
#include "napi_util.h"
#include "ct_msg.h"

#define CODE "ERR_SLUICE_CT_EXPIRE"
/* One dump datagram: small for the same reason as ct_dump.c's (each read
 * is one system call that nothing preempts on this kernel). */
#define EXPIRE_BUF 8192

typedef struct {
  uint32_t mark;
  uint32_t server[4]; /* mapped form for IPv4 */
  uint32_t port;
  struct mnl_socket *dump, *del;
  uint32_t seq, del_seq;
  double matched, deleted, gone;
  int err;
  const char *syscall;
  napi_async_work work;
  napi_deferred deferred;
  char buf[EXPIRE_BUF];
  char req[512];
  char ack[512];
} ct_expire;

static int fail(ct_expire *x, int err, const char *syscall) {
  x->err = err;
  x->syscall = syscall;
  return -1;
}

static int top_cb(const struct nlattr *a, void *data) {
  const struct nlattr **tb = data;
  int t = mnl_attr_get_type(a);
  if (mnl_attr_type_valid(a, CTA_MAX) < 0) return MNL_CB_OK;
  if (t == CTA_TUPLE_ORIG && mnl_attr_validate(a, MNL_TYPE_NESTED) < 0) return MNL_CB_OK;
  if (t == CTA_STATUS && mnl_attr_validate(a, MNL_TYPE_U32) < 0) return MNL_CB_OK;
  tb[t] = a;
  return MNL_CB_OK;
}

/* Deletes the entry by its original tuple and id; its acknowledgement is
 * read before the dump goes on. 0, or -1 with x->err set. */
static int delete_entry(ct_expire *x, uint8_t family, const struct nlattr *orig, uint32_t id_be) {
  if ((size_t)orig->nla_len + 64 > sizeof x->req) return fail(x, EMSGSIZE, "netlink");
  struct nlmsghdr *nlh = mnl_nlmsg_put_header(x->req);
  nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  nlh->nlmsg_seq = ++x->del_seq;
  struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof *g);
  g->nfgen_family = family;
  g->version = NFNETLINK_V0;
  g->res_id = 0;
  /* The tuple exactly as the kernel listed it (a nested attribute). */
  memcpy(mnl_nlmsg_get_payload_tail(nlh), orig, orig->nla_len);
  nlh->nlmsg_len += MNL_ALIGN(orig->nla_len);
  mnl_attr_put_u32(nlh, CTA_ID, id_be);
  if (mnl_socket_sendto(x->del, nlh, nlh->nlmsg_len) < 0) return fail(x, errno, "sendto");
  for (;;) {
    ssize_t r = mnl_socket_recvfrom(x->del, x->ack, sizeof x->ack);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return fail(x, errno, "recvfrom");
    const struct nlmsghdr *a = (const void *)x->ack;
    if (!mnl_nlmsg_ok(a, (int)r) || a->nlmsg_type != NLMSG_ERROR || a->nlmsg_seq != x->del_seq) return fail(x, EBADMSG, "netlink");
    const struct nlmsgerr *e = mnl_nlmsg_get_payload(a);
    if (mnl_nlmsg_get_payload_len(a) < sizeof *e) return fail(x, EBADMSG, "netlink");
    if (e->error == 0) x->deleted++;
    else if (e->error == -ENOENT) x->gone++; /* it ended (or was replaced) since the dump listed it */
    else return fail(x, -e->error, "netlink");
    return 0;
  }
}

/* One message of the dump: 1 on NLMSG_DONE, 0 to go on, -1 on failure. */
static int on_message(ct_expire *x, const struct nlmsghdr *nlh) {
  if (!mnl_nlmsg_seq_ok(nlh, x->seq)) return fail(x, EBADMSG, "netlink");
  int err = 0;
  switch (ct_msg_control(nlh, &err)) {
  case CT_CTL_SKIP: return 0;
  case CT_CTL_DONE: return 1;
  case CT_CTL_FAIL: return fail(x, err, "netlink");
  default: break;
  }
  if (NFNL_SUBSYS_ID(nlh->nlmsg_type) != NFNL_SUBSYS_CTNETLINK || NFNL_MSG_TYPE(nlh->nlmsg_type) != IPCTNL_MSG_CT_NEW) return fail(x, EBADMSG, "netlink");
  uint32_t m[CT_ROW_WORDS];
  if (!ct_msg_decode(nlh, m, 1)) return fail(x, EBADMSG, "netlink");
  /* The kernel filtered on the mark; checked again, since a kernel that
   * ignored the filter would otherwise have us expire every flow. */
  if (!(m[E_FLAGS] & EF_MARK) || m[E_MARK] != x->mark) return 0;
  /* The reply's source is the server (DNAT): its address and port. */
  if (!(m[E_FLAGS] & EF_REPLY) || m[E_REPLY_SPORT] != x->port) return 0;
  const uint32_t *r = m + E_REPLY_SRC;
  int same = m[E_FAMILY] == AF_INET ? (x->server[0] == 0 && x->server[1] == 0 && x->server[2] == 0xffff && x->server[3] == r[0])
                                    : (x->server[0] == r[0] && x->server[1] == r[1] && x->server[2] == r[2] && x->server[3] == r[3]);
  if (!same) return 0;
  const struct nlattr *tb[CTA_MAX + 1] = { 0 };
  if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), top_cb, tb) < 0 || tb[CTA_TUPLE_ORIG] == NULL || tb[CTA_STATUS] == NULL || !(m[E_FLAGS] & EF_ID)) return fail(x, EBADMSG, "netlink");
  uint32_t status = ntohl(mnl_attr_get_u32(tb[CTA_STATUS]));
  int qualifies = (m[E_PROTO] == IPPROTO_TCP && !(status & IPS_SEEN_REPLY)) || m[E_PROTO] == IPPROTO_UDP;
  if (!qualifies) return 0;
  x->matched++;
  return delete_entry(x, (uint8_t)m[E_FAMILY], tb[CTA_TUPLE_ORIG], htonl(m[E_ID]));
}

static void execute(napi_env env, void *data) {
  (void)env;
  ct_expire *x = data;
  x->dump = mnl_socket_open(NETLINK_NETFILTER);
  x->del = mnl_socket_open(NETLINK_NETFILTER);
  if (x->dump == NULL || x->del == NULL) {
    fail(x, errno, "socket");
    return;
  }
  if (mnl_socket_bind(x->dump, 0, MNL_SOCKET_AUTOPID) < 0 || mnl_socket_bind(x->del, 0, MNL_SOCKET_AUTOPID) < 0) {
    fail(x, errno, "bind");
    return;
  }
  x->seq = (uint32_t)time(NULL);
  x->del_seq = x->seq;
  struct nlmsghdr *nlh = mnl_nlmsg_put_header(x->req);
  nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  nlh->nlmsg_seq = x->seq;
  struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof *g);
  g->nfgen_family = AF_UNSPEC; /* both families: a service may have an IPv4 and an IPv6 VIP */
  g->version = NFNETLINK_V0;
  g->res_id = 0;
  mnl_attr_put_u32(nlh, CTA_MARK, htonl(x->mark));
  mnl_attr_put_u32(nlh, CTA_MARK_MASK, htonl(0xffffffffu));
  if (mnl_socket_sendto(x->dump, nlh, nlh->nlmsg_len) < 0) {
    fail(x, errno, "sendto");
    return;
  }
  for (;;) {
    ssize_t r = mnl_socket_recvfrom(x->dump, x->buf, sizeof x->buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      fail(x, errno, "recvfrom");
      return;
    }
    if (r == 0) {
      fail(x, EPROTO, "recvfrom"); /* the dump ended without NLMSG_DONE */
      return;
    }
    int rem = (int)r;
    for (const struct nlmsghdr *m = (const void *)x->buf; mnl_nlmsg_ok(m, rem); m = mnl_nlmsg_next(m, &rem)) {
      int s = on_message(x, m);
      if (s != 0) return; /* done, or failed (x->err) */
    }
    if (rem != 0) {
      fail(x, EBADMSG, "netlink"); /* a cut or garbled tail */
      return;
    }
  }
}

static void complete(napi_env env, napi_status status, void *data) {
  ct_expire *x = data;
  if (x->dump != NULL) mnl_socket_close(x->dump);
  if (x->del != NULL) mnl_socket_close(x->del);
  if (status != napi_ok) {
    napi_reject_deferred(env, x->deferred, coded_error(env, CODE, "the expiry of a server's flows was cancelled", 0, NULL));
  } else if (x->err != 0) {
    napi_reject_deferred(env, x->deferred, coded_error_errno(env, CODE, "cannot expire a server's flows over ctnetlink", x->err, x->syscall));
  } else {
    napi_value o;
    napi_create_object(env, &o);
    set_number(env, o, "matched", x->matched);
    set_number(env, o, "deleted", x->deleted);
    set_number(env, o, "gone", x->gone);
    napi_resolve_deferred(env, x->deferred, o);
  }
  napi_delete_async_work(env, x->work);
  free(x);
}

/* ctExpire(mark: u32, server: Uint32Array(4), port: u16) -> Promise<{ matched, deleted, gone }>. */
static napi_value ce_expire(napi_env env, napi_callback_info info) {
  size_t argc = 3, words = 0;
  napi_value a[3];
  uint32_t mark, port;
  void *server = NULL;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (argc != 3 || !get_u32(env, a[0], &mark) || mark == 0 || !get_typed(env, a[1], napi_uint32_array, &server, &words) || words != 4 ||
      !get_u32(env, a[2], &port) || port == 0 || port > 65535) {
    throw_coded(env, "ERR_SLUICE_NATIVE_ARG", "ctExpire(mark: a non-zero u32, server: Uint32Array of 4 words, port: 1..65535)", 0, NULL);
    return NULL;
  }
  ct_expire *x = calloc(1, sizeof *x);
  if (x == NULL) {
    throw_coded(env, CODE, "out of memory", 0, NULL);
    return NULL;
  }
  x->mark = mark;
  memcpy(x->server, server, sizeof x->server);
  x->port = port;
  int started;
  napi_value promise = queue_promise_work(env, "sluice.ctExpire", execute, complete, x, &x->deferred, &x->work, CODE, "the expiry of a server's flows", &started);
  if (!started) free(x);
  return promise;
}

void ct_expire_register(napi_env env, napi_value exports) {
  napi_property_descriptor p[] = {
    { "ctExpire", NULL, ce_expire, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof p / sizeof p[0], p);
}
