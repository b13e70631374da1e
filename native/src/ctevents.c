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
#include "ct_msg.h"

/* One event message is a few hundred bytes (tuples, protoinfo, counters,
 * timestamps, labels, helper and security context names): 8 KiB is a wide margin. */
#define EV_MSG_MAX 8192
enum { EV_STATS_WORDS = NS_COUNT }; /* the reader's counters only (NS_ITEMS counts events) */

/* nl_binding.decode for IPCTNL_MSG_CT_DELETE (a destroy event). */
static int decode_event(nl_reader *r, const struct nlmsghdr *nlh, uint32_t *m) {
  (void)r;
  return ct_msg_decode(nlh, m, 0);
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

void ctevents_register(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    { "ctEventsOpen", NULL, ce_open, NULL, NULL, NULL, napi_default, NULL },
    { "ctEventsClose", NULL, nl_reader_close_js, NULL, NULL, NULL, napi_default, (void *)&ctevents_binding },
    { "ctEventsRef", NULL, nl_reader_ref_js, NULL, NULL, NULL, napi_default, (void *)&ctevents_binding },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  set_number(env, exports, "EV_META_WORDS", EV_META_WORDS);
  set_number(env, exports, "EV_STATS_WORDS", EV_STATS_WORDS);
}
