/*
 * The netlink reader under the bindings (NFQUEUE in nfq.c, NFLOG in
 * nflog.c, conntrack events in ctevents.c); README.md "The NFQUEUE addon" describes its shape. JavaScript
 * hands over every buffer once at open: nothing is allocated and no JS
 * object created per message. A binding describes itself in an nl_binding
 * and embeds an nl_reader as the first member of its handle. The wrappers
 * validate every argument; C asserts only what memory safety needs. Use
 * from the main JS thread of one environment (uv loop affinity).
 */
#ifndef SLUICE_NL_READER_H
#define SLUICE_NL_READER_H
#include <stdint.h>
#include <libmnl/libmnl.h>
#include <uv.h>
#include "napi_util.h"

typedef struct nl_reader_s nl_reader;

/* The reader's counters: the first slots of both bindings' statistics
 * arrays (src/nfqueue/layout.ts, src/nflog/layout.ts), the binding's own after. */
enum { NS_ITEMS, NS_BATCHES, NS_MAX_BATCH, NS_DATAGRAMS, NS_OVERRUNS, NS_BAD_MESSAGES, NS_RECV_ERRORS,
       NS_LAST_ERRNO, NS_TRUNCATED_READS, NS_CALLBACK_ERRORS,
       /* NS_OVERRUNS as of the last read that found the socket empty: an
        * overrun's episode ends there (the kernel stops dropping), so a resync
        * for the messages it lost must start after it, not at the overrun. */
       NS_SETTLED_OVERRUNS, NS_COUNT };

typedef struct {
  const char *label;      /* names a handle in async errors: "<label> <num>: ..." */
  const char *noun;       /* "queue" or "log group", in open errors */
  const char *config_msg; /* the config message's name: the syscall of config errors */
  const char *proc_list;  /* /proc/net/netfilter list of the bound numbers, or NULL */
  const char *resource;   /* async resource name (async_hooks) */
  struct { /* error codes; src/errors/errors.ts maps each to a class */
    const char *assert, *nomem, *socket, *permission, *busy, *unsupported, *config, *poll_start, *poll;
  } codes;
  uint8_t subsys, msg_type; /* data messages: NFNL_SUBSYS_*, *_MSG_PACKET */
  uint32_t meta_words, stats_words;
  uint8_t kernel_errors; /* the stats slot counting NLMSG_ERRORs received */
  int (*decode)(nl_reader *r, const struct nlmsghdr *nlh, uint32_t *meta); /* one meta slot; 0: unusable */
  void (*after_batch)(nl_reader *r, napi_value result); /* optional: the batch call's result, NULL if it threw */
  struct nlmsghdr *(*config_put)(char *buf, uint16_t num, int bind); /* binds (1) or unbinds `num`; NULL: nothing to unbind at close */
  /* 0: read as soon as the socket is readable. N > 0: after a read, stop
   * polling for N ms and let messages gather in the socket buffer, so a
   * stream of single-message datagrams (conntrack events: one per flow)
   * wakes the event loop at most 1000/N times a second instead of once per
   * message. Each wake-up of a sleeping thread costs a cross-CPU wake-up
   * (an IPI, a VM exit in a guest) in the sender's context: measured, the
   * per-flow destroy events were a visible share of the front node's cost
   * per new connection. Only for data whose consumer tolerates N ms. */
  uint32_t coalesce_ms;
} nl_binding;

struct nl_reader_s {
  const nl_binding *binding;
  napi_env env;
  uv_poll_t poll;
  uv_timer_t coalesce; /* binding->coalesce_ms > 0: restarts the poll */
  int handles_open;    /* libuv handles not yet closed; freed at 0 */
  struct mnl_socket *nl;
  uint32_t portid;
  uint16_t num;     /* queue or group number */
  int closing;      /* close() was called; memory freed once libuv closed the poll */
  double wakeups;   /* poll callbacks: liveness() shows the loop drains the socket */
  uint8_t *rx;
  size_t rx_size, rx_need;
  uint32_t *meta, max_batch;
  double *stats;
  napi_ref refs[7]; /* [R_ON_BATCH], [R_ON_ERROR], the JS buffers, the handle itself */
  size_t nrefs;
  napi_async_context async_ctx;
};
enum { R_ON_BATCH, R_ON_ERROR };

/* What both bindings' open() take besides their own configuration. */
typedef struct {
  uint16_t num;
  uint32_t rcvbuf;  /* SO_RCVBUF bytes; 0 keeps the default */
  size_t rx_need;   /* bytes of one maximal datagram */
  /* the callbacks, then the buffers kept as long as the handle (extra: the binding's, or NULL) */
  napi_value on_batch, on_error, rx, meta, stats, extra;
} nl_open_args;

/* Throws the binding's assertion error and returns NULL unless cond. */
#define NL_ASSERT(env, b, cond, what)                                                      \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      throw_coded((env), (b)->codes.assert, "native argument check failed: " what, 0, NULL); \
      return NULL;                                                                         \
    }                                                                                      \
  } while (0)

/* Checks the shared arguments, allocates a zeroed handle of `size` bytes and opens its socket; NULL after a throw. */
nl_reader *nl_reader_new(napi_env env, const nl_binding *b, size_t size, const nl_open_args *o);
/* Sends one config message with NLM_F_ACK, waits up to 2 s for the ack: 0 or
 * an errno. The kernel queues the ack within our sendto(), before any packet
 * or record of the freshly bound queue or group: it is the first thing read. */
int nl_config_and_ack(nl_reader *r, struct nlmsghdr *nlh);
/* Ends open() with the config result: throws (freeing the handle) or starts polling and returns the JS handle. */
napi_value nl_reader_start(nl_reader *r, int err);
/* A JS function's arguments (up to *argc) into a; returns its binding (the
 * property's data) and sets *r to the handle in a[0] if it is one of its. */
const nl_binding *nl_reader_args(napi_env env, napi_callback_info info, size_t *argc, napi_value *a, nl_reader **r);
/* close(handle), ref(handle, bool), liveness(handle); the property's data is the binding. */
napi_value nl_reader_close_js(napi_env env, napi_callback_info info);
napi_value nl_reader_ref_js(napi_env env, napi_callback_info info);
napi_value nl_reader_liveness_js(napi_env env, napi_callback_info info);
/* socketDrops(handle): the socket's sk_drops (SO_MEMINFO), -1 if unknown. */
napi_value nl_reader_socket_drops_js(napi_env env, napi_callback_info info);
#endif
