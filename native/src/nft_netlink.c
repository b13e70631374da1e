/*
 * Reads the named counters of one nf_tables table over netlink
 * (NFT_MSG_GETOBJ, a dump filtered by table and by type counter).
 *
 * Why not `nft list counters table ...`: nft 1.0.6 fills its cache with
 * every element of every set of the table before it prints anything, so
 * with 1,000 services (a 256k-element fallback map) one listing of three
 * counters took 5-7 s of nft's CPU (measured in a scratch namespace; the
 * daemon's start lists the ip and the ip6 table). The kernel answers this
 * dump from the table's object list alone: no set is walked.
 *
 * Also the ruleset's generation (NFT_MSG_GETGEN): a number the kernel
 * raises at every committed nf_tables transaction in the namespace (nft,
 * and iptables-nft's, ip6tables-nft's changes alike). The periodic rule
 * check (src/front/rules-health.ts) reads it first and skips its read-back
 * when nothing was committed since the last one found the rules intact.
 *
 * And the counters of a set's elements (NFT_MSG_GETSETELEM): syn_seen's
 * per-service SYN counts, which the SYN-cookie switch reads every second
 * (src/front/synproxy-auto.ts): a dump, where `nft list set` was a child
 * process forked from the daemon every second.
 *
 * And what one table is (NFT_MSG_GETTABLE, GETCHAIN): its comment, where
 * the daemon writes a fingerprint of the structure it rendered, and its
 * chains' names. The start reads it to update an unchanged table's
 * elements instead of replacing the table (src/front/nft.ts keptScript);
 * `nft list` would fetch every set element first (4 s beside a
 * 256k-element map, measured).
 *
 * Each reader has two forms. Synchronous (the daemon's start, tools): one
 * short exchange on the calling thread. Asynchronous (the running daemon's
 * periodic reads, nft*Async -> Promise): the exchange runs on libuv's
 * threadpool and the answer is built on the JS thread. Why: the kernel
 * serves these requests only after a running nf_tables transaction
 * commits; measured in a scratch namespace, a GETGEN or a counter dump
 * waited ~405 ms behind an `nft -f` of 256k map elements (the fallback
 * map's fill at 1,000 VIPs, or anyone's large firewall reload), and on the
 * event loop that is a 405 ms stall of SYN decisions. Either way the
 * exchange fills C structures only (run_job), and the JS answer is built
 * from them afterwards (job_value). The socket lives for the call only.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>
#include "napi_util.h"

#define MAX_COUNTERS 64
/* The receive buffer: the kernel sizes a dump's datagrams to what the
 * reader's recvmsg asked for (up to 32 KiB), never past it, so a datagram
 * is never cut here. */
#define NL_BUF 32768

typedef struct {
  char name[NFT_OBJ_MAXNAMELEN];
  uint64_t packets, bytes;
} counter_value;

typedef struct {
  counter_value v[MAX_COUNTERS];
  int n;
  int overflow; /* more counters than MAX_COUNTERS: refused, not truncated */
} counter_list;

static int obj_attr(const struct nlattr *a, void *data) {
  const struct nlattr **tb = data;
  int t = mnl_attr_get_type(a);
  if (mnl_attr_type_valid(a, NFTA_OBJ_MAX) < 0) return MNL_CB_OK;
  if ((t == NFTA_OBJ_NAME || t == NFTA_OBJ_TABLE) && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) < 0) return MNL_CB_OK;
  if (t == NFTA_OBJ_TYPE && mnl_attr_validate(a, MNL_TYPE_U32) < 0) return MNL_CB_OK;
  if (t == NFTA_OBJ_DATA && mnl_attr_validate(a, MNL_TYPE_NESTED) < 0) return MNL_CB_OK;
  tb[t] = a;
  return MNL_CB_OK;
}

static int counter_attr(const struct nlattr *a, void *data) {
  const struct nlattr **tb = data;
  int t = mnl_attr_get_type(a);
  if (mnl_attr_type_valid(a, NFTA_COUNTER_MAX) < 0) return MNL_CB_OK;
  if ((t == NFTA_COUNTER_BYTES || t == NFTA_COUNTER_PACKETS) && mnl_attr_validate(a, MNL_TYPE_U64) < 0) return MNL_CB_OK;
  tb[t] = a;
  return MNL_CB_OK;
}

/* One NFT_MSG_NEWOBJ of the dump: a counter's name and values (others skipped). */
static int on_obj(const struct nlmsghdr *nlh, void *data) {
  counter_list *out = data;
  const struct nlattr *tb[NFTA_OBJ_MAX + 1] = { 0 };
  const struct nlattr *cb[NFTA_COUNTER_MAX + 1] = { 0 };
  if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), obj_attr, tb) < 0) return MNL_CB_ERROR;
  if (tb[NFTA_OBJ_NAME] == NULL || tb[NFTA_OBJ_TYPE] == NULL || tb[NFTA_OBJ_DATA] == NULL) return MNL_CB_OK;
  if (ntohl(mnl_attr_get_u32(tb[NFTA_OBJ_TYPE])) != NFT_OBJECT_COUNTER) return MNL_CB_OK;
  if (mnl_attr_parse_nested(tb[NFTA_OBJ_DATA], counter_attr, cb) < 0) return MNL_CB_ERROR;
  if (out->n == MAX_COUNTERS) {
    out->overflow = 1;
    return MNL_CB_OK;
  }
  counter_value *v = &out->v[out->n++];
  snprintf(v->name, sizeof v->name, "%s", mnl_attr_get_str(tb[NFTA_OBJ_NAME]));
  v->packets = cb[NFTA_COUNTER_PACKETS] == NULL ? 0 : be64toh(mnl_attr_get_u64(cb[NFTA_COUNTER_PACKETS]));
  v->bytes = cb[NFTA_COUNTER_BYTES] == NULL ? 0 : be64toh(mnl_attr_get_u64(cb[NFTA_COUNTER_BYTES]));
  return MNL_CB_OK;
}

/* A request header of nf_tables message `type` for `family`. */
static struct nlmsghdr *put_request(char *buf, uint16_t type, uint16_t flags, uint8_t family, uint32_t seq) {
  struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | type;
  nlh->nlmsg_flags = NLM_F_REQUEST | flags;
  nlh->nlmsg_seq = seq;
  struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof *g);
  g->nfgen_family = family;
  g->version = NFNETLINK_V0;
  g->res_id = 0;
  return nlh;
}

/* Sends the request in buf and runs cb over the answers until NLMSG_DONE
 * (a dump) or the one answer (NLM_F_ACK-less GET): 0, or an errno with
 * *syscall set. */
static int exchange(struct nlmsghdr *nlh, char *buf, size_t size, mnl_cb_t cb, void *data, const char **syscall) {
  struct mnl_socket *nl = mnl_socket_open(NETLINK_NETFILTER);
  if (nl == NULL) {
    *syscall = "socket";
    return errno;
  }
  int err = 0;
  int dump = (nlh->nlmsg_flags & NLM_F_DUMP) != 0;
  uint32_t seq = nlh->nlmsg_seq;
  if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
    err = errno;
    *syscall = "bind";
    goto done;
  }
  if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
    err = errno;
    *syscall = "sendto";
    goto done;
  }
  unsigned int portid = mnl_socket_get_portid(nl);
  for (;;) {
    ssize_t n = mnl_socket_recvfrom(nl, buf, size);
    if (n < 0) {
      err = errno;
      *syscall = "recvfrom";
      break;
    }
    int r = mnl_cb_run(buf, (size_t)n, seq, portid, cb, data);
    if (r == MNL_CB_STOP || (r == MNL_CB_OK && !dump)) break; /* NLMSG_DONE, or a GET's one answer */
    if (r < 0) {
      err = errno != 0 ? errno : EPROTO;
      *syscall = "netlink";
      break;
    }
  }
done:
  mnl_socket_close(nl);
  return err;
}

/* 0, or an errno with *syscall set. */
static int dump_counters(uint8_t family, const char *table, counter_list *out, const char **syscall) {
  char buf[NL_BUF];
  struct nlmsghdr *nlh = put_request(buf, NFT_MSG_GETOBJ, NLM_F_DUMP, family, (uint32_t)time(NULL));
  /* The kernel filters the dump by both (nf_tables_dump_obj). */
  mnl_attr_put_strz(nlh, NFTA_OBJ_TABLE, table);
  mnl_attr_put_u32(nlh, NFTA_OBJ_TYPE, htonl(NFT_OBJECT_COUNTER));
  return exchange(nlh, buf, sizeof buf, on_obj, out, syscall);
}

static int gen_attr(const struct nlattr *a, void *data) {
  const struct nlattr **tb = data;
  int t = mnl_attr_get_type(a);
  if (mnl_attr_type_valid(a, NFTA_GEN_MAX) < 0) return MNL_CB_OK;
  if (t == NFTA_GEN_ID && mnl_attr_validate(a, MNL_TYPE_U32) < 0) return MNL_CB_OK;
  tb[t] = a;
  return MNL_CB_OK;
}

static int on_gen(const struct nlmsghdr *nlh, void *data) {
  const struct nlattr *tb[NFTA_GEN_MAX + 1] = { 0 };
  if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), gen_attr, tb) < 0) return MNL_CB_ERROR;
  if (tb[NFTA_GEN_ID] == NULL) return MNL_CB_ERROR;
  *(int64_t *)data = (int64_t)ntohl(mnl_attr_get_u32(tb[NFTA_GEN_ID]));
  return MNL_CB_OK;
}

/* [what, packets, bytes]: one row of either reader's answer. */
static napi_value counter_row(napi_env env, napi_value what, uint64_t packets, uint64_t bytes) {
  napi_value row, p, b;
  napi_create_array_with_length(env, 3, &row);
  napi_create_double(env, (double)packets, &p);
  napi_create_double(env, (double)bytes, &b);
  napi_set_element(env, row, 0, what);
  napi_set_element(env, row, 1, p);
  napi_set_element(env, row, 2, b);
  return row;
}

/* ---- a set's elements with their counters (NFT_MSG_GETSETELEM) ---- */

/* The elements read, in C (no JS value is made while reading: see the top). */
typedef struct {
  uint8_t *keys;     /* n keys of key_len bytes each */
  uint64_t *counts;  /* n pairs: packets, bytes */
  uint32_t n, cap;
  uint32_t key_len; /* the caller's key length: an element of another length is refused */
  int bad;          /* elements whose key did not have key_len bytes */
  int oom;          /* an allocation failed: refused, not truncated */
} elem_dump;

static void elem_dump_free(elem_dump *d) {
  free(d->keys);
  free(d->counts);
  d->keys = NULL;
  d->counts = NULL;
  d->n = d->cap = 0;
}

static int elem_attr(const struct nlattr *a, void *data) {
  const struct nlattr **tb = data;
  int t = mnl_attr_get_type(a);
  if (mnl_attr_type_valid(a, NFTA_SET_ELEM_MAX) < 0) return MNL_CB_OK;
  if ((t == NFTA_SET_ELEM_KEY || t == NFTA_SET_ELEM_EXPR || t == NFTA_SET_ELEM_EXPRESSIONS) && mnl_attr_validate(a, MNL_TYPE_NESTED) < 0) return MNL_CB_OK;
  tb[t] = a;
  return MNL_CB_OK;
}

static int data_attr(const struct nlattr *a, void *data) {
  const struct nlattr **tb = data;
  int t = mnl_attr_get_type(a);
  if (mnl_attr_type_valid(a, NFTA_DATA_MAX) < 0) return MNL_CB_OK;
  tb[t] = a;
  return MNL_CB_OK;
}

static int expr_attr(const struct nlattr *a, void *data) {
  const struct nlattr **tb = data;
  int t = mnl_attr_get_type(a);
  if (mnl_attr_type_valid(a, NFTA_EXPR_MAX) < 0) return MNL_CB_OK;
  if (t == NFTA_EXPR_NAME && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) < 0) return MNL_CB_OK;
  if (t == NFTA_EXPR_DATA && mnl_attr_validate(a, MNL_TYPE_NESTED) < 0) return MNL_CB_OK;
  tb[t] = a;
  return MNL_CB_OK;
}

/* A counter expression's packets and bytes; 0 if `e` is another expression. */
static int counter_of_expr(const struct nlattr *e, uint64_t *packets, uint64_t *bytes) {
  const struct nlattr *tb[NFTA_EXPR_MAX + 1] = { 0 };
  const struct nlattr *cb[NFTA_COUNTER_MAX + 1] = { 0 };
  if (mnl_attr_parse_nested(e, expr_attr, tb) < 0 || tb[NFTA_EXPR_NAME] == NULL || tb[NFTA_EXPR_DATA] == NULL) return 0;
  if (strcmp(mnl_attr_get_str(tb[NFTA_EXPR_NAME]), "counter") != 0) return 0;
  if (mnl_attr_parse_nested(tb[NFTA_EXPR_DATA], counter_attr, cb) < 0) return 0;
  *packets = cb[NFTA_COUNTER_PACKETS] == NULL ? 0 : be64toh(mnl_attr_get_u64(cb[NFTA_COUNTER_PACKETS]));
  *bytes = cb[NFTA_COUNTER_BYTES] == NULL ? 0 : be64toh(mnl_attr_get_u64(cb[NFTA_COUNTER_BYTES]));
  return 1;
}

static void push_elem(elem_dump *d, const struct nlattr *elem) {
  const struct nlattr *tb[NFTA_SET_ELEM_MAX + 1] = { 0 };
  const struct nlattr *kb[NFTA_DATA_MAX + 1] = { 0 };
  if (mnl_attr_parse_nested(elem, elem_attr, tb) < 0 || tb[NFTA_SET_ELEM_KEY] == NULL) return;
  if (mnl_attr_parse_nested(tb[NFTA_SET_ELEM_KEY], data_attr, kb) < 0 || kb[NFTA_DATA_VALUE] == NULL) return;
  if (mnl_attr_get_payload_len(kb[NFTA_DATA_VALUE]) != d->key_len) {
    d->bad++;
    return;
  }
  uint64_t packets = 0, bytes = 0;
  int found = 0;
  /* One expression is dumped as NFTA_SET_ELEM_EXPR, several as a list. */
  if (tb[NFTA_SET_ELEM_EXPR] != NULL) found = counter_of_expr(tb[NFTA_SET_ELEM_EXPR], &packets, &bytes);
  else if (tb[NFTA_SET_ELEM_EXPRESSIONS] != NULL) {
    const struct nlattr *e;
    mnl_attr_for_each_nested(e, tb[NFTA_SET_ELEM_EXPRESSIONS]) {
      if (!found) found = counter_of_expr(e, &packets, &bytes);
    }
  }
  if (!found) return; /* no counter on this element: nothing to report */
  if (d->n == d->cap) {
    uint32_t cap = d->cap == 0 ? 64 : d->cap * 2;
    uint8_t *keys = realloc(d->keys, (size_t)cap * d->key_len);
    if (keys != NULL) d->keys = keys;
    uint64_t *counts = keys == NULL ? NULL : realloc(d->counts, (size_t)cap * 2 * sizeof *counts);
    if (counts != NULL) d->counts = counts;
    if (keys == NULL || counts == NULL) {
      d->oom = 1;
      return;
    }
    d->cap = cap;
  }
  memcpy(d->keys + (size_t)d->n * d->key_len, mnl_attr_get_payload(kb[NFTA_DATA_VALUE]), d->key_len);
  d->counts[2 * d->n] = packets;
  d->counts[2 * d->n + 1] = bytes;
  d->n++;
}

static int on_elems(const struct nlmsghdr *nlh, void *data) {
  elem_dump *d = data;
  const struct nlattr *a;
  mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
    if (mnl_attr_get_type(a) != NFTA_SET_ELEM_LIST_ELEMENTS) continue;
    const struct nlattr *elem;
    mnl_attr_for_each_nested(elem, a) push_elem(d, elem);
  }
  return MNL_CB_OK;
}


/* ---- a table's layout: its comment and its chains (NFT_MSG_GETTABLE, GETCHAIN) ---- */

typedef enum { ITEM_TABLE, ITEM_CHAIN } item_kind;

typedef struct {
  item_kind kind;
  char name[NFT_NAME_MAXLEN]; /* a chain's name; the table's comment ("" if none) */
  int base;                   /* a chain with a hook */
} layout_item;

typedef struct {
  const char *table; /* only this table's chains (the chain dump is per family) */
  layout_item *items;
  uint32_t n, cap;
  int oom;
} layout;

static layout_item *layout_push(layout *l) {
  if (l->n == l->cap) {
    uint32_t cap = l->cap == 0 ? 64 : l->cap * 2;
    layout_item *items = realloc(l->items, (size_t)cap * sizeof *items);
    if (items == NULL) {
      l->oom = 1;
      return NULL;
    }
    l->items = items;
    l->cap = cap;
  }
  layout_item *it = &l->items[l->n++];
  memset(it, 0, sizeof *it);
  return it;
}

static int table_attr(const struct nlattr *a, void *data) {
  const struct nlattr **tb = data;
  int t = mnl_attr_get_type(a);
  if (mnl_attr_type_valid(a, NFTA_TABLE_MAX) < 0) return MNL_CB_OK;
  if (t == NFTA_TABLE_NAME && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) < 0) return MNL_CB_OK;
  tb[t] = a;
  return MNL_CB_OK;
}

/* The table's own answer: its comment, from the user data nft writes
 * (type-length-value records; type 0 is the comment, NUL-terminated). */
static int on_table(const struct nlmsghdr *nlh, void *data) {
  layout *l = data;
  const struct nlattr *tb[NFTA_TABLE_MAX + 1] = { 0 };
  if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), table_attr, tb) < 0) return MNL_CB_ERROR;
  layout_item *it = layout_push(l);
  if (it == NULL) return MNL_CB_OK;
  it->kind = ITEM_TABLE;
  if (tb[NFTA_TABLE_USERDATA] == NULL) return MNL_CB_OK;
  const uint8_t *u = mnl_attr_get_payload(tb[NFTA_TABLE_USERDATA]);
  size_t len = mnl_attr_get_payload_len(tb[NFTA_TABLE_USERDATA]);
  for (size_t off = 0; off + 2 <= len;) {
    uint8_t type = u[off], vlen = u[off + 1];
    if (off + 2 + vlen > len) break; /* a record cut short: no comment read */
    if (type == 0 && vlen > 0 && u[off + 2 + vlen - 1] == '\0') { /* vlen <= 255 < sizeof it->name */
      memcpy(it->name, u + off + 2, vlen);
      break;
    }
    off += 2 + (size_t)vlen;
  }
  return MNL_CB_OK;
}

static int chain_attr(const struct nlattr *a, void *data) {
  const struct nlattr **tb = data;
  int t = mnl_attr_get_type(a);
  if (mnl_attr_type_valid(a, NFTA_CHAIN_MAX) < 0) return MNL_CB_OK;
  if ((t == NFTA_CHAIN_TABLE || t == NFTA_CHAIN_NAME) && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) < 0) return MNL_CB_OK;
  if (t == NFTA_CHAIN_HOOK && mnl_attr_validate(a, MNL_TYPE_NESTED) < 0) return MNL_CB_OK;
  tb[t] = a;
  return MNL_CB_OK;
}

static int on_chain(const struct nlmsghdr *nlh, void *data) {
  layout *l = data;
  const struct nlattr *tb[NFTA_CHAIN_MAX + 1] = { 0 };
  if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), chain_attr, tb) < 0) return MNL_CB_ERROR;
  if (tb[NFTA_CHAIN_TABLE] == NULL || tb[NFTA_CHAIN_NAME] == NULL || strcmp(mnl_attr_get_str(tb[NFTA_CHAIN_TABLE]), l->table) != 0) return MNL_CB_OK;
  layout_item *it = layout_push(l);
  if (it == NULL) return MNL_CB_OK;
  it->kind = ITEM_CHAIN;
  snprintf(it->name, sizeof it->name, "%s", mnl_attr_get_str(tb[NFTA_CHAIN_NAME]));
  it->base = tb[NFTA_CHAIN_HOOK] != NULL;
  return MNL_CB_OK;
}

/* The table, then its chains: 0, or an errno with *syscall set. An absent table reads as no item. */
static int dump_layout(uint8_t family, layout *l, const char **syscall) {
  char buf[NL_BUF];
  struct nlmsghdr *nlh = put_request(buf, NFT_MSG_GETTABLE, 0, family, (uint32_t)time(NULL));
  mnl_attr_put_strz(nlh, NFTA_TABLE_NAME, l->table);
  int err = exchange(nlh, buf, sizeof buf, on_table, l, syscall);
  if (err == ENOENT) return 0;
  if (err != 0) return err;
  nlh = put_request(buf, NFT_MSG_GETCHAIN, NLM_F_DUMP, family, (uint32_t)time(NULL));
  return exchange(nlh, buf, sizeof buf, on_chain, l, syscall);
}

/* ---- one read, either form ---- */

typedef enum { JOB_GENERATION, JOB_COUNTERS, JOB_SET, JOB_LAYOUT } job_kind;

typedef struct {
  job_kind kind;
  uint8_t family;
  char table[NFT_TABLE_MAXNAMELEN];
  char set[NFT_SET_MAXNAMELEN];
  /* Results (run_job). */
  int err;
  const char *syscall;
  int64_t gen;
  counter_list counters;
  elem_dump elems;
  layout layout;
  /* The asynchronous form's handles. */
  napi_async_work work;
  napi_deferred deferred;
} nl_job;

/* The exchange: C only, no Node-API call (it runs on the threadpool in the asynchronous form). */
static void run_job(nl_job *j) {
  char buf[NL_BUF];
  j->err = 0;
  j->syscall = NULL;
  if (j->kind == JOB_GENERATION) {
    j->gen = -1;
    struct nlmsghdr *nlh = put_request(buf, NFT_MSG_GETGEN, 0, AF_UNSPEC, (uint32_t)time(NULL));
    j->err = exchange(nlh, buf, sizeof buf, on_gen, &j->gen, &j->syscall);
    if (j->err == 0 && j->gen < 0) j->err = EPROTO, j->syscall = "netlink";
  } else if (j->kind == JOB_COUNTERS) {
    j->counters.n = 0;
    j->counters.overflow = 0;
    j->err = dump_counters(j->family, j->table, &j->counters, &j->syscall);
    if (j->err == ENOENT) j->err = 0, j->counters.n = 0; /* no such table: nothing counted */
  } else if (j->kind == JOB_LAYOUT) {
    j->layout.table = j->table;
    j->err = dump_layout(j->family, &j->layout, &j->syscall);
  } else {
    struct nlmsghdr *nlh = put_request(buf, NFT_MSG_GETSETELEM, NLM_F_DUMP, j->family, (uint32_t)time(NULL));
    mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, j->table);
    mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, j->set);
    j->err = exchange(nlh, buf, sizeof buf, on_elems, &j->elems, &j->syscall);
  }
}

/* The answer as JS: *ok 1 and the value, or *ok 0 and the Error to throw or reject with. */
static napi_value job_value(napi_env env, nl_job *j, int *ok) {
  char text[NFT_TABLE_MAXNAMELEN + NFT_SET_MAXNAMELEN + 64];
  *ok = 0;
  if (j->kind == JOB_GENERATION) {
    if (j->err != 0) return coded_error_errno(env, "ERR_SLUICE_NFT_GENERATION", "reading the nf_tables ruleset generation over netlink", j->err, j->syscall);
    napi_value out;
    napi_create_double(env, (double)j->gen, &out);
    *ok = 1;
    return out;
  }
  if (j->kind == JOB_COUNTERS) {
    if (j->err != 0) {
      snprintf(text, sizeof text, "reading the counters of nft table %s over netlink", j->table);
      return coded_error_errno(env, "ERR_SLUICE_NFT_COUNTERS", text, j->err, j->syscall);
    }
    if (j->counters.overflow) return coded_error(env, "ERR_SLUICE_NFT_COUNTERS", "more named counters in the table than the reader holds (64)", 0, NULL);
    napi_value arr;
    napi_create_array_with_length(env, (size_t)j->counters.n, &arr);
    for (int i = 0; i < j->counters.n; i++) {
      napi_value name;
      napi_create_string_utf8(env, j->counters.v[i].name, NAPI_AUTO_LENGTH, &name);
      napi_set_element(env, arr, (uint32_t)i, counter_row(env, name, j->counters.v[i].packets, j->counters.v[i].bytes));
    }
    *ok = 1;
    return arr;
  }
  if (j->kind == JOB_LAYOUT) {
    if (j->err != 0) {
      snprintf(text, sizeof text, "reading the layout of nft table %s over netlink", j->table);
      return coded_error_errno(env, "ERR_SLUICE_NFT_LAYOUT", text, j->err, j->syscall);
    }
    if (j->layout.oom) return coded_error(env, "ERR_SLUICE_NFT_LAYOUT", "out of memory reading the table's layout", 0, NULL);
    napi_value arr;
    napi_create_array_with_length(env, j->layout.n, &arr);
    for (uint32_t i = 0; i < j->layout.n; i++) {
      const layout_item *it = &j->layout.items[i];
      napi_value row, v;
      napi_create_array(env, &row);
      napi_create_string_utf8(env, it->kind == ITEM_TABLE ? "table" : "chain", NAPI_AUTO_LENGTH, &v);
      napi_set_element(env, row, 0, v);
      napi_create_string_utf8(env, it->name, NAPI_AUTO_LENGTH, &v);
      napi_set_element(env, row, 1, v);
      if (it->kind == ITEM_CHAIN) {
        napi_get_boolean(env, it->base != 0, &v);
        napi_set_element(env, row, 2, v);
      }
      napi_set_element(env, arr, i, row);
    }
    *ok = 1;
    return arr;
  }
  if (j->err != 0) {
    snprintf(text, sizeof text, "reading set %s of nft table %s over netlink", j->set, j->table);
    return coded_error_errno(env, "ERR_SLUICE_NFT_SET", text, j->err, j->syscall);
  }
  if (j->elems.bad > 0) return coded_error(env, "ERR_SLUICE_NFT_SET", "an element's key is not of the length the caller expects (the set's type changed?)", 0, NULL);
  if (j->elems.oom) return coded_error(env, "ERR_SLUICE_NFT_SET", "out of memory reading the set's elements", 0, NULL);
  napi_value arr;
  napi_create_array_with_length(env, j->elems.n, &arr);
  for (uint32_t i = 0; i < j->elems.n; i++) {
    napi_value key;
    void *kdata;
    napi_create_buffer_copy(env, j->elems.key_len, j->elems.keys + (size_t)i * j->elems.key_len, &kdata, &key);
    napi_set_element(env, arr, i, counter_row(env, key, j->elems.counts[2 * i], j->elems.counts[2 * i + 1]));
  }
  *ok = 1;
  return arr;
}

static void job_free(nl_job *j) {
  elem_dump_free(&j->elems);
  free(j->layout.items);
  free(j);
}

/* The arguments of a reader into a new job, or NULL with an ERR_SLUICE_NATIVE_ARG thrown. */
static nl_job *job_of(napi_env env, napi_callback_info info, job_kind kind) {
  size_t argc = 4;
  napi_value a[4];
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  nl_job *j = calloc(1, sizeof *j);
  if (j == NULL) {
    throw_coded(env, "ERR_SLUICE_NATIVE_ARG", "out of memory", 0, NULL);
    return NULL;
  }
  j->kind = kind;
  if (kind == JOB_GENERATION) return j;
  uint32_t family = 0, key_len = 0;
  size_t tlen = 0, slen = 0;
  int good = argc == (kind == JOB_SET ? 4u : 2u) && get_u32(env, a[0], &family) && (family == NFPROTO_IPV4 || family == NFPROTO_IPV6) &&
             napi_get_value_string_utf8(env, a[1], j->table, sizeof j->table, &tlen) == napi_ok && tlen > 0 && tlen < sizeof j->table - 1;
  if (good && kind == JOB_SET)
    good = napi_get_value_string_utf8(env, a[2], j->set, sizeof j->set, &slen) == napi_ok && slen > 0 && slen < sizeof j->set - 1 && get_u32(env, a[3], &key_len) && key_len > 0 && key_len <= 64;
  if (!good) {
    free(j);
    throw_coded(env, "ERR_SLUICE_NATIVE_ARG",
                kind == JOB_SET ? "nftSetCounters(family 2 (ip) or 10 (ip6), table, set, keyLength 1..64)" : "nftCounters/nftLayout(family 2 (ip) or 10 (ip6), table name of 1..255 bytes)", 0, NULL);
    return NULL;
  }
  j->family = (uint8_t)family;
  j->elems.key_len = key_len;
  return j;
}

static napi_value run_sync(napi_env env, napi_callback_info info, job_kind kind) {
  nl_job *j = job_of(env, info, kind);
  if (j == NULL) return NULL;
  run_job(j);
  int ok;
  napi_value v = job_value(env, j, &ok);
  job_free(j);
  if (!ok) {
    napi_throw(env, v);
    return NULL;
  }
  return v;
}

static void job_execute(napi_env env, void *data) {
  (void)env;
  run_job(data);
}

static void job_complete(napi_env env, napi_status status, void *data) {
  nl_job *j = data;
  int ok = 0;
  napi_value v = status == napi_ok ? job_value(env, j, &ok) : coded_error(env, "ERR_SLUICE_NATIVE_ARG", "the read was cancelled", 0, NULL);
  if (ok) napi_resolve_deferred(env, j->deferred, v);
  else napi_reject_deferred(env, j->deferred, v);
  napi_delete_async_work(env, j->work);
  job_free(j);
}

static napi_value run_async(napi_env env, napi_callback_info info, job_kind kind, const char *name) {
  nl_job *j = job_of(env, info, kind);
  if (j == NULL) return NULL;
  int started;
  napi_value promise = queue_promise_work(env, name, job_execute, job_complete, j, &j->deferred, &j->work, "ERR_SLUICE_NATIVE_ARG", "the netlink read", &started);
  if (!started) free(j);
  return promise;
}

/* nftGeneration() -> the namespace's nf_tables ruleset generation (a uint32). */
static napi_value nft_generation(napi_env env, napi_callback_info info) {
  return run_sync(env, info, JOB_GENERATION);
}

/* nftCounters(family 2|10, table) -> [[name, packets, bytes], ...] (empty when the table is absent) */
static napi_value nft_counters(napi_env env, napi_callback_info info) {
  return run_sync(env, info, JOB_COUNTERS);
}

/* nftSetCounters(family 2|10, table, set, keyLength) -> [[key Buffer, packets, bytes], ...] */
static napi_value nft_set_counters(napi_env env, napi_callback_info info) {
  return run_sync(env, info, JOB_SET);
}

/* nftLayout(family 2|10, table) -> [['table', comment], ['chain', name, base], ...] (empty when the table is absent) */
static napi_value nft_layout(napi_env env, napi_callback_info info) {
  return run_sync(env, info, JOB_LAYOUT);
}

/* The same three on the threadpool: Promises of the same answers (rejected with the same Errors). */
static napi_value nft_generation_async(napi_env env, napi_callback_info info) {
  return run_async(env, info, JOB_GENERATION, "sluice.nftGeneration");
}

static napi_value nft_counters_async(napi_env env, napi_callback_info info) {
  return run_async(env, info, JOB_COUNTERS, "sluice.nftCounters");
}

static napi_value nft_set_counters_async(napi_env env, napi_callback_info info) {
  return run_async(env, info, JOB_SET, "sluice.nftSetCounters");
}

void nft_netlink_register(napi_env env, napi_value exports) {
  napi_property_descriptor p[] = {
    { "nftCounters", NULL, nft_counters, NULL, NULL, NULL, napi_default, NULL },
    { "nftGeneration", NULL, nft_generation, NULL, NULL, NULL, napi_default, NULL },
    { "nftSetCounters", NULL, nft_set_counters, NULL, NULL, NULL, napi_default, NULL },
    { "nftLayout", NULL, nft_layout, NULL, NULL, NULL, napi_default, NULL },
    { "nftGenerationAsync", NULL, nft_generation_async, NULL, NULL, NULL, napi_default, NULL },
    { "nftCountersAsync", NULL, nft_counters_async, NULL, NULL, NULL, napi_default, NULL },
    { "nftSetCountersAsync", NULL, nft_set_counters_async, NULL, NULL, NULL, napi_default, NULL },
  };
  napi_define_properties(env, exports, sizeof p / sizeof p[0], p);
}
