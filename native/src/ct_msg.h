/*
 * One ctnetlink conntrack message (a destroy event, or an entry of a table
 * dump: both carry the same attributes) decoded into words, shared by
 * ctevents.c, ct_dump.c and ct_expire.c. Layout shared with src/conntrack/layout.ts (keep
 * in sync). Addresses take four words each (IPv6: the address's four 32-bit
 * groups in network order, each as a host number; IPv4: word 0, the rest 0).
 */
#ifndef SLUICE_CT_MSG_H
#define SLUICE_CT_MSG_H
#include <stdint.h>
#include <libmnl/libmnl.h>

enum { E_FAMILY = 0, E_PROTO, E_SRC, E_DST = E_SRC + 4, E_SPORT = E_DST + 4, E_DPORT, E_MARK, E_FLAGS, E_TCP_STATE,
       E_ID, EV_META_WORDS,
       /* A dump's row: an event's words, then the reply tuple's source (the
        * server, as DNAT leaves it) and source port. */
       E_REPLY_SRC = EV_META_WORDS, E_REPLY_SPORT = E_REPLY_SRC + 4, CT_ROW_WORDS };
/* Bits of E_FLAGS: which optional attributes the message carried. */
enum { EF_MARK = 1, EF_PORTS = 2, EF_TCP_STATE = 4, EF_ID = 8, EF_REPLY = 16 };

/* Decodes a conntrack message (nfgenmsg and attributes) into m[0..EV_META_WORDS),
 * and with `reply` also m[E_REPLY_SRC..CT_ROW_WORDS). 0 when the original
 * tuple's addresses are missing (a bad message). Allocates nothing. */
int ct_msg_decode(const struct nlmsghdr *nlh, uint32_t *m, int reply);

/* What a message of a dump is, besides an entry (ct_dump.c, ct_expire.c). */
enum { CT_CTL_DATA, /* none of the below: an entry to decode */
       CT_CTL_SKIP, /* NLMSG_NOOP, or an acknowledgement (an NLMSG_ERROR of 0) */
       CT_CTL_DONE, /* NLMSG_DONE with no failure: the dump is complete */
       CT_CTL_FAIL  /* *err set: NLMSG_DONE's negative status, an NLMSG_ERROR's errno, or EPROTO for a cut one */ };
/* Classifies a message whose sequence and port the caller has checked. */
int ct_msg_control(const struct nlmsghdr *nlh, int *err);
#endif
