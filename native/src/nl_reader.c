/* The netlink reader both bindings are built on (see nl_reader.h). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/netfilter/nfnetlink.h>
#include "nl_reader.h"

/* Calls fn(arg) with napi_make_callback (not napi_call_function) so that
 * process.nextTick and promise jobs queued by it run right after it, as
 * they would after any other I/O callback. Needs an open handle scope. */
static napi_status call(nl_reader *r, napi_ref fn_ref, napi_value arg, napi_value *result) {
  napi_value fn, recv;
  napi_get_reference_value(r->env, fn_ref, &fn);
  napi_get_global(r->env, &recv); /* make_callback needs an object receiver */
  return napi_make_callback(r->env, r->async_ctx, recv, fn, 1, &arg, result);
}

static void report_async_error(nl_reader *r, int err, const char *syscall) {
  napi_handle_scope scope;
  napi_open_handle_scope(r->env, &scope);
  char text[160];
  snprintf(text, sizeof text, "%s %u: %s (%s)", r->binding->label, r->num, strerror(err), syscall);
  napi_value result, error = coded_error(r->env, r->binding->codes.poll, text, err, NULL);
  if (call(r, r->refs[R_ON_ERROR], error, &result) != napi_ok) raise_pending(r->env);
  napi_close_handle_scope(r->env, scope);
}

/* Hands messages [0, n) to JavaScript: one call. */
static void deliver(nl_reader *r, uint32_t n) {
  if (n == 0 || r->closing) return;
  r->stats[NS_ITEMS] += n;
  r->stats[NS_BATCHES] += 1;
  if (n > r->stats[NS_MAX_BATCH]) r->stats[NS_MAX_BATCH] = n;
  napi_handle_scope scope;
  napi_open_handle_scope(r->env, &scope);
  napi_value arg, result;
  napi_create_uint32(r->env, n, &arg);
  napi_status st = call(r, r->refs[R_ON_BATCH], arg, &result);
  if (st != napi_ok) {
    r->stats[NS_CALLBACK_ERRORS] += 1;
    raise_pending(r->env);
    result = NULL;
  }
  if (r->binding->after_batch && !r->closing) r->binding->after_batch(r, result);
  napi_close_handle_scope(r->env, scope);
}

static void on_readable(uv_poll_t *handle, int status, int events);

static void on_coalesced(uv_timer_t *t) {
  nl_reader *r = t->data;
  if (r->closing) return;
  int ue = uv_poll_start(&r->poll, UV_READABLE, on_readable);
  if (ue < 0) report_async_error(r, -ue, "uv_poll_start");
}

/* Drains datagrams back to back into rx while a maximal one fits and fewer
 * than max_batch messages wait; then one JS call. A datagram with more data
 * messages than meta has room for (NFLOG's) is handed over in several calls.
 * uv_poll is level triggered: what is left wakes us next loop turn, so the
 * bound keeps timers and other I/O from starving in a flood. */
static void on_readable(uv_poll_t *handle, int status, int events) {
  nl_reader *r = handle->data;
  const nl_binding *b = r->binding;
  if (r->closing) return;
  r->wakeups += 1;
  int fd = mnl_socket_get_fd(r->nl);
  if (status == UV_EBADF) {
    /* libuv reports EPOLLERR as UV_EBADF and has already stopped the poll
     * for good. A netlink socket signals EPOLLERR when the kernel could not
     * queue a message (sk_err = ENOBUFS: an overrun) and we did not read
     * before the loop polled again (a busy event loop). That is no socket
     * failure: reading SO_ERROR clears it, and polling resumes. Not resuming
     * (as before) left NFQUEUE bound to a socket nobody read: every packet
     * that still fitted its buffer waited in the kernel for good (issue 22). */
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
    if (err == 0 || err == ENOBUFS) {
      if (err == ENOBUFS) r->stats[NS_OVERRUNS] += 1;
      status = uv_poll_start(&r->poll, UV_READABLE, on_readable);
    } else {
      status = -err;
    }
  }
  if (status < 0) {
    report_async_error(r, -status, "uv_poll");
    return;
  }
  size_t off = 0;
  uint32_t n = 0, datagrams = 0;
  int drained = 0; /* the last recvmsg found the socket empty */
  while (!r->closing && n < r->max_batch && r->rx_size - off >= r->rx_need) {
    struct iovec iov = { r->rx + off, r->rx_size - off };
    struct sockaddr_nl sa;
    struct msghdr mh = { &sa, sizeof sa, &iov, 1, NULL, 0, 0 };
    ssize_t got = recvmsg(fd, &mh, MSG_DONTWAIT);
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        drained = 1;
        r->stats[NS_SETTLED_OVERRUNS] = r->stats[NS_OVERRUNS];
        break;
      }
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {
        /* Receive buffer overflowed: the kernel dropped (NFQUEUE: or, with
         * FAIL_OPEN, accepted) what it could not queue. The socket stays usable. */
        r->stats[NS_OVERRUNS] += 1;
        continue;
      }
      r->stats[NS_RECV_ERRORS] += 1;
      r->stats[NS_LAST_ERRNO] = errno;
      break;
    }
    r->stats[NS_DATAGRAMS] += 1;
    datagrams++;
    if (mh.msg_flags & MSG_TRUNC) { r->stats[NS_TRUNCATED_READS] += 1; continue; }
    if (sa.nl_pid != 0) { r->stats[NS_BAD_MESSAGES] += 1; continue; } /* not from the kernel */
    const struct nlmsghdr *nlh = (const struct nlmsghdr *)(r->rx + off);
    int len = (int)got;
    while (mnl_nlmsg_ok(nlh, len)) {
      if (nlh->nlmsg_type == NLMSG_ERROR) {
        /* NFQUEUE verdict errors (ENOENT: unknown or decided id) come even without NLM_F_ACK. */
        const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
        if (e->error != 0) {
          r->stats[b->kernel_errors] += 1;
          r->stats[NS_LAST_ERRNO] = -e->error;
        }
      } else if (NFNL_SUBSYS_ID(nlh->nlmsg_type) == b->subsys && NFNL_MSG_TYPE(nlh->nlmsg_type) == b->msg_type) {
        if (n == r->max_batch) {
          deliver(r, n);
          n = 0;
        }
        if (b->decode(r, nlh, r->meta + (size_t)n * b->meta_words)) n++;
        else r->stats[NS_BAD_MESSAGES] += 1;
      } else if (nlh->nlmsg_type >= NLMSG_MIN_TYPE) {
        r->stats[NS_BAD_MESSAGES] += 1;
      } /* NLMSG_DONE closes each multipart (NFLOG) datagram: nothing to do */
      nlh = mnl_nlmsg_next(nlh, &len);
    }
    off += MNL_ALIGN((size_t)got);
  }
  deliver(r, n);
  /* After an overrun the kernel marks the socket congested and drops every
   * new message (unicast NFQUEUE packets too) until a recvmsg finds the
   * receive queue empty. A read that stopped at the batch or buffer bound
   * just as the queue ran out would leave that mark set on an empty socket:
   * level-triggered polling never fires again, and the socket would stay
   * deaf for good (seen: conntrack events lost forever after a flood).
   * A zero-length peek is such a recvmsg: it clears the mark if the queue is
   * empty and leaves any message in place. One syscall per bounded read. */
  if (!drained && !r->closing && datagrams > 0) {
    char byte;
    if (recv(fd, &byte, 0, MSG_PEEK | MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      drained = 1;
      r->stats[NS_SETTLED_OVERRUNS] = r->stats[NS_OVERRUNS];
    }
  }
  /* Coalescing: having emptied the socket, sleep on the timer, not the
   * socket. The timer's poll restart is level triggered: whatever arrived
   * meanwhile is read at once then. A read that stopped at its bound keeps
   * polling, so a backlog (a million flows timing out: ~60k events/s) is
   * read at full speed, one bounded batch per loop turn, never at one batch
   * per coalescing period. Nothing read (a spurious wake-up): keep polling. */
  if (b->coalesce_ms > 0 && datagrams > 0 && drained && !r->closing) {
    uv_poll_stop(&r->poll);
    uv_timer_start(&r->coalesce, on_coalesced, b->coalesce_ms, 0);
  }
}

static void reader_free(nl_reader *r) {
  for (size_t i = 0; i < r->nrefs; i++) napi_delete_reference(r->env, r->refs[i]);
  if (r->async_ctx) napi_async_destroy(r->env, r->async_ctx);
  if (r->nl) mnl_socket_close(r->nl);
  free(r);
}

static void on_closed(uv_handle_t *h) {
  nl_reader *r = h->data;
  if (--r->handles_open == 0) reader_free(r);
}

nl_reader *nl_reader_new(napi_env env, const nl_binding *b, size_t size, const nl_open_args *o) {
  void *rx, *meta, *stats;
  size_t rx_len, meta_len, stats_len;
  NL_ASSERT(env, b, get_typed(env, o->rx, napi_uint8_array, &rx, &rx_len), "rx");
  NL_ASSERT(env, b, get_typed(env, o->meta, napi_uint32_array, &meta, &meta_len), "meta");
  NL_ASSERT(env, b, get_typed(env, o->stats, napi_float64_array, &stats, &stats_len), "stats");
  NL_ASSERT(env, b, stats_len >= b->stats_words && meta_len >= b->meta_words, "stats/meta length");
  NL_ASSERT(env, b, rx_len >= o->rx_need, "rx smaller than one maximal datagram");
  NL_ASSERT(env, b, is_function(env, o->on_batch) && is_function(env, o->on_error), "callbacks");
  nl_reader *r = calloc(1, size);
  if (!r) {
    throw_coded(env, b->codes.nomem, "out of memory", ENOMEM, "calloc");
    return NULL;
  }
  *r = (nl_reader){ .binding = b, .env = env, .num = o->num, .rx = rx, .rx_size = rx_len, .rx_need = o->rx_need,
                    .meta = meta, .max_batch = (uint32_t)(meta_len / b->meta_words), .stats = stats };
  napi_value keep[] = { o->on_batch, o->on_error, o->rx, o->meta, o->stats, o->extra };
  for (size_t i = 0; i < 6 && keep[i]; i++) napi_create_reference(env, keep[i], 1, &r->refs[r->nrefs++]);
  const char *failed = NULL;
  r->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (!r->nl) failed = "socket";
  else if (mnl_socket_bind(r->nl, 0, MNL_SOCKET_AUTOPID) < 0) failed = "bind";
  if (failed) {
    int e = errno;
    reader_free(r);
    throw_coded(env, e == EPERM || e == EACCES ? b->codes.permission : b->codes.socket,
                "cannot open netlink socket (needs CAP_NET_ADMIN)", e, failed);
    return NULL;
  }
  r->portid = mnl_socket_get_portid(r->nl);
  if (o->rcvbuf > 0) {
    /* SO_RCVBUFFORCE ignores net.core.rmem_max but needs CAP_NET_ADMIN (which
     * binding needs anyway); fall back otherwise. */
    int fd = mnl_socket_get_fd(r->nl), v = (int)o->rcvbuf;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof v) < 0)
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
  }
  return r;
}

int nl_config_and_ack(nl_reader *r, struct nlmsghdr *nlh) {
  static uint32_t seq_counter = 0;
  nlh->nlmsg_flags |= NLM_F_ACK;
  nlh->nlmsg_seq = ++seq_counter;
  if (mnl_socket_sendto(r->nl, nlh, nlh->nlmsg_len) < 0) return errno;
  char buf[8192];
  struct pollfd pfd = { mnl_socket_get_fd(r->nl), POLLIN, 0 };
  for (;;) {
    int pr = poll(&pfd, 1, 2000);
    if (pr == 0) return ETIMEDOUT;
    if (pr < 0) { if (errno == EINTR) continue; return errno; }
    ssize_t got = recv(pfd.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (got < 0) { if (errno == EAGAIN || errno == EINTR) continue; return errno; }
    if (mnl_cb_run(buf, (size_t)got, nlh->nlmsg_seq, r->portid, NULL, NULL) == MNL_CB_ERROR) return errno;
    return 0;
  }
}

/* 1 if the /proc/net/netfilter list `path` (per namespace) has a line for
 * `num`: bound. Binding one another socket owns fails with EPERM (peer_portid
 * mismatch), like a missing CAP_NET_ADMIN; this tells the two apart. */
static int proc_lists(const char *path, unsigned num) {
  if (!path) return 0; /* a binding with no such list (conntrack events) */
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  unsigned n;
  char line[256];
  int found = 0;
  while (!found && fgets(line, sizeof line, f))
    if (sscanf(line, "%u", &n) == 1 && n == num) found = 1;
  fclose(f);
  return found;
}

napi_value nl_reader_start(nl_reader *r, int err) {
  napi_env env = r->env;
  const nl_binding *b = r->binding;
  if (err == EPERM && proc_lists(b->proc_list, r->num)) err = EBUSY;
  if (err) {
    const char *code = err == EBUSY ? b->codes.busy
                     : (err == EPERM || err == EACCES) ? b->codes.permission
                     : err == EOPNOTSUPP ? b->codes.unsupported : b->codes.config;
    char msg[64];
    snprintf(msg, sizeof msg, err == EBUSY ? "%s is already bound by another socket" : "cannot bind and configure %s",
             b->noun);
    reader_free(r);
    throw_coded(env, code, msg, err, b->config_msg);
    return NULL;
  }
  napi_value name, ext;
  napi_create_string_utf8(env, b->resource, NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, NULL, name, &r->async_ctx);
  uv_loop_t *loop;
  napi_get_uv_event_loop(env, &loop);
  int ue = uv_poll_init(loop, &r->poll, mnl_socket_get_fd(r->nl));
  if (ue == 0) {
    r->poll.data = r;
    r->handles_open = 1;
    ue = uv_poll_start(&r->poll, UV_READABLE, on_readable);
  }
  if (ue == 0 && b->coalesce_ms > 0) {
    ue = uv_timer_init(loop, &r->coalesce);
    if (ue == 0) {
      r->coalesce.data = r;
      r->handles_open = 2;
    }
  }
  if (ue != 0) {
    if (r->handles_open > 0) {
      /* An initialised handle must be closed through libuv before its memory goes. */
      r->closing = 1;
      uv_poll_stop(&r->poll);
      uv_close((uv_handle_t *)&r->poll, on_closed);
      if (r->handles_open == 2) uv_close((uv_handle_t *)&r->coalesce, on_closed);
      throw_coded(env, b->codes.poll_start, "cannot poll netlink socket", -ue, "uv_poll_start");
      return NULL;
    }
    reader_free(r);
    throw_coded(env, b->codes.poll_start, "cannot poll netlink socket", -ue, "uv_poll_start");
    return NULL;
  }
  napi_create_external(env, r, NULL, NULL, &ext);
  /* The handle keeps itself alive until close(): the caller owns its lifetime. */
  napi_create_reference(env, ext, 1, &r->refs[r->nrefs++]);
  return ext;
}

const nl_binding *nl_reader_args(napi_env env, napi_callback_info info, size_t *argc, napi_value *a, nl_reader **r) {
  void *b;
  napi_get_cb_info(env, info, argc, a, NULL, &b);
  *r = *argc >= 1 ? get_external(env, a[0]) : NULL;
  if (*r && (*r)->binding != b) *r = NULL;
  return b;
}

/* close(handle): unbind (the kernel drops NFQUEUE packets awaiting a verdict,
 * unread NFLOG records are lost), stop polling; memory is freed once libuv
 * has closed the poll handle. */
napi_value nl_reader_close_js(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1];
  nl_reader *r;
  const nl_binding *b = nl_reader_args(env, info, &argc, a, &r);
  NL_ASSERT(env, b, argc == 1 && r != NULL, "close(handle)");
  if (r->closing) return NULL;
  r->closing = 1;
  uv_poll_stop(&r->poll);
  if (r->handles_open == 2) uv_timer_stop(&r->coalesce);
  if (b->config_put) {
    char cfg[MNL_SOCKET_BUFFER_SIZE];
    struct nlmsghdr *nlh = b->config_put(cfg, r->num, 0);
    /* Best effort: closing the socket unbinds too (NETLINK_URELEASE). */
    mnl_socket_sendto(r->nl, nlh, nlh->nlmsg_len);
  }
  uv_close((uv_handle_t *)&r->poll, on_closed);
  if (r->handles_open == 2) uv_close((uv_handle_t *)&r->coalesce, on_closed);
  return NULL;
}

/* ref(handle, bool): whether an open handle keeps the event loop alive. */
napi_value nl_reader_ref_js(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value a[2];
  nl_reader *r;
  bool on;
  const nl_binding *b = nl_reader_args(env, info, &argc, a, &r);
  NL_ASSERT(env, b, argc == 2 && r != NULL && napi_get_value_bool(env, a[1], &on) == napi_ok, "ref(handle, bool)");
  if (r->closing) return NULL;
  if (on) uv_ref((uv_handle_t *)&r->poll);
  else uv_unref((uv_handle_t *)&r->poll);
  if (r->handles_open == 2) {
    if (on) uv_ref((uv_handle_t *)&r->coalesce);
    else uv_unref((uv_handle_t *)&r->coalesce);
  }
  return NULL;
}

/* liveness(handle) -> { polling, portid, wakeups, readable } (NativeLiveness
 * in src/nfqueue/native.ts) for the systemd watchdog, without touching the handle. */
napi_value nl_reader_liveness_js(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1], out, v;
  nl_reader *r;
  const nl_binding *b = nl_reader_args(env, info, &argc, a, &r);
  NL_ASSERT(env, b, argc == 1 && r != NULL, "liveness(handle)");
  int readable = 0;
  if (!r->closing) {
    struct pollfd pfd = { mnl_socket_get_fd(r->nl), POLLIN, 0 };
    readable = poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN) != 0;
  }
  napi_create_object(env, &out);
  /* Between a coalesced read and its timer the poll is stopped on purpose. */
  int polling = uv_is_active((uv_handle_t *)&r->poll) || (r->handles_open == 2 && uv_is_active((uv_handle_t *)&r->coalesce));
  napi_get_boolean(env, !r->closing && polling, &v);
  napi_set_named_property(env, out, "polling", v);
  set_number(env, out, "portid", r->portid);
  set_number(env, out, "wakeups", r->wakeups);
  napi_get_boolean(env, readable, &v);
  napi_set_named_property(env, out, "readable", v);
  return out;
}

/* socketDrops(handle) -> number: messages the kernel could not queue on our
 * socket since it was opened (sk_drops, SO_MEMINFO; netlink_overrun counts
 * each one). Exact and immediate, also for an overrun that no later message
 * reveals; a syscall, so read at stats time, never per packet. -1 if the
 * kernel does not tell (SO_MEMINFO: Linux 4.12) or the handle is closing. */
napi_value nl_reader_socket_drops_js(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value a[1], out;
  nl_reader *r;
  const nl_binding *b = nl_reader_args(env, info, &argc, a, &r);
  NL_ASSERT(env, b, argc == 1 && r != NULL, "socketDrops(handle)");
  double drops = -1;
  if (!r->closing) {
    uint32_t mem[SK_MEMINFO_VARS];
    socklen_t len = sizeof mem;
    if (getsockopt(mnl_socket_get_fd(r->nl), SOL_SOCKET, SO_MEMINFO, mem, &len) == 0 && len > SK_MEMINFO_DROPS * sizeof mem[0])
      drops = mem[SK_MEMINFO_DROPS];
  }
  napi_create_double(env, drops, &out);
  return out;
}
