/*
 * The netlink reader both bindings are built on (NFQUEUE in nfq.c, NFLOG in
 * nflog.c). Its shape, and why:
 *   - JavaScript allocates every buffer once and hands it over at open: the
 *     receive area, the per-message metadata array, the statistics array
 *     (and a binding's own). The C side never allocates per message and
 *     never creates JS objects per message.
 *   - One non-blocking NETLINK_NETFILTER socket per handle, bound to a queue
 *     or group with one acknowledged config message; one uv_poll on it.
 *   - Each wakeup drains datagrams with non-blocking recvmsg(), one after
 *     the other into the receive area, so payloads stay where the kernel put
 *     them (zero copy); the binding's decoder fills one metadata slot per
 *     data message; then JavaScript is called ONCE with the count.
 * A binding describes itself in an nl_binding and embeds an nl_reader as the
 * first member of its handle. The TypeScript wrappers validate every
 * argument; the C side only checks what it must to stay memory-safe, and
 * throws the binding's assertion code otherwise.
 * Must be used from the main JS thread of one environment (uv loop affinity).
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
enum {
  NS_ITEMS, NS_BATCHES, NS_MAX_BATCH, NS_DATAGRAMS, NS_OVERRUNS, NS_BAD_MESSAGES, NS_RECV_ERRORS,
  NS_LAST_ERRNO, NS_TRUNCATED_READS, NS_CALLBACK_ERRORS, NS_COUNT
};

typedef struct {
  const char *label;      /* names a handle in async errors: "<label> <num>: ..." */
  const char *noun;       /* "queue" or "log group", in open errors */
  const char *config_msg; /* the config message's name: the syscall of config errors */
  const char *proc_list;  /* /proc/net/netfilter list of the bound numbers */
  const char *resource;   /* async resource name (async_hooks) */
  struct { /* error codes; src/errors/errors.ts maps each to a class */
    const char *assert, *nomem, *socket, *permission, *busy, *unsupported, *config, *poll_start, *poll;
  } codes;
  uint8_t subsys, msg_type; /* data messages: NFNL_SUBSYS_*, *_MSG_PACKET */
  uint32_t meta_words, stats_words;
  uint8_t kernel_errors; /* the stats slot counting NLMSG_ERRORs received */
  /* Fills one metadata slot from a data message; 0 if unusable. */
  int (*decode)(nl_reader *r, const struct nlmsghdr *nlh, uint32_t *meta);
  /* Optional: runs after each batch call with its result (NULL if it threw). */
  void (*after_batch)(nl_reader *r, napi_value result);
  /* Puts a config message binding (bind = 1) or unbinding number num in buf. */
  struct nlmsghdr *(*config_put)(char *buf, uint16_t num, int bind);
} nl_binding;

struct nl_reader_s {
  const nl_binding *binding;
  napi_env env;
  uv_poll_t poll;
  struct mnl_socket *nl;
  uint32_t portid;
  uint16_t num;     /* queue or group number */
  int closing;      /* close() was called; memory freed once libuv closed the poll */
  double wakeups;   /* poll callbacks: liveness() shows the loop drains the socket */
  uint8_t *rx;
  size_t rx_size, rx_need;
  uint32_t *meta, max_batch;
  double *stats;
  napi_ref refs[8]; /* [R_ON_BATCH], [R_ON_ERROR], the JS buffers, the handle itself */
  size_t nrefs;
  napi_async_context async_ctx;
};
enum { R_ON_BATCH, R_ON_ERROR };

/* What both bindings' open() take besides their own configuration. */
typedef struct {
  uint16_t num;
  uint32_t rcvbuf;  /* SO_RCVBUF bytes; 0 keeps the default */
  size_t rx_need;   /* bytes of one maximal datagram */
  /* the callbacks, then the buffers kept as long as the handle: rx, meta,
   * stats and the binding's own (NULL if none) */
  napi_value on_batch, on_error, rx, meta, stats, extra[2];
} nl_open_args;

/* Throws the binding's assertion error and returns NULL unless cond. */
#define NL_ASSERT(env, b, cond, what)                                                      \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      throw_coded((env), (b)->codes.assert, "native argument check failed: " what, 0, NULL); \
      return NULL;                                                                         \
    }                                                                                      \
  } while (0)

/* Checks the shared arguments, allocates a zeroed handle of `size` bytes
 * (the binding's struct) and opens its socket; NULL after a throw. */
nl_reader *nl_reader_new(napi_env env, const nl_binding *b, size_t size, const nl_open_args *o);
/* Sends one config message with NLM_F_ACK and waits (up to 2 s) for its
 * ack: 0 or a positive errno. The ack is queued while the kernel handles
 * our sendto(), before any packet or record of a freshly bound queue or
 * group, so it is the first thing read. */
int nl_config_and_ack(nl_reader *r, struct nlmsghdr *nlh);
/* Ends open() with the config result: throws (freeing the handle) or starts
 * polling and returns the JS handle. */
napi_value nl_reader_start(nl_reader *r, int err);
/* The handle behind v if it is one of binding b's, else NULL. */
nl_reader *nl_reader_get(napi_env env, napi_value v, const nl_binding *b);
/* close(handle), ref(handle, bool), liveness(handle); the property's data
 * is the binding. */
napi_value nl_reader_close_js(napi_env env, napi_callback_info info);
napi_value nl_reader_ref_js(napi_env env, napi_callback_info info);
napi_value nl_reader_liveness_js(napi_env env, napi_callback_info info);
#endif
