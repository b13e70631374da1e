/*
 * The kernel's conntrack table read over ctnetlink: one dump request
 * (IPCTNL_MSG_CT_GET, NLM_F_DUMP, every family), answered as datagrams of
 * up to 32 KiB that a threadpool thread receives and decodes into rows of
 * words (ct_msg.h: an event's words plus the reply tuple's source), a batch
 * of rows per call, for the front node's start and resync.
 *
 * Why not /proc/net/nf_conntrack: its text is mode 0440 root, so the
 * unprivileged unit (CAP_NET_ADMIN) listed the table with `conntrack -L`
 * started by child_process.spawn, which forks the daemon (~200 MB of RSS
 * with a million flows: ~4 ms on the event loop's thread) and then
 * parses ~170 MB of text on that thread. Every ctnetlink request needs
 * only CAP_NET_ADMIN in the namespace, and here the decoding happens off
 * the loop, in C, with nothing allocated per flow: the loop thread only
 * reads the rows.
 *
 * Use: ctDumpOpen() sends the request and receives the first datagram on
 * the calling thread (the kernel builds it while sending: a refusal, such
 * as EPERM without CAP_NET_ADMIN, is thrown here, so opening is also the
 * preflight's probe); ctDumpRead(handle, rows) -> Promise<number of rows>
 * (0: the dump is over; a message that is not a whole conntrack entry of
 * this dump fails it with EBADMSG); ctDumpClose(handle). One read at a time per
 * handle (a second is refused). The dump holds the kernel's place in the
 * table between reads, however long the caller waits; a flow that starts
 * or ends during the dump may or may not be listed, as with /proc.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <libmnl/libmnl.h>
#include "napi_util.h"
#include "ct_msg.h"

/* The kernel sizes a dump's datagrams to the largest read the socket has
 * seen (up to 32 KiB), so this is also how much of the table one recvmsg
 * lists: 8 KiB, ~27 flows, about what one read of /proc's text returns
 * (a 4 KiB page). More per call makes each system call longer, and this
 * kernel (PREEMPT_NONE) lets nothing else have the CPU inside one: the
 * dump also kills every expired entry it passes, each with its destroy
 * event, so one 32 KiB read during a mass expiry ran for milliseconds
 * (perf sched: a worker's 12.5 ms run while the loop thread waited). */
#define CT_DUMP_BUF 8192
#define CODE "ERR_SLUICE_CT_DUMP"

typedef struct {
  struct mnl_socket *nl;
  unsigned int portid;
  uint32_t seq;
  int done;   /* NLMSG_DONE read: every later read resolves 0 */
  int busy;   /* a read is on the threadpool */
  int closed; /* ctDumpClose called: the socket closes once no read runs */
  size_t len, off; /* the datagram in buf, and the bytes of it decoded */
  /* The running read. */
  napi_async_work work;
  napi_deferred deferred;
  napi_ref rows_ref, self_ref;
  uint32_t *rows;
  size_t max_rows, n;
  int err;
  const char *syscall;
  char buf[CT_DUMP_BUF];
} ct_dump;

static void close_socket(ct_dump *d) {
  if (d->nl != NULL) mnl_socket_close(d->nl);
  d->nl = NULL;
}

/* A message the dump cannot be trusted after: the read fails (the caller
 * keeps every record rather than judge flows from a table read in part). */
static void bad_message(ct_dump *d) {
  d->err = EBADMSG;
  d->syscall = "netlink";
}

/* Decodes the message at d->off and steps past it. Flows of other
 * protocols (not TCP or UDP) are left out, as /proc's reader leaves them. */
static void step(ct_dump *d) {
  const struct nlmsghdr *nlh = (const void *)(d->buf + d->off);
  int rem = (int)(d->len - d->off);
  if (!mnl_nlmsg_ok(nlh, rem)) { /* a cut or garbled tail */
    bad_message(d);
    return;
  }
  d->off += NLMSG_ALIGN(nlh->nlmsg_len);
  if (d->off > d->len) d->off = d->len;
  if (!mnl_nlmsg_seq_ok(nlh, d->seq) || !mnl_nlmsg_portid_ok(nlh, d->portid)) {
    bad_message(d);
    return;
  }
  int err = 0;
  switch (ct_msg_control(nlh, &err)) {
  case CT_CTL_SKIP: return;
  case CT_CTL_DONE: d->done = 1; return;
  case CT_CTL_FAIL: d->err = err; d->syscall = "netlink"; return;
  default: break;
  }
  uint32_t *row = d->rows + d->n * CT_ROW_WORDS;
  if (NFNL_SUBSYS_ID(nlh->nlmsg_type) != NFNL_SUBSYS_CTNETLINK || NFNL_MSG_TYPE(nlh->nlmsg_type) != IPCTNL_MSG_CT_NEW || !ct_msg_decode(nlh, row, 1)) {
    bad_message(d);
    return;
  }
  if (row[E_PROTO] != IPPROTO_TCP && row[E_PROTO] != IPPROTO_UDP) return;
  if ((row[E_FLAGS] & (EF_PORTS | EF_REPLY)) != (EF_PORTS | EF_REPLY)) { /* a TCP or UDP entry always has both tuples' ports */
    bad_message(d);
    return;
  }
  d->n++;
}

/* Receives the next datagram into buf: 0, or an errno with d->syscall set. */
static int receive(ct_dump *d) {
  for (;;) {
    ssize_t r = mnl_socket_recvfrom(d->nl, d->buf, sizeof d->buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      d->syscall = "recvfrom";
      return errno;
    }
    d->len = (size_t)r;
    d->off = 0;
    return 0;
  }
}

/* Threadpool: fills rows until they are full, the dump ends, or it fails. */
static void read_execute(napi_env env, void *data) {
  (void)env;
  ct_dump *d = data;
  while (d->n < d->max_rows && !d->done && d->err == 0) {
    if (d->off >= d->len && (d->err = receive(d)) != 0) return;
    if (d->len == 0) { /* nothing more will come: the kernel ended the dump without NLMSG_DONE */
      d->err = EPROTO;
      d->syscall = "recvfrom";
      return;
    }
    step(d);
  }
}

static void read_complete(napi_env env, napi_status status, void *data) {
  ct_dump *d = data;
  int failed = status != napi_ok || d->err != 0;
  if (status != napi_ok) {
    napi_reject_deferred(env, d->deferred, coded_error(env, CODE, "the read of the flow table was cancelled", 0, NULL));
  } else if (d->err != 0) {
    napi_reject_deferred(env, d->deferred, coded_error_errno(env, CODE, "cannot read the kernel's flow table over ctnetlink", d->err, d->syscall));
  } else {
    napi_value n;
    napi_create_double(env, (double)d->n, &n);
    napi_resolve_deferred(env, d->deferred, n);
  }
  napi_delete_reference(env, d->rows_ref);
  napi_delete_async_work(env, d->work);
  d->busy = 0;
  /* A failed dump cannot resume (the kernel's place in it is lost): later reads are refused. */
  if (failed || d->closed) close_socket(d);
  napi_ref self = d->self_ref;
  d->self_ref = NULL;
  napi_delete_reference(env, self); /* last: may let the handle be collected */
}

static void finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  ct_dump *d = data;
  close_socket(d);
  free(d);
}

/* The handle in a[0] of a call with `want` arguments (read into a), or NULL. */
static ct_dump *dump_arg(napi_env env, napi_callback_info info, size_t want, napi_value *a) {
  size_t argc = want;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  return argc == want ? get_external(env, a[0]) : NULL;
}

/* ctDumpOpen() -> handle. Throws ERR_SLUICE_CT_DUMP with errno and syscall
 * (EPERM: no CAP_NET_ADMIN in the namespace; EPROTONOSUPPORT or ENOENT: no ctnetlink). */
static napi_value cd_open(napi_env env, napi_callback_info info) {
  (void)info;
  ct_dump *d = calloc(1, sizeof *d);
  if (d == NULL) {
    throw_coded(env, CODE, "out of memory", 0, NULL);
    return NULL;
  }
  int err = 0;
  const char *syscall = NULL;
  d->nl = mnl_socket_open(NETLINK_NETFILTER);
  if (d->nl == NULL) {
    err = errno;
    syscall = "socket";
    goto fail;
  }
  if (mnl_socket_bind(d->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
    err = errno;
    syscall = "bind";
    goto fail;
  }
  d->portid = mnl_socket_get_portid(d->nl);
  d->seq = (uint32_t)time(NULL);
  char req[256]; /* a header and the nfgenmsg */
  struct nlmsghdr *nlh = mnl_nlmsg_put_header(req);
  nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  nlh->nlmsg_seq = d->seq;
  struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof *g);
  g->nfgen_family = AF_UNSPEC; /* every family */
  g->version = NFNETLINK_V0;
  g->res_id = 0;
  if (mnl_socket_sendto(d->nl, nlh, nlh->nlmsg_len) < 0) {
    err = errno;
    syscall = "sendto";
    goto fail;
  }
  /* The first datagram (or the refusal) was queued while sending. */
  if ((err = receive(d)) != 0) {
    syscall = d->syscall;
    goto fail;
  }
  const struct nlmsghdr *first = (const void *)d->buf;
  if (d->len > 0 && mnl_nlmsg_ok(first, (int)d->len) && first->nlmsg_type == NLMSG_ERROR) {
    const struct nlmsgerr *e = mnl_nlmsg_get_payload(first);
    if (mnl_nlmsg_get_payload_len(first) >= sizeof *e && e->error != 0) {
      err = -e->error;
      syscall = "netlink";
      goto fail;
    }
  }
  napi_value handle;
  if (napi_create_external(env, d, finalize, NULL, &handle) != napi_ok) {
    close_socket(d);
    free(d);
    throw_coded(env, CODE, "cannot make the dump's handle", 0, NULL);
    return NULL;
  }
  return handle;
fail:
  close_socket(d);
  free(d);
  throw_coded(env, CODE, "cannot list the kernel's flow table over ctnetlink", err, syscall);
  return NULL;
}

/* ctDumpRead(handle, rows: Uint32Array of >= CT_ROW_WORDS words) -> Promise<rows filled>; 0: the dump is over. */
static napi_value cd_read(napi_env env, napi_callback_info info) {
  napi_value a[2];
  ct_dump *d = dump_arg(env, info, 2, a);
  void *rows = NULL;
  size_t words = 0;
  if (d == NULL || !get_typed(env, a[1], napi_uint32_array, &rows, &words) || words < CT_ROW_WORDS) {
    throw_coded(env, "ERR_SLUICE_NATIVE_ARG", "ctDumpRead(handle, rows: Uint32Array of at least CT_ROW_WORDS words)", 0, NULL);
    return NULL;
  }
  if (d->busy || d->closed || d->nl == NULL) {
    throw_coded(env, "ERR_SLUICE_NATIVE_ARG", d->busy ? "ctDumpRead: a read of this dump is running" : "ctDumpRead: the dump is closed", 0, NULL);
    return NULL;
  }
  d->rows = rows;
  d->max_rows = words / CT_ROW_WORDS;
  d->n = 0;
  d->err = 0;
  if (napi_create_reference(env, a[1], 1, &d->rows_ref) != napi_ok) {
    throw_coded(env, CODE, "cannot hold the rows", 0, NULL);
    return NULL;
  }
  if (napi_create_reference(env, a[0], 1, &d->self_ref) != napi_ok) {
    napi_delete_reference(env, d->rows_ref);
    throw_coded(env, CODE, "cannot hold the dump", 0, NULL);
    return NULL;
  }
  int started;
  d->busy = 1;
  napi_value promise = queue_promise_work(env, "sluice.ctDumpRead", read_execute, read_complete, d, &d->deferred, &d->work, CODE, "the flow table's read", &started);
  if (!started) {
    d->busy = 0;
    napi_delete_reference(env, d->rows_ref);
    napi_delete_reference(env, d->self_ref);
    d->self_ref = NULL;
  }
  return promise;
}

/* ctDumpClose(handle): ends the dump (the kernel drops its place); idempotent. */
static napi_value cd_close(napi_env env, napi_callback_info info) {
  napi_value a[1];
  ct_dump *d = dump_arg(env, info, 1, a);
  if (d == NULL) {
    throw_coded(env, "ERR_SLUICE_NATIVE_ARG", "ctDumpClose(handle)", 0, NULL);
    return NULL;
  }
  d->closed = 1;
  if (!d->busy) close_socket(d);
  return NULL;
}

void ct_dump_register(napi_env env, napi_value exports) {
  napi_property_descriptor p[] = {
    { "ctDumpOpen", NULL, cd_open, NULL, NULL, NULL, napi_default, NULL },
    { "ctDumpRead", NULL, cd_read, NULL, NULL, NULL, napi_default, NULL },
    { "ctDumpClose", NULL, cd_close, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof p / sizeof p[0], p);
  set_number(env, exports, "CT_ROW_WORDS", CT_ROW_WORDS);
}
