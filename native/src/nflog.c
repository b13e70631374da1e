/*
 * sluice NFLOG reader: nfnetlink_log over libmnl, for packets the daemon only
 * needs to hear about (the front node's FIN and RST: no verdict, the kernel
 * forwards them without waiting for us).
 *
 * Same shape as the NFQUEUE binding (nfq.c): JavaScript hands over every
 * buffer once at open (receive area, per-record metadata, statistics); one
 * uv_poll on the netlink socket; each wakeup drains datagrams with
 * non-blocking recvmsg() into the receive area, decodes each record's
 * metadata into the array, and calls JavaScript ONCE with the count. Nothing
 * is allocated and no JS object is created per record.
 *
 * The kernel batches records itself: it fills one skb of `bufferBytes` with
 * records and sends it when `threshold` records are in it, when it is full,
 * or `timeout` hundredths of a second after its first record. One datagram
 * thus carries many records (NLM_F_MULTI, closed by NLMSG_DONE).
 *
 * Loss: if our socket's receive buffer is full, the kernel drops the whole
 * datagram and our next recvmsg() fails once with ENOBUFS (counted in
 * overruns). With NFULNL_CFG_F_SEQ every record carries the instance's
 * sequence number, so the records lost are counted exactly (gaps in it).
 *
 * The TypeScript wrapper (src/nflog/) validates every argument; this file
 * only checks what it must to stay memory-safe (ERR_NFLOG_NATIVE_ASSERT).
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
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>

#include <uv.h>

#include "napi_util.h"
#include "nflog.h"
#include "nl_util.h"

/* ---- layout shared with src/nflog/layout.ts (keep in sync) ------------- */
enum { L_PAYLOAD_OFF = 0, L_PAYLOAD_LEN, L_INDEV, L_MARK, LOG_META_WORDS };
enum {
  LS_RECORDS = 0, LS_BATCHES, LS_MAX_BATCH, LS_DATAGRAMS, LS_OVERRUNS, LS_LOST,
  LS_BAD_MESSAGES, LS_RECV_ERRORS, LS_LAST_ERRNO, LS_TRUNCATED_READS, LS_CALLBACK_ERRORS,
  LOG_STATS_WORDS
};

/* Bytes of netlink framing and attributes around one record's payload
 * (packet header, mark, interfaces, hardware address and header, sequence
 * number, timestamp); 1 KiB is a wide margin. */
#define LOG_MSG_OVERHEAD 1024

#define LOG_ASSERT(env, cond, what)                                                     \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      throw_coded((env), "ERR_NFLOG_NATIVE_ASSERT", "native argument check failed: " what, 0, NULL); \
      return NULL;                                                                      \
    }                                                                                   \
  } while (0)

typedef struct sl_log_s {
  napi_env env;
  uv_poll_t poll;
  struct mnl_socket *nl;
  uint32_t portid;
  uint16_t group;
  int closing;
  int seq_known;      /* next_seq is valid (a record was seen) */
  uint32_t next_seq;  /* NFULA_SEQ expected next */

  uint8_t *rx; size_t rx_size; size_t rx_need;
  uint32_t *meta; uint32_t max_batch;
  double *stats;

  napi_ref on_batch, on_error, keep_rx, keep_meta, keep_stats, self;
  napi_async_context async_ctx;
} sl_log;

/* ---- receive path ------------------------------------------------------ */

static int log_attr_cb(const struct nlattr *attr, void *data) {
  const struct nlattr **tb = data;
  int type = mnl_attr_get_type(attr);
  if (mnl_attr_type_valid(attr, NFULA_MAX) < 0) return MNL_CB_OK; /* newer kernel: skip */
  switch (type) {
    case NFULA_MARK:
    case NFULA_IFINDEX_INDEV:
    case NFULA_SEQ:
      if (mnl_attr_validate(attr, MNL_TYPE_U32) < 0) return MNL_CB_OK;
      break;
    default:
      break;
  }
  tb[type] = attr;
  return MNL_CB_OK;
}

/* Fills one metadata slot from a NFULNL_MSG_PACKET message. 0 if unusable. */
static int decode_record(sl_log *l, const struct nlmsghdr *nlh, uint32_t *m) {
  const struct nlattr *tb[NFULA_MAX + 1];
  memset(tb, 0, sizeof tb);
  if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), log_attr_cb, tb) < 0) return 0;
  if (tb[NFULA_SEQ]) {
    uint32_t seq = ntohl(mnl_attr_get_u32(tb[NFULA_SEQ]));
    /* Unsigned difference: correct across the 2^32 wrap. */
    if (l->seq_known && seq != l->next_seq) l->stats[LS_LOST] += (double)(uint32_t)(seq - l->next_seq);
    l->seq_known = 1;
    l->next_seq = seq + 1;
  }
  if (!tb[NFULA_PAYLOAD]) return 0;
  m[L_PAYLOAD_OFF] = (uint32_t)((const uint8_t *)mnl_attr_get_payload(tb[NFULA_PAYLOAD]) - l->rx);
  m[L_PAYLOAD_LEN] = mnl_attr_get_payload_len(tb[NFULA_PAYLOAD]);
  m[L_INDEV] = tb[NFULA_IFINDEX_INDEV] ? ntohl(mnl_attr_get_u32(tb[NFULA_IFINDEX_INDEV])) : 0;
  m[L_MARK] = tb[NFULA_MARK] ? ntohl(mnl_attr_get_u32(tb[NFULA_MARK])) : 0;
  return 1;
}

static void report_async_error(sl_log *l, int err, const char *syscall);

/* Hands records [0, n) to JavaScript: one call. */
static void deliver(sl_log *l, uint32_t n) {
  if (n == 0 || l->closing) return;
  l->stats[LS_RECORDS] += n;
  l->stats[LS_BATCHES] += 1;
  if (n > l->stats[LS_MAX_BATCH]) l->stats[LS_MAX_BATCH] = n;
  napi_env env = l->env;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value fn, recv, argv[1], result;
  napi_get_reference_value(env, l->on_batch, &fn);
  napi_get_global(env, &recv);
  napi_create_uint32(env, n, &argv[0]);
  if (napi_make_callback(env, l->async_ctx, recv, fn, 1, argv, &result) != napi_ok) {
    l->stats[LS_CALLBACK_ERRORS] += 1;
    raise_pending(env);
  }
  napi_close_handle_scope(env, scope);
}

/*
 * Drains the socket: datagrams go one after the other into the receive area
 * while a maximal one still fits and fewer than max_batch records are
 * waiting; then one JS call. A datagram holding more records than the
 * metadata array has room for is handed over in several calls (its bytes
 * stay in place meanwhile). uv_poll is level triggered: whatever is left
 * wakes us on the next loop turn, so timers and other I/O are not starved.
 */
static void on_readable(uv_poll_t *handle, int status, int events) {
  sl_log *l = handle->data;
  if (l->closing) return;
  if (status < 0) {
    report_async_error(l, -status, "uv_poll");
    return;
  }
  int fd = mnl_socket_get_fd(l->nl);
  size_t off = 0;
  uint32_t n = 0;
  while (!l->closing && n < l->max_batch && l->rx_size - off >= l->rx_need) {
    struct iovec iov = { l->rx + off, l->rx_size - off };
    struct sockaddr_nl sa;
    struct msghdr mh = { &sa, sizeof sa, &iov, 1, NULL, 0, 0 };
    ssize_t r = recvmsg(fd, &mh, MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {
        /* Receive buffer overflowed: the kernel dropped datagrams (their
         * records show up as sequence gaps). The socket stays usable. */
        l->stats[LS_OVERRUNS] += 1;
        continue;
      }
      l->stats[LS_RECV_ERRORS] += 1;
      l->stats[LS_LAST_ERRNO] = errno;
      break;
    }
    l->stats[LS_DATAGRAMS] += 1;
    if (mh.msg_flags & MSG_TRUNC) { l->stats[LS_TRUNCATED_READS] += 1; continue; }
    if (sa.nl_pid != 0) { l->stats[LS_BAD_MESSAGES] += 1; continue; } /* not from the kernel */
    const struct nlmsghdr *nlh = (const struct nlmsghdr *)(l->rx + off);
    int len = (int)r;
    while (mnl_nlmsg_ok(nlh, len)) {
      if (NFNL_SUBSYS_ID(nlh->nlmsg_type) == NFNL_SUBSYS_ULOG &&
          NFNL_MSG_TYPE(nlh->nlmsg_type) == NFULNL_MSG_PACKET) {
        if (n == l->max_batch) { deliver(l, n); n = 0; }
        if (decode_record(l, nlh, l->meta + (size_t)n * LOG_META_WORDS)) n++;
        else l->stats[LS_BAD_MESSAGES] += 1;
      } else if (nlh->nlmsg_type == NLMSG_ERROR) {
        const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
        if (e->error != 0) { l->stats[LS_RECV_ERRORS] += 1; l->stats[LS_LAST_ERRNO] = -e->error; }
      } else if (nlh->nlmsg_type >= NLMSG_MIN_TYPE) {
        l->stats[LS_BAD_MESSAGES] += 1;
      } /* NLMSG_DONE closes each multipart datagram: nothing to do */
      nlh = mnl_nlmsg_next(nlh, &len);
    }
    off += MNL_ALIGN((size_t)r);
  }
  deliver(l, n);
}

/* ---- async errors ------------------------------------------------------ */

static void report_async_error(sl_log *l, int err, const char *syscall) {
  napi_env env = l->env;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value fn, recv, error, jcode, jmsg, result, v;
  char text[160];
  snprintf(text, sizeof text, "nflog group %u: %s (%s)", l->group, strerror(err), syscall);
  napi_create_string_utf8(env, "ERR_NFLOG_POLL", NAPI_AUTO_LENGTH, &jcode);
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &jmsg);
  napi_create_error(env, jcode, jmsg, &error);
  napi_create_int32(env, err, &v);
  napi_set_named_property(env, error, "errno", v);
  napi_get_reference_value(env, l->on_error, &fn);
  napi_get_global(env, &recv);
  if (napi_make_callback(env, l->async_ctx, recv, fn, 1, &error, &result) != napi_ok) raise_pending(env);
  napi_close_handle_scope(env, scope);
}

/* ---- open / close ------------------------------------------------------ */

static void free_log(sl_log *l) {
  napi_env env = l->env;
  napi_ref *refs[] = { &l->on_batch, &l->on_error, &l->keep_rx, &l->keep_meta, &l->keep_stats, &l->self };
  for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++)
    if (*refs[i]) { napi_delete_reference(env, *refs[i]); *refs[i] = NULL; }
  if (l->async_ctx) napi_async_destroy(env, l->async_ctx);
  if (l->nl) mnl_socket_close(l->nl);
  free(l);
}

static void on_closed(uv_handle_t *h) { free_log(h->data); }

/* A NFULNL_MSG_CONFIG message for our group, ready for attributes. */
static struct nlmsghdr *config_put(char *buf, uint16_t group, uint8_t command) {
  struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  struct nfgenmsg *nfg = mnl_nlmsg_put_extra_header(nlh, sizeof *nfg);
  nfg->nfgen_family = AF_UNSPEC;
  nfg->version = NFNETLINK_V0;
  nfg->res_id = htons(group);
  struct nfulnl_msg_config_cmd cmd = { command };
  mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof cmd, &cmd);
  return nlh;
}

/*
 * nflogOpen(group, copyRange, bufferBytes, timeoutCs, threshold, rcvbufBytes,
 *           rx: Uint8Array, meta: Uint32Array, stats: Float64Array,
 *           onBatch(n), onError(err)) -> handle
 */
static napi_value sl_open(napi_env env, napi_callback_info info) {
  size_t argc = 11;
  napi_value a[11];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  LOG_ASSERT(env, argc == 11, "nflogOpen() takes 11 arguments");
  uint32_t group, copy_range, bufsize, timeout, threshold, rcvbuf;
  LOG_ASSERT(env, get_u32(env, a[0], &group) && group <= 0xffff, "group");
  LOG_ASSERT(env, get_u32(env, a[1], &copy_range) && copy_range > 0 && copy_range <= 0xffff, "copyRange");
  LOG_ASSERT(env, get_u32(env, a[2], &bufsize) && bufsize <= 131072, "bufferBytes");
  LOG_ASSERT(env, get_u32(env, a[3], &timeout), "timeoutCs");
  LOG_ASSERT(env, get_u32(env, a[4], &threshold) && threshold > 0, "threshold");
  LOG_ASSERT(env, get_u32(env, a[5], &rcvbuf), "rcvbufBytes");
  void *rx, *meta, *stats;
  size_t rx_len, meta_len, stats_len;
  LOG_ASSERT(env, get_typed(env, a[6], napi_uint8_array, &rx, &rx_len), "rx");
  LOG_ASSERT(env, get_typed(env, a[7], napi_uint32_array, &meta, &meta_len), "meta");
  LOG_ASSERT(env, get_typed(env, a[8], napi_float64_array, &stats, &stats_len), "stats");
  LOG_ASSERT(env, stats_len >= LOG_STATS_WORDS && meta_len >= LOG_META_WORDS, "stats/meta length");
  /* A datagram is at most max(bufferBytes, one record): the kernel sizes
   * its skb so, and only exceeds bufferBytes for a single large record. */
  size_t one = (size_t)copy_range + LOG_MSG_OVERHEAD;
  size_t rx_need = bufsize > one ? bufsize : one;
  LOG_ASSERT(env, rx_len >= rx_need, "rx smaller than max(bufferBytes, copyRange + overhead)");
  napi_valuetype t1, t2;
  napi_typeof(env, a[9], &t1);
  napi_typeof(env, a[10], &t2);
  LOG_ASSERT(env, t1 == napi_function && t2 == napi_function, "callbacks");

  sl_log *l = calloc(1, sizeof *l);
  if (!l) {
    throw_coded(env, "ERR_NFLOG_SOCKET", "out of memory", ENOMEM, "calloc");
    return NULL;
  }
  l->env = env;
  l->group = (uint16_t)group;
  l->rx = rx; l->rx_size = rx_len; l->rx_need = rx_need;
  l->meta = meta; l->max_batch = (uint32_t)(meta_len / LOG_META_WORDS);
  l->stats = stats;

  int e;
  const char *syscall;
  l->nl = nl_open(rcvbuf, &e, &syscall);
  if (!l->nl) {
    free_log(l);
    throw_coded(env, e == EPERM || e == EACCES ? "ERR_NFLOG_PERMISSION" : "ERR_NFLOG_SOCKET",
                "cannot open netlink socket (needs CAP_NET_ADMIN)", e, syscall);
    return NULL;
  }
  l->portid = mnl_socket_get_portid(l->nl);
  int fd = mnl_socket_get_fd(l->nl);

  /* One message binds and configures: the kernel creates the instance on
   * BIND, then applies the attributes that follow in the same message. */
  char cfg[MNL_SOCKET_BUFFER_SIZE];
  struct nlmsghdr *nlh = config_put(cfg, l->group, NFULNL_CFG_CMD_BIND);
  struct nfulnl_msg_config_mode mode = { htonl(copy_range), NFULNL_COPY_PACKET, 0 };
  mnl_attr_put(nlh, NFULA_CFG_MODE, sizeof mode, &mode);
  /* The kernel silently keeps its default (about one page) for values
   * below it, and refuses none: the wrapper passes 8 KiB..128 KiB. */
  if (bufsize > 0) mnl_attr_put_u32(nlh, NFULA_CFG_NLBUFSIZ, htonl(bufsize));
  mnl_attr_put_u32(nlh, NFULA_CFG_TIMEOUT, htonl(timeout));
  mnl_attr_put_u32(nlh, NFULA_CFG_QTHRESH, htonl(threshold));
  mnl_attr_put_u16(nlh, NFULA_CFG_FLAGS, htons(NFULNL_CFG_F_SEQ));
  int err = nl_config_and_ack(l->nl, l->portid, nlh);
  if (err == EPERM && proc_lists("/proc/net/netfilter/nfnetlink_log", l->group)) err = EBUSY;
  if (err) {
    free_log(l);
    const char *code = err == EBUSY ? "ERR_NFLOG_BUSY"
                     : (err == EPERM || err == EACCES) ? "ERR_NFLOG_PERMISSION" : "ERR_NFLOG_CONFIG";
    throw_coded(env, code, err == EBUSY ? "log group is already bound by another socket"
                                        : "cannot bind and configure log group", err, "NFULNL_MSG_CONFIG");
    return NULL;
  }

  napi_create_reference(env, a[9], 1, &l->on_batch);
  napi_create_reference(env, a[10], 1, &l->on_error);
  napi_create_reference(env, a[6], 1, &l->keep_rx);
  napi_create_reference(env, a[7], 1, &l->keep_meta);
  napi_create_reference(env, a[8], 1, &l->keep_stats);
  napi_value resource_name;
  napi_create_string_utf8(env, "SluiceNflog", NAPI_AUTO_LENGTH, &resource_name);
  napi_async_init(env, NULL, resource_name, &l->async_ctx);

  uv_loop_t *loop;
  napi_get_uv_event_loop(env, &loop);
  int ue = uv_poll_init(loop, &l->poll, fd);
  if (ue == 0) { l->poll.data = l; ue = uv_poll_start(&l->poll, UV_READABLE, on_readable); }
  if (ue != 0) {
    free_log(l);
    throw_coded(env, "ERR_NFLOG_SOCKET", "cannot poll netlink socket", -ue, "uv_poll_start");
    return NULL;
  }
  napi_value ext;
  napi_create_external(env, l, NULL, NULL, &ext);
  napi_create_reference(env, ext, 1, &l->self);
  return ext;
}

/* nflogClose(handle): unbind, stop polling; memory is released once libuv
 * has closed the poll handle. Records not yet read are discarded. */
static napi_value sl_close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  sl_log *l = argc == 1 ? get_external(env, a[0]) : NULL;
  LOG_ASSERT(env, l != NULL, "nflogClose(handle)");
  if (l->closing) return NULL;
  l->closing = 1;
  uv_poll_stop(&l->poll);
  char cfg[MNL_SOCKET_BUFFER_SIZE];
  struct nlmsghdr *nlh = config_put(cfg, l->group, NFULNL_CFG_CMD_UNBIND);
  /* Best effort: closing the socket unbinds too (NETLINK_URELEASE). */
  mnl_socket_sendto(l->nl, nlh, nlh->nlmsg_len);
  uv_close((uv_handle_t *)&l->poll, on_closed);
  return NULL;
}

/* nflogRef(handle, bool): whether an open reader keeps the event loop alive. */
static napi_value sl_ref(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value a[2];
  bool on;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  sl_log *l = argc == 2 ? get_external(env, a[0]) : NULL;
  LOG_ASSERT(env, l != NULL && napi_get_value_bool(env, a[1], &on) == napi_ok, "nflogRef(handle, bool)");
  if (l->closing) return NULL;
  if (on) uv_ref((uv_handle_t *)&l->poll); else uv_unref((uv_handle_t *)&l->poll);
  return NULL;
}

void nflog_register(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    { "nflogOpen", NULL, sl_open, NULL, NULL, NULL, napi_default, NULL },
    { "nflogClose", NULL, sl_close, NULL, NULL, NULL, napi_default, NULL },
    { "nflogRef", NULL, sl_ref, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  napi_value v;
  napi_create_uint32(env, LOG_META_WORDS, &v); napi_set_named_property(env, exports, "LOG_META_WORDS", v);
  napi_create_uint32(env, LOG_STATS_WORDS, &v); napi_set_named_property(env, exports, "LOG_STATS_WORDS", v);
  napi_create_uint32(env, LOG_MSG_OVERHEAD, &v); napi_set_named_property(env, exports, "LOG_MSG_OVERHEAD", v);
}
